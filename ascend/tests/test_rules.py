"""The Ascend rules: chunk alignment and the vLLM-Ascend scheduler features we refuse.

These need neither vllm nor vLLM-Ascend, except ``test_matches_vllm_ascend_reading``, which
imports vLLM-Ascend's own ``vllm_ascend.ascend_config.SchedulerConfig`` from the source tree (under
conftest's stubs) to check that we read each key exactly as vLLM-Ascend does.
"""

from __future__ import annotations

import pytest

from _ascend_support import needs_ascend_src
from sarathi_ext_ascend.rules import (
    ASCEND_SCHEDULER_FEATURES,
    FEATURES_BY_KEY,
    AscendSchedulerConflict,
    ascend_chunk_alignment,
    check_no_ascend_scheduler_features,
    check_scheduler_cls_not_ascend,
    enabled_features,
)


@pytest.mark.parametrize(
    "block_size, expected",
    [(None, 128), (16, 64), (32, 64), (64, 64), (128, 128), (256, 256)],
)
def test_alignment_is_max_of_block_size_and_64(block_size, expected):
    assert ascend_chunk_alignment(block_size) == expected


def test_alignment_rejects_nonpositive_block_size():
    with pytest.raises(ValueError, match="block_size"):
        ascend_chunk_alignment(0)


# One config per feature, in the form vLLM-Ascend documents (additional_config["scheduler_config"]).
ON = {
    "recompute_scheduler_enable": {"scheduler_config": {"recompute_scheduler_enable": True}},
    "short_request_first_config": {"scheduler_config": {"short_request_first_config": {"enabled": True}}},
    "dyntra_lb_config": {"scheduler_config": {"dyntra_lb_config": {"enabled": True}}},
    "profiling_chunk_config": {"scheduler_config": {"profiling_chunk_config": {"enabled": True}}},
    "batch_job_sched_config": {"scheduler_config": {"batch_job_sched_config": {"enabled": True}}},
    "enable_balance_scheduling": {"scheduler_config": {"enable_balance_scheduling": True}},
}


def test_every_feature_has_a_case():
    assert sorted(ON) == sorted(f.key for f in ASCEND_SCHEDULER_FEATURES)


@pytest.mark.parametrize("key", sorted(ON))
def test_each_feature_is_refused_with_its_key(key):
    config = {**ON[key], "sarathi_ext": {"policy": "aging"}}
    with pytest.raises(AscendSchedulerConflict) as info:
        check_no_ascend_scheduler_features(config)
    message = str(info.value)
    assert "\n" not in message
    assert f'additional_config["scheduler_config"]["{key}"]' in message
    assert message.startswith("sarathi_ext cannot be combined with vLLM-Ascend's ")


def test_exact_message_for_profiling_chunk():
    with pytest.raises(AscendSchedulerConflict) as info:
        check_no_ascend_scheduler_features(ON["profiling_chunk_config"])
    assert str(info.value) == (
        "sarathi_ext cannot be combined with vLLM-Ascend's "
        'additional_config["scheduler_config"]["profiling_chunk_config"]["enabled"]: vLLM-Ascend sets '
        "scheduler_cls to ProfilingChunkScheduler (vllm_ascend/platform.py:1149-1153), which would replace "
        "the sarathi_ext scheduler; turn off profiling_chunk_config or remove sarathi_ext."
    )


@pytest.mark.parametrize(
    "config",
    [
        None,
        {},
        {"sarathi_ext": {}},
        {"scheduler_config": {}},
        {"scheduler_config": {"profiling_chunk_config": {"enabled": False}}},
        {"scheduler_config": {"recompute_scheduler_enable": False, "enable_balance_scheduling": False}},
        {"scheduler_config": {"short_request_first_config": {"threshold": 128}}},  # present but not enabled
        {"some_other_ascend_option": True},
    ],
)
def test_features_off_pass(config):
    check_no_ascend_scheduler_features(config)
    assert enabled_features(config) == []


def test_deprecated_top_level_keys_count():
    """vLLM-Ascend still reads these at the top level (with a deprecation warning)."""
    assert [f.key for f in enabled_features({"profiling_chunk_config": {"enabled": True}})] == ["profiling_chunk_config"]
    assert [f.key for f in enabled_features({"recompute_scheduler_enable": True})] == ["recompute_scheduler_enable"]


def test_dyntra_lb_is_read_only_under_scheduler_config():
    assert enabled_features({"dyntra_lb_config": {"enabled": True}}) == []


def test_scheduler_config_key_wins_over_top_level():
    config = {"profiling_chunk_config": {"enabled": True}, "scheduler_config": {"profiling_chunk_config": {}}}
    assert enabled_features(config) == []


def test_balance_env_fallback(monkeypatch):
    monkeypatch.setenv("VLLM_ASCEND_BALANCE_SCHEDULING", "1")
    with pytest.raises(AscendSchedulerConflict, match=r"enable_balance_scheduling.*VLLM_ASCEND_BALANCE_SCHEDULING"):
        check_no_ascend_scheduler_features({"sarathi_ext": {}})
    # The config key wins over the environment, as in vLLM-Ascend.
    check_no_ascend_scheduler_features({"scheduler_config": {"enable_balance_scheduling": False}})


def test_first_feature_in_platform_order_is_named():
    config = {"scheduler_config": {**ON["batch_job_sched_config"]["scheduler_config"], **ON["profiling_chunk_config"]["scheduler_config"]}}
    with pytest.raises(AscendSchedulerConflict, match="profiling_chunk_config"):
        check_no_ascend_scheduler_features(config)


@pytest.mark.parametrize(
    "cls", ["vllm_ascend.core.recompute_scheduler.RecomputeScheduler", "vllm_ascend.core.scheduler_profiling_chunk.ProfilingChunkScheduler"]
)
def test_ascend_scheduler_cls_is_refused(cls):
    with pytest.raises(AscendSchedulerConflict, match=cls.replace(".", r"\.")):
        check_scheduler_cls_not_ascend(cls)


def test_other_scheduler_cls_passes():
    check_scheduler_cls_not_ascend("vllm.v1.core.sched.scheduler.Scheduler")
    check_scheduler_cls_not_ascend(None)


@needs_ascend_src
@pytest.mark.parametrize("key", sorted(ON))
def test_matches_vllm_ascend_reading(key):
    """vLLM-Ascend's own SchedulerConfig (ascend_config.py:1172) agrees that each case is on."""
    from vllm_ascend.ascend_config import SchedulerConfig

    theirs = SchedulerConfig(ON[key], balance_env_value=False)
    value = getattr(theirs, key)
    on = value if isinstance(value, bool) else value.enabled
    assert on is True
    assert FEATURES_BY_KEY[key].is_section == (not isinstance(value, bool))
    off = SchedulerConfig({}, balance_env_value=False)
    value = getattr(off, key)
    assert (value if isinstance(value, bool) else value.enabled) is False


@needs_ascend_src
def test_we_know_every_vllm_ascend_scheduler_feature():
    """Every attribute of vLLM-Ascend's SchedulerConfig is a feature we refuse: a new one fails here."""
    from vllm_ascend.ascend_config import SchedulerConfig

    theirs = set(vars(SchedulerConfig({}, balance_env_value=False)))
    assert theirs == set(FEATURES_BY_KEY)
