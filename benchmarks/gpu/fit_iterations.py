"""How many profile iterations fit the budget, from runner_smoke.json's timings.

    python fit_iterations.py SMOKE_JSON BUDGET_SECONDS ASKED  ->  prints min(ASKED, what fits)

The estimate per iteration is the slowest of the smoke's iterations of the kinds the profile
sweep runs (512- and 1024-token prefills, 32 decodes plus a 480-token chunk, 32 and 64 decodes)
plus 2 ms of engine overhead: conservative, since a killed profile writes nothing. 45 s of
the budget go to start-up (imports, weights, KV pool, warm-up). Never below 200.
"""

import json
import sys

smoke, budget, asked = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
try:
    ms = json.load(open(smoke)).get("iteration_ms", {})
except (OSError, ValueError):
    ms = {}
keys = [k for k in ms if k.startswith(("prefill_512_at_0", "prefill_1024_at_0", "mixed_", "decode_32_", "decode_64_"))]
if not keys:
    print(asked)
else:
    per_ms = max(ms[k] for k in keys) + 2.0
    print(max(200, min(asked, int((budget - 45) * 1e3 / per_ms))))
