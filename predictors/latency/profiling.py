"""Collect latency-profile rows by running the token-budget scheduler over varied batch mixes.

Seed 001 section 3.2.1, step 3: profiles come from the static token-budget scheduler run under
diverse arrival rates, prompt-length mixtures and concurrency levels. The sweep below crosses
those three axes (plus the token budget) and drives the simulated engine with whatever executes
the batches: the simulator's noisy time model (source a) or a real PyTorch runner (source b).
Workloads are synthetic, so profiling needs no data files (a lent GPU machine has none).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from sarathi_ext.core import PolicyConfig, blocks_for, build_planner
from sarathi_ext.sim.engine import SimEngine
from sarathi_ext.sim.workload import Workload

from .schema import ProfileWriter

ARRIVAL_INTERVALS = (0.002, 0.02, 0.2)  # seconds: saturated, busy, light
PROMPT_MIXES = ("short", "mixed", "long")
CONCURRENCY = (4, 16, 64, 128)  # max_num_seqs; 128 is Sarathi's default, so deployments stay in range
TOKEN_BUDGETS = (256, 512, 1024)  # chunk sizes


@dataclass(frozen=True)
class SweepPoint:
    interval: float
    mix: str
    max_num_seqs: int
    token_budget: int


def sweep_points() -> list[SweepPoint]:
    return [SweepPoint(*p) for p in itertools.product(ARRIVAL_INTERVALS, PROMPT_MIXES, CONCURRENCY, TOKEN_BUDGETS)]


MAX_OUTPUT = 128  # outputs stay short so that prefill chunks keep appearing in the batches


def mix_workload(point: SweepPoint, n: int, max_context: int, rng: np.random.Generator) -> Workload:
    """Prompt lengths for one prompt-length mix. The long mix reaches the full context, so that
    a predictor trained on the sweep never extrapolates in prefill_processed_tokens."""
    max_output = min(MAX_OUTPUT, max_context // 4)
    cap = max_context - max_output
    if point.mix == "short":
        prompts = rng.integers(8, 65, n)
    elif point.mix == "long":
        prompts = rng.integers(cap // 4, cap + 1, n)
    else:  # heavy-tailed, like chat traffic: median ~100 tokens
        prompts = np.clip(rng.lognormal(np.log(100), 1.0, n), 4, cap).astype(np.int64)
    outputs = rng.integers(4, max_output + 1, n)
    arrivals = np.cumsum(rng.exponential(point.interval, n))
    arrivals -= arrivals[0]
    return Workload(f"profile/{point.mix}", arrivals, prompts.astype(np.int64), outputs.astype(np.int64))


class _Deadline(Exception):
    pass


def run_sweep(
    executor,
    writer: ProfileWriter,
    iterations: int,
    max_context: int = 2048,
    block_size: int = 16,
    seed: int = 0,
    progress: Optional[Callable[[int], None]] = None,
    max_seconds: Optional[float] = None,
) -> int:
    """Run every sweep point for about ``iterations / len(points)`` iterations with ``executor``
    as the engine's execution model, writing one profile row per iteration. With ``max_seconds``
    the sweep ends cleanly at that wall-clock budget with the rows so far (a lent GPU's time is
    fixed). Returns rows written."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    points = sweep_points()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(points))  # so a short run still covers varied points
    per_point = max(1, iterations // len(points))
    written = 0
    for k in order:
        if written >= iterations:
            break
        point = points[k]
        # Enough KV for every slot at the full context: profiles measure compute, not preemption.
        num_blocks = point.max_num_seqs * blocks_for(max_context, block_size)
        planner = build_planner(PolicyConfig(policy="fcfs", chunk="static"))
        budget_left = min(per_point, iterations - written)

        def record(features: np.ndarray, ms: float) -> None:
            writer.add(features, ms)
            if progress is not None:
                progress(1)
            if deadline is not None and time.monotonic() > deadline:
                raise _Deadline

        engine = SimEngine(planner, executor, point.token_budget, point.max_num_seqs, num_blocks,
                           block_size, on_iteration=record)
        # More requests than the iterations can drain, so the point stays at its load level.
        workload = mix_workload(point, max(8, budget_left), max_context, rng)
        rows_before = writer.rows
        try:
            engine.run(workload, max_iterations=budget_left)
        except _Deadline:
            return written + writer.rows - rows_before
        written += writer.rows - rows_before
        for rid in list(planner.requests):  # free the runner's KV caches of unfinished requests
            if hasattr(executor, "release"):
                executor.release(rid)
    return written
