"""``vllm.general_plugins`` entry point: use our scheduler without ``--scheduler-cls``.

pyproject.toml declares::

    [project.entry-points."vllm.general_plugins"]
    sarathi_ext = "sarathi_ext.vllm.plugin:register"

vLLM runs every general plugin in each process that builds or uses a config: the front end
(``EngineArgs.create_engine_config``, vllm/engine/arg_utils.py:931, before ``VllmConfig`` exists),
the engine core (vllm/v1/engine/core.py:135, before ``get_scheduler_cls()`` at :167) and the
workers. ``register()`` wraps ``VllmConfig.__post_init__``: after upstream's post-init (which
settles ``async_scheduling``, config/vllm.py:1668-1719, and fills in its own default schedulers,
:2070-2081), when no scheduler class was chosen and either

    - the environment has ``SARATHI_EXT_SCHEDULER=1``, or
    - ``--additional-config`` has a ``"sarathi_ext"`` key,

it sets ``scheduler_config.scheduler_cls`` to ``sarathi_ext.vllm.SarathiExtScheduler`` (or the
async variant when async scheduling is on). The class path then travels inside the config to the
engine core, which resolves it as if ``--scheduler-cls`` had been given. An explicit
``--scheduler-cls`` always wins. ``SARATHI_EXT_SCHEDULER=0`` turns the plugin off even with a
``"sarathi_ext"`` key (then the key is ignored, as upstream ignores unknown additional config).

This is the least invasive point: ``SchedulerConfig.get_scheduler_cls`` cannot see
``additional_config`` (it lives on ``VllmConfig``), and patching the engine core would touch far
more code. ``register()`` is idempotent: plugins may be loaded many times per process.
"""

from __future__ import annotations

import logging
import os

from .config import CONFIG_KEY

ENV = "SARATHI_EXT_SCHEDULER"
logger = logging.getLogger(__name__)


def wanted(vllm_config) -> bool:
    """Whether this config asks for our scheduler (see the module docstring)."""
    env = os.environ.get(ENV, "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    extra = getattr(vllm_config, "additional_config", None)
    return isinstance(extra, dict) and CONFIG_KEY in extra


def select_scheduler(vllm_config) -> None:
    """Set ``scheduler_cls`` to ours when wanted and none was chosen."""
    from . import ASYNC_SCHEDULER_CLS, SCHEDULER_CLS

    sched = getattr(vllm_config, "scheduler_config", None)
    if sched is None or not wanted(vllm_config):
        return
    if sched.scheduler_cls is not None:
        if sched.scheduler_cls not in (SCHEDULER_CLS, ASYNC_SCHEDULER_CLS):
            logger.info("sarathi_ext plugin: keeping the explicit scheduler_cls %s", sched.scheduler_cls)
        return
    sched.scheduler_cls = ASYNC_SCHEDULER_CLS if sched.async_scheduling else SCHEDULER_CLS


def register() -> None:
    from vllm.config import VllmConfig

    if getattr(VllmConfig, "_sarathi_ext_plugin", False):
        return
    original = VllmConfig.__post_init__

    def __post_init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        select_scheduler(self)

    __post_init__.__wrapped__ = original
    VllmConfig.__post_init__ = __post_init__
    VllmConfig._sarathi_ext_plugin = True
