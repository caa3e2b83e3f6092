"""Assemble and run one simulation: engine limits, execution-time model, planner, workload.

The CLI, the benchmarks and the tests all go through ``SimSetup`` so a configuration means the
same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from ..core import PolicyConfig, build_planner
from .engine import SimEngine
from .exec_model import build_exec_model
from .hardware import get_gpu
from .metrics import SimResult, summarize
from .models import get_model, kv_capacity_blocks
from .workload import Workload, make_workload


@dataclass
class SimSetup:
    gpu: str = "rtx4090"
    model: str = "qwen3-8b"
    exec_model: str = "roofline"  # roofline | profile | vidur
    profile: Optional[str] = None
    noise: float = 0.03  # sigma of the lognormal noise on the charged ("true") iteration time
    token_budget: int = 256  # B_max, Sarathi's chunk_size
    max_num_seqs: int = 128  # S_max, Sarathi's default
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    num_blocks: Optional[int] = None  # default: derived from the GPU's memory
    seed: int = 0
    predictor_path: Optional[str] = None  # a trained latency artifact for LPRS (issue 3)

    def __post_init__(self) -> None:
        for name in ("token_budget", "max_num_seqs", "block_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"num_blocks: must be >= 1, got {self.num_blocks}")
        if self.noise < 0:
            raise ValueError(f"noise: must be >= 0, got {self.noise}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization: must be in (0, 1], got {self.gpu_memory_utilization}")

    def kv_blocks(self) -> int:
        if self.num_blocks is not None:
            return self.num_blocks
        return kv_capacity_blocks(
            get_gpu(self.gpu), get_model(self.model), self.block_size, self.gpu_memory_utilization
        )

    def predictor(self):
        """LPRS's batch-latency predictor: the trained artifact at ``predictor_path``, else the
        noise-free execution model, which against the noisy true time is good but never exact."""
        if self.predictor_path:
            from predictors.latency.artifact import load_predictor

            return load_predictor(self.predictor_path)
        return build_exec_model(self.exec_model, self.gpu, self.model, self.profile, 0.0, self.seed)

    def true_model(self):
        return build_exec_model(self.exec_model, self.gpu, self.model, self.profile, self.noise, self.seed)

    def engine(self, policy: PolicyConfig) -> SimEngine:
        planner = build_planner(policy, self.predictor() if policy.chunk == "lprs" else None)
        return SimEngine(
            planner, self.true_model(), self.token_budget, self.max_num_seqs, self.kv_blocks(), self.block_size
        )

    def describe(self) -> str:
        return (
            f"{get_model(self.model).name} on {get_gpu(self.gpu).name} ({self.exec_model} time model, "
            f"noise {self.noise:g}), chunk budget {self.token_budget}, max_num_seqs {self.max_num_seqs}, "
            f"{self.kv_blocks()} KV blocks of {self.block_size}"
        )


def run_policy(
    setup: SimSetup,
    policy: PolicyConfig,
    workload: Workload,
    progress: Optional[Callable[[int], None]] = None,
) -> SimResult:
    return setup.engine(policy).run(workload, policy.label(), progress)


def run_and_summarize(setup: SimSetup, policy: PolicyConfig, workload: Workload, **kw: Any) -> dict[str, Any]:
    result = run_policy(setup, policy, workload, kw.pop("progress", None))
    target = policy.lprs_target_ms if policy.chunk == "lprs" else None
    return summarize(result, target_ms=target, **kw)


__all__ = ["SimSetup", "make_workload", "replace", "run_and_summarize", "run_policy"]
