"""Execution-time models: what one engine iteration costs, in milliseconds.

An execution-time model is any callable ``features [N, 16] -> ms [N]`` over the batch features of
``sarathi_ext.core.features``: the same interface as LPRS's latency predictor, so a predictor, a
roofline and a measured profile are interchangeable. Models also offer ``time_one(row) -> float``,
a pure-Python path for the simulator, which charges one iteration at a time (numpy's per-call
overhead on length-1 arrays would dominate ~50k iterations).

The simulator charges ``NoisyModel(base)`` so that no predictor is exact by construction.
"""

from __future__ import annotations

import bisect
import csv
import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from sarathi_ext.core.features import FEATURE_NAMES, IDX
from sarathi_ext.sim.hardware import GPUSpec, get_gpu
from sarathi_ext.sim.models import ModelSpec, get_model

ExecModel = Callable[[np.ndarray], np.ndarray]

_P = IDX["prefill_tokens"]
_D = IDX["decode_tokens"]
_R = IDX["batch_request_count"]
_S = IDX["sum_decode_context_len"]
_Q = IDX["prefill_processed_tokens"]
_T = IDX["scheduled_tokens"]

# Calibrated by benchmarks/check_roofline.py on Vidur's A100-SXM4-80GB Llama-3-8B TP=1 profile (sum
# of per-layer op medians): weight-bound batches (1-16 tokens) run at 0.699 of peak bandwidth,
# compute-bound ones (>= 1024 tokens) at 0.662 of peak bf16. Llama-2-7B on A100 (0.637 / 0.701) and
# on H100 (0.612 / 0.702) agree, so one pair serves all GPUs. Both absorb the layer's elementwise
# kernels (RMSNorm, RoPE, SiLU, residual add: ~8% of layer time), which the roofline omits, and
# attention kernels are assumed to reach the same fractions as the GEMMs.
DEFAULT_COMPUTE_EFFICIENCY = 0.66
DEFAULT_BANDWIDTH_EFFICIENCY = 0.70
# Assumed, not calibrated (the profiles hold GPU kernel time only): the serial CPU work of a Python
# engine iteration, i.e. scheduling, block tables and input tensors (~1 ms), sampling and output
# processing (~1-2 ms), and the host-device sync between them. Kernel launches are not added: they
# overlap with GPU execution except at very small batches.
DEFAULT_OVERHEAD_MS = 3.0


def _rows(features: np.ndarray) -> np.ndarray:
    x = np.asarray(features, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES):
        raise ValueError(f"expected features of shape [N, {len(FEATURE_NAMES)}], got {x.shape}")
    return x


