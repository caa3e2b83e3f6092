"""The round planner: decodes first, then prefills in policy order, each with its chunk.

One call to ``schedule`` is one iteration of a chunked-prefill engine (Sarathi's ``_schedule``):

1. Every decoding request gets one token, oldest first. When one cannot append a KV slot, the
   newest admitted request is preempted for recompute until it can (or it is itself the newest).
2. Prefill candidates are drawn in the ordering policy's order from two heaps under the same
   order: admitted requests with unfinished prefill, and waiting requests. Two heaps, not one,
   so that when admission closes (no slot, no KV) the round can still reach admitted prefills
   without walking past every waiting request: a round stays O(k log n).
3. Each candidate's chunk comes from the chunk policy (h_i, or Algorithm 1), then the APC gate.

An optional starvation guard (sarathi_ext.core.starvation: PARS's or Clairvoyant's rule) is asked
before each candidate for an overdue waiting request, which then goes ahead of the order. It keeps
its own arrival heap of the waiting requests, so it too costs O(log n) per candidate. A request
admitted that way keeps its precedence until its prefill completes (a third heap, ``boosted``,
oldest first, served before the other two): with chunked prefill, boosting only the admission
would leave its remaining chunks to starve behind better keys.

The planner owns the progress counters of its RequestViews and advances them as it plans, so an
adapter applies the plan and reports only arrivals and finishes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Optional

from .apc import ActivePrefillControl
from .chunking import ChunkPolicy, upper_bound
from .features import BatchState, MemoryState
from .ordering import FCFS, PrefillHeap, PrefillOrder
from .plan import Hold, PrefillChunk, RoundPlan
from .request import RequestView
from .starvation import StarvationGuard

ADMISSION_MODES = ("stop", "skip")


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass(frozen=True, slots=True)
class Limits:
    token_budget: int  # B_max: tokens per iteration (Sarathi's chunk_size)
    max_num_seqs: int  # S_max: admitted sequences
    free_blocks: int  # free KV blocks before this round
    block_size: int  # tokens per KV block
    memory: MemoryState = field(default_factory=MemoryState)
    # Blocks admission must leave free (Sarathi and vLLM v0 keep a 1% watermark against eviction).
    watermark_blocks: int = 0
    # Sarathi's can_append_slot asks for one free block before every decode, even one whose last
    # block still has room; True reproduces its preemption decisions exactly.
    decode_needs_free_block: bool = False


@dataclass(slots=True)
class PlannerStats:
    """Running totals over rounds (Table 10's scheduling dynamics, plus hold reasons)."""

    rounds: int = 0
    decode_tokens: int = 0
    prefill_tokens: int = 0
    prefill_seqs: int = 0
    sum_round_mean_chunk: float = 0.0  # per-round mean chunk, 0 for rounds without prefill
    preemptions: int = 0
    boosts: int = 0  # candidates served ahead of the order by the starvation guard
    holds: Counter = field(default_factory=Counter)

    def record(self, plan: RoundPlan) -> None:
        self.rounds += 1
        n = len(plan.prefills)
        tokens = plan.prefill_tokens
        self.decode_tokens += len(plan.decodes)
        self.prefill_tokens += tokens
        self.prefill_seqs += n
        self.sum_round_mean_chunk += tokens / n if n else 0.0
        self.preemptions += len(plan.preempted)
        self.boosts += len(plan.boosted)
        for _, reason in plan.held:
            self.holds[reason.value] += 1

    @property
    def avg_prefill_seqs(self) -> float:
        return self.prefill_seqs / self.rounds if self.rounds else 0.0

    @property
    def avg_prefill_chunk(self) -> float:
        """Mean over rounds of the round's mean chunk (0 when it ran no prefill); see README."""
        return self.sum_round_mean_chunk / self.rounds if self.rounds else 0.0


class RoundPlanner:
    def __init__(
        self,
        order: PrefillOrder,
        chunk: ChunkPolicy,
        apc: Optional[ActivePrefillControl] = None,
        admission: str = "stop",
        guard: Optional[StarvationGuard] = None,
    ) -> None:
        if admission not in ADMISSION_MODES:
            raise ValueError(f"admission must be one of {ADMISSION_MODES}, got {admission!r}")
        self.order = order
        self.chunk = chunk
        self.apc = apc
        # "stop" is Sarathi's rule: admission ends at the first request that does not fit.
        # "skip" looks past it for a smaller one that does.
        self.admission = admission
        self.waiting = PrefillHeap(order)
        self.guard = guard
        self.boosted = PrefillHeap(FCFS())  # admitted through the guard, prefill unfinished
        self._boosted = False  # whether the last candidate came from the guard
        self.prefilling = PrefillHeap(order)
        self.decoding: dict[Hashable, RequestView] = {}
        self.requests: dict[Hashable, RequestView] = {}
        self.stats = PlannerStats()
        self._arrivals = 0

    # -- adapter events ---------------------------------------------------------------------

    def add(self, r: RequestView) -> None:
        if r.req_id in self.requests:
            raise ValueError(f"request {r.req_id!r} was added twice")
        r._seq = self._arrivals
        self._arrivals += 1
        self.requests[r.req_id] = r
        self._push_waiting(r)

    def finish(self, req_id: Hashable) -> int:
        """Forget a finished or aborted request; returns the KV blocks it held."""
        r = self.requests.pop(req_id)
        self.decoding.pop(req_id, None)
        self.prefilling.remove(req_id)
        self.boosted.remove(req_id)
        self._remove_waiting(req_id)
        blocks, r.num_blocks, r.admitted = r.num_blocks, 0, False
        return blocks

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def num_admitted(self) -> int:
        return len(self.decoding) + len(self.prefilling) + len(self.boosted)

    # -- one round --------------------------------------------------------------------------

    def check_budget(self, token_budget: int) -> None:
        """Refuse limits under which the configured policies could never schedule a prefill."""
        if token_budget < 1:
            raise ValueError(f"token_budget: must be >= 1, got {token_budget}")
        if self.apc is not None and self.apc.l_min > token_budget:
            # Eq. 12's floor((B_max - U_t) / L_min) would be 0 in every round, and Eq. 14 then
            # refuses every request whose whole remainder fits in one chunk: a deadlock.
            raise ValueError(
                f"apc_l_min: {self.apc.l_min} exceeds the token budget {token_budget}; "
                f"the activity cap C_t would always be 0"
            )

    def schedule(self, now: float, limits: Limits) -> RoundPlan:
        self.check_budget(limits.token_budget)
        plan = RoundPlan()
        batch = BatchState(memory=limits.memory)
        free = self._schedule_decodes(plan, batch, limits)
        self._schedule_prefills(plan, batch, limits, now, free)
        plan.features = batch.features()
        self.stats.record(plan)
        return plan

    def _schedule_decodes(self, plan: RoundPlan, batch: BatchState, limits: Limits) -> int:
        bs, budget, free = limits.block_size, limits.token_budget, limits.free_blocks
        floor = 1 if limits.decode_needs_free_block else 0
        decoding = self.decoding.values()
        need_total = sum(1 for r in decoding if r.context_len % bs == 0)
        if need_total + floor <= free and len(self.decoding) <= budget:
            # Common case: all decodes fit, so their order cannot matter.
            for r in list(decoding):
                self._run_decode(r, plan, batch, bs)
            return free - need_total

        # Oldest first; the newest admitted request is the preemption victim, as in Sarathi.
        running = sorted(
            (*self.decoding.values(), *self.prefilling, *self.boosted), key=lambda r: (r.arrival_time, r._seq)
        )
        i = 0
        while i < len(running):
            r = running[i]
            i += 1
            if not r.is_decoding:
                continue
            if len(plan.decodes) >= budget:
                plan.held.append((r.req_id, Hold.BUDGET))
                continue
            need = 1 if r.context_len % bs == 0 else 0
            runs = True
            while max(need, floor) > free:
                victim = running.pop()
                free += self._preempt(victim, plan)
                if victim is r:
                    runs = False
                    break
            if runs:
                free -= need
                self._run_decode(r, plan, batch, bs)
        return free

    def _run_decode(self, r: RequestView, plan: RoundPlan, batch: BatchState, bs: int) -> None:
        if r.context_len % bs == 0:
            r.num_blocks += 1
            plan.blocks_allocated += 1
        batch.add_decode(r.context_len)
        plan.decodes.append(r.req_id)
        plan.decode_contexts.append(r.context_len)
        r.context_len += 1
        r.num_generated += 1

    def _preempt(self, r: RequestView, plan: RoundPlan) -> int:
        """Evict ``r`` for recompute: its KV is dropped and prompt plus output are prefilled again."""
        self.decoding.pop(r.req_id, None)
        self.prefilling.remove(r.req_id)
        self.boosted.remove(r.req_id)
        freed = r.num_blocks
        r.num_blocks = 0
        r.admitted = False
        r.is_decoding = False
        r.prefill_target = r.prompt_len + r.num_generated
        r.prefill_done = 0
        r.context_len = 0
        r.num_preemptions += 1
        self._push_waiting(r)
        plan.preempted.append(r.req_id)
        plan.blocks_freed += freed
        return freed

    def _push_waiting(self, r: RequestView) -> None:
        self.waiting.push(r)
        if self.guard is not None:
            self.guard.track(r)

    def _remove_waiting(self, req_id: Hashable) -> None:
        self.waiting.remove(req_id)
        if self.guard is not None:
            self.guard.untrack(req_id)

    def _next_candidate(self, admission_open: bool, now: float = 0.0) -> RequestView | None:
        self._boosted = False
        if self.boosted:
            self._boosted = True
            return self.boosted.pop()
        if admission_open and self.guard is not None:
            r = self.guard.take(now)  # an overdue waiter goes ahead of the order
            if r is not None:
                self.waiting.remove(r.req_id)
                self._boosted = True
                return r
        a = self.prefilling.peek_key()
        w = self.waiting.peek_key() if admission_open else None
        if a is None and w is None:
            return None
        if w is None or (a is not None and (self.order.admitted_first or a <= w)):
            return self.prefilling.pop()
        r = self.waiting.pop()
        if self.guard is not None:
            self.guard.untrack(r.req_id)
        return r

    def _schedule_prefills(
        self, plan: RoundPlan, batch: BatchState, limits: Limits, now: float, free: int
    ) -> None:
        budget, max_seqs, bs = limits.token_budget, limits.max_num_seqs, limits.block_size
        num_decodes = len(plan.decodes)  # |D_t|
        active = 0  # |P_t|: prefills committed to this round
        admitted = self.num_admitted  # sequences holding a slot, counted before any pop
        admission_open = True
        refused_waiting = 0
        looked_at: list[RequestView] = []
        held = plan.held
        boosted_ids: set = set()  # candidates the guard (or the boosted heap) supplied this round
        if self.guard is not None:
            self.guard.begin_round()

        while batch.scheduled_tokens < budget:
            if admission_open and refused_waiting >= max_seqs:
                # Stop walking the waiting heap after S_max refusals of any kind (no round can
                # admit more than that), which keeps a round O(k log n) even when, say, APC's
                # minimum chunk refuses everyone. Admitted prefills stay reachable.
                admission_open = False
            r = self._next_candidate(admission_open, now)
            if self._boosted:
                boosted_ids.add(r.req_id)
            if r is None:
                break
            looked_at.append(r)

            blocks = 0
            if not r.admitted:
                refusal = None
                if r.arrival_time > now:
                    refusal = Hold.NOT_ARRIVED
                elif admitted >= max_seqs:
                    refusal = Hold.NO_SLOT
                    admission_open = False  # every slot is taken: nobody else can be admitted
                else:
                    blocks = blocks_for(r.prefill_target, bs)
                    if blocks > free - limits.watermark_blocks:
                        refusal = Hold.NO_KV
                        admission_open = self.admission == "skip"
                if refusal is not None:
                    held.append((r.req_id, refusal))
                    refused_waiting += 1
                    continue

            proposed = self.chunk.choose(r.remaining, r.prefill_done, budget, batch)  # c_i*
            chunk = proposed
            reason = Hold.CHUNK_ZERO
            if self.apc is not None:
                h = upper_bound(r.remaining, budget, batch.scheduled_tokens)
                cap = self.apc.activity_cap(max_seqs, num_decodes, budget, batch.scheduled_tokens)
                chunk, reason = self.apc.gate(proposed, r.remaining, h, active, cap)
                if reason is Hold.ACTIVITY_CAP and active > 0:
                    # Neither case of Eq. 14 can admit anyone else this round.
                    held.append((r.req_id, reason))
                    break
            if chunk <= 0:
                held.append((r.req_id, reason or Hold.CHUNK_ZERO))
                refused_waiting += not r.admitted
                continue

            if not r.admitted:
                r.admitted = True
                r.num_blocks = blocks
                free -= blocks
                plan.blocks_allocated += blocks
                plan.admitted.append(r.req_id)
                if r.req_id in boosted_ids:
                    plan.boosted.append(r.req_id)
                admitted += 1
            self._run_prefill(r, chunk, plan, batch)
            active += 1

        plan.not_considered = len(self.waiting) + len(self.prefilling) + len(self.boosted)
        for r in looked_at:
            if r.is_decoding:
                self.decoding[r.req_id] = r
            elif r.admitted and r.req_id in boosted_ids:
                self.boosted.push(r)  # keeps the guard's precedence until its prefill completes
            elif r.admitted:
                self.prefilling.push(r)  # re-keyed: r_i changed (Eq. 2)
            else:
                self._push_waiting(r)

    def _run_prefill(self, r: RequestView, chunk: int, plan: RoundPlan, batch: BatchState) -> None:
        completes = r.prefill_done + chunk == r.prefill_target
        batch.add_prefill(chunk, r.prefill_done)
        plan.prefills.append(PrefillChunk(r.req_id, r.prefill_done, chunk, completes))
        r.prefill_done += chunk
        if completes:
            # The iteration that finishes the prefill samples the first output token.
            r.is_decoding = True
            r.context_len = r.prefill_target
            r.num_generated += 1
