"""Shared helpers for the benchmark scripts: timing, markdown tables, repo-relative paths."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Callable, Sequence

REPO = Path(__file__).resolve().parents[1]


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls: these machines are shared and noisy."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)
