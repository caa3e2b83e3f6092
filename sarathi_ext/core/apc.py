"""Active Prefill Control (seed 001, section 3.3): cap unfinished prefills, refuse tiny chunks."""

from __future__ import annotations

from dataclasses import dataclass

from .plan import Hold


@dataclass(slots=True)
class APCCounters:
    """Intervention counts, as in Table 10."""

    blocked_by_activity_cap: int = 0
    blocked_by_min_chunk: int = 0
    warm_starts: int = 0


class ActivePrefillControl:
    def __init__(self, c_max: int, l_min: int) -> None:
        if c_max < 1:
            raise ValueError(f"apc_c_max must be >= 1, got {c_max}")
        if l_min < 1:
            raise ValueError(f"apc_l_min must be >= 1, got {l_min}")
        self.c_max = int(c_max)
        self.l_min = int(l_min)
        self.counters = APCCounters()

    def activity_cap(self, max_seqs: int, num_decodes: int, budget: int, committed: int) -> int:
        # C_t = min(C_max, S_max - |D_t|, floor((B_max - U_t) / L_min))   (Eq. 12)
        return max(0, min(self.c_max, max_seqs - num_decodes, (budget - committed) // self.l_min))

    def gate(self, proposed: int, remaining: int, h: int, num_active: int, cap: int) -> tuple[int, Hold | None]:
        """Eq. 14: accept c_i*, warm-start with min(h_i, m_i), or refuse.

        ``num_active`` is |P_t|, the prefills already committed to this round's batch.
        """
        m = min(remaining, self.l_min)  # m_i = min(r_i, L_min)   (Eq. 13)
        if num_active < cap and proposed >= m:
            return proposed, None
        if proposed < m and num_active == 0:
            # Warm start: no prefill is active, so restore progress at minimal cost.
            self.counters.warm_starts += 1
            return min(h, m), None
        if proposed < m:
            self.counters.blocked_by_min_chunk += 1
            return 0, Hold.MIN_CHUNK
        self.counters.blocked_by_activity_cap += 1
        return 0, Hold.ACTIVITY_CAP
