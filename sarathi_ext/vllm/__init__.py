"""sarathi_ext.vllm: the vLLM V1 adapter (scheduler subclass, RequestQueue, plugin).

    vllm serve MODEL --scheduler-cls sarathi_ext.vllm.SarathiExtScheduler \\
        --additional-config '{"sarathi_ext": {"policy": "aging", "apc": true}}'

``parse_additional_config`` and the class-path constants import without vLLM; the scheduler
classes import vLLM on first access (set ``VLLM_TARGET_DEVICE=cpu`` first on a machine without a
GPU).
"""

from .config import CONFIG_KEY, parse_additional_config

SCHEDULER_CLS = "sarathi_ext.vllm.SarathiExtScheduler"
ASYNC_SCHEDULER_CLS = "sarathi_ext.vllm.SarathiExtAsyncScheduler"

_LAZY = {
    "SarathiExtSchedulerMixin": ".scheduler",
    "SarathiExtScheduler": ".scheduler",
    "SarathiExtAsyncScheduler": ".scheduler",
    "PolicyRequestQueue": ".queue",
    "PredictedSJF": ".queue",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ASYNC_SCHEDULER_CLS", "CONFIG_KEY", "SCHEDULER_CLS", "PolicyRequestQueue", "PredictedSJF",
    "SarathiExtAsyncScheduler", "SarathiExtScheduler", "SarathiExtSchedulerMixin", "parse_additional_config",
]
