"""Training the latency predictor: AdamW with Table 7's defaults on Eq. 5's loss.

Model selection: the checkpoint with the lowest validation loss, where the validation loss is
Eq. 5's asymmetric Huber with unit weights. It keeps the under-prediction penalty (selecting by
MAE would favour a symmetric fit and undo it), and drops the bucket weights, which exist to steer
gradients toward rare buckets during training; the validation split is scored per sample, as the
scheduler meets batches. Validation MAE is logged beside it.

No learning-rate schedule: Table 7 gives none, and the best-validation checkpoint absorbs the
late-epoch noise a constant rate leaves. Deterministic for a seed on CPU: the data preparation is
seeded, and the initialisation, dropout and shuffling use a forked torch RNG seeded with ``seed``
(the caller's global RNG state is left untouched).
"""

from __future__ import annotations

import copy
import hashlib
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np

from .preprocess import Prepared, prepare

ProgressFn = Callable[[dict], None]


def train(X: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = 300, batch_size: int = 256,
          lr: float = 2e-3, weight_decay: float = 1e-3, under_ratio: float = 2.0, delta: float = 1.0,
          progress: Optional[ProgressFn] = None, *, hidden_sizes: Optional[Sequence[int]] = None,
          dropout: Optional[float] = None, prepared: Optional[Prepared] = None,
          threads: Optional[int] = 1):
    """Fit a LatencyMLP on ``prepare(X, y, seed)``'s train split; returns ``(model, history)``.

    ``model`` is in eval mode, holding the best-validation weights. ``history`` is a JSON-able
    dict: ``epochs`` (one record per epoch: epoch, train_loss, val_loss, val_mae_ms, seconds),
    ``best_epoch``, ``best_val_loss``, ``hyperparameters`` and ``data`` (split sizes, bucket cap).
    ``progress``, if given, receives each epoch record (plus ``epochs_total`` and ``best_epoch``).
    Pass ``prepared`` to reuse splits already made from (X, y, seed). ``threads``: torch's
    intra-op threads while training (restored after; None leaves them alone). One by default: a
    (128, 64, 32) MLP on 256-row batches gains nothing from more, and on a shared machine with
    fewer free cores than threads each step can stall 50-100x on OpenMP barriers (measured here:
    ~1.8 ms per step with one thread, ~110 ms with two while another process held a core).
    """
    import torch

    from .model import DROPOUT, HIDDEN_SIZES

    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    hidden = tuple(hidden_sizes) if hidden_sizes is not None else HIDDEN_SIZES
    drop = DROPOUT if dropout is None else float(dropout)
    data = prepared if prepared is not None else prepare(X, y, seed)
    hp = {"seed": int(seed), "epochs": int(epochs), "batch_size": int(batch_size), "lr": float(lr),
          "weight_decay": float(weight_decay), "under_ratio": float(under_ratio),
          "delta": float(delta), "hidden_sizes": list(hidden), "dropout": drop,
          "optimizer": "AdamW", "checkpoint": "min validation loss (Eq. 5, unit weights)"}

    records: list[dict] = []
    saved_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        model, best_state, best_epoch, best_loss = _fit(
            data, hidden, drop, seed, epochs, batch_size, lr, weight_decay, under_ratio,
            delta, progress, records)
    finally:
        torch.set_num_threads(saved_threads)
    model.load_state_dict(best_state)
    model.eval()
    history = {"epochs": records, "best_epoch": best_epoch, "best_val_loss": best_loss,
               "hyperparameters": hp, "data": data.stats}
    return model, history


