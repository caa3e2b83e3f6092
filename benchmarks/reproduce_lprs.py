"""Seed 001 Table 9 in the simulator: LPRS (105 ms target) against a static 1,024-token budget.

    python benchmarks/reproduce_lprs.py --predictor MODEL.pt [--requests 1000]

Setting (section 4.1): Qwen3-8B on an RTX PRO 5000 72GB, 1,000 requests of the Vidur ShareGPT
trace with sequences capped at 4,096 tokens, fixed arrivals every 0.1 s (high concurrency) and
1.0 s (regular load), 128 sequence slots. The simulator's noisy roofline is the ground truth; LPRS
sees only the trained MLP's predictions (``--predictor``), never the time model itself.
Reported: P50/P80/P90/P99 of prefill latency (Eq. 19) and request latency (Eq. 18), and the share
of iterations whose charged time lies within +-10% of the target (the controllability claim).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table  # noqa: E402
from predictors.latency.evaluate import metrics  # noqa: E402
from sarathi_ext.core import PolicyConfig  # noqa: E402
from sarathi_ext.sim.runner import SimSetup, run_policy  # noqa: E402
from sarathi_ext.sim.workload import make_workload  # noqa: E402

QUANTILES = (50, 80, 90, 99)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictor", required=True,
                    help="trained latency artifact (sarathi-ext train-latency), or 'sim' for the time "
                         "model without its noise (an upper bound on what a predictor can know)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--gpu", default="rtx-pro-5000-72gb")
    ap.add_argument("--target-ms", type=float, default=105.0)
    ap.add_argument("--budget", type=int, default=1024)
    ap.add_argument("--intervals", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", default="sharegpt", help="lengths (sharegpt-turns for short chat turns)")
    args = ap.parse_args()
    if args.predictor != "sim":
        import torch

        torch.set_num_threads(1)  # a [N, 16] MLP call is too small to gain from intra-op threads

    setup = SimSetup(gpu=args.gpu, model="qwen3-8b", token_budget=args.budget, max_num_seqs=128,
                     seed=args.seed,
                     predictor_path=None if args.predictor == "sim" else args.predictor)
    policies = {
        "LPRS": PolicyConfig(chunk="lprs", lprs_target_ms=args.target_ms),
        "Token Budget": PolicyConfig(chunk="static"),
    }
    print(f"# {setup.describe()}; LPRS target {args.target_ms:g} ms, predictor {args.predictor}\n")
    for interval in args.intervals:
        wl = make_workload(args.trace, args.requests, "fixed", interval, seed=args.seed, max_context=4096)
        res = {"LPRS": run_policy(setup, policies["LPRS"], wl)}
        # The static run also records its batches, to score the predictor where LPRS works.
        batches, charged = [], []
        engine = setup.engine(policies["Token Budget"])
        engine.on_iteration = lambda x, ms: (batches.append(x.copy()), charged.append(ms))
        res["Token Budget"] = engine.run(wl, policies["Token Budget"].label())
        kind = {0.1: "High concurrency", 1.0: "Regular load"}.get(interval, "Load")
        print(f"## {kind} ({interval:g} s interval)\n")
        print(f"# {wl.describe()}\n")
        rows = []
        for q in QUANTILES:
            row = [f"P{q}"]
            for metric in ("prefill", "request"):
                for name, r in res.items():
                    lat = (r.first_token if metric == "prefill" else r.finish) - r.arrival
                    row.append(f"{np.percentile(lat, q) * 1e3:.1f}")
            rows.append(row)
        header = ["quantile", *(f"{m} ms, {n}" for m in ("prefill", "request") for n in res)]
        print(markdown_table(header, rows))
        it_rows = []
        for name, r in res.items():
            it = r.iteration_ms
            busy = it[it > 0]
            within = np.mean(np.abs(busy - args.target_ms) <= 0.1 * args.target_ms)
            it_rows.append([name, f"{len(busy):,}", f"{np.median(busy):.1f}", f"{np.percentile(busy, 99):.1f}",
                            f"{np.mean(busy > args.target_ms) * 100:.1f}%", f"{within * 100:.1f}%",
                            f"{r.planner['avg_chunk_per_scheduled_prefill']:.0f}"])
        print()
        print(markdown_table(["policy", "iterations", "median ms", "P99 ms", "over target", "within +-10% of target",
                              "mean chunk"], it_rows))
        m = metrics(np.array(charged), setup.predictor()(np.array(batches)))
        print(f"\npredictor on this workload's static-budget batches: MAE {m['mae_ms']:.2f} ms, "
              f"MAPE {m['mape_pct']:.2f}%, P99 abs. error {m['p99_ms']:.2f} ms, under-predicted {m['under_pred_pct']:.1f}%")
        print()


if __name__ == "__main__":
    main()
