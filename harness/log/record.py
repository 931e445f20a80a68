"""Log records as written and as read, with DistributedLog's limits and flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple, final

from harness.errors import ConfigError
from harness.log.dlsn import DLSN

__all__ = [
    "MAX_PAYLOAD_SIZE",
    "MAX_TXID",
    "LogRecord",
    "LogRecordWithDLSN",
]

MAX_TXID: Final = 2**63 - 1
"""Reserved for the end-of-stream marker; a user record may not use it."""

MAX_LOGRECORD_SIZE: Final = 1048576 - 8192
"""DistributedLog's cap on a record's persistent size (20 header bytes + payload)."""

RECORD_HEADER_SIZE: Final = 20
MAX_PAYLOAD_SIZE: Final = MAX_LOGRECORD_SIZE - RECORD_HEADER_SIZE  # 1_040_364

FLAG_CONTROL: Final = 0x1
FLAG_END_OF_STREAM: Final = 0x2


@final
@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record to write: an application transaction id and an opaque payload.

    Only the type of the arguments is checked here; the writer checks the txid
    order and the size limit, because those rules depend on the log.
    """

    txid: int
    payload: bytes

    def __post_init__(self) -> None:
        if type(self.txid) is not int:
            raise ConfigError(f"LogRecord txid must be an int, got {self.txid!r}")
        if not isinstance(self.payload, bytes):
            raise ConfigError(
                f"LogRecord payload must be bytes, got {type(self.payload).__name__}: "
                f"{self.payload!r:.80}; encode text first, e.g. payload=text.encode()"
            )


@final
@dataclass(frozen=True, slots=True)
class LogRecordWithDLSN:
    """A record as a reader returns it: with its DLSN and its 0-based sequence id.

    The sequence id is computed at read time from the segment metadata, as in
    DistributedLog: it counts user records from the start of the log, across segments.
    """

    txid: int
    payload: bytes
    dlsn: DLSN
    sequence_id: int


class StoredRecord(NamedTuple):
    """A record as a storage backend keeps it (internal).

    ``flags`` carries DistributedLog's CONTROL and END_OF_STREAM bits; ``position``
    is the 1-based position of the record among the user records of its segment.
    """

    txid: int
    payload: bytes
    flags: int
    position: int
