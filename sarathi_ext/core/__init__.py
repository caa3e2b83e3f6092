"""sarathi_ext.core: the engine-agnostic round planner. Imports nothing from any engine."""

from .apc import ActivePrefillControl, APCCounters
from .chunking import LPRS, ChunkPolicy, LatencyPredictor, StaticChunk, upper_bound
from .config import ConfigError, PolicyConfig, build_order, build_planner
from .features import FEATURE_NAMES, NUM_FEATURES, BatchState, MemoryState
from .ordering import (
    FCFS, SPF, Aging, OracleSJF, PredictedSJF, PrefillHeap, PrefillOrder, Unified, naive_aging_order,
)
from .plan import Hold, PrefillChunk, RoundPlan
from .planner import Limits, PlannerStats, RoundPlanner, blocks_for
from .request import RequestView
from .starvation import STARVATION_GUARDS, AgedOrder, ClairvoyantGuard, ParsGuard, StarvationGuard, build_guard

__all__ = [
    "AgedOrder", "ClairvoyantGuard", "OracleSJF", "ParsGuard", "STARVATION_GUARDS", "StarvationGuard",
    "Unified", "build_guard",
    "APCCounters", "ActivePrefillControl", "Aging", "BatchState", "ChunkPolicy", "ConfigError",
    "FCFS", "FEATURE_NAMES", "Hold", "LPRS", "LatencyPredictor", "Limits", "MemoryState",
    "NUM_FEATURES", "PlannerStats", "PolicyConfig", "PredictedSJF", "PrefillChunk", "PrefillHeap", "PrefillOrder",
    "RequestView", "RoundPlan", "RoundPlanner", "SPF", "StaticChunk", "blocks_for", "build_order",
    "build_planner", "naive_aging_order", "upper_bound",
]
