"""The 16-feature batch description of seed 001, Tables 1-2.

Every batch-latency model in the project (the simulator's execution-time model, the trained MLP,
profile CSVs written by engine hooks) reads features in exactly this order. A predictor artifact
whose sidecar lists a different order is refused at load time, so this tuple is a wire format:
append to it only together with a version bump of the profile schema.

Index  Name                           Table  Meaning
 0     prefill_tokens                 1      sum of prefill chunk tokens in the batch
 1     decode_tokens                  1      number of decode tokens (one per decoding request)
 2     batch_request_count            1      requests in the batch (decodes + prefill chunks)
 3     sum_decode_context_len         1      sum of KV context lengths read by the decodes
 4     max_decode_context_len         1      largest such context
 5     prefill_processed_tokens       1      sum over prefill chunks of tokens already prefilled
 6     max_prefill_processed_tokens   1      largest such count
 7     gpu_mem_used_mb                1      device memory state; 0 where the engine has none
 8     gpu_mem_free_mb                1      ''
 9     cuda_allocated_mb              1      ''
10     cuda_reserved_mb               1      ''
11     bias                           2      1
12     scheduled_tokens               2      decode_tokens + prefill_tokens
13     avg_decode_ctx                 2      sum_decode_context_len / max(decode_tokens, 1)
14     decode_ctx_interaction         2      decode_tokens * avg_decode_ctx
15     prefill_interaction            2      prefill_tokens * prefill_processed_tokens
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FEATURE_NAMES: tuple[str, ...] = (
    "prefill_tokens",
    "decode_tokens",
    "batch_request_count",
    "sum_decode_context_len",
    "max_decode_context_len",
    "prefill_processed_tokens",
    "max_prefill_processed_tokens",
    "gpu_mem_used_mb",
    "gpu_mem_free_mb",
    "cuda_allocated_mb",
    "cuda_reserved_mb",
    "bias",
    "scheduled_tokens",
    "avg_decode_ctx",
    "decode_ctx_interaction",
    "prefill_interaction",
)
NUM_FEATURES = len(FEATURE_NAMES)
IDX = {name: i for i, name in enumerate(FEATURE_NAMES)}


@dataclass(slots=True)
class MemoryState:
    """GPU memory readings (MB). Engines without them (the simulator, CPU runs) leave zeros."""

    gpu_mem_used_mb: float = 0.0
    gpu_mem_free_mb: float = 0.0
    cuda_allocated_mb: float = 0.0
    cuda_reserved_mb: float = 0.0


@dataclass(slots=True)
class BatchState:
    """The raw statistics of the batch committed so far in one round (Table 1).

    The planner adds decodes and prefill chunks as it commits them, and asks for the feature rows
    of "this batch plus one more chunk of size c" for every LPRS candidate c at once.
    """

    prefill_tokens: int = 0
    decode_tokens: int = 0
    batch_request_count: int = 0
    sum_decode_context_len: int = 0
    max_decode_context_len: int = 0
    prefill_processed_tokens: int = 0
    max_prefill_processed_tokens: int = 0
    num_prefills: int = 0
    memory: MemoryState = field(default_factory=MemoryState)

    @property
    def scheduled_tokens(self) -> int:
        # U_t of Eq. 6: every token already committed to this round.
        return self.prefill_tokens + self.decode_tokens

    def add_decode(self, context_len: int) -> None:
        self.decode_tokens += 1
        self.batch_request_count += 1
        self.sum_decode_context_len += context_len
        self.max_decode_context_len = max(self.max_decode_context_len, context_len)

    def add_prefill(self, chunk: int, processed: int) -> None:
        self.prefill_tokens += chunk
        self.batch_request_count += 1
        self.num_prefills += 1
        self.prefill_processed_tokens += processed
        self.max_prefill_processed_tokens = max(self.max_prefill_processed_tokens, processed)

    def features(self) -> np.ndarray:
        """The 16 features of the batch as committed: shape [16]."""
        return self.features_with_chunk(np.zeros(1, dtype=np.float64), processed=0, new=False)[0]

    def features_with_chunk(
        self, chunks: np.ndarray, processed: int, new: bool = True
    ) -> np.ndarray:
        """Feature rows x_{t,i}(c) of Eq. 9 for the batch as it would be with one more prefill
        chunk c (one row per entry of ``chunks``) of a request that has ``processed`` tokens
        already prefilled. Shape [len(chunks), 16]; one call covers all candidates of a request.
        """
        c = np.asarray(chunks, dtype=np.float64)
        n = c.shape[0]
        x = np.empty((n, NUM_FEATURES), dtype=np.float64)
        added = 1.0 if new else 0.0
        prefill_tokens = self.prefill_tokens + c
        processed_tokens = float(self.prefill_processed_tokens + processed * added)
        decode_tokens = float(self.decode_tokens)
        avg_decode_ctx = self.sum_decode_context_len / max(decode_tokens, 1.0)
        x[:, 0] = prefill_tokens
        x[:, 1] = decode_tokens
        x[:, 2] = self.batch_request_count + added
        x[:, 3] = self.sum_decode_context_len
        x[:, 4] = self.max_decode_context_len
        x[:, 5] = processed_tokens
        x[:, 6] = max(self.max_prefill_processed_tokens, processed if new else 0)
        mem = self.memory
        x[:, 7] = mem.gpu_mem_used_mb
        x[:, 8] = mem.gpu_mem_free_mb
        x[:, 9] = mem.cuda_allocated_mb
        x[:, 10] = mem.cuda_reserved_mb
        x[:, 11] = 1.0
        x[:, 12] = prefill_tokens + decode_tokens
        x[:, 13] = avg_decode_ctx
        x[:, 14] = decode_tokens * avg_decode_ctx
        x[:, 15] = prefill_tokens * processed_tokens
        return x
