"""sarathi_ext.sarathi: the Sarathi-Serve adapter.

Importing this package registers ``SchedulerType.AGING_SARATHI``, its config
(``--scheduler_config_type AGING_SARATHI`` and the ``--aging_sarathi_scheduler_config_<field>``
flags), its scheduler and its block manager with Sarathi, so it must happen before Sarathi parses
its CLI; ``python -m sarathi_ext.sarathi.benchmark`` and ``.api_server`` do that. Registering is
idempotent. Ray workers register on their own when they unpickle the config (see registration.py).

Sarathi-Serve is not on PyPI; put its source on PYTHONPATH (scripts/sarathi_test_env.sh builds a
CPU venv for the tests).
"""

try:
    import sarathi  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sarathi_ext.sarathi needs Sarathi-Serve (microsoft/sarathi-serve) importable: put its source "
        "on PYTHONPATH, or build a test venv with scripts/sarathi_test_env.sh SRC_DIR"
    ) from e

from .registration import SCHEDULER_TYPE_NAME, register, scheduler_type

SCHEDULER_TYPE = register()

from .config import AgingSarathiSchedulerConfig  # noqa: E402
from .scheduler import AgingSarathiScheduler  # noqa: E402

__all__ = [
    "SCHEDULER_TYPE", "SCHEDULER_TYPE_NAME", "AgingSarathiScheduler", "AgingSarathiSchedulerConfig",
    "register", "scheduler_type",
]
