"""The latency predictor of seed 001, Sec. 3.2.1: data preparation, Eq. 5's loss, training, the
TorchScript artifact and its sidecar check, Table 8's metrics, and its use as LPRS's predictor."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from predictors.latency import (  # noqa: E402
    LatencyMLP, asymmetric_huber, bucket_weights, bucketize, clean, compare,
    downsample_full_chunk, evaluate_from_csv, export, format_report, load_predictor, metrics,
    prepare, split, train, train_from_csv, write_profile,
)
from predictors.latency.artifact import sidecar_path  # noqa: E402
from sarathi_ext.core import LPRS, BatchState  # noqa: E402
from sarathi_ext.core.features import FEATURE_NAMES, IDX, NUM_FEATURES  # noqa: E402

SCHED = IDX["scheduled_tokens"]
REPO = Path(__file__).resolve().parents[1]


def synthetic(n: int, seed: int, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Batches with consistent derived features; latency y = 5 + 0.05 * scheduled_tokens + noise."""
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 65, n).astype(np.float64)
    p = rng.integers(1, 2049, n).astype(np.float64)
    ctx = rng.uniform(1, 4096, n)
    q = rng.integers(0, 4096, n).astype(np.float64)
    X = np.zeros((n, NUM_FEATURES))
    X[:, 0], X[:, 1], X[:, 2] = p, d, d + 1
    X[:, 3], X[:, 4], X[:, 5], X[:, 6] = d * ctx, np.where(d > 0, ctx, 0), q, q
    X[:, 11], X[:, 12] = 1.0, p + d
    X[:, 13] = X[:, 3] / np.maximum(d, 1)
    X[:, 14], X[:, 15] = d * X[:, 13], p * q
    return X, 5.0 + 0.05 * X[:, SCHED] + rng.normal(0, noise, n)


# ---------------------------------------------------------------- Eq. 5: asymmetric Huber

def t(*v):
    return torch.tensor(v, dtype=torch.float64)


def test_asymmetric_huber_by_hand():
    # delta = 1, under_ratio = 2; e = target - pred:
    #   pred 1, target 2: e = +1 (under), |e| <= 1: 0.5 * 1^2 = 0.5, x2 = 1.0
    #   pred 3, target 2: e = -1 (over):             0.5 * 1^2 = 0.5
    #   pred 0, target 0: e = 0:                     0
    #   pred 10, target 5: e = -5 (over), |e| > 1:   1 * (5 - 0.5) = 4.5
    # unweighted mean (1.0 + 0.5 + 0 + 4.5) / 4 = 1.5
    pred, target = t(1, 3, 0, 10), t(2, 2, 0, 5)
    assert float(asymmetric_huber(pred, target, None, 1.0, 2.0)) == pytest.approx(1.5, abs=1e-12)
    # Eq. 5 with w = (2, 1, 1, 0): (2*1.0 + 1*0.5 + 0 + 0*4.5) / 4 = 0.625
    w = t(2, 1, 1, 0)
    assert float(asymmetric_huber(pred, target, w, 1.0, 2.0)) == pytest.approx(0.625, abs=1e-12)
    # delta = 2, under_ratio = 3:
    #   pred 0, target 5: e = +5 (under), |e| > 2: 2 * (5 - 1) = 8, x3 = 24
    #   pred 4.5, target 5: e = +0.5 (under): 0.5 * 0.25 = 0.125, x3 = 0.375
    #   pred 9, target 5: e = -4 (over): 2 * (4 - 1) = 6
    # mean (24 + 0.375 + 6) / 3 = 10.125
    got = asymmetric_huber(t(0, 4.5, 9), t(5, 5, 5), None, 2.0, 3.0)
    assert float(got) == pytest.approx(10.125, abs=1e-12)


def test_asymmetric_huber_symmetric_case_is_torch_huber_and_validates():
    rng = np.random.default_rng(0)
    pred, target = torch.from_numpy(rng.normal(0, 3, 50)), torch.from_numpy(rng.normal(0, 3, 50))
    ref = torch.nn.functional.huber_loss(pred, target, delta=1.5)
    assert float(asymmetric_huber(pred, target, None, 1.5, 1.0)) == pytest.approx(float(ref), rel=1e-12)
    with pytest.raises(ValueError, match="delta"):
        asymmetric_huber(pred, target, None, 0.0, 2.0)
    with pytest.raises(ValueError, match="under_ratio"):
        asymmetric_huber(pred, target, None, 1.0, 0.5)