class RooflineModel:
    """max(compute, memory) per phase, from a GPU's datasheet and a model's shapes.

    Linear layers read every weight once per iteration and do 2 FLOPs per weight per token. The
    lm_head runs only on each request's last position (engines prune hidden states before it), so
    it costs per request, not per token. Decode attention and prefill attention are separate
    kernels, each bound by its own max(FLOPs, KV bytes). Tensor parallelism divides all work by tp;
    the all-reduce between shards is not modelled.
    """

    def __init__(
        self,
        gpu: GPUSpec | str,
        model: ModelSpec | str,
        overhead_ms: float = DEFAULT_OVERHEAD_MS,
        compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY,
        bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY,
        tp: int = 1,
    ) -> None:
        self.gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
        self.model = get_model(model) if isinstance(model, str) else model
        if not (0 < compute_efficiency <= 1 and 0 < bandwidth_efficiency <= 1):
            raise ValueError("efficiencies must be in (0, 1]")
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        self.overhead_ms = float(overhead_ms)
        self.compute_efficiency = compute_efficiency
        self.bandwidth_efficiency = bandwidth_efficiency
        self.tp = tp
        m = self.model
        ms_per_flop = 1e3 / (self.gpu.peak_flops * compute_efficiency * tp)
        ms_per_byte = 1e3 / (self.gpu.mem_bw_bytes * bandwidth_efficiency * tp)
        self._ms_per_flop = ms_per_flop
        self._ms_per_byte = ms_per_byte
        self._layer_ms_per_token = 2 * m.layer_matmul_params * ms_per_flop
        self._layer_weight_ms = m.layer_matmul_params * m.dtype_bytes * ms_per_byte
        self._head_ms_per_request = 2 * m.lm_head_params * ms_per_flop
        self._head_weight_ms = m.lm_head_params * m.dtype_bytes * ms_per_byte
        # Per (query, key) pair: QK^T and PV, 2 FLOPs per multiply-add each, over all q heads.
        self._attn_flop_ms = 4 * m.num_layers * m.num_heads * m.head_dim * ms_per_flop
        self._kv_ms = m.kv_bytes_per_token * ms_per_byte
        # A decode's query meets each context token once, so both bounds are linear in context.
        self._decode_ms_per_ctx = max(self._attn_flop_ms, self._kv_ms)

    # -- linear layers -------------------------------------------------------------------------
    def layer_linear_ms(self, num_tokens: np.ndarray) -> np.ndarray:
        """One decoder layer's matmuls (q/k/v/o, gate/up/down) for a batch of num_tokens."""
        n = np.asarray(num_tokens, dtype=np.float64)
        return np.maximum(n * self._layer_ms_per_token, self._layer_weight_ms)

    def _layer_linear_ms_one(self, n: float) -> float:
        return max(n * self._layer_ms_per_token, self._layer_weight_ms)

    def _linear_ms(self, tokens: np.ndarray, requests: np.ndarray) -> np.ndarray:
        head = np.maximum(requests * self._head_ms_per_request, self._head_weight_ms)
        return self.model.num_layers * self.layer_linear_ms(tokens) + head

    def _linear_ms_one(self, tokens: float, requests: float) -> float:
        head = max(requests * self._head_ms_per_request, self._head_weight_ms)
        return self.model.num_layers * self._layer_linear_ms_one(tokens) + head

    # -- attention -----------------------------------------------------------------------------
    def _prefill_attention_ms(self, p, q, n_prefills):
        # Chunk j of c_j tokens after p_j cached ones scores c_j*(p_j + c_j/2) pairs (causal). With
        # only the sums P = sum c_j and Q = sum p_j known, assume equal chunks: (P*Q + P^2/2) / n,
        # exact when all chunks are the same size (so for one chunk). The kernel reads the cached
        # KV and the chunk's own new KV.
        pairs = (p * q + 0.5 * p * p) / n_prefills
        return pairs * self._attn_flop_ms, (q + p) * self._kv_ms

    # -- the model -----------------------------------------------------------------------------
    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = _rows(features)
        p, d, r, s, q, t = x[:, _P], x[:, _D], x[:, _R], x[:, _S], x[:, _Q], x[:, _T]
        n_prefills = np.maximum(r - d, 1.0)
        flop_ms, byte_ms = self._prefill_attention_ms(p, q, n_prefills)
        prefill = np.where(p > 0, np.maximum(flop_ms, byte_ms), 0.0)
        ms = self._linear_ms(t, r) + s * self._decode_ms_per_ctx + prefill + self.overhead_ms
        return np.where(t > 0, ms, 0.0)

    def time_one(self, row: Sequence[float]) -> float:
        t = float(row[_T])
        if t <= 0:
            return 0.0
        p, d, r, s = float(row[_P]), float(row[_D]), float(row[_R]), float(row[_S])
        ms = self._linear_ms_one(t, r) + s * self._decode_ms_per_ctx + self.overhead_ms
        if p > 0:
            flop_ms, byte_ms = self._prefill_attention_ms(p, float(row[_Q]), max(r - d, 1.0))
            ms += max(flop_ms, byte_ms)
        return ms


