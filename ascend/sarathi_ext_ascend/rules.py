"""What vLLM-Ascend does with chunk sizes and ``scheduler_cls``, restated as plain functions.

Nothing here imports vLLM or vLLM-Ascend, so these rules can be checked on any machine. Each rule
names the vLLM-Ascend source it restates (vllm-project/vllm-ascend at commit 182b75ea); the tests
cross-check the config reading against vLLM-Ascend's own ``SchedulerConfig`` where it imports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

# vLLM-Ascend's default KV block size when the user sets none (vllm_ascend/utils.py:1173-1174,
# ``refresh_block_size``, called from ``NPUPlatform.check_and_update_config``).
ASCEND_DEFAULT_BLOCK_SIZE = 128
# The floor of the alignment granularity (vllm_ascend/core/profiling_chunk_predictor.py:265 and :331).
ASCEND_MIN_CHUNK_ALIGNMENT = 64


def ascend_chunk_alignment(block_size: Optional[int]) -> int:
    """The token multiple vLLM-Ascend sizes prefill chunks to: ``max(block_size, 64)``.

    vLLM-Ascend's profiling-chunk predictor computes ``align = max(page_size, 64)`` and rounds its
    chunk to a multiple of it (profiling_chunk_predictor.py:265-268 and :331-334), with
    ``page_size=self.cache_config.block_size`` (scheduler_profiling_chunk.py:90). A block size of
    None becomes 128 first, as vLLM-Ascend's ``refresh_block_size`` does. vLLM-Ascend rounds *up*
    and then clips to the budget; we round non-final chunks *down* (the budget is a hard limit),
    so both land on the same grid.
    """
    if block_size is None:
        block_size = ASCEND_DEFAULT_BLOCK_SIZE
    block_size = int(block_size)
    if block_size < 1:
        raise ValueError(f"block_size: must be >= 1, got {block_size}")
    return max(block_size, ASCEND_MIN_CHUNK_ALIGNMENT)


@dataclass(frozen=True)
class AscendSchedulerFeature:
    """One vLLM-Ascend scheduler feature that replaces (or silently bypasses) our scheduler."""

    key: str  # the key under additional_config["scheduler_config"]
    is_section: bool  # True: a dict with an "enabled" flag; False: a bare boolean
    effect: str  # what vLLM-Ascend does when it is on, with the source line
    top_level_fallback: bool = True  # vLLM-Ascend also reads the deprecated additional_config[key]
    env: Optional[str] = None  # a deprecated environment fallback

    @property
    def path(self) -> str:
        suffix = '["enabled"]' if self.is_section else ""
        return f'additional_config["scheduler_config"]["{self.key}"]{suffix}'


# Every scheduler feature vLLM-Ascend selects through additional_config["scheduler_config"]
# (ascend_config.py:1172-1202, class SchedulerConfig), in the order platform.py applies them.
ASCEND_SCHEDULER_FEATURES: tuple[AscendSchedulerFeature, ...] = (
    AscendSchedulerFeature(
        "recompute_scheduler_enable",
        is_section=False,
        effect="replaces scheduler_config with RecomputeSchedulerConfig and its scheduler_cls "
        "(vllm_ascend/platform.py:919-925)",
    ),
    AscendSchedulerFeature(
        "short_request_first_config",
        is_section=True,
        effect="sets scheduler_cls to ShortRequestFirstAsyncScheduler (vllm_ascend/platform.py:860-863), "
        "or installs its own waiting queue in BalanceScheduler (patch_balance_schedule.py:126-132)",
    ),
    AscendSchedulerFeature(
        "dyntra_lb_config",
        is_section=True,
        top_level_fallback=False,  # read only from scheduler_config (ascend_config.py:1202)
        effect="sets scheduler_cls to DyntraLBScheduler (vllm_ascend/platform.py:1143-1146)",
    ),
    AscendSchedulerFeature(
        "profiling_chunk_config",
        is_section=True,
        effect="sets scheduler_cls to ProfilingChunkScheduler (vllm_ascend/platform.py:1149-1153)",
    ),
    AscendSchedulerFeature(
        "batch_job_sched_config",
        is_section=True,
        effect="sets scheduler_cls to BatchJobAwareScheduler (vllm_ascend/platform.py:1156-1164)",
    ),
    AscendSchedulerFeature(
        "enable_balance_scheduling",
        is_section=False,
        env="VLLM_ASCEND_BALANCE_SCHEDULING",
        effect="swaps vLLM's Scheduler for BalanceScheduler, which an explicit scheduler_cls bypasses "
        "(vllm_ascend/patch/platform/patch_balance_schedule.py:884-889)",
    ),
)

FEATURES_BY_KEY = {f.key: f for f in ASCEND_SCHEDULER_FEATURES}


class AscendSchedulerConflict(ValueError):
    """sarathi_ext was asked for together with a vLLM-Ascend scheduler feature."""


def _raw_value(feature: AscendSchedulerFeature, additional_config: Mapping[str, Any]) -> Any:
    """The value vLLM-Ascend would read for ``feature`` (SchedulerConfig._get_config_value,
    ascend_config.py:1205-1240): scheduler_config[key] first, then the deprecated top-level key,
    then the deprecated environment variable."""
    section = additional_config.get("scheduler_config")
    if isinstance(section, Mapping) and feature.key in section:
        return section[feature.key]
    if feature.top_level_fallback and feature.key in additional_config:
        return additional_config[feature.key]
    if feature.env is not None and feature.env in os.environ:
        # vllm_ascend/envs.py:91: bool(int(os.getenv("VLLM_ASCEND_BALANCE_SCHEDULING", "0")))
        try:
            return bool(int(os.environ[feature.env]))
        except ValueError:
            return False
    return None


def feature_enabled(feature: AscendSchedulerFeature, additional_config: Optional[Mapping[str, Any]]) -> bool:
    value = _raw_value(feature, additional_config or {})
    if feature.is_section:
        return isinstance(value, Mapping) and bool(value.get("enabled", False))
    return bool(value)


def enabled_features(additional_config: Optional[Mapping[str, Any]]) -> list[AscendSchedulerFeature]:
    """The vLLM-Ascend scheduler features ``additional_config`` turns on, in platform.py's order."""
    return [f for f in ASCEND_SCHEDULER_FEATURES if feature_enabled(f, additional_config)]


