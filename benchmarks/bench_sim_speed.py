"""Wall time to simulate 10,000 ShareGPT requests (target: <= 60 s on one core).

    python benchmarks/bench_sim_speed.py [--num-requests 10000] [--policy fcfs aging aging+lprs+apc]

Workload: the Vidur ShareGPT trace (full prompt and output lengths, context capped at 4096),
Poisson arrivals at 1.5 req/s; engine: Qwen3-8B on an H100-80GB, chunk budget 512, 128 sequence
slots. Prints simulated requests and iterations per wall second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table  # noqa: E402
from sarathi_ext.cli import parse_policy_spec  # noqa: E402
from sarathi_ext.core import PolicyConfig  # noqa: E402
from sarathi_ext.sim.runner import SimSetup, run_policy  # noqa: E402
from sarathi_ext.sim.workload import make_workload  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, default=10_000)
    ap.add_argument("--interval", type=float, default=1 / 1.5)
    ap.add_argument("--policy", nargs="+", default=["fcfs", "aging", "aging+lprs+apc"])
    args = ap.parse_args()

    t0 = time.perf_counter()
    workload = make_workload("sharegpt", args.num_requests, "poisson", args.interval, seed=0, max_context=4096)
    load_s = time.perf_counter() - t0
    setup = SimSetup(gpu="h100-80gb", model="qwen3-8b", token_budget=512, max_num_seqs=128)
    print(f"# {workload.describe()} (trace load {load_s:.2f}s)")
    print(f"# {setup.describe()}\n")
    base = PolicyConfig().to_dict()
    rows = []
    for spec in args.policy:
        policy = parse_policy_spec(spec, base)
        result = run_policy(setup, policy, workload)
        wall = result.wall_s
        rows.append([
            policy.label(), f"{len(workload):,}", f"{len(result.iteration_ms):,}", f"{wall:.2f}",
            f"{len(workload) / wall:,.0f}", f"{len(result.iteration_ms) / wall:,.0f}",
            "yes" if wall <= 60 else "NO",
        ])
        print(f"{policy.label()}: {wall:.2f}s", file=sys.stderr)
    print(markdown_table(
        ["policy", "requests", "iterations", "wall s", "sim req / wall s", "iterations / wall s", "<= 60 s"], rows
    ))


if __name__ == "__main__":
    main()
