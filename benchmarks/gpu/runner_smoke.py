"""Check and time the PyTorch batch runner on this machine's device, before a long profile.

1. Correctness on the device: a small float32 model run (a) as one chunk vs two chunks and
   (b) as a mixed decode + prefill batch vs separate iterations must agree, which exercises the
   device's SDPA kernels, masks and KV-cache writes.
2. Timings of typical iterations of the profiled model (full Qwen3-8B shape on CUDA by default):
   prefill chunks at several sizes and offsets, decode batches at several sizes, a mixed batch.
3. The memory features (from torch.cuda on CUDA, zeros on the CPU).

Writes ``runner_smoke.json`` under --out. Usage:
    python benchmarks/gpu/runner_smoke.py --device cuda --scale full --out gpu-out
    python benchmarks/gpu/runner_smoke.py --device cpu --scale tiny     # local dry run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from predictors.latency.runner import TorchBatchRunner, build_runner, scaled_spec  # noqa: E402
from sarathi_ext.core.plan import PrefillChunk, RoundPlan  # noqa: E402
from sarathi_ext.sim.models import get_model  # noqa: E402


def check_correctness(device: str) -> dict:
    spec = scaled_spec(get_model("qwen3-8b"), hidden=128, layers=2, heads=8, kv_heads=2, head_dim=32,
                       intermediate=256, vocab=512)

    def fresh() -> TorchBatchRunner:
        r = TorchBatchRunner(spec, device=device, dtype=torch.float32, max_context=256, max_seqs=4, seed=3)
        r.capture_logits = True
        return r

    def run(r, decodes=(), prefills=()):
        r.execute_plan(RoundPlan(decodes=[d for d, _ in decodes], decode_contexts=[c for _, c in decodes],
                                 prefills=[PrefillChunk(*p) for p in prefills]))
        return dict(r.last_logits)

    def diff(a, b):
        return float((a - b).abs().max() / b.abs().max())

    one, two = fresh(), fresh()
    whole = run(one, prefills=[("a", 0, 100, True)])["a"]
    run(two, prefills=[("a", 0, 37, False)])
    chunked = run(two, prefills=[("a", 37, 63, True)])["a"]

    mixed, alone = fresh(), fresh()
    run(mixed, prefills=[("A", 0, 80, True), ("C", 0, 30, True), ("B", 0, 20, False)])
    m = run(mixed, decodes=[("A", 80), ("C", 30)], prefills=[("B", 20, 50, True)])
    run(alone, prefills=[("A", 0, 80, True)])
    run(alone, prefills=[("C", 0, 30, True)])
    run(alone, prefills=[("B", 0, 20, False)])
    s = {"A": run(alone, decodes=[("A", 80)])["A"], "C": run(alone, decodes=[("C", 30)])["C"],
         "B": run(alone, prefills=[("B", 20, 50, True)])["B"]}
    out = {"chunked_vs_whole_rel": diff(chunked, whole),
           **{f"mixed_vs_separate_rel_{k}": diff(m[k], s[k]) for k in s}}
    out["ok"] = all(v < 1e-3 for v in out.values())
    return out


def median_ms(r: TorchBatchRunner, make_plan, repeats: int) -> float:
    return statistics.median(r.execute_plan(make_plan(i)) for i in range(repeats))


def time_shapes(r: TorchBatchRunner, repeats: int) -> dict:
    res: dict[str, float] = {}
    uid = iter(range(10**9))

    def prefill_plan(tokens: int, start: int = 0):
        def make(_):
            rid = ("p", next(uid))
            if start:  # lay down the earlier context first, untimed
                r.execute_plan(RoundPlan(prefills=[PrefillChunk(rid, 0, start, False)]))
            return RoundPlan(prefills=[PrefillChunk(rid, start, tokens, True)])
        return make

    def timed_prefill(key, tokens, start=0):
        ms = []
        for i in range(repeats):
            plan = prefill_plan(tokens, start)(i)
            ms.append(r.execute_plan(plan))
            r.release(plan.prefills[0].req_id)
        res[key] = statistics.median(ms)

    for c in (64, 256, 512, 1024):
        timed_prefill(f"prefill_{c}_at_0", c)
    timed_prefill("prefill_512_at_1536", 512, 1536)

    ctx = min(1024, r.max_context - repeats - 2)
    n_max = min(64, r.max_seqs - 2)
    live = []
    for j in range(0, n_max, 2):  # two prompts per iteration
        ids = [("d", j), ("d", j + 1)]
        r.execute_plan(RoundPlan(prefills=[PrefillChunk(rid, 0, ctx, True) for rid in ids]))
        live += ids
    for n in (1, 8, 32, 64):
        if n > len(live):
            continue
        rids = live[:n]

        def make(_, rids=rids):
            return RoundPlan(decodes=list(rids), decode_contexts=[r._lens[x] for x in rids])
        res[f"decode_{n}_at_{ctx}"] = median_ms(r, make, repeats)
    n = min(32, len(live))

    def mixed(_):
        rid = ("m", next(uid))
        return RoundPlan(decodes=live[:n], decode_contexts=[r._lens[x] for x in live[:n]],
                         prefills=[PrefillChunk(rid, 0, 512 - n, True)])
    ms = []
    for i in range(repeats):
        plan = mixed(i)
        ms.append(r.execute_plan(plan))
        r.release(plan.prefills[0].req_id)
    res[f"mixed_{n}_decodes_plus_{512 - n}_prefill"] = statistics.median(ms)
    for rid in live:
        r.release(rid)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", default="auto", choices=["auto", "tiny", "full"])
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=".")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads when the device is the CPU")
    args = ap.parse_args()

    t0 = time.perf_counter()
    torch.set_num_threads(args.threads) if not torch.cuda.is_available() or args.device == "cpu" else None
    report: dict = {"correctness": check_correctness(args.device if args.device != "auto" else
                                                     ("cuda" if torch.cuda.is_available() else "cpu"))}
    print("correctness:", json.dumps(report["correctness"]), flush=True)
    t1 = time.perf_counter()
    r = build_runner(args.model, scale=args.scale, device=args.device, max_context=2560, max_seqs=72, seed=0,
                     cpu_threads=args.threads)
    report["build_s"] = time.perf_counter() - t1
    report["runner"] = r.describe()
    print("runner:", json.dumps(report["runner"]), flush=True)
    r.warmup(5)
    report["memory_after_warmup"] = asdict(r.memory_state())
    report["iteration_ms"] = time_shapes(r, args.repeats)
    report["memory_after_timing"] = asdict(r.memory_state())
    report["total_s"] = time.perf_counter() - t0
    for k, v in report["iteration_ms"].items():
        print(f"  {k:40s} {v:9.2f} ms", flush=True)
    print("memory:", report["memory_after_timing"], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runner_smoke.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["correctness"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
