"""Per-iteration statistics for training the batch-latency MLP on real hardware (engine hooks).

Shared by the Sarathi-Serve and vLLM adapters; it imports neither engine.

One row per engine step, in the latency-predictor profile schema (predictors.latency.schema): the
16 features of the batch as the core planned it, then the measured step latency in ms.

What is measured: the wall time from ``schedule()`` returning to ``on_step_completed()`` in the
engine process. In Sarathi's engine that span is the step inputs going to the workers, the model
forward and sampling on the GPUs, the sampler outputs coming back, and the engine's bookkeeping of
them (detokenisation included): the iteration time a running decode actually sees, which is what
LPRS's target T* is about. The scheduler's own time is outside it.

Features 7-10 (GPU memory) are 0: the scheduler runs in the engine process, which holds no model
memory. The scheduler writes the same zeros when it asks the predictor, so training and serving
agree.
"""

from __future__ import annotations

import atexit
import threading
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from predictors.latency.schema import ProfileWriter


class StepProfiler:
    def __init__(self, path: str | Path, provenance: Optional[dict[str, Any]] = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer: Optional[ProfileWriter] = ProfileWriter(self.path, {"source": "sarathi", **(provenance or {})})
        self.rows = 0
        self._pending: Optional[tuple[np.ndarray, float]] = None
        self._lock = threading.Lock()  # close() may run from atexit while the engine thread steps
        # ProfileWriter renames its temporary file into place only on close, so close at exit.
        atexit.register(self.close)

    def on_schedule(self, features: np.ndarray) -> None:
        """A non-empty batch was scheduled; its clock starts now."""
        self._pending = (features, time.perf_counter())

    def on_step_completed(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        features, start = pending
        latency_ms = (time.perf_counter() - start) * 1e3
        with self._lock:
            if self._writer is not None:
                self._writer.add(features, latency_ms)
                self.rows += 1

    def close(self) -> Optional[Path]:
        """Write the CSV and its .meta.json; idempotent."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is None:
            return None
        atexit.unregister(self.close)
        return writer.close()
