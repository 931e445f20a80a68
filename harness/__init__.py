"""A property-based correctness harness for at-least-once and exactly-once stream processing.

The public surface, re-exported here: the reference log (:mod:`harness.log`), the offset
stores (:mod:`harness.offsets`) and the errors (:mod:`harness.errors`, rooted in
:class:`HarnessError`). Importing this package loads neither plyvel nor pyspark.
"""

from harness.errors import (
    AlreadyClosed,
    AlreadyTruncatedTransaction,
    ConfigError,
    CorruptData,
    DLException,
    EndOfStream,
    HarnessError,
    InvalidDLSN,
    InvalidStreamName,
    LockingException,
    LogEmpty,
    LogExists,
    LogNotFound,
    LogReadException,
    LogRecordTooLong,
    OwnershipAcquireFailed,
    StoreLocked,
    TransactionIdOutOfOrder,
    UnsupportedURI,
    WriteCancelled,
    WriteException,
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

__version__ = "0.1.0"

__all__ = [
    "DLSN",
    "AlreadyClosed",
    "AlreadyTruncatedTransaction",
    "ConfigError",
    "CorruptData",
    "DLException",
    "EndOfStream",
    "HarnessError",
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
    "MemoryOffsetStorage",
    "MemoryOffsetStore",
    "Namespace",
    "OffsetStore",
    "OwnershipAcquireFailed",
    "StoreLocked",
    "TransactionIdOutOfOrder",
    "TxidCheck",
    "UnsupportedURI",
    "WriteCancelled",
    "WriteException",
    "__version__",
    "leveldb_uri",
    "open_namespace",
    "open_offset_store",
]