class NoisyModel:
    """The "true" time: base x lognormal(0, sigma), one draw per row from a seeded stream.

    Draws come from one buffered stream, so ``time_one`` and ``__call__`` consume the same
    sequence: a run is reproducible from its seed whichever path the simulator takes.
    """

    _BLOCK = 4096

    def __init__(self, base: ExecModel, sigma: float, seed: int = 0) -> None:
        if sigma < 0:
            raise ValueError(f"sigma must be >= 0, got {sigma}")
        self.base = base
        self.sigma = float(sigma)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._buf: list[float] = []
        self._pos = 0

    def _refill(self) -> None:
        self._buf = np.exp(self.sigma * self._rng.standard_normal(self._BLOCK)).tolist()
        self._pos = 0

    def _factors(self, n: int) -> np.ndarray:
        out = np.empty(n)
        filled = 0
        while filled < n:
            if self._pos == len(self._buf):
                self._refill()
            take = min(n - filled, len(self._buf) - self._pos)
            out[filled : filled + take] = self._buf[self._pos : self._pos + take]
            self._pos += take
            filled += take
        return out

    def __call__(self, features: np.ndarray) -> np.ndarray:
        base = np.asarray(self.base(features), dtype=np.float64)
        if self.sigma == 0.0:
            return base
        return base * self._factors(base.shape[0])

    def time_one(self, row: Sequence[float]) -> float:
        one = getattr(self.base, "time_one", None)
        base = one(row) if one else float(self.base(np.asarray(row)[None, :])[0])
        if self.sigma == 0.0:
            return base
        if self._pos == len(self._buf):
            self._refill()
        self._pos += 1
        return base * self._buf[self._pos - 1]


# -- measured profiles ---------------------------------------------------------------------------
def _read_csv(path: str | Path, required: Sequence[str]) -> tuple[dict[str, np.ndarray], list[int]]:
    """The numeric columns ``required`` of a CSV, as float arrays, plus each row's line number.

    Errors name the file and the line, since these files are written by other tools.
    """
    path = Path(path)
    try:
        fh = path.open(newline="")
    except OSError as e:
        raise ValueError(f"{path}: cannot open ({e.strerror})") from None
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file, expected a header on line 1")
        header = [h.strip() for h in header]
        missing = [c for c in required if c not in header]
        if missing:
            raise ValueError(f"{path}, line 1: missing column(s) {', '.join(missing)}")
        cols = [header.index(c) for c in required]
        values: list[list[float]] = []
        lines: list[int] = []
        for fields in reader:
            if not fields or all(not f.strip() for f in fields):
                continue
            line = reader.line_num
            if len(fields) != len(header):
                raise ValueError(
                    f"{path}, line {line}: {len(fields)} fields, header has {len(header)}"
                )
            row = []
            for name, i in zip(required, cols):
                try:
                    v = float(fields[i])
                except ValueError:
                    v = math.nan
                if not math.isfinite(v):
                    raise ValueError(
                        f"{path}, line {line}: column {name!r} is {fields[i]!r}, "
                        "not a finite number"
                    )
                row.append(v)
            values.append(row)
            lines.append(line)
    if not values:
        raise ValueError(f"{path}: no data rows")
    arr = np.asarray(values, dtype=np.float64)
    return {name: arr[:, j] for j, name in enumerate(required)}, lines


