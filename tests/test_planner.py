"""Hand-worked rounds of RoundPlanner.schedule."""

from __future__ import annotations

import pytest

from sarathi_ext.core import Hold, Limits, PolicyConfig, PrefillChunk, RequestView, build_planner


def planner(**kw):
    return build_planner(PolicyConfig(**kw))


def lim(budget=256, seqs=10, free=1000, bs=16):
    return Limits(token_budget=budget, max_num_seqs=seqs, free_blocks=free, block_size=bs)


def add(p, rid, arrival, prompt):
    r = RequestView(rid, arrival, prompt)
    p.add(r)
    return r


def test_decodes_first_take_budget():
    p = planner(policy="fcfs")
    a, b, c = (add(p, k, 0.0, 2) for k in "ABC")
    d = add(p, "D", 0.0, 20)
    # round 1, budget 8: A, B, C finish their 2-token prompts (6 tokens), D gets 8 - 6 = 2
    plan = p.schedule(0.0, lim(budget=8))
    assert plan.decodes == []
    assert plan.prefills == [
        PrefillChunk("A", 0, 2, True), PrefillChunk("B", 0, 2, True),
        PrefillChunk("C", 0, 2, True), PrefillChunk("D", 0, 2, False),
    ]
    assert plan.admitted == ["A", "B", "C", "D"] and plan.blocks_allocated == 5  # 1+1+1 + ceil(20/16)=2
    assert (a.context_len, a.num_generated, a.is_decoding) == (2, 1, True)
    # round 2: 3 decodes take 3 of 8 tokens, so D's prefill gets 5
    plan = p.schedule(0.01, lim(budget=8))
    assert plan.decodes == ["A", "B", "C"]
    assert plan.prefills == [PrefillChunk("D", 2, 5, False)]
    assert plan.num_tokens == 8 and plan.blocks_allocated == 0  # contexts 2 % 16 != 0
    # features: prefill 5, decodes 3, requests 4, ctx sum 6 / max 2, processed 2 / max 2, memory 0,
    # bias 1, scheduled 8, avg ctx 6/3 = 2, 3*2 = 6, 5*2 = 10
    assert plan.features.tolist() == [5, 3, 4, 6, 2, 2, 2, 0, 0, 0, 0, 1, 8, 2, 6, 10]
    assert (a.context_len, a.num_generated, d.prefill_done) == (3, 2, 7)


def test_decodes_beyond_budget_are_held():
    p = planner(policy="fcfs")
    for k in "ABC":
        add(p, k, 0.0, 2)
    p.schedule(0.0, lim(budget=8))
    plan = p.schedule(0.01, lim(budget=2))  # 3 decodes, budget 2: oldest two run
    assert plan.decodes == ["A", "B"]
    assert plan.held == [("C", Hold.BUDGET)]
    assert plan.prefills == []


# Long early L (a=0, 1000 tokens) and short late S (a=1, 10 tokens), scheduled at t = 1, beta = -1.
# K_L = -alpha*0 - 1000 = -1000;  K_S = -alpha*1 - 10.  S first iff -alpha - 10 > -1000, alpha < 990.


def long_and_short(**kw):
    p = planner(**kw)
    add(p, "L", 0.0, 1000)
    add(p, "S", 1.0, 10)
    return p


def test_aging_puts_short_late_request_first():
    # alpha = 37.5: K_S = -47.5 > K_L = -1000 -> S takes 10, L the remaining 246
    p = long_and_short(policy="aging", aging_alpha=37.5)
    plan = p.schedule(1.0, lim())
    assert plan.prefills == [PrefillChunk("S", 0, 10, True), PrefillChunk("L", 0, 246, False)]


def test_fcfs_keeps_long_request_first():
    p = long_and_short(policy="fcfs")
    plan = p.schedule(1.0, lim())
    assert plan.prefills == [PrefillChunk("L", 0, 256, False)]
    assert plan.not_considered == 1  # S was never reached


@pytest.mark.parametrize(
    "alpha,first",
    [(989.0, "S"),  # K_S = -999 > -1000
     (990.0, "L"),  # K_S = -1000 = K_L: tie -> earlier arrival
     (1000.0, "L")],  # K_S = -1010 < -1000
)
def test_aging_crossover(alpha, first):
    p = long_and_short(policy="aging", aging_alpha=alpha)
    plan = p.schedule(1.0, lim())
    assert plan.prefills[0].req_id == first


def no_kv_head(admission):
    p = planner(policy="fcfs", admission=admission)
    add(p, "H", 0.0, 100)  # ceil(100/16) = 7 blocks
    add(p, "T", 0.5, 20)  # ceil(20/16) = 2 blocks
    return p, p.schedule(1.0, lim(free=5))


