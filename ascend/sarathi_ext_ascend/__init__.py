"""sarathi-ext on vLLM-Ascend (910B NPUs): the vLLM adapter's scheduler with Ascend's chunk
alignment, refusing vLLM-Ascend's own scheduler features, registered through a vLLM plugin."""

from .rules import (
    ASCEND_SCHEDULER_FEATURES,
    AscendSchedulerConflict,
    ascend_chunk_alignment,
    check_no_ascend_scheduler_features,
    enabled_features,
)

__version__ = "0.1.0"

__all__ = [
    "ASCEND_SCHEDULER_FEATURES",
    "AscendSchedulerConflict",
    "ascend_chunk_alignment",
    "check_no_ascend_scheduler_features",
    "enabled_features",
]
