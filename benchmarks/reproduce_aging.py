"""Seed 001's aging experiments in the simulator: Table 4, and the sensitivity of Figs. 5 and 6.

    python benchmarks/reproduce_aging.py [--seeds 0 1 2 3 4]

Two settings, both Qwen3-8B on an RTX 4090, 200 requests at a fixed interval:

  paper         section 4.1 as written: ShareGPT user -> assistant turns (`sharegpt-turns`, prompt
                median 18 / P90 111 tokens; the paper reports 19 / 179), 0.1 s interval, context
                and generation capped at 512, 10 sequence slots (Table 5's capacity). Slot-bound:
                requests queue for a slot, which the decode holds.
  prefill-bound Vidur's ShareGPT (prompts carry the conversation history: median 1,604 tokens
                after a 2,048 context cap), 0.05 s interval, 128 slots. Requests queue for the
                prefill budget, which is what prefill ordering controls.

Each setting: chunk 256/512/1024 x FCFS/Aging/SPF (Table 4, Fig. 5), weight base 100 vs 500 at
chunk 512 (Fig. 6), and the Aging-vs-FCFS change over several 200-request samples (robustness).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO, markdown_table  # noqa: E402
from sarathi_ext.core import PolicyConfig  # noqa: E402
from sarathi_ext.sim.runner import SimSetup, run_and_summarize  # noqa: E402
from sarathi_ext.sim.workload import make_workload  # noqa: E402

CHUNKS = (256, 512, 1024)
SETTINGS = {
    "paper": dict(trace="sharegpt-turns", interval=0.1, max_context=512, max_gen=512, seqs=10),
    "prefill-bound": dict(trace="sharegpt", interval=0.05, max_context=2048, max_gen=512, seqs=128),
}


def run(setting: dict, chunk: int, policy: PolicyConfig, seed: int) -> dict:
    wl = make_workload(setting["trace"], 200, "fixed", setting["interval"], seed=seed,
                       max_context=setting["max_context"], max_gen=setting["max_gen"])
    setup = SimSetup(gpu="rtx4090", model="qwen3-8b", token_budget=chunk, max_num_seqs=setting["seqs"], seed=seed)
    return run_and_summarize(setup, policy, wl)


def pct(new: float, base: float) -> str:
    return f"{(new - base) / base * 100:+.2f}%"


def report(name: str, setting: dict, alpha: float, seeds: list[int], plot_dir: Path | None) -> None:
    policies = {
        "FCFS": PolicyConfig(policy="fcfs"),
        "Aging": PolicyConfig(policy="aging", aging_alpha=alpha),
        "SPF": PolicyConfig(policy="spf"),
    }
    seed0 = seeds[0]
    print(f"## Setting `{name}`: {setting} (seed {seed0}, aging alpha={alpha:g}, beta=-1)\n")
    print("### Table 4 analogue (Fig. 5: chunk size)\n")
    rows, by_chunk = [], {}
    for chunk in CHUNKS:
        res = {p: run(setting, chunk, cfg, seed0) for p, cfg in policies.items()}
        by_chunk[chunk] = res
        for p, s in res.items():
            rows.append([chunk, p, *(f"{s[m][q]:.2f}s" for m in ("e2e_s", "ttft_s") for q in ("mean", "p95")),
                         f"{s['fairness']['max_wait_s']:.2f}s"])
        f, a = res["FCFS"], res["Aging"]
        rows.append([chunk, "Aging vs FCFS", *(pct(a[m][q], f[m][q]) for m in ("e2e_s", "ttft_s") for q in ("mean", "p95")),
                     pct(a["fairness"]["max_wait_s"], f["fairness"]["max_wait_s"])])
    print(markdown_table(["chunk", "policy", "mean E2E", "P95 E2E", "mean TTFT", "P95 TTFT", "max wait"], rows))

    print("\n### Weight base alpha/|beta| at chunk 512 (Fig. 6)\n")
    wb_rows, wb = [], {}
    for base in (100, 500):
        s = run(setting, 512, PolicyConfig(policy="aging", aging_alpha=float(base)), seed0)
        wb[base] = s
        wb_rows.append([base, f"{s['e2e_s']['mean']:.2f}s", f"{s['ttft_s']['p95']:.2f}s", f"{s['fairness']['max_wait_s']:.2f}s"])
    print(markdown_table(["weight base", "mean E2E", "P95 TTFT", "max wait"], wb_rows))

    print(f"\n### Robustness: Aging vs FCFS over seeds {seeds}\n")
    rob_rows = []
    for chunk in CHUNKS:
        e2e, ttft = [], []
        for seed in seeds:
            f, a = run(setting, chunk, policies["FCFS"], seed), run(setting, chunk, policies["Aging"], seed)
            e2e.append((a["e2e_s"]["mean"] - f["e2e_s"]["mean"]) / f["e2e_s"]["mean"] * 100)
            ttft.append((a["ttft_s"]["mean"] - f["ttft_s"]["mean"]) / f["ttft_s"]["mean"] * 100)
        rob_rows.append([
            chunk, f"{statistics.median(e2e):+.2f}%", f"{min(e2e):+.2f}% .. {max(e2e):+.2f}%",
            f"{statistics.median(ttft):+.2f}%", f"{min(ttft):+.2f}% .. {max(ttft):+.2f}%",
        ])
    print(markdown_table(["chunk", "mean E2E change, median", "range", "mean TTFT change, median", "range"], rob_rows))
    if plot_dir is not None:
        path = plot_dir / f"aging_sensitivity_{name}.png"
        plot(name, by_chunk, wb, path)
        print(f"\n(figure: {path.relative_to(REPO) if path.is_relative_to(REPO) else path})")
    print()


def plot(name: str, by_chunk: dict, wb: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    xs = list(by_chunk)
    for policy in by_chunk[xs[0]]:
        ax1.plot(xs, [by_chunk[c][policy]["e2e_s"]["mean"] for c in xs], "o-", label=f"{policy} mean E2E")
        ax1.plot(xs, [by_chunk[c][policy]["ttft_s"]["mean"] for c in xs], "s--", label=f"{policy} mean TTFT")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(xs, [str(x) for x in xs])
    ax1.set_xlabel("chunk size (tokens)")
    ax1.set_ylabel("seconds")
    ax1.set_title(f"Fig. 5 analogue ({name})")
    ax1.legend(fontsize=7)
    bases = [str(b) for b in wb]
    ax2.bar(bases, [s["e2e_s"]["mean"] for s in wb.values()], width=0.4, label="mean E2E")
    ax2.plot(bases, [s["ttft_s"]["p95"] for s in wb.values()], "kD", label="P95 TTFT")
    ax2.set_xlabel("weight base (alpha/|beta|)")
    ax2.set_ylabel("seconds")
    ax2.set_title(f"Fig. 6 analogue ({name}), chunk 512")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--alpha", type=float, default=37.5)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--plot-dir", default=str(REPO / "benchmarks" / "figures"), help="'' for no plots")
    args = ap.parse_args()
    for name in args.settings:
        report(name, SETTINGS[name], args.alpha, args.seeds, Path(args.plot_dir) if args.plot_dir else None)


if __name__ == "__main__":
    main()
