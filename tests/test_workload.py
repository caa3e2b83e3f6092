"""Workloads: arrival processes, the APC mix, Sarathi's truncation, trace parsing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sarathi_ext.sim.workload import (
    WorkloadError, apc_mix_lengths, make_workload, read_trace, truncate_context,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "traces").is_dir(), reason=f"shared data folder {DATA} is absent")


def test_deterministic_per_seed():
    a = make_workload("apc-mix", 200, "poisson", 0.1, seed=7)
    b = make_workload("apc-mix", 200, "poisson", 0.1, seed=7)
    c = make_workload("apc-mix", 200, "poisson", 0.1, seed=8)
    for field in ("arrivals", "prompt_lens", "output_lens"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.prompt_lens, c.prompt_lens)
    assert not np.array_equal(a.arrivals, c.arrivals)


def test_fixed_arrivals_exact():
    w = make_workload("apc-mix", 5, "fixed", 0.5, seed=0)
    assert w.arrivals.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert w.name == "apc-mix/fixed" and len(w) == 5


def test_burst_all_zero():
    w = make_workload("apc-mix", 50, "burst", seed=3)
    assert w.arrivals.tolist() == [0.0] * 50


@pytest.mark.parametrize("kind", ["poisson", "gamma"])
def test_random_arrivals_start_at_zero_and_never_go_back(kind):
    w = make_workload("apc-mix", 300, kind, 0.2, seed=1)
    assert w.arrivals[0] == 0.0 and (np.diff(w.arrivals) >= 0).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_apc_mix_ratio(seed):
    # P(long) = 1/50 (49:1). n = 5000: mean 100, sd = sqrt(5000 * 0.02 * 0.98) = sqrt(98) = 9.9;
    # 4 sd = 39.6 -> the long count lies in [61, 139].
    w = make_workload("apc-mix", 5000, "burst", seed=seed, output_len=16)
    long = int((w.prompt_lens >= 200).sum())
    sd = math.sqrt(5000 * (1 / 50) * (49 / 50))
    assert abs(long - 100) <= 4 * sd
    assert (w.output_lens == 16).all()


def test_apc_mix_ranges_exact():
    # 50000 draws: ~49000 short over 21 values and ~1000 long over 21 values, so both ends of both
    # ranges appear (P(an end is missing) <= 21 * (20/21)^1000 ~ 1e-20).
    prompts, outputs = apc_mix_lengths(50_000, np.random.default_rng(0), 8)
    short, long = prompts[prompts < 200], prompts[prompts >= 200]
    assert set(short.tolist()) == set(range(30, 51))
    assert set(long.tolist()) == set(range(200, 221))
    assert (outputs == 8).all()


def test_truncate_context_by_hand():
    # total 290 + 905 = 1195 > 512: excess 683.
    #   prompt: ceil(683*290/1195) = ceil(165.75) = 166 -> 290 - 166 = 124
    #   output: ceil(683*905/1195) = ceil(517.25) = 518 -> 905 - 518 = 387    (124 + 387 = 511)
    # (400, 100) fits in 512 and is untouched.
    p, o = truncate_context(np.array([290, 400]), np.array([905, 100]), 512)
    assert p.tolist() == [124, 400] and o.tolist() == [387, 100]


def test_truncate_context_exact_share():
    # 600 + 600 = 1200, max 1000: excess 200, 100 from each
    p, o = truncate_context(np.array([600]), np.array([600]), 1000)
    assert (p.tolist(), o.tolist()) == ([500], [500])


def test_max_gen_caps_output():
    w = make_workload("apc-mix", 10, "burst", output_len=40, max_gen=25)
    assert (w.output_lens == 25).all()


def write(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    return path


def test_read_trace_ok(tmp_path):
    path = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,5\n\n1.5,20,7\n")
    p, o, a = read_trace(path)
    assert p.tolist() == [10, 20] and o.tolist() == [5, 7] and a.tolist() == [0.0, 1.5]


@pytest.mark.parametrize(
    "text,where,what",
    [
        ("num_prefill_tokens,num_decode_tokens\n10,5\nten,5\n", ":3:", "num_prefill_tokens"),
        ("num_prefill_tokens,num_decode_tokens\n10,5\n10,2.5\n", ":3:", "num_decode_tokens"),
        ("num_prefill_tokens,num_decode_tokens\n10,5\n\n10,5,1\n", ":4:", "fields"),
        ("num_prefill_tokens,num_decode_tokens\n10,5\n0,5\n", ":3:", ">= 1"),
        ("num_prefill_tokens,num_decode_tokens\n-3,5\n", ":2:", "num_prefill_tokens"),
        ("num_prefill_tokens,other\n10,5\n", ":1:", "num_decode_tokens"),
        ("", ":1:", "empty"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\nsoon,1,1\n", ":3:", "arrived_at"),
    ],
)
def test_read_trace_errors_name_file_and_line(tmp_path, text, where, what):
    path = write(tmp_path, text)
    with pytest.raises(WorkloadError) as e:
        read_trace(path)
    assert f"{path}{where}" in str(e.value) and what in str(e.value)


def test_read_trace_missing_file(tmp_path):
    with pytest.raises(WorkloadError, match="cannot open"):
        read_trace(tmp_path / "nope.csv")


def test_make_workload_errors():
    with pytest.raises(WorkloadError, match="num_requests"):
        make_workload("apc-mix", 0)
    with pytest.raises(WorkloadError, match="interval"):
        make_workload("apc-mix", 5, "fixed", 0.0)
    with pytest.raises(WorkloadError, match="arrival"):
        make_workload("apc-mix", 5, "weekly")
    with pytest.raises(WorkloadError, match="no such file"):
        make_workload("/nonexistent.csv", 5)


@needs_data
def test_sharegpt_row_truncated(tmp_path):
    # Row 2 of the Vidur ShareGPT trace is (290, 905): the hand example above
    p, o, a = read_trace(DATA / "traces" / "sharegpt_8k_llama2_tokens.csv")
    assert a is None and len(p) == 30_731
    assert (p[1], o[1]) == (290, 905)
    tp, to = truncate_context(p[1:2], o[1:2], 512)
    assert (tp[0], to[0]) == (124, 387)


@needs_data
def test_azure_trace_arrivals(monkeypatch):
    monkeypatch.setenv("SARATHI_EXT_DATA", str(DATA))
    w = make_workload("azure-conv", 2, "trace")
    # first two rows: (0.0, 374, 44) and (4.314579, 396, 109)
    assert w.arrivals.tolist() == [0.0, 4.314579]
    assert w.prompt_lens.tolist() == [374, 396] and w.output_lens.tolist() == [44, 109]
