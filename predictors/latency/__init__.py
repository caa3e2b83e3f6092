"""The batch-latency predictor of seed 001, Sec. 3.2.1: profile schema, data preparation, the MLP
and its loss (Eq. 5), training, the TorchScript artifact and its evaluation against baselines.

Importing this package needs only numpy: the base install has no torch or sklearn, so every
public name is resolved on first use (PEP 562), and the modules that need torch import it then.
"""

from __future__ import annotations

import importlib
from typing import Any

# The function ``train`` shares its name with the submodule ``train``. Importing a submodule the
# first time binds it on the package, which would shadow a lazily resolved function, so this one
# is imported eagerly (numpy only; torch is imported inside the function) and the function rebinds
# the name after the submodule has been bound.
from .train import read_profiles, train, train_from_csv  # noqa: E402

_EXPORTS = {
    # schema
    "LATENCY_COLUMN": "schema", "PROFILE_COLUMNS": "schema", "ProfileError": "schema",
    "ProfileWriter": "schema", "read_profile": "schema", "write_profile": "schema",
    # preprocess (numpy only)
    "Prepared": "preprocess", "bucketize": "preprocess", "bucket_weights": "preprocess",
    "clean": "preprocess", "downsample_full_chunk": "preprocess", "prepare": "preprocess",
    "split": "preprocess",
    # model (torch)
    "LatencyMLP": "model", "asymmetric_huber": "model",
    # artifact (torch when called)
    "FORMAT_VERSION": "artifact", "LatencyPredictor": "artifact", "export": "artifact",
    "load_predictor": "artifact", "read_sidecar": "artifact",
    # evaluation (numpy; sklearn/torch when called)
    "LinearBaseline": "evaluate", "QuadraticTokensBaseline": "evaluate",
    "RandomForestBaseline": "evaluate", "compare": "evaluate", "evaluate_from_csv": "evaluate",
    "format_report": "evaluate", "metrics": "evaluate",
}

__all__ = sorted([*_EXPORTS, "read_profiles", "train", "train_from_csv"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
