"""The 3-class lexical XGBoost, its ONNX export and the onnxruntime P(Long) ranker."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost", reason="xgboost (the 'length' extra: xgboost-cpu) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the 'length' extra) is not installed")
pytest.importorskip("onnxmltools", reason="onnxmltools (the 'length' extra) is not installed")

from predictors.length.lexical import LEXICAL_FEATURE_NAMES, extract_many  # noqa: E402
from predictors.length.lexical_model import (  # noqa: E402
    HYPERPARAMS,
    length_class,
    load_lexical,
    ranking_accuracy,
    save_lexical,
    sidecar_path,
    train_lexical,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

VERBS = ["What is", "Write", "Explain", "Summarize", "How do I", "List", "Implement", "Compare",
         "Describe", "Generate", "Why is", "Define", "Translate"]
TOPICS = ["the moon", "a python function for sorting", "markdown tables", "the French revolution",
          "a JSON schema", "recursion that terminates", "tea", "a detailed essay", "csv files"]


def synthetic(n=600, seed=0):
    """Prompts whose length label depends on their features (plus noise), all three classes."""
    rng = np.random.default_rng(seed)
    prompts, lengths = [], []
    for _ in range(n):
        v, t = VERBS[rng.integers(len(VERBS))], TOPICS[rng.integers(len(TOPICS))]
        pad = " in detail, because it matters" * int(rng.integers(0, 4))
        q = "?" if rng.random() < 0.3 else "."
        p = f"{v} {t}{pad}{q}"
        base = 60 + 150 * (v in ("Write", "Implement", "Generate")) + 300 * pad.count("detail")
        lengths.append(max(1.0, base * rng.lognormal(0, 0.5)))
        prompts.append(p)
    lengths = np.asarray(lengths)
    assert set(length_class(lengths)) == {0, 1, 2}
    return prompts, lengths


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    prompts, lengths = synthetic()
    model = train_lexical(prompts, lengths, n_jobs=1)  # the seed's 300 trees, depth 6, lr 0.1
    path = save_lexical(model, tmp_path_factory.mktemp("lex") / "lexical.onnx", train_prompts=prompts,
                        provenance={"data": "synthetic"}, metrics={"note": "test"})
    return model, path, prompts, lengths


def test_hyperparameters_are_the_seeds(trained):
    model = trained[0]
    p = model.get_params()
    assert (p["n_estimators"], p["max_depth"], p["learning_rate"], p["random_state"]) == (300, 6, 0.1, 42)
    assert HYPERPARAMS == {"n_estimators": 300, "max_depth": 6, "learning_rate": 0.1, "random_state": 42}


def test_onnx_p_long_equals_xgboost(trained):
    model, path, prompts, _ = trained
    ranker = load_lexical(path)
    fresh = [f"Write {t} and compare it with the moon?" for t in TOPICS] + prompts[:50]
    want = model.predict_proba(extract_many(fresh))[:, 2]
    got = ranker.score(fresh)
    assert got.dtype == np.float64 and got.shape == (len(fresh),)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose([ranker.score_one(p) for p in fresh], want, rtol=0, atol=1e-6)


def test_sidecar_contents(trained):
    _, path, prompts, _ = trained
    side = json.loads(sidecar_path(path).read_text())
    assert side["feature_names"] == list(LEXICAL_FEATURE_NAMES)
    assert side["class_edges"] == [200, 800] and side["class_names"] == ["short", "medium", "long"]
    assert side["provenance"]["data"] == "synthetic" and "xgboost" in side["provenance"]["versions"]
    assert side["onnx_vs_xgboost_max_abs_diff"] <= 1e-5
    scores = load_lexical(path).score(prompts)
    assert side["neutral_score"] == pytest.approx(np.median(scores), abs=1e-6)


def copy_artifact(path, dst):
    dst.mkdir()
    out = dst / path.name
    out.write_bytes(path.read_bytes())
    sidecar_path(out).write_text(sidecar_path(path).read_text())
    return out


def test_sidecar_with_other_feature_names_is_refused(trained, tmp_path):
    out = copy_artifact(trained[1], tmp_path / "a")
    side = json.loads(sidecar_path(out).read_text())
    side["feature_names"][5] = "sentence_count"
    sidecar_path(out).write_text(json.dumps(side))
    with pytest.raises(ValueError, match="feature_names differ from LEXICAL_FEATURE_NAMES at column 5") as e:
        load_lexical(out)
    assert "\n" not in str(e.value) and str(out) in str(e.value)
    side["feature_names"] = side["feature_names"][:18]
    side["feature_names"][5] = "clause_count"
    sidecar_path(out).write_text(json.dumps(side))
    with pytest.raises(ValueError, match="at column 18"):
        load_lexical(out)


@pytest.mark.parametrize("field,value,msg", [
    ("class_edges", [100, 800], "class_edges"),
    ("feature_version", 99, "feature_version"),
    ("onnx_sha256", "0" * 64, "sha256"),
    ("format", "something-else", "not a sarathi-ext/lexical-length sidecar"),
    ("neutral_score", 2.0, "neutral_score"),
])
def test_other_sidecar_mismatches_are_refused(trained, tmp_path, field, value, msg):
    out = copy_artifact(trained[1], tmp_path / "b")
    side = json.loads(sidecar_path(out).read_text())
    side[field] = value
    sidecar_path(out).write_text(json.dumps(side))
    with pytest.raises(ValueError, match=msg):
        load_lexical(out)


def test_missing_or_broken_sidecar_is_refused(trained, tmp_path):
    out = copy_artifact(trained[1], tmp_path / "c")
    sidecar_path(out).write_text("{oops")
    with pytest.raises(ValueError, match="is not JSON"):
        load_lexical(out)
    sidecar_path(out).unlink()
    with pytest.raises(ValueError, match="cannot read the sidecar"):
        load_lexical(out)


def test_empty_prompt_gets_neutral_score_and_a_warning(trained, caplog):
    ranker = load_lexical(trained[1])
    with caplog.at_level(logging.WARNING, logger="predictors.length.lexical_model"):
        s = ranker.score(["", "Write a detailed essay on tea.", "   \n", None])
    assert s[0] == s[2] == s[3] == ranker.neutral_score
    assert s[1] == pytest.approx(ranker.score_one("Write a detailed essay on tea."))
    assert any("3 empty prompt" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="predictors.length.lexical_model"):
        assert ranker.score_one("") == ranker.neutral_score
    assert caplog.records and caplog.records[0].levelno == logging.WARNING
    assert ranker.score([]).shape == (0,)
    with pytest.raises(TypeError):
        ranker.score("a single string")


def test_class_edges_and_ranking_accuracy():
    np.testing.assert_array_equal(length_class([1, 199, 199.9, 200, 799, 799.5, 800, 5000]),
                                  [0, 0, 0, 1, 1, 1, 2, 2])
    # shorts score 0.1, 0.5; longs 0.5, 0.9; medium ignored. Pairs: (0.1<0.5) (0.1<0.9)
    # (0.5<0.9) correct, (0.5 vs 0.5) a tie, not correct -> 3/4.
    assert ranking_accuracy(np.array([0.1, 0.5, 0.5, 0.9, 0.0]), np.array([10, 100, 900, 1000, 300])) == 0.75
    assert np.isnan(ranking_accuracy(np.array([0.1]), np.array([10])))


def test_training_needs_all_three_classes():
    with pytest.raises(ValueError, match="no long rows"):
        train_lexical(["a", "b", "c"], np.array([10, 300, 500]), n_estimators=2)


@pytest.mark.skipif(not (DATA / "prompts").is_dir(), reason=f"shared data folder {DATA}/prompts is absent")
def test_real_slice_round_trip(tmp_path):
    from predictors.length import data

    rows = data.load_source("castillo-validate", DATA)[::20] + data.load_source("sharegpt", DATA)[::4]
    train, test = data.split_by_prompt(rows, 0.25, seed=1)
    tp, tl = data.arrays(train)
    model = train_lexical(tp, tl, n_estimators=60, n_jobs=1)
    path = save_lexical(model, tmp_path / "real.onnx", train_prompts=tp)
    qp, _ = data.arrays(test)
    np.testing.assert_allclose(load_lexical(path).score(qp), model.predict_proba(extract_many(qp))[:, 2],
                               rtol=0, atol=1e-6)