def test_admission_stop_closes_at_head():
    p, plan = no_kv_head("stop")
    assert plan.held == [("H", Hold.NO_KV)]
    assert plan.prefills == [] and plan.admitted == [] and plan.blocks_allocated == 0


def test_admission_skip_admits_smaller():
    p, plan = no_kv_head("skip")
    assert plan.held == [("H", Hold.NO_KV)]
    assert plan.prefills == [PrefillChunk("T", 0, 20, True)]
    assert plan.admitted == ["T"] and plan.blocks_allocated == 2
    assert p.requests["T"].num_blocks == 2 and not p.requests["H"].admitted


def test_no_slot_when_s_max_admitted():
    p = planner(policy="fcfs")
    for k in "ABC":
        add(p, k, 0.0, 10)
    plan = p.schedule(0.0, lim(seqs=2))
    assert [c.req_id for c in plan.prefills] == ["A", "B"]
    plan = p.schedule(0.01, lim(seqs=2))  # A, B decode and hold both slots
    assert plan.decodes == ["A", "B"]
    assert plan.held == [("C", Hold.NO_SLOT)] and plan.prefills == []
    assert p.finish("A") == 1  # one block of 16 returned
    plan = p.schedule(0.02, lim(seqs=2))
    assert plan.decodes == ["B"] and plan.prefills == [PrefillChunk("C", 0, 10, True)]


def test_future_arrival_never_admitted():
    p = planner(policy="spf")
    f = add(p, "F", 5.0, 5)  # shortest, so SPF looks at it first
    add(p, "G", 0.0, 50)
    plan = p.schedule(1.0, lim())
    assert plan.held == [("F", Hold.NOT_ARRIVED)]
    assert plan.prefills == [PrefillChunk("G", 0, 50, True)] and plan.admitted == ["G"]
    assert not f.admitted and f.prefill_done == 0
    plan = p.schedule(5.0, lim())
    assert plan.prefills == [PrefillChunk("F", 0, 5, True)] and "F" in plan.admitted


def test_preempt_newest_for_recompute():
    p = planner(policy="fcfs")
    a = add(p, "A", 0.0, 4)
    b = add(p, "B", 1.0, 4)
    p.schedule(1.0, lim(bs=4))  # both prefill 4 tokens = 1 block of 4; both decode next
    # free 0, and both contexts are 4 % 4 == 0: each decode needs a new block. A (oldest) runs;
    # B (newest) is evicted, its 1 block goes to A.
    plan = p.schedule(1.1, lim(bs=4, free=0))
    assert plan.decodes == ["A"] and plan.preempted == ["B"]
    assert plan.blocks_freed == 1 and plan.blocks_allocated == 1
    assert (a.context_len, a.num_blocks, a.num_generated) == (5, 2, 2)
    # recompute: prompt 4 + 1 generated = 5 tokens to prefill, all progress reset
    assert (b.prefill_target, b.prefill_done, b.remaining) == (5, 0, 5)
    assert (b.admitted, b.is_decoding, b.num_blocks, b.context_len) == (False, False, 0, 0)
    assert b.num_preemptions == 1 and b.num_generated == 1
    assert plan.held == [("B", Hold.NO_KV)]  # ceil(5/4) = 2 blocks > 0 free
    assert p.stats.preemptions == 1
    plan = p.schedule(1.2, lim(bs=4, free=10))
    assert plan.decodes == ["A"] and plan.prefills == [PrefillChunk("B", 0, 5, True)]
    assert plan.blocks_allocated == 2 and b.num_generated == 2 and b.context_len == 5


def test_lone_decode_preempts_itself():
    p = planner(policy="fcfs")
    a = add(p, "A", 0.0, 4)
    p.schedule(0.0, lim(bs=4))
    plan = p.schedule(0.1, lim(bs=4, free=0))
    assert plan.decodes == [] and plan.preempted == ["A"]
    assert a.prefill_target == 5 and not a.admitted


def test_apc_activity_cap_in_held():
    # C_max = 1. A: C_t = min(1, 10, 256//16) = 1, |P_t| = 0 -> accept h = 100.
    # B: |P_t| = 1 >= C_t = min(1, 10, 156//16) = 1 -> ACTIVITY_CAP, and the round stops (C unseen).
    p = planner(policy="fcfs", apc=True, apc_c_max=1, apc_l_min=16)
    for k in "ABC":
        add(p, k, 0.0, 100)
    plan = p.schedule(0.0, lim())
    assert plan.prefills == [PrefillChunk("A", 0, 100, True)]
    assert plan.held == [("B", Hold.ACTIVITY_CAP)]
    assert p.apc.counters.blocked_by_activity_cap == 1
    assert p.stats.holds == {"activity_cap": 1}


