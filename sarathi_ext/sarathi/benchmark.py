"""``python -m sarathi_ext.sarathi.benchmark <sarathi benchmark flags>``: Sarathi's benchmark with
AGING_SARATHI registered before it parses its CLI. Takes every flag ``python -m
sarathi.benchmark.main`` takes, plus ``--scheduler_config_type AGING_SARATHI`` and the
``--aging_sarathi_scheduler_config_<field>`` flags."""

from . import register


def main() -> None:
    register()
    from sarathi.benchmark.main import main as sarathi_main

    sarathi_main()


if __name__ == "__main__":
    main()
