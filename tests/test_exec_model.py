"""Execution-time models, checked against arithmetic done by hand (in the comments)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from sarathi_ext.core.features import FEATURE_NAMES, BatchState
from sarathi_ext.sim.exec_model import (
    NoisyModel,
    ProfiledRooflineModel,
    ProfileModel,
    RooflineModel,
    VidurLinearProfile,
    build_exec_model,
)
from sarathi_ext.sim.hardware import GPUS, GPUSpec, get_gpu
from sarathi_ext.sim.models import MODELS, ModelSpec, get_model, kv_capacity_blocks

PROFILES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "profiles" / "compute"

# 2 layers, hidden 8, 2 q heads and 1 kv head of dim 4, MLP 16, vocab 32.
TINY = ModelSpec("tiny", 2, 8, 2, 1, 4, 16, 32, tie_embeddings=False)
# 1e9 FLOP/s and 1e6 B/s: 1 FLOP = 1e-6 ms, 1 byte = 1e-3 ms (ridge at 1000 FLOP/byte).
TOY = GPUSpec("toy", peak_tflops=1e-3, mem_bw_gbps=1e-3, mem_gib=1.0)


def batch(decodes=(), prefills=()) -> np.ndarray:
    b = BatchState()
    for ctx in decodes:
        b.add_decode(ctx)
    for chunk, processed in prefills:
        b.add_prefill(chunk, processed)
    return b.features()


def toy_roofline(**kw) -> RooflineModel:
    kw = {"overhead_ms": 0.5, "compute_efficiency": 1.0, "bandwidth_efficiency": 1.0, **kw}
    return RooflineModel(TOY, TINY, **kw)


# -- model shapes ---------------------------------------------------------------------------------
def test_tiny_model_counts():
    # q 8x8=64, k 8x4=32, v 32, o 64 -> attn 192; gate/up/down 3x8x16=384 -> 576 matmul params.
    assert TINY.layer_matmul_params == 576
    # + two RMSNorms of 8 = 592 per layer. embed 32x8=256, lm_head 256, final norm 8:
    # 256 + 2x592 + 8 + 256 = 1704.
    assert TINY.num_params == 1704
    assert TINY.weight_bytes == 3408
    # 2 x (2 layers x 576 + lm_head 256) = 2816.
    assert TINY.linear_flops_per_token == 2816
    # 2 (K,V) x 2 layers x 1 kv head x 4 dims x 2 bytes = 32.
    assert TINY.kv_bytes_per_token == 32
    tied = ModelSpec("tied", 2, 8, 2, 1, 4, 16, 32, tie_embeddings=True)
    assert tied.num_params == 1704 - 256
    assert tied.linear_flops_per_token == 2816  # the tied table is still multiplied against


def test_public_param_counts():
    # Totals published on the models' Hugging Face pages (safetensors metadata).
    assert get_model("llama-2-7b").num_params == 6_738_415_616
    assert get_model("llama-3.1-8b").num_params == 8_030_261_248
    assert get_model("qwen3-8b").num_params == 8_190_735_360
    assert get_model("deepseek-r1-distill-qwen-7b").num_params == 7_615_616_512
    # Qwen3-8B KV: 2 x 36 layers x 8 heads x 128 x 2 bytes = 147456 bytes per token.
    assert get_model("qwen3-8b").kv_bytes_per_token == 147_456


def test_registries_required_entries_and_errors():
    for k in ("rtx4090", "a100-40gb", "a100-80gb", "h100-80gb", "h200", "rtx-pro-5000-72gb",
              "ascend-910b"):
        assert k in GPUS
    for k in ("qwen3-8b", "llama-3.1-8b", "deepseek-r1-distill-qwen-7b", "llama-2-7b",
              "llama-3-8b"):
        assert k in MODELS
    with pytest.raises(KeyError, match="valid: .*rtx4090"):
        get_gpu("v100")
    with pytest.raises(ValueError, match="valid: .*qwen3-8b"):
        get_model("gpt-5")


def test_kv_capacity_qwen3_8b_rtx4090():
    # 24 GiB x 0.9 = 23,192,823,398.4 B; weights 8,190,735,360 x 2 = 16,381,470,720 B;
    # reserve 1 GiB = 1,073,741,824 B -> 5,737,610,854.4 B left.
    # Block = 16 tokens x 147,456 B = 2,359,296 B -> 5,737,610,854.4 / 2,359,296 = 2431.9 -> 2431.
    assert kv_capacity_blocks(get_gpu("rtx4090"), get_model("qwen3-8b")) == 2431


def test_kv_capacity_weights_do_not_fit():
    small = GPUSpec("small", 100.0, 500.0, mem_gib=8.0)
    with pytest.raises(ValueError, match="do not fit"):
        kv_capacity_blocks(small, get_model("qwen3-8b"))


# -- roofline -------------------------------------------------------------------------------------
def test_roofline_single_decode_by_hand():
    m = toy_roofline()
    x = batch(decodes=[10])
    # Per layer: max(2x576 FLOP x 1e-6, 576x2 B x 1e-3) = max(0.001152, 1.152) = 1.152; x2 = 2.304.
    # lm_head, 1 request: max(2x256 x 1e-6, 256x2 x 1e-3) = 0.512.
    # Attention per context token: max(4 x 2 layers x 2 heads x 4 dims = 64 FLOP x 1e-6,
    # 32 B x 1e-3) = 0.032; x 10 tokens = 0.32. Overhead 0.5.
    # Total 2.304 + 0.512 + 0.32 + 0.5 = 3.636.
    assert m(x[None])[0] == pytest.approx(3.636, rel=1e-12)
    assert m.time_one(x) == pytest.approx(3.636, rel=1e-12)


def test_roofline_single_prefill_chunk_by_hand():
    m = toy_roofline()
    x = batch(prefills=[(2000, 1000)])
    # Per layer: max(2x576x2000 = 2,304,000 FLOP x 1e-6 = 2.304, 1.152) = 2.304; x2 = 4.608.
    # lm_head on 1 request: 0.512.
    # Attention pairs c(p + c/2) = 2000 x (1000 + 1000) = 4e6; x 64 FLOP x 1e-6 = 256 ms; KV read
    # (1000 + 2000) x 32 B x 1e-3 = 96 ms -> 256. Total 4.608 + 0.512 + 256 + 0.5 = 261.62.
    assert m(x[None])[0] == pytest.approx(261.62, rel=1e-12)
    assert m.time_one(x) == pytest.approx(261.62, rel=1e-12)


def test_roofline_prefill_pairs_exact_for_equal_chunks():
    m = toy_roofline(overhead_ms=0.0)
    two = batch(prefills=[(1000, 0), (1000, 500)])
    # Exact pairs 1000x(0+500) + 1000x(500+500) = 1.5e6; the estimate (P*Q + P^2/2)/n =
    # (2000x500 + 2000^2/2)/2 = 1.5e6 too. x 64 x 1e-6 = 96 ms vs KV (500+2000) x 32e-3 = 80 ms.
    # Linear: 2 layers x 2.304 (2000 tokens, as above) + lm_head for 2 requests
    # max(2 x 512e-6, 0.512) = 0.512.
    assert m.time_one(two) == pytest.approx(4.608 + 0.512 + 96.0, rel=1e-12)


def test_roofline_empty_batch_is_free_and_paths_agree():
    m = RooflineModel("rtx4090", "qwen3-8b")
    assert m(batch()[None])[0] == 0.0
    assert m.time_one(batch()) == 0.0
    rows = np.stack([
        batch(),
        batch(decodes=[256]),
        batch(decodes=[400] * 128),
        batch(decodes=[100, 3000], prefills=[(512, 0), (64, 2048)]),
    ])
    np.testing.assert_allclose(m(rows), [m.time_one(r) for r in rows], rtol=1e-12)


def test_roofline_tensor_parallel_divides_work_not_overhead():
    x = batch(decodes=[300] * 8, prefills=[(256, 128)])
    one, two = toy_roofline(), toy_roofline(tp=2)
    assert two.time_one(x) - 0.5 == pytest.approx((one.time_one(x) - 0.5) / 2, rel=1e-12)


# -- noise ----------------------------------------------------------------------------------------
def test_noise_sigma_zero_is_identity():
    base = toy_roofline()
    rows = np.stack([batch(decodes=[10]), batch(prefills=[(2000, 1000)])])
    noisy = NoisyModel(base, sigma=0.0, seed=1)
    np.testing.assert_array_equal(noisy(rows), base(rows))
    assert noisy.time_one(rows[0]) == base.time_one(rows[0])


def test_noise_is_deterministic_per_seed_and_shared_by_both_paths():
    base = toy_roofline()
    rows = np.stack([batch(decodes=[10 + i]) for i in range(50)])
    a = NoisyModel(base, 0.2, seed=7)(rows)
    b = NoisyModel(base, 0.2, seed=7)
    np.testing.assert_array_equal(a, [b.time_one(r) for r in rows])
    assert not np.array_equal(a, NoisyModel(base, 0.2, seed=8)(rows))
    assert not np.array_equal(a, base(rows))


def test_noise_is_lognormal_with_sigma():
    ones = lambda x: np.ones(len(x))  # noqa: E731
    logs = np.log(NoisyModel(ones, 0.1, seed=0)(np.zeros((20000, 16))))
    assert abs(logs.mean()) < 0.005  # 5 standard errors (0.1 / sqrt(20000) = 0.0007) is 0.0035
    assert logs.std() == pytest.approx(0.1, rel=0.03)


# -- measured profiles ----------------------------------------------------------------------------
def write_features_csv(path: Path, rows: np.ndarray, latency: np.ndarray) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*FEATURE_NAMES, "latency_ms"])
        for r, y in zip(rows, latency):
            w.writerow([repr(float(v)) for v in r] + [repr(float(y))])


def random_batches(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        decodes = rng.integers(1, 4000, size=rng.integers(0, 64)).tolist()
        prefills = [(int(rng.integers(1, 2048)), int(rng.integers(0, 4096)))
                    for _ in range(rng.integers(0, 4))]
        out.append(batch(decodes or [1], prefills))
    return np.stack(out)


def test_profile_model_recovers_linear_ground_truth(tmp_path):
    # bias, prefill, decode, requests, sum ctx, processed, P*Q, P^2 (ProfileModel.BASIS order).
    truth = np.array([4.0, 0.02, 0.05, 0.1, 1e-4, 3e-4, 2e-8, 5e-7])
    rows = random_batches(300)
    latency = ProfileModel.basis(rows) @ truth
    path = tmp_path / "profile.csv"
    write_features_csv(path, rows, latency)
    model = ProfileModel.from_csv(path)
    np.testing.assert_allclose(model.coef, truth, rtol=1e-6)
    np.testing.assert_allclose(model(rows), latency, rtol=1e-9)
    assert model.time_one(rows[3]) == pytest.approx(latency[3], rel=1e-9)
    assert model(batch()[None])[0] == 0.0


def test_profile_csv_non_numeric_value_names_file_and_line(tmp_path):
    rows = random_batches(10)
    path = tmp_path / "bad.csv"
    write_features_csv(path, rows, np.ones(10))
    lines = path.read_text().splitlines()
    lines[2] = "abc," + lines[2].split(",", 1)[1]  # file line 3 = second data row
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"bad\.csv, line 3: column 'prefill_tokens'"):
        ProfileModel.from_csv(path)


def test_profile_csv_missing_column(tmp_path):
    path = tmp_path / "nolat.csv"
    path.write_text(",".join(FEATURE_NAMES) + "\n" + ",".join(["1"] * 16) + "\n")
    with pytest.raises(ValueError, match=r"nolat\.csv, line 1: missing column\(s\) latency_ms"):
        ProfileModel.from_csv(path)


def write_vidur_csv(path: Path) -> None:
    # Two token counts, one profiled twice; every op median 0.01 x tokens except emb (0.5 fixed).
    ops = ("emb", *VidurLinearProfile.LAYER_OPS)
    header = [f"time_stats.{o}.median" for o in ops] + [
        "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
        "num_tokens", "num_tensor_parallel_workers",
    ]
    shape = ["2", "1", "8", "16", "32", "True"]
    rows = [(10, 1, 1.0), (10, 1, 3.0), (30, 1, 1.0), (10, 2, 99.0)]  # (tokens, tp, scale)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for n, tp, s in rows:
            w.writerow(["0.5"] + [str(0.01 * n * s)] * 9 + shape + [str(n), str(tp)])


def test_vidur_profile_sums_ops_and_interpolates(tmp_path):
    path = tmp_path / "mlp.csv"
    write_vidur_csv(path)
    prof = VidurLinearProfile.from_csv(path)
    # n=10 twice: 9 ops x 0.1 = 0.9 and 9 x 0.3 = 2.7 -> mean 1.8. n=30: 9 x 0.3 = 2.7.
    # The TP=2 row is ignored.
    np.testing.assert_allclose(prof.layer_ms(np.array([10.0, 20.0, 30.0, 60.0])),
                               [1.8, 2.25, 2.7, 5.4])
    assert prof.layer_ms_one(20.0) == pytest.approx(2.25)
    # Profile shape equals TINY's, so the roofline's layer term is replaced 1:1.
    m = ProfiledRooflineModel(prof, TOY, TINY, overhead_ms=0.0, compute_efficiency=1.0,
                              bandwidth_efficiency=1.0)
    assert m.param_scale == 1.0
    x = batch(decodes=[10] * 20)
    # 2 layers x 2.25 + emb 0.5 + lm_head max(20x512e-6, 0.512) + 200 ctx x 0.032 = 11.912.
    assert m.time_one(x) == pytest.approx(11.912, rel=1e-12)
    assert m(x[None])[0] == pytest.approx(11.912, rel=1e-12)


@pytest.mark.skipif(not PROFILES.is_dir(), reason="../shared/data/profiles not present")
def test_vidur_real_profile_loads():
    prof = VidurLinearProfile.from_csv(PROFILES / "a100" / "llama3-8b_mlp.csv")
    assert prof.shape["n_expanded_embd"] == 14336
    m = ProfiledRooflineModel(prof, "a100-80gb", "llama-3-8b")
    assert m.param_scale == 1.0
    assert prof.layer_ms(np.array([1.0]))[0] == pytest.approx(0.303, abs=1e-6)


# -- factory --------------------------------------------------------------------------------------
def test_build_exec_model(tmp_path):
    assert isinstance(build_exec_model("roofline", "rtx4090", "qwen3-8b"), RooflineModel)
    noisy = build_exec_model("roofline", "rtx4090", "qwen3-8b", noise_sigma=0.1, seed=3)
    assert isinstance(noisy, NoisyModel) and noisy.seed == 3
    path = tmp_path / "mlp.csv"
    write_vidur_csv(path)
    assert isinstance(build_exec_model("vidur", "a100-80gb", "llama-3-8b", str(path)),
                      ProfiledRooflineModel)
    with pytest.raises(ValueError, match="needs a profile"):
        build_exec_model("profile", "rtx4090", "qwen3-8b")
    with pytest.raises(ValueError, match="valid: roofline, profile, vidur"):
        build_exec_model("magic", "rtx4090", "qwen3-8b")
