"""predicted-sjf, oracle-sjf, unified and the aging guard's re-keying: keys worked by hand (issue 6, 7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sarathi_ext.core import (
    AgedOrder, Aging, ConfigError, OracleSJF, PolicyConfig, PredictedSJF, PrefillHeap, RequestView, Unified,
    build_order, build_planner,
)
from sarathi_ext.sim.workload import Workload, WorkloadError, apply_scores, noisy_oracle_scores, oracle_scores


from _views import drain, view  # noqa: E402  (tests/ is on sys.path under pytest)


def test_psjf_lowest_score_first_unscored_last_fcfs():
    # keys: 0 -> 30, 1 -> 10, 2 -> inf (no score), 3 -> 10, 4 -> inf
    # order: 1 (10, a=1) before 3 (10, a=3); then 0 (30); then the unscored by arrival: 2, 4
    h = PrefillHeap(PredictedSJF())
    for r in (view(0, 0, 5, 30), view(1, 1, 5, 10), view(2, 2, 5), view(3, 3, 5, 10), view(4, 4, 5)):
        h.push(r)
    assert drain(h) == [1, 3, 0, 2, 4]


def test_predicted_sjf_is_an_alias_of_psjf():
    assert isinstance(build_order(PolicyConfig(policy="predicted-sjf")), PredictedSJF)
    assert isinstance(build_order(PolicyConfig(policy="psjf")), PredictedSJF)


def test_oracle_sjf_keys_on_remaining_true_output():
    o = OracleSJF()
    a = view(0, 0, 5, true_len=50)  # key 50
    b = view(1, 1, 5, true_len=20, generated=18)  # preempted after 18 tokens: key 20 - 18 = 2
    c = view(2, 2, 5)  # engines do not know the true length: key inf
    assert [o.key(r) for r in (a, b, c)] == [50.0, 2.0, math.inf]
    h = PrefillHeap(o)
    for r in (a, b, c):
        h.push(r)
    assert drain(h) == [1, 0, 2]


# Unified, alpha = 10, beta = -1, gamma = 0.5; min-key = alpha*a + |beta|*(r + gamma*D), D = score
#   A: a=0, r=100, no score -> 0  + 100 + 0       = 100
#   B: a=1, r=20,  D=200    -> 10 + 20  + 100     = 130
#   C: a=2, r=60,  D=20     -> 20 + 60  + 10      = 90
# order: C, A, B
def test_unified_keys_by_hand():
    u = Unified(10.0, -1.0, 0.5)
    a, b, c = view(0, 0.0, 100), view(1, 1.0, 20, score=200), view(2, 2.0, 60, score=20)
    assert [u.key(r) for r in (a, b, c)] == [100.0, 130.0, 90.0]
    assert [u.heap_key(r) for r in (a, b, c)] == [-100.0, -130.0, -90.0]
    # P at t = 5 (Eq. 1 form): 10*(5-a) - cost -> A: 50-100 = -50, B: 40-120 = -80, C: 30-70 = -40
    assert [u.priority(r, 5.0) for r in (a, b, c)] == [-50.0, -80.0, -40.0]
    h = PrefillHeap(u)
    for r in (a, b, c):
        h.push(r)
    assert drain(h) == [2, 0, 1]


def test_unified_without_scores_is_aging():
    u, ag = Unified(37.5, -2.0, 3.0), Aging(37.5, -2.0)
    rs = [view(i, 0.3 * i, 7 + 13 * i, done=i) for i in range(6)]
    assert [u.key(r) for r in rs] == [ag.key(r) for r in rs]


def test_unified_gamma_zero_ignores_scores():
    u = Unified(10.0, -1.0, 0.0)
    assert u.key(view(0, 1.0, 20, score=1e6)) == 10.0 + 20.0


def test_aged_order_over_psjf_by_hand():
    # alpha = 2, beta = -1: key = 2*a + score
    #   A: a=0,  score=30 -> 30 ; B: a=10, score=5 -> 25 ; C: a=20, score=1 -> 41 ; D: no score -> inf
    o = AgedOrder(PredictedSJF(), 2.0, -1.0)
    rs = [view(0, 0.0, 5, 30), view(1, 10.0, 5, 5), view(2, 20.0, 5, 1), view(3, 0.0, 5)]
    assert [o.key(r) for r in rs] == [30.0, 25.0, 41.0, math.inf]
    h = PrefillHeap(o)
    for r in rs:
        h.push(r)
    assert drain(h) == [1, 0, 2, 3]


def test_build_order_aging_guard_and_unified():
    o = build_order(PolicyConfig(policy="psjf", starvation="aging", aging_alpha=4.0, aging_beta=-2.0))
    assert isinstance(o, AgedOrder) and (o.alpha, o.beta) == (4.0, -2.0)
    u = build_order(PolicyConfig(policy="unified", unified_gamma=0.25))
    assert isinstance(u, Unified) and u.gamma == 0.25
    assert isinstance(build_order(PolicyConfig(policy="oracle-sjf")), OracleSJF)
    p = build_planner(PolicyConfig(policy="psjf", starvation="pars", starvation_threshold_s=7.0))
    assert p.guard is not None and p.guard.threshold_s == 7.0 and p.guard.name == "pars"
    assert build_planner(PolicyConfig(policy="psjf", starvation="aging")).guard is None


@pytest.mark.parametrize("values, field", [
    (dict(starvation="sometimes"), "starvation"),
    (dict(starvation_threshold_s=-1.0), "starvation_threshold_s"),
    (dict(starvation_threshold_s=math.inf), "starvation_threshold_s"),
    (dict(unified_gamma=-0.5), "unified_gamma"),
    (dict(policy="aging", starvation="aging"), "starvation"),
    (dict(policy="unified", starvation="aging"), "starvation"),
])
def test_config_validation_names_the_field(values, field):
    with pytest.raises(ConfigError, match=f"^{field}:"):
        PolicyConfig(**values)


def test_config_defaults_and_labels():
    c = PolicyConfig()
    assert (c.starvation, c.starvation_threshold_s, c.unified_gamma) == ("none", 120.0, 1.0)
    assert PolicyConfig(policy="psjf", starvation="pars").label() == "psjf~pars(120s)"
    assert PolicyConfig(policy="psjf").label() == "psjf"


# -- simulator scores ---------------------------------------------------------------------------


def small_workload():
    return Workload("w", np.array([0.0, 0.0, 0.0]), np.array([4, 4, 4]), np.array([30, 3, 10]))


def test_oracle_and_noisy_scores():
    w = small_workload()
    assert oracle_scores(w).tolist() == [30.0, 3.0, 10.0]
    assert noisy_oracle_scores(w, 0.0).tolist() == [30.0, 3.0, 10.0]
    n1, n2 = noisy_oracle_scores(w, 0.5, seed=3), noisy_oracle_scores(w, 0.5, seed=3)
    assert n1.tolist() == n2.tolist() and n1.tolist() != [30.0, 3.0, 10.0]
    assert apply_scores(w, "none").scores is None
    assert apply_scores(w, "oracle").scores.tolist() == [30.0, 3.0, 10.0]
    for bad in ("noisy-oracle:x", "magic", "oracle:1", "noisy-oracle:-1"):
        with pytest.raises(WorkloadError, match="scores"):
            apply_scores(w, bad)
    with pytest.raises(WorkloadError, match="scores"):
        w.with_scores(np.array([1.0, 2.0]))


def test_engine_puts_score_and_true_length_in_the_view():
    from sarathi_ext.sim.engine import SimEngine

    seen = {}

    class Spy(PredictedSJF):
        def key(self, r):
            seen[r.req_id] = (r.score, r.true_output_len)
            return super().key(r)

    from sarathi_ext.core import RoundPlanner, StaticChunk

    w = apply_scores(small_workload(), "oracle")
    planner = RoundPlanner(Spy(), StaticChunk())
    res = SimEngine(planner, lambda f: np.full(len(f), 10.0), 4, 1, 100, 16).run(w)
    assert seen == {0: (30.0, 30), 1: (3.0, 3), 2: (10.0, 10)}
    # one slot, budget 4 = one prompt: psjf admits 1 (3 tokens), then 2 (10), then 0 (30)
    assert np.argsort(res.first_scheduled).tolist() == [1, 2, 0]


def test_oracle_sjf_in_the_simulator():
    from sarathi_ext.sim.engine import SimEngine

    planner = build_planner(PolicyConfig(policy="oracle-sjf"))
    res = SimEngine(planner, lambda f: np.full(len(f), 10.0), 4, 1, 100, 16).run(small_workload())
    assert np.argsort(res.first_scheduled).tolist() == [1, 2, 0]


def test_cli_policy_specs_and_scores(capsys):
    from sarathi_ext.cli import main, parse_policy_spec

    cfg = parse_policy_spec("psjf:starvation=clairvoyant,starvation_threshold_s=6", {})
    assert (cfg.policy, cfg.starvation, cfg.starvation_threshold_s) == ("psjf", "clairvoyant", 6.0)
    cfg = parse_policy_spec("unified+apc:unified_gamma=0.5", {})
    assert (cfg.policy, cfg.apc, cfg.unified_gamma) == ("unified", True, 0.5)
    assert parse_policy_spec("oracle-sjf", {}).policy == "oracle-sjf"
    assert main(["compare", "--policies", "psjf", "psjf:starvation=pars,starvation_threshold_s=1",
                 "oracle-sjf", "unified", "--scores", "noisy-oracle:0.5", "-n", "40", "--no-plots",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "psjf~pars(1s)" in out and "starvation boosts" in out
    assert main(["simulate", "--policy", "psjf", "--scores", "bogus", "-n", "5", "--no-progress"]) == 2
    assert "scores" in capsys.readouterr().err