def test_apc_min_chunk_in_held():
    # budget 110. A: accept 100. B, C: h = min(100, 10) = 10 < m = 16 with |P_t| = 1 -> MIN_CHUNK
    p = planner(policy="fcfs", apc=True, apc_c_max=4, apc_l_min=16)
    for k in "ABC":
        add(p, k, 0.0, 100)
    plan = p.schedule(0.0, lim(budget=110))
    assert plan.prefills == [PrefillChunk("A", 0, 100, True)]
    assert plan.held == [("B", Hold.MIN_CHUNK), ("C", Hold.MIN_CHUNK)]
    assert p.apc.counters.blocked_by_min_chunk == 2
    assert plan.admitted == ["A"]


def test_apc_warm_start():
    # Budget 20, L_min 16, C_max 2, S_max 10. Round 1: A has r = 1, c* = h = 1, m = min(1, 16) = 1,
    # C_t = min(2, 10 - 0, floor(20/16)) = 1 and |P_t| = 0 < 1: accepted. For B, U_t = 1 and
    # C_t = min(2, 10, floor(19/16)) = 1 = |P_t|: refused by the cap.
    p = planner(policy="fcfs", apc=True, apc_c_max=2, apc_l_min=16)
    for k in "ABCDE":
        add(p, k, 0.0, 1)
    plan = p.schedule(0.0, lim(budget=20))
    assert plan.prefills == [PrefillChunk("A", 0, 1, True)]
    assert plan.held == [("B", Hold.ACTIVITY_CAP)]  # the round stops at the first cap refusal
    # Later rounds admit one each the same way: with d decodes, C_t = min(2, 10 - d,
    # floor((20 - d)/16)) = 1 for d <= 4.
    for k in "BCDE":
        plan = p.schedule(0.0, lim(budget=20))
        assert [c.req_id for c in plan.prefills] == [k]
    # Now 5 decodes take U_t = 5 of 20. F (100 tokens) arrives: h = min(100, 15) = 15 = c*,
    # m = min(100, 16) = 16, so c* < m; C_t = min(2, 10 - 5, floor(15/16) = 0) = 0 and |P_t| = 0:
    # the warm start of Eq. 14 grants min(h, m) = 15.
    add(p, "F", 0.0, 100)
    plan = p.schedule(0.0, lim(budget=20))
    assert plan.decodes == ["A", "B", "C", "D", "E"]
    assert plan.prefills == [PrefillChunk("F", 0, 15, False)]
    assert p.apc.counters.warm_starts == 1


def test_apc_rejects_budget_below_l_min():
    # B_max = 10 < L_min = 16: floor((B_max - U_t)/L_min) = 0 in every round, a configuration
    # under which Eq. 14 can starve requests for ever; it is refused up front, naming the field.
    p = planner(policy="fcfs", apc=True, apc_l_min=16)
    add(p, "A", 0.0, 100)
    with pytest.raises(ValueError, match="apc_l_min"):
        p.schedule(0.0, lim(budget=10))


def test_rejects_empty_budget():
    p = planner()
    with pytest.raises(ValueError):
        p.schedule(0.0, lim(budget=0))


@pytest.mark.parametrize("policy", ["aging", "spf"])
def test_refused_waiting_request_does_not_starve_admitted_prefill(policy):
    # S_max = 1, budget 16. Round 1: A (a=0, 18 tokens) is admitted and gets 16, r_A = 2.
    # B (a=0.001, 1 token) arrives. Aging (alpha 37.5): K_B = -0.0375 - 1 = -1.0375 > K_A = -2;
    # SPF: r_B = 1 < r_A = 2. So B is looked at first and refused (NO_SLOT: A holds the one slot).
    # A already holds its slot and KV: it must still get its last 2 tokens this round.
    p = planner(policy=policy)
    add(p, "A", 0.0, 18)
    plan = p.schedule(0.0, lim(budget=16, seqs=1))
    assert plan.prefills == [PrefillChunk("A", 0, 16, False)]
    add(p, "B", 0.001, 1)
    plan = p.schedule(0.01, lim(budget=16, seqs=1))
    assert plan.held == [("B", Hold.NO_SLOT)]
    assert plan.prefills == [PrefillChunk("A", 16, 2, True)]


