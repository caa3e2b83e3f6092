"""LPRS, Algorithm 1 and Eq. 6-11 of seed 001, with hand-made predictors."""

from __future__ import annotations

import numpy as np
import pytest

from sarathi_ext.core import FEATURE_NAMES
from sarathi_ext.core import LPRS, BatchState
from sarathi_ext.core.features import IDX

SCHED = IDX["scheduled_tokens"]
assert SCHED == 12 and FEATURE_NAMES[12] == "scheduled_tokens"


class Recorder:
    """A predictor that records every call: ms = 10 + 0.5 * scheduled_tokens."""

    def __init__(self, fn=None):
        self.calls = []
        self.fn = fn or (lambda x: 10.0 + 0.5 * x[:, SCHED])

    def __call__(self, x):
        self.calls.append(np.array(x, copy=True))
        return self.fn(x)


def four_decodes():
    b = BatchState()
    for ctx in (10, 20, 30, 40):
        b.add_decode(ctx)
    return b  # U_t = 4


def test_candidate_sets_eq8():
    lp = LPRS(Recorder(), 30.0, 16, 1.0, 4.0)
    assert lp.candidates(50).tolist() == [1, 16, 32, 48, 50]
    assert lp.candidates(48).tolist() == [1, 16, 32, 48]
    assert lp.candidates(10).tolist() == [1, 10]
    assert lp.candidates(1).tolist() == [1]
    assert LPRS(Recorder(), 30.0, 1, 1.0, 4.0).candidates(3).tolist() == [1, 2, 3]
    assert LPRS(Recorder(), 30.0, 100, 1.0, 4.0).candidates(50).tolist() == [1, 50]


# Budget 54, U_t = 4 decodes, r = 100: h = min(100, 54 - 4) = 50 (Eq. 6); C = {1,16,32,48,50}.
# Predicted ms = 10 + 0.5*(4 + c) = 12 + 0.5c:  1 -> 12.5, 16 -> 20, 32 -> 28, 48 -> 36, 50 -> 37.


def test_choose_closest_to_target():
    # T* = 30, lambda_u = 1, lambda_o = 4 (Eq. 10):
    #   1: 1*(30-12.5) = 17.5   16: 1*(30-20) = 10   32: 1*(30-28) = 2
    #   48: 4*(36-30) = 24      50: 4*(37-30) = 28        -> argmin = 32
    pred = Recorder()
    lp = LPRS(pred, 30.0, 16, 1.0, 4.0)
    assert lp.choose(100, 0, 54, four_decodes()) == 32
    assert lp.score(np.array([12.5, 20.0, 28.0, 36.0, 37.0])).tolist() == [17.5, 10.0, 2.0, 24.0, 28.0]


def test_predictor_called_once_with_every_candidate():
    pred = Recorder()
    lp = LPRS(pred, 30.0, 16, 1.0, 4.0)
    lp.choose(100, 7, 54, four_decodes())
    assert len(pred.calls) == 1 and lp.predictor_calls == 1
    x = pred.calls[0]
    assert x.shape == (5, 16)
    assert x[:, 0].tolist() == [1, 16, 32, 48, 50]  # prefill_tokens = c
    assert x[:, SCHED].tolist() == [5, 20, 36, 52, 54]  # 4 decodes + c
    assert (x[:, 1] == 4).all() and (x[:, 2] == 5).all()  # 4 decodes; 4 + the new chunk
    assert (x[:, 5] == 7).all() and (x[:, 6] == 7).all()  # processed tokens of the candidate
    lp.choose(30, 0, 54, four_decodes())  # h = 30: C = {1, 16, 30}
    assert len(pred.calls) == 2 and pred.calls[1][:, 0].tolist() == [1, 16, 30]


def test_asymmetric_penalties_switch_the_choice():
    # T* = 33: 32 -> 28 (under by 5), 48 -> 36 (over by 3), 50 -> 37 (over by 4), 16 -> 20 (under 13)
    # lambda_u=1, lambda_o=4:   32: 5,  48: 12,  50: 16,  16: 13, 1: 20.5       -> 32 (under)
    # lambda_u=1, lambda_o=1.5: 32: 5,  48: 4.5, 50: 6,   16: 13, 1: 20.5       -> 48 (over)
    assert LPRS(Recorder(), 33.0, 16, 1.0, 4.0).choose(100, 0, 54, four_decodes()) == 32
    assert LPRS(Recorder(), 33.0, 16, 1.0, 1.5).choose(100, 0, 54, four_decodes()) == 48


def test_exact_tie_goes_to_larger_chunk():
    # Predicted by prefill_tokens (= c here): 1 -> 40, 16 -> 26, 32 -> 32, 48 -> 50, 50 -> 60.
    # T* = 30, lambda_u = 1, lambda_o = 2: 1: 2*10 = 20, 16: 1*4 = 4, 32: 2*2 = 4, 48: 40, 50: 60
    # 16 and 32 tie at 4 -> the larger, 32 (Algorithm 1, lines 23-24).
    table = {1: 40.0, 16: 26.0, 32: 32.0, 48: 50.0, 50: 60.0}
    pred = Recorder(lambda x: np.array([table[int(c)] for c in x[:, 0]]))
    assert LPRS(pred, 30.0, 16, 1.0, 2.0).choose(100, 0, 54, four_decodes()) == 32


def test_constant_predictor_picks_upper_bound():
    # every candidate scores the same -> the largest, h = 50
    pred = Recorder(lambda x: np.full(len(x), 17.0))
    assert LPRS(pred, 30.0, 16, 1.0, 4.0).choose(100, 0, 54, four_decodes()) == 50


def test_no_room_returns_zero_without_predicting():
    pred = Recorder()
    lp = LPRS(pred, 30.0, 16, 1.0, 4.0)
    assert lp.choose(100, 0, 4, four_decodes()) == 0  # h = min(100, 4 - 4) = 0
    assert lp.choose(0, 0, 54, four_decodes()) == 0  # r = 0
    assert pred.calls == [] and lp.predictor_calls == 0


def test_nan_predictions():
    nan = Recorder(lambda x: np.full(len(x), np.nan))
    lp = LPRS(nan, 30.0, 16, 1.0, 4.0)
    # no candidate scores below +inf, so c* = 0; an empty batch (U_t = 0) still gets 1 (lines 28-30)
    assert lp.choose(100, 0, 54, BatchState()) == 1
    # with U_t = 4 the request is skipped
    assert lp.choose(100, 0, 54, four_decodes()) == 0


def test_all_over_target_picks_smallest():
    # T* = 5 is below every prediction (>= 12.5): score = 4*(ms - 5) grows with c -> 1
    assert LPRS(Recorder(), 5.0, 16, 1.0, 4.0).choose(100, 0, 54, four_decodes()) == 1


@pytest.mark.parametrize(
    "target,delta,lu,lo",
    [(0.0, 16, 1.0, 4.0), (-5.0, 16, 1.0, 4.0), (30.0, 0, 1.0, 4.0), (30.0, -1, 1.0, 4.0),
     (30.0, 16, 4.0, 4.0), (30.0, 16, 5.0, 4.0), (30.0, 16, -1.0, 4.0)],
)
def test_validation(target, delta, lu, lo):
    with pytest.raises(ValueError):
        LPRS(Recorder(), target, delta, lu, lo)
