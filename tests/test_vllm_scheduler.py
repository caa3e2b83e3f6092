"""The vLLM adapter against the real vllm 0.33.0 Scheduler, on CPU, with a fake model runner.

Build the environment with ``scripts/vllm_test_env.sh``; elsewhere these tests skip.
"""

import json
import os
import random

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import numpy as np
import pytest

pytest.importorskip("vllm", reason="needs the vllm wheel; build a CPU venv with scripts/vllm_test_env.sh")
pytestmark = pytest.mark.vllm

import torch  # noqa: E402
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.request_queue import FCFSRequestQueue  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

from sarathi_ext.core import LPRS, ActivePrefillControl, Aging, BatchState, RequestView, naive_aging_order  # noqa: E402
from sarathi_ext.vllm import SarathiExtAsyncScheduler, SarathiExtScheduler  # noqa: E402
from sarathi_ext.vllm.queue import PolicyRequestQueue  # noqa: E402

BS = 16
TINY_MODEL = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-model")
    (d / "config.json").write_text(json.dumps(TINY_MODEL))
    return str(d)


def make_scheduler(model_dir, cls=SarathiExtScheduler, *, budget=64, max_seqs=8, num_blocks=1000,
                   extra=None, chunked=True, policy="fcfs"):
    vc = VllmConfig(
        scheduler_config=SchedulerConfig(is_encoder_decoder=False, max_model_len=2048, max_num_seqs=max_seqs,
                                         max_num_batched_tokens=budget, enable_chunked_prefill=chunked,
                                         policy=policy),
        model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=2048),
        cache_config=CacheConfig(block_size=BS),
        additional_config=extra or {},
    )
    vc.cache_config.num_gpu_blocks = num_blocks
    kv = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=BS, num_kv_heads=1, head_size=1,
                                                      dtype=torch.float32))])
    return cls(vllm_config=vc, kv_cache_config=kv, structured_output_manager=StructuredOutputManager(vc),
               block_size=BS, log_stats=False)


init_none_hash(sha256)
HASHER = get_request_block_hasher(BS, sha256)


def make_request(rid, prompt_len, max_tokens=3, arrival=None, tok=None, extra_args=None):
    tok = tok if tok is not None else 3 + (hash(rid) % 900)
    return Request(request_id=rid, prompt_token_ids=[tok] * prompt_len, pooling_params=None,
                   sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True, extra_args=extra_args),
                   arrival_time=arrival, block_hasher=HASHER)


def step(sched, observe=None):
    """One engine step with a fake model runner; returns [(req_id, tokens)] in scheduling order."""
    out = sched.schedule()
    if observe is not None:
        observe(out)
    ids = list(out.num_scheduled_tokens)
    sampled = [[7] if sched.requests[r].num_computed_tokens >= sched.requests[r].num_tokens else [] for r in ids]
    sched.update_from_output(out, ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                                    sampled_token_ids=sampled))
    return list(out.num_scheduled_tokens.items())


def random_workload(seed):
    rng = random.Random(seed)
    small_pool = seed % 2 == 1
    params = dict(budget=rng.choice([16, 32, 64, 128]), max_seqs=rng.choice([2, 4, 8]),
                  num_blocks=rng.randint(20, 30) if small_pool else 1000)
    reqs = []  # (step to add at, id, prompt_len, max_tokens, token)
    for i in range(rng.randint(8, 20)):
        reqs.append((rng.randint(0, 30), f"r{i}", rng.randint(1, 200), rng.randint(1, 24), rng.randint(3, 6)))
    return params, sorted(reqs)


def run_workload(sched, reqs, max_steps=2000, observe=None):
    trace, pending, t = [], list(reqs), 0
    for s in range(max_steps):
        while pending and pending[0][0] <= s:
            _, rid, n, m, tok = pending.pop(0)
            t += 1
            sched.add_request(make_request(rid, n, m, arrival=1000.0 + t, tok=tok))
        trace.append(step(sched, observe))
        if not pending and not sched.has_unfinished_requests():
            return trace
    raise AssertionError("workload did not finish")


