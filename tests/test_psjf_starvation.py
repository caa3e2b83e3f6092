"""Starvation guards in the round planner: hand-built rounds, a wait bound, and round cost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sarathi_ext.core import Limits, PolicyConfig, PrefillChunk, RequestView, build_planner

GOOD, BAD = 1.0, 100.0


def lim(budget, seqs=10_000, free=10**7, bs=16):
    return Limits(token_budget=budget, max_num_seqs=seqs, free_blocks=free, block_size=bs)


def planner(guard, threshold):
    return build_planner(PolicyConfig(policy="psjf", starvation=guard, starvation_threshold_s=threshold))


def step(p, now, budget):
    """One round; requests whose prefill completed finish at once (output length 1)."""
    plan = p.schedule(now, lim(budget))
    for c in plan.prefills:
        if c.completes:
            p.finish(c.req_id)
    return plan


def run_stream(guard, threshold, bad_ids=("X",), goods_per_round=1, rounds=12, budget=10):
    """Bad-score requests arrive at t = 0, 0.5, ...; then every round t = 0, 1, 2, ... brings
    ``goods_per_round`` good-score requests. Every prompt is 10 tokens, so a round of budget 10*k
    admits and finishes k requests. Returns {request: round it was admitted}."""
    p = planner(guard, threshold)
    for i, rid in enumerate(bad_ids):
        p.add(RequestView(rid, 0.5 * i, 10, score=BAD))
    admitted = {}
    for t in range(rounds):
        for g in range(goods_per_round):
            p.add(RequestView(f"G{t}.{g}", float(t), 10, score=GOOD))
        plan = step(p, float(t), budget)
        for rid in plan.admitted:
            admitted[rid] = t
    return admitted


def test_none_starves_the_bad_request():
    assert "X" not in run_stream("none", 5.0)


def test_pars_boosts_once_the_wait_exceeds_the_threshold():
    # T = 5: at t = 5 X has waited 5, which does not exceed 5; at t = 6 it has waited 6 > 5.
    admitted = run_stream("pars", 5.0)
    assert admitted["X"] == 6
    assert admitted["G6.0"] == 7  # X took round 6's whole budget; the good one runs next round


def test_clairvoyant_promotes_once_the_wait_reaches_tau():
    # tau = 5: at t = 5 X has waited 5 >= tau.
    assert run_stream("clairvoyant", 5.0)["X"] == 5


def test_clairvoyant_promotes_one_per_round_pars_all_overdue():
    # X (a=0) and Y (a=0.5), T = 5, two goods per round, budget = 2 prompts.
    # pars: t=5: X waited 5 (not > 5), Y 4.5 -> goods; t=6: X 6 > 5 and Y 5.5 > 5 -> both boosted.
    pars = run_stream("pars", 5.0, ("X", "Y"), goods_per_round=2, budget=20)
    assert (pars["X"], pars["Y"]) == (6, 6)
    # clairvoyant: t=5: X (5 >= 5) promoted, Y (4.5) not -> X + a good; t=6: Y (5.5) -> Y + a good.
    cv = run_stream("clairvoyant", 5.0, ("X", "Y"), goods_per_round=2, budget=20)
    assert (cv["X"], cv["Y"]) == (5, 6)


def test_clairvoyant_one_per_round_even_when_several_are_overdue():
    # Both overdue at the first round after tau: pars boosts both, clairvoyant only the oldest.
    for guard, expect in (("pars", ["X", "Y"]), ("clairvoyant", ["X", "G"])):
        p = planner(guard, 1.0)
        p.add(RequestView("X", 0.0, 10, score=BAD))
        p.add(RequestView("Y", 0.1, 10, score=BAD))
        p.add(RequestView("G", 2.0, 10, score=GOOD))
        assert p.schedule(2.0, lim(20)).admitted == expect, guard


def test_boosted_request_keeps_precedence_for_its_remaining_chunks():
    # X has a 30-token prompt, budget 10: once boosted at t = 6 it must get all of rounds 6, 7, 8
    # although a better-scored request is waiting (and would win under psjf).
    p = planner("pars", 5.0)
    p.add(RequestView("X", 0.0, 30, score=BAD))
    chunks = {}
    for t in range(10):
        p.add(RequestView(f"G{t}", float(t), 10, score=GOOD))
        plan = step(p, float(t), 10)
        chunks[t] = [(c.req_id, c.tokens) for c in plan.prefills]
    assert chunks[5] == [("G5", 10)]
    assert chunks[6] == [("X", 10)] and chunks[7] == [("X", 10)] and chunks[8] == [("X", 10)]
    assert chunks[9] == [("G6", 10)]  # FCFS among equal scores: the backlog drains in order
    assert p.stats.boosts == 1


def test_guard_boosts_ahead_of_admitted_prefills():
    # A is admitted and mid-prefill (good score); X becomes overdue: X's chunk comes first.
    p = planner("pars", 1.0)
    p.add(RequestView("X", 0.0, 4, score=BAD))
    p.add(RequestView("A", 0.0, 40, score=GOOD))
    plan = p.schedule(0.0, lim(10, seqs=1))  # one slot: A wins on score, X waits
    assert plan.prefills == [PrefillChunk("A", 0, 10, False)]
    plan = p.schedule(2.0, lim(10, seqs=2))  # X waited 2 > 1: boosted, then A continues
    assert plan.prefills == [PrefillChunk("X", 0, 4, True), PrefillChunk("A", 10, 6, False)]
    assert plan.boosted == ["X"]


# -- the wait bound -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    guard=st.sampled_from(["pars", "clairvoyant"]),
    threshold_rounds=st.integers(0, 20),
    dt=st.sampled_from([0.01, 0.05, 0.1]),
    budget=st.integers(16, 128),
    bad_prompt=st.integers(1, 128),
    bad_at=st.integers(0, 10),
    shorts=st.lists(st.integers(1, 64), min_size=1, max_size=6),
)
def test_guard_bounds_the_scheduling_delay(guard, threshold_rounds, dt, budget, bad_prompt, bad_at, shorts):
    """Under a sustained stream of better-scored requests (``shorts`` prompt lengths each round,
    possibly more tokens than the budget, so a backlog builds), a bad-score request arriving at
    round ``bad_at`` is admitted within T + (n_older + 1)*dt, where n_older is the number of
    requests that arrived before it.

    Derivation (constant iteration time dt, no decodes, slots and KV unlimited, so admission never
    closes): the guard serves overdue waiters oldest first and a boosted request is always admitted
    (its chunk is >= 1 token: the boosted candidates come before everything else in a round, so
    budget remains). The bad request becomes overdue at the first round at or after a + T (pars:
    after), i.e. within T + dt. From then on every round admits at least the oldest overdue waiter
    (clairvoyant: exactly one promotion per round; pars: all of them while budget remains), and
    only requests older than the bad one can be ahead of it, at most n_older of them. A boosted
    request that needs several chunks holds the front, but each of those rounds also admits the next
    overdue waiter only if budget remains; hence the bound counts one round per older request,
    plus the prefill rounds of the older boosted ones, which we bound by their token total / budget.
    """
    threshold = threshold_rounds * dt
    p = planner(guard, threshold)
    rounds_max = bad_at + threshold_rounds + 400
    admitted_at = None
    older_tokens = 0
    n_older = 0
    for t in range(rounds_max):
        now = t * dt
        if t == bad_at:
            p.add(RequestView("BAD", now, bad_prompt, score=BAD))
        for i, n in enumerate(shorts):
            p.add(RequestView((t, i), now, n, score=GOOD))
            if t < bad_at:
                n_older += 1
                older_tokens += n
        plan = step(p, now, budget)
        if "BAD" in plan.admitted:
            admitted_at = now
            break
    assert admitted_at is not None
    delay = admitted_at - bad_at * dt
    older_prefill_rounds = -(-older_tokens // budget)
    bound = threshold + (n_older + older_prefill_rounds + 1) * dt
    assert delay <= bound + 1e-9, (delay, bound)


@settings(max_examples=20, deadline=None)
@given(budget=st.integers(16, 64), stream_rounds=st.integers(1, 60))
def test_without_a_guard_the_bad_request_waits_for_the_stream_to_end(budget, stream_rounds):
    # One better-scored request per round whose prompt takes the whole budget: under psjf alone the
    # bad request is admitted only in the first round after the stream ends, however long it runs.
    p = planner("none", 0.0)
    p.add(RequestView("BAD", 0.0, 8, score=BAD))
    admitted = None
    for t in range(stream_rounds + 5):
        if t < stream_rounds:
            p.add(RequestView(t, float(t), budget, score=GOOD))
        plan = step(p, float(t), budget)
        if "BAD" in plan.admitted:
            admitted = t
            break
    assert admitted == stream_rounds


# -- round cost -----------------------------------------------------------------------------------


def test_round_with_ten_thousand_waiters_looks_at_few():
    for guard in ("none", "pars", "clairvoyant"):
        p = planner(guard, 1.0)
        n = 10_000
        for i in range(n):
            # half of them overdue at t = 100 (arrivals 0..99.99), all with various scores
            p.add(RequestView(i, i * 0.01, 32, score=float((i * 7919) % 1000)))
        plan = p.schedule(100.0, lim(256, seqs=128))
        looked = len(plan.prefills) + len(plan.held)
        assert len(plan.prefills) == 8 and looked <= 8  # 256 / 32 prompts
        assert plan.not_considered == n - 8
        if guard == "pars":
            assert plan.admitted == list(range(8))  # all overdue: oldest first
        if guard == "clairvoyant":
            assert plan.admitted[0] == 0 and len(plan.boosted) == 1
        # the guard's arrival heap stayed consistent with the waiting heap
        if p.guard is not None:
            assert len(p.guard) == len(p.waiting) == n - 8
