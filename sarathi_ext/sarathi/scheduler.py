"""AGING_SARATHI: Sarathi's chunked-prefill scheduler, with each round decided by sarathi_ext.core.

The core's RoundPlanner decides; this class translates. Each Sarathi ``Sequence`` gets a
``RequestView`` when it is added, and ``_schedule`` asks the planner for one round under Sarathi's
limits (token budget ``chunk_size``, ``max_num_seqs``, the block manager's free blocks and
watermark, and Sarathi's "a decode needs one free block" rule), then applies the plan through
Sarathi's own methods, in upstream's order:

  1. ``_preempt`` each victim (newest admitted first): its blocks are freed and it goes back to the
     front of ``waiting``; the sequence manager resets it for recompute, as upstream.
  2. ``_append_slot`` for each decode, oldest first.
  3. ``_allocate`` each newly admitted request (blocks for the whole prompt), and a prompt chunk of
     the planned size for each prefill, in the policy's order.

The workers' sequence managers mirror this allocation (allocate on first schedule, append_slot
after), so they need no change. The planner advances its views as it plans; ``free_finished_seqs``
reports finishes back to it.

With ``policy=fcfs, chunk=static, admission=stop`` this makes exactly Sarathi's decisions
(tests/test_sarathi_scheduler.py checks it step by step). Where it differs from upstream:

- ``admission=skip`` admits a later request when an earlier one does not fit in the KV cache;
  upstream always stops at the first that does not fit.
- A prompt longer than ``max_model_len`` is ignored as soon as it has arrived; upstream ignores it
  only when it reaches the front of the waiting queue.
- When more sequences decode than ``chunk_size`` tokens allow, the excess decodes wait a round;
  upstream schedules them all and then computes negative prefill chunks.
- Pipeline parallelism is refused at start-up: Sarathi then schedules a micro-batch while earlier
  ones are still running, and the planner has no notion of in-flight requests yet.
"""

import time
from typing import Dict, List, Optional

from sarathi.core.datatypes.scheduler_output import SchedulerOutputs
from sarathi.core.datatypes.sequence import Sequence, SequenceScheduleMetadata
from sarathi.core.datatypes.sequence_status import SequenceStatus
from sarathi.core.scheduler.sarathi_scheduler import SarathiScheduler
from sarathi.logger import init_logger

from sarathi_ext.core import Limits, RequestView, RoundPlan, build_planner

from .config import FLAG_PREFIX, AgingSarathiSchedulerConfig
from ..step_profiler import StepProfiler

logger = init_logger(__name__)


