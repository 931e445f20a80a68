"""A property-based correctness harness for at-least-once and exactly-once stream processing.

The public surface, re-exported here: the engine (:func:`explore` a processor under drawn
schedules, :func:`replay` a saved one, :func:`simulate` one schedule;
:func:`harness.check.check` judges a history),
its values (:class:`Schedule` and its steps, :class:`Topology`, :class:`History`,
:class:`Verdict`), the fault kinds a search injects (:class:`Fault`), the catalogue's
:class:`Subject` and :class:`Scenario`, the reference log (:mod:`harness.log`), the offset stores
(:mod:`harness.offsets`) and the errors (:mod:`harness.errors`, rooted in
:class:`HarnessError`). Importing this package loads only :mod:`harness.errors`: every
other name is imported from its module on first use (so ``import harness.pytest_plugin``
in any pytest session stays cheap), and never plyvel, pyarrow nor pyspark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from harness.errors import (
    AlreadyClosed,
    AlreadyTruncatedTransaction,
    BrokenPromise,
    ConfigError,
    CorruptData,
    DLException,
    EndOfStream,
    Fenced,
    HarnessError,
    InvalidDLSN,
    InvalidStreamName,
    LockingException,
    LogEmpty,
    LogExists,
    LogNotFound,
    LogReadException,
    LogRecordTooLong,
    MissingDependency,
    OwnershipAcquireFailed,
    StorageFailed,
    StoreLocked,
    TransactionIdOutOfOrder,
    UnsupportedURI,
    WriteCancelled,
    WriteException,
)

if TYPE_CHECKING:
    from harness.catalogue import Scenario, Subject
    from harness.check import (
        Anomaly,
        AnomalyKind,
        Guarantee,
        Status,
        Verdict,
        Witness,
        validate,
    )
    from harness.faults import (
        Crash,
        Duplicate,
        Fault,
        LoseAck,
        Produce,
        Reorder,
        Resend,
        Restart,
        Run,
        RunZombie,
        Schedule,
        Takeover,
        Tick,
        Truncate,
    )
    from harness.history import (
        Event,
        EventKind,
        History,
        read_history,
        write_history,
    )
    from harness.log import (
        DLSN,
        LogConfig,
        LogManager,
        LogReader,
        LogRecord,
        LogRecordWithDLSN,
        LogWriter,
        Namespace,
        TxidCheck,
        leveldb_uri,
        open_namespace,
    )
    from harness.offsets import (
        LevelDBOffsetStore,
        MemoryOffsetStorage,
        MemoryOffsetStore,
        OffsetStore,
        open_offset_store,
    )
    from harness.runner import (
        CounterexampleFound,
        Exploration,
        Failure,
        Replay,
        explore,
        replay,
        run_once,
    )
    from harness.sim import (
        Context,
        Delivery,
        OutputRecord,
        RunBudget,
        Topology,
        log_sink,
        simulate,
        table_sink,
    )

__version__ = "0.1.0"

_LAZY: Final[dict[str, tuple[str, ...]]] = {
    "harness.catalogue": ("Scenario", "Subject"),
    "harness.check": (
        "Anomaly",
        "AnomalyKind",
        "Guarantee",
        "Status",
        "Verdict",
        "Witness",
        "validate",
    ),
    "harness.faults": (
        "Crash",
        "Duplicate",
        "Fault",
        "LoseAck",
        "Produce",
        "Reorder",
        "Resend",
        "Restart",
        "Run",
        "RunZombie",
        "Schedule",
        "Takeover",
        "Tick",
        "Truncate",
    ),
    "harness.history": (
        "Event",
        "EventKind",
        "History",
        "read_history",
        "write_history",
    ),
    "harness.log": (
        "DLSN",
        "LogConfig",
        "LogManager",
        "LogReader",
        "LogRecord",
        "LogRecordWithDLSN",
        "LogWriter",
        "Namespace",
        "TxidCheck",
        "leveldb_uri",
        "open_namespace",
    ),
    "harness.offsets": (
        "LevelDBOffsetStore",
        "MemoryOffsetStorage",
        "MemoryOffsetStore",
        "OffsetStore",
        "open_offset_store",
    ),
    "harness.runner": (
        "CounterexampleFound",
        "Exploration",
        "Failure",
        "Replay",
        "explore",
        "replay",
        "run_once",
    ),
    "harness.sim": (
        "Context",
        "Delivery",
        "OutputRecord",
        "RunBudget",
        "Topology",
        "log_sink",
        "simulate",
        "table_sink",
    ),
}
"""The public names imported on first use, by the module that defines them."""

_WHERE: Final = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "AlreadyClosed",
    "AlreadyTruncatedTransaction",
    "Anomaly",
    "AnomalyKind",
    "BrokenPromise",
    "ConfigError",
    "Context",
    "CorruptData",
    "CounterexampleFound",
    "Crash",
    "DLException",
    "DLSN",
    "Delivery",
    "Duplicate",
    "EndOfStream",
    "Event",
    "EventKind",
    "Exploration",
    "Failure",
    "Fault",
    "Fenced",
    "Guarantee",
    "HarnessError",
    "History",
    "InvalidDLSN",
    "InvalidStreamName",
    "LevelDBOffsetStore",
    "LockingException",
    "LogConfig",
    "LogEmpty",
    "LogExists",
    "LogManager",
    "LogNotFound",
    "LogReadException",
    "LogReader",
    "LogRecord",
    "LogRecordTooLong",
    "LogRecordWithDLSN",
    "LogWriter",
    "LoseAck",
    "MemoryOffsetStorage",
    "MemoryOffsetStore",
    "MissingDependency",
    "Namespace",
    "OffsetStore",
    "OutputRecord",
    "OwnershipAcquireFailed",
    "Produce",
    "Reorder",
    "Replay",
    "Resend",
    "Restart",
    "Run",
    "RunBudget",
    "RunZombie",
    "Scenario",
    "Schedule",
    "Status",
    "StorageFailed",
    "StoreLocked",
    "Subject",
    "Takeover",
    "Tick",
    "Topology",
    "TransactionIdOutOfOrder",
    "Truncate",
    "TxidCheck",
    "UnsupportedURI",
    "Verdict",
    "Witness",
    "WriteCancelled",
    "WriteException",
    "__version__",
    "explore",
    "leveldb_uri",
    "log_sink",
    "open_namespace",
    "open_offset_store",
    "read_history",
    "replay",
    "run_once",
    "simulate",
    "table_sink",
    "validate",
    "write_history",
]
