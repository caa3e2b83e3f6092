"""The latency-predictor commands end to end, and their bad-input contract: one line, exit 2.

Source (a) profiles come from the simulator's own time model, so these tests need no GPU; the
PyTorch runner's end-to-end test is in test_runner.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from predictors.latency.profiling import CONCURRENCY, PROMPT_MIXES, run_sweep, sweep_points
from predictors.latency.schema import PROFILE_COLUMNS, ProfileWriter, read_profile, write_profile
from sarathi_ext.cli import main
from sarathi_ext.core import FEATURE_NAMES


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, *needles):
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sarathi-ext: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def good_rows(n=5):
    # Rows from a tiny hand-made batch: 2 decodes at contexts 10 and 20 plus a 30-token chunk.
    row = [30, 2, 3, 30, 20, 0, 0, 0, 0, 0, 0, 1, 32, 15, 30, 0]
    return np.array([row] * n, dtype=float), np.arange(1, n + 1, dtype=float)


def test_profile_schema_round_trip_and_provenance(tmp_path):
    X, y = good_rows()
    path = write_profile(tmp_path / "p.csv", X, y, {"source": "test"})
    header = path.read_text().splitlines()[0].split(",")
    assert tuple(header) == (*FEATURE_NAMES, "latency_ms") == PROFILE_COLUMNS
    X2, y2, meta = read_profile(path)
    assert np.array_equal(X2, X) and np.array_equal(y2, y)
    assert meta["source"] == "test" and meta["rows"] == 5


def test_writer_leaves_nothing_behind_when_interrupted(tmp_path):
    with pytest.raises(RuntimeError):
        with ProfileWriter(tmp_path / "p.csv") as w:
            w.add(good_rows(1)[0][0], 1.0)
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def write_lines(path, header, *rows):
    path.write_text("\n".join([",".join(header), *(",".join(map(str, r)) for r in rows)]) + "\n")
    return path


ROW = [30, 2, 3, 30, 20, 0, 0, 0, 0, 0, 0, 1, 32, 15, 30, 0, 12.5]


@pytest.mark.parametrize(
    "header,rows,needles",
    [
        (PROFILE_COLUMNS[:-1], [ROW[:-1]], ["line 1", "missing column(s) latency_ms"]),
        ((*PROFILE_COLUMNS, "gpu_name"), [[*ROW, 0]], ["line 1", "unexpected column(s) gpu_name"]),
        (PROFILE_COLUMNS, [ROW, [*ROW[:-1], "nan"]], ["line 3", "latency_ms"]),
        (PROFILE_COLUMNS, [ROW, ROW, [*ROW[:-1], -4]], ["line 4", "latency_ms must be > 0"]),
    ],
)
def test_bad_profiles_name_file_and_row(tmp_path, capsys, header, rows, needles):
    bad = write_lines(tmp_path / "bad.csv", header, *rows)
    rc, _, err = run_cli(capsys, "profile", "--source", "csv", "--input", str(bad), "--out", str(tmp_path / "o.csv"))
    assert_one_line_error(rc, err, str(bad), *needles)
    assert not (tmp_path / "o.csv").exists()  # nothing half-written


def test_sweep_covers_the_three_axes_and_writes_one_row_per_iteration(tmp_path):
    from sarathi_ext.sim.exec_model import build_exec_model

    points = sweep_points()
    # 3 arrival rates x 3 prompt mixes x 4 concurrency levels x 3 token budgets
    assert len(points) == 3 * 3 * 4 * 3
    assert {p.mix for p in points} == set(PROMPT_MIXES) and {p.max_num_seqs for p in points} == set(CONCURRENCY)
    calls = []
    model = build_exec_model("roofline", "a100-80gb", "llama-3.1-8b", None, 0.0, 0)

    def executor(x):
        calls.append(x[0].copy())
        return model(x)

    with ProfileWriter(tmp_path / "s.csv", {"source": "sim"}) as w:
        rows = run_sweep(executor, w, iterations=216, max_context=1024)
    X, y, _ = read_profile(tmp_path / "s.csv")
    # 216 / 108 points = 2 iterations each; no point's 8 requests can finish in 2 iterations
    assert rows == len(y) == len(calls) == 216
    assert np.allclose(X, calls, rtol=1e-5)  # the CSV keeps 6 significant digits
    assert np.allclose(y, model(X), rtol=1e-5)  # noise-free: each row is the model's own time
    assert (X[:, 12] == X[:, 0] + X[:, 1]).all()  # scheduled = prefill + decode tokens


def test_sweep_deadline_stops_cleanly(tmp_path):
    from sarathi_ext.sim.exec_model import build_exec_model

    model = build_exec_model("roofline", "a100-80gb", "llama-3.1-8b", None, 0.0, 0)
    with ProfileWriter(tmp_path / "s.csv") as w:
        rows = run_sweep(model, w, iterations=10_000, max_context=1024, max_seconds=1e-9)
    assert rows == 1 == len(read_profile(tmp_path / "s.csv")[1])  # the first row, then the deadline


torch = pytest.importorskip("torch", reason="the latency extra (torch) is not installed")


def test_profile_train_eval_and_simulate_with_the_model(tmp_path, capsys):
    prof, model = tmp_path / "sim.csv", tmp_path / "lprs.pt"
    rc, out, _ = run_cli(capsys, "profile", "--source", "sim", "--gpu", "a100-80gb", "--out", str(prof),
                         "--iterations", "600", "--max-context", "1024", "--no-progress")
    assert rc == 0 and prof.exists() and json.loads((tmp_path / "sim.meta.json").read_text())["source"] == "sim"
    rc, out, _ = run_cli(capsys, "train-latency", "--profile", str(prof), "--out", str(model), "--epochs", "3",
                         "--no-progress")
    assert rc == 0 and model.exists()
    sidecar = json.loads((tmp_path / "lprs.pt.json").read_text())
    assert sidecar["feature_names"] == list(FEATURE_NAMES)
    rc, out, _ = run_cli(capsys, "eval-latency", "--model", str(model), "--json", str(tmp_path / "e.json"))
    assert rc == 0
    rows = json.loads((tmp_path / "e.json").read_text())
    assert [r["model"].split(" ")[0] for r in rows] == ["MLP", "Linear", "Quadratic", "Random"]
    rc, out, _ = run_cli(capsys, "simulate", "--policy", "fcfs+lprs", "--predictor", str(model), "--trace",
                         "apc-mix", "-n", "30", "--no-progress")
    assert rc == 0 and "E2E mean" in out


def test_mismatched_sidecar_and_too_few_rows_exit_2(tmp_path, capsys):
    prof, model = tmp_path / "sim.csv", tmp_path / "lprs.pt"
    assert run_cli(capsys, "profile", "--source", "sim", "--out", str(prof), "--iterations", "200",
                   "--max-context", "1024", "--no-progress")[0] == 0
    assert run_cli(capsys, "train-latency", "--profile", str(prof), "--out", str(model), "--epochs", "1",
                   "--no-progress")[0] == 0
    side = tmp_path / "lprs.pt.json"
    meta = json.loads(side.read_text())
    meta["feature_names"][0], meta["feature_names"][1] = meta["feature_names"][1], meta["feature_names"][0]
    side.write_text(json.dumps(meta))
    rc, _, err = run_cli(capsys, "eval-latency", "--model", str(model), "--profile", str(prof))
    assert_one_line_error(rc, err, "lprs.pt.json", "position 0")
    rc, _, err = run_cli(capsys, "simulate", "--policy", "fcfs+lprs", "--predictor", str(model), "--trace",
                         "apc-mix", "-n", "5", "--no-progress")
    assert_one_line_error(rc, err, "position 0")

    X, y = good_rows(12)
    small = write_profile(tmp_path / "small.csv", X, y)
    rc, _, err = run_cli(capsys, "train-latency", "--profile", str(small), "--out", str(tmp_path / "m.pt"),
                         "--epochs", "1", "--no-progress")
    assert_one_line_error(rc, err, "12", "30")
    assert not (tmp_path / "m.pt").exists()