# -- (a) fcfs with no limits is upstream -----------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("extra", [{}, {"sarathi_ext": {"policy": "fcfs", "chunk": "static", "apc": False}}])
def test_fcfs_is_upstream_step_by_step(model_dir, seed, extra):
    params, reqs = random_workload(seed)
    up = make_scheduler(model_dir, Scheduler, **params)
    ours = make_scheduler(model_dir, SarathiExtScheduler, extra=extra, **params)
    assert isinstance(ours.waiting, FCFSRequestQueue)
    preempted = []
    trace_up = run_workload(up, reqs, observe=lambda o: preempted.append(len(o.preempted_req_ids)))
    trace_ours = run_workload(ours, reqs)
    assert trace_ours == trace_up
    if params["num_blocks"] < 100 and seed == 1:
        assert sum(preempted) > 0, "the small KV pool should force preemption"


def test_small_pool_preempts(model_dir):
    # A workload that surely preempts, run through both.
    reqs = [(0, f"r{i}", 150, 40, 3 + i) for i in range(4)]
    up = make_scheduler(model_dir, Scheduler, budget=64, max_seqs=4, num_blocks=24)
    ours = make_scheduler(model_dir, SarathiExtScheduler, budget=64, max_seqs=4, num_blocks=24)
    preempted = []
    assert run_workload(ours, reqs) == run_workload(up, reqs, observe=lambda o: preempted.append(len(o.preempted_req_ids)))
    assert sum(preempted) > 0


@pytest.mark.parametrize("policy", ["aging", "spf", "psjf"])
@pytest.mark.parametrize("seed", range(4))
def test_policies_finish_random_workloads(model_dir, policy, seed):
    params, reqs = random_workload(seed)
    extra = {"sarathi_ext": {"policy": policy, "apc": True, "apc_l_min": min(16, params["budget"])}}
    sched = make_scheduler(model_dir, extra=extra, **params)
    assert isinstance(sched.waiting, PolicyRequestQueue)
    run_workload(sched, reqs)
    assert len(sched.waiting) == 0 and not sched.running


# -- (b) admission order is the core's ------------------------------------------------------------

def admission_order(sched, max_steps=500):
    order = []
    for _ in range(max_steps):
        for rid, _ in step(sched):
            if rid not in order:
                order.append(rid)
        if not sched.has_unfinished_requests():
            return order
    raise AssertionError("did not finish")


def test_aging_admission_order_matches_core(model_dir):
    rng = random.Random(7)
    alpha, beta = 2.0, -1.0
    specs = [(f"r{i}", rng.randint(1, 120), 100.0 + rng.uniform(0, 60)) for i in range(12)]
    sched = make_scheduler(model_dir, budget=256, max_seqs=1,
                           extra={"sarathi_ext": {"policy": "aging", "aging_alpha": alpha, "aging_beta": beta}})
    for rid, n, a in specs:
        sched.add_request(make_request(rid, n, max_tokens=2, arrival=a))
    views = []
    for k, (rid, n, a) in enumerate(specs):
        v = RequestView(rid, a, n)
        v._seq = k
        views.append(v)
    expected = [v.req_id for v in naive_aging_order(views, now=500.0, alpha=alpha, beta=beta)]
    # The same by the heap key of Eq. 4, max first.
    by_key = [v.req_id for v in sorted(views, key=lambda v: (-Aging(alpha, beta).heap_key(v), v.arrival_time))]
    assert expected == by_key
    assert expected != [rid for rid, _, _ in sorted(specs, key=lambda s: s[2])], "aging should differ from fcfs"
    assert admission_order(sched) == expected


def test_psjf_admission_order_scored_first_then_fcfs(model_dir):
    sched = make_scheduler(model_dir, budget=256, max_seqs=1, extra={"sarathi_ext": {"policy": "psjf"}})
    specs = [("a", None), ("b", 50), ("c", 3.5), ("d", None), ("e", 10)]
    for k, (rid, score) in enumerate(specs):
        extra = None if score is None else ({"predicted_len": score} if k % 2 else {"length_score": score})
        sched.add_request(make_request(rid, 20, max_tokens=2, arrival=10.0 + k, extra_args=extra))
    assert admission_order(sched) == ["c", "e", "b", "a", "d"]


def test_spf_admission_order(model_dir):
    sched = make_scheduler(model_dir, budget=256, max_seqs=1, extra={"sarathi_ext": {"policy": "spf"}})
    lens = {"a": 90, "b": 10, "c": 40, "d": 10}
    for k, (rid, n) in enumerate(lens.items()):
        sched.add_request(make_request(rid, n, max_tokens=2, arrival=10.0 + k))
    assert admission_order(sched) == ["b", "d", "c", "a"]


