"""``--additional-config '{"sarathi_ext": {...}}'``: parse and check our parameters for vLLM.

The keys are the field names of ``sarathi_ext.core.PolicyConfig`` (the same names as the
simulator's flags and Sarathi's ``--aging_sarathi_scheduler_config_<field>``), plus the adapter's
own extras:

    lprs_predictor          path of the batch-latency predictor artifact (TorchScript + .json
                            sidecar); required with chunk=lprs
    lprs_device             cpu (default), auto or cuda[:i]: where the predictor runs
    starvation_threshold_s  a waiting request older than this many seconds goes ahead of the
                            order (oldest first); 0 = off
    profile_csv             write one profile row per engine step to this CSV; "" = off

``policy`` also takes the core's ``psjf``, predicted shortest job first (PARS): lower
``SamplingParams.extra_args["predicted_len"]`` (or ``["length_score"]``) first.

This module imports nothing from vLLM (and torch only to load the predictor), so a bad
configuration can be reported without an engine. Every error is a one-line ValueError that names
the field, raised when the scheduler is constructed, i.e. at engine start, never mid-serving.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, Mapping

from sarathi_ext.core.config import ConfigError, PolicyConfig, build_order

CONFIG_KEY = "sarathi_ext"
PREFIX = f"additional_config {CONFIG_KEY}."

EXTRA_DEFAULTS: dict[str, Any] = {
    "lprs_predictor": "",
    "lprs_device": "cpu",
    "starvation_threshold_s": 0.0,
    "profile_csv": "",
}
_POLICY_DEFAULTS = {f.name: f.default for f in fields(PolicyConfig)}
KNOWN_FIELDS = (*_POLICY_DEFAULTS, *EXTRA_DEFAULTS)
_DEVICE = re.compile(r"^(cpu|auto|cuda(:\d+)?)$")


def _error(message: str) -> ValueError:
    return ValueError(PREFIX + message)


def _check_type(name: str, value: Any, default: Any) -> Any:
    """JSON gives int, float, bool, str; coerce where harmless and refuse the rest."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise _error(f"{name}: expected true or false, got {value!r}")
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        raise _error(f"{name}: expected a finite number, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise _error(f"{name}: expected an integer, got {value!r}")
        return int(value)
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        raise _error(f"{name}: expected a string, got {value!r}")
    return value  # pragma: no cover - every field has one of the types above


def section(additional_config: Any) -> dict:
    """The ``"sarathi_ext"`` mapping of vLLM's additional_config ({} when absent)."""
    if additional_config is None or not isinstance(additional_config, Mapping):
        return {}
    values = additional_config.get(CONFIG_KEY, {})
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise ValueError(f"additional_config {CONFIG_KEY}: expected a JSON object, got {values!r}")
    return dict(values)


def parse_additional_config(additional_config: Any) -> tuple[PolicyConfig, dict[str, Any]]:
    """Return ``(PolicyConfig, extras)`` from vLLM's ``additional_config``.

    ``extras`` holds every key of EXTRA_DEFAULTS. Absent ``"sarathi_ext"`` means all defaults
    (FCFS, static chunks, no APC: upstream's behaviour). Raises a one-line ValueError naming the
    bad field; with chunk=lprs it also checks the predictor's sidecar (format and feature order)
    and that the model file exists, without loading torch.
    """
    values = section(additional_config)
    unknown = sorted(set(values) - set(KNOWN_FIELDS))
    if unknown:
        raise _error(f"{unknown[0]}: unknown parameter; known: {sorted(KNOWN_FIELDS)}")
    policy_values, extras = {}, dict(EXTRA_DEFAULTS)
    for name, value in values.items():
        if name in EXTRA_DEFAULTS:
            extras[name] = _check_type(name, value, EXTRA_DEFAULTS[name])
        else:
            policy_values[name] = _check_type(name, value, _POLICY_DEFAULTS[name])

    try:
        cfg = PolicyConfig.from_mapping(policy_values)
    except ConfigError as e:
        raise _error(str(e)) from None

    if not extras["starvation_threshold_s"] >= 0:
        raise _error(f"starvation_threshold_s: must be >= 0, got {extras['starvation_threshold_s']}")
    if not _DEVICE.match(extras["lprs_device"]):
        raise _error(f"lprs_device: expected cpu, auto or cuda[:i], got {extras['lprs_device']!r}")
    if cfg.chunk == "lprs" and not extras["lprs_predictor"]:
        raise _error("lprs_predictor: chunk 'lprs' needs a batch-latency predictor artifact "
                     "(a TorchScript file plus its .json sidecar, from sarathi-ext train-latency)")
    if extras["lprs_predictor"]:
        from predictors.latency.artifact import read_sidecar  # json only

        try:
            read_sidecar(extras["lprs_predictor"])
        except ValueError as e:
            raise _error(f"lprs_predictor: {e}") from None
        if not Path(extras["lprs_predictor"]).is_file():
            raise _error(f"lprs_predictor: {extras['lprs_predictor']}: model file missing")
    return cfg, extras


def load_lprs_predictor(extras: Mapping[str, Any]):
    """Load the LPRS predictor named in ``extras`` (torch; called once at scheduler start)."""
    from predictors.latency.artifact import load_predictor

    try:
        return load_predictor(extras["lprs_predictor"], device=extras["lprs_device"])
    except ValueError as e:
        raise _error(f"lprs_predictor: {e}") from None


def build_prefill_order(cfg: PolicyConfig):
    """The core's order for ``cfg.policy`` (psjf included)."""
    return build_order(cfg)

