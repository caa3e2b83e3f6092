"""PolicyRequestQueue keeps vLLM's RequestQueue contract (peek pins, prepend, remove, iteration)."""

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import pytest

pytest.importorskip("vllm", reason="needs the vllm wheel; build a CPU venv with scripts/vllm_test_env.sh")
pytestmark = pytest.mark.vllm

from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

from sarathi_ext.core import SPF, Aging  # noqa: E402
from sarathi_ext.core import PredictedSJF  # noqa: E402
from sarathi_ext.vllm.queue import PolicyRequestQueue, request_score  # noqa: E402


def req(rid, n, arrival, extra=None):
    return Request(request_id=rid, prompt_token_ids=[5] * n, pooling_params=None,
                   sampling_params=SamplingParams(max_tokens=2, extra_args=extra), arrival_time=arrival)


def ids(q):
    return [r.request_id for r in q]


def test_empty_queue_raises_like_upstream():
    q = PolicyRequestQueue(SPF())
    assert not q and len(q) == 0 and list(q) == []
    with pytest.raises(IndexError):
        q.peek_request()
    with pytest.raises(IndexError):
        q.pop_request()
    with pytest.raises(ValueError):
        q.remove_request(req("x", 3, 1.0))
    q.remove_requests([req("x", 3, 1.0)])  # ignores absent ones, as upstream's filter


def test_spf_order_iteration_and_pop():
    q = PolicyRequestQueue(SPF())
    for r in [req("a", 30, 1.0), req("b", 10, 2.0), req("c", 20, 3.0), req("d", 10, 0.5)]:
        q.add_request(r)
    assert ids(q) == ["d", "b", "c", "a"] and len(q) == 4 and bool(q)
    assert [q.pop_request().request_id for _ in range(4)] == ["d", "b", "c", "a"]


def test_peek_pins_until_pop_or_remove():
    clock = [100.0]
    q = PolicyRequestQueue(SPF())
    a, b = req("a", 30, 1.0), req("b", 20, 2.0)
    q.add_request(a)
    q.add_request(b)
    assert q.peek_request() is b
    q.add_request(req("c", 5, 3.0))  # better key arrives after the peek
    assert q.peek_request() is b and ids(q)[0] == "b"
    assert q.pop_request() is b  # the pinned one
    assert q.peek_request().request_id == "c"
    q.remove_request(q.peek_request())  # removing the pinned request releases the pin
    assert q.pop_request() is a
    del clock


def test_unpin_restores_policy_order():
    q = PolicyRequestQueue(SPF())
    q.add_request(req("a", 30, 1.0))
    assert q.peek_request().request_id == "a"
    q.add_request(req("b", 3, 2.0))
    q.unpin()
    assert q.peek_request().request_id == "b"


def test_prepend_reinserts_by_key_and_remove_requests():
    q = PolicyRequestQueue(Aging(1.0, -1.0))
    rs = [req("a", 50, 10.0), req("b", 10, 20.0), req("c", 30, 5.0)]
    q.prepend_requests(rs)
    # K = -a - r: a: -60, b: -30, c: -35 -> max first: b, c, a
    assert ids(q) == ["b", "c", "a"]
    first = q.pop_request()
    q.prepend_request(first)  # a skipped request goes back to its place
    assert ids(q) == ["b", "c", "a"]
    q.remove_requests([rs[1], rs[0]])
    assert ids(q) == ["c"] and len(q) == 1


def test_psjf_scores_and_unscored_fcfs():
    q = PolicyRequestQueue(PredictedSJF())
    rs = [req("a", 5, 1.0), req("b", 5, 2.0, {"predicted_len": 40}), req("c", 5, 3.0, {"length_score": -1.5}),
          req("d", 5, 0.5), req("e", 5, 4.0, {"predicted_len": "long"})]
    assert [request_score(r) for r in rs] == [None, 40.0, -1.5, None, None]
    for r in rs:
        q.add_request(r)
    assert ids(q) == ["c", "b", "d", "a", "e"]


def test_starvation_guard_serves_oldest_first():
    now = [0.0]
    q = PolicyRequestQueue(SPF(), starvation_threshold_s=10.0, clock=lambda: now[0])
    q.add_request(req("long-old", 500, 1.0))
    q.add_request(req("short", 5, 8.0))
    now[0] = 9.0
    assert ids(q) == ["short", "long-old"]
    now[0] = 11.0  # long-old has waited 10 s
    assert ids(q) == ["long-old", "short"]
    assert q.pop_request().request_id == "long-old" and q.boosts == 1


def test_rekeys_a_request_whose_length_changed():
    q = PolicyRequestQueue(SPF())
    a, b = req("a", 10, 1.0), req("b", 20, 2.0)
    q.add_request(a)
    q.add_request(b)
    a.append_output_token_ids([7] * 15)  # r_a grows to 25 while queued
    assert q.peek_request() is b
