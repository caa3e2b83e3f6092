"""A CPU stand-in for Sarathi's engine loop: a real scheduler and real sequence managers, no model.

``CpuEngine.step`` does what ``BaseLLMEngine.step`` does around the model: ``schedule()``, the
engine sequence manager's ``on_schedule``, one sampled token per scheduled sequence, then
``on_step_completed`` on the sequence manager and the scheduler. Sequences move through Sarathi's
own state machine (WAITING -> RUNNING -> PAUSED -> ..., ``reset_for_recompute`` on preemption).
A ``WorkerSequenceManager`` replays every step on deep copies of the sequences, as each GPU worker
does, so its mirrored block manager (and its ``can_allocate`` assertion) checks that the
scheduler's allocations can be replayed on a worker.

Any registered scheduler type runs here: upstream ``SARATHI`` and our ``AGING_SARATHI`` alike,
which is how the tests compare them. Nothing here needs CUDA, a tokenizer or model weights.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, List, Optional

from sarathi.config import CacheConfig, ParallelConfig
from sarathi.core.datatypes.sampling_params import SamplingParams
from sarathi.core.datatypes.sequence import SamplerOutput, Sequence
from sarathi.core.scheduler.scheduler_registry import SchedulerRegistry
from sarathi.core.sequence_manager.base_sequence_manager import BaseSequenceManager
from sarathi.core.sequence_manager.worker_sequence_manager import WorkerSequenceManager
from sarathi.metrics.metrics_store import MetricsStore

from . import register

VOCAB = 32000


class EngineSequenceManager(BaseSequenceManager):
    """Sarathi's engine-side manager without the tokenizer: detokenising is all it adds."""

    def _on_append_token(self, seq: Sequence) -> None:
        pass

    def _get_block_table(self, seq: Sequence) -> List[int]:
        return []


@dataclass
class StepRecord:
    """What one step decided, in Sarathi's terms."""

    prefills: list = field(default_factory=list)  # (seq_id, prompt_chunk_len), in batch order
    decodes: list = field(default_factory=list)  # seq_ids, in batch order
    preempted: list = field(default_factory=list)
    ignored: list = field(default_factory=list)
    finished: list = field(default_factory=list)  # seq_ids freed at the end of the step
    free_blocks: int = 0  # the scheduler's free KV blocks after the step

    def decisions(self) -> tuple:
        """The decisions, order-free where order carries no meaning (decodes each take one token)."""
        return (self.prefills, sorted(self.decodes), self.preempted, self.ignored)


def build_scheduler(scheduler_config, *, num_gpu_blocks: int, block_size: int = 16,
                    max_model_len: int = 4096, pipeline_parallel_size: int = 1):
    """A scheduler of ``scheduler_config``'s type, built the way BaseLLMEngine builds it (through
    SchedulerRegistry), and the config namespace a sequence manager needs beside it."""
    register()
    if not hasattr(MetricsStore, "_instance"):
        # BaseScheduler keeps MetricsStore.get_instance() but never uses it while scheduling;
        # the engine creates the store first, and here there is none.
        MetricsStore._instance = None
    # BaseScheduler reads only max_model_len; a real ModelConfig would fetch an HF config.
    model_config = SimpleNamespace(model="cpu-harness", max_model_len=max_model_len)
    cache_config = CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks)
    parallel_config = ParallelConfig(pipeline_parallel_size=pipeline_parallel_size, tensor_parallel_size=1)
    system = SimpleNamespace(model_config=model_config, cache_config=cache_config,
                             parallel_config=parallel_config, scheduler_config=scheduler_config)
    scheduler = SchedulerRegistry.get(
        scheduler_config.get_type(), model_config, scheduler_config, cache_config, parallel_config)
    return scheduler, system


