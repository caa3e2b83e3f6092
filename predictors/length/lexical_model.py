"""Clairvoyant's lexical length ranker (seed 002, Sections 3.2-3.4, 4.1, 4.3): a 3-class XGBoost
over the 19 features of :mod:`predictors.length.lexical`, exported to ONNX and served with
onnxruntime; the scheduling key is P(Long), a continuous score (not the argmax class).

Classes (Section 4.1): Short < 200 tokens, Medium 200-799, Long >= 800 (``CLASS_EDGES``).
Model (Section 4.3): 300 trees, depth 6, learning rate 0.1, seed 42, softmax objective.

Artifact: ``NAME.onnx`` plus the sidecar ``NAME.json`` (same stem) holding the feature names
and version, the class edges and names, the ONNX file's sha256, the neutral score, provenance
(data, split, hyperparameters, library versions) and metrics. :func:`load_lexical` refuses, with
a one-line ``ValueError``, an artifact whose sidecar does not match: other feature names or
feature version than this code's, other class edges, another ONNX file (hash), or an ONNX graph
whose input is not 19 wide.

Neutral score: an empty (or whitespace-only, or ``None``) prompt at serving time gets the
artifact's ``neutral_score``, the **median P(Long) over the training prompts**, and a
``logging.warning``; it then sorts into the middle of a queue of typical requests, neither
promoted nor demoted. (The class prior of Long is not used: with class-balanced training the
model's scores are not calibrated to that prior, so the prior would not be a middle rank.)

Class balance: the seed stratified-samples equal classes (2,000 each). ``balance=True`` (the
default) instead weights each training row by n / (3 * count of its class), which balances the
loss the same way without throwing data away; the real data here has very few Long rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from predictors.length.lexical import FEATURE_VERSION, LEXICAL_FEATURE_NAMES, N_FEATURES, extract, extract_many

log = logging.getLogger(__name__)

CLASS_EDGES: tuple[int, int] = (200, 800)
CLASS_NAMES: tuple[str, str, str] = ("short", "medium", "long")
LONG = 2
FORMAT = "sarathi-ext/lexical-length"
FORMAT_VERSION = 1
HYPERPARAMS = {"n_estimators": 300, "max_depth": 6, "learning_rate": 0.1, "random_state": 42}
INPUT_NAME, PROBA_NAME = "input", "probabilities"


def length_class(lengths: np.ndarray) -> np.ndarray:
    """0 = Short (< 200), 1 = Medium (200-799), 2 = Long (>= 800), as int64."""
    return np.digitize(np.asarray(lengths, dtype=np.float64), CLASS_EDGES, right=False).astype(np.int64)


def ranking_accuracy(scores: np.ndarray, lengths: np.ndarray) -> float:
    """Seed 002 Eq. 2: the fraction of (Short, Long) pairs whose Long member scores strictly
    higher. NaN if either class is absent. O(n log n) via a sorted search, not a double loop."""
    y = length_class(lengths)
    s, ell = np.sort(np.asarray(scores)[y == 0]), np.asarray(scores)[y == LONG]
    if len(s) == 0 or len(ell) == 0:
        return float("nan")
    return float(np.searchsorted(s, ell, side="left").sum() / (len(s) * len(ell)))


def _versions() -> dict[str, str]:
    out = {}
    for mod in ("xgboost", "onnx", "onnxmltools", "onnxruntime", "numpy"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing optional library is just not recorded
            pass
    return out


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                           capture_output=True, text=True, timeout=5)
        return (r.stdout.strip() or None) if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def train_lexical(prompts: Sequence[str], lengths: np.ndarray, *, balance: bool = True,
                  n_jobs: int | None = None, **overrides):
    """A fitted ``xgboost.XGBClassifier`` (3-class softmax) on ``extract_many(prompts)``.

    ``overrides`` replace entries of ``HYPERPARAMS`` (tests use fewer trees). Every class must
    occur in ``lengths``; ``ValueError`` otherwise.
    """
    import xgboost as xgb

    X = extract_many(prompts)  # float32 throughout, one-hot columns included
    y = length_class(lengths)
    counts = np.bincount(y, minlength=3)
    if (counts == 0).any():
        missing = [CLASS_NAMES[i] for i in np.flatnonzero(counts == 0)]
        raise ValueError(f"training lengths have no {'/'.join(missing)} rows (edges {CLASS_EDGES}); "
                         "the 3-class model needs all three")
    weights = (len(y) / (3.0 * counts))[y] if balance else None
    params = {**HYPERPARAMS, **overrides}
    model = xgb.XGBClassifier(objective="multi:softprob", tree_method="hist",
                              n_jobs=n_jobs, **params)
    model.fit(X, y, sample_weight=weights)
    return model


def to_onnx_bytes(model) -> bytes:
    """The fitted classifier as a serialized ONNX model: float32 input ``input`` [N, 19],
    outputs ``label`` [N] and ``probabilities`` [N, 3]."""
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    onx = convert_xgboost(model, initial_types=[(INPUT_NAME, FloatTensorType([None, N_FEATURES]))],
                          target_opset=15)
    return onx.SerializeToString()


def sidecar_path(path: str | Path) -> Path:
    return Path(path).with_suffix(".json")


def save_lexical(model, path: str | Path, *, train_prompts: Sequence[str],
                 provenance: dict | None = None, metrics: dict | None = None) -> Path:
    """Write ``path`` (.onnx) and its sidecar; return the ONNX path.

    The exported graph is checked against ``model.predict_proba`` on the training features
    (max abs difference recorded, ``RuntimeError`` above 1e-5), and the neutral score is the
    median ONNX P(Long) of ``train_prompts``.
    """
    path = Path(path)
    if path.suffix != ".onnx":
        raise ValueError(f"{path}: the artifact path must end in .onnx")
    blob = to_onnx_bytes(model)
    X = extract_many(train_prompts)
    sess = _session(blob, threads=0)
    p_onnx = sess.run([PROBA_NAME], {INPUT_NAME: X})[0]
    diff = float(np.abs(p_onnx - model.predict_proba(X)).max()) if len(X) else 0.0
    if diff > 1e-5:
        raise RuntimeError(f"ONNX export differs from xgboost by {diff:.3g} in probability")
    side = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "feature_names": list(LEXICAL_FEATURE_NAMES),
        "feature_version": FEATURE_VERSION,
        "class_edges": list(CLASS_EDGES),
        "class_names": list(CLASS_NAMES),
        "score": "P(long), output 'probabilities' column 2",
        "onnx_sha256": hashlib.sha256(blob).hexdigest(),
        "neutral_score": float(np.median(p_onnx[:, LONG])) if len(X) else 1.0 / 3.0,
        "neutral_rule": "median P(long) over the training prompts",
        "onnx_vs_xgboost_max_abs_diff": diff,
        "hyperparams": {k: v for k, v in model.get_params().items()
                        if k in HYPERPARAMS or k in ("objective", "tree_method")},
        "provenance": {"created_unix": int(time.time()), "git_commit": _git_commit(),
                       "versions": _versions(), **(provenance or {})},
        "metrics": metrics or {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    sidecar_path(path).write_text(json.dumps(side, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _session(blob_or_path, threads: int = 1):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(blob_or_path, sess_options=so, providers=["CPUExecutionProvider"])


def _refuse(path: Path, why: str) -> ValueError:
    return ValueError(f"{path}: lexical artifact refused: {why}")


class LexicalRanker:
    """P(Long) scores from an exported lexical model (see :func:`load_lexical`)."""

    def __init__(self, session, sidecar: dict, path: Path):
        self._sess = session
        self.sidecar = sidecar
        self.path = path
        self.neutral_score = float(sidecar["neutral_score"])
        self._outputs = [PROBA_NAME]

    def score(self, prompts: Sequence[str | None]) -> np.ndarray:
        """P(Long) for each prompt, float64 [n]. Empty/whitespace/None prompts get
        ``neutral_score`` and one ``logging.warning`` per call naming how many."""
        if isinstance(prompts, str):
            raise TypeError("score() takes a list of prompts; use score_one() for one prompt")
        prompts = list(prompts)
        out = np.full(len(prompts), self.neutral_score, dtype=np.float64)
        live = [i for i, p in enumerate(prompts) if p is not None and (not isinstance(p, str) or p.strip())]
        if len(live) < len(prompts):
            keep = set(live)
            empty = [i for i in range(len(prompts)) if i not in keep]
            log.warning("lexical ranker: %d empty prompt(s) (indices %s) get the neutral score %.4f",
                        len(empty), empty[:10], self.neutral_score)
        if live:
            X = extract_many([prompts[i] for i in live])
            out[live] = self._sess.run(self._outputs, {INPUT_NAME: X})[0][:, LONG]
        return out

    def score_one(self, prompt: str | None) -> float:
        """P(Long) of one prompt (the per-request serving path)."""
        if prompt is None or not prompt.strip():
            log.warning("lexical ranker: empty prompt gets the neutral score %.4f", self.neutral_score)
            return self.neutral_score
        x = extract(prompt).reshape(1, N_FEATURES)
        return float(self._sess.run(self._outputs, {INPUT_NAME: x})[0][0, LONG])

    __call__ = score


def load_lexical(path: str | Path, *, threads: int = 1) -> LexicalRanker:
    """Load ``path`` (.onnx) and its sidecar, refusing any mismatch with a one-line ValueError."""
    path = Path(path)
    side_p = sidecar_path(path)
    try:
        blob = path.read_bytes()
    except OSError as e:
        raise _refuse(path, f"cannot read the ONNX file: {e.strerror}") from None
    try:
        side = json.loads(side_p.read_text(encoding="utf-8"))
    except OSError as e:
        raise _refuse(path, f"cannot read the sidecar {side_p.name}: {e.strerror}") from None
    except ValueError as e:
        raise _refuse(path, f"sidecar {side_p.name} is not JSON: {e}") from None
    if not isinstance(side, dict) or side.get("format") != FORMAT:
        raise _refuse(path, f"sidecar {side_p.name} is not a {FORMAT} sidecar")
    if side.get("format_version") != FORMAT_VERSION:
        raise _refuse(path, f"sidecar format_version {side.get('format_version')!r}, this code reads {FORMAT_VERSION}")
    names = side.get("feature_names")
    if names != list(LEXICAL_FEATURE_NAMES):
        if not isinstance(names, list):
            raise _refuse(path, "sidecar has no feature_names list")
        i = next((k for k, (a, b) in enumerate(zip(names, LEXICAL_FEATURE_NAMES)) if a != b),
                 min(len(names), N_FEATURES))
        got = names[i] if i < len(names) else "<none>"
        want = LEXICAL_FEATURE_NAMES[i] if i < N_FEATURES else "<none>"
        raise _refuse(path, f"sidecar feature_names differ from LEXICAL_FEATURE_NAMES at column {i} "
                            f"({got!r} vs {want!r}; {len(names)} vs {N_FEATURES} names)")
    if side.get("feature_version") != FEATURE_VERSION:
        raise _refuse(path, f"sidecar feature_version {side.get('feature_version')!r}, extractor is {FEATURE_VERSION}")
    if side.get("class_edges") != list(CLASS_EDGES):
        raise _refuse(path, f"sidecar class_edges {side.get('class_edges')!r}, expected {list(CLASS_EDGES)}")
    if side.get("onnx_sha256") != hashlib.sha256(blob).hexdigest():
        raise _refuse(path, f"the ONNX file's sha256 does not match sidecar {side_p.name}")
    neutral = side.get("neutral_score")
    if not isinstance(neutral, (int, float)) or not 0.0 <= float(neutral) <= 1.0:
        raise _refuse(path, f"sidecar neutral_score {neutral!r} is not a probability")
    try:
        sess = _session(blob, threads=threads)
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise _refuse(path, f"onnxruntime cannot load it: {str(e).splitlines()[0]}") from None
    ins, outs = sess.get_inputs(), [o.name for o in sess.get_outputs()]
    if len(ins) != 1 or ins[0].name != INPUT_NAME or list(ins[0].shape)[-1] != N_FEATURES:
        raise _refuse(path, f"ONNX input is {[(i.name, i.shape) for i in ins]}, expected {INPUT_NAME} [N, {N_FEATURES}]")
    if PROBA_NAME not in outs:
        raise _refuse(path, f"ONNX outputs {outs} lack {PROBA_NAME!r}")
    return LexicalRanker(sess, side, path)


def evaluate(scores_proba: np.ndarray, lengths: np.ndarray) -> dict:
    """3-class accuracy (argmax) and Eq. 2 ranking accuracy (P(Long)) with class counts."""
    y = length_class(lengths)
    rank = ranking_accuracy(scores_proba[:, LONG], lengths)
    return {
        "n": int(len(y)),
        "class_counts": [int(c) for c in np.bincount(y, minlength=3)],
        "class_accuracy": float((scores_proba.argmax(axis=1) == y).mean()) if len(y) else float("nan"),
        "ranking_accuracy": None if np.isnan(rank) else rank,  # None: no Short or no Long rows
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Train on the shared data, split by prompt, evaluate on the held-out prompts, export."""
    from predictors.length import data

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="artifact path, NAME.onnx (sidecar NAME.json)")
    ap.add_argument("--sources", default="castillo,sharegpt,gpteacher")
    ap.add_argument("--data-root", default=str(data.DATA_ROOT))
    ap.add_argument("--label", choices=data.LABELS, default="median")
    ap.add_argument("--test-frac", type=float, default=0.2)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--no-balance", action="store_true")
    ap.add_argument("--n-estimators", type=int, default=HYPERPARAMS["n_estimators"])
    a = ap.parse_args(argv)

    rows: list = []
    for s in a.sources.split(","):
        kw = {"label": a.label} if s.startswith("castillo") else {}
        rows += data.load_source(s, a.data_root, **kw)
    train, test = data.split_by_prompt(rows, a.test_frac, a.split_seed)
    tp, tl = data.arrays(train)
    t0 = time.perf_counter()
    model = train_lexical(tp, tl, balance=not a.no_balance, n_estimators=a.n_estimators)
    fit_s = time.perf_counter() - t0
    metrics = {"held_out": evaluate(model.predict_proba(extract_many(data.arrays(test)[0])), data.arrays(test)[1])}
    for src in sorted({r.source for r in test}):
        sub = [r for r in test if r.source == src]
        p, ell = data.arrays(sub)
        metrics[f"held_out_{src}"] = evaluate(model.predict_proba(extract_many(p)), ell)
    metrics["train"] = evaluate(model.predict_proba(extract_many(tp)), tl)
    prov = {"sources": a.sources, "data_root": a.data_root, "label": a.label,
            "split": {"by": "blake2b(prompt text, key=seed)", "test_frac": a.test_frac, "seed": a.split_seed},
            "n_train": len(train), "n_test": len(test), "balance": not a.no_balance, "fit_seconds": round(fit_s, 2)}
    out = save_lexical(model, a.out, train_prompts=tp, provenance=prov, metrics=metrics)
    print(json.dumps({"artifact": str(out), "metrics": metrics}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
