"""The engine-agnostic view of one request, as the planner sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional


@dataclass(slots=True, eq=False)
class RequestView:
    """One request's scheduling state.

    Adapters create a view on arrival and hand it to the planner, which then owns the
    progress counters: it advances ``prefill_done`` and the decode context when it plans a round,
    because the aging key must change the moment a chunk is granted (Eq. 2), not when the engine
    reports back.
    """

    req_id: Hashable
    arrival_time: float  # a_i, seconds on the engine's clock
    prompt_len: int
    # Predicted length score for predicted-shortest-first orders (lower runs first).
    score: Optional[float] = None
    # True output length, for the oracle-sjf upper bound. Only the simulator knows it; engines
    # leave it None.
    true_output_len: Optional[int] = None
    prefill_done: int = 0
    # Tokens to prefill. Equals prompt_len until a recompute preemption folds the generated tokens
    # into the prompt, as Sarathi's reset_for_recompute does.
    prefill_target: int = 0
    is_decoding: bool = False
    context_len: int = 0  # tokens whose KV is cached; a decode reads them all
    num_generated: int = 0
    admitted: bool = False  # holds a sequence slot and its KV blocks
    num_blocks: int = 0
    num_preemptions: int = 0
    _seq: int = 0  # arrival order among equal timestamps; set by the planner

    def __post_init__(self) -> None:
        if self.prompt_len < 1:
            raise ValueError(f"request {self.req_id!r}: prompt_len must be >= 1, got {self.prompt_len}")
        if self.prefill_target == 0:
            self.prefill_target = self.prompt_len

    @property
    def remaining(self) -> int:
        # r_i(n) of Eq. 1: prefill tokens still to process.
        return self.prefill_target - self.prefill_done