# ---------------------------------------------------------------- Table 8 / Eq. 15-17

def test_metrics_by_hand():
    # true (10, 20, 40, 50), pred (11, 18, 46, 50): error (1, -2, 6, 0), |error| sorted (0, 1, 2, 6)
    m = metrics(np.array([10.0, 20, 40, 50]), np.array([11.0, 18, 46, 50]))
    assert m["mae_ms"] == pytest.approx(9 / 4)                          # (1+2+6+0)/4
    assert m["rmse_ms"] == pytest.approx(math.sqrt(41 / 4))             # (1+4+36+0)/4
    assert m["mape_pct"] == pytest.approx(8.75)                         # 100/4 (.1+.1+.15+0)
    # numpy's linear percentile of (0, 1, 2, 6): rank q/100 * 3
    assert m["p50_ms"] == pytest.approx(1.5)                            # rank 1.5: 1 + .5*(2-1)
    assert m["p90_ms"] == pytest.approx(4.8)                            # rank 2.7: 2 + .7*(6-2)
    assert m["p95_ms"] == pytest.approx(5.4)                            # rank 2.85: 2 + .85*4
    assert m["p99_ms"] == pytest.approx(5.88)                           # rank 2.97: 2 + .97*4
    assert m["within_5ms_pct"] == pytest.approx(75.0)                   # 0, 1, 2 of 4
    assert m["within_10ms_pct"] == pytest.approx(100.0)
    assert m["under_pred_pct"] == pytest.approx(25.0)                   # only 18 < 20; 50 = 50 is not
    assert m["n"] == 4


# ---------------------------------------------------------------- component 3: preprocessing

def test_bucketize_power_of_two_edges():
    X = np.zeros((10, NUM_FEATURES))
    X[:, SCHED] = [0, 1, 2, 3, 4, 7, 8, 512, 1023, 1024]
    assert bucketize(X).tolist() == [0, 0, 1, 1, 2, 2, 3, 9, 9, 10]


def test_clean_drops_bad_rows_and_gross_outliers_only():
    # One bucket ([512, 1024) tokens) of 100 rows whose latency depends on context, as real ones
    # do: y = 20 + 40 * sum_decode_context_len / its max + noise, 20-60 ms within the bucket.
    rng = np.random.default_rng(0)
    X, _ = synthetic(100, seed=0)
    X[:, 0], X[:, SCHED] = 600 - X[:, 1], 600
    y = 20 + 40 * X[:, 3] / X[:, 3].max() + rng.normal(0, 0.2, 100)
    longest = int(np.argmax(X[:, 3]))  # the slowest legitimate row: far above the bucket median
    assert longest > 4 and y[longest] > np.median(y) + 10
    y[0] += 40.0           # a gross outlier: a 40 ms stall
    y[1] += 1.0            # ~5 sigma of the noise: an ordinary tail, kept
    y[2] = -1.0            # non-positive latency
    X[3, 5] = np.nan       # non-finite feature
    y[4] = np.inf          # non-finite latency
    keep_ids = [i for i in range(100) if i not in (0, 2, 3, 4)]
    Xc, yc = clean(X, y)
    assert len(yc) == 96 and np.array_equal(yc, y[keep_ids])
    assert np.isfinite(Xc).all() and (yc > 0).all()


def test_split_is_exactly_8_1_1_disjoint_and_deterministic():
    X = np.zeros((100, NUM_FEATURES))
    y = np.arange(1, 101, dtype=np.float64)  # row ids
    (a, ya), (b, yb), (c, yc) = split(X, y, seed=7)
    assert (len(ya), len(yb), len(yc)) == (80, 10, 10)
    assert sorted(np.concatenate([ya, yb, yc]).tolist()) == y.tolist()
    again = split(X, y, seed=7)
    assert all(np.array_equal(u[1], v) for u, v in zip(again, (ya, yb, yc)))
    other = split(X, y, seed=8)
    assert not np.array_equal(other[2][1], yc)


def test_too_few_rows_is_a_clear_error():
    X, y = np.zeros((29, NUM_FEATURES)), np.ones(29)
    with pytest.raises(ValueError, match=r"got 29, need at least 30"):
        split(X, y, seed=0)
    X[:, SCHED] = 8
    with pytest.raises(ValueError, match=r"got 12, need at least 30"):
        prepare(X[:12], y[:12], seed=0)