def conflict_message(feature: AscendSchedulerFeature) -> str:
    where = feature.path
    if feature.env is not None:
        where += f" (or env {feature.env}=1)"
    return (
        f"sarathi_ext cannot be combined with vLLM-Ascend's {where}: vLLM-Ascend {feature.effect}, "
        f"which would replace the sarathi_ext scheduler; turn off {feature.key} or remove sarathi_ext."
    )


def check_no_ascend_scheduler_features(additional_config: Optional[Mapping[str, Any]]) -> None:
    """Raise :class:`AscendSchedulerConflict` (one line, naming the key) for the first feature on."""
    features = enabled_features(additional_config)
    if features:
        raise AscendSchedulerConflict(conflict_message(features[0]))


def check_scheduler_cls_not_ascend(scheduler_cls: Any) -> None:
    """Refuse a scheduler_cls that vLLM-Ascend (or the user) set to one of vLLM-Ascend's schedulers."""
    name = scheduler_cls if isinstance(scheduler_cls, str) else getattr(scheduler_cls, "__module__", "")
    if isinstance(name, str) and name.startswith("vllm_ascend."):
        qual = scheduler_cls if isinstance(scheduler_cls, str) else f"{name}.{scheduler_cls.__qualname__}"
        raise AscendSchedulerConflict(
            f"sarathi_ext cannot be combined with scheduler_cls={qual!r}, a vLLM-Ascend scheduler; "
            "remove the vLLM-Ascend scheduler option that selected it or remove sarathi_ext."
        )