def test_min_chunk_refusals_do_not_walk_the_whole_queue():
    # LPRS with predicted ms = scheduled tokens (column 12), T* = 21, lambda_u 1 < lambda_o 4,
    # Delta 16; APC C_max 2, L_min 16; budget 100, S_max 5; FCFS. All prompts are 100 tokens.
    # A: U_t = 0, candidates {1, 16, 32, ..., 96, 100} predict c ms; scores: c=16 -> 1*(21-16) = 5,
    #    c=1 -> 20, c=32 -> 4*(32-21) = 44: c* = 16 >= m = 16, |P_t| = 0 < C_t = min(2, 5,
    #    floor(100/16) = 6) = 2 -> granted 16.
    # Each later request: U_t = 16, predictions 16 + c; c=1 -> 17 ms, score 4 (best; c=16 -> 32 ms,
    #    score 44): c* = 1 < m = 16 with |P_t| = 1 -> refused (min chunk). After S_max = 5 such
    #    refusals the round stops walking the waiting queue instead of visiting all 49.
    cfg = PolicyConfig(policy="fcfs", chunk="lprs", lprs_target_ms=21.0, lprs_delta=16,
                       lprs_lambda_u=1.0, lprs_lambda_o=4.0, apc=True, apc_c_max=2, apc_l_min=16)
    p = build_planner(cfg, lambda x: x[:, 12])
    add(p, "A", 0.0, 100)
    for i in range(49):
        add(p, f"w{i}", 1.0 + i, 100)
    plan = p.schedule(100.0, lim(budget=100, seqs=5))
    assert plan.prefills == [PrefillChunk("A", 0, 16, False)]
    assert plan.held == [(f"w{i}", Hold.MIN_CHUNK) for i in range(5)]
    assert plan.not_considered == 44
    assert p.apc.counters.blocked_by_min_chunk == 5


def test_watermark_keeps_blocks_free_at_admission():
    # Block size 16, free 10, watermark 3: a 112-token prompt needs ceil(112/16) = 7 <= 10 - 3 and
    # is admitted; a 128-token one needs 8 > 7 and is held for KV (Sarathi's can_allocate).
    for prompt, admitted in ((112, True), (128, False)):
        p = planner(policy="fcfs")
        add(p, "A", 0.0, prompt)
        limits = Limits(token_budget=256, max_num_seqs=4, free_blocks=10, block_size=16, watermark_blocks=3)
        plan = p.schedule(0.0, limits)
        assert (plan.admitted == ["A"]) is admitted
        assert plan.held == ([] if admitted else [("A", Hold.NO_KV)])


def test_sarathi_append_rule_preempts_when_no_block_is_free():
    # A (a=0) and B (a=1), 8-token prompts, block size 16: each holds 1 block; after prefill both
    # decode at context 8, and 8 % 16 != 0, so neither needs a new block. With free_blocks = 0 the
    # exact rule runs both; Sarathi's rule (one free block before every decode) preempts the newest,
    # B, which frees its block, and then A runs.
    for sarathi_rule, decodes, preempted in ((False, ["A", "B"], []), (True, ["A"], ["B"])):
        p = planner(policy="fcfs")
        add(p, "A", 0.0, 8)
        add(p, "B", 1.0, 8)
        p.schedule(2.0, lim(budget=64, free=2))
        limits = Limits(token_budget=64, max_num_seqs=4, free_blocks=0, block_size=16,
                        decode_needs_free_block=sarathi_rule)
        plan = p.schedule(2.1, limits)
        assert plan.decodes == decodes and plan.preempted == preempted
        assert plan.blocks_freed == len(preempted)


def test_fcfs_serves_admitted_prefills_before_an_older_waiting_request():
    # admission="skip", block size 16. Round 1 (budget 10, 2 free blocks): A (a=0, 40 tokens,
    # 3 blocks) does not fit and is skipped; B (a=1, 20 tokens, 2 blocks) is admitted, gets 10.
    # Round 2 (budget 20, 3 free blocks): upstream FCFS serves the running queue first, so B gets
    # its last 10 and then A is admitted with the other 10. Pure arrival order would have put A
    # (arrival 0) first and given it all 20.
    p = planner(policy="fcfs", admission="skip")
    add(p, "A", 0.0, 40)
    add(p, "B", 1.0, 20)
    plan = p.schedule(1.0, lim(budget=10, free=2))
    assert plan.held == [("A", Hold.NO_KV)] and plan.prefills == [PrefillChunk("B", 0, 10, False)]
    plan = p.schedule(1.1, lim(budget=20, free=3))
    assert plan.prefills == [PrefillChunk("B", 10, 10, True), PrefillChunk("A", 0, 10, False)]
