"""Starvation guards: keep a bad-key request from waiting forever behind a stream of better ones.

A guard composes with any PrefillOrder. The planner asks it, before each waiting candidate, for an
overdue waiting request to serve ahead of the order. Three rules (``PolicyConfig.starvation``):

    none         the order alone.
    pars         seed 000 (PARS, section III): a request whose wait ``now - a_i`` exceeds T
                 (strictly, "exceeds") is boosted ahead of every non-boosted candidate, waiting or
                 admitted; boosted requests run in arrival order among themselves.
    clairvoyant  seed 002 (Clairvoyant, section 3.4): once the longest waiter has waited tau (at
                 least tau, ">="), it is promoted to the front. Clairvoyant promotes one request per
                 dispatch to a serial backend; here one dispatch is one round, so at most one
                 request per round is promoted, the oldest overdue one. The rest follow the order.
    aging        not a guard but a re-keying of the order (``AgedOrder``): seed 001's Eq. 1 with the
                 order's key in place of r_i, served time-free as Eq. 4. See AgedOrder.

T (tau) is ``PolicyConfig.starvation_threshold_s``: 120 s by default, PARS's 2 minutes.
Clairvoyant's calibration is tau = 3 * E[S_short] (the mean service time of a short request); set
the threshold to that for its rule.

Cost: the guard keeps a second heap of the waiting requests ordered by arrival (a PrefillHeap under
FCFS, lazily consistent with the main one through its version stamps), so finding the oldest
waiter is O(log n) amortised, and a round stays O(k log n). The vLLM adapter's queue
(sarathi_ext.vllm.queue) uses the same arrival heap; its rule is PARS's with ">=".
"""

from __future__ import annotations

import math
from typing import Hashable, Optional

from .ordering import FCFS, PrefillHeap, PrefillOrder
from .request import RequestView

STARVATION_GUARDS = ("none", "pars", "clairvoyant", "aging")


class StarvationGuard:
    """Tracks the waiting requests by arrival and names an overdue one, if any.

    The planner calls ``track``/``untrack`` wherever a request enters or leaves its waiting heap,
    ``begin_round`` once per round, and ``take(now)`` before each waiting candidate.
    """

    name = "base"
    strict = False  # overdue when wait > T (True) or wait >= T (False)
    per_round: Optional[int] = None  # most promotions per round; None = every overdue request

    def __init__(self, threshold_s: float) -> None:
        if not (math.isfinite(threshold_s) and threshold_s >= 0):
            raise ValueError(f"starvation_threshold_s: must be a finite number >= 0, got {threshold_s}")
        self.threshold_s = float(threshold_s)
        self._oldest = PrefillHeap(FCFS())
        self._promoted_this_round = 0

    def track(self, r: RequestView) -> None:
        self._oldest.push(r)

    def untrack(self, req_id: Hashable) -> None:
        self._oldest.remove(req_id)

    def begin_round(self) -> None:
        self._promoted_this_round = 0

    def overdue(self, r: RequestView, now: float) -> bool:
        wait = now - r.arrival_time
        return wait > self.threshold_s if self.strict else wait >= self.threshold_s

    def take(self, now: float) -> Optional[RequestView]:
        """The oldest waiting request if it is overdue (removed from the guard's heap), else None."""
        if self.per_round is not None and self._promoted_this_round >= self.per_round:
            return None
        r = self._oldest.peek()
        if r is None or not self.overdue(r, now):
            return None
        self._oldest.pop()
        self._promoted_this_round += 1
        return r

    def __len__(self) -> int:
        return len(self._oldest)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold_s={self.threshold_s})"


class ParsGuard(StarvationGuard):
    name = "pars"
    strict = True


class ClairvoyantGuard(StarvationGuard):
    name = "clairvoyant"
    strict = False
    per_round = 1


class AgedOrder(PrefillOrder):
    """Aging on wait time over any order whose key is a cost (smaller runs first).

    Seed 001's Eq. 1 with the base order's key c_i in place of r_i:
        P_i(t) = alpha*(t - a_i) + beta*c_i,   alpha > 0, beta < 0,
    and, since alpha*t is shared by every request, the time-free max-key of Eq. 4:
        K_i = -alpha*a_i + beta*c_i,
    served as the min-key  -K_i = alpha*a_i + |beta|*c_i.
    For predicted-SJF c_i is the score, so K_i = -alpha*a_i + beta*score. A request arriving at a_j
    with key c_j >= 0 outranks one at (a_i, c_i) only if a_j < a_i + |beta|*c_i/alpha: after that
    time no newcomer overtakes it, which is the wait bound (for bounded, non-negative keys). An
    infinite key (an unscored request under psjf) stays infinite: unscored requests still run
    after every scored one.
    """

    def __init__(self, base: PrefillOrder, alpha: float, beta: float = -1.0) -> None:
        if not alpha > 0:
            raise ValueError(f"aging_alpha must be > 0, got {alpha}")
        if not beta < 0:
            raise ValueError(f"aging_beta must be < 0, got {beta}")
        self.base = base
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.name = f"{base.name}+aging"
        self.admitted_first = base.admitted_first

    def key(self, r: RequestView) -> float:
        return self.alpha * r.arrival_time - self.beta * self.base.key(r)

    def __repr__(self) -> str:
        return f"AgedOrder({self.base!r}, alpha={self.alpha}, beta={self.beta})"


def build_guard(name: str, threshold_s: float) -> Optional[StarvationGuard]:
    """The guard object for ``name`` (None for ``none`` and ``aging``, which re-keys the order)."""
    if name == "pars":
        return ParsGuard(threshold_s)
    if name == "clairvoyant":
        return ClairvoyantGuard(threshold_s)
    if name in ("none", "aging"):
        return None
    raise ValueError(f"starvation: unknown guard {name!r}; choose from {list(STARVATION_GUARDS)}")
