"""What one scheduling round decided, and why it held requests back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Hashable

import numpy as np


class Hold(str, Enum):
    """Why a request that wanted prefill tokens got none this round."""

    BUDGET = "budget"  # B_max - U_t == 0: h_i = 0 in Eq. 6
    NO_SLOT = "no_slot"  # S_max sequences already admitted
    NO_KV = "no_kv"  # not enough free KV blocks for the whole prompt
    ADMISSION_CLOSED = "admission_closed"  # behind a request that did not fit (Sarathi stops there)
    ACTIVITY_CAP = "activity_cap"  # APC: |P_t| >= C_t (Eq. 12, 14)
    MIN_CHUNK = "min_chunk"  # APC: c_i* < m_i with other prefills active (Eq. 13, 14)
    CHUNK_ZERO = "chunk_zero"  # the chunk policy chose 0 tokens
    NOT_ARRIVED = "not_arrived"  # arrival time lies in the future; never admitted early


@dataclass(slots=True)
class PrefillChunk:
    req_id: Hashable
    start: int  # tokens of the prompt already prefilled before this chunk
    tokens: int  # c_i
    completes: bool  # this chunk finishes the prefill, so the round emits the first token


@dataclass(slots=True)
class RoundPlan:
    """The planner's decision for one iteration. The engine applies it as given."""

    decodes: list = field(default_factory=list)  # req_ids, in the order they run
    decode_contexts: list = field(default_factory=list)  # KV tokens each decode reads (its position)
    prefills: list = field(default_factory=list)  # PrefillChunk, in policy order
    admitted: list = field(default_factory=list)  # req_ids newly given a slot and KV blocks
    preempted: list = field(default_factory=list)  # req_ids evicted for recompute, newest first
    held: list = field(default_factory=list)  # (req_id, Hold) for every candidate looked at and refused
    boosted: list = field(default_factory=list)  # req_ids admitted ahead of the order by the starvation guard
    not_considered: int = 0  # queued prefills the round never reached (budget, or S_max refusals)
    blocks_allocated: int = 0
    blocks_freed: int = 0  # by preemption
    features: np.ndarray | None = None  # the 16 features of the batch as planned

    @property
    def prefill_tokens(self) -> int:
        return sum(p.tokens for p in self.prefills)

    @property
    def num_tokens(self) -> int:
        return len(self.decodes) + self.prefill_tokens

    def is_empty(self) -> bool:
        return not self.decodes and not self.prefills
