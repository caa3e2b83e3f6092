"""The Ascend scheduler, built for real on CPU (vllm wheel, conftest's NPU stubs, no vLLM-Ascend).

A fake model runner returns one token per request whose prefill is done, as in vLLM's own
scheduler tests. Block size 128 gives Ascend's alignment 128; the budget is 300 tokens.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _ascend_support import needs_adapter
from test_rules import ON

pytestmark = needs_adapter

BLOCK, NUM_BLOCKS, BUDGET = 128, 200, 300
TINY_MODEL = Path(os.environ.get("SARATHI_EXT_TINY_MODEL", Path(__file__).parent / "tiny-model"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A config.json-only Llama-shaped model: enough for ModelConfig, no weights, no tokenizer."""
    import json

    path = tmp_path_factory.mktemp("tiny-model")
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
        "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 4096,
        "torch_dtype": "float32",
    }))
    return str(path)


def make_scheduler(tiny_model, sarathi_ext=None, scheduler_extra=None, cls=None):
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    from sarathi_ext_ascend.scheduler import AscendSarathiExtScheduler

    additional = {"sarathi_ext": sarathi_ext if sarathi_ext is not None else {"policy": "aging"}}
    additional.update(scheduler_extra or {})
    vllm_config = VllmConfig(
        scheduler_config=SchedulerConfig(is_encoder_decoder=False, max_model_len=2048, max_num_seqs=8,
                                         max_num_batched_tokens=BUDGET, enable_chunked_prefill=True),
        model_config=ModelConfig(model=tiny_model, skip_tokenizer_init=True, dtype="float32", max_model_len=2048),
        cache_config=CacheConfig(block_size=BLOCK),
        additional_config=additional,
    )
    vllm_config.cache_config.num_gpu_blocks = NUM_BLOCKS
    kv = KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32))])
    cls = cls or AscendSarathiExtScheduler
    return cls(vllm_config=vllm_config, kv_cache_config=kv, structured_output_manager=StructuredOutputManager(vllm_config),
               block_size=BLOCK, log_stats=True)


def add(sched, rid, n):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    sched.add_request(Request(request_id=rid, prompt_token_ids=[5] * n, pooling_params=None,
                              sampling_params=SamplingParams(max_tokens=2, ignore_eos=True)))


def step(sched):
    from vllm.v1.outputs import ModelRunnerOutput

    out = sched.schedule()
    ids = list(out.num_scheduled_tokens)
    sampled = [[7] if sched.requests[r].num_computed_tokens >= sched.requests[r].num_prompt_tokens else [] for r in ids]
    sched.update_from_output(out, ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                                    sampled_token_ids=sampled))
    return dict(out.num_scheduled_tokens)


def test_alignment_comes_from_block_size(tiny_model):
    sched = make_scheduler(tiny_model)
    assert sched.chunk_alignment == 128


def test_non_final_chunk_rounds_down_final_stays_exact(tiny_model):
    """Budget 300, alignment 128: a 1000-token prompt gets 256, not 300, per step; once the rest
    (1000 - 3*256 = 232) fits the budget it is the final chunk and is not rounded."""
    sched = make_scheduler(tiny_model, {"policy": "fcfs"})
    add(sched, "long", 1000)
    assert step(sched) == {"long": 256}
    assert step(sched) == {"long": 256}
    assert step(sched) == {"long": 256}
    assert step(sched) == {"long": 232}


def test_short_final_chunk_of_37_is_not_rounded(tiny_model):
    sched = make_scheduler(tiny_model, {"policy": "fcfs"})
    add(sched, "short", 37)
    assert step(sched) == {"short": 37}


def test_aging_order_with_alignment(tiny_model):
    """Arrived together, aging puts the shorter prompt first (beta < 0); the long one gets the
    rest of the budget, 300 - 37 = 263, rounded down to 256. Under FCFS the long one goes first."""
    sched = make_scheduler(tiny_model, {"policy": "aging", "aging_alpha": 0.001, "aging_beta": -1.0})
    add(sched, "long", 1000)
    add(sched, "short", 37)
    assert step(sched) == {"short": 37, "long": 256}

    fcfs = make_scheduler(tiny_model, {"policy": "fcfs"})
    add(fcfs, "long", 1000)
    add(fcfs, "short", 37)
    # FCFS: long first, 300 -> 256; the 44 tokens left hold all of short (37, its final chunk).
    assert step(fcfs) == {"long": 256, "short": 37}


def test_async_scheduler_builds(tiny_model):
    from sarathi_ext_ascend.scheduler import AscendSarathiExtAsyncScheduler

    sched = make_scheduler(tiny_model, cls=AscendSarathiExtAsyncScheduler)
    assert sched.chunk_alignment == 128


@pytest.mark.parametrize("key", sorted(ON))
def test_scheduler_refuses_ascend_feature(tiny_model, key):
    """Also at engine start, in case scheduler_cls was set by hand (--scheduler-cls)."""
    with pytest.raises(ValueError, match=key):
        make_scheduler(tiny_model, scheduler_extra=ON[key])


def test_rebuilt_on_upstream_when_based_on_balance_scheduler():
    """Under vLLM-Ascend, ``Scheduler`` may be its BalanceScheduler; we rebuild on vLLM's own."""
    from vllm.v1.core.sched.scheduler import Scheduler

    from sarathi_ext.vllm import SarathiExtSchedulerMixin
    from sarathi_ext_ascend.scheduler import _without_vllm_ascend_bases

    BalanceScheduler = type("BalanceScheduler", (Scheduler,), {"__module__": "vllm_ascend.patch.platform.patch_balance_schedule"})
    OnBalance = type("SarathiExtScheduler", (SarathiExtSchedulerMixin, BalanceScheduler), {"__module__": "sarathi_ext.vllm.scheduler"})
    rebuilt = _without_vllm_ascend_bases(OnBalance)
    assert rebuilt.__mro__[1:] == (SarathiExtSchedulerMixin, *Scheduler.__mro__)
    assert BalanceScheduler not in rebuilt.__mro__
    plain = type("SarathiExtScheduler", (SarathiExtSchedulerMixin, Scheduler), {})
    assert _without_vllm_ascend_bases(plain) is plain
