"""A vLLM ``RequestQueue`` that serves waiting requests in a sarathi_ext ordering.

vLLM V1 keeps waiting requests in a ``RequestQueue`` (vllm/v1/core/sched/request_queue.py:20),
created in ``Scheduler.__init__`` (scheduler.py:232) and read by the admission loop through
``peek_request``, ``pop_request`` and ``prepend_requests`` (scheduler.py:1076, :1055, :1547,
:1610). ``PolicyRequestQueue`` implements that interface on the core's ``PrefillHeap``, so the order is the core's own key
function, not a re-implementation:

    aging   K_i = -alpha*a_i + beta*r_i (Eq. 4), max first: sarathi_ext.core.ordering.Aging
    spf     r_i, smallest first:                           sarathi_ext.core.ordering.SPF
    psjf    the request's predicted-length score, lowest first (the core's PredictedSJF); a request
            without a score ranks after every scored one, FCFS among themselves
    fcfs    a_i (only for completeness: the scheduler keeps upstream's deque for plain fcfs)

with ties broken by arrival, then insertion order (PrefillHeap). Each vLLM ``Request`` is seen
through a ``RequestView``: ``arrival_time`` = a_i, ``prefill_target`` = ``request.num_tokens``
(prompt plus any output a recompute preemption must prefill again) and ``prefill_done`` =
``request.num_computed_tokens``, so r_i = num_tokens - num_computed_tokens.

Cost: O(log n) per add, pop and remove (lazy deletion in the heap); aging's key is time-free
(Eq. 3-4: alpha*t is shared by every request), so no per-step re-sort is needed. A key is computed
when the request enters the queue; a waiting request's r_i does not change while it waits (vLLM
resets ``num_computed_tokens`` before re-queueing a preempted request, and KV-holding requests
live in ``kv_holding_waiting``, which we leave to upstream). If it does change anyway (e.g. a
streaming-input session growing its prompt), the request is re-keyed lazily when it reaches the
top. Iteration is O(n log n) (a sorted snapshot), as upstream's priority queue.

Predicted-length score (psjf): ``request.sampling_params.extra_args["predicted_len"]``, else
``extra_args["length_score"]`` (any finite number; lower runs first). A client sets it with the
OpenAI API's ``vllm_xargs`` / ``extra_args`` field; a missing or non-numeric value means unscored.

Starvation guard (``starvation_threshold_s`` > 0, any policy): a request that has waited at least
that long (by ``time.time()``, vLLM's arrival clock) goes ahead of the order, oldest first. A second
heap ordered by arrival finds the oldest in O(log n), so the guard costs the same as the order.

Contract, as vLLM's FCFS and priority queues:

- ``peek_request`` pins its choice: the next ``pop_request`` returns that request even if the order
  has changed since (a time-based boost, an arrival with a better key), unless it was removed. The
  scheduler unpins at the start of every ``schedule()``, so a pin never outlives one step.
- ``prepend_request(s)`` (preempted and skipped requests) re-insert by key, like upstream's
  ``PriorityRequestQueue`` (a policy queue has no front to prepend to). A preempted request keeps
  its arrival time, so under aging it regains its age, as in the core planner.
- ``remove_request`` raises ValueError for a request not in the queue; ``remove_requests`` ignores
  those. ``pop_request`` and ``peek_request`` on an empty queue raise IndexError.
- Iteration yields the current policy order: the pinned request, then boosted ones, then the rest.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterable, Iterator, Optional

from vllm.v1.core.sched.request_queue import RequestQueue
from vllm.v1.request import Request

from sarathi_ext.core.ordering import FCFS, PrefillHeap, PrefillOrder
from sarathi_ext.core.request import RequestView

SCORE_KEYS = ("predicted_len", "length_score")


def request_score(request: Request) -> Optional[float]:
    """The predicted-length score carried in ``sampling_params.extra_args`` (see SCORE_KEYS)."""
    params = request.sampling_params
    extra = getattr(params, "extra_args", None) if params is not None else None
    if not extra:
        return None
    for key in SCORE_KEYS:
        value = extra.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def request_view(request: Request, seq: int) -> RequestView:
    """The core's view of a waiting vLLM request (r_i = num_tokens - num_computed_tokens)."""
    target = max(request.num_tokens, 1)
    view = RequestView(
        req_id=request.request_id,
        arrival_time=float(request.arrival_time),
        prompt_len=max(request.num_prompt_tokens, 1),
        score=request_score(request),
        prefill_done=min(request.num_computed_tokens, target),
        prefill_target=target,
    )
    view._seq = seq
    return view


