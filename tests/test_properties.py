"""Properties of whole simulated runs: every policy x chunk rule x APC setting."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarathi_ext.core import ConfigError, PolicyConfig, blocks_for, build_planner
from sarathi_ext.sim.engine import SimEngine
from sarathi_ext.sim.workload import Workload


def exec_ms(x):
    return 5.0 + 0.05 * x[:, 12]  # column 12: scheduled tokens


def traced_engine(cfg, budget, seqs, num_blocks, bs, model=exec_ms):
    """A SimEngine whose planner records, for each round, the state before it and its plan."""
    planner = build_planner(cfg, model if cfg.chunk == "lprs" else None)
    rounds = []
    schedule = planner.schedule

    def spy(now, limits):
        before = set(planner.decoding)
        held_blocks = sum(r.num_blocks for r in planner.requests.values())
        plan = schedule(now, limits)
        rounds.append((limits, before, held_blocks, plan))
        return plan

    planner.schedule = spy
    return SimEngine(planner, model, budget, seqs, num_blocks, bs), rounds


def workload(reqs, gaps_ms):
    arrivals = np.cumsum(gaps_ms) / 1000.0
    arrivals -= arrivals[0]
    prompts = np.array([p for p, _ in reqs], dtype=np.int64)
    outputs = np.array([o for _, o in reqs], dtype=np.int64)
    return Workload("prop", arrivals, prompts, outputs)


COMBOS = list(itertools.product(("fcfs", "aging", "spf"), ("static", "lprs"), (False, True)))


@pytest.mark.parametrize("policy,chunk,apc", COMBOS)
@settings(max_examples=30, deadline=None)
@given(
    reqs=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 30)), min_size=1, max_size=10),
    gaps=st.lists(st.integers(0, 40), min_size=10, max_size=10),
    budget=st.integers(16, 96),  # >= apc_l_min = 16
    seqs=st.integers(1, 6),
    bs=st.sampled_from([4, 16]),
    extra_blocks=st.integers(0, 12),
    admission=st.sampled_from(["stop", "skip"]),
)
def test_round_invariants(policy, chunk, apc, reqs, gaps, budget, seqs, bs, extra_blocks, admission):
    cfg = PolicyConfig(policy=policy, chunk=chunk, apc=apc, lprs_target_ms=7.0, lprs_delta=8,
                       apc_l_min=16, admission=admission)
    wl = workload(reqs, gaps[: len(reqs)])
    num_blocks = max(blocks_for(p + o, bs) for p, o in reqs) + extra_blocks
    engine, rounds = traced_engine(cfg, budget, seqs, num_blocks, bs)
    res = engine.run(wl)

    tokens = Counter()
    for limits, decoding_before, held_blocks, plan in rounds:
        assert limits.free_blocks >= 0
        assert limits.free_blocks + held_blocks == num_blocks  # KV conserved
        assert plan.num_tokens <= budget
        assert plan.features[12] == plan.num_tokens
        ids = plan.decodes + [c.req_id for c in plan.prefills]
        assert len(ids) == len(set(ids))
        assert all(c.tokens >= 1 for c in plan.prefills)
        assert not set(plan.preempted) & set(plan.decodes)
        if plan.prefills:
            # decodes first: no running decode is passed over for a prefill unless preempted
            assert decoding_before <= set(plan.decodes) | set(plan.preempted)
        tokens.update(plan.decodes)
        tokens.update(c.req_id for c in plan.prefills if c.completes)

    assert np.isfinite(res.finish).all() and np.isfinite(res.first_token).all()
    assert (res.first_token <= res.finish).all() and (res.arrival <= res.first_scheduled).all()
    assert [tokens[i] for i in range(len(reqs))] == [o for _, o in reqs]


@pytest.mark.parametrize("policy", ["fcfs", "aging", "spf"])
def test_apc_budget_below_l_min_finishes(policy):
    # B_max = 8 < L_min = 16: C_t = floor(8/16) = 0 in every round (Eq. 12). A 20-token prompt is
    # warm-started with min(h, m) = 8, then 8 more (r = 12 > c* = 8), leaving r = 4: now
    # c* = 4 >= m = min(4, 16) = 4 and |P_t| = 0 = C_t, so Eq. 14 gives 0 in every later round and
    # the request can never finish. Either the configuration is refused up front, or it must run.
    cfg = PolicyConfig(policy=policy, apc=True, apc_l_min=16)
    wl = Workload("tail", np.array([0.0]), np.array([20]), np.array([2]))
    try:
        engine, _ = traced_engine(cfg, 8, 4, 100, 16)
    except (ValueError, ConfigError) as e:
        assert "l_min" in str(e)
        return
    res = engine.run(wl)
    assert np.isfinite(res.finish).all()


# -- scenario (a): aging bounds a long request's wait under a stream of short ones ----------------

ITER_MS = 10.0  # constant iteration time: every round is exactly one step
N_SHORT, GAP = 4000, 0.00025  # a 10-token request every 0.25 ms for 1 s: 40 tokens/ms offered
BUDGET = 256  # 25.6 tokens/ms served, so shorts alone keep every round full


def stream_run(cfg):
    arrivals = np.concatenate(([0.0], np.arange(N_SHORT) * GAP))
    prompts = np.concatenate(([2000], np.full(N_SHORT, 10)))
    wl = Workload("stream", arrivals, prompts.astype(np.int64), np.ones(N_SHORT + 1, dtype=np.int64))
    engine, _ = traced_engine(cfg, BUDGET, 64, 100_000, 16, model=lambda x: np.full(len(x), ITER_MS))
    return engine.run(wl)


def test_aging_bounds_long_wait_spf_starves_it():
    # alpha = 20100, beta = -1. The long request L (a = 0, r = 2000) outranks a short one (r = 10)
    # arriving at a_s once -alpha*0 + beta*r_L > -alpha*a_s + beta*10, i.e. a_s > (r_L - 10)/alpha,
    # at most 1990/20100 = 0.09900... s (r_L only shrinks, Eq. 2, so L only climbs). Shorts come at
    # k*0.25 ms: only k <= 396 (a_s <= 0.099 s; 20100*0.099 = 1989.9 < 1990) can rank ahead of L:
    # 397 shorts, 3970 tokens. A short behind L is served only after L in a round, i.e. once L's
    # prefill is done, so until then every round is full (L alone has 2000 tokens) with tokens of L
    # or of those 397: at most ceil((3970 + 2000)/256) = ceil(23.3) = 24 rounds of 10 ms.
    aging = stream_run(PolicyConfig(policy="aging", aging_alpha=20100.0, aging_beta=-1.0))
    assert aging.first_token[0] <= 24 * ITER_MS / 1e3 + 1e-9
    # SPF: every short (r <= 10) outranks L (r >= 1754 after round 1). From round 2 on, 40 shorts
    # (400 tokens > 256) arrive per round, so rounds stay full of shorts until the stream ends
    # (last arrival 3999 * 0.25 ms) and its backlog drains: L's prefill ends after every short's.
    spf = stream_run(PolicyConfig(policy="spf"))
    assert spf.first_token[0] > (N_SHORT - 1) * GAP
    assert spf.first_token[0] >= spf.first_token[1:].max()


# -- scenario (b): with alpha huge, aging is FCFS --------------------------------------------------


def admission_order(rounds):
    return [rid for *_, plan in rounds for rid in plan.admitted]


@pytest.mark.parametrize("chunk", ["static", "lprs"])
@settings(max_examples=40, deadline=None)
@given(
    reqs=st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 20)), min_size=2, max_size=12),
    gaps=st.lists(st.integers(1, 30), min_size=12, max_size=12),  # distinct arrivals, >= 1 ms apart
    budget=st.integers(16, 128),
    seqs=st.integers(1, 5),
)
def test_huge_alpha_is_fcfs(chunk, reqs, gaps, budget, seqs):
    # K_i = -1e9*a_i - r_i: arrivals >= 1 ms apart differ by >= 1e6 in K, more than any r (<= 1000)
    wl = workload(reqs, gaps[: len(reqs)])
    num_blocks = sum(blocks_for(p + o, 16) for p, o in reqs)  # room for all: no preemption
    runs = []
    for cfg in (PolicyConfig(policy="fcfs", chunk=chunk, lprs_target_ms=8.0),
                PolicyConfig(policy="aging", aging_alpha=1e9, chunk=chunk, lprs_target_ms=8.0)):
        engine, rounds = traced_engine(cfg, budget, seqs, num_blocks, 16)
        runs.append((engine.run(wl), admission_order(rounds)))
    (fcfs, fcfs_order), (aging, aging_order) = runs
    assert aging_order == fcfs_order
    assert fcfs_order == sorted(fcfs_order)  # FCFS admits in arrival order (ids are arrival order)
    assert np.array_equal(aging.finish, fcfs.finish)
