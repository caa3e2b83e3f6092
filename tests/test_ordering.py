"""Prefill orders and the indexed heap (seed 001, Eq. 1-4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarathi_ext.core import FCFS, SPF, Aging, ConfigError, PolicyConfig, PredictedSJF, PrefillHeap, RequestView
from sarathi_ext.core.ordering import naive_aging_order


from _views import drain, view  # noqa: E402  (tests/ is on sys.path under pytest)


# alpha = 10, beta = -1; K_i = -alpha*a_i + beta*r_i  (Eq. 4)
#   A: a=0, r=100 -> K = -0  - 100 = -100
#   B: a=1, r=20  -> K = -10 - 20  = -30
#   C: a=2, r=60  -> K = -20 - 60  = -80
# max-K order: B, C, A
def three():
    return view(0, 0.0, 100), view(1, 1.0, 20), view(2, 2.0, 60)


def test_aging_keys_by_hand():
    order = Aging(10.0, -1.0)
    a, b, c = three()
    assert [order.heap_key(r) for r in (a, b, c)] == [-100.0, -30.0, -80.0]
    # P_i at t = 5 (Eq. 1): 10*(5-a) - r  ->  A: 50-100 = -50, B: 40-20 = 20, C: 30-60 = -30
    assert [order.priority(r, 5.0) for r in (a, b, c)] == [-50.0, 20.0, -30.0]
    # Eq. 3: P = alpha*t + K  ->  -50 = 50 + (-100)
    assert order.priority(a, 5.0) == 10.0 * 5.0 + order.heap_key(a)


def test_aging_heap_pops_in_max_k_order():
    heap = PrefillHeap(Aging(10.0, -1.0))
    for r in three():
        heap.push(r)
    assert len(heap) == 3
    assert heap.peek().req_id == 1
    assert drain(heap) == [1, 2, 0]
    assert len(heap) == 0 and heap.pop() is None and heap.peek() is None


def test_aging_rekey_after_chunk():
    heap = PrefillHeap(Aging(10.0, -1.0))
    a, b, c = three()
    for r in (a, b, c):
        heap.push(r)
    # C gets a 55-token chunk: r_C = 60 - 55 = 5 (Eq. 2) -> K_C = -20 - 5 = -25 > K_B = -30
    c.prefill_done = 55
    heap.push(c)
    assert len(heap) == 3  # re-key, not a second member
    assert [r.req_id for r in heap.ordered()] == [2, 1, 0]
    # A gets 98: r_A = 2 -> K_A = -2, now the largest key
    a.prefill_done = 98
    heap.update(a)
    assert drain(heap) == [0, 2, 1]


def test_aging_tie_breaks_by_arrival():
    # alpha = 10: A a=0 r=30 -> K = -30;  B a=1 r=20 -> K = -10-20 = -30: tie, earlier arrival first
    heap = PrefillHeap(Aging(10.0, -1.0))
    heap.push(view(1, 1.0, 20))
    heap.push(view(0, 0.0, 30))
    assert drain(heap) == [0, 1]


def test_remove():
    heap = PrefillHeap(Aging(10.0, -1.0))
    a, b, c = three()
    for r in (a, b, c):
        heap.push(r)
    assert heap.remove(1) is b
    assert 1 not in heap and 0 in heap and len(heap) == 2
    assert heap.remove(1) is None
    assert heap.remove(99) is None
    assert drain(heap) == [2, 0]
    # a removed request can come back with a fresh key
    heap.push(b)
    assert drain(heap) == [1]


def test_fcfs_order_ignores_length_and_progress():
    heap = PrefillHeap(FCFS())
    rs = [view(0, 3.0, 5), view(1, 1.0, 500), view(2, 2.0, 50)]
    for r in rs:
        heap.push(r)
    rs[1].prefill_done = 499
    heap.push(rs[1])
    assert drain(heap) == [1, 2, 0]


def test_spf_order_and_rekey():
    heap = PrefillHeap(SPF())
    rs = [view(0, 0.0, 300), view(1, 1.0, 40), view(2, 2.0, 100)]
    for r in rs:
        heap.push(r)
    assert [r.req_id for r in heap.ordered()] == [1, 2, 0]
    # request 0 gets 290 tokens: remaining 10 < 40 < 100
    rs[0].prefill_done = 290
    heap.push(rs[0])
    assert drain(heap) == [0, 1, 2]


def test_from_weight_base():
    # alpha = weight_base * |beta|: 100 * 2 = 200
    a = Aging.from_weight_base(100.0, beta=-2.0)
    assert (a.alpha, a.beta) == (200.0, -2.0)
    b = Aging.from_weight_base(37.5)
    assert (b.alpha, b.beta) == (37.5, -1.0)


@pytest.mark.parametrize("alpha,beta", [(0.0, -1.0), (-1.0, -1.0), (1.0, 0.0), (1.0, 0.5), (float("nan"), -1.0)])
def test_aging_rejects_bad_weights(alpha, beta):
    with pytest.raises(ValueError):
        Aging(alpha, beta)


def test_policy_config_rejects_bad_weights():
    with pytest.raises(ConfigError, match="aging_alpha"):
        PolicyConfig(policy="aging", aging_alpha=0.0)
    with pytest.raises(ConfigError, match="aging_beta"):
        PolicyConfig(policy="aging", aging_beta=0.0)


# -- the heap agrees with recomputing Eq. 1 for every request --------------------------------------

# Quarter-second arrivals and integer weights keep every key an exact binary float, so ties are
# real ties and both sides break them the same way (arrival, then sequence).
req_st = st.tuples(st.integers(0, 40), st.integers(1, 500))  # (arrival in quarters, prompt)


@settings(max_examples=60, deadline=None)
@given(
    reqs=st.lists(req_st, min_size=1, max_size=25),
    alpha=st.integers(1, 400),
    beta=st.integers(-5, -1),
    ops=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 499), st.booleans()), max_size=40),
    now_q=st.integers(40, 400),
)
def test_heap_matches_naive_order(reqs, alpha, beta, ops, now_q):
    views = [view(i, a / 4, p) for i, (a, p) in enumerate(reqs)]
    heap = PrefillHeap(Aging(float(alpha), float(beta)))
    for r in views:
        heap.push(r)
    live = {r.req_id: r for r in views}
    for idx, chunk, drop in ops:
        r = views[idx % len(views)]
        if drop:
            heap.remove(r.req_id)
            live.pop(r.req_id, None)
        else:
            r.prefill_done = min(r.prompt_len - 1, r.prefill_done + chunk)  # Eq. 2
            heap.push(r)
            live[r.req_id] = r
    expected = [r.req_id for r in naive_aging_order(live.values(), now_q / 4, float(alpha), float(beta))]
    # and at a much later time too: alpha*t is common to all (Eq. 3), so the order is the same
    later = [r.req_id for r in naive_aging_order(live.values(), now_q / 4 + 1000.0, float(alpha), float(beta))]
    assert later == expected
    assert [r.req_id for r in heap.ordered()] == expected
    assert drain(heap) == expected


def test_predicted_sjf_orders_by_score_then_unscored_by_arrival():
    # Scores (lower = shorter predicted output): A 0.9, B 0.1, C none, D 0.5, E none.
    # Scored first by score: B (0.1), D (0.5), A (0.9); then the unscored by arrival: C, E.
    heap = PrefillHeap(PredictedSJF())
    for i, (rid, score) in enumerate([("A", 0.9), ("B", 0.1), ("C", None), ("D", 0.5), ("E", None)]):
        v = RequestView(rid, float(i), 10, score=score)
        v._seq = i
        heap.push(v)
    assert [heap.pop().req_id for _ in range(5)] == ["B", "D", "A", "C", "E"]
