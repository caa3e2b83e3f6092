"""Labelled prompts for the lexical length predictor: (prompt text, response length in tokens).

Three sources under ``../shared/data/prompts`` (see that folder's README):

* CASTILLO ``castillo/{train,validate}.jsonl``: one row per (prompt, model) with ten sampled
  response lengths in tokens (``output_sizes``) and their mean (``output_mean``). The label is, by
  default, the **per-row median of ``output_sizes``** (``label="median"``): the median of ten
  samples is robust to the one runaway generation that the mean is not, and it is what a
  scheduler would see as "typical" for that prompt on that model. ``label="mean"`` uses
  ``output_mean`` instead. ``models=None`` keeps every model's row (13 rows per prompt, each its
  own label: the predictor learns the typical length across models); pass model names to keep
  some. Either way, split with :func:`split_by_prompt` so that a prompt's rows never straddle
  train and test.
* GPTeacher ``gpteacher/*/*.json``: a JSON array of ``{instruction, input, response}``. The
  prompt is ``instruction`` plus, when non-empty, a newline and ``input``; the label is the
  response's word count times 4/3, rounded up (``TOKENS_PER_WORD``, the rule of
  ``sarathi_ext/sim/workload.py``: no tokenizer can be downloaded here).
* ShareGPT turns ``sharegpt92k_sample/sampled_enriched_data/*.json``: each human -> gpt turn
  pair; prompt = the human turn's text, label = the gpt turn's words x 4/3, rounded up. Files
  without a ``conversations`` list (the folder's index files) are skipped.

Bad input raises :class:`LengthDataError` (a ``ValueError``) naming the file and line: a missing
or non-string prompt, a missing or non-numeric length field, or a length that is not positive.
For the JSON-array files the line is that of the element's opening brace.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

TOKENS_PER_WORD = 4.0 / 3.0  # same rule as sarathi_ext.sim.workload.TOKENS_PER_WORD
DATA_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # ../shared/data
LABELS = ("median", "mean")


class LengthDataError(ValueError):
    """Bad training data; the message starts with ``file:line:``."""


@dataclass(frozen=True)
class LabelledPrompt:
    prompt: str
    length: float  # response length in tokens, > 0
    source: str  # "castillo", "gpteacher" or "sharegpt"
    model: str = ""  # the answering model where known (CASTILLO)
    dataset: str = ""  # the prompt's origin dataset where known


def words_to_tokens(text: str) -> int:
    """Approximate tokens of a response: ceil(words x 4/3)."""
    return int(math.ceil(len(text.split()) * TOKENS_PER_WORD))


def _positive(value: object, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LengthDataError(f"{where}: field {field!r} is {value!r}, not a number")
    x = float(value)
    if not math.isfinite(x) or x <= 0:
        raise LengthDataError(f"{where}: field {field!r} must be a positive length, got {value!r}")
    return x


def _prompt(row: dict, key: str, where: str) -> str:
    if key not in row or row[key] is None:
        raise LengthDataError(f"{where}: missing prompt field {key!r}")
    if not isinstance(row[key], str):
        raise LengthDataError(f"{where}: prompt field {key!r} is {type(row[key]).__name__}, not a string")
    return row[key]


def read_castillo(path: str | Path, *, label: str = "median",
                  models: Iterable[str] | None = None) -> list[LabelledPrompt]:
    """Rows of one CASTILLO jsonl file (see the module docstring for ``label`` and ``models``)."""
    if label not in LABELS:
        raise ValueError(f"label must be one of {LABELS}, not {label!r}")
    path = Path(path)
    keep = None if models is None else set(models)
    out: list[LabelledPrompt] = []
    try:
        handle = path.open(encoding="utf-8")
    except OSError as e:
        raise LengthDataError(f"{path}: cannot open: {e.strerror}") from None
    with handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except ValueError as e:
                raise LengthDataError(f"{where}: not valid JSON: {e}") from None
            if not isinstance(row, dict):
                raise LengthDataError(f"{where}: expected a JSON object")
            model = str(row.get("model", ""))
            if keep is not None and model not in keep:
                continue
            prompt = _prompt(row, "prompt_text", where)
            if label == "median":
                sizes = row.get("output_sizes")
                if sizes is None:
                    raise LengthDataError(f"{where}: missing length field 'output_sizes'")
                if not isinstance(sizes, list) or not sizes:
                    raise LengthDataError(f"{where}: field 'output_sizes' must be a non-empty list")
                vals = [_positive(v, where, "output_sizes") for v in sizes]
                length = float(np.median(vals))
            else:
                if row.get("output_mean") is None:
                    raise LengthDataError(f"{where}: missing length field 'output_mean'")
                length = _positive(row["output_mean"], where, "output_mean")
            out.append(LabelledPrompt(prompt, length, "castillo", model, str(row.get("dataset", ""))))
    return out


def _json_array_items(path: Path) -> list[tuple[int, object]]:
    """(line number, element) for each element of a top-level JSON array."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise LengthDataError(f"{path}: cannot open: {e.strerror}") from None
    dec = json.JSONDecoder()
    pos, n = 0, len(text)

    def skip(p: int) -> int:
        while p < n and text[p] in " \t\r\n":
            p += 1
        return p

    pos = skip(pos)
    if pos >= n or text[pos] != "[":
        raise LengthDataError(f"{path}:{text.count(chr(10), 0, pos) + 1}: expected a JSON array")
    pos = skip(pos + 1)
    items: list[tuple[int, object]] = []
    line, counted = 1, 0
    if pos < n and text[pos] == "]":
        return items
    while True:
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            obj, end = dec.raw_decode(text, pos)
        except ValueError as e:
            raise LengthDataError(f"{path}:{line}: not valid JSON: {e.msg}") from None
        items.append((line, obj))
        pos = skip(end)
        if pos < n and text[pos] == ",":
            pos = skip(pos + 1)
        elif pos < n and text[pos] == "]":
            return items
        else:
            line += text.count("\n", counted, pos)
            raise LengthDataError(f"{path}:{line}: expected ',' or ']' in the JSON array")


