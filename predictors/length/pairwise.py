"""PARS pairwise length ranker (seed 000, §III-B) and its pointwise / listwise baselines.

A :class:`PairwiseRanker` is a text encoder (see ``encoder.py``) + mean pooling + a linear head
giving one score per prompt: **higher score = longer expected response**. Only the order of scores
is meaningful (for the pointwise baseline the score is also a log-length estimate).

Losses (same encoder, head and data; only the loss differs):

* ``"pairwise"`` (PARS): pairs (A, B) are kept only if
  ``|L_A - L_B| / max(L_A, L_B) >= delta`` (:func:`min_length_difference`, :func:`make_pairs`;
  default ``delta = 0.2``); label ``y = +1`` if A is longer else ``-1``; loss
  ``max(0, -y (s_A - s_B) + 1.0)`` (``torch.nn.MarginRankingLoss(margin=1.0)``, mean over pairs).
  Pairs are formed **within each mini-batch** of prompts (every prompt is encoded once per
  batch, and every kept pair of the batch contributes), so ``batch_size`` counts prompts.
* ``"pointwise"``: L1 regression of the score on ``log(length)``.
* ``"listwise"``: ListMLE (:func:`listmle_loss`) on the batch, ground-truth order = longest first.

Training (:func:`train_ranker`): AdamW, lr 2e-5, batch 128, a few epochs; the validation pairwise
accuracy (:func:`pairwise_accuracy` on delta-filtered validation pairs) is measured after every
epoch (and every ``eval_every`` steps) and the best state is kept and restored at the end.

Export (:func:`export_ranker`): a directory with ``ranker.pt`` (TorchScript of the tokenizer-free
module ``(input_ids, attention_mask) -> score``), ``tokenizer/`` (the tokenizer files) and the
sidecar ``ranker.json`` (format, encoder name/path, max_length, delta, loss, metrics, the neutral
score, the sha256 of ``ranker.pt``). :func:`load_ranker` refuses a sidecar that does not match its
files. ``load_ranker(dir).score(prompts) -> np.ndarray``; an empty (or blank) prompt gets the
neutral score (median training score) and a warning.

CLI: ``python -m predictors.length.pairwise --source castillo --loss pairwise --max-steps 300
--out out/pars`` (see ``--help``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from .encoder import Encoder, load_encoder, load_tokenizer, mean_pool

LOSSES = ("pairwise", "pointwise", "listwise")
SIDECAR_FORMAT = "sarathi-ext/pars-ranker"
SIDECAR_VERSION = 1
MARGIN = 1.0


# ---------------------------------------------------------------- pairs and losses


def min_length_difference(la: float, lb: float) -> float:
    """``|L_A - L_B| / max(L_A, L_B)`` (seed eq. 1); 0 when both are 0."""
    m = max(la, lb)
    return 0.0 if m <= 0 else abs(la - lb) / m


def make_pairs(lengths: Sequence[float] | np.ndarray, delta: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All index pairs ``i < j`` with ``min_length_difference(L_i, L_j) >= delta``.

    Returns ``(i, j, y)`` with ``y = +1`` when item i is longer, ``-1`` when shorter. Exact ties
    are never kept (they carry no order), whatever ``delta`` is. The >= comparison uses a 1e-12
    tolerance so that e.g. (100, 125) at delta 0.2 is kept despite rounding.
    """
    if delta < 0:
        raise ValueError(f"delta must be >= 0, got {delta}")
    L = np.asarray(lengths, dtype=np.float64)
    i, j = np.triu_indices(len(L), k=1)
    a, b = L[i], L[j]
    mx = np.maximum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(mx > 0, np.abs(a - b) / mx, 0.0)
    keep = (rel >= delta - 1e-12) & (a != b)
    i, j = i[keep], j[keep]
    y = np.where(L[i] > L[j], 1.0, -1.0)
    return i.astype(np.int64), j.astype(np.int64), y


def margin_loss(s_a: torch.Tensor, s_b: torch.Tensor, y: torch.Tensor, margin: float = MARGIN) -> torch.Tensor:
    """Mean of ``max(0, -y (s_a - s_b) + margin)``."""
    return nn.MarginRankingLoss(margin=margin)(s_a, s_b, y)


