"""Ranker evaluation: Kendall tau_b, seed 002 Eq. 2, the cross-distribution matrix, and the
train-ranker / eval-ranker CLI's one-line usage errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from predictors.length.data import LabelledPrompt  # noqa: E402
from predictors.length.evaluate import (  # noqa: E402
    class_counts, cross_distribution_matrix, format_matrix, kendall_tau_b, short_long_accuracy)
from sarathi_ext.cli import main  # noqa: E402


# -- Kendall tau_b -------------------------------------------------------------------------------

def test_tau_b_no_ties_by_hand():
    # pairs (0,1) C, (0,2) C, (1,2) D: (2 - 1) / 3
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert kendall_tau_b([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall_tau_b([3, 2, 1], [10, 20, 30]) == pytest.approx(-1.0)


def test_tau_b_with_ties_by_hand():
    # pred ties pair (0,1): n0 = 3, n1 = 1, n2 = 0; C = 2, D = 0 -> 2 / sqrt(2 * 3)
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    # ties in both: pred [1,1,2,2], true [1,2,2,3]. Pairs: (0,1) pred-tie, (0,2) C, (0,3) C,
    # (1,2) true-tie, (1,3) C, (2,3) pred-tie. n0 = 6, n1 = 2, n2 = 1: 3 / sqrt(4 * 5)
    assert kendall_tau_b([1, 1, 2, 2], [1, 2, 2, 3]) == pytest.approx(3 / math.sqrt(20))


def test_tau_b_undefined_is_nan():
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall_tau_b([1], [2]))
    with pytest.raises(ValueError):
        kendall_tau_b([1, 2], [1, 2, 3])


# -- seed 002 Eq. 2 ------------------------------------------------------------------------------

def test_eq2_counts_pairs_strictly_by_hand():
    # Short scores {0.4, 0.6}, Long scores {0.5, 0.6}; the medium row (500) is left out.
    # (0.4, 0.5) yes, (0.6, 0.5) no, (0.4, 0.6) yes, (0.6, 0.6) tie: no -> 2 / 4
    scores = [0.4, 0.5, 0.6, 0.6, 0.0]
    lengths = [100, 900, 150, 1000, 500]
    assert short_long_accuracy(scores, lengths) == pytest.approx(0.5)
    # the AUC-style variant credits the tie half: 2.5 / 4
    assert short_long_accuracy(scores, lengths, ties=0.5) == pytest.approx(0.625)


def test_eq2_class_edges():
    # Short is < 200 and Long >= 800: 200 and 799 are Medium, so only (199, 800) is a pair.
    # Were 200 Short, its 0.95 > 0.9 would be a wrong pair; were 799 Long, its 0.0 would be.
    assert short_long_accuracy([0.5, 0.95, 0.0, 0.9], [199, 200, 799, 800]) == 1.0
    assert class_counts([199, 200, 799, 800]) == {"short": 1, "medium": 2, "long": 1}


def test_eq2_undefined_without_both_classes():
    assert math.isnan(short_long_accuracy([0.1, 0.2], [10, 500]))
    assert math.isnan(short_long_accuracy([0.1, 0.2], [900, 500]))


def test_eq2_matches_the_trainers_metric():
    from predictors.length.lexical_model import ranking_accuracy

    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 300) / 4.0  # many ties
    y = rng.integers(1, 2000, 300)
    assert short_long_accuracy(s, y) == pytest.approx(ranking_accuracy(s, y))


# -- cross-distribution matrix -------------------------------------------------------------------

def _rows(src, pairs):
    return [LabelledPrompt(p, float(n), src) for p, n in pairs]


def test_cross_matrix_with_a_fake_trainer():
    def trainer(prompts, lengths):
        if not (np.asarray(lengths) >= 800).any():
            raise ValueError("training lengths have no long rows")
        return lambda ps: np.asarray([len(p) for p in ps], dtype=float)  # score = prompt length

    splits = {
        # good: longer prompt <-> longer answer
        "a": (_rows("a", [("x", 10), ("xxxxxxxx", 900)]), _rows("a", [("y", 50), ("yyyyyyyyy", 1000)])),
        # no Long rows at all, like GPTeacher
        "g": (_rows("g", [("z", 10), ("zz", 300)]), _rows("g", [("z", 10), ("zzz", 300)])),
        # inverted: the short-answer prompt is longer
        "b": (_rows("b", [("q", 900), ("qq", 10)]), _rows("b", [("long prompt", 20), ("p", 1200), ("pp", 30)])),
    }
    m = cross_distribution_matrix(splits, ["a", "g", "b"], trainer)
    assert m["a"]["a"]["ranking_accuracy"] == 1.0
    assert m["a"]["b"]["ranking_accuracy"] == pytest.approx(0.0)  # 'p' (1) below both shorts (11, 2)
    assert m["a"]["g"]["ranking_accuracy"] is None and "no Long" in m["a"]["g"]["note"]
    assert all(c["ranking_accuracy"] is None and "not trainable" in c["note"] for c in m["g"].values())
    table = format_matrix(m)
    assert "n/a" in table and "| a | 1.000 |" in table


# -- CLI ------------------------------------------------------------------------------------------

def _one_line_error(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sarathi-ext: error:"), err
    return lines[0]


def test_eval_ranker_missing_model(capsys, tmp_path):
    msg = _one_line_error(capsys, ["eval-ranker", "--model", str(tmp_path / "nope.onnx"), "--data", "sharegpt"])
    assert "nope.onnx" in msg and "does not exist" in msg


def test_eval_ranker_bad_data_choice(capsys, tmp_path):
    _one_line_error(capsys, ["eval-ranker", "--model", str(tmp_path / "m.onnx"), "--data", "alpaca"])


def test_eval_ranker_garbage_artifact(capsys, tmp_path):
    art = tmp_path / "m.onnx"
    art.write_bytes(b"not onnx")
    msg = _one_line_error(capsys, ["eval-ranker", "--model", str(art)])
    assert "refused" in msg


def test_train_ranker_bad_inputs(capsys, tmp_path):
    assert "must end in .onnx" in _one_line_error(capsys, ["train-ranker", "--out", str(tmp_path / "m.bin")])
    assert "does not exist" in _one_line_error(capsys, ["train-ranker", "--out", str(tmp_path / "no" / "m.onnx")])
    assert "unknown source" in _one_line_error(
        capsys, ["train-ranker", "--out", str(tmp_path / "m.onnx"), "--data", "alpaca"])
    _one_line_error(capsys, ["train-ranker", "--kind", "bert", "--out", str(tmp_path / "m.onnx")])