class CpuEngine:
    def __init__(self, scheduler_config, *, num_gpu_blocks: int, block_size: int = 16,
                 max_model_len: int = 4096, seed: int = 0, clock: Optional[Callable[[], float]] = None,
                 mirror_worker: bool = True) -> None:
        self.scheduler, system = build_scheduler(
            scheduler_config, num_gpu_blocks=num_gpu_blocks, block_size=block_size, max_model_len=max_model_len)
        if clock is not None:
            self.scheduler.clock = clock  # AGING_SARATHI only; upstream reads time.monotonic()
        self.seq_manager = EngineSequenceManager(system)
        self.worker = WorkerSequenceManager(system) if mirror_worker else None
        self.block_size = block_size
        self._rng = random.Random(seed)
        self._new_seqs: List[Sequence] = []
        self._next_id = 0

    def add_request(self, prompt_len: int, max_tokens: int, arrival_time: float,
                    seq_id: Optional[str] = None) -> Sequence:
        if seq_id is None:
            seq_id = str(self._next_id)
            self._next_id += 1
        params = SamplingParams(ignore_eos=True, max_tokens=max_tokens, temperature=0)
        prompt = [self._rng.randrange(1, VOCAB) for _ in range(prompt_len)]
        seq = Sequence(seq_id, None, prompt, self.block_size, 0, arrival_time, params)
        # The order of BaseLLMEngine.add_request: the workers get an untouched copy.
        self.seq_manager.add_seq(seq)
        self._new_seqs.append(copy.deepcopy(seq))
        self.scheduler.add_seq(seq)
        return seq

    def step(self) -> StepRecord:
        outputs = self.scheduler.schedule()
        record = StepRecord(preempted=list(outputs.preempted_seq_ids), ignored=list(outputs.ignored_seq_ids))
        if outputs.is_empty():
            # BaseLLMEngine.step returns here: no on_schedule, no on_step_completed.
            record.free_blocks = self.scheduler.block_manager.get_num_free_gpu_blocks()
            return record
        for m in outputs.scheduled_seq_metadata_list:
            if m.is_prompt:
                record.prefills.append((m.seq_id, m.prompt_chunk_len))
            else:
                record.decodes.append(m.seq_id)
        self.seq_manager.on_schedule(outputs)
        if self.worker is not None:
            for seq in self._new_seqs:
                self.worker.add_seq(seq)
            self.worker.on_schedule(outputs)
        self._new_seqs = []
        samples = [SamplerOutput(m.seq_id, self._rng.randrange(1, VOCAB))
                   for m in outputs.scheduled_seq_metadata_list]
        if self.worker is not None:
            self.worker.on_step_completed(outputs, samples)
        running_before = {s.seq_id for s in self.scheduler.running}
        self.seq_manager.on_step_completed(outputs, samples)
        self.scheduler.on_step_completed()
        record.finished = sorted(running_before - {s.seq_id for s in self.scheduler.running})
        record.free_blocks = self.scheduler.block_manager.get_num_free_gpu_blocks()
        return record

    def has_unfinished(self) -> bool:
        return bool(self.scheduler.has_unfinished_seqs())


def write_linear_predictor(path, base_ms: float = 5.0, per_prefill_token_ms: float = 0.1,
                           per_decode_ms: float = 0.05):
    """A real predictor artifact (TorchScript + sidecar) whose MLP computes exactly
    ``base + a*prefill_tokens + b*decode_tokens``: LPRS then has a known latency model on CPU."""
    import torch

    from predictors.latency.artifact import export
    from predictors.latency.model import LatencyMLP
    from sarathi_ext.core.features import IDX

    model = LatencyMLP(hidden_sizes=(2,), dropout=0.0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        first, last = model.net[0], model.net[-1]
        first.weight[0, IDX["prefill_tokens"]] = per_prefill_token_ms  # features are >= 0: ReLU passes
        first.weight[1, IDX["decode_tokens"]] = per_decode_ms
        last.weight[0, :] = 1.0
        model.y_mean.fill_(base_ms)
    return export(model, path, provenance={"source": "sarathi_ext.sarathi.harness", "kind": "linear"},
                  metrics={})


def write_model_config(directory, max_position_embeddings: int = 4096):
    """A tiny Llama config.json, so Sarathi's ModelConfig (and so a full CLI parse) builds offline."""
    import json
    from pathlib import Path

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_hidden_layers": 2, "max_position_embeddings": max_position_embeddings,
        "vocab_size": VOCAB, "torch_dtype": "float16",
    }))
    return directory
