"""Hot-path cost of the latency predictor: one batched LPRS call (Algorithm 1 scores all of a
request's candidates in one predictor call, Eq. 8-9) with 16, 64 and 256 candidate rows.

    python benchmarks/bench_predictor.py [--artifact model.pt] [--calls 2000] [--warmup 300]

Times ``load_predictor(...)`` (TorchScript, CPU) end to end from a float64 numpy feature matrix
to float64 ms, and, for comparison, the eager ``LatencyMLP`` on the same rows (numpy -> float32
tensor -> forward under inference_mode -> float64 numpy). torch.set_num_threads(1): the scheduler
is one thread beside the engine, and an MLP this small gains nothing from intra-op threads.
Without --artifact a model is trained for a few epochs on a small simulator sweep (call latency
does not depend on the weights). The rows timed are what LPRS sends: 64 running decodes plus the
candidate chunks. Target (seed 001, T* = 105 ms): <= 0.2 ms for 64 candidates, i.e. < 0.2%
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
from sarathi_ext.core.features import BatchState  # noqa: E402

SIZES = (16, 64, 256)
TARGET_US, TARGET_ROWS, T_STAR_MS = 200.0, 64, 105.0


def candidate_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """What LPRS sends in one call: a batch of 64 running decodes plus n candidate chunk sizes."""
    batch = BatchState()
    for ctx in rng.integers(100, 4000, 64):
        batch.add_decode(int(ctx))
    chunks = np.unique(np.linspace(1, 1024, n).round())
    chunks = np.concatenate([chunks, np.arange(2, 2 + n - len(chunks))])  # exactly n rows
    return batch.features_with_chunk(chunks, processed=int(rng.integers(0, 2048)))


def quick_profile(path: Path) -> Path:
    """A small source-(a) profile to train a throwaway model on: call latency ignores the weights."""
    from predictors.latency.profiling import run_sweep
    from predictors.latency.schema import ProfileWriter
    from sarathi_ext.sim.exec_model import build_exec_model

    model = build_exec_model("roofline", "rtx-pro-5000-72gb", "qwen3-8b", None, 0.03, 0)
    with ProfileWriter(path, {"source": "sim (bench_predictor)"}) as w:
        run_sweep(model, w, 2000)
    return path


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

    from predictors.latency import export, load_predictor, read_profile, train
    from predictors.latency.model import LatencyMLP

    torch.set_num_threads(1)
    tmp = tempfile.TemporaryDirectory()
    if args.artifact:
        path = Path(args.artifact)
        eager = None
    else:
        X, y, _ = read_profile(quick_profile(Path(tmp.name) / "bench.csv"))
        eager, _ = train(X, y, seed=0, epochs=3)
        path = Path(tmp.name) / "bench.pt"
        export(eager, path, {"source": "sim sweep (bench_predictor)"}, {})
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
        x = candidate_rows(n, rng)
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
