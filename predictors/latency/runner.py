"""A real PyTorch batch runner: profiling source (b) of the batch-latency predictor.

``TorchBatchRunner`` is a decoder-only transformer of the Llama / Qwen2 / Qwen3 family built from
a ``ModelSpec`` with random weights (nothing is downloaded). It executes the iterations a
chunked-prefill scheduler plans -- any mix of decodes and prefill chunks -- against a real KV
cache, on whatever device is present, and measures each iteration's wall time. ``SimEngine``
drives it as its executor (``execute_plan`` / ``release`` / ``memory_state``), so a profile is
recorded by running the project's own token-budget scheduler over a workload, as seed 001 §3.2.1
profiles its predictor's training set.

One iteration, as a serving engine runs it:

* all linear layers (QKV, O, gate/up, down) run once over the flattened token batch
  ``[T, hidden]``, T = decode tokens + prefill chunk tokens; decodes come first, then the chunks
  in plan order;
* every layer: RMSNorm -> fused QKV projection (GQA, optional q/k/v bias for Qwen2) -> optional
  per-head RMSNorm on q and k (Qwen3) -> RoPE -> KV-cache write -> attention -> O projection ->
  residual -> RMSNorm -> gated SiLU MLP -> residual;
* final RMSNorm and the LM head only on each sequence's last token, then greedy argmax.

KV cache: one pooled tensor per K and V, ``[num_layers, max_seqs, num_kv_heads, max_context,
head_dim]`` (heads before positions, so a sequence's cache is a strided SDPA operand as it is and
the decode gather copies whole rows), zero-filled once at construction, as vLLM and Sarathi preallocate theirs. A sequence
takes a slot on its first prefill chunk and gives it back on ``release``. All new K/V rows of an
iteration are written with one indexed store per layer.

Attention uses ``torch.nn.functional.scaled_dot_product_attention``:

* all decodes of the iteration in ONE call: their caches are gathered padded to the longest
  decode context and masked per sequence (a decode at context C writes position C and attends to
  [0, C]). This keeps the per-iteration Python/launch cost independent of the number of decodes;
  the price is that decode attention reads ``n * max_context_in_batch`` rather than the ``sum``
  a paged kernel reads;
* one call per prefill chunk, directly on a view of its cache slot: the chunk at start s of
  length c attends, for its i-th token, to positions [0, s + i].

Grouped-query attention folds the q heads of one KV group into the query-length axis, so K and V
are never repeated and the same code runs on every SDPA backend.

Token ids are a fixed pseudo-random function of (request, position), so a prompt gives the same
result whether it is prefilled in one chunk or several, and after a recompute preemption.
"""

from __future__ import annotations

import contextlib
import math
import time
import zlib
from dataclasses import replace
from typing import Any, Hashable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from sarathi_ext.core.features import MemoryState
from sarathi_ext.core.plan import PrefillChunk, RoundPlan
from sarathi_ext.sim.models import ModelSpec

_TOKEN_TABLE = 1 << 16  # length of the pseudo-random token stream sequences read from
_MB = float(1 << 20)

# CPU-friendly shape of the same architecture (see scaled_spec).
TINY_DIMS = dict(hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768, vocab=4096)


def scaled_spec(
    spec: ModelSpec,
    hidden: int = TINY_DIMS["hidden"],
    layers: int = TINY_DIMS["layers"],
    heads: int = TINY_DIMS["heads"],
    kv_heads: int = TINY_DIMS["kv_heads"],
    head_dim: int = TINY_DIMS["head_dim"],
    intermediate: int = TINY_DIMS["intermediate"],
    vocab: int = TINY_DIMS["vocab"],
    name: Optional[str] = None,
) -> ModelSpec:
    """A small ModelSpec of ``spec``'s architecture (same qk_norm, qkv_bias, tying), for CPUs."""
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    return replace(
        spec,
        name=name or f"{spec.name}-scaled",
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
    )


def architecture(spec: ModelSpec) -> str:
    if spec.qk_norm:
        return "qwen3"
    if spec.qkv_bias:
        return "qwen2"
    return "llama"


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
    return dev


def _resolve_dtype(dtype: Any, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
             "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32,
             "fp64": torch.float64, "float64": torch.float64}
    try:
        return names[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"dtype: unknown {dtype!r}; choose from {sorted(names)}") from None


