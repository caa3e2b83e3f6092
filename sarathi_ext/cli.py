"""``sarathi-ext``: simulate and compare scheduling policies, and build the LPRS predictor.

Bad input ends with one line on stderr and exit code 2; nothing is written before inputs are
validated.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Sequence

from .core import ConfigError, PolicyConfig
from .core.ordering import ORDERS

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        raise UsageError(message)


# -- policy specs: NAME[+lprs][+apc][:field=value,...] ----------------------------------------------

_FIELD_TYPES = {f.name: f.type for f in fields(PolicyConfig)}


def _coerce(field: str, raw: str) -> Any:
    kind = _FIELD_TYPES.get(field)
    if kind is None:
        raise UsageError(f"policy spec: unknown field {field!r}; known: {', '.join(_FIELD_TYPES)}")
    try:
        if kind == "bool":
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError
            return raw.lower() in ("1", "true", "yes")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise UsageError(f"policy spec: {field}={raw!r} is not a valid {kind}") from None
    return raw


def parse_policy_spec(spec: str, base: dict[str, Any]) -> PolicyConfig:
    """``aging+lprs+apc:aging_alpha=100`` -> PolicyConfig, starting from ``base`` (the common flags)."""
    head, _, tail = spec.partition(":")
    parts = head.split("+")
    values = dict(base, policy=parts[0], chunk="static", apc=False)
    for extra in parts[1:]:
        if extra == "apc":
            values["apc"] = True
        elif extra in ("lprs", "static"):
            values["chunk"] = extra
        else:
            raise UsageError(f"policy spec {spec!r}: unknown modifier {extra!r}; use +lprs or +apc")
    if parts[0] not in ORDERS:
        raise UsageError(f"policy: unknown ordering {parts[0]!r}; choose from {sorted(ORDERS)}")
    for item in filter(None, tail.split(",")):
        key, eq, raw = item.partition("=")
        if not eq:
            raise UsageError(f"policy spec {spec!r}: expected field=value, got {item!r}")
        values[key.strip()] = _coerce(key.strip(), raw.strip())
    return PolicyConfig.from_mapping(values)


# -- arguments ------------------------------------------------------------------------------------


def _add_common(p: argparse.ArgumentParser) -> None:
    w = p.add_argument_group("workload")
    w.add_argument("--trace", default="sharegpt-turns",
                   help="lengths: sharegpt-turns (default), sharegpt, arxiv, azure-conv, apc-mix, or a CSV path")
    w.add_argument("--num-requests", "-n", type=int, default=200)
    w.add_argument("--arrival", default="fixed", choices=["fixed", "poisson", "gamma", "burst", "trace"])
    w.add_argument("--interval", type=float, default=0.1, help="mean seconds between arrivals (default 0.1)")
    w.add_argument("--gamma-cv", type=float, default=2.0, help="coefficient of variation for gamma arrivals")
    w.add_argument("--max-context", type=int, default=512, help="cap on prompt+output tokens (0: none)")
    w.add_argument("--max-gen", type=int, default=512, help="cap on output tokens (0: none)")
    w.add_argument("--output-len", type=int, default=16, help="output tokens for the apc-mix workload")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--scores", default="none", metavar="none|oracle|noisy-oracle:SIGMA",
                   help="per-request length scores for psjf/unified, computed once at arrival: none "
                        "(default), oracle (the true output length) or noisy-oracle:SIGMA (true length "
                        "x lognormal noise, seeded by --seed)")

    e = p.add_argument_group("engine")
    e.add_argument("--gpu", default="rtx4090")
    e.add_argument("--model", default="qwen3-8b")
    e.add_argument("--exec-model", default="roofline", choices=["roofline", "profile", "vidur"])
    e.add_argument("--profile", help="CSV for --exec-model profile (features) or vidur (mlp.csv)")
    e.add_argument("--noise", type=float, default=0.03, help="lognormal sigma on the true iteration time")
    e.add_argument("--chunk-size", type=int, default=256, help="token budget per iteration, B_max")
    e.add_argument("--max-num-seqs", type=int, default=10,
                   help="sequence slots, S_max (default 10, the capacity of seed 001 Table 5; Sarathi's own is 128)")
    e.add_argument("--block-size", type=int, default=16)
    e.add_argument("--num-blocks", type=int, help="KV blocks (default: derived from GPU memory)")
    e.add_argument("--predictor", metavar="MODEL.pt",
                   help="LPRS's batch-latency predictor: a trained artifact (default: the simulator's "
                        "own noise-free time model)")

    s = p.add_argument_group("policy parameters (shared by every adapter)")
    s.add_argument("--aging-alpha", type=float, default=37.5, help="alpha > 0: priority per second waited")
    s.add_argument("--aging-beta", type=float, default=-1.0, help="beta < 0: priority per remaining token")
    s.add_argument("--aging-weight-base", type=float,
                   help="alpha/|beta| (the paper's weight base); overrides --aging-alpha")
    s.add_argument("--lprs-target-ms", type=float, default=105.0)
    s.add_argument("--lprs-delta", type=int, default=16)
    s.add_argument("--lprs-lambda-u", type=float, default=1.0)
    s.add_argument("--lprs-lambda-o", type=float, default=4.0)
    s.add_argument("--apc-c-max", type=int, default=2)
    s.add_argument("--apc-l-min", type=int, default=16)
    s.add_argument("--admission", default="stop", choices=["stop", "skip"])
    s.add_argument("--starvation-s", type=float, default=60.0, help="wait beyond which a request counts as starved")

    p.add_argument("--json", metavar="PATH", help="write the full summary as JSON ('-' for stdout)")
    p.add_argument("--csv", metavar="PATH", help="write the summary table as CSV")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sarathi-ext", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser("simulate", help="run one policy on one workload in the embedded simulator")
    sim.add_argument("--policy", default="fcfs",
                     help="NAME[+lprs][+apc][:field=value,...], NAME in fcfs|aging|spf|psjf|predicted-sjf|"
                          "oracle-sjf|unified (default fcfs); fields include starvation=none|pars|clairvoyant|"
                          "aging, starvation_threshold_s=SECONDS, unified_gamma=G")
    _add_common(sim)
    cmp_ = sub.add_parser("compare", help="run several policies on the same workload, side by side")
    cmp_.add_argument("--policies", nargs="+", default=["fcfs", "aging"], metavar="SPEC",
                      help="policy specs; the first is the baseline for the %% change (default: fcfs aging)")
    cmp_.add_argument("--out", default="sarathi-ext-out", help="folder for the CDF plots (default sarathi-ext-out)")
    cmp_.add_argument("--no-plots", action="store_true")
    _add_common(cmp_)
    for p in (sim, cmp_):
        p.set_defaults(func=cmd_run)
    from .cli_latency import add_latency_commands

    add_latency_commands(sub)
    __import__("sarathi_ext.cli_length", fromlist=["x"]).add_length_commands(sub)
    return parser


def _base_policy(args: argparse.Namespace) -> dict[str, Any]:
    alpha = args.aging_alpha
    if args.aging_weight_base is not None:
        alpha = args.aging_weight_base * abs(args.aging_beta)
    return dict(
        aging_alpha=alpha, aging_beta=args.aging_beta, lprs_target_ms=args.lprs_target_ms,
        lprs_delta=args.lprs_delta, lprs_lambda_u=args.lprs_lambda_u, lprs_lambda_o=args.lprs_lambda_o,
        apc_c_max=args.apc_c_max, apc_l_min=args.apc_l_min, admission=args.admission,
    )


def _setup_and_workload(args: argparse.Namespace):
    from .sim.runner import SimSetup
    from .sim.workload import apply_scores, make_workload

    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size: must be >= 1, got {args.chunk_size}")
    setup = SimSetup(
        gpu=args.gpu, model=args.model, exec_model=args.exec_model, profile=args.profile, noise=args.noise,
        token_budget=args.chunk_size, max_num_seqs=args.max_num_seqs, block_size=args.block_size,
        num_blocks=args.num_blocks, seed=args.seed, predictor_path=args.predictor,
    )
    setup.kv_blocks()  # validates GPU/model names and that the weights fit
    workload = make_workload(
        args.trace, args.num_requests, args.arrival, args.interval, args.seed,
        args.max_context or None, args.max_gen or None, args.gamma_cv, args.output_len,
    )
    workload = apply_scores(workload, args.scores, args.seed)
    return setup, workload


# -- output ---------------------------------------------------------------------------------------

ROWS = [
    ("E2E mean (s)", ("e2e_s", "mean")), ("E2E P50 (s)", ("e2e_s", "p50")), ("E2E P95 (s)", ("e2e_s", "p95")),
    ("E2E P99 (s)", ("e2e_s", "p99")), ("TTFT mean (s)", ("ttft_s", "mean")), ("TTFT P50 (s)", ("ttft_s", "p50")),
    ("TTFT P95 (s)", ("ttft_s", "p95")), ("TTFT P99 (s)", ("ttft_s", "p99")), ("TBT mean (ms)", ("tbt_ms", "mean")),
    ("TBT P99 (ms)", ("tbt_ms", "p99")), ("per-token lat. mean (s)", ("per_token_latency_s", "mean")),
    ("sched delay mean (s)", ("sched_delay_s", "mean")), ("max wait (s)", ("fairness", "max_wait_s")),
    ("Jain (norm. latency)", ("fairness", "jain_norm_latency")), ("starved", ("fairness", "starved")),
    ("throughput (req/s)", ("throughput", "req_per_s")), ("output tok/s", ("throughput", "output_tok_per_s")),
    ("iteration mean (ms)", ("iterations", "ms", "mean")), ("iteration P99 (ms)", ("iterations", "ms", "p99")),
    ("avg prefill seqs/round", ("scheduling", "avg_prefill_seqs")),
    ("avg prefill chunk", ("scheduling", "avg_prefill_chunk")),
    ("blocked by activity cap", ("scheduling", "blocked_by_activity_cap")),
    ("blocked by min chunk", ("scheduling", "blocked_by_min_chunk")),
    ("starvation boosts", ("scheduling", "starvation_boosts")),
    ("preemptions", ("preemptions",)),
]


def _get(summary: dict[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(summary, dict) or key not in summary:
            return None
        summary = summary[key]
    return summary


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"


def format_table(summaries: Sequence[dict[str, Any]]) -> str:
    names = [s["policy"] for s in summaries]
    header = ["metric", *names, *(f"{n} vs {names[0]}" for n in names[1:])]
    rows = []
    for label, path in ROWS:
        vals = [_get(s, path) for s in summaries]
        if all(v is None for v in vals):
            continue
        row = [label, *map(_fmt, vals)]
        for v in vals[1:]:
            base = vals[0]
            row.append(f"{(v - base) / base * 100:+.2f}%" if v is not None and base else "-")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def json_safe(obj: Any) -> Any:
    """NaN and infinities (e.g. TBT of a run where nothing decodes) become null: strict JSON."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_csv(summaries: Sequence[dict[str, Any]], path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", *(s["policy"] for s in summaries)])
        for label, p in ROWS:
            w.writerow([label, *(_get(s, p) for s in summaries)])