class PolicyRequestQueue(RequestQueue):
    def __init__(self, order: PrefillOrder, starvation_threshold_s: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.order = order
        self.starvation_threshold_s = float(starvation_threshold_s)
        self.clock = clock
        self._heap = PrefillHeap(order)
        self._oldest = PrefillHeap(FCFS()) if self.starvation_threshold_s > 0 else None
        self._requests: dict[str, Request] = {}
        self._pinned: Optional[Request] = None
        self._seq = 0
        self.boosts = 0  # requests served early by the starvation guard

    # -- internals ----------------------------------------------------------------------------

    def _insert(self, request: Request) -> None:
        self._seq += 1
        view = request_view(request, self._seq)
        self._requests[request.request_id] = request
        self._heap.push(view)
        if self._oldest is not None:
            self._oldest.push(view)

    def _drop(self, req_id: str) -> Request:
        request = self._requests.pop(req_id)
        self._heap.remove(req_id)
        if self._oldest is not None:
            self._oldest.remove(req_id)
        if self._pinned is not None and self._pinned.request_id == req_id:
            self._pinned = None
        return request

    def _fresh_top(self) -> Request:
        while True:
            view = self._heap.peek()
            request = self._requests[view.req_id]
            target = max(request.num_tokens, 1)
            if view.prefill_target == target and view.prefill_done == min(request.num_computed_tokens, target):
                return request
            # r_i changed while queued: re-key (same view, so the tie-break order is kept).
            view.prefill_target = target
            view.prefill_done = min(request.num_computed_tokens, target)
            self._heap.update(view)
            if self._oldest is not None:
                self._oldest.update(view)

    def _select(self) -> Request:
        if not self._requests:
            raise IndexError("peek from an empty queue")
        if self._pinned is not None:
            return self._pinned
        if self._oldest is not None:
            oldest = self._oldest.peek()
            if self.clock() - oldest.arrival_time >= self.starvation_threshold_s:
                request = self._requests[oldest.req_id]
                if request is not self._fresh_top():
                    self.boosts += 1
                return request
        return self._fresh_top()

    def unpin(self) -> None:
        """Forget a peek that was not followed by a pop (called at the start of each step)."""
        self._pinned = None

    # -- RequestQueue -------------------------------------------------------------------------

    def add_request(self, request: Request) -> None:
        if request.request_id in self._requests:
            self._drop(request.request_id)  # re-add = re-key
        self._insert(request)

    def pop_request(self) -> Request:
        if not self._requests:
            raise IndexError("pop from an empty queue")
        return self._drop(self._select().request_id)

    def peek_request(self) -> Request:
        self._pinned = self._select()
        return self._pinned

    def prepend_request(self, request: Request) -> None:
        self.add_request(request)

    def prepend_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.add_request(request)

    def remove_request(self, request: Request) -> None:
        if request.request_id not in self._requests:
            raise ValueError(f"request {request.request_id!r} is not in the queue")
        self._drop(request.request_id)

    def remove_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            if request.request_id in self._requests:
                self._drop(request.request_id)

    def __bool__(self) -> bool:
        return bool(self._requests)

    def __len__(self) -> int:
        return len(self._requests)

    def __contains__(self, request: object) -> bool:
        return getattr(request, "request_id", None) in self._requests

    def __iter__(self) -> Iterator[Request]:
        return iter(self.ordered())

    def ordered(self) -> list[Request]:
        """The queue in current policy order (a snapshot; O(n log n))."""
        if not self._requests:
            return []
        self._fresh_top()
        out: list[Request] = []
        seen: set[str] = set()
        if self._pinned is not None:
            out.append(self._pinned)
            seen.add(self._pinned.request_id)
        if self._oldest is not None:
            deadline = self.clock() - self.starvation_threshold_s
            for view in self._oldest.ordered():
                if view.arrival_time > deadline:
                    break
                if view.req_id not in seen:
                    out.append(self._requests[view.req_id])
                    seen.add(view.req_id)
        for view in self._heap.ordered():
            if view.req_id not in seen:
                out.append(self._requests[view.req_id])
        return out

    def __repr__(self) -> str:
        return f"PolicyRequestQueue({self.order!r}, n={len(self)})"
