"""The 16 batch features of seed 001, Tables 1-2."""

from __future__ import annotations

import numpy as np

from sarathi_ext.core import FEATURE_NAMES, NUM_FEATURES, BatchState, MemoryState

DOCUMENTED = (
    # Table 1 (raw)
    "prefill_tokens", "decode_tokens", "batch_request_count", "sum_decode_context_len",
    "max_decode_context_len", "prefill_processed_tokens", "max_prefill_processed_tokens",
    "gpu_mem_used_mb", "gpu_mem_free_mb", "cuda_allocated_mb", "cuda_reserved_mb",
    # Table 2 (derived)
    "bias", "scheduled_tokens", "avg_decode_ctx", "decode_ctx_interaction", "prefill_interaction",
)


def test_feature_names_order():
    assert FEATURE_NAMES == DOCUMENTED
    assert NUM_FEATURES == 16


def batch(memory=None):
    # 2 decodes (contexts 100, 300) and one committed prefill chunk of 40 tokens, 24 already done
    b = BatchState() if memory is None else BatchState(memory=memory)
    b.add_decode(100)
    b.add_decode(300)
    b.add_prefill(40, 24)
    return b


def test_committed_batch_features():
    b = batch()
    assert b.scheduled_tokens == 42  # 40 + 2
    assert b.num_prefills == 1
    # prefill 40, decode 2, requests 3, ctx sum 400 / max 300, processed 24 / max 24, memory 0,
    # bias 1, scheduled 42, avg ctx 400/2 = 200, 2*200 = 400, 40*24 = 960
    expected = [40, 2, 3, 400, 300, 24, 24, 0, 0, 0, 0, 1, 42, 200, 400, 960]
    assert b.features().tolist() == expected


def test_features_with_candidate_chunk():
    # plus a candidate chunk c = 64 of a request with 128 tokens already prefilled:
    #  0 prefill_tokens              40 + 64 = 104
    #  1 decode_tokens               2
    #  2 batch_request_count         3 + 1 = 4
    #  3 sum_decode_context_len      100 + 300 = 400
    #  4 max_decode_context_len      300
    #  5 prefill_processed_tokens    24 + 128 = 152
    #  6 max_prefill_processed       max(24, 128) = 128
    #  7-10 memory                   0
    # 11 bias                        1
    # 12 scheduled_tokens            104 + 2 = 106
    # 13 avg_decode_ctx              400 / max(2, 1) = 200
    # 14 decode_ctx_interaction      2 * 200 = 400
    # 15 prefill_interaction         104 * 152 = 15808
    x = batch().features_with_chunk(np.array([64]), processed=128)
    assert x.shape == (1, 16)
    assert x[0].tolist() == [104, 2, 4, 400, 300, 152, 128, 0, 0, 0, 0, 1, 106, 200, 400, 15808]


def test_one_row_per_candidate():
    # c in {1, 10}, processed 8: prefill 41 / 50, processed 32, max 24 -> 24, scheduled 43 / 52,
    # interaction 41*32 = 1312 / 50*32 = 1600
    x = batch().features_with_chunk(np.array([1, 10]), processed=8)
    assert x.shape == (2, 16)
    assert x[:, 0].tolist() == [41, 50]
    assert x[:, 5].tolist() == [32, 32] and x[:, 6].tolist() == [24, 24]
    assert x[:, 12].tolist() == [43, 52]
    assert x[:, 15].tolist() == [1312, 1600]
    # the batch itself is not changed by asking
    assert batch().features().tolist() == [40, 2, 3, 400, 300, 24, 24, 0, 0, 0, 0, 1, 42, 200, 400, 960]


def test_memory_features():
    x = batch(MemoryState(1000.0, 2000.0, 300.0, 400.0)).features()
    assert x[7:11].tolist() == [1000.0, 2000.0, 300.0, 400.0]


def test_empty_batch():
    # no decodes: avg_decode_ctx = 0 / max(0, 1) = 0; a lone chunk of 5 with nothing processed
    x = BatchState().features_with_chunk(np.array([5]), processed=0)[0]
    assert x.tolist() == [5, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0]
