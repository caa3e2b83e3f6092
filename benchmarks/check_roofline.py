"""How far the roofline's linear layers are from Vidur's measured A100/H100 kernel times.

For each profile, compares one decoder layer's non-attention time at TP=1 (Vidur: sum of op medians,
embedding excluded; roofline: q/k/v/o + gate/up/down matmuls at the default efficiencies) and
re-derives the efficiencies the defaults were taken from, so the calibration can be re-checked.

    python benchmarks/check_roofline.py [--data DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sarathi_ext.sim.exec_model import RooflineModel, VidurLinearProfile  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "profiles" / "compute"
NUM_TOKENS = (1, 16, 64, 256, 512, 1024, 2048, 4096)
CASES = (  # (profile file under compute/, model, GPU the profile was taken on)
    ("a100/llama3-8b_mlp.csv", "llama-3-8b", "a100-80gb"),
    ("a100/llama2-7b_mlp.csv", "llama-2-7b", "a100-80gb"),
    ("h100/llama2-7b_mlp.csv", "llama-2-7b", "h100-80gb"),
)


def implied_efficiencies(prof: VidurLinearProfile, roof: RooflineModel) -> tuple[float, float]:
    """(compute, bandwidth) efficiency that would make the roofline exact on this profile: bandwidth
    from weight-bound batches (<= 16 tokens), compute from compute-bound ones (>= 1024 tokens)."""
    n, t = prof.num_tokens, prof.layer_ms_at
    m = roof.model
    peak_ms = 2 * m.layer_matmul_params * n / roof.gpu.peak_flops * 1e3
    weights_ms = m.layer_matmul_params * m.dtype_bytes / roof.gpu.mem_bw_bytes * 1e3
    return float(np.median((peak_ms / t)[n >= 1024])), float(np.median(weights_ms / t[n <= 16]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Vidur compute profiles dir")
    args = ap.parse_args()
    if not args.data.is_dir():
        print(f"profiles not found at {args.data}; pass --data DIR (see ../shared/data/README.md)")
        return 2

    all_err = []
    for rel, model, gpu in CASES:
        prof = VidurLinearProfile.from_csv(args.data / rel, tp=1)
        roof = RooflineModel(gpu, model)
        print(f"\n### {model} on {roof.gpu.name}, TP=1 (`{rel}`), per layer\n")
        print("| num_tokens | measured ms | roofline ms | ratio |")
        print("|---:|---:|---:|---:|")
        n = np.array(NUM_TOKENS, dtype=float)
        missing = sorted(set(NUM_TOKENS) - set(prof.num_tokens.astype(int).tolist()))
        if missing:
            print(f"profile lacks num_tokens {missing}")
            return 2
        meas, est = prof.layer_ms(n), roof.layer_linear_ms(n)
        for k, a, b in zip(NUM_TOKENS, meas, est):
            print(f"| {k} | {a:.4f} | {b:.4f} | {b / a:.3f} |")
        err = np.abs(est / meas - 1)
        all_err.append(err)
        sweep = prof.num_tokens <= 4096
        sweep_err = np.abs(roof.layer_linear_ms(prof.num_tokens) / prof.layer_ms_at - 1)[sweep]
        worst_n = int(prof.num_tokens[sweep][sweep_err.argmax()])
        ce, be = implied_efficiencies(prof, roof)
        print(
            f"\nmedian |error| {100 * np.median(err):.1f}%, worst {100 * err.max():.1f}% "
            f"(n={NUM_TOKENS[err.argmax()]}); over all {sweep.sum()} profiled sizes <= 4096: "
            f"median {100 * np.median(sweep_err):.1f}%, worst {100 * sweep_err.max():.1f}% "
            f"(n={worst_n})"
        )
        print(f"implied efficiencies: compute {ce:.3f}, bandwidth {be:.3f} "
              f"(defaults {roof.compute_efficiency}, {roof.bandwidth_efficiency})")
    err = np.concatenate(all_err)
    print(f"\nall cases: median |error| {100 * np.median(err):.1f}%, worst {100 * err.max():.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