# -- commands -------------------------------------------------------------------------------------


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass


def progress_bar(total: int, disable: bool, desc: str, unit: str = "req"):
    """A tqdm bar on a terminal; nothing when piped, disabled, or where tqdm is absent (a lent
    GPU machine runs the package from PYTHONPATH, without its dependencies)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, disable=disable or not sys.stderr.isatty(), leave=False)


def cmd_run(args: argparse.Namespace) -> int:
    from .sim.metrics import summarize
    from .sim.runner import run_policy

    base = _base_policy(args)
    specs = [args.policy] if args.command == "simulate" else args.policies
    policies = [parse_policy_spec(s, base) for s in specs]
    setup, workload = _setup_and_workload(args)
    for out in (args.csv, None if args.json == "-" else args.json):
        if out and not Path(out).resolve().parent.is_dir():
            raise UsageError(f"{out}: parent folder does not exist")

    print(f"# {workload.describe()}")
    print(f"# {setup.describe()}")
    results, summaries = [], []
    with progress_bar(len(workload) * len(policies), args.no_progress, "simulating") as bar:
        for policy in policies:
            result = run_policy(setup, policy, workload, bar.update)
            results.append(result)
            target = policy.lprs_target_ms if policy.chunk == "lprs" else None
            summaries.append(summarize(result, args.starvation_s, target))
    print(format_table(summaries))
    if args.command == "compare" and not args.no_plots:
        from .sim.plots import plot_cdfs

        for path in plot_cdfs(results, Path(args.out)):
            print(f"# wrote {path}")
    if args.csv:
        write_csv(summaries, args.csv)
    if args.json:
        doc = {"setup": setup.describe(), "workload": workload.describe(), "results": summaries}
        text = json.dumps(json_safe(doc), indent=2, allow_nan=False)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from .sim.engine import SimulationError
    from .sim.workload import WorkloadError

    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except (UsageError, ConfigError, WorkloadError, SimulationError) as e:
        print(f"sarathi-ext: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, KeyError) as e:  # unknown GPU/model names, weights that do not fit
        msg = e.args[0] if e.args else str(e)
        print(f"sarathi-ext: error: {msg}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