def read_gpteacher(path: str | Path) -> list[LabelledPrompt]:
    """One GPTeacher JSON file: prompt = instruction [+ newline + input], label = response tokens."""
    path = Path(path)
    out: list[LabelledPrompt] = []
    for line, row in _json_array_items(path):
        where = f"{path}:{line}"
        if not isinstance(row, dict):
            raise LengthDataError(f"{where}: expected a JSON object")
        prompt = _prompt(row, "instruction", where)
        extra = row.get("input")
        if isinstance(extra, str) and extra.strip():
            prompt = f"{prompt}\n{extra}"
        if row.get("response") is None:
            raise LengthDataError(f"{where}: missing length field 'response'")
        if not isinstance(row["response"], str):
            raise LengthDataError(f"{where}: field 'response' is not a string")
        tokens = words_to_tokens(row["response"])
        if tokens <= 0:
            raise LengthDataError(f"{where}: field 'response' is empty (length must be positive)")
        out.append(LabelledPrompt(prompt, float(tokens), "gpteacher", "gpt-4", path.parent.name))
    return out


def read_sharegpt(folder: str | Path) -> list[LabelledPrompt]:
    """Every human -> gpt turn pair in a ShareGPT JSON folder (index files skipped).

    Pairs whose human or gpt text is empty are skipped rather than refused: ShareGPT has such
    turns (images, deleted messages), and they are not labelled prompts.
    """
    from sarathi_ext.sim.workload import sharegpt_turn_pairs

    out: list[LabelledPrompt] = []
    bad = lambda path, e: LengthDataError(f"{path}:1: not readable JSON: {e}")  # noqa: E731
    for _, prompt, resp in sharegpt_turn_pairs(Path(folder), bad):
        if not isinstance(prompt, str) or not isinstance(resp, str) or not prompt.strip():
            continue
        tokens = words_to_tokens(resp)
        if tokens > 0:
            out.append(LabelledPrompt(prompt, float(tokens), "sharegpt", "chatgpt", "ShareGPT"))
    return out


def load_source(name: str, root: str | Path = DATA_ROOT, **kw) -> list[LabelledPrompt]:
    """All rows of one source: ``castillo`` (train and validate files), ``castillo-train``,
    ``castillo-validate``, ``gpteacher`` or ``sharegpt``."""
    p = Path(root) / "prompts"
    if name == "castillo":
        return read_castillo(p / "castillo/train.jsonl", **kw) + read_castillo(p / "castillo/validate.jsonl", **kw)
    if name in ("castillo-train", "castillo-validate"):
        return read_castillo(p / f"castillo/{name.split('-')[1]}.jsonl", **kw)
    if name == "gpteacher":
        rows: list[LabelledPrompt] = []
        for f in sorted((p / "gpteacher").glob("*/*.json")):
            rows += read_gpteacher(f)
        return rows
    if name == "sharegpt":
        return read_sharegpt(p / "sharegpt92k_sample/sampled_enriched_data")
    raise ValueError(f"unknown source {name!r}")


def prompt_bucket(prompt: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, prompt text): blake2b, not Python's salted hash."""
    h = hashlib.blake2b(prompt.encode("utf-8"), digest_size=8, key=seed.to_bytes(8, "little", signed=True))
    return int.from_bytes(h.digest(), "little") / 2.0**64


def split_by_prompt(rows: Sequence[LabelledPrompt], test_frac: float = 0.2,
                    seed: int = 0) -> tuple[list[LabelledPrompt], list[LabelledPrompt]]:
    """(train, test): a row goes to test iff its prompt's hash bucket is below ``test_frac``, so
    every row of one prompt text (e.g. CASTILLO's 13 models) lands on the same side."""
    if not 0.0 < test_frac < 1.0:
        raise ValueError(f"test_frac must be in (0, 1), not {test_frac}")
    train, test = [], []
    cache: dict[str, bool] = {}
    for r in rows:
        t = cache.get(r.prompt)
        if t is None:
            t = cache[r.prompt] = prompt_bucket(r.prompt, seed) < test_frac
        (test if t else train).append(r)
    return train, test


def arrays(rows: Sequence[LabelledPrompt]) -> tuple[list[str], np.ndarray]:
    """(prompts, lengths as float64)."""
    return [r.prompt for r in rows], np.asarray([r.length for r in rows], dtype=np.float64)
