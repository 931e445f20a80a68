"""Sequential readers of committed records, positioned by DLSN or by transaction id."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Final, final

from harness._closing import Closing
from harness.errors import (
    AlreadyClosed,
    AlreadyTruncatedTransaction,
    ConfigError,
    CorruptData,
    EndOfStream,
    LogReadException,
)
from harness.log.dlsn import DLSN
from harness.log.record import FLAG_CONTROL, FLAG_END_OF_STREAM, LogRecordWithDLSN
from harness.log.storage.base import LogMetadata, LogStorage, SegmentMetadata, Truncation

__all__ = ["LogReader"]

_ENTRIES_PER_FETCH: Final = 64


@final
class LogReader(Closing):
    """Reads the committed records of one log in order, from a start position.

    A reader opened at a DLSN returns the records whose DLSN is >= it; one opened at a
    txid returns records from the first one whose txid is >= it. Readers never see
    records that are not committed. Truncation follows DistributedLog: fully truncated
    segments at the head are skipped silently, a partially truncated one moves the start
    up to its minimum active DLSN, and positioning inside a truncated segment that
    follows a live one raises :class:`AlreadyTruncatedTransaction`.

    ``read_next`` returns ``None`` when the reader is caught up. The harness runs
    deterministically, so a blocking read does not wait for a writer: both modes
    return at once (``non_blocking`` is accepted for API fidelity).
    Errors are sticky: after one, every call raises it again; reaching the end-of-stream
    marker raises :class:`EndOfStream` on this and every later call.
    """

    def __init__(
        self,
        name: str,
        open_storage: Callable[[], LogStorage],
        *,
        start: DLSN | None = None,
        from_txid: int | None = None,
    ) -> None:
        if (start is None) == (from_txid is None):
            raise ConfigError("a reader starts at exactly one of a DLSN or a txid")
        self._name = name
        self._open_storage = open_storage
        self._storage: LogStorage | None = None
        self._start = start
        self._from_txid = from_txid
        self._cursor: tuple[int, int] | None = None
        self._ready: deque[LogRecordWithDLSN | EndOfStream] = deque()
        self._error: BaseException | None = None
        self._closed = False
        self._last: DLSN | None = None

    @property
    def position(self) -> DLSN | None:
        """The DLSN of the last record returned, or None before the first."""
        return self._last

    def read_next(self, non_blocking: bool = False) -> LogRecordWithDLSN | None:
        """The next committed record, or None when the reader is caught up."""
        if not self._ready:
            self._check()
            self._fill()
            if not self._ready:
                return None
        item = self._ready.popleft()
        if isinstance(item, EndOfStream):
            self._error = item
            raise item
        self._last = item.dlsn
        return item

    def read_bulk(self, count: int, non_blocking: bool = False) -> list[LogRecordWithDLSN]:
        """Up to ``count`` records; fewer (or none) means the reader is caught up."""
        if type(count) is not int or count < 1:
            raise ConfigError(f"read_bulk count must be an int >= 1, got {count!r}")
        records: list[LogRecordWithDLSN] = []
        while len(records) < count:
            record = self.read_next(non_blocking)
            if record is None:
                break
            records.append(record)
        return records

    def __iter__(self) -> Iterator[LogRecordWithDLSN]:
        """Every record up to the point where the reader is caught up."""
        while (record := self.read_next()) is not None:
            yield record

    def _check(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"reader of log {self._name!r} is closed; open a new one")
        if self._error is not None:
            raise self._error

    def _fill(self) -> None:
        try:
            if self._storage is None:
                self._storage = self._open_storage()
            storage = self._storage
            metadata = storage.metadata
            if storage.deleted:
                raise LogReadException(f"log {self._name!r} was deleted while being read")
            if metadata.committed is None:
                return
            if self._cursor is None:
                self._position(storage, metadata)
            self._read_ahead(storage, metadata)
        except (LogReadException, CorruptData, AlreadyTruncatedTransaction) as exc:
            self._error = exc
            raise

    def _position(self, storage: LogStorage, metadata: LogMetadata) -> None:
        start = self._start
        if start is None:
            start = self._dlsn_of_txid(storage, metadata)
        segments = metadata.segments
        live = [s for s in segments if s.truncation is not Truncation.TRUNCATED]
        if segments and not live:
            # Everything is truncated (the last completed segment's data is kept, as the
            # purge keeps it, but it is not readable): start after it.
            start = max(start, segments[-1].segment_end())
        if live:
            head = live[0]
            head_start = DLSN(head.segment, 0, 0)
            if start < head_start:
                start = head_start
            if (
                head.truncation is Truncation.PARTIALLY_TRUNCATED
                and head.min_active_dlsn is not None
                and start < head.min_active_dlsn
            ):
                start = head.min_active_dlsn
            for segment in segments:
                if (
                    segment.segment == start.segment
                    and segment.truncation is Truncation.TRUNCATED
                    and segment.segment > head.segment
                ):
                    raise AlreadyTruncatedTransaction(
                        f"position {start} of log {self._name!r} is in truncated segment "
                        f"{segment.segment}, after live data; open the reader at or after "
                        f"{segment.segment_end()}"
                    )
        self._start = start
        self._cursor = (start.segment, start.entry)

    def _dlsn_of_txid(self, storage: LogStorage, metadata: LogMetadata) -> DLSN:
        """The DLSN of the first committed user record with txid >= the start txid.

        Past the last txid, DistributedLog positions the reader just after the last user
        record, so that it reads on into whatever follows (an end-of-stream marker, or
        records committed later, the smaller txids of which are dropped).
        """
        target = self._from_txid
        assert target is not None
        committed = metadata.committed
        assert committed is not None
        for segment in metadata.segments:
            if segment.truncation is Truncation.TRUNCATED:
                continue
            if segment.last_txid is None or segment.last_txid < target:
                continue
            last = self._last_entry(segment, committed)
            for entry, records in storage.read_entries(segment.segment, 0, last):
                for slot, record in enumerate(records):
                    if not record[2] and record[0] >= target:
                        return DLSN(segment.segment, entry, slot)
        for segment in reversed(metadata.segments):
            if segment.last_dlsn is not None:
                return segment.last_dlsn.next()
        return DLSN.INITIAL

    @staticmethod
    def _last_entry(segment: SegmentMetadata, committed: tuple[int, int]) -> int:
        if segment.segment == committed[0]:
            return min(segment.last_entry, committed[1])
        return segment.last_entry

    def _read_ahead(self, storage: LogStorage, metadata: LogMetadata) -> None:
        assert self._cursor is not None and self._start is not None
        committed = metadata.committed
        assert committed is not None
        number, entry = self._cursor
        start = self._start
        floor = self._from_txid
        while (number, entry) <= committed:
            segment = metadata.segment(number)
            if segment is None:
                following = [s.segment for s in metadata.segments if s.segment > number]
                if not following:
                    return
                number, entry = following[0], 0
                continue
            last = self._last_entry(segment, committed)
            if entry > last:
                if not segment.completed:
                    break
                number, entry = number + 1, 0
                continue
            upper = min(last, entry + _ENTRIES_PER_FETCH - 1)
            expected = entry
            for entry_id, records in storage.read_entries(number, entry, upper):
                if entry_id != expected and segment.truncation is Truncation.ACTIVE:
                    raise CorruptData(
                        f"log {self._name!r} is missing entry {expected} of segment {number} "
                        "below its committed point; the stored log is damaged"
                    )
                expected = entry_id + 1
                for slot, (txid, payload, flags, position) in enumerate(records):
                    if flags & FLAG_END_OF_STREAM:
                        self._ready.append(
                            EndOfStream(
                                f"reader of log {self._name!r} reached the end-of-stream marker "
                                f"at {DLSN(number, entry_id, slot)}; the log is sealed"
                            )
                        )
                        self._cursor = (number, entry_id + 1)
                        return
                    if flags & FLAG_CONTROL:
                        continue
                    dlsn = DLSN(number, entry_id, slot)
                    if dlsn < start:
                        continue
                    if floor is not None:
                        if txid < floor:
                            continue
                        floor = self._from_txid = None
                    self._ready.append(
                        LogRecordWithDLSN(
                            txid,
                            payload,
                            dlsn,
                            segment.start_sequence_id + position - 1,
                        )
                    )
            if expected <= upper and segment.truncation is Truncation.ACTIVE:
                raise CorruptData(
                    f"log {self._name!r} is missing entries {expected}..{upper} of segment "
                    f"{number} below its committed point; the stored log is damaged"
                )
            # A purged (truncated) segment yields nothing: skip past it, as DistributedLog does.
            entry = upper + 1
            if self._ready:
                break
        self._cursor = (number, entry)

    def close(self) -> None:
        """Release the reader; later reads raise :class:`AlreadyClosed`."""
        if not self._closed:
            self._closed = True
            self._ready.clear()
            if self._storage is not None:
                self._storage.close()

    def __repr__(self) -> str:
        return f"<LogReader log={self._name!r} position={self._last}>"
