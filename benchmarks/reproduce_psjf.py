"""Predicted-SJF in the simulator with a real lexical ranker on real prompts (issue 6; seed 000
PARS Tables VI-VIII, seed 002 Clairvoyant's starvation guard).

    python benchmarks/reproduce_psjf.py [--model ART.onnx] [--num-requests 2000] [--rates 5 10 15 20]

Workload: CASTILLO ``validate.jsonl`` rows answered by one model (``--castillo-model``, default
Qwen2.5-7B-Instruct-1M, the closest CASTILLO model to Qwen3-8B), prompts that also occur in
``train.jsonl`` dropped, ``--num-requests`` of them drawn in a seeded order. Prompt tokens =
max(1, len(text) // 4) (Clairvoyant's tokenizer approximation; no tokenizer offline); output
tokens = the row's label, the median of its ten recorded response lengths, rounded.
Engine: Qwen3-8B on an A100-80GB (roofline time model, noise 0.03), chunk budget 512,
64 sequence slots, KV blocks derived from memory.

Scores (``Workload.with_scores``): none (FCFS); lexical P(Long) from an ONNX artifact trained on
CASTILLO train + ShareGPT + GPTeacher (never the validate prompts; trained here and cached under
benchmarks/out/ unless ``--model`` is given); oracle (true output length); noisy oracle (true
length x exp(N(0, 0.5^2))).

Experiments: (a) burst, every request at t = 0; (b) Poisson arrivals at each rate; (c) psjf with
the lexical score under no guard / PARS's guard / Clairvoyant's guard, on the burst.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO, markdown_table  # noqa: E402
from sarathi_ext.core import PolicyConfig  # noqa: E402
from sarathi_ext.sim.runner import SimSetup, run_and_summarize  # noqa: E402
from sarathi_ext.sim.workload import Workload, arrival_times, noisy_oracle_scores, oracle_scores  # noqa: E402

OUT = REPO / "benchmarks" / "out"
DEFAULT_ART = OUT / "lexical_psjf.onnx"
TRAIN_SOURCES = "castillo-train,sharegpt,gpteacher"
SHORT, LONG = 200, 800


def ensure_model(path: Path | None) -> Path:
    if path is not None:
        return path
    if not DEFAULT_ART.is_file():
        from predictors.length import lexical_model

        print(f"# training the lexical ranker on {TRAIN_SOURCES} -> {DEFAULT_ART}", file=sys.stderr)
        OUT.mkdir(parents=True, exist_ok=True)
        lexical_model.main(["--out", str(DEFAULT_ART), "--sources", TRAIN_SOURCES])
    return DEFAULT_ART


def castillo_rows(model: str, n: int, seed: int) -> list:
    from predictors.length import data

    train_prompts = {r.prompt for r in data.load_source("castillo-train")}
    rows = [r for r in data.load_source("castillo-validate") if r.model == model and r.prompt not in train_prompts]
    if not rows:
        raise SystemExit(f"no CASTILLO validate rows for model {model!r}")
    if n > len(rows):
        raise SystemExit(f"--num-requests {n}: only {len(rows)} rows for {model}")
    idx = np.random.default_rng(seed).permutation(len(rows))[:n]
    return [rows[i] for i in idx]


def build_workload(rows: list, arrivals: np.ndarray, name: str) -> Workload:
    prompts = np.asarray([max(1, len(r.prompt) // 4) for r in rows], dtype=np.int64)
    outputs = np.asarray([max(1, int(round(r.length))) for r in rows], dtype=np.int64)
    return Workload(name, arrivals, prompts, outputs)


def pt(s: dict, key: str = "per_token_latency_s") -> dict:
    return s[key]


def row_of(label: str, s: dict, short_mask: np.ndarray | None = None) -> list:
    d = pt(s)
    return [label, f"{d['mean'] * 1e3:.1f}", f"{d['p90'] * 1e3:.1f}", f"{s['e2e_s']['mean']:.1f}",
            f"{s['fairness']['max_wait_s']:.1f}", f"{s['wall_s']:.1f}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="lexical artifact (default: train and cache one)")
    ap.add_argument("--num-requests", type=int, default=2000)
    ap.add_argument("--rates", type=float, nargs="+", default=[5, 10, 15, 20])
    ap.add_argument("--castillo-model", default="Qwen--Qwen2.5-7B-Instruct-1M")
    ap.add_argument("--sigma", type=float, default=0.5, help="noisy-oracle lognormal sigma")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write every summary as JSON")
    a = ap.parse_args(argv)

    from predictors.length import data
    from predictors.length.evaluate import kendall_tau_b, short_long_accuracy
    from predictors.length.lexical_model import load_lexical

    t_start = time.perf_counter()
    art = ensure_model(a.model)
    ranker = load_lexical(art)
    rows = castillo_rows(a.castillo_model, a.num_requests, a.seed)
    n = len(rows)
    lex = ranker.score([r.prompt for r in rows])
    setup = SimSetup(gpu="a100-80gb", model="qwen3-8b", token_budget=512, max_num_seqs=64, seed=a.seed)

    # gamma for unified: P(Long) in [0, 1] -> tokens. gamma = the mean label of the Long (>= 800)
    # training rows, so a request that is surely Long carries the decode work of a typical Long one.
    train_rows = [r for s in TRAIN_SOURCES.split(",") for r in data.load_source(s)]
    train_rows = data.split_by_prompt(train_rows, 0.2, int(ranker.sidecar["provenance"]["split"]["seed"]))[0]
    long_lens = [r.length for r in train_rows if r.length >= LONG]
    gamma = float(np.mean(long_lens))

    burst = build_workload(rows, np.zeros(n), f"castillo-validate[{a.castillo_model}]/burst")
    true = burst.output_lens.astype(float)
    noisy = noisy_oracle_scores(burst, a.sigma, a.seed)
    pred_quality = {
        "lexical": (kendall_tau_b(lex, true), short_long_accuracy(lex, true)),
        f"noisy-oracle({a.sigma:g})": (kendall_tau_b(noisy, true), short_long_accuracy(noisy, true)),
        "oracle": (1.0, short_long_accuracy(true, true)),
    }
    out: dict = {"setup": setup.describe(), "workload": burst.describe(), "gamma": gamma, "artifact": str(art)}
    lines: list[str] = []
    cmd = "python benchmarks/reproduce_psjf.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines.append(f"Command: `{cmd.strip()}` (artifact `{art.relative_to(REPO) if art.is_relative_to(REPO) else art}`, "
                 f"trained on {ranker.sidecar['provenance'].get('sources')})\n")
    lines.append(f"Setup: {setup.describe()}.  \nWorkload: {burst.describe()} "
                 f"(prompt tokens = len(text)//4; output = median of the ten recorded lengths).\n")
    lines.append("Score quality on these requests:\n")
    lines.append(markdown_table(["score", "Kendall tau_b", "Short-vs-Long acc (Eq. 2)"],
                                [[k, f"{t:.3f}", f"{s:.3f}"] for k, (t, s) in pred_quality.items()]))

    # (a) burst
    pol = {
        "fcfs": (PolicyConfig(policy="fcfs"), None),
        "psjf(lexical)": (PolicyConfig(policy="psjf"), lex),
        f"psjf(noisy-oracle {a.sigma:g})": (PolicyConfig(policy="psjf"), noisy),
        f"unified(lexical, g={gamma:.0f})": (PolicyConfig(policy="unified", unified_gamma=gamma), lex),
        "oracle-sjf": (PolicyConfig(policy="oracle-sjf"), oracle_scores(burst)),
    }
    res_a = {}
    for label, (cfg, sc) in pol.items():
        res_a[label] = run_and_summarize(setup, cfg, burst.with_scores(sc))
        print(f"# (a) {label}: {res_a[label]['wall_s']:.1f}s wall", file=sys.stderr)
    hdr = ["policy", "per-token mean (ms)", "per-token P90 (ms)", "E2E mean (s)", "max wait (s)", "sim wall (s)"]
    lines.append(f"\n(a) Burst: {n} requests at t = 0 (PARS Table VI shape).\n")
    lines.append(markdown_table(hdr, [row_of(k, s) for k, s in res_a.items()]))
    out["burst"] = res_a

    # (b) Poisson rates
    rate_rows = []
    out["rates"] = {}
    for rate in a.rates:
        arr = arrival_times("poisson", n, np.random.default_rng(a.seed + 1), 1.0 / rate)
        w = build_workload(rows, arr, f"castillo-validate/poisson{rate:g}")
        cells = [f"{rate:g}"]
        out["rates"][rate] = {}
        for label, cfg, sc in (("fcfs", PolicyConfig(policy="fcfs"), None),
                               ("psjf(lexical)", PolicyConfig(policy="psjf"), lex),
                               ("oracle-sjf", PolicyConfig(policy="oracle-sjf"), oracle_scores(w))):
            s = run_and_summarize(setup, cfg, w.with_scores(sc))
            out["rates"][rate][label] = s
            cells.append(f"{pt(s)['p90'] * 1e3:.1f}")
        print(f"# (b) rate {rate:g} done", file=sys.stderr)
        rate_rows.append(cells)
    lines.append(f"\n(b) Poisson arrivals, {n} requests: per-token latency P90 (ms) (PARS Tables VII-VIII shape).\n")
    lines.append(markdown_table(["rate (req/s)", "fcfs", "psjf(lexical)", "oracle-sjf"], rate_rows))

    # (c) starvation guards on the burst. Clairvoyant's tau = 3 x the mean service time of a Short
    # request (seed 002 Sec. 3.5), measured here as the mean (finish - first scheduled) of the
    # Short (< 200 output tokens) requests in the FCFS burst run; PARS's threshold is its 2 minutes.
    from sarathi_ext.sim.runner import run_policy

    fc = run_policy(setup, PolicyConfig(policy="fcfs"), burst)
    short = fc.output_lens < SHORT
    mu_short = float(np.mean((fc.finish - fc.first_scheduled)[short])) if short.any() else 2.0
    tau = 3.0 * mu_short
    guards = [("none", PolicyConfig(policy="psjf")),
              ("pars(120s)", PolicyConfig(policy="psjf", starvation="pars", starvation_threshold_s=120.0)),
              (f"pars({tau:.1f}s)", PolicyConfig(policy="psjf", starvation="pars", starvation_threshold_s=tau)),
              (f"clairvoyant(tau={tau:.1f}s)", PolicyConfig(policy="psjf", starvation="clairvoyant",
                                                             starvation_threshold_s=tau))]
    g_rows = []
    out["starvation"] = {"mu_short_s": mu_short, "tau_s": tau}
    for label, cfg in guards:
        s = run_and_summarize(setup, cfg, burst.with_scores(lex), starvation_s=tau)
        out["starvation"][label] = s
        g_rows.append([label, f"{pt(s)['p90'] * 1e3:.1f}", f"{s['e2e_s']['p99']:.1f}",
                       f"{s['fairness']['max_wait_s']:.1f}", str(s["fairness"]["starved"])])
    lines.append(f"\n(c) Starvation guards, psjf(lexical) on the burst. Short-request service time "
                 f"mu_short = {mu_short:.2f} s (FCFS burst), tau = 3 mu_short = {tau:.1f} s; "
                 f"'starved' = requests whose wait exceeded tau.\n")
    lines.append(markdown_table(["guard", "per-token P90 (ms)", "E2E P99 (s)", "max wait (s)", "starved"], g_rows))
    lines.append(f"\nTotal wall time {time.perf_counter() - t_start:.0f} s.")
    text = "\n".join(lines)
    print(text)
    if a.json:
        from sarathi_ext.cli import json_safe

        a.json.write_text(json.dumps(json_safe(out), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
