"""Chunk-size policies: how many prefill tokens a chosen request gets this round."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .features import BatchState

# A batch-latency predictor: features [N, 16] -> predicted milliseconds [N]. The trained MLP, the
# simulator's execution-time model and a profile fit all satisfy it.
LatencyPredictor = Callable[[np.ndarray], np.ndarray]


def upper_bound(remaining: int, budget: int, committed: int) -> int:
    # h_i = min(r_i, B_max - U_t)   (Eq. 6)
    return max(0, min(remaining, budget - committed))


class ChunkPolicy:
    name = "base"

    def choose(self, remaining: int, processed: int, budget: int, batch: BatchState) -> int:
        """c_i*, the proposed chunk for a request with r_i = ``remaining`` tokens left and
        ``processed`` already prefilled, given the batch committed so far (U_t = its tokens)."""
        raise NotImplementedError


class StaticChunk(ChunkPolicy):
    """Sarathi's token-budget rule: fill what is left, c_i^base = h_i (Eq. 7)."""

    name = "static"

    def choose(self, remaining: int, processed: int, budget: int, batch: BatchState) -> int:
        return upper_bound(remaining, budget, batch.scheduled_tokens)


class LPRS(ChunkPolicy):
    """Algorithm 1: pick the candidate chunk whose predicted batch latency is closest to T*.

    Overshooting the target costs lambda_o per ms and undershooting lambda_u per ms, with
    lambda_u < lambda_o (Eq. 10), because a late iteration delays every running decode while an
    early one only leaves some capacity unused.
    """

    name = "lprs"

    def __init__(
        self,
        predictor: LatencyPredictor,
        target_ms: float,
        delta: int,
        lambda_u: float,
        lambda_o: float,
    ) -> None:
        if target_ms <= 0:
            raise ValueError(f"lprs_target_ms must be > 0, got {target_ms}")
        if delta < 1:
            raise ValueError(f"lprs_delta must be >= 1, got {delta}")
        if not 0 <= lambda_u < lambda_o:
            raise ValueError(
                f"need 0 <= lprs_lambda_u < lprs_lambda_o, got {lambda_u} and {lambda_o}"
            )
        self.predictor = predictor
        self.target_ms = float(target_ms)
        self.delta = int(delta)
        self.lambda_u = float(lambda_u)
        self.lambda_o = float(lambda_o)
        self.predictor_calls = 0

    def candidates(self, h: int) -> np.ndarray:
        # C_i = {1, h_i} U {k*Delta | 1 <= k*Delta <= h_i}   (Eq. 8), sorted ascending.
        steps = np.arange(self.delta, h + 1, self.delta, dtype=np.int64)
        return np.unique(np.concatenate(([1, h], steps)))

    def score(self, predicted_ms: np.ndarray) -> np.ndarray:
        # Score_{t,i}(c)   (Eq. 10)
        t, target = predicted_ms, self.target_ms
        return np.where(t <= target, self.lambda_u * (target - t), self.lambda_o * (t - target))

    def choose(self, remaining: int, processed: int, budget: int, batch: BatchState) -> int:
        committed = batch.scheduled_tokens  # U_t
        h = upper_bound(remaining, budget, committed)
        if h <= 0:
            return 0
        cands = self.candidates(h)
        # One predictor call scores every candidate: x_{t,i}(c) for all c in C_i (Eq. 9).
        predicted = np.asarray(self.predictor(batch.features_with_chunk(cands, processed)), dtype=np.float64)
        self.predictor_calls += 1
        scores = self.score(predicted)
        best_score, best = float("inf"), 0
        for c, s in zip(cands.tolist(), scores.tolist()):
            # Strictly better wins; an exact tie goes to the larger chunk (Algorithm 1, lines 20-24).
            if s < best_score:
                best_score, best = s, c
            elif s == best_score and c > best:
                best = c
        # An empty batch must still make progress (Algorithm 1, lines 28-30).
        if best == 0 and committed == 0 and h >= 1:
            return 1
        return best


CHUNK_POLICIES = {"static": StaticChunk, "lprs": LPRS}
