"""CDF plots of request latency, one line per policy (seed 001, Fig. 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .metrics import SimResult


def plot_cdfs(results: Sequence[SimResult], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for metric, title, fname in (
        (lambda r: r.finish - r.arrival, "Request E2E latency", "e2e_cdf.png"),
        (lambda r: r.first_token - r.arrival, "Time to first token", "ttft_cdf.png"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
        for r in results:
            x = np.sort(metric(r))
            ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=r.label)
        ax.set_xlabel("seconds")
        ax.set_ylabel("fraction of requests")
        ax.set_title(f"{title}: {results[0].workload}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
