"""Workloads: request lengths (a trace or a synthetic mix) times an arrival process.

Everything is drawn from one ``numpy.random.Generator`` seeded by the caller, so a workload is a
pure function of its parameters and seed.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np

# Named traces in ../shared/data/traces (see its README for origin and licence).
TRACES = {
    "sharegpt": "sharegpt_8k_llama2_tokens.csv",
    "arxiv": "arxiv_summarization_llama2_tokens.csv",
    "azure-conv": "azure_llm_conv_2023.csv",
}
SYNTHETIC = ("apc-mix",)
# Real ShareGPT user -> assistant turn pairs (prompts/sharegpt92k_sample): short first-turn prompts,
# the shape of seed 001's workload (its 200 requests: prompt median 19, P90 179 tokens).
TURNS = {"sharegpt-turns": "prompts/sharegpt92k_sample/sampled_enriched_data"}
TOKENS_PER_WORD = 4.0 / 3.0  # the usual ~0.75 words per BPE token; no tokenizer offline
ARRIVALS = ("fixed", "poisson", "gamma", "burst", "trace")


class WorkloadError(ValueError):
    """Bad workload input; the message names the file and line or the parameter."""


@dataclass(frozen=True)
class Workload:
    name: str
    arrivals: np.ndarray  # seconds, non-decreasing
    prompt_lens: np.ndarray  # tokens, >= 1
    output_lens: np.ndarray  # tokens, >= 1
    # Per-request predicted-length score (lower = shorter), computed once at arrival by a
    # predictor; the engine hands it to the planner in RequestView.score. None: unscored.
    scores: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.arrivals)

    def with_scores(self, scores: Optional[np.ndarray]) -> "Workload":
        if scores is not None:
            scores = np.asarray(scores, dtype=np.float64)
            if scores.shape != (len(self),):
                raise WorkloadError(f"scores: expected {len(self)} values, got shape {scores.shape}")
            if not np.all(np.isfinite(scores)):
                raise WorkloadError("scores: every score must be finite")
        return replace(self, scores=scores)

    def describe(self) -> str:
        p, o = self.prompt_lens, self.output_lens
        return (
            f"{self.name}: {len(self)} requests over {self.arrivals[-1]:.1f}s; prompt median "
            f"{np.median(p):.0f} / P90 {np.percentile(p, 90):.0f} tokens; output median "
            f"{np.median(o):.0f} / P90 {np.percentile(o, 90):.0f} tokens"
        )


def data_dir() -> Path:
    """The project's shared data folder: $SARATHI_EXT_DATA, else ../shared/data beside the repo."""
    env = os.environ.get("SARATHI_EXT_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        cand = base.parent / "shared" / "data"
        if (cand / "traces").is_dir():
            return cand
    return Path.cwd().parent / "shared" / "data"


def resolve_trace(name_or_path: str) -> Path:
    if name_or_path in TRACES:
        path = data_dir() / "traces" / TRACES[name_or_path]
        if not path.is_file():
            raise WorkloadError(
                f"trace {name_or_path!r}: {path} not found; set SARATHI_EXT_DATA to the shared data "
                f"folder or pass a CSV path"
            )
        return path
    path = Path(name_or_path)
    if not path.is_file():
        raise WorkloadError(
            f"trace {name_or_path!r}: no such file, and not one of "
            f"{sorted(TRACES) + sorted(TURNS) + list(SYNTHETIC)}"
        )
    return path


def _int_cell(value: str, path: Path, line: int, column: str) -> int:
    try:
        number = float(value)
    except ValueError:
        raise WorkloadError(f"{path}:{line}: column {column!r}: {value!r} is not a number") from None
    if not np.isfinite(number) or number < 0 or number != int(number):
        raise WorkloadError(f"{path}:{line}: column {column!r}: {value!r} is not a non-negative integer")
    return int(number)


def read_trace(path: Path) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(prompt tokens, output tokens, arrival seconds or None) from a Vidur-style trace CSV."""
    try:
        handle = open(path, newline="")
    except OSError as e:
        raise WorkloadError(f"{path}: cannot open: {e.strerror}") from None
    prompts, outputs, arrivals = [], [], []
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise WorkloadError(f"{path}:1: empty file")
        cols = {name.strip(): i for i, name in enumerate(header)}
        for needed in ("num_prefill_tokens", "num_decode_tokens"):
            if needed not in cols:
                raise WorkloadError(f"{path}:1: header lacks column {needed!r}")
        ip, io, ia = cols["num_prefill_tokens"], cols["num_decode_tokens"], cols.get("arrived_at")
        width = len(header)
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != width:
                raise WorkloadError(f"{path}:{line}: expected {width} fields, found {len(row)}")
            p = _int_cell(row[ip], path, line, "num_prefill_tokens")
            o = _int_cell(row[io], path, line, "num_decode_tokens")
            if p < 1 or o < 1:
                raise WorkloadError(f"{path}:{line}: prompt and output lengths must be >= 1")
            prompts.append(p)
            outputs.append(o)
            if ia is not None:
                try:
                    arrivals.append(float(row[ia]))
                except ValueError:
                    raise WorkloadError(f"{path}:{line}: column 'arrived_at': {row[ia]!r} is not a number") from None
    if not prompts:
        raise WorkloadError(f"{path}: no requests")
    arr = np.asarray(arrivals, dtype=np.float64) if ia is not None else None
    return np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64), arr


def sharegpt_turn_pairs(folder: Path, bad_json: Callable[[Path, Exception], Exception]) -> Iterator[tuple]:
    """Yield (path, human text, gpt text) for every adjacent human -> gpt turn pair in a ShareGPT
    JSON folder; the folder's index files (no ``conversations`` list) are skipped. Shared by the
    simulator's workload and the length predictors' data loader, which differ only in what they
    keep; ``bad_json(path, error)`` builds the caller's error for an unreadable file."""
    import json

    for path in sorted(Path(folder).glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise bad_json(path, e) from None
        turns = doc.get("conversations") if isinstance(doc, dict) else None
        if not isinstance(turns, list):
            continue
        for a, b in zip(turns, turns[1:]):
            if isinstance(a, dict) and isinstance(b, dict) and a.get("from") == "human" and b.get("from") == "gpt":
                yield path, a.get("value", ""), b.get("value", "")


def read_turns(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens, output tokens) of every human -> gpt turn pair in a ShareGPT JSON folder.

    Token counts are words x 4/3, since no tokenizer can be downloaded here; see README.
    """
    prompts, outputs = [], []
    for _, human, gpt in sharegpt_turn_pairs(folder, lambda path, e: WorkloadError(f"{path}: not readable JSON: {e}")):
        prompts.append(max(1, int(np.ceil(len(str(human).split()) * TOKENS_PER_WORD))))
        outputs.append(max(1, int(np.ceil(len(str(gpt).split()) * TOKENS_PER_WORD))))
    if not prompts:
        raise WorkloadError(f"{folder}: no human -> gpt turn pairs found")
    return np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64)


def truncate_context(prompts: np.ndarray, outputs: np.ndarray, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Sarathi's trace rule: where prompt + output exceeds the context limit, take the excess
    from both in proportion to their sizes, keeping at least one token of each."""
    total = prompts + outputs
    excess = np.clip(total - max_tokens, 0, None)
    p = prompts - np.ceil(excess * prompts / total).astype(np.int64)
    o = outputs - np.ceil(excess * outputs / total).astype(np.int64)
    return np.clip(p, 1, None), np.clip(o, 1, None)


def apc_mix_lengths(n: int, rng: np.random.Generator, output_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Section 4.1's APC workload: short (30-50) to long (200-220) prompts at 49:1."""
    long = rng.random(n) < 1.0 / 50.0
    prompts = np.where(long, rng.integers(200, 221, n), rng.integers(30, 51, n))
    return prompts.astype(np.int64), np.full(n, output_len, dtype=np.int64)


def arrival_times(
    kind: str, n: int, rng: np.random.Generator, interval: float, gamma_cv: float = 2.0
) -> np.ndarray:
    """Arrival times for ``n`` requests with mean inter-arrival ``interval`` seconds."""
    if kind == "fixed":
        return np.arange(n, dtype=np.float64) * interval
    if kind == "burst":
        return np.zeros(n, dtype=np.float64)
    if kind == "poisson":
        gaps = rng.exponential(interval, n)
    elif kind == "gamma":
        # Shape k = 1/cv^2 keeps the mean at ``interval``; cv > 1 is burstier than Poisson.
        shape = 1.0 / gamma_cv**2
        gaps = rng.gamma(shape, interval / shape, n)
    else:
        raise WorkloadError(f"arrival: unknown process {kind!r}; choose from {list(ARRIVALS)}")
    gaps[0] = 0.0
    return np.cumsum(gaps)


def make_workload(
    lengths: str = "sharegpt",
    num_requests: int = 200,
    arrival: str = "fixed",
    interval: float = 0.1,
    seed: int = 0,
    max_context: Optional[int] = None,
    max_gen: Optional[int] = None,
    gamma_cv: float = 2.0,
    output_len: int = 16,
) -> Workload:
    """Build a workload. Trace rows are sampled without replacement in a seeded order (Sarathi's
    trace generator shuffles too); ``max_context``/``max_gen`` bound prompt + output (Sarathi's
    proportional rule) and the output alone: the 512/512 setting of seed 001 section 4.1."""
    if num_requests < 1:
        raise WorkloadError(f"num_requests: must be >= 1, got {num_requests}")
    if arrival not in ARRIVALS:
        raise WorkloadError(f"arrival: unknown process {arrival!r}; choose from {list(ARRIVALS)}")
    if arrival != "burst" and arrival != "trace" and not interval > 0:
        raise WorkloadError(f"interval: must be > 0, got {interval}")
    for name, cap in (("max_context", max_context), ("max_gen", max_gen)):
        if cap is not None and cap < 1:
            raise WorkloadError(f"{name}: must be >= 1, got {cap}")
    rng = np.random.default_rng(seed)
    trace_arrivals = None
    if lengths in SYNTHETIC:
        prompts, outputs = apc_mix_lengths(num_requests, rng, output_len)
        name = lengths
    else:
        if lengths in TURNS:
            folder = data_dir() / TURNS[lengths]
            if not folder.is_dir():
                raise WorkloadError(f"lengths {lengths!r}: {folder} not found; set SARATHI_EXT_DATA")
            path, (all_p, all_o), all_a = folder, read_turns(folder), None
        else:
            path = resolve_trace(lengths)
            all_p, all_o, all_a = read_trace(path)
        if num_requests > len(all_p):
            raise WorkloadError(f"num_requests: {path} has only {len(all_p)} requests, asked for {num_requests}")
        if arrival == "trace":
            if all_a is None:
                raise WorkloadError(f"arrival: {path} has no 'arrived_at' column for trace arrivals")
            idx = np.arange(num_requests)  # keep the recorded order and times
            trace_arrivals = all_a[idx] - all_a[0]
        else:
            idx = rng.permutation(len(all_p))[:num_requests]
        prompts, outputs = all_p[idx], all_o[idx]
        name = lengths if lengths in TRACES or lengths in TURNS else Path(lengths).stem
    if max_context is not None:
        prompts, outputs = truncate_context(prompts, outputs, max_context)
    if max_gen is not None:
        outputs = np.minimum(outputs, max_gen)
    if arrival == "trace":
        if trace_arrivals is None:
            raise WorkloadError(f"arrival: 'trace' needs a trace with an 'arrived_at' column, not {lengths!r}")
        arrivals = trace_arrivals
    else:
        arrivals = arrival_times(arrival, num_requests, rng, interval, gamma_cv)
    return Workload(f"{name}/{arrival}", arrivals, prompts, outputs)


# -- length scores for predicted-SJF, before a trained ranker is wired in --------------------------

SCORE_KINDS = ("none", "oracle", "noisy-oracle")


def oracle_scores(workload: Workload) -> np.ndarray:
    """The true output length as the score: predicted-SJF with a perfect predictor."""
    return workload.output_lens.astype(np.float64)


def noisy_oracle_scores(workload: Workload, sigma: float, seed: int = 0) -> np.ndarray:
    """True output length times lognormal noise exp(N(0, sigma^2)), seeded: an imperfect
    predictor whose rank quality falls as sigma grows (sigma = 0 is the oracle)."""
    if not (np.isfinite(sigma) and sigma >= 0):
        raise WorkloadError(f"scores: noisy-oracle sigma must be >= 0, got {sigma}")
    rng = np.random.default_rng(seed)
    return workload.output_lens.astype(np.float64) * np.exp(rng.normal(0.0, sigma, len(workload)))


def apply_scores(workload: Workload, spec: str, seed: int = 0) -> Workload:
    """``none`` | ``oracle`` | ``noisy-oracle:SIGMA`` -> the workload with those scores."""
    kind, _, arg = spec.partition(":")
    if kind == "none" and not arg:
        return workload.with_scores(None)
    if kind == "oracle" and not arg:
        return workload.with_scores(oracle_scores(workload))
    if kind == "noisy-oracle":
        try:
            sigma = float(arg)
        except ValueError:
            raise WorkloadError(f"scores: expected noisy-oracle:SIGMA, got {spec!r}") from None
        return workload.with_scores(noisy_oracle_scores(workload, sigma, seed))
    raise WorkloadError(f"scores: unknown {spec!r}; use none, oracle or noisy-oracle:SIGMA")
