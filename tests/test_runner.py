"""The PyTorch batch runner (profiling source (b)): attention against the KV cache, chunking and
mixed batches, slot bookkeeping, and an end-to-end profile through SimEngine.

Numerical checks run in float64 against ``reference_logits``, an independent whole-sequence
forward written out here op by op (causal softmax attention with K/V repeated per q head, RoPE
from its definition), so the runner's cache, masks and GQA folding are checked against the
textbook computation, not only against themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch runner needs torch")

from predictors.latency.runner import TorchBatchRunner, build_runner, scaled_spec  # noqa: E402
from sarathi_ext.core import PolicyConfig, build_planner  # noqa: E402
from sarathi_ext.core.features import IDX, MemoryState  # noqa: E402
from sarathi_ext.core.plan import PrefillChunk, RoundPlan  # noqa: E402
from sarathi_ext.sim.engine import SimEngine  # noqa: E402
from sarathi_ext.sim.models import MODELS  # noqa: E402
from sarathi_ext.sim.workload import Workload  # noqa: E402

# 2 layers, hidden 32, 4 q heads / 2 kv heads of dim 8, MLP 48, vocab 64.
DIMS = dict(hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate=48, vocab=64)
TOL = dict(rtol=1e-10, atol=1e-10)


def tiny(model: str = "qwen3-8b", **kw) -> TorchBatchRunner:
    spec = scaled_spec(MODELS[model], **DIMS)
    kw = {"device": "cpu", "dtype": torch.float64, "max_context": 64, "max_seqs": 4, "seed": 1, **kw}
    r = TorchBatchRunner(spec, **kw)
    r.capture_logits = True
    return r


def prefill(rid, start, tokens, completes=True) -> PrefillChunk:
    return PrefillChunk(rid, start, tokens, completes)


def run(r: TorchBatchRunner, decodes=(), prefills=()) -> dict:
    plan = RoundPlan(decodes=[d for d, _ in decodes], decode_contexts=[c for _, c in decodes], prefills=list(prefills))
    ms = r.execute_plan(plan)
    assert ms > 0
    return dict(r.last_logits)


def reference_logits(r: TorchBatchRunner, rid, length: int) -> torch.Tensor:
    """Last-position logits of ``rid``'s first ``length`` tokens, computed from scratch."""
    s = r.spec
    ids = torch.as_tensor(r.token_ids(rid, 0, length))
    x = r.embed[ids]
    pos = torch.arange(length, dtype=torch.float64)
    inv = r.rope_theta ** (-torch.arange(0, s.head_dim, 2, dtype=torch.float64) / s.head_dim)
    ang = pos[:, None] * inv[None, :]  # [L, D/2]

    def rope(t):  # t [L, heads, D]: rotate each (i, i + D/2) pair by angle pos * inv_i
        a, b = t[..., : s.head_dim // 2], t[..., s.head_dim // 2:]
        c, sn = ang.cos()[:, None, :], ang.sin()[:, None, :]
        return torch.cat((a * c - b * sn, b * c + a * sn), dim=-1)

    def rms(t, w):
        return t / torch.sqrt((t * t).mean(-1, keepdim=True) + r.eps) * w

    causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
    for w in r.layers:
        h = rms(x, w["ln_in"])
        qkv = h @ w["qkv"].T + (w["qkv_b"] if w["qkv_b"] is not None else 0)
        q = qkv[:, : s.q_dim].reshape(length, s.num_heads, s.head_dim)
        k = qkv[:, s.q_dim: s.q_dim + s.kv_dim].reshape(length, s.num_kv_heads, s.head_dim)
        v = qkv[:, s.q_dim + s.kv_dim:].reshape(length, s.num_kv_heads, s.head_dim)
        if s.qk_norm:
            q, k = rms(q, w["q_norm"]), rms(k, w["k_norm"])
        q, k = rope(q), rope(k)
        group = s.num_heads // s.num_kv_heads
        k = k.repeat_interleave(group, dim=1)  # q head j reads kv head j // group
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(s.head_dim)
        p = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        attn = torch.einsum("hqk,khd->qhd", p, v).reshape(length, s.q_dim)
        x = x + attn @ w["o"].T
        h = rms(x, w["ln_post"])
        gate, up = (h @ w["gate_up"].T).split(s.intermediate_size, dim=-1)
        x = x + (torch.nn.functional.silu(gate) * up) @ w["down"].T
    return (rms(x[-1], r.final_norm) @ r.lm_head.T).double()


# ------------------------------------------------------------------------------- (a) chunking


@pytest.mark.parametrize("model", ["qwen3-8b", "llama-3.1-8b", "deepseek-r1-distill-qwen-7b"])
def test_one_chunk_equals_two_chunks_equals_reference(model):
    one, two = tiny(model), tiny(model)
    whole = run(one, prefills=[prefill("a", 0, 10)])["a"]
    run(two, prefills=[prefill("a", 0, 4, completes=False)])
    split = run(two, prefills=[prefill("a", 4, 6)])["a"]
    torch.testing.assert_close(whole, split, **TOL)
    torch.testing.assert_close(whole, reference_logits(one, "a", 10), **TOL)


def test_prefill_then_decode_equals_longer_prefill():
    a, b = tiny(), tiny()
    run(a, prefills=[prefill("r", 0, 7)])
    decoded = run(a, decodes=[("r", 7)])["r"]  # writes position 7, attends to [0, 7]
    longer = run(b, prefills=[prefill("r", 0, 8)])["r"]
    torch.testing.assert_close(decoded, longer, **TOL)
    torch.testing.assert_close(decoded, reference_logits(a, "r", 8), **TOL)
    # Two more decodes stay on the reference.
    run(a, decodes=[("r", 8)])
    torch.testing.assert_close(run(a, decodes=[("r", 9)])["r"], reference_logits(a, "r", 10), **TOL)


# ------------------------------------------------------------------------------- (b) mixed batches


def test_mixed_batch_equals_separate_iterations():
    # Mixed: three chunks in one iteration, then two decodes of different contexts (the padded
    # decode attention must mask the shorter one) together with B's second chunk.
    mixed = tiny()
    first = run(mixed, prefills=[prefill("A", 0, 8), prefill("C", 0, 3), prefill("B", 0, 2, completes=False)])
    second = run(mixed, decodes=[("A", 8), ("C", 3)], prefills=[prefill("B", 2, 5)])

    alone = tiny()
    sep = {}
    sep["A8"] = run(alone, prefills=[prefill("A", 0, 8)])["A"]
    sep["C3"] = run(alone, prefills=[prefill("C", 0, 3)])["C"]
    sep["B2"] = run(alone, prefills=[prefill("B", 0, 2, completes=False)])["B"]
    sep["A9"] = run(alone, decodes=[("A", 8)])["A"]
    sep["C4"] = run(alone, decodes=[("C", 3)])["C"]
    sep["B7"] = run(alone, prefills=[prefill("B", 2, 5)])["B"]

    for got, key in ((first["A"], "A8"), (first["C"], "C3"), (first["B"], "B2"),
                     (second["A"], "A9"), (second["C"], "C4"), (second["B"], "B7")):
        torch.testing.assert_close(got, sep[key], **TOL)
    for rid, n in (("A", 9), ("C", 4), ("B", 7)):
        torch.testing.assert_close(second[rid], reference_logits(mixed, rid, n), **TOL)


def test_greedy_tokens_follow_batch_order():
    r = tiny()
    out = run(r, prefills=[prefill("x", 0, 5), prefill("y", 0, 6)])
    out2 = run(r, decodes=[("y", 6), ("x", 5)])
    assert r.last_tokens.tolist() == [int(out2["y"].argmax()), int(out2["x"].argmax())]
    assert set(out) == {"x", "y"}


# ------------------------------------------------------------------------------- (c) release


def test_release_frees_slots_and_is_idempotent():
    r = tiny(max_seqs=2)
    run(r, prefills=[prefill(0, 0, 4), prefill(1, 0, 4)])
    assert r.live_sequences == 2
    with pytest.raises(RuntimeError, match="slots"):
        run(r, prefills=[prefill(2, 0, 4)])
    r.release(0)
    r.release(0)  # a second release, or of an unknown id, is a no-op
    r.release("never-seen")
    assert r.live_sequences == 1
    run(r, prefills=[prefill(2, 0, 4)])  # the freed slot is reused
    assert r.live_sequences == 2
    with pytest.raises(ValueError, match="no KV cache"):
        run(r, decodes=[(0, 4)])
    # A request preempted for recompute starts over from position 0 and matches the reference.
    r.release(2)
    torch.testing.assert_close(run(r, prefills=[prefill(2, 0, 6)])[2], reference_logits(r, 2, 6), **TOL)


def test_plans_that_do_not_continue_the_cache_are_refused():
    r = tiny()
    run(r, prefills=[prefill("a", 0, 5, completes=False)])
    with pytest.raises(ValueError, match="starts at 4"):
        run(r, prefills=[prefill("a", 4, 2)])
    with pytest.raises(ValueError, match="context 6"):
        run(r, decodes=[("a", 6)])
    with pytest.raises(ValueError, match="max_context"):
        run(r, prefills=[prefill("b", 0, 65)])


# ------------------------------------------------------------------------------- (d) memory, describe


def test_memory_state_is_zero_on_cpu_and_describe_names_the_shape():
    r = tiny()
    assert r.memory_state() == MemoryState(0.0, 0.0, 0.0, 0.0)
    d = r.describe()
    assert (d["architecture"], d["device"], d["dtype"], d["num_layers"], d["num_kv_heads"]) == (
        "qwen3", "cpu", "float64", 2, 2)
    assert d["torch"] == torch.__version__


def test_scaled_spec_keeps_the_architecture():
    s = scaled_spec(MODELS["deepseek-r1-distill-qwen-7b"])
    assert (s.qkv_bias, s.qk_norm, s.num_heads, s.num_kv_heads, s.hidden_size) == (True, False, 4, 2, 256)
    r = build_runner("qwen3-8b", scale="tiny", device="cpu", max_context=32, max_seqs=2)
    assert (r.spec.qk_norm, r.dtype, r.spec.num_layers) == (True, torch.float32, 4)
    r.warmup(3, chunk=16)
    assert r.live_sequences == 0 and r.iterations == 0


# ------------------------------------------------------------------------------- (e) end to end


class Recording:
    """The runner as SimEngine's executor, noting each plan's token count on the way."""

    def __init__(self, runner: TorchBatchRunner) -> None:
        self.runner = runner
        self.tokens: list[int] = []

    def execute_plan(self, plan: RoundPlan) -> float:
        self.tokens.append(len(plan.decodes) + sum(p.tokens for p in plan.prefills))
        return self.runner.execute_plan(plan)

    def release(self, req_id) -> None:
        self.runner.release(req_id)

    def memory_state(self) -> MemoryState:
        return self.runner.memory_state()


def test_sim_engine_drives_the_runner_end_to_end():
    runner = tiny(dtype=torch.float32, max_seqs=3, max_context=64)
    rec = Recording(runner)
    rows: list[tuple[np.ndarray, float]] = []
    engine = SimEngine(
        build_planner(PolicyConfig()), rec, token_budget=16, max_num_seqs=3, num_blocks=16, block_size=8,
        on_iteration=lambda x, ms: rows.append((np.array(x, copy=True), ms)),
    )
    wl = Workload(
        "tiny",
        arrivals=np.array([0.0, 0.0, 0.001, 0.002, 0.5]),
        prompt_lens=np.array([20, 5, 33, 9, 12]),
        output_lens=np.array([4, 6, 2, 5, 3]),
    )
    res = engine.run(wl)
    assert np.isfinite(res.finish).all() and res.preemptions.sum() == 0
    assert len(rows) == len(res.iteration_ms) == len(rec.tokens) > 0
    for (x, ms), tokens, charged in zip(rows, rec.tokens, res.iteration_ms):
        assert x[IDX["scheduled_tokens"]] == tokens
        assert ms > 0 and ms == charged
    assert sum(rec.tokens) == int(wl.prompt_lens.sum() + wl.output_lens.sum() - len(wl))
    assert runner.live_sequences == 0
