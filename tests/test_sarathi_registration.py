"""Registration of AGING_SARATHI: idempotent, and automatic in processes that only unpickle.

Sarathi's Ray workers receive the system config by pickling (Ray uses cloudpickle) and build their
block manager from ``config.scheduler_config.get_type()``; they never import sarathi_ext on
purpose. These tests unpickle our config and our SchedulerType member in a fresh interpreter that
has not imported sarathi_ext.sarathi, and, when ray is installed, inside real Ray worker processes
(``max_calls=1``: a new process per task), and check that everything resolves there.
"""

import os
import pickle
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.sarathi
pytest.importorskip("sarathi", reason="Sarathi-Serve is not importable; build the test venv with "
                                      "scripts/sarathi_test_env.sh SRC_DIR")

from sarathi.core.block_space_manager.block_space_manager_registry import BlockSpaceManagerRegistry  # noqa: E402
from sarathi.core.block_space_manager.sarathi_block_space_manager import SarathiBlockSpaceManager  # noqa: E402
from sarathi.core.scheduler.scheduler_registry import SchedulerRegistry  # noqa: E402
from sarathi.types import SchedulerType  # noqa: E402

import sarathi_ext.sarathi as adapter  # noqa: E402
from sarathi_ext.sarathi import AgingSarathiScheduler, AgingSarathiSchedulerConfig  # noqa: E402


def test_register_twice_is_harmless():
    before = list(SchedulerType)
    assert adapter.register() is adapter.register() is SchedulerType.AGING_SARATHI
    assert list(SchedulerType) == before
    assert SchedulerType("AGING_SARATHI") is SchedulerType.AGING_SARATHI  # how argparse resolves it
    assert SchedulerRegistry.get_class(SchedulerType.AGING_SARATHI) is AgingSarathiScheduler
    assert BlockSpaceManagerRegistry.get_class(SchedulerType.AGING_SARATHI) is SarathiBlockSpaceManager
    assert SchedulerRegistry.get_class(SchedulerType.SARATHI).__name__ == "SarathiScheduler"  # untouched


FRESH_CHECK = textwrap.dedent("""
    import pickle, sys
    data = sys.stdin.buffer.read()
    assert "sarathi_ext.sarathi" not in sys.modules
    from sarathi.types import SchedulerType
    assert "AGING_SARATHI" not in SchedulerType.__members__  # nothing registered yet
    loads = pickle.loads
    if sys.argv[1] == "cloudpickle":
        import cloudpickle  # ray vendors its own copy; pickles from either load with pickle.loads
        loads = cloudpickle.loads
    obj = loads(data)
    cfg, member = obj if isinstance(obj, tuple) else (None, obj)
    from sarathi.core.block_space_manager.block_space_manager_registry import BlockSpaceManagerRegistry
    from sarathi.core.scheduler.scheduler_registry import SchedulerRegistry
    assert member is SchedulerType.AGING_SARATHI is SchedulerType("AGING_SARATHI")
    if cfg is not None:
        assert cfg.get_type() is member and cfg.policy == "aging" and cfg.aging_alpha == 12.5
    bm = BlockSpaceManagerRegistry.get(member, 16, 100, 1024)
    print(type(bm).__name__, SchedulerRegistry.get_class(member).__name__)
""")


def _unpickle_fresh(data: bytes, loader: str) -> str:
    out = subprocess.run([sys.executable, "-c", FRESH_CHECK, loader], input=data, capture_output=True,
                         timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    return out.stdout.decode().split()


@pytest.mark.parametrize("what", ["config_and_member", "member_alone"])
def test_unpickling_in_a_fresh_process_registers(what):
    cfg = AgingSarathiSchedulerConfig(policy="aging", aging_alpha=12.5)
    obj = (cfg, cfg.get_type()) if what == "config_and_member" else cfg.get_type()
    assert _unpickle_fresh(pickle.dumps(obj), "pickle") == ["SarathiBlockSpaceManager", "AgingSarathiScheduler"]


def test_cloudpickle_as_ray_uses_it():
    cloudpickle = pytest.importorskip("cloudpickle")
    cfg = AgingSarathiSchedulerConfig(policy="aging", aging_alpha=12.5)
    data = cloudpickle.dumps((cfg, cfg.get_type()))
    assert _unpickle_fresh(data, "cloudpickle") == ["SarathiBlockSpaceManager", "AgingSarathiScheduler"]


def _in_ray_worker(cfg):
    # Runs in a Ray worker: Ray has just deserialised ``cfg``; nothing here imports sarathi_ext.
    import os
    import sys

    from sarathi.core.block_space_manager.block_space_manager_registry import BlockSpaceManagerRegistry

    bm = BlockSpaceManagerRegistry.get(cfg.get_type(), 16, 100, 1024)
    return os.getpid(), type(bm).__name__, "sarathi_ext.sarathi" in sys.modules


def _fresh_ray_worker_state():
    import os
    import sys

    from sarathi.types import SchedulerType

    return os.getpid(), "sarathi_ext.sarathi" in sys.modules, "AGING_SARATHI" in SchedulerType.__members__


def test_ray_worker_registers_on_unpickling_the_config():
    ray = pytest.importorskip("ray", reason="ray is not installed; the fresh-interpreter tests cover pickling")
    from ray import cloudpickle  # the copy Ray serialises with

    # Ship these two functions by value, so the worker never imports this test module (or ours).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local throwaway cluster
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        fresh = ray.remote(max_calls=1)(_fresh_ray_worker_state)
        probe = ray.remote(max_calls=1)(_in_ray_worker)
        pid0, imported, registered = ray.get(fresh.remote())
        assert not imported and not registered  # a new Ray worker knows nothing of AGING_SARATHI
        pid1, manager, imported = ray.get(probe.remote(AgingSarathiSchedulerConfig(policy="aging")))
        assert manager == "SarathiBlockSpaceManager" and imported and pid1 != pid0
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
