"""Per-request latency records and the summaries the papers report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

PERCENTILES = (50, 80, 90, 95, 99)


@dataclass
class SimResult:
    label: str
    workload: str
    arrival: np.ndarray
    first_scheduled: np.ndarray  # first admission: the end of scheduling delay
    first_token: np.ndarray  # end of the iteration that completed the prefill
    finish: np.ndarray
    prompt_lens: np.ndarray
    output_lens: np.ndarray
    preemptions: np.ndarray
    tbt: np.ndarray  # every gap between consecutive output tokens, seconds
    iteration_ms: np.ndarray  # charged ("true") time of every iteration
    planner: dict[str, Any] = field(default_factory=dict)  # PlannerStats + APC counters
    wall_s: float = 0.0


def distribution(x: np.ndarray) -> dict[str, float]:
    if len(x) == 0:
        return {k: float("nan") for k in ("mean", *(f"p{p}" for p in PERCENTILES), "max")}
    out = {"mean": float(np.mean(x))}
    for p, v in zip(PERCENTILES, np.percentile(x, PERCENTILES)):
        out[f"p{p}"] = float(v)
    out["max"] = float(np.max(x))
    return out


def jain_index(x: np.ndarray) -> float:
    # (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one request takes everything.
    x = np.asarray(x, dtype=np.float64)
    denom = len(x) * float(np.sum(x * x))
    return float(np.sum(x) ** 2 / denom) if denom > 0 else float("nan")


def summarize(res: SimResult, starvation_s: float = 60.0, target_ms: float | None = None) -> dict[str, Any]:
    e2e = res.finish - res.arrival  # L^req (Eq. 18)
    prefill_e2e = res.first_token - res.arrival  # L^pf (Eq. 19)
    ttft = prefill_e2e  # the prefill's last iteration samples the first token
    delay = res.first_scheduled - res.arrival
    per_token = e2e / res.output_lens  # PARS's per-token latency
    makespan = float(res.finish.max() - res.arrival.min())
    tokens_in, tokens_out = int(res.prompt_lens.sum()), int(res.output_lens.sum())
    summary: dict[str, Any] = {
        "policy": res.label,
        "workload": res.workload,
        "requests": len(e2e),
        "e2e_s": distribution(e2e),
        "ttft_s": distribution(ttft),
        "prefill_e2e_s": distribution(prefill_e2e),
        "tbt_ms": distribution(res.tbt * 1e3),
        "per_token_latency_s": distribution(per_token),
        "sched_delay_s": distribution(delay),
        "fairness": {
            "max_wait_s": float(delay.max()),
            "jain_norm_latency": jain_index(per_token),
            "starved": int(np.sum(delay > starvation_s)),
            "starvation_threshold_s": starvation_s,
        },
        "throughput": {
            "makespan_s": makespan,
            "req_per_s": len(e2e) / makespan if makespan > 0 else float("nan"),
            "output_tok_per_s": tokens_out / makespan if makespan > 0 else float("nan"),
            "total_tok_per_s": (tokens_in + tokens_out) / makespan if makespan > 0 else float("nan"),
        },
        "iterations": {
            "count": len(res.iteration_ms),
            "ms": distribution(res.iteration_ms),
        },
        "scheduling": res.planner,
        "preemptions": int(res.preemptions.sum()),
        "wall_s": res.wall_s,
    }
    if target_ms is not None and len(res.iteration_ms):
        summary["iterations"]["over_target_share"] = float(np.mean(res.iteration_ms > target_ms))
    return summary
