"""Ranking quality of a length predictor: Kendall tau_b (seed 000, PARS Table III), Short-vs-Long
ranking accuracy (seed 002, Clairvoyant Eq. 2), and the cross-distribution matrix (seed 002
Table 7: train on one source, test on each).

All three take plain arrays (or rows) and a scorer, so each is checkable by hand:

* :func:`kendall_tau_b` is ``scipy.stats.kendalltau(pred, true, variant="b")``: (concordant -
  discordant) / sqrt((n0 - n1)(n0 - n2)) with n0 = n(n-1)/2 and n1, n2 the pairs tied in ``pred``
  and in ``true``. A pair tied in either variable is neither concordant nor discordant. NaN when
  it is undefined (fewer than two items, or one variable constant).
* :func:`short_long_accuracy` is Eq. 2: over every (Short i, Long j) pair, Short = length <
  ``short_edge`` (200), Long = length >= ``long_edge`` (800), the fraction whose Long member has
  a **strictly** higher score. The seed says "strictly higher" and its numerator counts only
  ``p(j) > p(i)``, so a tie counts 0, not 1/2 (``ties=0.5`` gives the AUC-style variant). Medium
  rows are left out. NaN when there is no Short or no Long row.
* :func:`cross_distribution_matrix`: for each training source, fit ``trainer`` on that source's
  train split; for each test source, Eq. 2 on that source's test split. A cell is ``None`` (n/a)
  when the trainer refuses the data (the 3-class lexical model needs Long rows; GPTeacher has
  none) or the test split has no Short or no Long row (GPTeacher again).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

SHORT_EDGE, LONG_EDGE = 200, 800

Scorer = Callable[[Sequence[str]], np.ndarray]
Trainer = Callable[[Sequence[str], np.ndarray], Scorer]


def kendall_tau_b(pred: Sequence[float], true: Sequence[float]) -> float:
    """Kendall's tau_b of two equal-length sequences; NaN where undefined."""
    from scipy.stats import kendalltau

    pred = np.asarray(pred, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    if pred.shape != true.shape or pred.ndim != 1:
        raise ValueError(f"kendall_tau_b: pred and true must be 1-D of one length, got {pred.shape} and {true.shape}")
    if len(pred) < 2:
        return float("nan")
    tau = kendalltau(pred, true, variant="b").statistic
    return float(tau)


def short_long_accuracy(scores: Sequence[float], lengths: Sequence[float], short_edge: float = SHORT_EDGE,
                        long_edge: float = LONG_EDGE, ties: float = 0.0) -> float:
    """Seed 002 Eq. 2: |{(i in S, j in L): s_j > s_i}| / (|S| |L|), S = {len < short_edge},
    L = {len >= long_edge}. ``ties`` is the credit for s_j == s_i (0 per the seed). NaN if S or L
    is empty. O(n log n)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(lengths, dtype=np.float64)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"short_long_accuracy: scores and lengths must be 1-D of one length, got {s.shape} and {y.shape}")
    if not short_edge <= long_edge:
        raise ValueError(f"short_long_accuracy: short_edge {short_edge} must be <= long_edge {long_edge}")
    if np.isnan(s).any():
        raise ValueError("short_long_accuracy: scores contain NaN")
    short = np.sort(s[y < short_edge])
    long_ = s[y >= long_edge]
    if len(short) == 0 or len(long_) == 0:
        return float("nan")
    below = np.searchsorted(short, long_, side="left")  # short scores strictly below each long score
    tied = np.searchsorted(short, long_, side="right") - below
    return float((below.sum() + ties * tied.sum()) / (len(short) * len(long_)))


def class_counts(lengths: Sequence[float], short_edge: float = SHORT_EDGE, long_edge: float = LONG_EDGE) -> dict:
    y = np.asarray(lengths, dtype=np.float64)
    return {"short": int((y < short_edge).sum()), "medium": int(((y >= short_edge) & (y < long_edge)).sum()),
            "long": int((y >= long_edge).sum())}


def lexical_trainer(**overrides) -> Trainer:
    """A :data:`Trainer` for the lexical model: fit ``train_lexical`` and score with the fitted
    xgboost model's P(Long) (the same numbers the ONNX export gives, to 1e-5)."""
    from predictors.length.lexical import extract_many
    from predictors.length.lexical_model import LONG, train_lexical

    def fit(prompts: Sequence[str], lengths: np.ndarray) -> Scorer:
        model = train_lexical(prompts, lengths, **overrides)
        return lambda ps: model.predict_proba(extract_many(ps))[:, LONG].astype(np.float64)

    return fit


def cross_distribution_matrix(train_sources: Sequence[str] | Mapping[str, tuple[Sequence, Sequence]],
                              test_sources: Sequence[str] | None = None, trainer: Trainer | None = None, *,
                              test_frac: float = 0.2, split_seed: int = 0, data_root=None) -> dict:
    """``{train: {test: cell}}`` with cell ``{"ranking_accuracy": float | None, "n_short", "n_long",
    "note"}``. Sources are names for :func:`predictors.length.data.load_source` (split by prompt
    with ``test_frac``/``split_seed``), or a mapping ``name -> (train rows, test rows)`` of
    :class:`LabelledPrompt` (or anything with ``.prompt`` and ``.length``). ``test_sources``
    defaults to the training sources; ``trainer`` to :func:`lexical_trainer`."""
    from predictors.length import data

    trainer = trainer or lexical_trainer()
    splits: dict[str, tuple[Sequence, Sequence]] = {}
    if isinstance(train_sources, Mapping):
        splits.update(train_sources)
        train_names = list(train_sources)
    else:
        train_names = list(train_sources)
    test_names = list(test_sources) if test_sources is not None else list(train_names)
    for name in dict.fromkeys(train_names + test_names):
        if name not in splits:
            rows = data.load_source(name, data_root or data.DATA_ROOT)
            splits[name] = data.split_by_prompt(rows, test_frac, split_seed)
    out: dict[str, dict[str, dict]] = {}
    for tr in train_names:
        rows = splits[tr][0]
        prompts = [r.prompt for r in rows]
        lengths = np.asarray([r.length for r in rows], dtype=np.float64)
        try:
            scorer = trainer(prompts, lengths)
            why = None
        except ValueError as e:  # e.g. no Long rows to train the 3-class model on
            scorer, why = None, f"not trainable: {str(e).splitlines()[0]}"
        out[tr] = {}
        for te in test_names:
            trows = splits[te][1]
            tl = np.asarray([r.length for r in trows], dtype=np.float64)
            cc = class_counts(tl)
            cell = {"ranking_accuracy": None, "n_short": cc["short"], "n_long": cc["long"], "note": why}
            if scorer is not None:
                if cc["short"] == 0 or cc["long"] == 0:
                    cell["note"] = "test split has no " + ("Short" if cc["short"] == 0 else "Long") + " rows"
                else:
                    acc = short_long_accuracy(scorer([r.prompt for r in trows]), tl)
                    cell["ranking_accuracy"] = None if math.isnan(acc) else acc
            out[tr][te] = cell
    return out


def format_matrix(matrix: dict) -> str:
    """The matrix as a markdown table (rows: trained on, columns: tested on; n/a where undefined)."""
    tests = list(next(iter(matrix.values())).keys()) if matrix else []
    lines = ["| trained on \\ tested on | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
    for tr, row in matrix.items():
        cells = []
        for te in tests:
            c = row[te]
            cells.append("n/a" if c["ranking_accuracy"] is None else f"{c['ranking_accuracy']:.3f}")
        lines.append(f"| {tr} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
