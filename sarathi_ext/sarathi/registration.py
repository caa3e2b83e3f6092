"""Adds the AGING_SARATHI scheduler type to Sarathi-Serve: the enum member and both registries.

Sarathi resolves a scheduler type in three places: the CLI (``SchedulerType(value)`` while it
parses ``--scheduler_config_type``), ``SchedulerRegistry`` in the engine process, and
``BlockSpaceManagerRegistry`` in the engine and in every Ray worker (each worker's sequence
manager mirrors the engine's block manager). Importing ``sarathi_ext.sarathi`` runs ``register``,
which covers all three; every step is idempotent, so registering twice is harmless.

Ray workers never import this package on purpose: they unpickle the system config they are sent.
That config holds an ``AgingSarathiSchedulerConfig``, whose class lives in
``sarathi_ext.sarathi.config``, so unpickling imports the package and so registers. A bare
``SchedulerType.AGING_SARATHI`` would normally pickle as ``SchedulerType("AGING_SARATHI")``, which
fails in a process that has not extended the enum; the member therefore pickles as a call to
``scheduler_type()`` below, which registers before it returns the member. See
tests/test_sarathi_registration.py for both, in a fresh interpreter and in a real Ray task.
"""

from __future__ import annotations

from aenum import extend_enum
from sarathi.types import SchedulerType

SCHEDULER_TYPE_NAME = "AGING_SARATHI"


def _reduce_member(protocol: int):
    return scheduler_type, ()


def ensure_scheduler_type() -> SchedulerType:
    """Add ``SchedulerType.AGING_SARATHI`` if it is not there yet, and return it."""
    if SCHEDULER_TYPE_NAME not in SchedulerType.__members__:
        # extend_enum raises TypeError on a second call, hence the guard.
        extend_enum(SchedulerType, SCHEDULER_TYPE_NAME, SCHEDULER_TYPE_NAME)
    member = SchedulerType[SCHEDULER_TYPE_NAME]
    # An instance attribute wins over Enum.__reduce_ex__ in pickle's lookup.
    member.__reduce_ex__ = _reduce_member
    return member


def register() -> SchedulerType:
    """Register our type, scheduler and block manager with Sarathi; safe to call any number of times."""
    member = ensure_scheduler_type()
    # Imported here, not at module top: both import the heavy registries, and config.py imports
    # this module for ensure_scheduler_type.
    from sarathi.core.block_space_manager.block_space_manager_registry import BlockSpaceManagerRegistry
    from sarathi.core.block_space_manager.sarathi_block_space_manager import SarathiBlockSpaceManager
    from sarathi.core.scheduler.scheduler_registry import SchedulerRegistry

    from .scheduler import AgingSarathiScheduler

    # BaseRegistry.register ignores a key it already has.
    SchedulerRegistry.register(member, AgingSarathiScheduler)
    # Our KV layout is Sarathi's (whole prompt at admission, append_slot per decode), so the
    # workers' mirror uses Sarathi's own manager.
    BlockSpaceManagerRegistry.register(member, SarathiBlockSpaceManager)
    return member


def scheduler_type() -> SchedulerType:
    """The member, with everything registered: the unpickling target of the member."""
    return register()
