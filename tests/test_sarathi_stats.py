"""The iteration-statistics hook: one profile row per non-empty step, readable by the trainer."""

import json
import time

import numpy as np
import pytest

pytestmark = pytest.mark.sarathi
pytest.importorskip("sarathi", reason="Sarathi-Serve is not importable; build the test venv with "
                                      "scripts/sarathi_test_env.sh SRC_DIR")

from predictors.latency.schema import PROFILE_COLUMNS, read_profile  # noqa: E402
from sarathi_ext.sarathi import AgingSarathiSchedulerConfig  # noqa: E402
from sarathi_ext.sarathi.harness import CpuEngine  # noqa: E402


def test_profile_csv_has_one_row_per_step_with_the_planned_features(tmp_path):
    out = tmp_path / "profiles" / "steps.csv"  # the folder is created on start-up
    cfg = AgingSarathiSchedulerConfig(chunk_size=64, max_num_seqs=8, policy="aging", profile_csv=str(out))
    engine = CpuEngine(cfg, num_gpu_blocks=200, block_size=16, max_model_len=1024)
    t = time.monotonic() - 10
    for i, (prompt, tokens) in enumerate([(100, 5), (30, 8), (200, 3), (10, 12)]):
        engine.add_request(prompt, tokens, t + i * 1e-3)
    planned = []
    while engine.has_unfinished():
        record = engine.step()
        if record.prefills or record.decodes:
            planned.append(engine.scheduler.last_plan.features.copy())
    profiler = engine.scheduler.profiler
    assert profiler.rows == len(planned) > 0
    assert not out.exists()  # written through a temporary file, renamed into place on close
    profiler.close()
    profiler.close()  # idempotent (atexit calls it again)

    X, y, meta = read_profile(out)  # the trainer's strict reader accepts it
    assert out.read_text().splitlines()[0] == ",".join(PROFILE_COLUMNS)
    np.testing.assert_allclose(X, np.array(planned), rtol=1e-5)
    assert (y > 0).all()
    assert meta["source"] == "sarathi" and meta["policy"] == "aging(a=37.5,b=-1)" and meta["rows"] == len(planned)
    assert json.loads((tmp_path / "profiles" / "steps.meta.json").read_text())["chunk_size"] == 64
    # The batches are what was scheduled: tokens per row never exceed the budget.
    assert (X[:, 12] <= 64).all() and X[:, 0].sum() == 100 + 30 + 200 + 10


def test_no_profile_by_default():
    engine = CpuEngine(AgingSarathiSchedulerConfig(), num_gpu_blocks=100)
    assert engine.scheduler.profiler is None
