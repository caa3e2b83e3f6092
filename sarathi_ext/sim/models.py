"""Decoder-only LLM shapes (from each model's Hugging Face config.json) and their memory cost."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sarathi_ext.sim.hardware import GPUSpec, UnknownNameError


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool
    dtype_bytes: int = 2
    qkv_bias: bool = False  # Qwen2 family
    qk_norm: bool = False  # Qwen3: RMSNorm over head_dim on q and k

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def layer_matmul_params(self) -> int:
        h = self.hidden_size
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        mlp = 3 * h * self.intermediate_size  # gate, up, down
        return attn + mlp

    @property
    def layer_params(self) -> int:
        extra = 2 * self.hidden_size  # input and post-attention RMSNorm
        if self.qkv_bias:
            extra += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            extra += 2 * self.head_dim
        return self.layer_matmul_params + extra

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_embeddings else self.lm_head_params
        return embed + self.num_layers * self.layer_params + self.hidden_size + head

    @property
    def weight_bytes(self) -> int:
        return self.num_params * self.dtype_bytes

    @property
    def linear_flops_per_token(self) -> int:
        # The lm_head counts even when tied: the tied table is still multiplied against.
        return 2 * (self.num_layers * self.layer_matmul_params + self.lm_head_params)

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.kv_dim * self.dtype_bytes


MODELS: dict[str, ModelSpec] = {
    # Qwen/Qwen3-8B config.json (8.19B params).
    "qwen3-8b": ModelSpec("Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, False, qk_norm=True),
    # meta-llama/Llama-3.1-8B config.json (8.03B); Llama-3-8B has the same shapes.
    "llama-3.1-8b": ModelSpec("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, False),
    "llama-3-8b": ModelSpec("Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, False),
    # deepseek-ai/DeepSeek-R1-Distill-Qwen-7B: Qwen2.5-7B shapes, q/k/v biases, untied (7.62B).
    "deepseek-r1-distill-qwen-7b": ModelSpec(
        "DeepSeek-R1-Distill-Qwen-7B", 28, 3584, 28, 4, 128, 18944, 152064, False, qkv_bias=True
    ),
    # meta-llama/Llama-2-7b-hf config.json (6.74B): multi-head attention, 32 KV heads.
    "llama-2-7b": ModelSpec("Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, False),
}


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name.lower()]
    except KeyError:
        valid = ", ".join(sorted(MODELS))
        raise UnknownNameError(f"unknown model {name!r}; valid: {valid}") from None


def kv_capacity_blocks(
    gpu: GPUSpec,
    model: ModelSpec,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.9,
    activation_reserve_gib: float = 1.0,
) -> int:
    """KV-cache blocks left after weights and activations, as vLLM/Sarathi size their block pool."""
    usable = gpu.mem_bytes * gpu_memory_utilization
    free = usable - model.weight_bytes - activation_reserve_gib * 2**30
    if free <= 0:
        raise ValueError(
            f"{model.name} weights ({model.weight_bytes / 2**30:.2f} GiB) plus "
            f"{activation_reserve_gib} GiB activations do not fit in {gpu_memory_utilization:.0%} "
            f"of {gpu.name}'s {gpu.mem_gib} GiB"
        )
    return math.floor(free / (model.kv_bytes_per_token * block_size))