# -- (c) LPRS and APC ------------------------------------------------------------------------------

def linear_predictor(x):
    """ms = 5 + 0.5 * scheduled_tokens: a hand-made stand-in for the MLP (swapped in after the
    scheduler loaded a real exported artifact)."""
    return 5.0 + 0.5 * np.asarray(x)[:, 12]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from predictors.latency.artifact import export
    from predictors.latency.model import LatencyMLP

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("pred") / "tiny.pt"
    export(LatencyMLP(hidden_sizes=(4,), dropout=0.0), path, provenance={"source": "test"}, metrics={})
    return str(path)


class Recorder:
    """Snapshots the running batch before each step and the scheduled chunks after it."""

    def __init__(self, sched):
        self.sched = sched
        self.steps = []

    def before(self):
        return [(r.request_id, r.is_prefill_chunk, r.num_computed_tokens) for r in self.sched.running]

    def run(self, max_steps=1000):
        for _ in range(max_steps):
            snap = self.before()
            rows = []

            def observe(out):
                for rid, n in out.num_scheduled_tokens.items():
                    r = self.sched.requests[rid]
                    rows.append((rid, n, r.num_computed_tokens - n, r.num_tokens))
            step(self.sched, observe)
            self.steps.append((snap, rows))
            if not self.sched.has_unfinished_requests():
                return self.steps
        raise AssertionError("did not finish")


def replay_batches(steps):
    """For each prefill chunk: (batch before it, remaining, processed, chunk), from the snapshot."""
    for snap, rows in steps:
        decoding = {rid for rid, is_prefill, _ in snap if not is_prefill}
        batch = BatchState()
        for rid, _, computed in snap:
            if rid in decoding:
                batch.add_decode(computed)
        decodes = batch.decode_tokens
        out = []
        for rid, n, processed, num_tokens in rows:
            if rid in decoding:
                continue
            out.append((BatchState(**{k: getattr(batch, k) for k in BatchState.__slots__}), num_tokens - processed,
                        processed, n))
            batch.add_prefill(n, processed)
        yield decodes, out


def test_lprs_chunks_equal_core_choice(model_dir, artifact):
    budget, target = 128, 30.0  # 30 ms = 50 tokens under the linear predictor
    extra = {"sarathi_ext": {"chunk": "lprs", "lprs_predictor": artifact, "lprs_target_ms": target}}
    sched = make_scheduler(model_dir, budget=budget, max_seqs=8, extra=extra)
    assert sched.sarathi_ext_lprs is not None  # the exported artifact loaded
    sched.sarathi_ext_lprs.predictor = linear_predictor
    for i in range(6):
        sched.add_request(make_request(f"r{i}", 100 + 37 * i, max_tokens=5, arrival=10.0 + i))
    steps = Recorder(sched).run()
    ref = LPRS(linear_predictor, target, 16, 1.0, 4.0)
    checked = clamped = 0
    for _, chunks in replay_batches(steps):
        for batch, remaining, processed, n in chunks:
            assert n == ref.choose(remaining, processed, budget, batch), (batch, remaining, processed, n)
            checked += 1
            clamped += n < min(remaining, budget - batch.scheduled_tokens)
    assert checked > 6 and clamped > 0
    assert sched.sarathi_ext_stats()["lprs_clamped"] > 0


def test_apc_caps_prefills_per_step(model_dir):
    budget, c_max, l_min, max_seqs = 128, 2, 16, 8
    extra = {"sarathi_ext": {"apc": True, "apc_c_max": c_max, "apc_l_min": l_min}}
    sched = make_scheduler(model_dir, budget=budget, max_seqs=max_seqs, extra=extra)
    up = make_scheduler(model_dir, Scheduler, budget=budget, max_seqs=max_seqs)
    for s in (sched, up):
        for i in range(8):
            s.add_request(make_request(f"r{i}", 40, max_tokens=4, arrival=10.0 + i))
    apc = ActivePrefillControl(c_max, l_min)
    most = 0
    for decodes, chunks in replay_batches(Recorder(sched).run()):
        u0 = decodes
        cap0 = apc.activity_cap(max_seqs, decodes, budget, u0)
        assert len(chunks) <= cap0 <= c_max
        most = max(most, len(chunks))
    assert most == c_max
    # Upstream admits more than C_max prefills in its first step on the same workload.
    first = step(up)
    assert len(first) > c_max
    assert sched.sarathi_ext_stats()["apc_blocked_by_activity_cap"] > 0


