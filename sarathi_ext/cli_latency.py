"""``sarathi-ext profile | train-latency | eval-latency``: the LPRS batch-latency predictor.

profile        collect rows (16 features + measured ms) from the simulator (a), a real PyTorch
               runner (b), or an engine adapter's CSV (c)
train-latency  clean, bucket, downsample, split 8:1:1, train the MLP, export TorchScript + sidecar
eval-latency   accuracy on the held-out test split against linear, quadratic and random-forest fits

These paths import neither matplotlib nor tqdm unconditionally: a lent GPU machine runs them from
PYTHONPATH with only torch and numpy.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli import UsageError, progress_bar


def add_latency_commands(sub) -> None:
    p = sub.add_parser("profile", help="collect batch-latency profile rows (features + measured ms)")
    p.add_argument("--source", required=True, choices=["sim", "torch", "csv"],
                   help="sim: the simulator's noisy time model; torch: a real PyTorch runner; "
                        "csv: validate and adopt a CSV written by an engine hook")
    p.add_argument("--out", required=True, help="profile CSV to write (provenance goes to <out>.meta.json)")
    p.add_argument("--input", help="for --source csv: the adapter-written CSV")
    p.add_argument("--iterations", type=int, default=20000, help="rows to collect (default 20000)")
    p.add_argument("--gpu", default="rtx4090", help="--source sim: GPU of the time model")
    p.add_argument("--model", default="qwen3-8b", help="model shape (sim time model, or torch runner)")
    p.add_argument("--noise", type=float, default=0.03, help="--source sim: lognormal sigma")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="--source torch")
    p.add_argument("--scale", default="auto", choices=["auto", "tiny", "full"],
                   help="--source torch: full model shape, or a scaled-down one (auto: full on CUDA, tiny on CPU)")
    p.add_argument("--max-context", type=int, default=2048, help="longest sequence in the sweep")
    p.add_argument("--max-seconds", type=float, help="stop cleanly after this much wall time, keeping the rows")
    p.add_argument("--threads", type=int, default=1,
                   help="--source torch on CPU: torch threads (default 1: more contend on a shared machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_profile)

    t = sub.add_parser("train-latency", help="train the 16-feature MLP and export TorchScript + sidecar")
    t.add_argument("--profile", required=True, nargs="+", help="profile CSV(s)")
    t.add_argument("--out", required=True, help="TorchScript file to write (sidecar: <out>.json)")
    t.add_argument("--epochs", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=256)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--weight-decay", type=float, default=1e-3)
    t.add_argument("--under-ratio", type=float, default=2.0,
                   help="weight of under-prediction in the asymmetric Huber loss (Eq. 5), > 1")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval-latency", help="accuracy on the test split against three baselines (Table 8)")
    e.add_argument("--model", required=True, help="trained artifact (TorchScript file)")
    e.add_argument("--profile", nargs="+", help="profile CSV(s) (default: those the model was trained on)")
    e.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    e.set_defaults(func=cmd_eval)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise UsageError(f"{name}: must be > 0, got {value}")


def _sim_executor(args):
    from .sim.exec_model import build_exec_model

    if args.noise < 0:
        raise UsageError(f"--noise: must be >= 0, got {args.noise}")
    executor = build_exec_model("roofline", args.gpu, args.model, None, args.noise, args.seed)
    return executor, {"source": "sim", "exec_model": "roofline", "gpu": args.gpu, "model": args.model,
                      "noise_sigma": args.noise}


def _torch_executor(args):
    try:
        import torch
    except ImportError:
        raise UsageError("--source torch needs PyTorch: pip install 'sarathi-ext[latency]'") from None
    from predictors.latency.runner import TorchBatchRunner, scaled_spec
    from .sim.models import get_model

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is visible")
    spec = get_model(args.model)
    scale = args.scale if args.scale != "auto" else ("full" if device == "cuda" else "tiny")
    if scale == "tiny":
        spec = scaled_spec(spec)
    from predictors.latency.profiling import CONCURRENCY

    runner = TorchBatchRunner(spec, device=device, max_context=args.max_context, max_seqs=max(CONCURRENCY),
                              seed=args.seed, cpu_threads=args.threads if device == "cpu" else None)
    runner.warmup()
    return runner, {"source": "torch", "scale": scale, **runner.describe()}


def cmd_profile(args: argparse.Namespace) -> int:
    from predictors.latency.profiling import run_sweep
    from predictors.latency.schema import ProfileWriter, read_profile, write_profile

    _positive("--iterations", args.iterations)
    if args.max_seconds is not None:
        _positive("--max-seconds", args.max_seconds)
    _positive("--threads", args.threads)
    _positive("--max-context", args.max_context)
    out = Path(args.out)
    if not out.resolve().parent.is_dir():
        raise UsageError(f"--out: folder {out.resolve().parent} does not exist")
    if args.source == "csv":
        if not args.input:
            raise UsageError("--source csv needs --input CSV")
        X, y, meta = read_profile(args.input)
        write_profile(out, X, y, {**meta, "source": meta.get("source", "csv"), "adopted_from": str(args.input)})
        print(f"# {len(y)} rows from {args.input} -> {out}")
        return 0
    executor, provenance = _sim_executor(args) if args.source == "sim" else _torch_executor(args)
    provenance.update(max_context=args.max_context, seed=args.seed, sweep="predictors.latency.profiling")
    with progress_bar(args.iterations, args.no_progress, f"profiling ({args.source})", unit="it") as bar:
        with ProfileWriter(out, provenance) as writer:
            rows = run_sweep(executor, writer, args.iterations, args.max_context, seed=args.seed,
                             progress=bar.update, max_seconds=args.max_seconds)
    print(f"# wrote {rows} rows to {out} ({provenance['source']})")
    return 0


def _need_torch(command: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError(f"{command} needs PyTorch: pip install 'sarathi-ext[latency]'") from None


def cmd_train(args: argparse.Namespace) -> int:
    _need_torch("train-latency")
    from predictors.latency import train_from_csv

    for name in ("epochs", "batch_size", "lr"):
        _positive(f"--{name.replace('_', '-')}", getattr(args, name))
    if args.under_ratio < 1:
        raise UsageError(f"--under-ratio: must be >= 1, got {args.under_ratio}")
    out = Path(args.out)
    if not out.resolve().parent.is_dir():
        raise UsageError(f"--out: folder {out.resolve().parent} does not exist")
    with progress_bar(args.epochs, args.no_progress, "training", unit="epoch") as bar:
        result = train_from_csv(
            args.profile, out, seed=args.seed, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
            weight_decay=args.weight_decay, under_ratio=args.under_ratio, progress=lambda _: bar.update(1),
        )
    print(result["report"])
    print(f"# wrote {result['artifact']} and its sidecar {result['artifact']}.json")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    _need_torch("eval-latency")
    from predictors.latency import evaluate_from_csv

    if not Path(args.model).is_file():
        raise UsageError(f"--model: {args.model} does not exist")
    rows, report = evaluate_from_csv(args.model, args.profile)
    print(report)
    if args.json:
        from .cli import json_safe

        Path(args.json).write_text(json.dumps(json_safe(rows), indent=2, allow_nan=False) + "\n")
    return 0
