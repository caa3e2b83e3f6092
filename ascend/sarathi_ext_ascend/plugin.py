"""The ``vllm.general_plugins`` entry point: choose the Ascend sarathi_ext scheduler on request.

Why ``vllm.general_plugins``: vLLM-Ascend itself is the one ``vllm.platform_plugins`` entry
(setup.py:519, ``ascend = vllm_ascend:register``), and a platform plugin can only name a platform
class, so a second one would compete with it. vLLM-Ascend hangs everything else (KV connector,
model loader, models) on ``vllm.general_plugins`` (setup.py:520-525), which vLLM runs in every
process that builds or uses a config: ``EngineArgs.__post_init__`` (vllm/engine/arg_utils.py), the
engine core (vllm/v1/engine/core.py) and each worker (vllm/v1/worker/worker_base.py).

The user asks for sarathi_ext with ``SARATHI_EXT_SCHEDULER=1`` or with a ``"sarathi_ext"`` key in
``--additional-config``. Then :func:`select_scheduler_cls` refuses any vLLM-Ascend scheduler
feature in the same config (they set ``scheduler_cls`` themselves) and names our scheduler.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .rules import check_no_ascend_scheduler_features, check_scheduler_cls_not_ascend

ENV_FLAG = "SARATHI_EXT_SCHEDULER"
CONFIG_KEY = "sarathi_ext"
SCHEDULER_CLS = "sarathi_ext_ascend.scheduler.AscendSarathiExtScheduler"
ASYNC_SCHEDULER_CLS = "sarathi_ext_ascend.scheduler.AscendSarathiExtAsyncScheduler"
_TRUE = {"1", "true", "yes", "on"}


def sarathi_ext_requested(vllm_config: Any) -> bool:
    if os.environ.get(ENV_FLAG, "").strip().lower() in _TRUE:
        return True
    additional = getattr(vllm_config, "additional_config", None) or {}
    return CONFIG_KEY in additional


def select_scheduler_cls(vllm_config: Any) -> Optional[str]:
    """Our scheduler's qualified name if sarathi_ext is requested, else None.

    Raises :class:`~sarathi_ext_ascend.rules.AscendSchedulerConflict` (one line, naming the
    ``additional_config`` key) when a vLLM-Ascend scheduler feature is also on, or when
    ``scheduler_cls`` already names a vLLM-Ascend scheduler.
    """
    if not sarathi_ext_requested(vllm_config):
        return None
    check_no_ascend_scheduler_features(getattr(vllm_config, "additional_config", None))
    scheduler_config = vllm_config.scheduler_config
    current = getattr(scheduler_config, "scheduler_cls", None)
    if current is not None and not _replaceable(current):
        check_scheduler_cls_not_ascend(current)
        raise ValueError(
            f"sarathi_ext cannot be combined with scheduler_cls={current!r}: both choose the scheduler; "
            "remove one of them."
        )
    return ASYNC_SCHEDULER_CLS if getattr(scheduler_config, "async_scheduling", False) else SCHEDULER_CLS


def _replaceable(scheduler_cls: Any) -> bool:
    """vLLM's own schedulers, the generic sarathi_ext ones (the vLLM adapter's plugin may have set
    them first) and ours may be replaced; anything else was chosen by someone else."""
    if not isinstance(scheduler_cls, str):
        scheduler_cls = f"{getattr(scheduler_cls, '__module__', '')}.{getattr(scheduler_cls, '__qualname__', '')}"
    return scheduler_cls.startswith(("vllm.", "sarathi_ext.vllm", "sarathi_ext_ascend."))


def apply(vllm_config: Any) -> Optional[str]:
    """Set ``scheduler_cls`` on ``vllm_config`` when sarathi_ext is requested; return what was set."""
    cls = select_scheduler_cls(vllm_config)
    if cls is not None:
        vllm_config.scheduler_config.scheduler_cls = cls
    return cls


_WRAPPED = "_sarathi_ext_ascend_wrapped"


def register() -> None:
    """The ``vllm.general_plugins`` entry point (runs once per process, maybe more; idempotent).

    Wraps the current platform's ``check_and_update_config`` (on Ascend, vLLM-Ascend's
    ``NPUPlatform``) so that :func:`apply` runs right after it, inside ``VllmConfig.__post_init__``
    (vllm/config/vllm.py, ``current_platform.check_and_update_config(self)``). Running after the
    platform hook means vLLM-Ascend has already made its own scheduler choice, which
    :func:`select_scheduler_cls` then refuses with the key that caused it. The engine core gets the
    finished config by pickle, so the choice carries into it.
    """
    from vllm.platforms import current_platform

    platform_cls = type(current_platform)
    original = platform_cls.check_and_update_config  # a bound classmethod
    if getattr(original, _WRAPPED, False):
        return

    def check_and_update_config(cls, vllm_config) -> None:
        original(vllm_config)
        apply(vllm_config)

    setattr(check_and_update_config, _WRAPPED, True)
    check_and_update_config.__wrapped__ = original  # type: ignore[attr-defined]
    platform_cls.check_and_update_config = classmethod(check_and_update_config)
