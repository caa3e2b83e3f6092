#!/usr/bin/env bash
# Build a CPU-only venv with the real vllm 0.33.0 scheduler stack for the vLLM adapter's tests:
#
#   scripts/vllm_test_env.sh [VENV]          # default: .venv-vllm in the repository root
#   VLLM_TARGET_DEVICE=cpu VENV/bin/python -m pytest -q -m vllm tests/
#
# torch 2.13.0 CPU, then vllm and xgrammar with --no-deps (their declared deps pull CUDA torch,
# triton, flashinfer and nvidia-*), then the 24 import-time deps pinned in requirements-vllm.txt,
# then this package (--no-deps) and the test tools pinned as in pyproject.toml. `pip check` fails
# in this venv by design (vllm's CUDA deps are absent); the scheduler does not need them.
# About 1-3 minutes with a warm pip cache; ~2.2 GB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/.venv-vllm}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
# torch must be the CPU build. Where pip's find-links holds the local CPU wheel (this project's
# machines: /opt/wheels) "torch==2.13.0" resolves to it; elsewhere pass
# TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" (PyPI's default is CUDA).
TORCH_PIP_ARGS="${TORCH_PIP_ARGS:-}"

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# shellcheck disable=SC2086
"${PIP[@]}" $TORCH_PIP_ARGS "torch==2.13.0"
"${PIP[@]}" --no-deps "vllm==0.33.0" "xgrammar==0.2.8"
"${PIP[@]}" -r "$ROOT/scripts/requirements-vllm.txt"
"${PIP[@]}" --no-deps -e "$ROOT"
"${PIP[@]}" "pytest==9.2.0" "hypothesis==6.170.15"
VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c "
import vllm.v1.core.sched.scheduler, sarathi_ext.vllm as v
print('vllm', vllm.__version__, 'ok;', v.SarathiExtScheduler.__name__)"
echo "run: VLLM_TARGET_DEVICE=cpu $VENV/bin/python -m pytest -q -m vllm tests/"
