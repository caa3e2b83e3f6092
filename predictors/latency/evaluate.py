"""Scoring the latency predictor against three baselines on one test split (seed 001, Sec. 4.4.1).

``metrics`` gives Table 8's columns: MAE, RMSE, MAPE (Eq. 15-17), absolute-error percentiles, the
shares within 5 and 10 ms, plus the under-prediction rate (the error LPRS pays for: a chunk chosen
on an underestimate overruns T*). The baselines are fitted on the SAME train split that
``prepare(X, y, seed)`` gives the MLP and scored on the same test split:

  LinearBaseline           least squares on the 16 features (the bias column is the intercept)
  QuadraticTokensBaseline  a degree-2 polynomial in scheduled_tokens alone: the shape of
                           vLLM-Ascend's chunk-size latency fit, which sees no context or memory
  RandomForestBaseline     sklearn's RandomForestRegressor, 100 trees, fixed random_state:
                           Vidur's choice of runtime predictor

numpy only at import time; sklearn and torch are imported when a baseline or model needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .preprocess import SCHEDULED, Prepared, prepare

METRIC_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # key, report header, format
    ("mae_ms", "MAE (ms)", "{:.3f}"),
    ("rmse_ms", "RMSE (ms)", "{:.3f}"),
    ("mape_pct", "MAPE (%)", "{:.2f}"),
    ("p50_ms", "P50 (ms)", "{:.3f}"),
    ("p90_ms", "P90 (ms)", "{:.3f}"),
    ("p95_ms", "P95 (ms)", "{:.3f}"),
    ("p99_ms", "P99 (ms)", "{:.3f}"),
    ("within_5ms_pct", "<=5 ms (%)", "{:.2f}"),
    ("within_10ms_pct", "<=10 ms (%)", "{:.2f}"),
    ("under_pred_pct", "under-pred. (%)", "{:.2f}"),
)


def metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Accuracy of ``y_pred`` against ``y_true`` (ms). Percentiles of |error| use numpy's default
    linear interpolation; shares and MAPE are percentages, as in Table 8."""
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape or t.ndim != 1 or len(t) == 0:
        raise ValueError(f"need two equal, non-empty 1-D arrays, got {t.shape} and {p.shape}")
    err = p - t
    ae = np.abs(err)
    p50, p90, p95, p99 = np.percentile(ae, [50, 90, 95, 99])
    return {
        "mae_ms": float(ae.mean()),                              # Eq. 15
        "rmse_ms": float(np.sqrt(np.mean(err * err))),           # Eq. 16
        "mape_pct": float(100.0 * np.mean(ae / np.abs(t))),      # Eq. 17
        "p50_ms": float(p50), "p90_ms": float(p90), "p95_ms": float(p95), "p99_ms": float(p99),
        "within_5ms_pct": float(100.0 * np.mean(ae <= 5.0)),
        "within_10ms_pct": float(100.0 * np.mean(ae <= 10.0)),
        "under_pred_pct": float(100.0 * np.mean(p < t)),
        "n": int(len(t)),
    }


class LinearBaseline:
    name = "Linear (16 features, least squares)"

    def fit(self, X: np.ndarray, y: np.ndarray) -> "LinearBaseline":
        X = np.asarray(X, dtype=np.float64)
        # Column scaling only conditions the solve (prefill_interaction reaches ~1e8 while bias
        # is 1); it does not change the least-squares fit. All-zero columns keep scale 1 and get
        # the minimum-norm coefficient 0.
        self.scale = np.where(np.abs(X).max(axis=0) > 0, np.abs(X).max(axis=0), 1.0)
        self.coef = np.linalg.lstsq(X / self.scale, np.asarray(y, dtype=np.float64), rcond=None)[0]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) / self.scale) @ self.coef


class QuadraticTokensBaseline:
    name = "Quadratic in scheduled_tokens"

    def fit(self, X: np.ndarray, y: np.ndarray) -> "QuadraticTokensBaseline":
        self.poly = np.polyfit(np.asarray(X, dtype=np.float64)[:, SCHEDULED], y, 2)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.polyval(self.poly, np.asarray(X, dtype=np.float64)[:, SCHEDULED])


