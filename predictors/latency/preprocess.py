"""Data preparation for the latency predictor: seed 001, Sec. 3.2.1 component 3.

"The raw samples are cleaned, and bucketed by total scheduled tokens. They are then downsampled for
overrepresented full-chunk cases, and split into training, validation, and test sets" (8:1:1,
Sec. 4.1). The paper names the four steps but not their rules; the rules chosen here are:

  clean      drop rows with a non-finite value or latency <= 0, then gross outliers: inside each
             scheduled-token bucket of >= MIN_BUCKET_FOR_OUTLIERS rows, fit latency by least
             squares on the 16 features, and drop rows whose residual lies more than OUTLIER_K
             robust sigmas from the median residual (sigma = 1.4826 * MAD, floored at
             MAD_FLOOR_FRAC * the bucket's median latency so near-exact fits do not reject
             ordinary jitter); refit without them and flag once more. Residuals, not raw
             latencies: within one token bucket latency legitimately doubles with prefill history
             and decode context, so a median+k*MAD rule on raw latency dropped 0.8% of clean
             simulator rows, all long-context ones; on residuals it drops none and still finds
             60/60 injected stalls (x1.5-4 or +20-60 ms) on that profile. K = 8. Smaller buckets
             are not screened (a 16-feature fit needs rows to spare).
  bucketize  bucket k holds scheduled_tokens in [2^k, 2^(k+1)); 0 or 1 token goes to bucket 0.
             Power-of-two edges make a power-of-two token budget (Sarathi's 512, 2048, ...) the
             first value of its bucket, so the full-chunk batches form one bucket of their own
             (with no larger batches, since the budget is the hard cap).
  downsample every bucket is capped at ceil(CAP_FACTOR * median non-empty bucket size) rows,
             drawn uniformly without replacement: the token-budget scheduler fills most rounds
             to the budget, so that one bucket would otherwise dominate the loss.
  split      a seeded shuffle; validation and test get floor(n * r / sum(ratios)) rows, train
             the rest. Each split needs >= MIN_SPLIT_ROWS rows.

``prepare`` runs all four and adds Eq. 5's bucket-aware weights w_i for the train split: inverse
bucket frequency, normalised to mean 1, clipped at MAX_WEIGHT times the mean.
numpy only: the base install (no torch) can import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sarathi_ext.core.features import IDX, NUM_FEATURES

SCHEDULED = IDX["scheduled_tokens"]  # column 12 (Table 2)
OUTLIER_K = 8.0
MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation
MAD_FLOOR_FRAC = 0.01
MIN_BUCKET_FOR_OUTLIERS = 4 * NUM_FEATURES  # rows to spare for the per-bucket 16-feature fit
CAP_FACTOR = 3.0
MIN_SPLIT_ROWS = 3
MAX_WEIGHT = 10.0  # cap on a bucket-aware weight, in multiples of the mean (see bucket_weights)


def _check(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != NUM_FEATURES:
        raise ValueError(f"expected features of shape [N, {NUM_FEATURES}], got {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"expected {X.shape[0]} latencies, got shape {y.shape}")
    return X, y


def bucketize(X: np.ndarray) -> np.ndarray:
    """Bucket index per row: k such that 2^k <= scheduled_tokens < 2^(k+1) (0 for < 2 tokens)."""
    tokens = np.asarray(X, dtype=np.float64)[:, SCHEDULED]
    return np.floor(np.log2(np.maximum(tokens, 1.0))).astype(np.int64)


def _residual_outliers(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rows of one bucket whose least-squares residual is a gross outlier (two passes)."""
    scale = np.abs(A).max(axis=0)
    A = A / np.where(scale > 0, scale, 1.0)  # conditioning only: the fit is the same
    floor = MAD_FLOOR_FRAC * abs(float(np.median(y)))
    ok = np.ones(len(y), dtype=bool)
    for _ in range(2):
        coef = np.linalg.lstsq(A[ok], y[ok], rcond=None)[0]
        r = y - A @ coef
        med = np.median(r[ok])
        sigma = max(MAD_TO_SIGMA * float(np.median(np.abs(r[ok] - med))), floor)
        ok = np.abs(r - med) <= OUTLIER_K * sigma
    return ~ok


