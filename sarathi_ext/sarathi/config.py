"""The AGING_SARATHI scheduler config: Sarathi's chunked-prefill config plus our policy parameters.

Sarathi builds its CLI from config dataclasses: every field of a ``BaseSchedulerConfig`` subclass
becomes ``--<snake_case class name>_<field>``, so this class yields
``--aging_sarathi_scheduler_config_policy``, ``..._aging_alpha`` and so on, selected with
``--scheduler_config_type AGING_SARATHI``. The field names are those of
``sarathi_ext.core.PolicyConfig``, which every adapter shares.

No ``from __future__ import annotations`` here: Sarathi hands each field's annotation to argparse
as ``type=``, so the annotations must be the real callables.

Sarathi constructs every registered config class while parsing its CLI, whichever type is chosen,
so ``__post_init__`` must accept the defaults and stay cheap. It validates everything it can
without torch (policy names, alpha and beta, LPRS and APC parameters, the predictor's sidecar), so
bad input fails at configuration time; the predictor itself is loaded when the scheduler is built,
at engine start-up, never mid-serving.
"""

import math
from dataclasses import dataclass, field, fields
from pathlib import Path

from sarathi.config import SarathiSchedulerConfig

from sarathi_ext.core.config import ConfigError, PolicyConfig

from .registration import ensure_scheduler_type

# get_type() below and argparse's SchedulerType(value) need the member before any parsing.
_TYPE = ensure_scheduler_type()

FLAG_PREFIX = "--aging_sarathi_scheduler_config_"
_POLICY_FIELDS = tuple(f.name for f in fields(PolicyConfig))


class Flag:
    """A bool for Sarathi's CLI. argparse calls the annotation on the flag's text, and
    ``bool("False")`` is True; this accepts true/false, yes/no, on/off, 1/0 and refuses the rest."""

    def __new__(cls, value=False) -> bool:  # returns a plain bool, never a Flag
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")


def _help(text: str) -> dict:
    return {"help": text}


# Defaults come from the core's PolicyConfig, so every adapter starts from the same values.
_CORE = PolicyConfig()


