"""AGING_SARATHI's config: Sarathi's own CLI builds it, and bad input fails before serving starts."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.sarathi
pytest.importorskip("sarathi", reason="Sarathi-Serve is not importable; build the test venv with "
                                      "scripts/sarathi_test_env.sh SRC_DIR")

from sarathi_ext.sarathi import SCHEDULER_TYPE, AgingSarathiScheduler, AgingSarathiSchedulerConfig  # noqa: E402
from sarathi_ext.sarathi.config import Flag  # noqa: E402
from sarathi_ext.sarathi.harness import build_scheduler, write_linear_predictor, write_model_config  # noqa: E402

P = "--aging_sarathi_scheduler_config_"


def parse(monkeypatch, tmp_path, *flags, config_cls=None):
    if config_cls is None:
        from sarathi.benchmark.config import BenchmarkConfig as config_cls
    model = write_model_config(tmp_path / "tiny-llama")
    monkeypatch.setattr(sys, "argv", ["sarathi", "--model_config_model", str(model), *flags])
    return config_cls.create_from_cli_args()


def test_benchmark_cli_builds_our_config(monkeypatch, tmp_path):
    config = parse(monkeypatch, tmp_path, "--scheduler_config_type", "AGING_SARATHI",
                   f"{P}policy", "aging", f"{P}aging_alpha", "50", f"{P}aging_beta", "-2",
                   f"{P}chunk_size", "256", f"{P}max_num_seqs", "32", f"{P}apc", "true",
                   f"{P}apc_c_max", "3", f"{P}apc_l_min", "24", f"{P}admission", "skip",
                   f"{P}starvation_threshold_s", "5", f"{P}profile_csv", "steps.csv")
    sc = config.scheduler_config
    assert type(sc) is AgingSarathiSchedulerConfig and sc.get_type() is SCHEDULER_TYPE
    assert (sc.policy, sc.aging_alpha, sc.aging_beta, sc.chunk_size, sc.max_num_seqs) == ("aging", 50.0, -2.0, 256, 32)
    assert (sc.apc, sc.apc_c_max, sc.apc_l_min, sc.admission) == (True, 3, 24, "skip")
    assert (sc.starvation_threshold_s, sc.profile_csv) == (5.0, "steps.csv")
    pc = sc.policy_config()
    assert pc.label() == "aging(a=50,b=-2)+apc"


def test_api_server_cli_builds_our_config(monkeypatch, tmp_path):
    from sarathi.entrypoints.config import APIServerConfig

    config = parse(monkeypatch, tmp_path, "--scheduler_config_type", "AGING_SARATHI", f"{P}policy", "spf",
                   config_cls=APIServerConfig)
    assert type(config.scheduler_config) is AgingSarathiSchedulerConfig
    assert config.scheduler_config.policy == "spf"
    assert config.create_system_config().scheduler_config is config.scheduler_config


def test_defaults_leave_upstream_types_alone(monkeypatch, tmp_path):
    # Sarathi builds every registered scheduler config while parsing; ours must accept its defaults.
    config = parse(monkeypatch, tmp_path)
    assert type(config.scheduler_config).__name__ == "SarathiSchedulerConfig"


def test_apc_flag_parses_false_as_false(monkeypatch, tmp_path):
    config = parse(monkeypatch, tmp_path, "--scheduler_config_type", "AGING_SARATHI", f"{P}apc", "False")
    assert config.scheduler_config.apc is False
    assert Flag("on") is True and Flag("0") is False and Flag(True) is True
    with pytest.raises(ValueError, match="expected true or false"):
        Flag("maybe")


@pytest.mark.parametrize("kw,match", [
    (dict(policy="lifo"), f"{P}policy: unknown ordering 'lifo'"),
    (dict(policy="aging", aging_alpha=0.0), f"{P}aging_alpha: must be > 0"),
    (dict(policy="aging", aging_beta=1.0), f"{P}aging_beta: must be < 0"),
    (dict(chunk="dynamic"), f"{P}chunk: unknown chunk policy"),
    (dict(chunk="lprs"), f"{P}lprs_predictor: chunk 'lprs' needs a batch-latency predictor"),
    (dict(lprs_lambda_u=5.0, lprs_lambda_o=4.0), f"{P}lprs_lambda_u"),
    (dict(admission="maybe"), f"{P}admission"),
    (dict(apc=True, apc_l_min=300, chunk_size=256), f"{P}apc_l_min: 300 exceeds chunk_size 256"),
    (dict(enable_dynamic_chunking_schedule=True), f"{P}enable_dynamic_chunking_schedule: not supported"),
    (dict(starvation_threshold_s=-1.0), f"{P}starvation_threshold_s"),
])
def test_bad_parameters_fail_at_config_time(kw, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(")):
        AgingSarathiSchedulerConfig(**kw)


def test_bad_parameter_fails_while_parsing_the_cli(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match=f"{P}policy: unknown ordering"):
        parse(monkeypatch, tmp_path, "--scheduler_config_type", "AGING_SARATHI", f"{P}policy", "lifo")


def test_missing_predictor_file(tmp_path):
    with pytest.raises(ValueError, match=f"{P}lprs_predictor: .*missing sidecar"):
        AgingSarathiSchedulerConfig(chunk="lprs", lprs_predictor=str(tmp_path / "nope.pt"))


def test_mismatched_predictor_sidecar(tmp_path):
    path = write_linear_predictor(tmp_path / "m.pt")
    side = tmp_path / "m.pt.json"
    meta = json.loads(side.read_text())
    names = meta["feature_names"]
    names[0], names[1] = names[1], names[0]
    side.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=f"{P}lprs_predictor: .*feature order differs .* position 0"):
        AgingSarathiSchedulerConfig(chunk="lprs", lprs_predictor=str(path))


def _build(cfg, pp=1):
    scheduler, _ = build_scheduler(cfg, num_gpu_blocks=100, pipeline_parallel_size=pp)
    assert type(scheduler) is AgingSarathiScheduler
    return scheduler


def test_unloadable_model_fails_when_the_scheduler_is_built(tmp_path):
    path = write_linear_predictor(tmp_path / "m.pt")
    path.write_bytes(b"not torchscript")  # the sidecar is fine, so the config passes
    cfg = AgingSarathiSchedulerConfig(chunk="lprs", lprs_predictor=str(path))
    with pytest.raises(ValueError, match=f"{P}lprs_predictor: .*not a loadable TorchScript file"):
        _build(cfg)


def test_lprs_predictor_loads_at_start_up(tmp_path):
    path = write_linear_predictor(tmp_path / "m.pt")
    scheduler = _build(AgingSarathiSchedulerConfig(chunk="lprs", lprs_predictor=str(path)))
    assert scheduler.planner.chunk.name == "lprs" and scheduler.policy_label == "fcfs+lprs"


def test_pipeline_parallelism_is_refused_at_start_up():
    with pytest.raises(ValueError, match="pipeline_parallel_size 1 only"):
        _build(AgingSarathiSchedulerConfig(), pp=2)


def test_benchmark_wrapper_help_lists_our_flags():
    # A fresh interpreter: the wrapper alone must register before Sarathi parses.
    out = subprocess.run([sys.executable, "-m", "sarathi_ext.sarathi.benchmark", "--help"],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{P}policy" in out.stdout and f"{P}lprs_predictor" in out.stdout
    assert "AGING_SARATHI" in out.stdout or "scheduler_config_type" in out.stdout


def test_api_server_wrapper_runs_upstream_module_as_main(monkeypatch):
    import runpy

    from sarathi_ext.sarathi import api_server

    calls = []
    monkeypatch.setattr(runpy, "run_module", lambda name, **kw: calls.append((name, kw, list(sys.argv))))
    monkeypatch.setattr(sys, "argv", ["x", "--port", "9000"])
    api_server.main()
    monkeypatch.setattr(sys, "argv", ["x", "--openai", "--port", "9000"])
    api_server.main()
    assert [c[0] for c in calls] == [api_server.PLAIN, api_server.OPENAI]
    assert all(c[1]["run_name"] == "__main__" and c[2] == ["x", "--port", "9000"] for c in calls)
