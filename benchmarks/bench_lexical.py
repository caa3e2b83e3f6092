"""Per-prompt cost of the lexical length ranker (seed 002 Section 3.3): the 19 features plus ONNX
inference of the 3-class, 300-tree XGBoost, on real prompts.

    python benchmarks/bench_lexical.py [--artifact lexical.onnx] [--prompts 2000] [--repeats 3]

Timed paths (onnxruntime on CPU, 1 intra-op thread, sequential execution):

* single: ``LexicalRanker.score_one(prompt)`` per prompt (str -> float P(Long)), one
  ``perf_counter_ns`` pair per call; P50/P90/P99 over all calls. Also the two halves alone:
  ``extract`` and the ONNX ``run`` on a prepared [1, 19] row.
* batched: ``LexicalRanker.score(prompts)`` on batches of 16/64/256, per-prompt time = call / batch.

Target: single-prompt P50 <= 30 us (the seed reports 29 us on an Apple M1). Without
--artifact a model is trained here with the seed's hyperparameters on a slice of the shared
data (the latency depends on the tree count and depth, not on which data filled them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import markdown_table  # noqa: E402
from predictors.length import data  # noqa: E402
from predictors.length.lexical import extract  # noqa: E402
from predictors.length.lexical_model import load_lexical, save_lexical, train_lexical  # noqa: E402

TARGET_P50_US = 30.0
BATCHES = (16, 64, 256)


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def time_each(fn, items, repeats):
    out = []
    for _ in range(repeats):
        for it in items:
            t0 = time.perf_counter_ns()
            fn(it)
            out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", help="a saved NAME.onnx; default: train one here")
    ap.add_argument("--data-root", default=str(data.DATA_ROOT))
    ap.add_argument("--prompts", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)

    rows = data.load_source("castillo-validate", a.data_root) + data.load_source("sharegpt", a.data_root)
    rng = np.random.default_rng(0)
    tmp = None
    if a.artifact:
        path = Path(a.artifact)
    else:
        train = [rows[i] for i in rng.choice(len(rows), min(8000, len(rows)), replace=False)]
        tp, tl = data.arrays(train)
        t0 = time.perf_counter()
        model = train_lexical(tp, tl)
        print(f"trained 300-tree model on {len(tp)} prompts in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        tmp = tempfile.TemporaryDirectory()
        path = save_lexical(model, Path(tmp.name) / "lexical.onnx", train_prompts=tp)
    ranker = load_lexical(path, threads=1)
    sample = [r.prompt for r in (rows[i] for i in rng.choice(len(rows), a.prompts, replace=False))]
    chars = [len(p) for p in sample]

    # warm-up
    for p in sample[:300]:
        ranker.score_one(p)
    single = time_each(ranker.score_one, sample, a.repeats)
    feats = time_each(extract, sample, a.repeats)
    sess, X = ranker._sess, [extract(p).reshape(1, -1) for p in sample]
    infer = time_each(lambda x: sess.run(["probabilities"], {"input": x}), X, a.repeats)

    rows_out = [
        ["single: features + ONNX (score_one)", f"{pct(single, 50):.1f}", f"{pct(single, 90):.1f}", f"{pct(single, 99):.1f}"],
        ["single: features only (extract)", f"{pct(feats, 50):.1f}", f"{pct(feats, 90):.1f}", f"{pct(feats, 99):.1f}"],
        ["single: ONNX run only, [1,19]", f"{pct(infer, 50):.1f}", f"{pct(infer, 90):.1f}", f"{pct(infer, 99):.1f}"],
    ]
    for b in BATCHES:
        batches = [sample[i:i + b] for i in range(0, len(sample) - b + 1, b)]
        per = [t / b for t in time_each(ranker.score, batches, a.repeats)]
        rows_out.append([f"batched score(), batch {b}, per prompt", f"{pct(per, 50):.2f}", f"{pct(per, 90):.2f}", f"{pct(per, 99):.2f}"])

    import onnxruntime
    import platform
    print(f"prompts: {len(sample)} real (CASTILLO validate + ShareGPT), chars P50 {statistics.median(chars):.0f}, "
          f"P90 {pct(chars, 90):.0f}; repeats {a.repeats}; onnxruntime {onnxruntime.__version__}, 1 intra-op thread; "
          f"CPU {platform.processor() or platform.machine()}\n")
    print(markdown_table(["path", "P50 us", "P90 us", "P99 us"], rows_out))
    p50 = pct(single, 50)
    verdict = "PASS" if p50 <= TARGET_P50_US else "FAIL"
    print(f"\n{verdict}: single-prompt P50 {p50:.1f} us vs target <= {TARGET_P50_US:.0f} us (seed 002: 29 us on an M1)")
    if tmp is not None:
        tmp.cleanup()
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
