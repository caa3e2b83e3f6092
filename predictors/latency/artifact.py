"""The predictor artifact: a TorchScript file plus a JSON sidecar, and the hot-path loader.

    model.pt        torch.jit.script(LatencyMLP) in eval mode: raw features [N, 16] float32 -> ms [N]
    model.pt.json   format_version, feature_names (the core's FEATURE_NAMES), provenance (profile
                    source, device, model shape), training hyperparameters, test metrics

The feature order is the wire format between the engine that records features and the network
that was fitted on them (see sarathi_ext.core.features), and nothing in a TorchScript file says
which order it expects. So ``load_predictor`` refuses any artifact whose sidecar order differs,
or that has no sidecar at all, rather than silently predicting from permuted inputs.

``torch.jit`` is deprecated in recent PyTorch but is the one format that loads without the
Python class, on CPU and CUDA, with no compile step on the scheduler's start-up path; its
DeprecationWarning is silenced around our own calls only.
"""

from __future__ import annotations

import json
import os
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import numpy as np

from sarathi_ext.core.features import FEATURE_NAMES, NUM_FEATURES

FORMAT_VERSION = 1


def sidecar_path(path: str | Path) -> Path:
    return Path(str(path) + ".json")


@contextmanager
def _quiet_jit():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit.*")
        yield


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def export(model, path: str | Path, provenance: dict, metrics: dict,
           hyperparameters: Optional[dict] = None) -> Path:
    """Write ``path`` (TorchScript, eval mode) and ``<path>.json``. Both go through temporary
    files renamed into place, the sidecar last, so a present sidecar means a complete model."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    was_training = model.training
    model.eval()
    try:
        with _quiet_jit():
            scripted = torch.jit.script(model)
            scripted.eval()
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            torch.jit.save(scripted, str(tmp))
    finally:
        model.train(was_training)
    os.replace(tmp, path)
    meta = {
        "format_version": FORMAT_VERSION,
        "feature_names": list(FEATURE_NAMES),
        "input": f"raw features, float32 [N, {NUM_FEATURES}], in feature_names order",
        "output": "predicted batch latency, ms [N]",
        "architecture": {"type": "LatencyMLP", "hidden_sizes": list(model.hidden_sizes),
                         "dropout": model.dropout, "in_features": model.in_features},
        "provenance": provenance,
        "hyperparameters": hyperparameters or {},
        "metrics": metrics,
        "torch_version": torch.__version__,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    side = sidecar_path(path)
    tmp_side = side.with_name(f".{side.name}.tmp{os.getpid()}")
    tmp_side.write_text(json.dumps(_jsonable(meta), indent=2, allow_nan=True) + "\n")
    os.replace(tmp_side, side)
    return path


def read_sidecar(path: str | Path) -> dict:
    """The sidecar of artifact ``path``, checked: present, JSON, known format, core feature order."""
    side = sidecar_path(path)
    if not side.is_file():
        raise ValueError(f"{side}: missing sidecar; a predictor artifact is <model> plus <model>.json "
                         f"(written by predictors.latency.export)")
    try:
        meta = json.loads(side.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{side}: not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{side}: expected a JSON object, got {type(meta).__name__}")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{side}: format_version {version!r} is not supported (expected {FORMAT_VERSION})")
    names = meta.get("feature_names")
    if not isinstance(names, list):
        raise ValueError(f"{side}: no feature_names list")
    if list(names) != list(FEATURE_NAMES):
        for i in range(max(len(names), NUM_FEATURES)):
            got = names[i] if i < len(names) else "<missing>"
            want = FEATURE_NAMES[i] if i < NUM_FEATURES else "<none>"
            if got != want:
                break
        raise ValueError(f"{side}: feature order differs from sarathi_ext.core FEATURE_NAMES at "
                         f"position {i}: sidecar has {got!r}, core expects {want!r}")
    return meta


class LatencyPredictor:
    """``features [N, 16] -> ms [N]`` (float64) for LPRS, running the TorchScript module.

    Hot-path choices: one float32 staging tensor, grown by doubling and reused across calls (its
    numpy view takes the float64 -> float32 cast in place, so a call allocates only the module's
    output and the returned array); on CUDA a pinned staging buffer and a resident device buffer.
    Not thread-safe (the staging buffer is shared); the scheduler calls it from one thread.
    """

    def __init__(self, module, device, meta: dict, path: Path) -> None:
        import torch

        self._torch = torch
        self.module = module
        self.device = device
        self.meta = meta
        self.path = path
        self.feature_names = tuple(meta["feature_names"])
        self._cuda = device.type == "cuda"
        self._grow(64)

    def _grow(self, n: int) -> None:
        torch = self._torch
        cap = max(n, 64)
        self._host = torch.empty((cap, NUM_FEATURES), dtype=torch.float32, pin_memory=self._cuda)
        self._host_np = self._host.numpy()
        self._dev = self._host.to(self.device) if self._cuda else None
        self._cap = cap
        self._views: dict[int, Any] = {}

    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = features if isinstance(features, np.ndarray) else np.asarray(features)
        if x.ndim != 2 or x.shape[1] != NUM_FEATURES:
            raise ValueError(f"expected features of shape [N, {NUM_FEATURES}], got {x.shape}")
        n = x.shape[0]
        if n > self._cap:
            self._grow(2 * n)
        np.copyto(self._host_np[:n], x, casting="unsafe")
        views = self._views.get(n)
        if views is None:  # slicing costs ~1 us; LPRS sees few distinct candidate counts
            views = self._views[n] = (self._host[:n], self._dev[:n] if self._cuda else None)
        host, dev = views
        if dev is not None:
            # Pinned -> device on the current stream, ordered before the forward; the .cpu() below
            # synchronises, so the next call cannot overwrite the staging buffer mid-copy.
            dev.copy_(host, non_blocking=True)
        with self._torch.inference_mode():
            out = self.module(host if dev is None else dev)
            if dev is not None:
                out = out.cpu()
            return out.numpy().astype(np.float64)

    def __repr__(self) -> str:
        return f"LatencyPredictor({str(self.path)!r}, device={self.device})"


def load_predictor(path: str | Path, device: str = "auto") -> LatencyPredictor:
    """Load artifact ``path`` for the scheduler. ``device``: "auto" (CUDA when available, else
    CPU), "cpu" or "cuda[:i]". Any problem with the files is a one-line ValueError."""
    import torch

    path = Path(path)
    meta = read_sidecar(path)
    if not path.is_file():
        raise ValueError(f"{path}: model file missing (its sidecar {sidecar_path(path).name} exists)")
    if device == "auto":
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
    try:
        with _quiet_jit():
            module = torch.jit.load(str(path), map_location=dev)
    except Exception as e:  # torch raises RuntimeError, ValueError or pickle errors on bad files
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: not a loadable TorchScript file ({first})") from None
    module.eval()
    pred = LatencyPredictor(module, dev, meta, path)
    try:
        probe = pred(np.zeros((2, NUM_FEATURES)))  # also warms up the profiling executor
    except Exception as e:
        raise ValueError(f"{path}: the module does not map [N, {NUM_FEATURES}] features to ms "
                         f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''})") from None
    if probe.shape != (2,):
        raise ValueError(f"{path}: the module returns shape {probe.shape} for 2 rows, expected (2,)")
    return pred
