"""parse_additional_config: the vLLM parameter set (needs no vLLM)."""

import pytest

from sarathi_ext.core import PolicyConfig
from sarathi_ext.vllm import CONFIG_KEY, SCHEDULER_CLS, parse_additional_config


def test_defaults_without_key():
    for extra in (None, {}, {"other": 1}, {CONFIG_KEY: None}):
        cfg, extras = parse_additional_config(extra)
        assert cfg == PolicyConfig()
        assert extras == {"lprs_predictor": "", "lprs_device": "cpu", "starvation_threshold_s": 0.0, "profile_csv": ""}
    assert SCHEDULER_CLS == "sarathi_ext.vllm.SarathiExtScheduler"


def test_fields_and_coercion():
    cfg, extras = parse_additional_config({CONFIG_KEY: {
        "policy": "aging", "aging_alpha": 10, "aging_beta": -2, "apc": True, "apc_c_max": 3.0,
        "starvation_threshold_s": 5, "profile_csv": "/tmp/x.csv"}})
    assert (cfg.policy, cfg.aging_alpha, cfg.aging_beta, cfg.apc, cfg.apc_c_max) == ("aging", 10.0, -2.0, True, 3)
    assert isinstance(cfg.apc_c_max, int) and extras["starvation_threshold_s"] == 5.0


def test_psjf_is_accepted():
    cfg, _ = parse_additional_config({CONFIG_KEY: {"policy": "psjf", "apc": True}})
    assert cfg.policy == "psjf" and cfg.apc


@pytest.mark.parametrize("values, field", [
    ({"policy": "lifo"}, "policy"),
    ({"aging_alpha": 0}, "aging_alpha"),
    ({"aging_beta": "x"}, "aging_beta"),
    ({"lprs_delta": 1.5}, "lprs_delta"),
    ({"lprs_lambda_u": 5}, "lprs_lambda_u"),
    ({"apc": 1}, "apc"),
    ({"chunk": "lprs"}, "lprs_predictor"),
    ({"chunk": "lprs", "lprs_predictor": "/nonexistent/model.pt"}, "lprs_predictor"),
    ({"lprs_device": "tpu"}, "lprs_device"),
    ({"starvation_threshold_s": -1}, "starvation_threshold_s"),
    ({"typo_field": 1}, "typo_field"),
])
def test_errors_name_the_field_in_one_line(values, field):
    with pytest.raises(ValueError) as e:
        parse_additional_config({CONFIG_KEY: values})
    assert str(e.value).startswith(f"additional_config sarathi_ext.{field}:") and "\n" not in str(e.value)


def test_section_must_be_an_object():
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse_additional_config({CONFIG_KEY: "aging"})
