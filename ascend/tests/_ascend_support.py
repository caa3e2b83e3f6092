"""Skip markers shared by the Ascend adapter's tests (conftest.py has already stubbed the NPU)."""

from __future__ import annotations

import importlib

import pytest


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:
        return False
    return True


HAVE_VLLM = _importable("vllm")
HAVE_ADAPTER = HAVE_VLLM and _importable("sarathi_ext.vllm")
HAVE_ASCEND_SRC = HAVE_VLLM and _importable("vllm_ascend.ascend_config")

needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not importable (install vllm; set VLLM_TARGET_DEVICE=cpu)")
needs_adapter = pytest.mark.skipif(
    not HAVE_ADAPTER, reason="the vLLM adapter sarathi_ext.vllm is not importable (needs vllm and sarathi-ext with it)"
)
needs_ascend_src = pytest.mark.skipif(
    not HAVE_ASCEND_SRC,
    reason="vLLM-Ascend source not importable (set VLLM_ASCEND_SRC to a vllm-ascend checkout; needs vllm)",
)
