"""A simulated chunked-prefill engine (Sarathi's iteration semantics) driving the core planner.

The engine owns what a real engine owns: the clock, the KV block pool, the requests' true output
lengths, and the execution time of each iteration. Every scheduling decision is the core
planner's: the same code that runs inside Sarathi-Serve and vLLM.
"""

from __future__ import annotations

import time
from array import array
from typing import Callable, Optional

import numpy as np

from ..core import Limits, MemoryState, RequestView, RoundPlanner, blocks_for
from .metrics import SimResult
from .workload import Workload

ExecModel = Callable[[np.ndarray], np.ndarray]
# An execution-time model is a callable on features (the roofline, a fitted profile). A model that
# really executes batches (predictors.latency.runner) may instead offer:
#   execute_plan(plan) -> ms     run the planned iteration and return its measured time
#   release(req_id)              drop a finished or preempted request's KV cache
#   memory_state() -> MemoryState  device memory readings for the features
IterationHook = Callable[[np.ndarray, float], None]


class SimulationError(RuntimeError):
    pass


class SimEngine:
    def __init__(
        self,
        planner: RoundPlanner,
        exec_model: ExecModel,
        token_budget: int,
        max_num_seqs: int,
        num_blocks: int,
        block_size: int = 16,
        on_iteration: Optional[IterationHook] = None,
    ) -> None:
        for name, v in (
            ("token_budget", token_budget),
            ("max_num_seqs", max_num_seqs),
            ("num_blocks", num_blocks),
            ("block_size", block_size),
        ):
            if v < 1:
                raise ValueError(f"{name}: must be >= 1, got {v}")
        planner.check_budget(token_budget)
        self.planner = planner
        self.exec_model = exec_model
        self.token_budget = token_budget
        self.max_num_seqs = max_num_seqs
        self.num_blocks = num_blocks
        self.block_size = block_size
        # Called with (features [16], charged ms) after every iteration: how profiles are recorded.
        self.on_iteration = on_iteration

    def run(
        self,
        workload: Workload,
        label: str = "",
        progress: Optional[Callable[[int], None]] = None,
        max_iterations: Optional[int] = None,
    ) -> SimResult:
        """Replay ``workload`` to completion, or for ``max_iterations`` iterations (profiling
        runs; unfinished requests then have NaN times). ``progress(n)`` is called as n more
        requests finish."""
        wall0 = time.perf_counter()
        n = len(workload)
        arrivals = workload.arrivals.astype(np.float64)
        prompts = workload.prompt_lens.astype(np.int64)
        outputs = workload.output_lens.astype(np.int64).tolist()
        scores = None if workload.scores is None else workload.scores.astype(np.float64).tolist()
        too_big = np.nonzero([blocks_for(int(p) + o, self.block_size) > self.num_blocks for p, o in zip(prompts, outputs)])[0]
        if len(too_big):
            i = int(too_big[0])
            raise SimulationError(
                f"request {i} needs {int(prompts[i]) + outputs[i]} tokens of KV but the cache holds "
                f"{self.num_blocks * self.block_size}; truncate with --max-context/--max-gen"
            )

        first_sched = np.full(n, np.nan)
        first_token = np.full(n, np.nan)
        finish = np.full(n, np.nan)
        last_token = [0.0] * n
        tbt = array("d")
        iter_ms = array("d")
        views: list[Optional[RequestView]] = [None] * n
        planner, model = self.planner, self.exec_model
        time_one = getattr(model, "time_one", None)  # a scalar fast path, where the model has one
        execute = getattr(model, "execute_plan", None)
        release = getattr(model, "release", None)
        memory_state = getattr(model, "memory_state", None)
        on_iteration = self.on_iteration
        free = self.num_blocks
        limits = dict(token_budget=self.token_budget, max_num_seqs=self.max_num_seqs, block_size=self.block_size)

        now, nxt, done = 0.0, 0, 0
        while done < n and (max_iterations is None or len(iter_ms) < max_iterations):
            while nxt < n and arrivals[nxt] <= now:
                # The score is computed once, at arrival (the predictor ran when the workload was
                # scored), never on the scheduling path; the true length serves oracle-sjf only.
                views[nxt] = RequestView(
                    nxt, float(arrivals[nxt]), int(prompts[nxt]),
                    score=None if scores is None else scores[nxt], true_output_len=outputs[nxt],
                )
                planner.add(views[nxt])
                nxt += 1
            if len(planner) == 0:
                now = float(arrivals[nxt])  # idle until the next arrival
                continue
            mem = memory_state() if memory_state else MemoryState()
            plan = planner.schedule(now, Limits(free_blocks=free, memory=mem, **limits))
            if plan.is_empty():
                if nxt < n:
                    now = float(arrivals[nxt])
                    continue
                raise SimulationError(f"deadlock at t={now:.3f}s: nothing schedulable, {len(planner)} requests left")
            free += plan.blocks_freed - plan.blocks_allocated
            for rid in plan.admitted:
                if first_sched[rid] != first_sched[rid]:  # NaN: first admission only
                    first_sched[rid] = now
            if release:
                for rid in plan.preempted:
                    release(rid)
            if execute:
                ms = float(execute(plan))
            elif time_one:
                ms = float(time_one(plan.features))
            else:
                ms = float(model(plan.features[None, :])[0])
            iter_ms.append(ms)
            if on_iteration:
                on_iteration(plan.features, ms)
            now += ms / 1e3
            finished = []
            for rid in plan.decodes:
                tbt.append(now - last_token[rid])
                last_token[rid] = now
                if views[rid].num_generated >= outputs[rid]:
                    finished.append(rid)
            for chunk in plan.prefills:
                if chunk.completes:
                    rid = chunk.req_id
                    if first_token[rid] != first_token[rid]:
                        first_token[rid] = now
                    else:
                        tbt.append(now - last_token[rid])  # a recomputed request's next token
                    last_token[rid] = now
                    if views[rid].num_generated >= outputs[rid]:
                        finished.append(rid)
            for rid in finished:
                free += planner.finish(rid)
                if release:
                    release(rid)
                finish[rid] = now
            done += len(finished)
            if progress is not None and finished:
                progress(len(finished))

        stats = planner.stats
        info = {
            "rounds": stats.rounds,
            "avg_prefill_seqs": stats.avg_prefill_seqs,
            "avg_prefill_chunk": stats.avg_prefill_chunk,
            "avg_chunk_per_scheduled_prefill": stats.prefill_tokens / stats.prefill_seqs if stats.prefill_seqs else 0.0,
            "holds": dict(stats.holds),
            "starvation_boosts": stats.boosts,
        }
        if planner.apc is not None:
            c = planner.apc.counters
            info.update(
                blocked_by_activity_cap=c.blocked_by_activity_cap,
                blocked_by_min_chunk=c.blocked_by_min_chunk,
                warm_starts=c.warm_starts,
            )
        return SimResult(
            label=label,
            workload=workload.name,
            arrival=arrivals,
            first_scheduled=first_sched,
            first_token=first_token,
            finish=finish,
            prompt_lens=prompts,
            output_lens=np.asarray(outputs, dtype=np.int64),
            preemptions=np.asarray([v.num_preemptions if v else 0 for v in views], dtype=np.int64),
            tbt=np.frombuffer(tbt, dtype=np.float64).copy(),
            iteration_ms=np.frombuffer(iter_ms, dtype=np.float64).copy(),
            planner=info,
            wall_s=time.perf_counter() - wall0,
        )
