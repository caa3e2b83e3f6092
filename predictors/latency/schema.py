"""The profile schema: one row per engine iteration, the 16 features then the measured latency.

Every source writes it (the simulator, the PyTorch runner, the Sarathi and vLLM hooks), and the
trainer and the simulator's ``profile`` time model read it. Provenance (source, device, model
shape) goes to a JSON file beside the CSV, ``<name>.meta.json``, so the CSV stays a plain table.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from sarathi_ext.core.features import FEATURE_NAMES, NUM_FEATURES

LATENCY_COLUMN = "latency_ms"
PROFILE_COLUMNS: tuple[str, ...] = (*FEATURE_NAMES, LATENCY_COLUMN)


class ProfileError(ValueError):
    """A malformed profile; the message names the file and the row."""


def meta_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.stem + ".meta.json")


class ProfileWriter:
    """Streams rows to ``path`` through a temporary file, renamed into place on ``close``, so a
    crashed or interrupted run never leaves a half-written profile behind."""

    def __init__(self, path: str | Path, provenance: Optional[dict[str, Any]] = None) -> None:
        self.path = Path(path)
        self.provenance = dict(provenance or {})
        self._tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        self._fh = self._tmp.open("w", newline="")
        self._csv = csv.writer(self._fh)
        self._csv.writerow(PROFILE_COLUMNS)
        self.rows = 0

    def add(self, features: Sequence[float], latency_ms: float) -> None:
        if len(features) != NUM_FEATURES:
            raise ProfileError(f"{self.path}: a row needs {NUM_FEATURES} features, got {len(features)}")
        self._csv.writerow([*(f"{float(v):.6g}" for v in features), f"{float(latency_ms):.6g}"])
        self.rows += 1

    def add_many(self, features: np.ndarray, latency_ms: np.ndarray) -> None:
        for x, y in zip(np.asarray(features), np.asarray(latency_ms)):
            self.add(x, y)

    def close(self) -> Path:
        self._fh.close()
        os.replace(self._tmp, self.path)
        meta = dict(self.provenance, rows=self.rows, columns=list(PROFILE_COLUMNS))
        meta_path(self.path).write_text(json.dumps(meta, indent=2) + "\n")
        return self.path

    def abort(self) -> None:
        self._fh.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> "ProfileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_profile(path: str | Path, features: np.ndarray, latency_ms: np.ndarray,
                  provenance: Optional[dict[str, Any]] = None) -> Path:
    with ProfileWriter(path, provenance) as w:
        w.add_many(features, latency_ms)
    return Path(path)


def read_profile(path: str | Path) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(features [N, 16], latency_ms [N], provenance) from a profile CSV, strictly checked:
    exactly the schema's columns, in order; every value finite; latency positive."""
    path = Path(path)
    try:
        fh = path.open(newline="")
    except OSError as e:
        raise ProfileError(f"{path}: cannot open ({e.strerror})") from None
    rows: list[list[float]] = []
    with fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        if not header:
            raise ProfileError(f"{path}: empty file, expected the profile header on line 1")
        missing = [c for c in PROFILE_COLUMNS if c not in header]
        extra = [c for c in header if c not in PROFILE_COLUMNS]
        if missing or extra:
            parts = ([f"missing column(s) {', '.join(missing)}"] if missing else []) + (
                [f"unexpected column(s) {', '.join(extra)}"] if extra else [])
            raise ProfileError(f"{path}, line 1: {'; '.join(parts)}")
        if tuple(header) != PROFILE_COLUMNS:
            raise ProfileError(f"{path}, line 1: columns out of order; expected {','.join(PROFILE_COLUMNS)}")
        for fields in reader:
            if not fields or all(not f.strip() for f in fields):
                continue
            line = reader.line_num
            if len(fields) != len(PROFILE_COLUMNS):
                raise ProfileError(f"{path}, line {line}: {len(fields)} fields, expected {len(PROFILE_COLUMNS)}")
            row = []
            for name, raw in zip(PROFILE_COLUMNS, fields):
                try:
                    v = float(raw)
                except ValueError:
                    v = math.nan
                if not math.isfinite(v):
                    raise ProfileError(f"{path}, line {line}: column {name!r} is {raw!r}, not a finite number")
                row.append(v)
            if row[-1] <= 0:
                raise ProfileError(f"{path}, line {line}: {LATENCY_COLUMN} must be > 0, got {fields[-1]!r}")
            rows.append(row)
    if not rows:
        raise ProfileError(f"{path}: no data rows")
    arr = np.asarray(rows, dtype=np.float64)
    meta = {}
    if meta_path(path).is_file():
        try:
            meta = json.loads(meta_path(path).read_text())
        except ValueError:
            raise ProfileError(f"{meta_path(path)}: not valid JSON") from None
    return arr[:, :NUM_FEATURES], arr[:, NUM_FEATURES], meta
