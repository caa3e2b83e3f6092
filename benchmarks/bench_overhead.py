"""Per-round scheduling cost: FCFS heap, aging heap (Eq. 4), and naive aging (Eq. 1, sort all).

Two measurements at queue sizes 1e2..1e5:
  ordering  the ordering work alone: take the k best prefill candidates, grant each a chunk,
            re-key (heap: O(k log n); naive: recompute every P_i(n) and sort, O(n log n))
  round     a whole RoundPlanner.schedule() call (decodes, admission, chunking) for fcfs and aging

    python benchmarks/bench_overhead.py [--sizes 100 1000 10000 100000] [--k 4]
Targets (issue 2): the aging heap <= 2x fcfs, and >= 10x faster than naive at 1e4.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table, median_time  # noqa: E402
from sarathi_ext.core import (  # noqa: E402
    FCFS, Aging, Limits, PolicyConfig, PrefillHeap, RequestView, build_planner, naive_aging_order,
)

ALPHA, BETA, CHUNK = 37.5, -1.0, 64


def make_views(n: int, seed: int = 0) -> list[RequestView]:
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, n * 0.1, n))
    prompts = rng.integers(10, 4000, n)
    views = [RequestView(i, float(a), int(p)) for i, (a, p) in enumerate(zip(arrivals, prompts))]
    for i, v in enumerate(views):
        v._seq = i
    return views


def heap_round(heap: PrefillHeap, k: int) -> None:
    picked = [heap.pop() for _ in range(k)]
    for r in picked:
        r.prefill_done = min(r.prefill_done + CHUNK, r.prefill_target - 1)  # r_i(n+1) = r_i(n) - c_i
        heap.push(r)  # re-key


def naive_round(views: list[RequestView], now: float, k: int) -> None:
    for r in naive_aging_order(views, now, ALPHA, BETA)[:k]:
        r.prefill_done = min(r.prefill_done + CHUNK, r.prefill_target - 1)


def ordering_costs(n: int, k: int, repeats: int) -> dict[str, float]:
    out = {}
    for name, order in (("fcfs", FCFS()), ("aging", Aging(ALPHA, BETA))):
        heap = PrefillHeap(order)
        for v in make_views(n):
            heap.push(v)
        out[name] = median_time(lambda: heap_round(heap, k), repeats)
    views = make_views(n)
    naive_repeats = max(3, min(repeats, 200_000 // n))
    out["naive"] = median_time(lambda: naive_round(views, n * 0.1, k), naive_repeats)
    return out


def round_costs(n: int, repeats: int) -> dict[str, float]:
    """Median cost of one schedule() call; fcfs and aging rounds alternate, so drift in a shared
    machine's speed hits both alike."""
    # Slots are full of requests that never finish their prefill, so every round runs the
    # full ordering path (admitted heap vs waiting heap) without the state draining.
    limits = Limits(token_budget=256, max_num_seqs=64, free_blocks=10**9, block_size=16)
    planners = {}
    for policy in ("fcfs", "aging"):
        planners[policy] = build_planner(PolicyConfig(policy=policy, aging_alpha=ALPHA, aging_beta=BETA))
        for v in make_views(n):
            planners[policy].add(v)
    samples: dict[str, list[float]] = {p: [] for p in planners}
    now = n * 0.1
    for _ in range(repeats):
        now += 0.05
        for policy, planner in planners.items():
            t0 = time.perf_counter()
            planner.schedule(now, limits)
            samples[policy].append(time.perf_counter() - t0)
    return {p: statistics.median(v) for p, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    ap.add_argument("--k", type=int, default=4, help="prefills granted a chunk per round")
    ap.add_argument("--repeats", type=int, default=2001)
    args = ap.parse_args()

    rows, round_rows = [], []
    for n in args.sizes:
        c = ordering_costs(n, args.k, args.repeats)
        rows.append([
            f"{n:,}", f"{c['fcfs'] * 1e6:.1f}", f"{c['aging'] * 1e6:.1f}", f"{c['naive'] * 1e6:.1f}",
            f"{c['aging'] / c['fcfs']:.2f}x", f"{c['naive'] / c['aging']:.0f}x",
        ])
        r = round_costs(n, min(args.repeats, 501))
        round_rows.append([f"{n:,}", f"{r['fcfs'] * 1e6:.1f}", f"{r['aging'] * 1e6:.1f}", f"{r['aging'] / r['fcfs']:.2f}x"])
        print(f"n={n:,} done", file=sys.stderr)
    print(f"Ordering work per round (k={args.k} chunks granted), median microseconds:\n")
    print(markdown_table(["queue", "fcfs heap", "aging heap", "naive aging", "aging/fcfs", "naive/aging"], rows))
    print("\nWhole RoundPlanner.schedule() call, median microseconds:\n")
    print(markdown_table(["queue", "fcfs", "aging", "aging/fcfs"], round_rows))


if __name__ == "__main__":
    main()
