"""vLLM V1 schedulers whose admission order, chunk sizes and activity gate come from sarathi_ext.core.

Select with ``--scheduler-cls sarathi_ext.vllm.SarathiExtScheduler`` (or the ``...AsyncScheduler``
variant) and ``--additional-config '{"sarathi_ext": {...}}'`` (see config.py), or through the
plugin (plugin.py). Everything else is upstream's ``schedule()``: this module changes vLLM at two
narrow points instead of copying its 1,100-line ``schedule()`` (vllm 0.33.0,
vllm/v1/core/sched/scheduler.py):

1. **Order: the waiting queue.** ``Scheduler.__init__`` builds ``self.waiting`` with
   ``create_request_queue(self.policy)`` (:232); we replace it after ``super().__init__()`` with a
   ``PolicyRequestQueue`` (queue.py) for aging, spf and psjf. The admission loop only peeks, pops
   and prepends (:1055, :1076, :1547, :1610), so the policy decides who is admitted next, and
   preempted requests (``_preempt_request`` prepends them, :1842) are re-inserted by key. For plain
   ``fcfs`` upstream's deque stays, so the behaviour is upstream's exactly.
   ``kv_holding_waiting`` (:236, requests that already hold KV blocks, e.g. async KV loads) stays
   upstream's: vLLM drains it before ``waiting`` in every policy.

2. **Chunk size and activity gate: ``_reserve_prefill_lookahead``** (:678-697). It is the last
   per-request adjustment of ``num_new_tokens`` before KV allocation, on both paths: running
   requests (:887; 0 means "skip this request this step", :889-907) and waiting ones (:1390; 0
   means ``skip_request``, which re-queues it, :1395-1399). Upstream uses it only for multi-module
   MTP lookahead; we call it first and then only ever lower its result, so that invariant holds.
   Every other clamp (budget, ``long_prefill_token_threshold``, max_model_len, Mamba alignment,
   encoder budget) has been applied by then, so our chunk can only be smaller than upstream's.
   There is no other per-request hook short of copying ``schedule()``.

   In the hook, for a request with unfinished prefill:
     - LPRS (chunk=lprs): ``min(n, LPRS.choose(r_i, processed, B_max, batch))`` with the core's
       Algorithm 1 on a ``BatchState`` of this step's batch so far.
     - APC (apc=true): the core's ``activity_cap`` (Eq. 12) and ``gate`` (Eq. 13-14); 0 refuses
       the chunk. Once the cap refuses with a prefill already active, every later prefill of the
       step is refused without counting, as the core planner stops its round there.
     - A non-final chunk is rounded down to a multiple of ``chunk_alignment`` (1 here; Ascend
       sets its own); a chunk that rounds to 0 is refused.

   **The batch so far, and its approximation.** vLLM schedules ``self.running`` in list order,
   decodes and prefill chunks interleaved, so when the hook runs for a prefill, decodes later in
   the list are not yet scheduled. Like the core planner (decodes first), the step's
   ``BatchState`` starts with every running request that is decoding (not
   ``request.is_prefill_chunk``), with its context length, counted once at the start of
   ``schedule()``; prefill chunks are added as the hook grants them. A granted chunk is committed
   to the batch at the next hook call only if the request really was scheduled (its status is
   RUNNING: a running request whose KV allocation failed has preempted itself; a waiting one that
   failed was never set RUNNING). The approximation: a decode that upstream does not schedule
   after all (budget exhausted, preempted later in the step, async max-token skip) is still
   counted, so U_t and |D_t| may be slightly high, never low. The profile rows (profile_csv) use
   the exact batch, rebuilt from the SchedulerOutput.

Where this differs from upstream vLLM (only when a non-default parameter is set):
- aging/spf/psjf order admissions from ``waiting``; requests already running keep upstream's
  running-list order (as the core's FCFS, ``admitted_first``), so a waiting request never jumps
  ahead of an admitted prefill's next chunk. The core planner under aging may do that.
- ``admission='skip'`` is refused at start-up: vLLM stops at the first waiting request whose KV
  blocks do not fit (scheduler.py:1454-1461), and changing that needs a copy of ``schedule()``.
- ``--scheduling-policy priority`` with a non-fcfs sarathi_ext policy is refused (two orders).
- chunk=lprs or apc need chunked prefill (``--enable-chunked-prefill``, the V1 default).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request, RequestStatus

from sarathi_ext.core.apc import ActivePrefillControl
from sarathi_ext.core.chunking import LPRS, upper_bound
from sarathi_ext.core.config import PolicyConfig
from sarathi_ext.core.features import BatchState
from sarathi_ext.core.plan import Hold

from .config import PREFIX, build_prefill_order, load_lprs_predictor, parse_additional_config
from .queue import PolicyRequestQueue
from .stats import KeyedStepProfiler

logger = logging.getLogger(__name__)


class SarathiExtSchedulerMixin:
    """Mix in before vLLM's ``Scheduler`` (or a subclass of it): ``class X(Mixin, Scheduler)``."""

    # Non-final chunks our clamp produces are rounded down to a multiple of this (Ascend: its
    # kernels' tile size). 1 = no rounding.
    chunk_alignment: int = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        vllm_config = kwargs["vllm_config"] if "vllm_config" in kwargs else args[0]
        # Parse and check before upstream allocates anything: a bad parameter fails engine start.
        self.sarathi_ext_policy, self.sarathi_ext_extras = parse_additional_config(vllm_config.additional_config)
        self._sarathi_ext_check_conflicts(vllm_config)
        predictor = None
        if self.sarathi_ext_policy.chunk == "lprs":
            predictor = load_lprs_predictor(self.sarathi_ext_extras)
        super().__init__(*args, **kwargs)

        cfg = self.sarathi_ext_policy
        extras = self.sarathi_ext_extras
        if cfg.policy != "fcfs" or extras["starvation_threshold_s"] > 0:
            assert not self.waiting, "the waiting queue must be empty at construction"
            self.waiting = PolicyRequestQueue(build_prefill_order(cfg), extras["starvation_threshold_s"])
        self.sarathi_ext_lprs: Optional[LPRS] = None
        if predictor is not None:
            self.sarathi_ext_lprs = LPRS(predictor, cfg.lprs_target_ms, int(cfg.lprs_delta),
                                         cfg.lprs_lambda_u, cfg.lprs_lambda_o)
        self.sarathi_ext_apc: Optional[ActivePrefillControl] = (
            ActivePrefillControl(int(cfg.apc_c_max), int(cfg.apc_l_min)) if cfg.apc else None)
        # The per-chunk hook runs when any clamp is on; an alignment (Ascend) is a clamp too.
        self._sx_clamps = (self.sarathi_ext_lprs is not None or self.sarathi_ext_apc is not None
                           or self.chunk_alignment > 1)
        self._sx_batch = BatchState()
        self._sx_num_decodes = 0
        self._sx_pending: Optional[tuple[Request, int, int]] = None
        self._sx_cap_closed = False
        # Running totals: chunks LPRS made smaller than upstream's, chunks refused (APC or
        # alignment), chunks shortened by alignment. APC's own counters are on sarathi_ext_apc.
        self.sarathi_ext_counters = {"lprs_clamped": 0, "refused": 0, "aligned": 0}
        self.sarathi_ext_profiler: Optional[KeyedStepProfiler] = None
        if extras["profile_csv"]:
            self.sarathi_ext_profiler = KeyedStepProfiler(extras["profile_csv"], {
                "scheduler": type(self).__name__, "policy": cfg.label(),
                "model": getattr(vllm_config.model_config, "model", None),
                "tensor_parallel_size": vllm_config.parallel_config.tensor_parallel_size,
                "max_num_batched_tokens": self.max_num_scheduled_tokens,
                "max_num_seqs": self.max_num_running_reqs, "block_size": self.block_size,
                "latency": "engine core: schedule() returned -> update_from_output() entered",
            })
        logger.info("sarathi_ext scheduler %s: %s (queue %s)", type(self).__name__, cfg.label(),
                    type(self.waiting).__name__)

    # -- start-up checks ----------------------------------------------------------------------

    def _sarathi_ext_check_conflicts(self, vllm_config) -> None:
        """Refuse vLLM settings our policy cannot honour. Subclasses may extend (call super)."""
        cfg: PolicyConfig = self.sarathi_ext_policy
        sched = vllm_config.scheduler_config
        align = type(self).chunk_alignment
        if not (isinstance(align, int) and align >= 1):
            raise ValueError(f"{type(self).__name__}.chunk_alignment: must be an integer >= 1, got {align!r}")
        if cfg.admission != "stop":
            raise ValueError(
                f"{PREFIX}admission: {cfg.admission!r} is not supported on vLLM, which stops admitting at "
                f"the first waiting request whose KV blocks do not fit; use 'stop'")
        if cfg.policy != "fcfs" and str(getattr(sched.policy, "value", sched.policy)) == "priority":
            raise ValueError(
                f"{PREFIX}policy: {cfg.policy!r} replaces vLLM's waiting queue and cannot be combined "
                f"with --scheduling-policy priority; use --scheduling-policy fcfs")
        if (cfg.chunk == "lprs" or cfg.apc) and not sched.enable_chunked_prefill:
            field = "chunk" if cfg.chunk == "lprs" else "apc"
            raise ValueError(f"{PREFIX}{field}: needs chunked prefill; pass --enable-chunked-prefill")
        budget = sched.max_num_scheduled_tokens or sched.max_num_batched_tokens
        if cfg.apc and cfg.apc_l_min > budget:
            raise ValueError(
                f"{PREFIX}apc_l_min: {cfg.apc_l_min} exceeds the token budget {budget} "
                f"(--max-num-batched-tokens); the activity cap would always be 0")

    # -- one step -----------------------------------------------------------------------------

    def schedule(self, *args: Any, **kwargs: Any):
        if isinstance(self.waiting, PolicyRequestQueue):
            self.waiting.unpin()
        if self._sx_clamps:
            self._sx_start_step()
        output = super().schedule(*args, **kwargs)
        self._sx_pending = None
        if self.sarathi_ext_profiler is not None and output.total_num_scheduled_tokens > 0:
            self.sarathi_ext_profiler.on_schedule_keyed(id(output), self.sarathi_ext_step_features(output))
        return output

    def update_from_output(self, scheduler_output, model_runner_output):
        if self.sarathi_ext_profiler is not None:
            self.sarathi_ext_profiler.on_step_completed_keyed(id(scheduler_output))
        return super().update_from_output(scheduler_output, model_runner_output)

    def shutdown(self) -> None:
        if self.sarathi_ext_profiler is not None:
            self.sarathi_ext_profiler.close()
        super().shutdown()

    def _sx_start_step(self) -> None:
        batch = BatchState()
        for request in self.running:
            if not request.is_prefill_chunk:
                batch.add_decode(request.num_computed_tokens)
        self._sx_batch = batch
        self._sx_num_decodes = batch.decode_tokens
        self._sx_pending = None
        self._sx_cap_closed = False

    def _sx_commit_pending(self) -> None:
        pending, self._sx_pending = self._sx_pending, None
        if pending is not None:
            request, chunk, processed = pending
            if request.status == RequestStatus.RUNNING:
                self._sx_batch.add_prefill(chunk, processed)

    def _reserve_prefill_lookahead(self, request: Request, num_computed_tokens: int, num_new_tokens: int) -> int:
        n = super()._reserve_prefill_lookahead(request, num_computed_tokens, num_new_tokens)
        if not self._sx_clamps or n <= 0:
            return n
        self._sx_commit_pending()
        if request.status == RequestStatus.RUNNING and not request.is_prefill_chunk:
            return n  # a decode: counted in the batch at the start of the step
        remaining = request.num_tokens - num_computed_tokens
        if remaining <= 0:
            return n
        chunk = self.sarathi_ext_chunk(remaining, num_computed_tokens, n)
        if chunk > 0:
            self._sx_pending = (request, chunk, num_computed_tokens)
        return chunk

    def sarathi_ext_chunk(self, remaining: int, processed: int, n: int) -> int:
        """The chunk for a prefill with ``remaining`` tokens left and ``processed`` done, when
        upstream would schedule ``n`` (> 0), against this step's batch so far. 0 refuses."""
        batch = self._sx_batch
        budget = self.max_num_scheduled_tokens
        proposed = n
        if self.sarathi_ext_lprs is not None:
            proposed = min(n, self.sarathi_ext_lprs.choose(remaining, processed, budget, batch))
            if proposed < n:
                self.sarathi_ext_counters["lprs_clamped"] += 1
        chunk = proposed
        apc = self.sarathi_ext_apc
        if apc is not None:
            if self._sx_cap_closed:
                chunk = 0
            else:
                committed = batch.scheduled_tokens
                h = min(n, upper_bound(remaining, budget, committed))
                cap = apc.activity_cap(self.max_num_running_reqs, self._sx_num_decodes, budget, committed)
                chunk, reason = apc.gate(proposed, remaining, h, batch.num_prefills, cap)
                if reason is Hold.ACTIVITY_CAP and batch.num_prefills > 0:
                    self._sx_cap_closed = True  # the core planner ends its round here
        align = self.chunk_alignment
        if align > 1 and 0 < chunk < remaining and chunk % align:
            chunk -= chunk % align
            self.sarathi_ext_counters["aligned"] += 1
        if chunk <= 0:
            self.sarathi_ext_counters["refused"] += 1
            return 0
        return chunk

    # -- statistics ---------------------------------------------------------------------------

    def sarathi_ext_step_features(self, output) -> np.ndarray:
        """The 16 features of the batch ``schedule()`` just returned (exact, from its output)."""
        batch = BatchState()
        for req_id, n in output.num_scheduled_tokens.items():
            request = self.requests[req_id]
            before = request.num_computed_tokens - n  # schedule() already advanced it
            if request.num_output_tokens > 0 and before >= request.num_tokens - 1:
                batch.add_decode(before)
            else:
                batch.add_prefill(n, before)
        return batch.features()

    def sarathi_ext_stats(self) -> dict[str, Any]:
        out = dict(self.sarathi_ext_counters)
        if self.sarathi_ext_apc is not None:
            c = self.sarathi_ext_apc.counters
            out.update(apc_blocked_by_activity_cap=c.blocked_by_activity_cap,
                       apc_blocked_by_min_chunk=c.blocked_by_min_chunk, apc_warm_starts=c.warm_starts)
        if self.sarathi_ext_lprs is not None:
            out["lprs_predictor_calls"] = self.sarathi_ext_lprs.predictor_calls
        if isinstance(self.waiting, PolicyRequestQueue):
            out["starvation_boosts"] = self.waiting.boosts
        return out


class SarathiExtScheduler(SarathiExtSchedulerMixin, Scheduler):
    """vLLM's synchronous ``Scheduler`` with sarathi_ext ordering, LPRS and APC."""


class SarathiExtAsyncScheduler(SarathiExtSchedulerMixin, AsyncScheduler):
    """vLLM's ``AsyncScheduler`` (async scheduling) with sarathi_ext ordering, LPRS and APC."""


__all__ = ["SarathiExtAsyncScheduler", "SarathiExtScheduler", "SarathiExtSchedulerMixin"]