class ProfileModel:
    """Least squares of measured latency on a basis that mirrors the roofline's terms.

    bias                      per-iteration overhead and the weight-read floor
    prefill_tokens            linear-layer FLOPs of prefill tokens
    decode_tokens             linear-layer FLOPs of decode tokens (separate kernels, sampling)
    batch_request_count       lm_head rows and per-sequence bookkeeping
    sum_decode_context_len    decode attention: KV read per context token
    prefill_processed_tokens  prefill attention: cached KV read
    prefill_interaction       prefill attention FLOPs against cached context (P*Q)
    prefill_tokens^2          causal attention FLOPs within the chunk
    """

    BASIS = (
        "bias",
        "prefill_tokens",
        "decode_tokens",
        "batch_request_count",
        "sum_decode_context_len",
        "prefill_processed_tokens",
        "prefill_interaction",
        "prefill_tokens_sq",
    )

    def __init__(self, coef: np.ndarray) -> None:
        self.coef = np.asarray(coef, dtype=np.float64)
        if self.coef.shape != (len(self.BASIS),):
            raise ValueError(f"expected {len(self.BASIS)} coefficients, got {self.coef.shape}")
        self.fit_rmse_ms = math.nan
        self._c = self.coef.tolist()

    @staticmethod
    def basis(features: np.ndarray) -> np.ndarray:
        x = _rows(features)
        p = x[:, _P]
        # P*Q from its parts, not column 15, so a stale derived column cannot skew the fit.
        return np.column_stack(
            (np.ones(len(x)), p, x[:, _D], x[:, _R], x[:, _S], x[:, _Q], p * x[:, _Q], p * p)
        )

    @classmethod
    def fit(cls, features: np.ndarray, latency_ms: np.ndarray) -> "ProfileModel":
        a = cls.basis(features)
        y = np.asarray(latency_ms, dtype=np.float64)
        # Columns span 1 to ~1e7 (P^2); scaling them keeps lstsq's rank decision meaningful.
        scale = np.abs(a).max(axis=0)
        scale[scale == 0] = 1.0
        w, *_ = np.linalg.lstsq(a / scale, y, rcond=None)
        model = cls(w / scale)
        model.fit_rmse_ms = float(np.sqrt(np.mean((a @ model.coef - y) ** 2)))
        return model

    @classmethod
    def from_csv(cls, path: str | Path) -> "ProfileModel":
        # The one strict reader of the profile schema, shared with the trainer.
        from predictors.latency.schema import read_profile

        features, latency_ms, _ = read_profile(path)
        if len(features) < len(cls.BASIS):
            raise ValueError(f"{path}: {len(features)} rows, need >= {len(cls.BASIS)} to fit")
        return cls.fit(features, latency_ms)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = _rows(features)
        ms = np.maximum(self.basis(x) @ self.coef, 0.0)
        return np.where(x[:, _T] > 0, ms, 0.0)

    def time_one(self, row: Sequence[float]) -> float:
        if float(row[_T]) <= 0:
            return 0.0
        c = self._c
        p, q = float(row[_P]), float(row[_Q])
        ms = (
            c[0] + c[1] * p + c[2] * float(row[_D]) + c[3] * float(row[_R]) + c[4] * float(row[_S])
            + c[5] * q + c[6] * p * q + c[7] * p * p
        )
        return max(ms, 0.0)


class VidurLinearProfile:
    """Measured time of one decoder layer's non-attention ops vs batch tokens (a Vidur mlp.csv).

    The layer time is the sum of the op medians (norms, q/k/v and output projections, RoPE, MLP,
    residual add); the embedding runs once per model, so it is kept apart.
    """

    LAYER_OPS = (
        "input_layernorm",
        "attn_pre_proj",
        "attn_rope",
        "attn_post_proj",
        "post_attention_layernorm",
        "mlp_up_proj",
        "mlp_act",
        "mlp_down_proj",
        "add",
    )
    SHAPE = ("n_embd", "n_expanded_embd", "n_head", "n_kv_head", "vocab_size")

    def __init__(
        self, num_tokens, layer_ms, emb_ms, shape: dict[str, int], source: str = ""
    ) -> None:
        self.num_tokens = np.asarray(num_tokens, dtype=np.float64)
        self.layer_ms_at = np.asarray(layer_ms, dtype=np.float64)
        self.emb_ms_at = np.asarray(emb_ms, dtype=np.float64)
        self.shape = shape
        self.source = source
        self._n = self.num_tokens.tolist()
        self._layer = self.layer_ms_at.tolist()
        self._emb = self.emb_ms_at.tolist()

    @classmethod
    def from_csv(cls, path: str | Path, tp: int = 1) -> "VidurLinearProfile":
        ops = ("emb", *cls.LAYER_OPS)
        required = ("num_tokens", "num_tensor_parallel_workers", *cls.SHAPE)
        cols, _ = _read_csv(path, (*required, *(f"time_stats.{o}.median" for o in ops)))
        keep = cols["num_tensor_parallel_workers"] == tp
        if not keep.any():
            raise ValueError(f"{path}: no rows with num_tensor_parallel_workers == {tp}")
        n = cols["num_tokens"][keep]
        layer = sum(cols[f"time_stats.{o}.median"][keep] for o in cls.LAYER_OPS)
        emb = cols["time_stats.emb.median"][keep]
        # Some token counts were profiled twice; average the repeats.
        uniq, inv = np.unique(n, return_inverse=True)
        count = np.bincount(inv)
        shape = {k: int(cols[k][keep][0]) for k in cls.SHAPE}
        return cls(
            uniq,
            np.bincount(inv, weights=layer) / count,
            np.bincount(inv, weights=emb) / count,
            shape,
            str(path),
        )

    def _interp(self, n: np.ndarray, y: np.ndarray) -> np.ndarray:
        # Past the largest profiled batch the layer is compute-bound: scale linearly with tokens.
        n = np.asarray(n, dtype=np.float64)
        top_n, top_y = self.num_tokens[-1], y[-1]
        return np.where(n > top_n, top_y * n / top_n, np.interp(n, self.num_tokens, y))

    def layer_ms(self, num_tokens: np.ndarray) -> np.ndarray:
        return self._interp(num_tokens, self.layer_ms_at)

    def emb_ms(self, num_tokens: np.ndarray) -> np.ndarray:
        return self._interp(num_tokens, self.emb_ms_at)

    def layer_ms_one(self, n: float) -> float:
        return _interp_one(self._n, self._layer, n)

    def emb_ms_one(self, n: float) -> float:
        return _interp_one(self._n, self._emb, n)


