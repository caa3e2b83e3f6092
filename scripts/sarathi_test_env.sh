#!/usr/bin/env bash
# Build a CPU-only venv in which the Sarathi-Serve adapter's tests run against the real Sarathi
# source (microsoft/sarathi-serve). Sarathi is not on PyPI and its setup.py needs CUDA, so it is
# not installed: its source directory goes on the path through a .pth file, and only the
# pure-Python packages its scheduler, config and sequence-manager modules import are installed.
#
#   scripts/sarathi_test_env.sh SRC_DIR [VENV]
#     SRC_DIR  a checkout or unpacked archive of sarathi-serve (the folder holding sarathi/)
#     VENV     where to create the venv (default: .venv-sarathi in the repository root)
#
# Then:  VENV/bin/python -m pytest -m sarathi tests/
set -euo pipefail

if [[ $# -lt 1 || ! -d "$1/sarathi" ]]; then
    echo "usage: $0 SRC_DIR [VENV]   (SRC_DIR must contain sarathi/__init__.py)" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${2:-$REPO/.venv-sarathi}
PY=${PYTHON:-python3}

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q)

# torch first, pinned as in pyproject's test extra: pip takes the CPU wheel that lies on disk here,
# and a later package asking for plain "torch" then finds it satisfied instead of pulling CUDA.
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e "$REPO" "pytest==9.2.0" "hypothesis==6.170.15"

# What `import sarathi.config`, `sarathi.core.scheduler.scheduler_registry`,
# `sarathi.core.sequence_manager.engine_sequence_manager` and `sarathi.benchmark.config` pull in
# (sarathi/__init__.py imports the engine, hence zmq, protobuf, the metrics store and the
# tokenizer utilities; sarathi.metrics imports plotly_express). transformers 5 removed APIs that
# sarathi.transformers_utils uses. aenum is ours: extend_enum adds our SchedulerType member.
# ray and cloudpickle are optional: with them, tests also prove registration inside real Ray
# workers and under the serialiser Ray uses.
"${PIP[@]}" "transformers<5" pyzmq protobuf wandb pandas plotly plotly_express ddsketch psutil \
    pyyaml tqdm aenum ray cloudpickle

SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$SRC" > "$SITE/sarathi-src.pth"

"$VENV/bin/python" - <<'EOF'
import sarathi.config, sarathi.core.scheduler.scheduler_registry  # noqa: F401
import sarathi.core.sequence_manager.engine_sequence_manager  # noqa: F401
import sarathi_ext.sarathi  # noqa: F401  registers AGING_SARATHI
print("sarathi importable from", sarathi.__path__[0])
EOF
echo "venv: $VENV   (sarathi source on its path via $SITE/sarathi-src.pth; or PYTHONPATH=$SRC)"
echo "run:  $VENV/bin/python -m pytest -m sarathi tests/"