@dataclass
class AgingSarathiSchedulerConfig(SarathiSchedulerConfig):
    policy: str = field(default=_CORE.policy, metadata=_help(
        "Prefill order: fcfs (Sarathi's), aging (P = alpha*wait + beta*remaining_prefill), or spf "
        "(shortest remaining prefill first)."))
    aging_alpha: float = field(default=_CORE.aging_alpha, metadata=_help(
        "Aging: priority per second waited (> 0). alpha/|beta| is the weight base: prompt tokens one "
        "second of waiting is worth."))
    aging_beta: float = field(default=_CORE.aging_beta, metadata=_help(
        "Aging: priority per remaining prompt token (< 0)."))
    chunk: str = field(default=_CORE.chunk, metadata=_help(
        "Chunk size: static (fill the chunk_size budget, as Sarathi) or lprs (Algorithm 1: the candidate "
        "whose predicted batch latency is closest to lprs_target_ms; needs lprs_predictor)."))
    lprs_target_ms: float = field(default=_CORE.lprs_target_ms, metadata=_help("LPRS: target batch latency T* in ms."))
    lprs_delta: int = field(default=_CORE.lprs_delta, metadata=_help("LPRS: candidate chunk step Delta (tokens)."))
    lprs_lambda_u: float = field(default=_CORE.lprs_lambda_u, metadata=_help("LPRS: cost per ms under the target."))
    lprs_lambda_o: float = field(default=_CORE.lprs_lambda_o, metadata=_help(
        "LPRS: cost per ms over the target (> lambda_u)."))
    lprs_predictor: str = field(default="", metadata=_help(
        "LPRS: the batch-latency predictor artifact, a TorchScript file with its <file>.json sidecar "
        "(sarathi-ext train-latency writes both). Required with chunk=lprs."))
    lprs_device: str = field(default="cpu", metadata=_help(
        "LPRS: device the predictor runs on in the engine process: cpu, cuda[:i] or auto. cpu by default: "
        "the workers sized the KV cache before the scheduler exists, and the MLP is small."))
    apc: Flag = field(default=_CORE.apc, metadata=_help(
        "Active Prefill Control (Eq. 12-14): cap unfinished prefills per iteration and refuse tiny chunks. "
        "true or false."))
    apc_c_max: int = field(default=_CORE.apc_c_max, metadata=_help("APC: most prefills active in one iteration, C_max."))
    apc_l_min: int = field(default=_CORE.apc_l_min, metadata=_help(
        "APC: minimum effective chunk L_min (tokens); at most chunk_size."))
    admission: str = field(default=_CORE.admission, metadata=_help(
        "When a waiting request does not fit in the KV cache: stop admitting (Sarathi's rule) or skip it "
        "and try the next one in policy order."))
    starvation: str = field(default=_CORE.starvation, metadata=_help(
        "Starvation guard: none, pars (boost every request waiting longer than starvation_threshold_s), "
        "clairvoyant (promote the longest waiter once it has waited that long) or aging (an aging term "
        "on wait time added to the order's key)."))
    starvation_threshold_s: float = field(default=_CORE.starvation_threshold_s, metadata=_help(
        "Seconds of waiting after which the pars or clairvoyant guard acts (PARS's 2 minutes by default)."))
    unified_gamma: float = field(default=_CORE.unified_gamma, metadata=_help(
        "policy=unified: prefill-token equivalents per unit of predicted decode work (the score)."))
    profile_csv: str = field(default="", metadata=_help(
        "Write one row per iteration (the 16 batch features and the measured step latency, in the "
        "latency-predictor profile schema) to this CSV; empty = off. Train with sarathi-ext train-latency."))

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)  # none upstream today; keep any added later
        if parent is not None:
            parent()
        self.apc = Flag(self.apc)  # a YAML or programmatic "true" as well as a bool
        # Fields checked by PolicyConfig are reported under their CLI flag names.
        try:
            policy = self.policy_config()
        except ConfigError as e:
            raise ValueError(f"{FLAG_PREFIX}{e}") from None
        self._check_sarathi_fields(policy)
        self._check_predictor(policy)
        if not (math.isfinite(self.starvation_threshold_s) and self.starvation_threshold_s >= 0):
            raise ValueError(f"{FLAG_PREFIX}starvation_threshold_s: must be >= 0, got {self.starvation_threshold_s}")

    def _check_sarathi_fields(self, policy: PolicyConfig) -> None:
        if self.enable_dynamic_chunking_schedule:
            raise ValueError(
                f"{FLAG_PREFIX}enable_dynamic_chunking_schedule: not supported by AGING_SARATHI, whose token "
                f"budget is chunk_size; use {FLAG_PREFIX}chunk lprs for latency-driven chunk sizes")
        if self.chunk_size < 1:
            raise ValueError(f"{FLAG_PREFIX}chunk_size: must be >= 1, got {self.chunk_size}")
        if self.max_num_seqs < 1:
            raise ValueError(f"{FLAG_PREFIX}max_num_seqs: must be >= 1, got {self.max_num_seqs}")
        if policy.apc and policy.apc_l_min > self.chunk_size:
            # The planner would refuse this at its first round (C_t = 0 always); say so now.
            raise ValueError(
                f"{FLAG_PREFIX}apc_l_min: {policy.apc_l_min} exceeds chunk_size {self.chunk_size}; "
                f"the activity cap would always be 0")

    def _check_predictor(self, policy: PolicyConfig) -> None:
        if policy.chunk == "lprs" and not self.lprs_predictor:
            raise ValueError(
                f"{FLAG_PREFIX}lprs_predictor: chunk 'lprs' needs a batch-latency predictor artifact "
                f"(a TorchScript file plus its .json sidecar, from sarathi-ext train-latency)")
        if not self.lprs_predictor:
            return
        from predictors.latency.artifact import read_sidecar  # json only; torch loads at start-up

        try:
            read_sidecar(self.lprs_predictor)
        except ValueError as e:
            raise ValueError(f"{FLAG_PREFIX}lprs_predictor: {e}") from None
        if not Path(self.lprs_predictor).is_file():
            raise ValueError(f"{FLAG_PREFIX}lprs_predictor: {self.lprs_predictor}: model file missing")

    def policy_config(self) -> PolicyConfig:
        """The engine-agnostic parameter set these fields describe (validated)."""
        return PolicyConfig(**{name: getattr(self, name) for name in _POLICY_FIELDS})

    @staticmethod
    def get_type():
        return _TYPE