def _fit(data, hidden, drop, seed, epochs, batch_size, lr, weight_decay, under_ratio, delta,
         progress, records):
    """The training loop of ``train``: returns (model, best state_dict, best epoch, its val loss)."""
    import torch

    from .model import LatencyMLP, asymmetric_huber

    xt = torch.from_numpy(data.X_train.astype(np.float32))
    yt = torch.from_numpy(data.y_train.astype(np.float32))
    wt = torch.from_numpy(data.w_train.astype(np.float32))
    xv = torch.from_numpy(data.X_val.astype(np.float32))
    yv = torch.from_numpy(data.y_val.astype(np.float32))
    n = xt.shape[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = LatencyMLP(hidden, drop)
        model.set_normalisation(data.X_train, data.y_train)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        best_loss, best_epoch, best_state = float("inf"), -1, None
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            model.train()
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = perm[start:start + batch_size]
                loss = asymmetric_huber(model(xt[idx]), yt[idx], wt[idx], delta, under_ratio)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach().item() * len(idx)
            model.eval()
            with torch.no_grad():
                pv = model(xv)
                val_loss = float(asymmetric_huber(pv, yv, None, delta, under_ratio))
                val_mae = float((pv - yv).abs().mean())
            if val_loss < best_loss:
                best_loss, best_epoch = val_loss, epoch
                best_state = copy.deepcopy(model.state_dict())
            rec = {"epoch": epoch, "train_loss": total / n, "val_loss": val_loss,
                   "val_mae_ms": val_mae, "seconds": time.perf_counter() - t0}
            records.append(rec)
            if progress is not None:
                progress(dict(rec, epochs_total=epochs, best_epoch=best_epoch))
    return model, best_state, best_epoch, best_loss


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


CsvPaths = Union[str, Path, Sequence[Union[str, Path]]]


def _as_paths(csv_paths: CsvPaths) -> list[Path]:
    if isinstance(csv_paths, (str, Path)):
        return [Path(csv_paths)]
    paths = [Path(p) for p in csv_paths]
    if not paths:
        raise ValueError("no profile CSV given")
    return paths


def read_profiles(csv_paths: CsvPaths) -> tuple[np.ndarray, np.ndarray, dict]:
    """Rows of one or more profile CSVs, concatenated in the order given, and their provenance:
    ``profiles`` (path, sha256, rows, the .meta.json of each), plus every .meta.json key on which
    all profiles agree (source, device, model, ...) lifted to the top level."""
    from .schema import read_profile

    Xs, ys, entries = [], [], []
    for path in _as_paths(csv_paths):
        X, y, meta = read_profile(path)
        Xs.append(X)
        ys.append(y)
        meta = {k: v for k, v in meta.items() if k not in ("columns", "rows")}
        entries.append({"path": str(path), "sha256": _sha256(path), "rows": int(len(y)), "meta": meta})
    shared = dict(entries[0]["meta"])
    for e in entries[1:]:
        shared = {k: v for k, v in shared.items() if k in e["meta"] and e["meta"][k] == v}
    provenance = {**shared, "profiles": entries, "rows": int(sum(e["rows"] for e in entries))}
    return np.concatenate(Xs), np.concatenate(ys), provenance


def train_from_csv(csv_paths: CsvPaths, artifact_path: str | Path, seed: int = 0,
                   epochs: int = 300, batch_size: int = 256, lr: float = 2e-3,
                   weight_decay: float = 1e-3, under_ratio: float = 2.0, delta: float = 1.0,
                   progress: Optional[ProgressFn] = None, baselines: bool = True) -> dict:
    """Profile CSV(s) -> trained artifact (``artifact_path`` + ``.json``). The sidecar carries the
    profiles' provenance (``read_profiles``), the hyperparameters and the test-split metrics of
    the MLP and (``baselines``) of the three baselines. Returns ``{"artifact", "history",
    "results", "report"}`` (results/report as ``evaluate.compare``/``format_report``)."""
    from .artifact import export
    from .evaluate import compare, format_report

    X, y, provenance = read_profiles(csv_paths)
    data = prepare(X, y, seed)
    model, history = train(X, y, seed, epochs, batch_size, lr, weight_decay, under_ratio, delta,
                           progress, prepared=data)
    results = compare(X, y, model, seed, baselines=baselines, prepared=data)
    metrics = {"test": {k: v for k, v in results[0].items() if k != "model"},
               "baselines": {r["model"]: {k: v for k, v in r.items() if k != "model"}
                             for r in results[1:]},
               "split": data.stats, "best_epoch": history["best_epoch"],
               "best_val_loss": history["best_val_loss"]}
    export(model, artifact_path, provenance, metrics, history["hyperparameters"])
    return {"artifact": Path(artifact_path), "history": history, "results": results,
            "report": format_report(results)}