def clean(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows that survive the cleaning rule of the module docstring, in their original order."""
    X, y = _check(X, y)
    keep = np.isfinite(X).all(axis=1) & np.isfinite(y) & (y > 0)
    X, y = X[keep], y[keep]
    if len(y) == 0:
        return X, y
    buckets = bucketize(X)
    keep = np.ones(len(y), dtype=bool)
    for b in np.unique(buckets):
        idx = np.flatnonzero(buckets == b)
        if len(idx) >= MIN_BUCKET_FOR_OUTLIERS:
            keep[idx] = ~_residual_outliers(X[idx], y[idx])
    return X[keep], y[keep]


def bucket_cap(buckets: np.ndarray, cap_factor: float = CAP_FACTOR) -> int:
    """The per-bucket row cap: ceil(cap_factor * median size of the non-empty buckets)."""
    counts = np.unique(np.asarray(buckets), return_counts=True)[1]
    if len(counts) == 0:
        return 0
    return int(math.ceil(cap_factor * float(np.median(counts))))


def downsample_full_chunk(
    X: np.ndarray, y: np.ndarray, buckets: np.ndarray, seed: int, cap_factor: float = CAP_FACTOR
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, buckets) with every bucket cut to ``bucket_cap`` rows, chosen uniformly at random
    (seeded); the kept rows stay in their original order."""
    X, y = _check(X, y)
    buckets = np.asarray(buckets)
    cap = bucket_cap(buckets, cap_factor)
    rng = np.random.default_rng(seed)
    keep = np.ones(len(y), dtype=bool)
    for b in np.unique(buckets):
        idx = np.flatnonzero(buckets == b)
        if len(idx) > cap:
            keep[idx] = False
            keep[rng.choice(idx, size=cap, replace=False)] = True
    return X[keep], y[keep], buckets[keep]


def min_rows_for_split(ratios: Sequence[float]) -> int:
    """The fewest rows for which floor(n * r / sum) >= MIN_SPLIT_ROWS for every split."""
    total, smallest = float(sum(ratios)), float(min(ratios))
    n = int(math.ceil(MIN_SPLIT_ROWS * total / smallest))
    while any(math.floor(n * r / total) < MIN_SPLIT_ROWS for r in ratios):  # float rounding guard
        n += 1
    return n


def split(
    X: np.ndarray, y: np.ndarray, seed: int, ratios: Sequence[float] = (8, 1, 1)
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((X_train, y_train), (X_val, y_val), (X_test, y_test)) by a seeded shuffle."""
    X, y = _check(X, y)
    if len(ratios) != 3 or min(ratios) <= 0:
        raise ValueError(f"ratios must be three positive numbers (train, val, test), got {tuple(ratios)}")
    n, need = len(y), min_rows_for_split(ratios)
    if n < need:
        ratio_txt = ":".join(f"{r:g}" for r in ratios)
        raise ValueError(
            f"too few rows to split {ratio_txt}: got {n}, need at least {need} "
            f"so that every split has >= {MIN_SPLIT_ROWS} rows")
    total = float(sum(ratios))
    n_val = math.floor(n * ratios[1] / total)
    n_test = math.floor(n * ratios[2] / total)
    perm = np.random.default_rng(seed).permutation(n)
    tr, va, te = perm[: n - n_val - n_test], perm[n - n_val - n_test: n - n_test], perm[n - n_test:]
    return (X[tr], y[tr]), (X[va], y[va]), (X[te], y[te])


def bucket_weights(buckets: np.ndarray, max_weight: float = MAX_WEIGHT) -> np.ndarray:
    """Eq. 5's w_i: inverse frequency of the row's bucket, normalised to mean 1, so every bucket
    carries the same total weight and the loss scale matches the unweighted mean.

    Weights are clipped at ``max_weight`` (then renormalised to mean 1): a bucket holding one or
    two train rows would otherwise give each a weight of ~N/(buckets) (150 on a 1,400-row split),
    and that one row would dominate every mini-batch it lands in. ``max_weight=inf`` disables it.
    """
    buckets = np.asarray(buckets)
    if len(buckets) == 0:
        return np.zeros(0)
    _, inverse, counts = np.unique(buckets, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inverse].astype(np.float64)
    w = np.minimum(w / w.mean(), max_weight)
    return w / w.mean()


@dataclass
class Prepared:
    """The three splits after clean -> bucketize -> downsample -> split, with train weights."""

    X_train: np.ndarray
    y_train: np.ndarray
    w_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    stats: dict = field(default_factory=dict)


def prepare(X: np.ndarray, y: np.ndarray, seed: int, ratios: Sequence[float] = (8, 1, 1),
            cap_factor: float = CAP_FACTOR) -> Prepared:
    """The whole of component 3. Deterministic for a seed: the trainer and the evaluator call it
    with the same data and seed and so see the same test split."""
    X, y = _check(X, y)
    n_raw = len(y)
    Xc, yc = clean(X, y)
    n_clean = len(yc)
    buckets = bucketize(Xc)
    cap = bucket_cap(buckets, cap_factor)
    Xd, yd, _ = downsample_full_chunk(Xc, yc, buckets, seed, cap_factor)
    try:
        (Xtr, ytr), (Xva, yva), (Xte, yte) = split(Xd, yd, seed, ratios)
    except ValueError as e:
        if len(yd) == n_raw:
            raise
        raise ValueError(f"{e} (rows: {n_raw} raw, {n_clean} after cleaning, "
                         f"{len(yd)} after downsampling)") from None
    stats = {"rows_raw": n_raw, "rows_clean": n_clean, "rows_downsampled": len(yd),
             "bucket_cap": cap, "rows_train": len(ytr), "rows_val": len(yva), "rows_test": len(yte),
             "seed": int(seed), "ratios": [float(r) for r in ratios]}
    return Prepared(Xtr, ytr, bucket_weights(bucketize(Xtr)), Xva, yva, Xte, yte, stats)