def test_downsampling_caps_an_overfull_bucket():
    # Bucket sizes 10, 10, 10, 100: median 10, cap = ceil(3 * 10) = 30 (CAP_FACTOR = 3).
    buckets = np.repeat([3, 5, 7, 9], [10, 10, 10, 100])
    y = np.arange(1, 131, dtype=np.float64)
    X = np.zeros((130, NUM_FEATURES))
    Xd, yd, bd = downsample_full_chunk(X, y, buckets, seed=0)
    sizes = dict(zip(*np.unique(bd, return_counts=True)))
    assert sizes == {3: 10, 5: 10, 7: 10, 9: 30}
    assert np.all(np.diff(yd) > 0)  # kept rows stay in order, and are a subset
    assert set(yd[bd == 9]) <= set(y[buckets == 9])
    again = downsample_full_chunk(X, y, buckets, seed=0)[1]
    assert np.array_equal(again, yd)


def test_prepare_is_deterministic_and_weights_are_inverse_bucket_frequency():
    X, y = synthetic(600, seed=2)
    a, b = prepare(X, y, seed=3), prepare(X, y, seed=3)
    for name in ("X_train", "y_train", "w_train", "X_val", "y_val", "X_test", "y_test"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert a.w_train.mean() == pytest.approx(1.0)
    # Unclipped, a row's weight is proportional to 1 / (rows in its bucket).
    w = bucket_weights(np.array([1, 1, 1, 2]))
    assert w.mean() == pytest.approx(1.0)
    assert w[3] / w[0] == pytest.approx(3.0)


# ---------------------------------------------------------------- training and the artifact

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    X, y = synthetic(2000, seed=1)
    model, history = train(X, y, seed=0, epochs=100)
    path = tmp_path_factory.mktemp("artifact") / "latency.pt"
    export(model, path, {"source": "synthetic", "device": "cpu", "model": "y = 5 + 0.05 tokens"},
           {"note": "test"}, history["hyperparameters"])
    return X, y, model, history, path


def test_training_learns_a_known_function(trained):
    # y = 5 + 0.05 * tokens + N(0, 0.5^2): the noise floor is an MAE of 0.5*sqrt(2/pi) = 0.40 ms,
    # and predicting the train mean scores ~28 ms. Below 2.5 ms (< 10% of that) the network has
    # learned the trend; 100 epochs on ~630 rows reach ~1 ms.
    X, y, model, history, _ = trained
    data = prepare(X, y, seed=0)
    mae = metrics(data.y_test, model.predict_numpy(data.X_test))["mae_ms"]
    assert mae < 2.5
    assert np.abs(data.y_test - data.y_train.mean()).mean() > 10 * mae
    assert 1 <= history["best_epoch"] <= 100 and len(history["epochs"]) == 100
    best = min(r["val_loss"] for r in history["epochs"])
    assert history["best_val_loss"] == best


def test_training_is_deterministic_per_seed_and_reports_progress():
    X, y = synthetic(300, seed=4)
    seen = []
    m1, _ = train(X, y, seed=5, epochs=3, progress=seen.append)
    m2, _ = train(X, y, seed=5, epochs=3)
    assert [r["epoch"] for r in seen] == [1, 2, 3] and "val_loss" in seen[0]
    for (k, v1), v2 in zip(m1.state_dict().items(), m2.state_dict().values()):
        assert torch.equal(v1, v2), k


def test_constant_columns_are_ignored_by_the_input_scaling():
    X, y = synthetic(200, seed=0)
    m = LatencyMLP()
    m.set_normalisation(X, y)
    mem = [IDX[n] for n in ("gpu_mem_used_mb", "gpu_mem_free_mb", "cuda_allocated_mb", "cuda_reserved_mb", "bias")]
    assert torch.all(m.scale[mem] == 0) and torch.all(m.scale[[0, 1, SCHED]] > 0)
    X2 = X.copy()
    X2[:, mem[0]] = 40_000.0  # an engine that reports memory: no effect on a model fitted without
    assert np.array_equal(m.predict_numpy(X), m.predict_numpy(X2))


def test_export_load_round_trip_is_exact(trained):
    X, _, model, _, path = trained
    meta = json.loads(sidecar_path(path).read_text())
    assert meta["feature_names"] == list(FEATURE_NAMES) and meta["format_version"] == 1
    assert meta["provenance"]["source"] == "synthetic" and meta["hyperparameters"]["epochs"] == 100
    pred = load_predictor(path, device="cpu")
    got = pred(X[:300])
    assert got.dtype == np.float64 and got.shape == (300,)
    np.testing.assert_allclose(got, model.predict_numpy(X[:300]), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(pred(X[:7]), got[:7], rtol=1e-6, atol=1e-5)  # buffer reuse
    with pytest.raises(ValueError, match="shape"):
        pred(X[:3, :15])


def test_a_sidecar_with_swapped_features_is_refused(trained, tmp_path):
    _, _, _, _, path = trained
    copy = tmp_path / "swapped.pt"
    copy.write_bytes(path.read_bytes())
    meta = json.loads(sidecar_path(path).read_text())
    names = meta["feature_names"]
    names[3], names[4] = names[4], names[3]
    sidecar_path(copy).write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"swapped\.pt\.json.*position 3.*'max_decode_context_len'"):
        load_predictor(copy)


def test_missing_sidecar_and_corrupt_files_are_refused(trained, tmp_path):
    _, _, _, _, path = trained
    lone = tmp_path / "lone.pt"
    lone.write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match="missing sidecar"):
        load_predictor(lone)
    sidecar_path(lone).write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_predictor(lone)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"this is not a TorchScript archive")
    sidecar_path(bad).write_text(sidecar_path(path).read_text())
    with pytest.raises(ValueError, match="not a loadable TorchScript file"):
        load_predictor(bad)


