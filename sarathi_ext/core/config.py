"""One parameter set for every adapter: names, defaults, validation, and the factory.

The simulator's CLI flags, Sarathi's ``--aging_sarathi_scheduler_config_<field>`` flags and vLLM's
``--additional-config '{"sarathi_ext": {...}}'`` all carry these same field names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Optional

from .apc import ActivePrefillControl
from .chunking import CHUNK_POLICIES, LPRS, LatencyPredictor, StaticChunk
import math

from .ordering import ORDERS, Aging, Unified
from .planner import ADMISSION_MODES, RoundPlanner
from .starvation import STARVATION_GUARDS, AgedOrder, build_guard

# Orders that already age on wait time: the "aging" guard would age them twice.
_AGING_ORDERS = ("aging", "unified")


class ConfigError(ValueError):
    """A bad parameter; the message names the field."""


@dataclass
class PolicyConfig:
    # prefill order: fcfs | aging | spf | psjf (= predicted-sjf: predicted length score) |
    # oracle-sjf (true output length; simulator only) | unified (aging + prefill + predicted decode)
    policy: str = "fcfs"
    # Aging, Eq. 1: alpha per second waited, beta per remaining prompt token. alpha/|beta| is the
    # paper's "weight base"; 37.5 tokens per second is the project's default (see README).
    aging_alpha: float = 37.5
    aging_beta: float = -1.0
    chunk: str = "static"  # chunk size: static | lprs
    # LPRS, Algorithm 1. T* = 105 ms is the paper's target (Table 9); the paper gives no Delta or
    # lambdas, so these defaults are ours: Delta = 16 keeps <= 65 candidates at B_max = 1024, and
    # overshoot costs 4x undershoot.
    lprs_target_ms: float = 105.0
    lprs_delta: int = 16
    lprs_lambda_u: float = 1.0
    lprs_lambda_o: float = 4.0
    # APC, Eq. 12-14 (values ours; the paper gives none).
    apc: bool = False
    apc_c_max: int = 2
    apc_l_min: int = 16
    admission: str = "stop"  # stop at the first request that does not fit (Sarathi) | skip it
    # Starvation guard, any order (sarathi_ext.core.starvation): none | pars (boost every request
    # whose wait exceeds the threshold, FCFS among boosted) | clairvoyant (promote the longest
    # waiter once it has waited the threshold; one per round) | aging (re-key the order with
    # aging_alpha/aging_beta on wait time). Threshold default: PARS's 2 minutes.
    starvation: str = "none"
    starvation_threshold_s: float = 120.0
    # Unified order: prefill-token equivalents per unit of score (predicted output tokens).
    unified_gamma: float = 1.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.policy not in ORDERS:
            raise ConfigError(f"policy: unknown ordering {self.policy!r}; choose from {sorted(ORDERS)}")
        if self.chunk not in CHUNK_POLICIES:
            raise ConfigError(f"chunk: unknown chunk policy {self.chunk!r}; choose from {sorted(CHUNK_POLICIES)}")
        if not self.aging_alpha > 0:
            raise ConfigError(f"aging_alpha: must be > 0, got {self.aging_alpha}")
        if not self.aging_beta < 0:
            raise ConfigError(f"aging_beta: must be < 0, got {self.aging_beta}")
        if not self.lprs_target_ms > 0:
            raise ConfigError(f"lprs_target_ms: must be > 0, got {self.lprs_target_ms}")
        if int(self.lprs_delta) != self.lprs_delta or self.lprs_delta < 1:
            raise ConfigError(f"lprs_delta: must be an integer >= 1, got {self.lprs_delta}")
        if not 0 <= self.lprs_lambda_u < self.lprs_lambda_o:
            raise ConfigError(
                f"lprs_lambda_u: must satisfy 0 <= lprs_lambda_u < lprs_lambda_o, got "
                f"{self.lprs_lambda_u} and {self.lprs_lambda_o}"
            )
        if int(self.apc_c_max) != self.apc_c_max or self.apc_c_max < 1:
            raise ConfigError(f"apc_c_max: must be an integer >= 1, got {self.apc_c_max}")
        if int(self.apc_l_min) != self.apc_l_min or self.apc_l_min < 1:
            raise ConfigError(f"apc_l_min: must be an integer >= 1, got {self.apc_l_min}")
        if self.admission not in ADMISSION_MODES:
            raise ConfigError(f"admission: must be one of {ADMISSION_MODES}, got {self.admission!r}")
        if self.starvation not in STARVATION_GUARDS:
            raise ConfigError(f"starvation: must be one of {STARVATION_GUARDS}, got {self.starvation!r}")
        t = self.starvation_threshold_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ConfigError(f"starvation_threshold_s: must be a finite number >= 0, got {t!r}")
        if self.starvation == "aging" and self.policy in _AGING_ORDERS:
            raise ConfigError(f"starvation: {self.policy!r} already ages on wait time; use starvation=none")
        g = self.unified_gamma
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g) or g < 0:
            raise ConfigError(f"unified_gamma: must be a finite number >= 0, got {g!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "PolicyConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"{unknown[0]}: unknown parameter; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        """A short human name, e.g. ``aging(a=37.5,b=-1)+lprs+apc``."""
        name = self.policy
        if self.policy == "aging":
            name += f"(a={self.aging_alpha:g},b={self.aging_beta:g})"
        elif self.policy == "unified":
            name += f"(a={self.aging_alpha:g},b={self.aging_beta:g},g={self.unified_gamma:g})"
        if self.starvation == "aging":
            name += f"~aging(a={self.aging_alpha:g},b={self.aging_beta:g})"
        elif self.starvation != "none":
            name += f"~{self.starvation}({self.starvation_threshold_s:g}s)"
        if self.chunk != "static":
            name += f"+{self.chunk}"
        if self.apc:
            name += "+apc"
        return name


def build_order(cfg: PolicyConfig):
    """The prefill order ``cfg`` names, re-keyed with aging when ``starvation`` is "aging"."""
    if cfg.policy == "aging":
        order = Aging(cfg.aging_alpha, cfg.aging_beta)
    elif cfg.policy == "unified":
        order = Unified(cfg.aging_alpha, cfg.aging_beta, cfg.unified_gamma)
    else:
        order = ORDERS[cfg.policy]()
    if cfg.starvation == "aging":
        order = AgedOrder(order, cfg.aging_alpha, cfg.aging_beta)
    return order


def build_planner(cfg: PolicyConfig, predictor: Optional[LatencyPredictor] = None) -> RoundPlanner:
    """The planner a config describes. LPRS needs a batch-latency predictor (any callable
    features[N, 16] -> ms[N]: the trained MLP, or the simulator's own execution-time model)."""
    if cfg.chunk == "lprs":
        if predictor is None:
            raise ConfigError("chunk: 'lprs' needs a batch-latency predictor")
        chunk = LPRS(predictor, cfg.lprs_target_ms, int(cfg.lprs_delta), cfg.lprs_lambda_u, cfg.lprs_lambda_o)
    else:
        chunk = StaticChunk()
    apc = ActivePrefillControl(int(cfg.apc_c_max), int(cfg.apc_l_min)) if cfg.apc else None
    guard = build_guard(cfg.starvation, cfg.starvation_threshold_s)
    return RoundPlanner(build_order(cfg), chunk, apc, cfg.admission, guard)
