"""Choosing the Ascend scheduler: when sarathi_ext is asked for, and refusing vLLM-Ascend's own.

Uses plain stand-in configs (only the attributes vLLM's ``VllmConfig`` has that we read) and, where
vllm imports, a real ``VllmConfig``. vLLM-Ascend itself is not imported: the feature keys are the
documented ``additional_config["scheduler_config"]`` keys (cross-checked in test_rules.py).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from _ascend_support import needs_vllm
from sarathi_ext_ascend.plugin import ASYNC_SCHEDULER_CLS, SCHEDULER_CLS, apply, select_scheduler_cls
from sarathi_ext_ascend.rules import AscendSchedulerConflict
from test_rules import ON


def fake_config(additional_config=None, async_scheduling=False, scheduler_cls=None):
    return SimpleNamespace(
        additional_config=additional_config,
        scheduler_config=SimpleNamespace(async_scheduling=async_scheduling, scheduler_cls=scheduler_cls),
    )


def test_not_requested_selects_nothing():
    assert select_scheduler_cls(fake_config()) is None
    assert select_scheduler_cls(fake_config({"scheduler_config": {}})) is None
    config = fake_config()
    assert apply(config) is None and config.scheduler_config.scheduler_cls is None


def test_not_requested_leaves_ascend_features_alone():
    """Without sarathi_ext, vLLM-Ascend's features are none of our business."""
    assert select_scheduler_cls(fake_config(ON["profiling_chunk_config"])) is None


def test_requested_by_additional_config():
    assert select_scheduler_cls(fake_config({"sarathi_ext": {"policy": "aging"}})) == SCHEDULER_CLS
    assert SCHEDULER_CLS == "sarathi_ext_ascend.scheduler.AscendSarathiExtScheduler"


def test_requested_by_env(monkeypatch):
    monkeypatch.setenv("SARATHI_EXT_SCHEDULER", "1")
    assert select_scheduler_cls(fake_config()) == SCHEDULER_CLS
    monkeypatch.setenv("SARATHI_EXT_SCHEDULER", "0")
    assert select_scheduler_cls(fake_config()) is None


def test_async_scheduling_selects_async_class():
    config = fake_config({"sarathi_ext": {}}, async_scheduling=True)
    assert apply(config) == ASYNC_SCHEDULER_CLS
    assert config.scheduler_config.scheduler_cls == "sarathi_ext_ascend.scheduler.AscendSarathiExtAsyncScheduler"


@pytest.mark.parametrize("key", sorted(ON))
def test_requested_with_ascend_feature_is_refused(key):
    config = fake_config({**ON[key], "sarathi_ext": {"policy": "aging"}})
    with pytest.raises(AscendSchedulerConflict, match=key):
        apply(config)
    assert config.scheduler_config.scheduler_cls is None


@pytest.mark.parametrize("key", sorted(ON))
def test_env_request_with_ascend_feature_is_refused(monkeypatch, key):
    monkeypatch.setenv("SARATHI_EXT_SCHEDULER", "1")
    with pytest.raises(AscendSchedulerConflict, match=key):
        select_scheduler_cls(fake_config(ON[key]))


def test_scheduler_cls_already_set_by_vllm_ascend_is_refused():
    config = fake_config({"sarathi_ext": {}}, scheduler_cls="vllm_ascend.core.dyntra_lb_scheduler.DyntraLBScheduler")
    with pytest.raises(AscendSchedulerConflict, match="DyntraLBScheduler"):
        apply(config)


def test_reapplying_is_idempotent():
    config = fake_config({"sarathi_ext": {}})
    assert apply(config) == SCHEDULER_CLS
    assert apply(config) == SCHEDULER_CLS


@needs_vllm
def test_on_a_real_vllm_config():
    from vllm.config import VllmConfig

    config = VllmConfig(additional_config={"sarathi_ext": {"policy": "aging"}})
    assert apply(config) == SCHEDULER_CLS
    assert config.scheduler_config.scheduler_cls == SCHEDULER_CLS
    bad = VllmConfig(additional_config={"sarathi_ext": {}, **ON["batch_job_sched_config"]})
    with pytest.raises(AscendSchedulerConflict, match="batch_job_sched_config"):
        apply(bad)


def test_entry_point_is_declared():
    """The installed distribution declares register() under vllm.general_plugins."""
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "sarathi_ext_ascend"]
    if not eps:
        pytest.skip("sarathi-ext-ascend is not installed (pip install -e ascend)")
    assert eps[0].value == "sarathi_ext_ascend.plugin:register"


@pytest.fixture
def registered():
    """register() on the current (CPU) platform, undone afterwards."""
    from vllm.platforms import current_platform

    from sarathi_ext_ascend.plugin import register

    platform_cls = type(current_platform)
    saved = platform_cls.__dict__.get("check_and_update_config")
    register()
    register()  # idempotent: wraps once
    try:
        yield
    finally:
        if saved is None:
            del platform_cls.check_and_update_config
        else:
            platform_cls.check_and_update_config = saved


@needs_vllm
def test_register_wraps_platform_hook_once(registered):
    from vllm.platforms import current_platform

    hook = type(current_platform).check_and_update_config
    assert getattr(hook, "_sarathi_ext_ascend_wrapped", False)
    assert not getattr(hook.__wrapped__, "_sarathi_ext_ascend_wrapped", False)


@needs_vllm
def test_registered_vllm_config_gets_our_scheduler(registered):
    from vllm.config import VllmConfig

    assert VllmConfig(additional_config={"sarathi_ext": {"policy": "aging"}}).scheduler_config.scheduler_cls in (
        SCHEDULER_CLS,
        ASYNC_SCHEDULER_CLS,
    )
    assert VllmConfig().scheduler_config.scheduler_cls is None


@needs_vllm
@pytest.mark.parametrize("key", ["profiling_chunk_config", "recompute_scheduler_enable"])
def test_registered_vllm_config_refuses_ascend_feature(registered, key):
    from vllm.config import VllmConfig

    # Raised inside VllmConfig's validation, so pydantic wraps it (a ValidationError is a ValueError).
    with pytest.raises(ValueError, match=key):
        VllmConfig(additional_config={"sarathi_ext": {}, **ON[key]})


def test_user_chosen_scheduler_cls_is_refused():
    config = fake_config({"sarathi_ext": {}}, scheduler_cls="my_pkg.MyScheduler")
    with pytest.raises(ValueError, match="my_pkg.MyScheduler"):
        apply(config)


def test_generic_sarathi_ext_scheduler_is_upgraded():
    config = fake_config({"sarathi_ext": {}}, scheduler_cls="sarathi_ext.vllm.SarathiExtScheduler")
    assert apply(config) == SCHEDULER_CLS