def test_loaded_predictor_drives_lprs(trained):
    # Algorithm 1 with the artifact as its predictor: LPRS must pick the argmin of Eq. 10's score
    # over the candidates of Eq. 8, ties to the larger chunk, scoring with the model's own output.
    _, _, _, _, path = trained
    pred = load_predictor(path)
    batch = BatchState()
    for ctx in (300, 900, 2000, 4000):
        batch.add_decode(ctx)
    remaining, processed, budget, delta, lu, lo = 1500, 256, 2048, 32, 1.0, 3.0
    h = min(remaining, budget - batch.scheduled_tokens)
    probe = LPRS(pred, 50.0, delta, lu, lo)
    cands = probe.candidates(h)
    ms = pred(batch.features_with_chunk(cands, processed))
    target = float(np.median(ms))  # a target inside the predicted range: an interior answer
    score = np.where(ms <= target, lu * (target - ms), lo * (ms - target))  # Eq. 10
    expected = int(cands[score == score.min()].max())
    lprs = LPRS(pred, target, delta, lu, lo)
    assert lprs.choose(remaining, processed, budget, batch) == expected
    assert lprs.predictor_calls == 1 and 1 < expected < h


# ---------------------------------------------------------------- evaluation and the CSV entry points

def test_compare_and_csv_entry_points(tmp_path):
    X, y = synthetic(400, seed=6)
    csv1 = write_profile(tmp_path / "a.csv", X[:250], y[:250], {"source": "synthetic", "device": "cpu", "run": 1})
    csv2 = write_profile(tmp_path / "b.csv", X[250:], y[250:], {"source": "synthetic", "device": "cpu", "run": 2})
    art = tmp_path / "model.pt"
    out = train_from_csv([csv1, csv2], art, seed=2, epochs=5)
    meta = json.loads(sidecar_path(art).read_text())
    prov = meta["provenance"]
    assert prov["source"] == "synthetic" and prov["device"] == "cpu" and "run" not in prov  # shared keys only
    assert [p["rows"] for p in prov["profiles"]] == [250, 150] and len(prov["profiles"][0]["sha256"]) == 64
    assert set(meta["metrics"]["baselines"]) == {r["model"] for r in out["results"][1:]}
    rows, report = evaluate_from_csv(art)  # defaults: the training profiles and seed
    assert [r["model"] for r in rows] == [r["model"] for r in out["results"]]
    assert rows[0]["mae_ms"] == pytest.approx(out["results"][0]["mae_ms"], rel=1e-6)
    assert "held out" in report and report.count("\n|") >= 5
    assert "WARNING" in evaluate_from_csv(art, [csv1, csv2], seed=3, baselines=False)[1]
    # The baselines see the same split: the linear baseline on a linear target is near the noise.
    lin = next(r for r in compare(X, y, art, 2, rf_trees=10) if r["model"].startswith("Linear"))
    assert lin["mae_ms"] < 1.0
    assert "MLP" in format_report(rows).splitlines()[2]
    with pytest.raises(ValueError, match="missing sidecar"):
        evaluate_from_csv(tmp_path / "nothing.pt", [csv1])


def test_importing_the_package_needs_no_torch():
    code = ("import sys, predictors.latency as L; L.metrics; L.prepare; L.compare; L.train; "
            "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