def listmle_loss(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """ListMLE: ``-log P(pi | s)`` under Plackett-Luce, pi = items sorted longest first.

    ``sum_k [ logsumexp(s_pi(k..n)) - s_pi(k) ]`` for one list of n items (ties keep input order).
    """
    order = torch.argsort(lengths, descending=True, stable=True)
    s = scores[order]
    # logcumsumexp from the end: log sum_{m >= k} exp(s_m)
    tail = torch.logcumsumexp(s.flip(0), dim=0).flip(0)
    return (tail - s).sum()


def pointwise_loss(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """L1 between the score and ``log(length)``."""
    return torch.nn.functional.l1_loss(scores, torch.log(lengths.clamp(min=1.0)))


# ---------------------------------------------------------------- metrics


def pairwise_accuracy(scores: Sequence[float] | np.ndarray, lengths: Sequence[float] | np.ndarray,
                      delta: float = 0.2, max_items: int | None = 3000, seed: int = 0) -> float:
    """Share of delta-filtered pairs (see :func:`make_pairs`) ordered right by the scores; a score
    tie counts one half. ``max_items`` caps the items (a fixed random subset) to bound the O(n^2)
    pairs. NaN when no pair survives."""
    s = np.asarray(scores, dtype=np.float64)
    L = np.asarray(lengths, dtype=np.float64)
    if max_items is not None and len(L) > max_items:
        idx = np.random.default_rng(seed).choice(len(L), size=max_items, replace=False)
        s, L = s[idx], L[idx]
    i, j, y = make_pairs(L, delta)
    if len(i) == 0:
        return float("nan")
    d = np.sign(s[i] - s[j])
    return float(np.mean(np.where(d == 0, 0.5, (d == y).astype(np.float64))))


def kendall_tau_b(scores, lengths) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(np.asarray(scores), np.asarray(lengths), variant="b").statistic)


# ---------------------------------------------------------------- model


class PairwiseRanker(nn.Module):
    """Encoder + mean pooling + linear head: ``(input_ids, attention_mask) -> score [B]``."""

    def __init__(self, encoder_model: nn.Module, hidden_size: int):
        super().__init__()
        self.encoder = encoder_model
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
        return self.head(mean_pool(out, attention_mask)).squeeze(-1)


def _tokenize(tokenizer, prompts: Sequence[str], max_length: int) -> list[list[int]]:
    return tokenizer(list(prompts), truncation=True, max_length=max_length,
                     add_special_tokens=True)["input_ids"]


def _collate(ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(len(x) for x in ids)
    inp = torch.full((len(ids), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), T), dtype=torch.long)
    for k, x in enumerate(ids):
        inp[k, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[k, : len(x)] = 1
    return inp, mask


@torch.no_grad()
def _score_ids(model: nn.Module, ids: Sequence[Sequence[int]], pad_id: int, batch_size: int = 256) -> np.ndarray:
    model.eval()
    out = []
    # sort by length so that padding is small, then restore the order
    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    for s in range(0, len(order), batch_size):
        chunk = order[s: s + batch_size]
        inp, mask = _collate([ids[k] for k in chunk], pad_id)
        out.append(model(inp, mask).float().cpu().numpy())
    res = np.empty(len(ids), dtype=np.float64)
    if out:
        res[np.asarray(order)] = np.concatenate(out)
    return res


# ---------------------------------------------------------------- training


@dataclass
class TrainResult:
    model: PairwiseRanker
    encoder: Encoder
    loss: str
    delta: float
    max_length: int
    best: dict  # metrics of the kept checkpoint: val_pairwise_acc, val_kendall_tau_b, step, epoch
    history: list = field(default_factory=list)  # per evaluation: step, epoch, train_loss, val metrics
    neutral_score: float = 0.0  # median score on the training prompts (for empty prompts)
    step_losses: list = field(default_factory=list)  # training loss of every optimiser step
    wall_s: float = 0.0


def train_ranker(prompts: Sequence[str], lengths: Sequence[float] | np.ndarray, *,
                 loss: str = "pairwise", delta: float = 0.2, epochs: int = 3, batch_size: int = 128,
                 lr: float = 2e-5, max_length: int = 128, seed: int = 0, max_steps: int | None = None,
                 encoder: Encoder | str | None = None,
                 val_prompts: Sequence[str] | None = None, val_lengths: Sequence[float] | None = None,
                 val_frac: float = 0.1, eval_every: int | None = None, val_max_items: int = 2000,
                 log: Callable[[str], None] | None = print) -> TrainResult:
    """Fine-tune encoder + head with ``loss`` and keep the best checkpoint by validation pairwise
    accuracy (delta-filtered pairs). Without ``val_prompts`` a ``val_frac`` share of the prompts is
    held out with :func:`predictors.length.data.split_by_prompt` (by prompt text)."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, not {loss!r}")
    if len(prompts) != len(lengths):
        raise ValueError("prompts and lengths differ in length")
    t0 = time.time()
    log = log or (lambda _m: None)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
    L = np.asarray(lengths, dtype=np.float64)
    if np.any(~np.isfinite(L)) or np.any(L <= 0):
        raise ValueError("lengths must be finite and positive")
    prompts = list(prompts)
    if val_prompts is None:
        from .data import LabelledPrompt, split_by_prompt

        rows = [LabelledPrompt(p, float(x), "") for p, x in zip(prompts, L)]
        tr, va = split_by_prompt(rows, test_frac=val_frac, seed=seed + 1)  # seed+1: independent of a caller split with `seed`
        if not tr or not va:
            raise ValueError("too few distinct prompts for a validation split; pass val_prompts")
        prompts, L = [r.prompt for r in tr], np.array([r.length for r in tr])
        val_prompts, vL = [r.prompt for r in va], np.array([r.length for r in va])
    else:
        vL = np.asarray(val_lengths, dtype=np.float64)
    if len(vL) > val_max_items:  # fixed subset: validation cost is one forward pass per item
        idx = rng.choice(len(vL), size=val_max_items, replace=False)
        val_prompts, vL = [val_prompts[k] for k in idx], vL[idx]

    tok = enc.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = _tokenize(tok, prompts, max_length)
    vids = _tokenize(tok, val_prompts, max_length)
    model = PairwiseRanker(enc.model, enc.hidden_size)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    Lt = torch.tensor(L, dtype=torch.float32)

    def evaluate(step: int, epoch: int, train_loss: float) -> dict:
        vs = _score_ids(model, vids, pad_id)
        m = {"step": step, "epoch": epoch, "train_loss": train_loss,
             "val_pairwise_acc": pairwise_accuracy(vs, vL, delta, max_items=None),
             "val_kendall_tau_b": kendall_tau_b(vs, vL), "n_val": len(vL)}
        log(f"[{loss}] step {step} epoch {epoch} train_loss {train_loss:.4f} "
            f"val_acc {m['val_pairwise_acc']:.4f} tau_b {m['val_kendall_tau_b']:.4f}")
        return m

    history: list[dict] = []
    best = evaluate(0, 0, float("nan"))
    history.append(best)
    best_state = copy.deepcopy(model.state_dict())
    step, losses = 0, []
    done = False
    for epoch in range(1, epochs + 1):
        perm = rng.permutation(len(ids))
        for s in range(0, len(perm), batch_size):
            b = perm[s: s + batch_size]
            if len(b) < 2:
                continue
            lb = Lt[b]
            if loss == "pairwise":
                i, j, y = make_pairs(lb.numpy(), delta)
                if len(i) == 0:
                    continue
            model.train()
            inp, mask = _collate([ids[k] for k in b], pad_id)
            sc = model(inp, mask)
            if loss == "pairwise":
                lval = margin_loss(sc[torch.from_numpy(i)], sc[torch.from_numpy(j)],
                                   torch.tensor(y, dtype=sc.dtype))
            elif loss == "pointwise":
                lval = pointwise_loss(sc, lb)
            else:
                lval = listmle_loss(sc, lb) / len(b)
            opt.zero_grad()
            lval.backward()
            opt.step()
            step += 1
            losses.append(float(lval.detach()))
            if max_steps is not None and step >= max_steps:
                done = True
            if (eval_every and step % eval_every == 0) or done:
                m = evaluate(step, epoch, float(np.mean(losses[-50:])))
                history.append(m)
                if m["val_pairwise_acc"] > best["val_pairwise_acc"] or math.isnan(best["val_pairwise_acc"]):
                    best, best_state = m, copy.deepcopy(model.state_dict())
            if done:
                break
        if done:
            break
        if not (eval_every and step % eval_every == 0):
            m = evaluate(step, epoch, float(np.mean(losses[-50:])) if losses else float("nan"))
            history.append(m)
            if m["val_pairwise_acc"] > best["val_pairwise_acc"] or math.isnan(best["val_pairwise_acc"]):
                best, best_state = m, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    model.eval()
    tr_scores = _score_ids(model, ids[:2000], pad_id)
    return TrainResult(model=model, encoder=enc, loss=loss, delta=delta, max_length=max_length,
                       best=best, history=history, neutral_score=float(np.median(tr_scores)),
                       step_losses=losses, wall_s=time.time() - t0)


# ---------------------------------------------------------------- export / load


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export_ranker(result: TrainResult, out_dir: str | os.PathLike, extra: dict | None = None) -> Path:
    """Write ``ranker.pt`` (TorchScript), ``tokenizer/`` and the sidecar ``ranker.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = result.model.eval()
    tok = result.encoder.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    # trace with a padded example so that the masked-attention path is the one recorded
    ex_ids = _tokenize(tok, ["a short one", "a somewhat longer example prompt for tracing the ranker"], result.max_length)
    inp, mask = _collate(ex_ids, pad_id)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, (inp, mask), strict=False, check_trace=False)
    traced.save(str(out / "ranker.pt"))
    tdir = out / "tokenizer"
    if tdir.exists():
        shutil.rmtree(tdir)
    tok.save_pretrained(str(tdir))
    import transformers

    side = {
        "format": SIDECAR_FORMAT, "version": SIDECAR_VERSION,
        "encoder": {"name": result.encoder.name, "path": result.encoder.path,
                    "hidden_size": result.encoder.hidden_size, "pooling": "mean"},
        "tokenizer_dir": "tokenizer", "vocab_size": len(tok), "pad_token_id": pad_id,
        "max_length": result.max_length, "delta": result.delta, "loss": result.loss,
        "margin": MARGIN if result.loss == "pairwise" else None,
        "score": "higher = longer expected response",
        "neutral_score": result.neutral_score,
        "metrics": result.best, "history": result.history,
        "model_file": "ranker.pt", "model_sha256": _sha256(out / "ranker.pt"),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "wall_s": result.wall_s,
    }
    if extra:
        side["extra"] = extra
    (out / "ranker.json").write_text(json.dumps(side, indent=2, default=float))
    return out


class LoadedRanker:
    """A ranker loaded by :func:`load_ranker`: ``score(prompts) -> np.ndarray`` (higher = longer)."""

    def __init__(self, module, tokenizer, sidecar: dict):
        self.module, self.tokenizer, self.sidecar = module, tokenizer, sidecar
        self.max_length = int(sidecar["max_length"])
        self.pad_id = int(sidecar["pad_token_id"])
        self.neutral_score = float(sidecar["neutral_score"])

    def score(self, prompts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        if isinstance(prompts, str):
            raise TypeError("score() takes a sequence of prompts, not one string")
        prompts = list(prompts)
        out = np.full(len(prompts), self.neutral_score, dtype=np.float64)
        live = [k for k, p in enumerate(prompts) if isinstance(p, str) and p.strip()]
        if len(live) < len(prompts):
            warnings.warn(f"{len(prompts) - len(live)} empty prompt(s) get the neutral score "
                          f"{self.neutral_score:.4f}", stacklevel=2)
        if live:
            ids = _tokenize(self.tokenizer, [prompts[k] for k in live], self.max_length)
            out[np.asarray(live)] = _score_ids(self.module, ids, self.pad_id, batch_size)
        return out


def load_ranker(path: str | os.PathLike) -> LoadedRanker:
    """Load an exported ranker directory (or its ``ranker.json``); refuses a mismatched sidecar."""
    p = Path(path)
    d = p.parent if p.suffix == ".json" else p
    sc_path = p if p.suffix == ".json" else d / "ranker.json"
    if not sc_path.is_file():
        raise FileNotFoundError(f"no sidecar {sc_path}")
    side = json.loads(sc_path.read_text())
    if side.get("format") != SIDECAR_FORMAT or side.get("version") != SIDECAR_VERSION:
        raise ValueError(f"{sc_path}: not a {SIDECAR_FORMAT} v{SIDECAR_VERSION} sidecar "
                         f"(format={side.get('format')!r}, version={side.get('version')!r})")
    for k in ("model_file", "model_sha256", "max_length", "tokenizer_dir", "vocab_size", "neutral_score", "pad_token_id"):
        if k not in side:
            raise ValueError(f"{sc_path}: sidecar lacks {k!r}")
    mfile = d / side["model_file"]
    if not mfile.is_file():
        raise FileNotFoundError(f"{mfile} (named by {sc_path}) is missing")
    if _sha256(mfile) != side["model_sha256"]:
        raise ValueError(f"{sc_path}: sha256 of {mfile.name} does not match the sidecar; "
                         "the model file and sidecar are from different exports")
    tok = load_tokenizer(d / side["tokenizer_dir"])
    if len(tok) != int(side["vocab_size"]):
        raise ValueError(f"{sc_path}: tokenizer has {len(tok)} tokens, sidecar says {side['vocab_size']}")
    if int(side["max_length"]) <= 0:
        raise ValueError(f"{sc_path}: bad max_length {side['max_length']!r}")
    module = torch.jit.load(str(mfile), map_location="cpu").eval()
    return LoadedRanker(module, tok, side)


# ---------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from .data import DATA_ROOT, arrays, load_source, split_by_prompt

    ap = argparse.ArgumentParser(prog="python -m predictors.length.pairwise", description=__doc__.split("\n")[0])
    ap.add_argument("--source", default="castillo", help="castillo | gpteacher | sharegpt (data.load_source)")
    ap.add_argument("--data-root", default=str(DATA_ROOT))
    ap.add_argument("--loss", choices=LOSSES, default="pairwise")
    ap.add_argument("--encoder", default=None, help="local HF encoder directory (default: bundled all-MiniLM-L6-v2)")
    ap.add_argument("--delta", type=float, default=0.2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--eval-every", type=int, default=None)
    ap.add_argument("--max-train", type=int, default=None, help="subsample training rows")
    ap.add_argument("--test-frac", type=float, default=0.2)
    ap.add_argument("--val-max-items", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="export directory")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    rows = load_source(a.source, a.data_root)
    train, test = split_by_prompt(rows, test_frac=a.test_frac, seed=a.seed)
    if a.max_train and len(train) > a.max_train:
        idx = np.random.default_rng(a.seed).choice(len(train), size=a.max_train, replace=False)
        train = [train[k] for k in sorted(idx)]
    p, L = arrays(train)
    res = train_ranker(p, L, loss=a.loss, delta=a.delta, epochs=a.epochs, batch_size=a.batch_size, lr=a.lr,
                       max_length=a.max_length, seed=a.seed, max_steps=a.max_steps, encoder=a.encoder,
                       eval_every=a.eval_every, val_max_items=a.val_max_items)
    tp, tL = arrays(test)
    if len(tL) > 3000:
        idx = np.random.default_rng(a.seed).choice(len(tL), size=3000, replace=False)
        tp, tL = [tp[k] for k in idx], tL[idx]
    ts = _score_ids(res.model, _tokenize(res.encoder.tokenizer, tp, a.max_length),
                    res.encoder.tokenizer.pad_token_id or 0)
    test_m = {"test_pairwise_acc": pairwise_accuracy(ts, tL, a.delta, max_items=None),
              "test_pairwise_acc_delta0": pairwise_accuracy(ts, tL, 0.0, max_items=None),
              "test_kendall_tau_b": kendall_tau_b(ts, tL), "n_test": len(tL)}
    print(json.dumps({"best": res.best, "test": test_m, "wall_s": round(res.wall_s, 1),
                      "n_train": len(train)}, default=float))
    if a.out:
        print("exported to", export_ranker(res, a.out, extra={"source": a.source, "seed": a.seed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
