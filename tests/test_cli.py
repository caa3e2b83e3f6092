"""The sarathi-ext command line, in-process and as the installed console script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sarathi_ext.cli import main

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--trace", "apc-mix", "-n", "20", "--no-progress"]


def strict_json(text):
    def bad(token):
        raise ValueError(f"not valid JSON: {token}")

    return json.loads(text, parse_constant=bad)


def test_simulate_prints_table(capsys):
    assert main(["simulate", "--policy", "fcfs", *SMALL]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# apc-mix/fixed: 20 requests")
    assert out[1].startswith("# ")
    header, rule, *rows = out[2:]
    assert header.split() == ["metric", "fcfs"]
    assert set(rule.replace(" ", "")) == {"-"}
    table = {r.rsplit(None, 1)[0].strip(): r.rsplit(None, 1)[1] for r in rows}
    for label in ("E2E mean (s)", "TTFT P99 (s)", "TBT mean (ms)", "throughput (req/s)", "preemptions"):
        float(table[label])
    assert "blocked by activity cap" not in table  # only APC runs report it


def test_simulate_apc_reports_counters(capsys):
    assert main(["simulate", "--policy", "aging+lprs+apc", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "aging(a=37.5,b=-1)+lprs+apc" in out
    assert "blocked by activity cap" in out and "blocked by min chunk" in out


def test_json_output(tmp_path, capsys):
    path = tmp_path / "out.json"
    assert main(["simulate", "--policy", "spf", *SMALL, "--json", str(path)]) == 0
    doc = strict_json(path.read_text())
    assert set(doc) == {"setup", "workload", "results"}
    assert len(doc["results"]) == 1
    res = doc["results"][0]
    assert res["policy"] == "spf" and res["requests"] == 20
    for key in ("e2e_s", "ttft_s", "tbt_ms", "fairness", "throughput", "iterations", "scheduling", "preemptions"):
        assert key in res
    assert doc["workload"].startswith("apc-mix/fixed: 20 requests")


def test_json_is_strict_without_decodes(tmp_path, capsys):
    # --output-len 1: no request decodes, so there is no token gap at all. The file must still be
    # JSON (RFC 8259 has no NaN), e.g. null for the empty TBT distribution.
    path = tmp_path / "out.json"
    assert main(["simulate", *SMALL, "--output-len", "1", "--json", str(path)]) == 0
    strict_json(path.read_text())


def test_compare_writes_plots(tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["compare", "--policies", "fcfs", "aging", *SMALL, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "aging(a=37.5,b=-1) vs fcfs" in text
    for name in ("e2e_cdf.png", "ttft_cdf.png"):
        data = (out / name).read_bytes()
        assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def bad_csv(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n10,5\nten,5\n")  # line 3 is bad
    return path


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--policy", "foo"], "foo"),
        (["--policy", "aging", "--aging-alpha", "0"], "aging_alpha"),
        (["--policy", "aging", "--aging-beta", "0"], "aging_beta"),
        (["--policy", "aging", "--aging-beta", "0.5"], "aging_beta"),
        (["--trace", "/nonexistent/trace.csv"], "/nonexistent/trace.csv"),
        (["--chunk-size", "0"], "--chunk-size"),
        (["--chunk-size", "-4"], "--chunk-size"),
        (["--arrival", "sometimes"], "sometimes"),
    ],
)
def test_bad_input_one_line(args, needle, capsys):
    argv = ["simulate", "--trace", "apc-mix", "-n", "20", "--no-progress", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert needle in err and "Traceback" not in err


def test_malformed_trace_names_line(tmp_path, capsys):
    path = bad_csv(tmp_path)
    assert main(["simulate", "--trace", str(path), "-n", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}:3:" in err and "num_prefill_tokens" in err and "Traceback" not in err


CONSOLE = REPO / ".venv" / "bin" / "sarathi-ext"


@pytest.mark.skipif(not CONSOLE.exists(), reason=f"console script {CONSOLE} not installed")
def test_console_script(tmp_path):
    ok = subprocess.run([str(CONSOLE), "simulate", *SMALL], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stderr == ""
    assert ok.stdout.splitlines()[2].split() == ["metric", "fcfs"]
    bad = subprocess.run([str(CONSOLE), "simulate", *SMALL, "--policy", "foo"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "foo" in bad.stderr and "Traceback" not in bad.stderr
