"""Seed 001 Table 10 in the simulator: LPRS with APC off against APC on.

    python benchmarks/reproduce_apc.py --predictor MODEL.pt

Workload (section 4.1): 1,000 requests, short (30-50 token) to long (200-220 token) prompts at
49:1, gamma arrivals (the paper's rate "could change dynamically"; cv 2). The paper states no
output length, target or hardware for this ablation; we use Qwen3-8B on an RTX PRO 5000 (the LPRS
hardware), 64-token outputs and a target near the decode-only iteration time, which is the
"decode-dominated, high-contention" regime APC is built for: there LPRS alone keeps many
prefills alive on tiny chunks. Reported: mean and P90 request and prefill E2E, average scheduled
prefill sequences per round, average prefill chunk (mean over rounds of the round's mean chunk,
0 for rounds without prefill), and both intervention counts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table  # noqa: E402
from sarathi_ext.core import PolicyConfig  # noqa: E402
from sarathi_ext.sim.runner import SimSetup, run_policy  # noqa: E402
from sarathi_ext.sim.workload import make_workload  # noqa: E402


def pct(new: float, base: float) -> str:
    return f"{(new - base) / base * 100:+.2f}%" if base else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictor", required=True, help="trained latency artifact, or 'sim' (noise-free time model)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--gpu", default="rtx-pro-5000-72gb")
    ap.add_argument("--interval", type=float, default=0.01, help="mean seconds between arrivals")
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--target-ms", type=float, default=30.0)
    ap.add_argument("--budget", type=int, default=1024)
    ap.add_argument("--max-num-seqs", type=int, default=128)
    ap.add_argument("--c-max", type=int, default=2)
    ap.add_argument("--l-min", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.predictor != "sim":
        import torch

        torch.set_num_threads(1)  # a [N, 16] MLP call is too small to gain from intra-op threads

    setup = SimSetup(gpu=args.gpu, model="qwen3-8b", token_budget=args.budget, max_num_seqs=args.max_num_seqs,
                     seed=args.seed, predictor_path=None if args.predictor == "sim" else args.predictor)
    wl = make_workload("apc-mix", args.requests, "gamma", args.interval, seed=args.seed, output_len=args.output_len)
    base = dict(chunk="lprs", lprs_target_ms=args.target_ms, apc_c_max=args.c_max, apc_l_min=args.l_min)
    runs = {"APC off": PolicyConfig(**base), "APC on": PolicyConfig(**base, apc=True)}
    print(f"# {wl.describe()}")
    print(f"# {setup.describe()}; LPRS target {args.target_ms:g} ms, predictor {args.predictor}; "
          f"APC C_max {args.c_max}, L_min {args.l_min}\n")
    res = {name: run_policy(setup, cfg, wl) for name, cfg in runs.items()}

    def stats(r):
        e2e, pf = (r.finish - r.arrival) * 1e3, (r.first_token - r.arrival) * 1e3
        p = r.planner
        return [
            np.mean(e2e), np.mean(pf), np.percentile(e2e, 90), np.percentile(pf, 90),
            p["avg_prefill_seqs"], p["avg_prefill_chunk"],
            p.get("blocked_by_activity_cap", 0), p.get("blocked_by_min_chunk", 0),
        ]

    names = ["Mean request E2E (ms)", "Mean prefill E2E (ms)", "P90 request E2E (ms)", "P90 prefill E2E (ms)",
             "Avg. scheduled prefill seqs", "Avg. prefill chunk size", "Blocked by activity cap",
             "Blocked by min. effective chunk"]
    off, on = stats(res["APC off"]), stats(res["APC on"])
    rows = []
    for i, name in enumerate(names):
        fmt = (lambda v: f"{int(v):,}") if i >= 6 else (lambda v: f"{v:.2f}")
        rows.append([name, fmt(off[i]), fmt(on[i]), pct(on[i], off[i]) if i < 6 else "-"])
    print(markdown_table(["metric", "APC off", "APC on", "change"], rows))
    it = {k: r.iteration_ms for k, r in res.items()}
    print(f"\niterations: APC off {len(it['APC off']):,} (median {np.median(it['APC off']):.1f} ms), "
          f"APC on {len(it['APC on']):,} (median {np.median(it['APC on']):.1f} ms); "
          f"warm starts with APC: {res['APC on'].planner.get('warm_starts', 0):,}")


if __name__ == "__main__":
    main()
