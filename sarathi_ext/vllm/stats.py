"""Per-step profile rows for vLLM: Sarathi's StepProfiler, keyed by SchedulerOutput.

The rows, the CSV schema and the file handling are ``sarathi_ext.step_profiler.StepProfiler``'s;
this subclass only pairs each ``schedule()`` with its own ``update_from_output()``. vLLM's engine
core calls them in strict alternation in its plain loop (``EngineCore.step``,
vllm/v1/engine/core.py:667-697), but with a batch queue (async scheduling, pipeline parallelism)
it schedules step n+1 before step n's output is back (``step_with_batch_queue``), so a single
pending slot would pair the wrong rows. Keys are ``id(scheduler_output)``: the engine passes the
very object ``schedule()`` returned to ``update_from_output()``.

What is measured: the engine-core view, from ``schedule()`` returning to ``update_from_output()``
being entered: model execution on the workers, sampling and the transfer of outputs back to the
engine core. With a batch queue, overlapping steps are each timed from their own schedule, so a
row's latency also contains the time it waited behind the previous batch.
"""

from __future__ import annotations

import time
from typing import Any, Hashable, Optional

import numpy as np



from ..step_profiler import StepProfiler


class KeyedStepProfiler(StepProfiler):
    def __init__(self, path, provenance: Optional[dict[str, Any]] = None) -> None:
        super().__init__(path, {"source": "vllm", **(provenance or {})})
        self._in_flight: dict[Hashable, tuple[np.ndarray, float]] = {}

    def on_schedule_keyed(self, key: Hashable, features: np.ndarray) -> None:
        self._in_flight[key] = (features, time.perf_counter())
        if len(self._in_flight) > 64:  # outputs that never came back (engine shut down mid-step)
            self._in_flight.pop(next(iter(self._in_flight)))

    def on_step_completed_keyed(self, key: Hashable) -> None:
        pending = self._in_flight.pop(key, None)
        if pending is None:
            return
        self._pending = pending
        self.on_step_completed()