class AlignedScheduler(SarathiExtScheduler):
    chunk_alignment = 16


def test_chunk_alignment_rounds_non_final_chunks(model_dir, artifact):
    extra = {"sarathi_ext": {"chunk": "lprs", "lprs_predictor": artifact, "lprs_target_ms": 27.0, "lprs_delta": 5}}
    sched = make_scheduler(model_dir, AlignedScheduler, budget=128, extra=extra)
    sched.sarathi_ext_lprs.predictor = linear_predictor
    for i in range(5):
        sched.add_request(make_request(f"r{i}", 90 + 31 * i, max_tokens=3, arrival=10.0 + i))
    nonfinal = 0
    for _, chunks in replay_batches(Recorder(sched).run()):
        for _, remaining, _, n in chunks:
            if n < remaining:
                assert n % 16 == 0, n
                nonfinal += 1
    assert nonfinal > 0 and sched.sarathi_ext_stats()["aligned"] > 0


# -- (d) both variants build ------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [SarathiExtScheduler, SarathiExtAsyncScheduler])
def test_sync_and_async_build_and_run(model_dir, cls, tmp_path):
    extra = {"sarathi_ext": {"policy": "aging", "apc": True, "profile_csv": str(tmp_path / "prof.csv")}}
    sched = make_scheduler(model_dir, cls, extra=extra)
    assert isinstance(sched.waiting, PolicyRequestQueue)
    for i in range(4):
        sched.add_request(make_request(f"r{i}", 30 + 20 * i, max_tokens=3, arrival=10.0 + i))
    for _ in range(50):
        step(sched)
        if not sched.has_unfinished_requests():
            break
    assert not sched.has_unfinished_requests()
    rows = sched.sarathi_ext_profiler.rows
    sched.shutdown()
    assert rows > 0
    lines = (tmp_path / "prof.csv").read_text().splitlines()
    assert len(lines) == rows + 1 and lines[0].startswith("prefill_tokens,")


# -- (e) bad parameters fail at construction --------------------------------------------------------

@pytest.mark.parametrize("values, field", [
    ({"policy": "nope"}, "policy"),
    ({"aging_alpha": -1}, "aging_alpha"),
    ({"chunk": "lprs"}, "lprs_predictor"),
    ({"admission": "skip"}, "admission"),
    ({"apc": True, "apc_l_min": 4096}, "apc_l_min"),
    ({"bogus": 1}, "bogus"),
    ({"apc": "yes"}, "apc"),
])
def test_bad_parameters_fail_at_construction(model_dir, values, field):
    with pytest.raises(ValueError) as e:
        make_scheduler(model_dir, extra={"sarathi_ext": values})
    msg = str(e.value)
    assert msg.startswith(f"additional_config sarathi_ext.{field}:") and "\n" not in msg


def test_mismatched_sidecar_fails_at_construction(model_dir, artifact, tmp_path):
    import shutil

    bad = tmp_path / "bad.pt"
    shutil.copy(artifact, bad)
    meta = json.loads(open(artifact + ".json").read())
    meta["feature_names"][0], meta["feature_names"][1] = meta["feature_names"][1], meta["feature_names"][0]
    (tmp_path / "bad.pt.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"^additional_config sarathi_ext\.lprs_predictor: .*feature order"):
        make_scheduler(model_dir, extra={"sarathi_ext": {"chunk": "lprs", "lprs_predictor": str(bad)}})


def test_priority_policy_conflict(model_dir):
    with pytest.raises(ValueError, match=r"^additional_config sarathi_ext\.policy: .*priority"):
        make_scheduler(model_dir, policy="priority", extra={"sarathi_ext": {"policy": "aging"}})


def test_lprs_needs_chunked_prefill(model_dir, artifact):
    with pytest.raises(ValueError, match=r"sarathi_ext\.apc: needs chunked prefill"):
        make_scheduler(model_dir, chunked=False, budget=2048, extra={"sarathi_ext": {"apc": True}})
