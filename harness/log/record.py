"""Log records as written and as read, with DistributedLog's limits and flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias, final

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


class _LogRecordFields(NamedTuple):
    txid: int
    payload: bytes


@final
class LogRecord(_LogRecordFields):
    """A record to write: an application transaction id and an opaque payload.

    An immutable value (a named tuple, because records are made by the million and
    this is the cheapest immutable value Python has). Only the types are checked here;
    the writer checks the txid order and the size limit, which depend on the log.
    """

    __slots__ = ()

    def __new__(cls, txid: int, payload: bytes) -> LogRecord:
        if type(txid) is not int or type(payload) is not bytes:
            _reject(txid, payload)
        return tuple.__new__(cls, (txid, payload))

    def __repr__(self) -> str:
        return f"LogRecord(txid={self.txid!r}, payload={self.payload!r:.80})"


def _reject(txid: object, payload: object) -> None:
    if type(txid) is not int:
        raise ConfigError(f"LogRecord txid must be an int, got {txid!r}")
    raise ConfigError(
        f"LogRecord payload must be bytes, got {type(payload).__name__}: "
        f"{payload!r:.80}; encode text first, e.g. payload=text.encode()"
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


StoredRecord: TypeAlias = tuple[int, bytes, int, int]
"""A record as a storage backend keeps it (internal): ``(txid, payload, flags, position)``.

``flags`` carries DistributedLog's CONTROL and END_OF_STREAM bits; ``position`` is the
1-based position of the record among the user records of its segment. A plain tuple,
because one is built per record written.
"""
