"""The sarathi_ext vLLM scheduler with vLLM-Ascend's chunk alignment and conflict checks.

``AscendSarathiExtScheduler`` is ``sarathi_ext.vllm.SarathiExtScheduler`` with three changes:

* ``chunk_alignment`` is ``max(cache_config.block_size, 64)``, the granularity vLLM-Ascend sizes
  prefill chunks to (see :func:`sarathi_ext_ascend.rules.ascend_chunk_alignment`); every
  non-final chunk is rounded down to a multiple of it, a request's last chunk stays exact, and a
  chunk that rounds to 0 waits for the next step.
* The alignment applies on every step, not only when LPRS or APC is on: the clamp hook is switched
  on whenever ``chunk_alignment > 1``.
* ``_sarathi_ext_check_conflicts`` also refuses every vLLM-Ascend scheduler feature that would
  replace ``scheduler_cls`` (see :data:`sarathi_ext_ascend.rules.ASCEND_SCHEDULER_FEATURES`).

vLLM-Ascend rebinds ``vllm.v1.core.sched.scheduler.Scheduler`` to its ``BalanceScheduler``
(vllm_ascend/patch/platform/patch_balance_schedule.py:63,889), applied from its general plugins
before the engine core imports ``scheduler_cls``. ``BalanceScheduler.schedule`` is a copy of an
older upstream ``schedule()`` that never calls ``_reserve_prefill_lookahead``, the hook our chunk
clamp lives in. If ``SarathiExtScheduler`` was built on it, we rebuild it on vLLM's own
``Scheduler`` (the first class named ``Scheduler`` from that module in the MRO).
"""

from __future__ import annotations

from sarathi_ext.vllm import SarathiExtAsyncScheduler, SarathiExtScheduler, SarathiExtSchedulerMixin

from .rules import ascend_chunk_alignment, check_no_ascend_scheduler_features

SCHEDULER_CLS = "sarathi_ext_ascend.scheduler.AscendSarathiExtScheduler"
ASYNC_SCHEDULER_CLS = "sarathi_ext_ascend.scheduler.AscendSarathiExtAsyncScheduler"
_UPSTREAM_MODULES = ("vllm.v1.core.sched.scheduler", "vllm.v1.core.sched.async_scheduler")


def _without_vllm_ascend_bases(cls: type) -> type:
    """``cls`` itself, or the same mixin on vLLM's own scheduler if a vLLM-Ascend class is in its MRO."""
    if not any(k.__module__.startswith("vllm_ascend") for k in cls.__mro__):
        return cls
    upstream = next(
        k for k in cls.__mro__ if k.__module__ in _UPSTREAM_MODULES and not k.__module__.startswith("vllm_ascend")
    )
    return type(cls.__name__, (SarathiExtSchedulerMixin, upstream), {"__module__": cls.__module__, "__doc__": cls.__doc__})


class _AscendRules:
    """Mixed in ahead of the sarathi_ext scheduler; holds only what differs on Ascend."""

    def __init__(self, vllm_config, *args, **kwargs):
        # An instance attribute, set before the base __init__ so everything it does sees it.
        self.chunk_alignment = ascend_chunk_alignment(vllm_config.cache_config.block_size)
        super().__init__(vllm_config, *args, **kwargs)  # turns the per-chunk hook on for alignment

    def _sarathi_ext_check_conflicts(self, vllm_config) -> None:
        super()._sarathi_ext_check_conflicts(vllm_config)
        check_no_ascend_scheduler_features(getattr(vllm_config, "additional_config", None))


class AscendSarathiExtScheduler(_AscendRules, _without_vllm_ascend_bases(SarathiExtScheduler)):
    """sarathi_ext on vLLM-Ascend, synchronous scheduling."""


class AscendSarathiExtAsyncScheduler(_AscendRules, _without_vllm_ascend_bases(SarathiExtAsyncScheduler)):
    """sarathi_ext on vLLM-Ascend, async scheduling."""


__all__ = ["ASYNC_SCHEDULER_CLS", "SCHEDULER_CLS", "AscendSarathiExtAsyncScheduler", "AscendSarathiExtScheduler"]