if hasattr(F, "rms_norm"):
    def _rms(x: torch.Tensor, w: Optional[torch.Tensor], eps: float) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)
else:  # torch < 2.4
    def _rms(x: torch.Tensor, w: Optional[torch.Tensor], eps: float) -> torch.Tensor:
        xf = x.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
        return y if w is None else y * w


def _rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    # HF's rotate_half convention: pairs (i, i + d/2). x [T, heads, d]; cos [T, 1, d] with halves
    # duplicated; sin_signed [T, 1, d] = (-sin, sin), so x*cos + (x2, x1)*sin_signed is
    # (x1 cos - x2 sin, x2 cos + x1 sin).
    half = x.shape[-1] // 2
    return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * sin_signed


class TorchBatchRunner:
    """Executes planned iterations of a random-weight decoder-only transformer; see module doc.

    Engine interface: ``execute_plan(plan) -> ms``, ``release(req_id)``, ``memory_state()``.
    Set ``capture_logits = True`` to keep ``last_logits`` ({req_id: float64 CPU tensor [vocab]}
    of each sequence's last token) after every iteration; ``last_tokens`` always holds the greedy
    token ids (on the device, in decode-then-prefill order) of the latest iteration.
    """

    def __init__(
        self,
        spec: ModelSpec,
        device: str | torch.device = "auto",
        dtype: Any = None,
        max_context: int = 2048,
        max_seqs: int = 64,
        seed: int = 0,
        rope_theta: float = 1_000_000.0,
        rms_eps: float = 1e-6,
        capture_logits: bool = False,
        cpu_threads: Optional[int] = None,
    ) -> None:
        if spec.num_heads % spec.num_kv_heads:
            raise ValueError(f"{spec.name}: num_heads {spec.num_heads} not a multiple of num_kv_heads {spec.num_kv_heads}")
        if spec.head_dim % 2:
            raise ValueError(f"{spec.name}: head_dim must be even for RoPE, got {spec.head_dim}")
        if max_context < 2 or max_seqs < 1:
            raise ValueError(f"max_context must be >= 2 and max_seqs >= 1, got {max_context}, {max_seqs}")
        self.spec = spec
        self.device = resolve_device(device)
        self.dtype = _resolve_dtype(dtype, self.device)
        self.max_context = int(max_context)
        self.max_seqs = int(max_seqs)
        self.seed = int(seed)
        self.rope_theta = float(rope_theta)
        self.eps = float(rms_eps)
        self.capture_logits = capture_logits
        self.last_logits: dict[Hashable, torch.Tensor] = {}
        self.last_tokens: Optional[torch.Tensor] = None
        self.iterations = 0
        self._cuda = self.device.type == "cuda"
        self._group = spec.num_heads // spec.num_kv_heads
        if cpu_threads and self.device.type == "cpu":
            # Process-wide. One thread gives the steadiest CPU timings on shared machines, where
            # OpenMP threads that spin against other processes make iteration times erratic.
            torch.set_num_threads(int(cpu_threads))

        dev, dt = self.device, self.dtype
        kv_bytes = 2 * spec.num_layers * self.max_seqs * self.max_context * spec.kv_dim * torch.finfo(dt).bits // 8
        if self._cuda:
            free, _ = torch.cuda.mem_get_info(dev)
            need = kv_bytes + spec.num_params * torch.finfo(dt).bits // 8
            if need > 0.95 * free:
                raise RuntimeError(
                    f"{spec.name}: weights plus a KV pool of {self.max_seqs} x {self.max_context} tokens need "
                    f"{need / 2**30:.1f} GiB but {free / 2**30:.1f} GiB are free; lower max_seqs or max_context"
                )
        with torch.inference_mode():
            self._init_weights()
            cache_shape = (spec.num_layers, self.max_seqs, spec.num_kv_heads, self.max_context, spec.head_dim)
            self.k_cache = torch.zeros(cache_shape, device=dev, dtype=dt)
            self.v_cache = torch.zeros(cache_shape, device=dev, dtype=dt)
            inv = 1.0 / (self.rope_theta ** (torch.arange(0, spec.head_dim, 2, dtype=torch.float64) / spec.head_dim))
            ang = torch.outer(torch.arange(self.max_context, dtype=torch.float64), inv)
            self._cos = torch.cat((ang.cos(), ang.cos()), dim=-1).to(dev, dt)
            self._sin = torch.cat((-ang.sin(), ang.sin()), dim=-1).to(dev, dt)
        rng = np.random.default_rng(self.seed)
        self._tokens = rng.integers(0, spec.vocab_size, size=_TOKEN_TABLE, dtype=np.int64)
        self._slots: dict[Hashable, int] = {}  # req_id -> cache slot
        self._lens: dict[Hashable, int] = {}  # req_id -> KV positions written
        self._free = list(range(self.max_seqs - 1, -1, -1))  # pop() hands out slot 0 first
        self._gather: Optional[torch.Tensor] = None  # see _gather_buffers
        self._backends = None
        if self._cuda:
            try:  # torch >= 2.3
                from torch.nn.attention import SDPBackend

                # Masked SDPA runs on the memory-efficient kernel; cuDNN attention is left out
                # because some torch releases raise on its stride limits instead of falling back.
                self._backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
            except ImportError:
                pass

    # ----------------------------------------------------------------------------- weights
    def _init_weights(self) -> None:
        s, dev, dt = self.spec, self.device, self.dtype
        g = torch.Generator(device=dev)
        g.manual_seed(self.seed)

        def rand(*shape: int, std: float) -> torch.Tensor:
            return torch.randn(shape, generator=g, device=dev, dtype=dt).mul_(std)

        def norm(n: int) -> torch.Tensor:  # learned norm weights are not all 1
            return rand(n, std=0.1).add_(1.0)

        h, inter = s.hidden_size, s.intermediate_size
        qkv_out = s.q_dim + 2 * s.kv_dim
        self.embed = rand(s.vocab_size, h, std=1.0)
        self.layers = []
        for _ in range(s.num_layers):
            w = dict(
                ln_in=norm(h),
                qkv=rand(qkv_out, h, std=1 / math.sqrt(h)),
                qkv_b=rand(qkv_out, std=0.02) if s.qkv_bias else None,
                q_norm=norm(s.head_dim) if s.qk_norm else None,
                k_norm=norm(s.head_dim) if s.qk_norm else None,
                qk_norm=None,
                o=rand(h, s.q_dim, std=1 / math.sqrt(s.q_dim)),
                ln_post=norm(h),
                gate_up=rand(2 * inter, h, std=1 / math.sqrt(h)),
                down=rand(h, inter, std=1 / math.sqrt(inter)),
            )
            if s.qk_norm:  # q and k heads are normalized in one pass: per-head weights [H + KV, D]
                w["qk_norm"] = torch.cat((w["q_norm"].expand(s.num_heads, -1), w["k_norm"].expand(s.num_kv_heads, -1)))
            self.layers.append(w)
        self.final_norm = norm(h)
        self.lm_head = self.embed if s.tie_embeddings else rand(s.vocab_size, h, std=1 / math.sqrt(h))

    # ----------------------------------------------------------------------------- engine API
    @property
    def live_sequences(self) -> int:
        """Sequences currently holding a KV-cache slot."""
        return len(self._slots)

    def release(self, req_id: Hashable) -> None:
        """Free ``req_id``'s KV-cache slot (finished or preempted). Unknown ids are ignored."""
        slot = self._slots.pop(req_id, None)
        if slot is not None:
            self._free.append(slot)
            del self._lens[req_id]

    def memory_state(self) -> MemoryState:
        """Device memory readings in MB (features 7-10); zeros on the CPU."""
        if not self._cuda:
            return MemoryState()
        free, total = torch.cuda.mem_get_info(self.device)
        return MemoryState(
            gpu_mem_used_mb=(total - free) / _MB,
            gpu_mem_free_mb=free / _MB,
            cuda_allocated_mb=torch.cuda.memory_allocated(self.device) / _MB,
            cuda_reserved_mb=torch.cuda.memory_reserved(self.device) / _MB,
        )

    def execute_plan(self, plan: RoundPlan) -> float:
        """Run the iteration ``plan`` describes and return its wall time in milliseconds."""
        for rid in plan.preempted:  # the engine releases these too; release is idempotent
            self.release(rid)
        if plan.is_empty():
            raise ValueError("execute_plan: empty plan")
        if len(plan.decode_contexts) != len(plan.decodes):
            raise ValueError(
                f"execute_plan: {len(plan.decodes)} decodes but {len(plan.decode_contexts)} decode_contexts"
            )
        self._bind(plan)
        if self._cuda:
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        with torch.inference_mode(), self._sdpa_backends():
            logits_rows = self._forward(plan)
        if self._cuda:
            torch.cuda.synchronize(self.device)
        ms = (time.perf_counter() - t0) * 1e3
        self.iterations += 1
        if self.capture_logits:
            rows = logits_rows.double().cpu()
            ids = [*plan.decodes, *(p.req_id for p in plan.prefills)]
            self.last_logits = {rid: rows[i] for i, rid in enumerate(ids)}
        return ms

    def warmup(self, n: int = 3, chunk: int = 256) -> None:
        """Run ``n`` throwaway iterations (prefill, then decode + prefill, then decodes) so that
        first-call costs (kernel selection, allocator growth, thread pools) stay out of profiles."""
        n = max(0, min(n, self.max_context - 1))
        chunk = max(1, min(chunk, self.max_context - n))  # last decode writes chunk + n - 2
        a, b = ("__warmup_a__",), ("__warmup_b__",)
        use_b = self.max_seqs - self.live_sequences >= 2
        for i in range(n):
            plan = RoundPlan()
            if i == 0:
                plan.prefills.append(PrefillChunk(a, 0, chunk, True))
            else:
                plan.decodes.append(a)
                plan.decode_contexts.append(self._lens[a])
                if use_b:
                    if b not in self._slots:
                        plan.prefills.append(PrefillChunk(b, 0, chunk, True))
                    else:
                        plan.decodes.append(b)
                        plan.decode_contexts.append(self._lens[b])
            self.execute_plan(plan)
        self.release(a)
        self.release(b)
        self.iterations -= n

    def describe(self) -> dict[str, Any]:
        """Provenance for a profile's sidecar."""
        s = self.spec
        d: dict[str, Any] = {
            "source": "torch",
            "architecture": architecture(s),
            "model": s.name,
            "num_layers": s.num_layers,
            "hidden_size": s.hidden_size,
            "num_heads": s.num_heads,
            "num_kv_heads": s.num_kv_heads,
            "head_dim": s.head_dim,
            "intermediate_size": s.intermediate_size,
            "vocab_size": s.vocab_size,
            "tie_embeddings": s.tie_embeddings,
            "qkv_bias": s.qkv_bias,
            "qk_norm": s.qk_norm,
            "num_params": s.num_params,
            "weights": f"random (seed {self.seed})",
            "device": str(self.device),
            "dtype": str(self.dtype).replace("torch.", ""),
            "torch": torch.__version__,
            "max_context": self.max_context,
            "max_seqs": self.max_seqs,
            "kv_cache": "pooled [layers, max_seqs, kv_heads, max_context, head_dim], zero-filled",
            "attention": "sdpa: one padded masked call for all decodes, one per prefill chunk",
            "timing": "cuda.synchronize + perf_counter" if self._cuda else "perf_counter",
        }
        if self._cuda:
            d["gpu"] = torch.cuda.get_device_name(self.device)
            d["cuda"] = torch.version.cuda
        else:
            d["cpu_threads"] = torch.get_num_threads()
        return d

    def token_ids(self, req_id: Hashable, start: int, count: int) -> np.ndarray:
        """The token ids the runner feeds ``req_id`` at positions [start, start + count)."""
        pos = np.arange(start, start + count, dtype=np.int64)
        return self._tokens[(pos + self._offset(req_id)) % _TOKEN_TABLE]

    # ----------------------------------------------------------------------------- internals
    @staticmethod
    def _offset(rid: Hashable) -> int:
        # Where req_id's tokens start in the table: stable across processes (unlike hash()).
        return zlib.crc32(repr(rid).encode()) % _TOKEN_TABLE

    def _bind(self, plan: RoundPlan) -> None:
        """Check the plan against the cache (positions must continue what is written) and give
        new sequences a slot. Runs before the timer: the block manager's work, not the model's."""
        for rid, ctx in zip(plan.decodes, plan.decode_contexts):
            have = self._lens.get(rid)
            if have is None:
                raise ValueError(f"decode of request {rid!r}, which has no KV cache (no prefill ran)")
            if ctx != have:
                raise ValueError(f"decode of request {rid!r} at context {ctx}, but {have} positions are cached")
            if ctx >= self.max_context:
                raise ValueError(f"request {rid!r}: decode at position {ctx} exceeds max_context {self.max_context}")
        for p in plan.prefills:
            if p.tokens < 1:
                raise ValueError(f"prefill chunk of request {p.req_id!r} has {p.tokens} tokens")
            if p.start + p.tokens > self.max_context:
                raise ValueError(
                    f"request {p.req_id!r}: prefill to position {p.start + p.tokens} exceeds max_context {self.max_context}"
                )
            if p.start == 0 and p.req_id not in self._slots:
                if not self._free:
                    raise RuntimeError(f"all {self.max_seqs} KV-cache slots are in use; raise max_seqs")
                self._slots[p.req_id] = self._free.pop()
                self._lens[p.req_id] = 0
            have = self._lens.get(p.req_id)
            if have is None:
                raise ValueError(f"prefill chunk of request {p.req_id!r} starts at {p.start} with no KV cache")
            if p.start != have:
                raise ValueError(f"prefill chunk of request {p.req_id!r} starts at {p.start}, but {have} positions are cached")
        for rid in plan.decodes:
            self._lens[rid] += 1
        for p in plan.prefills:
            self._lens[p.req_id] += p.tokens

    def _sdpa_backends(self):
        if self._backends is None:
            return contextlib.nullcontext()
        from torch.nn.attention import sdpa_kernel

        return sdpa_kernel(self._backends)

    def _mask(self, rows: tuple[int, ...], length: int) -> torch.Tensor:
        # A zero additive mask [*rows, length] whose row stride is a multiple of 16 elements, so the
        # CUDA memory-efficient kernel takes it as it is instead of padding a copy in every layer.
        padded = -(-length // 16) * 16
        return torch.zeros((*rows, padded), device=self.device, dtype=self.dtype)[..., :length]

    def _gather_buffers(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        # Reused outputs for the decode gather: a fresh multi-MB tensor per layer would cost page
        # faults on the CPU (glibc hands large blocks back to the OS) that no engine pays.
        need = math.prod(shape)
        if self._gather is None or self._gather.shape[1] < need:
            cap = max(need, 2 * (0 if self._gather is None else self._gather.shape[1]))
            self._gather = torch.empty((2, cap), device=self.device, dtype=self.dtype)
        return self._gather[0, :need].view(shape), self._gather[1, :need].view(shape)

    def _forward(self, plan: RoundPlan) -> torch.Tensor:
        s, dev, dt = self.spec, self.device, self.dtype
        n = len(plan.decodes)
        H, KV, G, D = s.num_heads, s.num_kv_heads, self._group, s.head_dim
        slots, offsets = self._slots, self._offset

        # Host-side batch metadata, shipped in one transfer: token ids, positions, slots, last rows.
        pos_parts = [np.asarray(plan.decode_contexts, dtype=np.int64)]
        slot_parts = [np.fromiter((slots[r] for r in plan.decodes), dtype=np.int64, count=n)]
        off_parts = [np.fromiter((offsets(r) for r in plan.decodes), dtype=np.int64, count=n)]
        last = list(range(n))
        row = n
        for p in plan.prefills:
            pos_parts.append(np.arange(p.start, p.start + p.tokens, dtype=np.int64))
            slot_parts.append(np.full(p.tokens, slots[p.req_id], dtype=np.int64))
            off_parts.append(np.full(p.tokens, offsets(p.req_id), dtype=np.int64))
            row += p.tokens
            last.append(row - 1)
        pos_np = np.concatenate(pos_parts)
        T = len(pos_np)
        ids_np = self._tokens[(pos_np + np.concatenate(off_parts)) % _TOKEN_TABLE]
        meta_np = np.concatenate([ids_np, pos_np, np.concatenate(slot_parts), np.asarray(last, dtype=np.int64)])
        meta = torch.from_numpy(meta_np).to(dev, non_blocking=False)
        ids, pos, slot, last_rows = meta[:T], meta[T:2 * T], meta[2 * T:3 * T], meta[3 * T:]

        cos = self._cos[pos].unsqueeze(1)
        sin = self._sin[pos].unsqueeze(1)
        neg_inf = float("-inf")
        # Additive masks, built once per iteration and shared by every layer.
        if n:
            dec_len = int(max(plan.decode_contexts)) + 1
            dec_slots = slot[:n]
            kpos = torch.arange(dec_len, device=dev)
            dec_mask = self._mask((n, 1, 1), dec_len)
            dec_mask.masked_fill_(kpos.view(1, 1, 1, -1) > pos[:n].view(-1, 1, 1, 1), neg_inf)
            kbuf, vbuf = self._gather_buffers((n, KV, dec_len, D))
        chunks = []  # (row0, row1, slot, kv_len, mask [G*c, kv_len])
        row = n
        for p in plan.prefills:
            c, kv_len = p.tokens, p.start + p.tokens
            qpos = torch.arange(p.start, kv_len, device=dev).repeat(G)  # query rows are [group, token]
            mask = self._mask((G * c,), kv_len)
            mask.masked_fill_(torch.arange(kv_len, device=dev).view(1, -1) > qpos.view(-1, 1), neg_inf)
            chunks.append((row, row + c, slots[p.req_id], kv_len, mask))
            row += c

        qd, kvd, eps = s.q_dim, s.kv_dim, self.eps
        sdpa = F.scaled_dot_product_attention
        x = self.embed[ids]
        for li, w in enumerate(self.layers):
            h = _rms(x, w["ln_in"], eps)
            qkv = F.linear(h, w["qkv"], w["qkv_b"])
            qk = qkv[:, :qd + kvd].view(T, H + KV, D)  # q heads then k heads, one pass for both
            v = qkv[:, qd + kvd:].view(T, KV, D)
            if w["qk_norm"] is not None:
                qk = _rms(qk, None, eps) * w["qk_norm"]
            qk = _rope(qk, cos, sin)
            q, k = qk[:, :H], qk[:, H:]
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc[slot, :, pos] = k  # [T, KV, D] into (slot, :, position)
            vc[slot, :, pos] = v

            outs = []
            if n:
                # [n, KV, G, D] queries (one token each) against caches padded to dec_len.
                kd = torch.index_select(kc[:, :, :dec_len], 0, dec_slots, out=kbuf)
                vd = torch.index_select(vc[:, :, :dec_len], 0, dec_slots, out=vbuf)
                o = sdpa(q[:n].view(n, KV, G, D), kd, vd, attn_mask=dec_mask)
                outs.append(o.reshape(n, qd))
            for r0, r1, sl, kv_len, mask in chunks:
                c = r1 - r0
                qc = q[r0:r1].view(c, KV, G, D).permute(1, 2, 0, 3).reshape(1, KV, G * c, D)
                kp = kc[sl, :, :kv_len].unsqueeze(0)  # [1, KV, kv_len, D], a view
                vp = vc[sl, :, :kv_len].unsqueeze(0)
                o = sdpa(qc, kp, vp, attn_mask=mask)
                outs.append(o.view(KV, G, c, D).permute(2, 0, 1, 3).reshape(c, qd))
            attn = outs[0] if len(outs) == 1 else torch.cat(outs)
            x = x + F.linear(attn, w["o"])
            h = _rms(x, w["ln_post"], eps)
            gu = F.linear(h, w["gate_up"])
            inter = gu.shape[-1] // 2
            x = x + F.linear(F.silu(gu[:, :inter]) * gu[:, inter:], w["down"])

        xl = _rms(x.index_select(0, last_rows), self.final_norm, eps)
        logits = F.linear(xl, self.lm_head)
        self.last_tokens = logits.argmax(dim=-1)
        return logits


def build_runner(
    model: str | ModelSpec = "qwen3-8b",
    scale: str = "auto",
    device: str = "auto",
    **kwargs: Any,
) -> TorchBatchRunner:
    """A runner for a named model: ``scale`` "full" keeps the real shape, "tiny" takes
    ``scaled_spec``'s CPU-sized shape of the same architecture, "auto" is full on CUDA and tiny
    on the CPU. Other keyword arguments go to ``TorchBatchRunner``."""
    from sarathi_ext.sim.models import get_model

    spec = get_model(model) if isinstance(model, str) else model
    dev = resolve_device(device)
    if scale == "auto":
        scale = "full" if dev.type == "cuda" else "tiny"
    if scale == "tiny":
        spec = scaled_spec(spec)
    elif scale != "full":
        raise ValueError(f"scale: must be 'tiny', 'full' or 'auto', got {scale!r}")
    return TorchBatchRunner(spec, device=dev, **kwargs)
