"""The vllm.general_plugins entry point selects our scheduler without --scheduler-cls."""

import json
import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import pytest

pytest.importorskip("vllm", reason="needs the vllm wheel; build a CPU venv with scripts/vllm_test_env.sh")
pytestmark = pytest.mark.vllm

from importlib.metadata import entry_points  # noqa: E402

from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig  # noqa: E402

from sarathi_ext.vllm import ASYNC_SCHEDULER_CLS, SCHEDULER_CLS  # noqa: E402
from sarathi_ext.vllm.plugin import ENV, register  # noqa: E402
from sarathi_ext.vllm.scheduler import SarathiExtScheduler  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-model")
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "torch_dtype": "float32"}))
    return str(d)


def config(model_dir, extra=None, scheduler_cls=None):
    return VllmConfig(
        scheduler_config=SchedulerConfig(is_encoder_decoder=False, max_model_len=2048, max_num_seqs=8,
                                         max_num_batched_tokens=64, enable_chunked_prefill=True,
                                         scheduler_cls=scheduler_cls),
        model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=2048),
        cache_config=CacheConfig(block_size=16), additional_config=extra or {})


def test_register_selects_our_scheduler(model_dir, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    register()
    register()  # idempotent
    assert config(model_dir).scheduler_config.scheduler_cls is None  # untouched without a request for it
    cfg = config(model_dir, {"sarathi_ext": {"policy": "aging"}}).scheduler_config
    want = ASYNC_SCHEDULER_CLS if cfg.async_scheduling else SCHEDULER_CLS
    assert cfg.scheduler_cls == want
    if not cfg.async_scheduling:  # the CPU platform turns async scheduling off
        assert cfg.get_scheduler_cls() is SarathiExtScheduler
    monkeypatch.setenv(ENV, "1")
    assert config(model_dir).scheduler_config.scheduler_cls == want
    monkeypatch.setenv(ENV, "0")
    assert config(model_dir, {"sarathi_ext": {}}).scheduler_config.scheduler_cls is None
    monkeypatch.setenv(ENV, "1")
    explicit = "vllm.v1.core.sched.scheduler.Scheduler"
    assert config(model_dir, scheduler_cls=explicit).scheduler_config.scheduler_cls == explicit


def test_entry_point_is_declared_and_loads():
    eps = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "sarathi_ext"]
    if not eps:
        pytest.skip("sarathi_ext is installed without its vllm.general_plugins entry point (pyproject.toml)")
    assert eps[0].value == "sarathi_ext.vllm.plugin:register"
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    assert getattr(VllmConfig, "_sarathi_ext_plugin", False)
