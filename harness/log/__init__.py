"""The reference log: DistributedLog's core API with memory and LevelDB storage.

Start with :func:`open_namespace`; see ``docs/log.md`` for the rules and where they
differ from DistributedLog's code.
"""

from harness.log.config import LogConfig, TxidCheck
from harness.log.dlsn import DLSN
from harness.log.manager import LogManager
from harness.log.namespace import Namespace, leveldb_uri, open_namespace
from harness.log.reader import LogReader
from harness.log.record import MAX_PAYLOAD_SIZE, MAX_TXID, LogRecord, LogRecordWithDLSN
from harness.log.storage.base import SegmentMetadata, Truncation
from harness.log.writer import LogWriter

__all__ = [
    "DLSN",
    "MAX_PAYLOAD_SIZE",
    "MAX_TXID",
    "LogConfig",
    "LogManager",
    "LogReader",
    "LogRecord",
    "LogRecordWithDLSN",
    "LogWriter",
    "Namespace",
    "SegmentMetadata",
    "Truncation",
    "TxidCheck",
    "leveldb_uri",
    "open_namespace",
]
