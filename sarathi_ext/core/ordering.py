"""Prefill ordering policies and the indexed heap that serves them.

Every order here ranks requests by a key that does not depend on the clock, so a heap stays valid
between rounds and a round costs O(k log n) for the k requests it looks at. For aging this is the
rewrite of Eq. 1 into Eq. 3-4: P_i(n) = alpha*t + K_i(n), and alpha*t is shared by all requests.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Hashable, Iterable, Iterator

from .request import RequestView


class PrefillOrder:
    """A total order on prefill candidates. Smaller ``key`` runs first."""

    name = "base"
    # Serve every admitted prefill before any waiting request. Upstream FCFS does this (Sarathi
    # and vLLM schedule the running queue, then the waiting one), which differs from arrival
    # order only for a preempted request waiting to be recomputed.
    admitted_first = False

    def key(self, r: RequestView) -> float:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FCFS(PrefillOrder):
    name = "fcfs"
    admitted_first = True

    def key(self, r: RequestView) -> float:
        return r.arrival_time


class Aging(PrefillOrder):
    """P_i(n) = alpha*(t - a_i) + beta*r_i(n), alpha > 0, beta < 0 (Eq. 1).

    Served as a max-heap on K_i(n) = -alpha*a_i + beta*r_i(n) (Eq. 4), stored negated in a min-heap.
    ``alpha`` is priority per second of waiting and ``|beta|`` per remaining prompt token, so
    alpha/|beta| is the "weight base" of section 4.3.2: how many prompt tokens one second of
    waiting is worth.
    """

    name = "aging"

    def __init__(self, alpha: float, beta: float = -1.0) -> None:
        if not alpha > 0:
            raise ValueError(f"aging_alpha must be > 0, got {alpha}")
        if not beta < 0:
            raise ValueError(f"aging_beta must be < 0, got {beta}")
        self.alpha = float(alpha)
        self.beta = float(beta)

    @classmethod
    def from_weight_base(cls, weight_base: float, beta: float = -1.0) -> "Aging":
        return cls(alpha=weight_base * abs(beta), beta=beta)

    def heap_key(self, r: RequestView) -> float:
        # K_i(n) = -alpha*a_i + beta*r_i(n)   (Eq. 4)
        return -self.alpha * r.arrival_time + self.beta * r.remaining

    def key(self, r: RequestView) -> float:
        return -self.heap_key(r)

    def priority(self, r: RequestView, now: float) -> float:
        # P_i(n) = alpha*(t - a_i) + beta*r_i(n)   (Eq. 1), for reports and the naive reference.
        return self.alpha * (now - r.arrival_time) + self.beta * r.remaining

    def __repr__(self) -> str:
        return f"Aging(alpha={self.alpha}, beta={self.beta})"


class SPF(PrefillOrder):
    """Shortest remaining prefill first: the alpha -> 0 end of aging."""

    name = "spf"

    def key(self, r: RequestView) -> float:
        return float(r.remaining)


class PredictedSJF(PrefillOrder):
    """Predicted shortest job first (seed 000, PARS): the lowest predicted-length score runs first.

    Requests without a score run after every scored one, in arrival order among themselves. The
    score is computed once, when the request arrives (a predictor artifact run by the adapter),
    and carried in ``RequestView.score``: nothing is predicted on the scheduling path. Also named
    ``predicted-sjf``. Pair it with a starvation guard (sarathi_ext.core.starvation).
    """

    name = "psjf"

    def key(self, r: RequestView) -> float:
        return math.inf if r.score is None else float(r.score)


class OracleSJF(PrefillOrder):
    """Oracle shortest job first: the fewest true output tokens still to generate runs first.

    The upper bound for predicted-SJF. Key = true_output_len - num_generated (the remaining decode
    work). Only the simulator knows the true length (it fills ``RequestView.true_output_len``);
    real engines leave it None, and then every request keys +inf, i.e. this degrades to FCFS.
    """

    name = "oracle-sjf"

    def key(self, r: RequestView) -> float:
        if r.true_output_len is None:
            return math.inf
        return float(max(r.true_output_len - r.num_generated, 0))


class Unified(PrefillOrder):
    """One priority for chunked prefill: remaining prefill, predicted decode work, and aging.

        P_i(t) = alpha*(t - a_i) + beta*(r_i(n) + gamma*D_i),   alpha > 0, beta < 0,

    served time-free as in Eq. 3-4 (alpha*t is common to all): max-key
    K_i = -alpha*a_i + beta*(r_i + gamma*D_i), stored as the min-key alpha*a_i + |beta|*(r_i + gamma*D_i).

    Units. r_i is prefill tokens still to process; D_i is the request's predicted decode work, its
    ``score`` taken as predicted output tokens (the length predictor's output, computed once at
    arrival). With static chunks every token, prefill or decode, takes one slot of the B_max token
    budget, so gamma = 1 prices a decode token like a prefill token; gamma < 1 discounts decode
    work (a decode token also holds a sequence slot and KV, but runs batched with others). A score
    that is not a token count (e.g. Clairvoyant's P(Long) in [0, 1]) maps to tokens through gamma:
    set gamma = the expected output tokens of a Long request times the per-token price. A request
    without a score has D_i = 0, so with no scores the key is exactly Aging's (Eq. 4).
    alpha/|beta| is the weight base: prefill-token equivalents one second of waiting is worth; as
    for aging, a newcomer with cost c_j >= 0 overtakes request i only if it arrives before
    a_i + |beta|*(r_i + gamma*D_i)/alpha, which bounds the wait.
    """

    name = "unified"

    def __init__(self, alpha: float, beta: float = -1.0, gamma: float = 1.0) -> None:
        if not alpha > 0:
            raise ValueError(f"aging_alpha must be > 0, got {alpha}")
        if not beta < 0:
            raise ValueError(f"aging_beta must be < 0, got {beta}")
        if not (math.isfinite(gamma) and gamma >= 0):
            raise ValueError(f"unified_gamma must be a finite number >= 0, got {gamma}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.gamma = float(gamma)

    @staticmethod
    def decode_work(r: RequestView) -> float:
        return 0.0 if r.score is None else float(r.score)

    def cost(self, r: RequestView) -> float:
        return r.remaining + self.gamma * self.decode_work(r)

    def heap_key(self, r: RequestView) -> float:
        # K_i = -alpha*a_i + beta*(r_i + gamma*D_i)
        return -self.alpha * r.arrival_time + self.beta * self.cost(r)

    def key(self, r: RequestView) -> float:
        return -self.heap_key(r)

    def priority(self, r: RequestView, now: float) -> float:
        return self.alpha * (now - r.arrival_time) + self.beta * self.cost(r)

    def __repr__(self) -> str:
        return f"Unified(alpha={self.alpha}, beta={self.beta}, gamma={self.gamma})"


def naive_aging_order(
    requests: Iterable[RequestView], now: float, alpha: float, beta: float
) -> list[RequestView]:
    """Reference implementation: recompute every P_i(n) and sort, O(n log n) per round.

    Kept for the overhead benchmark and for tests that check the heap against it; ties break by
    arrival, as in the heap.
    """
    return sorted(
        requests,
        key=lambda r: (-(alpha * (now - r.arrival_time) + beta * r.remaining), r.arrival_time, r._seq),
    )


class PrefillHeap:
    """A min-heap of requests under a PrefillOrder, with O(log n) update and lazy removal.

    Each push records the request's version; a later push or a removal bumps the version, and
    stale entries are dropped when they reach the top. Ties break by arrival, then by insertion
    sequence, so orders are deterministic.
    """

    __slots__ = ("_order", "_heap", "_version", "_members", "_stamp")

    def __init__(self, order: PrefillOrder) -> None:
        self._order = order
        self._heap: list[tuple[float, float, int, int, RequestView]] = []
        self._version: dict[Hashable, int] = {}
        self._members: dict[Hashable, RequestView] = {}
        # One counter for all pushes, so a stale entry can never match a re-queued request's stamp
        # and finished ids need not be remembered.
        self._stamp = 0

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, req_id: Hashable) -> bool:
        return req_id in self._members

    def __iter__(self) -> Iterator[RequestView]:
        return iter(self._members.values())

    def push(self, r: RequestView) -> None:
        """Insert ``r``, or re-key it if present (after a chunk changed r_i)."""
        self._stamp += 1
        v = self._stamp
        self._version[r.req_id] = v
        self._members[r.req_id] = r
        heapq.heappush(self._heap, (self._order.key(r), r.arrival_time, r._seq, v, r))
        if len(self._heap) > 4 * len(self._members) + 1024:
            # Re-keys leave stale entries behind; rebuild before they dominate the heap.
            self._heap = [e for e in self._heap if self._version.get(e[4].req_id) == e[3]]
            heapq.heapify(self._heap)

    update = push

    def remove(self, req_id: Hashable) -> RequestView | None:
        r = self._members.pop(req_id, None)
        if r is not None:
            del self._version[req_id]
        return r

    def _prune(self) -> None:
        heap, version = self._heap, self._version
        while heap:
            top = heap[0]
            if version.get(top[4].req_id) == top[3]:
                return
            heapq.heappop(heap)

    def peek(self) -> RequestView | None:
        self._prune()
        return self._heap[0][4] if self._heap else None

    def peek_key(self) -> tuple | None:
        self._prune()
        return self._heap[0][:3] if self._heap else None

    def pop(self) -> RequestView | None:
        self._prune()
        if not self._heap:
            return None
        r = heapq.heappop(self._heap)[4]
        del self._members[r.req_id]
        del self._version[r.req_id]
        return r

    def ordered(self) -> list[RequestView]:
        """All members in order, without disturbing the heap (O(n log n); for tests and reports)."""
        live = [e for e in self._heap if self._version.get(e[4].req_id) == e[3]]
        return [e[4] for e in sorted(live, key=lambda e: e[:3])]


ORDERS: dict[str, Callable[..., PrefillOrder]] = {
    "fcfs": FCFS,
    "aging": Aging,
    "spf": SPF,
    "psjf": PredictedSJF,
    "predicted-sjf": PredictedSJF,  # the name for psjf
    "oracle-sjf": OracleSJF,
    "unified": Unified,
}