class RandomForestBaseline:
    name = "Random forest (100 trees)"

    def __init__(self, n_estimators: int = 100, random_state: int = 0) -> None:
        self.n_estimators = n_estimators
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> "RandomForestBaseline":
        from sklearn.ensemble import RandomForestRegressor

        self.model = RandomForestRegressor(n_estimators=self.n_estimators,
                                           random_state=self.random_state, n_jobs=-1)
        self.model.fit(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(np.asarray(X, dtype=np.float64))


BASELINES = (LinearBaseline, QuadraticTokensBaseline, RandomForestBaseline)


def _as_predictor(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    """An artifact path, an in-memory LatencyMLP, or any ``[N, 16] -> ms`` callable."""
    if isinstance(model, (str, Path)):
        from .artifact import load_predictor

        return load_predictor(model, device="cpu")
    if hasattr(model, "predict_numpy"):
        return model.predict_numpy
    if callable(model):
        return model
    raise TypeError(f"expected an artifact path, a LatencyMLP or a predictor callable, got {type(model).__name__}")


def compare(X: np.ndarray, y: np.ndarray, model_path_or_model: Any, seed: int, *,
            baselines: bool = True, prepared: Optional[Prepared] = None,
            rf_trees: int = 100) -> list[dict[str, Any]]:
    """One row per model (``{"model": name, **metrics}``): the MLP first, then the baselines,
    all scored on ``prepare(X, y, seed)``'s test split, baselines fitted on its train split.
    Use the training seed (the sidecar's ``hyperparameters.seed``) to score on held-out rows."""
    data = prepared if prepared is not None else prepare(X, y, seed)
    predict = _as_predictor(model_path_or_model)
    rows = [{"model": "MLP (Eq. 5)", **metrics(data.y_test, predict(data.X_test))}]
    if baselines:
        for cls in BASELINES:
            b = cls(n_estimators=rf_trees) if cls is RandomForestBaseline else cls()
            try:
                b.fit(data.X_train, data.y_train)
            except ImportError as e:  # a lent GPU machine may lack scikit-learn: say so, go on
                rows.append({"model": f"{b.name}: not run ({e.name} is not installed)",
                             **{k: float("nan") for k, _, _ in METRIC_COLUMNS}})
                continue
            rows.append({"model": b.name, **metrics(data.y_test, b.predict(data.X_test))})
    return rows


def format_report(results: Sequence[dict[str, Any]]) -> str:
    """A markdown table: one row per model, Table 8's columns plus the under-prediction rate."""
    header = ["Model", *(h for _, h, _ in METRIC_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [str(r["model"]), *(fmt.format(r[k]) for k, _, fmt in METRIC_COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    n = results[0].get("n") if results else None
    if n is not None:
        lines.append(f"\n{n} test rows.")
    return "\n".join(lines)


def evaluate_from_csv(artifact_path: str | Path, csv_paths=None, seed: Optional[int] = None,
                      baselines: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Score an artifact on the test split of profile CSV(s), with the baselines: ``(rows,
    report)``. ``csv_paths`` (one path or a list) defaults to the profiles recorded in the
    sidecar, ``seed`` to the training seed, so that a model is scored only on rows it never saw;
    the report says whether that holds (same files by sha256, same order, same seed)."""
    from .artifact import read_sidecar
    from .train import read_profiles

    meta = read_sidecar(artifact_path)
    trained = meta.get("provenance", {}).get("profiles") or []
    if csv_paths is None:
        if not trained:
            raise ValueError(f"{artifact_path}: the sidecar records no training profiles; pass the CSV(s)")
        csv_paths = [e["path"] for e in trained]
    train_seed = meta.get("hyperparameters", {}).get("seed")
    if seed is None:
        seed = int(train_seed if train_seed is not None else 0)
    X, y, provenance = read_profiles(csv_paths)
    rows = compare(X, y, artifact_path, seed, baselines=baselines)
    same = bool(trained) and [e["sha256"] for e in provenance["profiles"]] == [e.get("sha256") for e in trained]
    names = ", ".join(e["path"] for e in provenance["profiles"])
    if same and seed == train_seed:
        why = "the artifact was trained on these profiles with this seed, so these rows are held out."
    elif same:
        why = (f"WARNING: the artifact was trained on these profiles with seed {train_seed}; with "
               f"seed {seed} the test split overlaps its training rows.")
    else:
        why = "the artifact was trained on other profiles (sha256 differs or is unrecorded)."
    note = f"Test split of {names} (seed {seed}); {why}"
    return rows, format_report(rows) + "\n" + note
