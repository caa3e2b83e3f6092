"""Hot-path cost of the latency predictor: one batched LPRS call (Algorithm 1 scores all of a
request's candidates in one predictor call, Eq. 8-9) with 16, 64 and 256 candidate rows.

    python benchmarks/bench_predictor.py [--artifact model.pt] [--calls 2000] [--warmup 300]

Times ``load_predictor(...)`` (TorchScript, CPU) end to end from a float64 numpy feature matrix
to float64 ms, and, for comparison, the eager ``LatencyMLP`` on the same rows (numpy -> float32
tensor -> forward under inference_mode -> float64 numpy). torch.set_num_threads(1): the scheduler
is one thread beside the engine, and an MLP this small gains nothing from intra-op threads.
Without --artifact a model is trained for a few epochs on synthetic rows (call latency does not
depend on the weights). Target (seed 001, T* = 105 ms): <= 0.2 ms for 64 candidates, i.e. < 0.2%
of a round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table  # noqa: E402
from sarathi_ext.core.features import NUM_FEATURES  # noqa: E402

SIZES = (16, 64, 256)
TARGET_US, TARGET_ROWS, T_STAR_MS = 200.0, 64, 105.0


def synthetic_rows(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows with the core's derived columns consistent, latency = 5 + 0.05 * tokens."""
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
    return X, 5.0 + 0.05 * X[:, 12] + rng.normal(0, 0.5, n)


def time_calls(fn, x, calls: int, warmup: int) -> tuple[float, float]:
    """(median, P90) microseconds of ``fn(x)``."""
    for _ in range(warmup):
        fn(x)
    samples = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        fn(x)
        samples[i] = time.perf_counter() - t0
    return statistics.median(samples) * 1e6, float(np.percentile(samples, 90)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifact", help="an exported predictor (default: train a quick one)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    args = ap.parse_args()
    if args.calls < 1000:
        ap.error("--calls must be >= 1000")

    import torch

    from predictors.latency import export, load_predictor, train
    from predictors.latency.model import LatencyMLP

    torch.set_num_threads(1)
    tmp = tempfile.TemporaryDirectory()
    if args.artifact:
        path = Path(args.artifact)
        eager = None
    else:
        X, y = synthetic_rows(2000)
        eager, _ = train(X, y, seed=0, epochs=3)
        path = Path(tmp.name) / "bench.pt"
        export(eager, path, {"source": "synthetic (bench_predictor)"}, {})
    pred = load_predictor(path, device="cpu")
    if eager is None:  # an eager twin of the artifact's shape; its weights do not matter here
        hp = pred.meta.get("architecture", {})
        eager = LatencyMLP(hp.get("hidden_sizes", (128, 64, 32)), hp.get("dropout", 0.1))
    eager.eval()

    def eager_call(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return eager(torch.from_numpy(x.astype(np.float32))).numpy().astype(np.float64)

    rows = []
    verdict = ""
    rng = np.random.default_rng(1)
    for n in SIZES:
        x = synthetic_rows(n, seed=int(rng.integers(1 << 30)))[0]
        ts_med, ts_p90 = time_calls(pred, x, args.calls, args.warmup)
        eg_med, eg_p90 = time_calls(eager_call, x, args.calls, args.warmup)
        check = ""
        if n == TARGET_ROWS:
            ok = ts_med <= TARGET_US
            check = f"{'PASS' if ok else 'FAIL'} ({ts_med / (T_STAR_MS * 1e3) * 100:.3f}% of T*)"
            verdict = f"64 candidates: median {ts_med:.1f} us vs target {TARGET_US:.0f} us -> {'PASS' if ok else 'FAIL'}"
        rows.append([n, f"{ts_med:.1f}", f"{ts_p90:.1f}", f"{eg_med:.1f}", f"{eg_p90:.1f}", check])
    print(f"torch {torch.__version__}, torch.set_num_threads(1), device cpu, "
          f"{args.calls} timed calls after {args.warmup} warm-up, artifact {path.name}")
    print(markdown_table(["candidates", "TorchScript median (us)", "TorchScript P90 (us)",
                          "eager median (us)", "eager P90 (us)", f"target <= {TARGET_US:.0f} us @ 64"],
                         rows))
    print(verdict)
    tmp.cleanup()


if __name__ == "__main__":
    main()
