"""Accelerators the roofline execution-time model knows, by vendor datasheet.

``peak_tflops`` is the dense (no 2:4 sparsity) 16-bit tensor-core rate that a bf16 inference GEMM
can reach: bf16 inputs with fp32 accumulation, which is what cuBLAS and the attention kernels use.
``mem_gib`` is the capacity the driver reports (what vLLM's memory fraction multiplies), not the
decimal-GB marketing figure where the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GPUSpec:
    name: str
    peak_tflops: float  # dense bf16/fp16 tensor, fp32 accumulate
    mem_bw_gbps: float  # GB/s, decimal (1e9 bytes/s)
    mem_gib: float

    @property
    def peak_flops(self) -> float:
        return self.peak_tflops * 1e12

    @property
    def mem_bw_bytes(self) -> float:
        return self.mem_bw_gbps * 1e9

    @property
    def mem_bytes(self) -> float:
        return self.mem_gib * 2**30


GPUS: dict[str, GPUSpec] = {
    # Ada whitepaper, GeForce RTX 4090: fp16 tensor with fp16 accumulate 330.3 TFLOPS dense, with
    # fp32 accumulate 165.2; bf16 exists only with fp32 accumulate, at 165.2. GeForce halves the
    # fp32-accumulate rate and bf16 inference kernels accumulate in fp32: 165.2 is the usable peak.
    # 1008 GB/s GDDR6X; nvidia-smi reports 24564 MiB.
    "rtx4090": GPUSpec("NVIDIA GeForce RTX 4090", 165.2, 1008.0, 24.0),
    # A100 datasheet: 312 TFLOPS bf16 dense (624 sparse). 40GB SXM4: HBM2 1555 GB/s, 40960 MiB.
    "a100-40gb": GPUSpec("NVIDIA A100-SXM4-40GB", 312.0, 1555.0, 40.0),
    # 80GB SXM4: HBM2e 2039 GB/s, 81920 MiB. Vidur's A100 device config (80 GB) is this part.
    "a100-80gb": GPUSpec("NVIDIA A100-SXM4-80GB", 312.0, 2039.0, 80.0),
    # H100 SXM5 datasheet: 1979 TFLOPS bf16 "with sparsity", i.e. 989.4 dense; HBM3 3.35 TB/s;
    # nvidia-smi reports 81559 MiB.
    "h100-80gb": GPUSpec("NVIDIA H100 80GB HBM3 (SXM)", 989.4, 3350.0, 79.6),
    # H200 SXM datasheet: same compute die as H100 (989.4 dense), HBM3e 4.8 TB/s, "141 GB";
    # nvidia-smi reports 143771 MiB.
    "h200": GPUSpec("NVIDIA H200 (SXM)", 989.4, 4800.0, 140.4),
    # RTX PRO 5000 Blackwell datasheet gives 2064 "AI TOPS" (fp4 with sparsity), 1344 GB/s GDDR7 and
    # 72 GB. NVIDIA does not list a bf16 figure; fp4-sparse / 8 (÷2 sparsity, ÷2 fp8, ÷2 fp16) =
    # 258 TFLOPS dense, assuming the workstation part keeps full-rate fp32 accumulate (the RTX PRO
    # 6000's 4000 TOPS -> ~500 TFLOPS bf16 follows the same ratio).
    "rtx-pro-5000-72gb": GPUSpec("NVIDIA RTX PRO 5000 Blackwell 72GB", 258.0, 1344.0, 72.0),
    # Huawei publishes no detailed 910B datasheet; the figures most cited for the 910B3 in the Atlas
    # 800T A2 are 313 TFLOPS fp16 (cube unit), 64 GB HBM2e at 1.6 TB/s. Treat as approximate.
    "ascend-910b": GPUSpec("Huawei Ascend 910B3", 313.0, 1600.0, 64.0),
}


class UnknownNameError(KeyError, ValueError):
    """A registry miss: both bases, so callers may catch ValueError (CLI) or KeyError (lookup)."""

    def __str__(self) -> str:
        # KeyError would print the message quoted, as if it were the missing key.
        return str(self.args[0])


def get_gpu(name: str) -> GPUSpec:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise UnknownNameError(f"unknown GPU {name!r}; valid: {', '.join(sorted(GPUS))}") from None