class AgingSarathiScheduler(SarathiScheduler):
    # Sarathi's clock: arrival times are time.monotonic() values. A test may replace it.
    clock = staticmethod(time.monotonic)

    def __init__(self, model_config, scheduler_config: AgingSarathiSchedulerConfig, cache_config,
                 parallel_config) -> None:
        if parallel_config.pipeline_parallel_size != 1:
            raise ValueError(
                f"AGING_SARATHI supports pipeline_parallel_size 1 only (tensor parallelism is fine), got "
                f"{parallel_config.pipeline_parallel_size}; pass --parallel_config_pipeline_parallel_size 1")
        super().__init__(model_config, scheduler_config, cache_config, parallel_config)
        policy = scheduler_config.policy_config()
        predictor = self._load_predictor(scheduler_config) if policy.chunk == "lprs" else None
        self.planner = build_planner(policy, predictor)
        self.planner.check_budget(self.chunk_size)  # e.g. APC's L_min > chunk_size: refuse now
        self.policy_label = policy.label()
        self._seqs: Dict[str, Sequence] = {}
        self._too_long: List[Sequence] = []  # to be ignored once arrived (never given to the planner)
        self.last_plan: Optional[RoundPlan] = None
        self.profiler: Optional[StepProfiler] = None
        if scheduler_config.profile_csv:
            self.profiler = StepProfiler(scheduler_config.profile_csv, {
                "scheduler": "AGING_SARATHI", "policy": self.policy_label,
                "model": getattr(model_config, "model", None),
                "tensor_parallel_size": parallel_config.tensor_parallel_size,
                "chunk_size": self.chunk_size, "max_num_seqs": scheduler_config.max_num_seqs,
                "block_size": cache_config.block_size, "num_gpu_blocks": cache_config.num_gpu_blocks,
                "latency": "engine process: schedule() returned -> on_step_completed()",
            })
        logger.info(f"AGING_SARATHI scheduler: {self.policy_label}, admission={policy.admission}")

    @staticmethod
    def _load_predictor(config: AgingSarathiSchedulerConfig):
        from predictors.latency.artifact import load_predictor

        try:
            return load_predictor(config.lprs_predictor, device=config.lprs_device)
        except ValueError as e:
            raise ValueError(f"{FLAG_PREFIX}lprs_predictor: {e}") from None

    # -- arrivals and finishes ------------------------------------------------------------------

    def add_seq(self, seq: Sequence) -> None:
        super().add_seq(seq)  # waiting.append: Sarathi counts unfinished work from its lists
        self._seqs[seq.seq_id] = seq
        if seq.get_len() > self.prompt_limit:
            self._too_long.append(seq)
            return
        self.planner.add(RequestView(seq.seq_id, seq.arrival_time, seq.get_prompt_len()))

    def free_finished_seqs(self) -> None:
        still_running = []
        for seq in self.running:
            if seq.is_finished():
                self._free_seq(seq)
                self.planner.finish(seq.seq_id)
                del self._seqs[seq.seq_id]
            else:
                still_running.append(seq)
        self.running = still_running

    def on_step_completed(self) -> None:
        if self.profiler is not None:
            self.profiler.on_step_completed()
        super().on_step_completed()

    def _ignore_too_long(self, now: float) -> List[str]:
        ignored, keep = [], []
        for seq in self._too_long:
            if seq.arrival_time > now:
                keep.append(seq)
                continue
            logger.warning(f"Input prompt ({seq.get_len()} tokens) is too long and exceeds limit of "
                           f"{self.prompt_limit}")
            seq.set_status(SequenceStatus.FINISHED_IGNORED)
            del self._seqs[seq.seq_id]
            ignored.append(seq.seq_id)
        if ignored:
            self._too_long = keep
            gone = set(ignored)
            self.waiting = [s for s in self.waiting if s.seq_id not in gone]
        return ignored

    # -- one round ------------------------------------------------------------------------------

    def _limits(self) -> Limits:
        bm = self.block_manager
        return Limits(
            token_budget=self.chunk_size,
            max_num_seqs=self.scheduler_config.max_num_seqs,
            free_blocks=bm.get_num_free_gpu_blocks(),
            block_size=self.cache_config.block_size,
            watermark_blocks=bm.watermark_blocks,  # can_allocate's 1% reserve
            decode_needs_free_block=True,  # can_append_slot: at least one free block, always
        )

    def _schedule(self) -> SchedulerOutputs:
        now = self.clock()  # fixed for the round, as upstream
        ignored_seq_ids = self._ignore_too_long(now) if self._too_long else []
        limits = self._limits()
        plan = self.planner.schedule(now, limits)
        self.last_plan = plan
        metadata = self._apply(plan)
        self._check_blocks(limits.free_blocks, plan)
        if self.profiler is not None and metadata:
            self.profiler.on_schedule(plan.features)
        return SchedulerOutputs(
            id=self._iteration_id,
            ignored_seq_ids=ignored_seq_ids,
            preempted_seq_ids=list(plan.preempted),
            scheduled_seq_metadata_list=metadata,
        )

    def _apply(self, plan: RoundPlan) -> List[SequenceScheduleMetadata]:
        seqs = self._seqs
        for seq_id in plan.preempted:
            seq = seqs[seq_id]
            self._preempt(seq)  # frees its blocks, waiting.insert(0, seq)
            if seq.get_len() > self.prompt_limit:
                # Recompute would prefill more than the model takes; upstream ignores it on re-admission.
                self.planner.finish(seq_id)
                self._too_long.append(seq)

        metadata = []
        for seq_id in plan.decodes:
            seq = seqs[seq_id]
            assert seq.prompt_stage_processing_finished, f"planned decode {seq}"
            self._append_slot(seq)
            metadata.append(SequenceScheduleMetadata.from_sequence(seq))

        admitted = set(plan.admitted)
        preempted = set(plan.preempted)
        new_running = []
        for chunk in plan.prefills:
            seq = seqs[chunk.req_id]
            # The planner's progress counters must be Sarathi's, or the chunk lands elsewhere. A victim
            # re-admitted in the same round is reset for recompute only later, in on_schedule.
            if chunk.req_id in preempted:
                done, prompt_len = 0, seq.get_len()
            else:
                done, prompt_len = seq.get_num_prompt_tokens_stage_processed(), seq.get_prompt_len()
            assert chunk.start == done and chunk.completes == (done + chunk.tokens == prompt_len), (chunk, seq)
            if chunk.req_id in admitted:
                self._allocate(seq)  # the whole prompt's blocks, as upstream
                new_running.append(seq)
            metadata.append(SequenceScheduleMetadata.from_sequence(seq, prompt_chunk_len=chunk.tokens))

        if preempted:
            self.running = [s for s in self.running if s.seq_id not in preempted]
        if admitted:
            self.waiting = [s for s in self.waiting if s.seq_id not in admitted]
            self.running.extend(new_running)
        return metadata

    def _check_blocks(self, free_before: int, plan: RoundPlan) -> None:
        # The planner's block arithmetic and the block manager's must agree, step for step.
        expected = free_before + plan.blocks_freed - plan.blocks_allocated
        actual = self.block_manager.get_num_free_gpu_blocks()
        assert actual == expected, (
            f"AGING_SARATHI: planner expects {expected} free KV blocks after iteration {self._iteration_id}, "
            f"the block manager has {actual} (free before {free_before}, freed {plan.blocks_freed}, "
            f"allocated {plan.blocks_allocated})")
