"""``sarathi-ext train-ranker | eval-ranker``: the lexical output-length ranker (seed 002).

train-ranker  train the 19-feature XGBoost on the shared prompt data, split by prompt, export ONNX
              + sidecar (wraps ``python -m predictors.length.lexical_model``)
eval-ranker   score a held-out split with an exported artifact: Kendall tau_b (seed 000 Table III),
              Short-vs-Long ranking accuracy (seed 002 Eq. 2), 3-class accuracy, CPU latency

The held-out split is the artifact's own: ``split_by_prompt`` with the sidecar's test_frac and
seed. Because the split hashes each prompt text, the "test" rows of any source are exactly the
rows whose prompt the artifact could not have trained on under that split (a source the artifact
never saw is, in addition, wholly unseen; ``--split all`` scores every row and says so).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from .cli import UsageError

DATA_CHOICES = ("castillo", "castillo-train", "castillo-validate", "sharegpt", "gpteacher", "all")
ALL_SOURCES = ("castillo", "sharegpt", "gpteacher")


def add_length_commands(sub) -> None:
    t = sub.add_parser("train-ranker", help="train the lexical length ranker and export ONNX + sidecar")
    t.add_argument("--kind", default="lexical", choices=["lexical"], help="ranker kind (only lexical so far)")
    t.add_argument("--out", required=True, help="artifact path NAME.onnx (sidecar NAME.json)")
    t.add_argument("--data", default="castillo,sharegpt,gpteacher",
                   help="comma-separated sources: castillo, castillo-train, castillo-validate, sharegpt, gpteacher")
    t.add_argument("--label", default="median", choices=["median", "mean"], help="CASTILLO label")
    t.add_argument("--test-frac", type=float, default=0.2)
    t.add_argument("--split-seed", type=int, default=0)
    t.add_argument("--n-estimators", type=int, default=300)
    t.add_argument("--no-balance", action="store_true")
    t.set_defaults(func=cmd_train_ranker)

    e = sub.add_parser("eval-ranker", help="ranking accuracy and latency of a lexical ranker artifact")
    e.add_argument("--model", required=True, help="lexical artifact NAME.onnx (with sidecar NAME.json)")
    e.add_argument("--data", default="all", choices=DATA_CHOICES)
    e.add_argument("--split", default="test", choices=["test", "all"],
                   help="test: the artifact's held-out prompts (default); all: every row")
    e.add_argument("--latency-n", type=int, default=500, help="prompts timed one at a time (default 500)")
    e.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    e.set_defaults(func=cmd_eval_ranker)


def cmd_train_ranker(args: argparse.Namespace) -> int:
    from predictors.length import lexical_model

    out = Path(args.out)
    if out.suffix != ".onnx":
        raise UsageError(f"--out: the artifact path must end in .onnx, got {args.out}")
    if not out.resolve().parent.is_dir():
        raise UsageError(f"--out: folder {out.resolve().parent} does not exist")
    if not 0.0 < args.test_frac < 1.0:
        raise UsageError(f"--test-frac: must be in (0, 1), got {args.test_frac}")
    if args.n_estimators < 1:
        raise UsageError(f"--n-estimators: must be >= 1, got {args.n_estimators}")
    sources = [s.strip() for s in args.data.split(",") if s.strip()]
    bad = [s for s in sources if s not in DATA_CHOICES or s == "all"]
    if not sources or bad:
        raise UsageError(f"--data: unknown source {bad[0] if bad else args.data!r}; "
                         f"choose from {', '.join(c for c in DATA_CHOICES if c != 'all')}")
    argv = ["--out", str(out), "--sources", ",".join(sources), "--label", args.label,
            "--test-frac", str(args.test_frac), "--split-seed", str(args.split_seed),
            "--n-estimators", str(args.n_estimators)]
    if args.no_balance:
        argv.append("--no-balance")
    return lexical_model.main(argv)


def _split_of(sidecar: dict) -> tuple[float, int, str]:
    prov = sidecar.get("provenance") or {}
    split = prov.get("split") or {}
    test_frac, seed = split.get("test_frac"), split.get("seed")
    if not isinstance(test_frac, (int, float)) or not 0 < test_frac < 1 or isinstance(seed, bool) \
            or not isinstance(seed, int):
        raise UsageError("--model: the sidecar records no usable provenance.split {test_frac, seed}; "
                         "eval-ranker needs it to rebuild the held-out split")
    return float(test_frac), int(seed), str(prov.get("label", "median"))


def _load_rows(name: str, label: str) -> list:
    from predictors.length import data

    kw = {"label": label} if name.startswith("castillo") else {}
    return data.load_source(name, data.DATA_ROOT, **kw)


def _time_per_prompt(ranker, prompts: list[str], n_single: int) -> dict:
    single = prompts[:n_single]
    for p in single[:20]:  # warm-up
        ranker.score_one(p)
    t0 = time.perf_counter()
    for p in single:
        ranker.score_one(p)
    t_single = (time.perf_counter() - t0) / max(len(single), 1)
    t0 = time.perf_counter()
    ranker.score(prompts)
    t_batch = (time.perf_counter() - t0) / max(len(prompts), 1)
    return {"single_ms_per_prompt": t_single * 1e3, "batched_ms_per_prompt": t_batch * 1e3,
            "n_single": len(single), "n_batched": len(prompts), "threads": 1}


def evaluate_rows(ranker, rows: list, latency_n: int = 500) -> dict:
    """The report for ``rows`` scored by a loaded :class:`LexicalRanker`."""
    from predictors.length.evaluate import class_counts, kendall_tau_b, short_long_accuracy
    from predictors.length.lexical import extract_many
    from predictors.length.lexical_model import INPUT_NAME, PROBA_NAME, length_class

    prompts = [r.prompt for r in rows]
    lengths = np.asarray([r.length for r in rows], dtype=np.float64)
    p_long = ranker.score(prompts)
    live = [i for i, p in enumerate(prompts) if p and p.strip()]
    proba = ranker._sess.run([PROBA_NAME], {INPUT_NAME: extract_many([prompts[i] for i in live])})[0]
    cls_acc = float((proba.argmax(axis=1) == length_class(lengths[live])).mean()) if live else float("nan")
    tau = kendall_tau_b(p_long, lengths)
    acc = short_long_accuracy(p_long, lengths)
    return {
        "n": len(rows),
        "class_counts": class_counts(lengths),
        "kendall_tau_b": None if math.isnan(tau) else tau,
        "short_long_accuracy": None if math.isnan(acc) else acc,
        "class_accuracy": None if math.isnan(cls_acc) else cls_acc,
        "latency": _time_per_prompt(ranker, prompts, latency_n) if rows else None,
    }


def cmd_eval_ranker(args: argparse.Namespace) -> int:
    from predictors.length import data
    from predictors.length.lexical_model import load_lexical

    model = Path(args.model)
    if not model.is_file():
        raise UsageError(f"--model: {args.model} does not exist")
    if args.latency_n < 1:
        raise UsageError(f"--latency-n: must be >= 1, got {args.latency_n}")
    ranker = load_lexical(model)  # ValueError (one line) on a mismatched sidecar
    test_frac, seed, label = _split_of(ranker.sidecar)
    names = ALL_SOURCES if args.data == "all" else (args.data,)
    trained_on = str((ranker.sidecar.get("provenance") or {}).get("sources", ""))
    report = {"model": str(model), "split": args.split, "test_frac": test_frac, "split_seed": seed,
              "trained_on": trained_on, "sources": {}}
    all_rows: list = []
    for name in names:
        rows = _load_rows(name, label)
        if args.split == "test":
            rows = data.split_by_prompt(rows, test_frac, seed)[1]
        all_rows += rows
        report["sources"][name] = evaluate_rows(ranker, rows, args.latency_n)
    if len(names) > 1:
        report["sources"]["all"] = evaluate_rows(ranker, all_rows, args.latency_n)
    if args.json:
        from .cli import json_safe

        print(json.dumps(json_safe(report), indent=2, allow_nan=False))
        return 0
    print(f"# {model} (trained on {trained_on or '?'}); split {args.split} "
          f"(split_by_prompt test_frac={test_frac:g}, seed={seed})")
    print("| data | n | short/medium/long | tau_b | short-vs-long acc (Eq. 2) | 3-class acc | "
          "ms/prompt single | ms/prompt batched |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    for name, r in report["sources"].items():
        cc, lat = r["class_counts"], r["latency"] or {}
        print(f"| {name} | {r['n']} | {cc['short']}/{cc['medium']}/{cc['long']} | {fmt(r['kendall_tau_b'])} | "
              f"{fmt(r['short_long_accuracy'])} | {fmt(r['class_accuracy'])} | "
              f"{lat.get('single_ms_per_prompt', float('nan')):.4f} | {lat.get('batched_ms_per_prompt', float('nan')):.4f} |")
    if args.split == "all":
        print("# note: --split all includes prompts the artifact trained on")
    return 0
