"""A handle on one log (DistributedLog's ``DistributedLogManager``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from harness._closing import Closing
from harness.errors import (
    AlreadyClosed,
    ConfigError,
    EndOfStream,
    LogEmpty,
    LogNotFound,
    OwnershipAcquireFailed,
    StoreLocked,
)
from harness.log.config import LogConfig
from harness.log.dlsn import DLSN
from harness.log.reader import LogReader
from harness.log.record import LogRecordWithDLSN
from harness.log.storage.base import (
    LogMetadata,
    LogStorage,
    NamespaceStorage,
    SegmentMetadata,
    Truncation,
)
from harness.log.writer import LogWriter

__all__ = ["LogManager"]


@final
class LogManager(Closing):
    """Opens the writer and readers of one log and answers questions about it.

    Opening a manager does not create the log: the first writer does (unless
    ``create_stream_if_not_exists`` is off), and readers of a missing log raise
    :class:`LogNotFound` on their first read, as in DistributedLog.
    """

    def __init__(
        self,
        name: str,
        storage: NamespaceStorage,
        config: LogConfig,
        check_open: Callable[[], None],
    ) -> None:
        self.name = name
        self.config = config
        self._namespace = storage
        self._check_namespace = check_open
        self._closed = False

    def _check(self) -> None:
        self._check_namespace()
        if self._closed:
            raise AlreadyClosed(f"log manager of {self.name!r} is closed; open the log again")

    def open_writer(self) -> LogWriter:
        """The log's single writer. A second one raises :class:`OwnershipAcquireFailed`."""
        self._check()
        if not self._namespace.exists(self.name):
            if not self.config.create_stream_if_not_exists:
                raise LogNotFound(
                    f"log {self.name!r} does not exist and create_stream_if_not_exists is off; "
                    "create it with namespace.create_log() first"
                )
            self._namespace.create(self.name)
        try:
            storage = self._namespace.open(self.name)
        except StoreLocked as exc:
            raise OwnershipAcquireFailed(str(exc)) from None
        try:
            return LogWriter(self.name, storage, self.config)
        except BaseException:
            storage.close()
            raise

    def open_reader(self, start: DLSN | int = DLSN.INITIAL) -> LogReader:
        """A reader from a DLSN (records with DLSN >= it) or a txid (first txid >= it)."""
        self._check()
        if isinstance(start, DLSN):
            return LogReader(self.name, self._open_storage, start=start)
        if type(start) is int and start >= 0:
            return LogReader(self.name, self._open_storage, from_txid=start)
        raise ConfigError(
            f"open_reader takes a DLSN or a txid (int >= 0), got {type(start).__name__}: {start!r}"
        )

    def _open_storage(self) -> LogStorage:
        self._check()
        return self._namespace.open(self.name)

    def _metadata(self) -> LogMetadata:
        self._check()
        storage = self._namespace.open(self.name)
        try:
            return storage.metadata
        finally:
            storage.close()

    def segments(self) -> tuple[SegmentMetadata, ...]:
        """The committed segments, oldest first (truncated ones included)."""
        return self._metadata().segments

    def is_end_of_stream_marked(self) -> bool:
        return self._metadata().end_of_stream

    def get_last_txid(self) -> int:
        """The largest committed user txid (the end-of-stream marker excluded)."""
        return self.get_last_log_record().txid

    def get_last_dlsn(self) -> DLSN:
        return self.get_last_log_record().dlsn

    def get_last_log_record(self) -> LogRecordWithDLSN:
        """The last committed user record; :class:`LogEmpty` if there is none."""
        metadata = self._metadata()
        for segment in reversed(metadata.segments):
            if segment.last_dlsn is not None and segment.truncation is not Truncation.TRUNCATED:
                with self.open_reader(segment.last_dlsn) as reader:
                    record = reader.read_next()
                if record is not None:
                    return record
        raise LogEmpty(f"log {self.name!r} has no committed records")

    def get_first_log_record(self) -> LogRecordWithDLSN:
        """The first committed user record still readable; :class:`LogEmpty` if none."""
        with self.open_reader(DLSN.INITIAL) as reader:
            try:
                record = reader.read_next()
            except EndOfStream:
                record = None  # sealed before any record was written
        if record is None:
            raise LogEmpty(f"log {self.name!r} has no committed records")
        return record

    def close(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return f"<LogManager {self.name!r}>"
