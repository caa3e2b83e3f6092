"""Active Prefill Control, Eq. 12-14 of seed 001."""

from __future__ import annotations

import pytest

from sarathi_ext.core import ActivePrefillControl, Hold


def counts(apc):
    c = apc.counters
    return (c.blocked_by_activity_cap, c.blocked_by_min_chunk, c.warm_starts)


# C_t = min(C_max, S_max - |D_t|, floor((B_max - U_t) / L_min))   (Eq. 12)
@pytest.mark.parametrize(
    "c_max,l_min,s_max,decodes,budget,committed,expected",
    [
        (2, 16, 10, 3, 256, 3, 2),  # min(2, 7, floor(253/16)=15) = 2: C_max binds
        (8, 16, 10, 7, 256, 7, 3),  # min(8, 3, floor(249/16)=15) = 3: slots bind
        (8, 16, 100, 10, 64, 10, 3),  # min(8, 90, floor(54/16)=3) = 3: budget binds
        (8, 10, 100, 0, 64, 0, 6),  # min(8, 100, floor(64/10)=6) = 6: budget binds
        (8, 16, 100, 10, 25, 10, 0),  # floor(15/16) = 0
        (8, 16, 5, 5, 256, 5, 0),  # S_max - |D_t| = 0
    ],
)
def test_activity_cap(c_max, l_min, s_max, decodes, budget, committed, expected):
    assert ActivePrefillControl(c_max, l_min).activity_cap(s_max, decodes, budget, committed) == expected


# gate(proposed c*, remaining r, h, |P_t|, C_t); m = min(r, L_min) (Eq. 13), L_min = 16 below.


def test_gate_accepts():
    apc = ActivePrefillControl(2, 16)
    assert apc.gate(40, 100, 40, 1, 2) == (40, None)  # 1 < 2 and 40 >= m = 16
    assert apc.gate(16, 100, 40, 0, 1) == (16, None)  # c* = m exactly
    assert apc.gate(5, 5, 5, 1, 2) == (5, None)  # r = 5 < L_min: m = 5
    assert counts(apc) == (0, 0, 0)


def test_gate_warm_start():
    apc = ActivePrefillControl(2, 16)
    # c* = 3 < m = 16, |P_t| = 0 -> min(h, m) = min(10, 16) = 10
    assert apc.gate(3, 100, 10, 0, 0) == (10, None)
    # c* = 1 < 16, h = 50 -> min(50, 16) = 16
    assert apc.gate(1, 100, 50, 0, 2) == (16, None)
    # r = 10: m = 10; c* = 4 < 10 -> min(10, 10) = 10
    assert apc.gate(4, 10, 10, 0, 1) == (10, None)
    assert counts(apc) == (0, 0, 3)


def test_gate_refuses_min_chunk():
    apc = ActivePrefillControl(2, 16)
    # c* = 8 < m = 16 with one prefill active: third case of Eq. 14
    assert apc.gate(8, 100, 8, 1, 2) == (0, Hold.MIN_CHUNK)
    assert counts(apc) == (0, 1, 0)


def test_gate_refuses_activity_cap():
    apc = ActivePrefillControl(2, 16)
    # c* = 40 >= 16 but |P_t| = 2 = C_t
    assert apc.gate(40, 100, 40, 2, 2) == (0, Hold.ACTIVITY_CAP)
    # no prefill active but C_t = 0, and c* = r = 5 >= m = 5 so no warm start either
    assert apc.gate(5, 5, 5, 0, 0) == (0, Hold.ACTIVITY_CAP)
    assert counts(apc) == (2, 0, 0)


def test_gate_refuses_both_reasons_counts_once():
    apc = ActivePrefillControl(2, 16)
    # c* = 8 < 16 and |P_t| = 2 = C_t: refused (Eq. 14, otherwise); one counter moves by one
    chunk, reason = apc.gate(8, 100, 8, 2, 2)
    assert chunk == 0 and reason in (Hold.MIN_CHUNK, Hold.ACTIVITY_CAP)
    c = apc.counters
    assert c.blocked_by_activity_cap + c.blocked_by_min_chunk == 1 and c.warm_starts == 0


@pytest.mark.parametrize("c_max,l_min", [(0, 16), (2, 0), (-1, 16)])
def test_rejects_bad_parameters(c_max, l_min):
    with pytest.raises(ValueError):
        ActivePrefillControl(c_max, l_min)
