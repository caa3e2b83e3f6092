#!/usr/bin/env bash
# One prepared command for a lent GPU machine (see README.md beside this file):
#   0. check that python, torch (with CUDA) and numpy import; install nothing
#   1. runner_smoke.py: device correctness check + typical iteration times (~30-60 s)
#   2. sarathi-ext profile --source torch --model qwen3-8b --device cuda --scale full
#   3. sarathi-ext train-latency on that profile
#   4. sarathi-ext eval-latency of the trained model on that profile
# Everything lands in $OUT (default ./gpu-out). Steps 2-4 stop the chain on failure, but every
# log is kept. Tunables (environment): ITERATIONS (profile iterations, default 5000; lowered
# when the smoke timings say they would not fit PROFILE_SECONDS), EPOCHS (train-latency epochs,
# default: the trainer's), SEED (0), PROFILE_SECONDS (wall budget of the profile step, default
# 240), DEVICE (cuda), MODEL (qwen3-8b), SCALE (full), PYTHON (python).
# Worst case, every step at its timeout: 90 + 285 + 100 + 60 s < 9 min; expected about 3-4 min.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
REPO="$PWD"
OUT="${OUT:-./gpu-out}"
ITERATIONS="${ITERATIONS:-5000}"
SEED="${SEED:-0}"
PROFILE_SECONDS="${PROFILE_SECONDS:-240}"
DEVICE="${DEVICE:-cuda}"
MODEL="${MODEL:-qwen3-8b}"
SCALE="${SCALE:-full}"
EPOCHS="${EPOCHS:-}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# The package is used from the source tree: nothing is pip-installed (the machine has no network).
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
CLI=("$PYTHON" -m sarathi_ext.cli)
T0=$(date +%s)

log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }

# Runs "$@" with its output in $OUT/<name>.log (and on the console); returns its exit status.
step() {
    local name="$1"; shift
    log "start $name: $*"
    local t
    t=$(date +%s)
    "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    log "end $name: rc=$rc in $(( $(date +%s) - t ))s"
    return "$rc"
}

if [ -z "$PYTHON" ]; then
    echo "ERROR: no python or python3 on PATH" | tee "$OUT/steps.log"; exit 2
fi
"$PYTHON" "$REPO/benchmarks/gpu/check_env.py" 2>&1 | tee "$OUT/environment.txt"
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    log "environment check failed (see environment.txt)"; exit 2
fi
if [ "$DEVICE" = "cuda" ] && ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    log "ERROR: DEVICE=cuda but torch.cuda.is_available() is False"; exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

# 1. Correctness of the runner's kernels on this device, and the iteration times to expect.
step smoke timeout 90 "$PYTHON" benchmarks/gpu/runner_smoke.py --device "$DEVICE" --scale "$SCALE" \
    --model "$MODEL" --out "$OUT" || log "smoke failed; continuing with the profile anyway"

# Fit the iteration count to the budget from the smoke's timings.
if [ -s "$OUT/runner_smoke.json" ]; then
    FIT=$("$PYTHON" "$REPO/benchmarks/gpu/fit_iterations.py" "$OUT/runner_smoke.json" "$PROFILE_SECONDS" "$ITERATIONS")
    if [ -n "$FIT" ] && [ "$FIT" -lt "$ITERATIONS" ]; then
        log "smoke timings: $ITERATIONS iterations would not fit ${PROFILE_SECONDS}s; profiling $FIT"
        ITERATIONS="$FIT"
    fi
fi

# 2. Profile. A --max-seconds flag, where the CLI has one, ends the profile cleanly at the budget
# with the rows so far; `timeout` is the backstop (a killed profile writes no CSV).
PROFILE_ARGS=(profile --source torch --model "$MODEL" --device "$DEVICE" --scale "$SCALE"
              --iterations "$ITERATIONS" --seed "$SEED" --out "$OUT/profile.csv")
if "${CLI[@]}" profile --help 2>/dev/null | grep -q -- "--max-seconds"; then
    PROFILE_ARGS+=(--max-seconds "$PROFILE_SECONDS")
fi
step profile timeout $(( PROFILE_SECONDS + 45 )) "${CLI[@]}" "${PROFILE_ARGS[@]}" || exit 1
[ -s "$OUT/profile.csv" ] || { log "no profile.csv written"; exit 1; }
log "profile rows: $(( $(wc -l < "$OUT/profile.csv") - 1 ))"

# 3. Train.
TRAIN_ARGS=(train-latency --profile "$OUT/profile.csv" --out "$OUT/latency_model.pt" --seed "$SEED")
[ -n "$EPOCHS" ] && TRAIN_ARGS+=(--epochs "$EPOCHS")
step train timeout 100 "${CLI[@]}" "${TRAIN_ARGS[@]}" || exit 1

# 4. Evaluate.
step eval timeout 60 "${CLI[@]}" eval-latency --model "$OUT/latency_model.pt" --profile "$OUT/profile.csv" \
    --json "$OUT/eval.json" || exit 1

log "done in $(( $(date +%s) - T0 ))s; outputs in $OUT:"
ls -la "$OUT" | tee -a "$OUT/steps.log"