def _interp_one(xs: list[float], ys: list[float], n: float) -> float:
    """VidurLinearProfile._interp for one value, without numpy's per-call cost."""
    if n >= xs[-1]:
        return ys[-1] * n / xs[-1]
    if n <= xs[0]:
        return ys[0]
    i = bisect.bisect_right(xs, n)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0)


class ProfiledRooflineModel(RooflineModel):
    """The roofline with measured linear layers: a Vidur profile for the layers, the roofline for
    attention and the lm_head (the profile has neither).

    A profile of a different model is rescaled by the ratio of per-layer matmul weights (time
    tracks weights both when weight-bound and when compute-bound); ``param_scale`` records it.
    The profile's GPU is the caller's business: nothing in the CSV names it.
    """

    def __init__(self, profile: VidurLinearProfile, gpu, model, **kwargs) -> None:
        super().__init__(gpu, model, **kwargs)
        if self.tp != 1:
            raise ValueError("ProfiledRooflineModel uses TP=1 profiles; tp must be 1")
        self.profile = profile
        s = profile.shape
        h, f, kvh = s["n_embd"], s["n_expanded_embd"], s["n_kv_head"]
        hd = h // s["n_head"]
        profiled_params = 2 * h * h + 2 * h * kvh * hd + 3 * h * f
        self.param_scale = self.model.layer_matmul_params / profiled_params

    def layer_linear_ms(self, num_tokens: np.ndarray) -> np.ndarray:
        return self.param_scale * self.profile.layer_ms(num_tokens)

    def _layer_linear_ms_one(self, n: float) -> float:
        return self.param_scale * self.profile.layer_ms_one(n)

    def _linear_ms(self, tokens, requests):
        return super()._linear_ms(tokens, requests) + self.profile.emb_ms(tokens)

    def _linear_ms_one(self, tokens: float, requests: float) -> float:
        return super()._linear_ms_one(tokens, requests) + self.profile.emb_ms_one(tokens)


EXEC_MODEL_KINDS = ("roofline", "profile", "vidur")


def build_exec_model(
    kind: str,
    gpu: str,
    model: str,
    profile: str | None = None,
    noise_sigma: float = 0.0,
    seed: int = 0,
) -> ExecModel:
    """The CLI's factory: the base model of ``kind``, wrapped in noise when noise_sigma > 0.

    roofline  datasheet roofline of ``gpu`` x ``model``
    profile   least squares on a measured features CSV (``profile``); gpu and model unused
    vidur     roofline whose linear layers come from a Vidur mlp.csv (``profile``)
    """
    if kind == "roofline":
        base: ExecModel = RooflineModel(gpu, model)
    elif kind in ("profile", "vidur"):
        if not profile:
            raise ValueError(f"exec model {kind!r} needs a profile CSV path")
        if kind == "profile":
            base = ProfileModel.from_csv(profile)
        else:
            base = ProfiledRooflineModel(VidurLinearProfile.from_csv(profile), gpu, model)
    else:
        raise ValueError(f"unknown exec model {kind!r}; valid: {', '.join(EXEC_MODEL_KINDS)}")
    if noise_sigma > 0:
        return NoisyModel(base, noise_sigma, seed)
    return base
