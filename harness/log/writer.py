"""The single writer of a log: buffered writes that only ``commit`` makes visible."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import NoReturn, final

from harness._closing import Closing
from harness.errors import (
    AlreadyClosed,
    ConfigError,
    DLException,
    EndOfStream,
    HarnessError,
    LogRecordTooLong,
    TransactionIdOutOfOrder,
    WriteException,
)
from harness.log.config import LogConfig, TxidCheck
from harness.log.dlsn import DLSN
from harness.log.record import (
    FLAG_CONTROL,
    FLAG_END_OF_STREAM,
    MAX_PAYLOAD_SIZE,
    MAX_TXID,
    LogRecord,
    StoredRecord,
)
from harness.log.storage.base import LogMetadata, LogStorage, SegmentMetadata, Truncation

__all__ = ["LogWriter"]

_CONTROL_PAYLOAD = b"control"
_END_OF_STREAM_PAYLOAD = b"endOfStream"


@dataclasses.dataclass(slots=True)
class _SegmentWork:
    """A segment being written: what it will look like at the next commit."""

    segment: int
    start_sequence_id: int
    record_count: int = 0
    payload_bytes: int = 0
    first_txid: int | None = None
    last_txid: int | None = None
    next_entry: int = 0
    last_entry: int = -1
    last_dlsn: DLSN | None = None
    rolled: bool = False

    def to_metadata(self, previous: SegmentMetadata | None) -> SegmentMetadata:
        return SegmentMetadata(
            segment=self.segment,
            start_sequence_id=self.start_sequence_id,
            record_count=self.record_count,
            payload_bytes=self.payload_bytes,
            first_txid=self.first_txid,
            last_txid=self.last_txid,
            last_entry=self.last_entry,
            last_dlsn=self.last_dlsn,
            completed=self.rolled,
            truncation=Truncation.ACTIVE if previous is None else previous.truncation,
            min_active_dlsn=None if previous is None else previous.min_active_dlsn,
        )


@final
class LogWriter(Closing):
    """Writes records to one log; at most one is open per log (``OwnershipAcquireFailed``).

    ``write`` and ``write_bulk`` only buffer; ``flush`` transmits the buffer to storage;
    ``commit`` transmits what is left and makes everything written so far visible to
    readers and durable, atomically. Records written but not committed when the writer
    crashes or is aborted are gone: the next writer discards them on recovery.

    Errors from storage are sticky, as in DistributedLog: once a transmit or commit
    failed, every later call raises :class:`WriteException`. Errors about one record
    (too long, txid out of order, end of stream) are not sticky.
    """

    def __init__(self, name: str, storage: LogStorage, config: LogConfig) -> None:
        self._name = name
        self._storage = storage
        self._config = config
        self._closed = False
        self._error: BaseException | None = None
        storage.acquire_writer()
        try:
            self._recover()
        except BaseException:
            storage.release_writer()
            raise
        self._buffer: list[StoredRecord] = []
        self._buffer_bytes = 0
        # Settings read on every write, copied out of the config once.
        self._segment_max_records = config.segment_max_records
        self._segment_max_bytes = config.segment_max_bytes
        self._output_buffer_size = config.output_buffer_size
        self._check_txids = config.max_id_sanity_check
        self._every_record = config.txid_check is TxidCheck.EVERY_RECORD

    def _recover(self) -> None:
        storage = self._storage
        storage.discard_uncommitted()
        metadata = storage.metadata
        segments = metadata.segments
        # DistributedLog's recovery completes the previous writer's in-progress segment;
        # this writer starts a new one at its first write.
        if segments and not segments[-1].completed:
            last = dataclasses.replace(segments[-1], completed=True)
            recovered = dataclasses.replace(
                metadata, segments=(*segments[:-1], last), commits=metadata.commits + 1
            )
            storage.commit(recovered, changed=(last.segment,), sync=self._config.durable_commit)
            metadata = recovered
        self._max_txid = metadata.max_txid
        self._end_of_stream = metadata.end_of_stream
        # True once closed, failed or sealed: write() then takes its slow path.
        self._blocked = self._end_of_stream
        self._work: list[_SegmentWork] = []
        self._current: _SegmentWork | None = None

    # -- state checks -----------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"the writer of log {self._name!r} is closed; open a new one")
        if self._error is not None:
            raise WriteException(
                f"the writer of log {self._name!r} has been closed due to error "
                f"({type(self._error).__name__}: {self._error}); open a new writer"
            ) from self._error

    def _fail(self, exc: BaseException) -> WriteException:
        self._error = exc
        self._blocked = True
        return WriteException(
            f"writing log {self._name!r} failed ({type(exc).__name__}: {exc}); this writer "
            "rejects every later call: open a new writer (uncommitted records are lost)"
        )

    # -- segments ---------------------------------------------------------------------

    def _start_segment(self) -> _SegmentWork:
        previous = self._work[-1] if self._work else None
        if previous is not None:
            number = previous.segment + 1
            start = previous.start_sequence_id + previous.record_count
        else:
            committed = self._storage.metadata.segments
            if committed:
                number = committed[-1].segment + 1
                start = committed[-1].start_sequence_id + committed[-1].record_count
            else:
                number = self._config.first_segment_sequence_number
                start = 0
        work = _SegmentWork(segment=number, start_sequence_id=start)
        self._work.append(work)
        self._current = work
        return work

    # -- writing ----------------------------------------------------------------------

    def write(self, record: LogRecord) -> None:
        """Buffer one record. Not visible to readers, nor durable, until :meth:`commit`."""
        # The hot path of every producer: checks are ordered so that a valid record
        # costs a handful of comparisons; each failure takes the slow path to explain.
        if self._blocked:
            self._check_usable()
            if self._end_of_stream:
                raise EndOfStream(
                    f"log {self._name!r} is sealed by mark_end_of_stream(); no record can be "
                    f"written after it (txid {getattr(record, 'txid', '?')}); write to a new log"
                )
        if record.__class__ is not LogRecord:
            raise ConfigError(
                f"write() takes a LogRecord, got {type(record).__name__}: {record!r:.80}; "
                "wrap the data as LogRecord(txid, payload)"
            )
        txid, payload = record
        size = len(payload)
        if txid < 0 or txid >= MAX_TXID or size > MAX_PAYLOAD_SIZE:
            self._reject(txid, size)
        work = self._current
        starts_segment = (
            work is None
            or work.record_count >= self._segment_max_records
            or work.payload_bytes >= self._segment_max_bytes
        )
        last = self._max_txid
        if (
            last is not None
            and txid < last
            and self._check_txids
            and (starts_segment or self._every_record)
        ):
            raise TransactionIdOutOfOrder(
                f"txid {txid} written to log {self._name!r} after txid {last}: txids must "
                "not decrease (open the log with max_id_sanity_check=False to allow it)",
                txid=txid,
                last_txid=last,
            )
        if starts_segment:
            if work is not None:
                self._transmit()
                work.rolled = True
            work = self._start_segment()
        position = work.record_count = work.record_count + 1  # type: ignore[union-attr]
        work.payload_bytes += size  # type: ignore[union-attr]
        if last is None or txid > last:
            self._max_txid = txid
        self._buffer.append((txid, payload, 0, position))
        self._buffer_bytes += size + 20
        if self._buffer_bytes > self._output_buffer_size:
            self._transmit()

    def _reject(self, txid: int, size: int) -> NoReturn:
        if txid < 0 or txid >= MAX_TXID:
            raise TransactionIdOutOfOrder(
                f"txid {txid} of log {self._name!r} is out of range: txids are >= 0 and below "
                f"{MAX_TXID} (reserved for the end-of-stream marker)",
                txid=txid,
            )
        raise LogRecordTooLong(
            f"record with txid {txid} has a {size}-byte payload; the limit is "
            f"{MAX_PAYLOAD_SIZE} bytes (1 MiB - 8 KiB including a 20-byte header): split it"
        )

    def write_bulk(self, records: Iterable[LogRecord]) -> int:
        """Buffer records in order; returns how many were buffered.

        The first rejected record raises its error, whose message says how many records
        before it were buffered; the records after it are not written.
        """
        written = 0
        for record in records:
            try:
                self.write(record)
            except DLException as exc:
                buffered = f"records 0..{written - 1} were" if written else "no record was"
                exc.args = (
                    f"{exc.args[0] if exc.args else exc} [write_bulk: {buffered} buffered; "
                    f"record {written} was rejected and the rest cancelled]",
                )
                raise
            written += 1
        return written

    def _transmit(self) -> None:
        """Send the buffer to storage as one entry (stored, not yet visible)."""
        if not self._buffer:
            return
        work = self._current
        assert work is not None
        records = tuple(self._buffer)
        entry = self._append(work, records)
        work.last_dlsn = DLSN(work.segment, entry, len(records) - 1)
        if work.first_txid is None:
            work.first_txid = records[0][0]
        work.last_txid = records[-1][0]
        self._buffer.clear()
        self._buffer_bytes = 0

    def flush(self) -> None:
        """Transmit buffered records to storage. They stay invisible until :meth:`commit`."""
        self._check_usable()
        self._transmit()

    def commit(self) -> None:
        """Make every record written so far visible to readers and durable, atomically.

        With nothing buffered this writes a control record, as DistributedLog does, so
        each commit takes an entry id.
        """
        self._check_usable()
        if self._buffer:
            self._transmit()
        else:
            self._append_marker(FLAG_CONTROL, _CONTROL_PAYLOAD)
        self._publish()

    def _append_marker(self, flags: int, payload: bytes) -> None:
        work = self._current or self._start_segment()
        txid = MAX_TXID if flags & FLAG_END_OF_STREAM else (self._max_txid or 0)
        self._append(work, ((txid, payload, flags, work.record_count),))

    def _append(self, work: _SegmentWork, records: tuple[StoredRecord, ...]) -> int:
        """Store ``records`` as the segment's next entry; returns its entry id."""
        entry = work.next_entry
        try:
            self._storage.append_entry(work.segment, entry, records)
        except (HarnessError, OSError) as exc:
            raise self._fail(exc) from exc
        work.next_entry = entry + 1
        work.last_entry = entry
        return entry

    def _publish(self, *, complete_current: bool = False) -> None:
        storage = self._storage
        metadata = storage.metadata
        current = self._current
        if complete_current and current is not None:
            current.rolled = True
        updated = {w.segment: w.to_metadata(metadata.segment(w.segment)) for w in self._work}
        segments = tuple(s for s in metadata.segments if s.segment not in updated) + tuple(
            updated[w.segment] for w in self._work
        )
        committed = metadata.committed
        if current is not None and current.last_entry >= 0:
            committed = (current.segment, current.last_entry)
        new = LogMetadata(
            segments=segments,
            committed=committed,
            max_txid=MAX_TXID if self._end_of_stream else self._max_txid,
            end_of_stream=self._end_of_stream,
            commits=metadata.commits + 1,
        )
        try:
            storage.commit(new, changed=tuple(updated), sync=self._config.durable_commit)
        except (HarnessError, OSError) as exc:
            raise self._fail(exc) from exc
        self._work = [w for w in self._work if not w.rolled]
        if self._current is not None and self._current.rolled:
            self._current = None

    def mark_end_of_stream(self) -> None:
        """Seal the log: commit what is buffered plus an end-of-stream marker.

        Later writes (on this writer or any new one) raise :class:`EndOfStream`, and a
        reader that reaches the marker raises it too. Calling it again is a no-op.
        """
        self._check_usable()
        if self._end_of_stream:
            return
        self._transmit()
        self._end_of_stream = self._blocked = True
        self._append_marker(FLAG_END_OF_STREAM, _END_OF_STREAM_PAYLOAD)
        self._publish()

    def truncate(self, dlsn: DLSN) -> bool:
        """Mark the log's records before ``dlsn`` as truncated (DistributedLog's rules).

        Completed segments entirely before ``dlsn`` become TRUNCATED (their data is
        deleted, except the last completed segment's); the completed segment containing
        ``dlsn`` becomes PARTIALLY_TRUNCATED with its minimum active DLSN raised to
        ``dlsn`` (never lowered). The segment being written is never truncated.
        Returns False (and does nothing) for ``DLSN.INVALID``, True otherwise.
        """
        self._check_usable()
        if not isinstance(dlsn, DLSN):
            raise ConfigError(f"truncate() takes a DLSN, got {type(dlsn).__name__}: {dlsn!r}")
        if dlsn == DLSN.INVALID:
            return False
        storage = self._storage
        metadata = storage.metadata
        changed: list[int] = []
        segments = list(metadata.segments)
        for index, segment in enumerate(segments):
            if not segment.completed:
                break
            if segment.truncation is Truncation.TRUNCATED:
                continue
            last = segment.last_dlsn or DLSN(segment.segment, max(segment.last_entry, 0), 0)
            if last < dlsn:
                segments[index] = dataclasses.replace(
                    segment, truncation=Truncation.TRUNCATED, min_active_dlsn=None
                )
                changed.append(segment.segment)
            elif DLSN(segment.segment, 0, 0) < dlsn:
                floor = segment.min_active_dlsn
                if floor is None or floor < dlsn:
                    segments[index] = dataclasses.replace(
                        segment, truncation=Truncation.PARTIALLY_TRUNCATED, min_active_dlsn=dlsn
                    )
                    changed.append(segment.segment)
                break
            else:
                break
        if not changed:
            return True
        new = dataclasses.replace(metadata, segments=tuple(segments), commits=metadata.commits + 1)
        try:
            storage.commit(new, changed=changed, sync=self._config.durable_commit)
            # As DistributedLog's retention purge does, keep the last completed segment.
            keep = max((s.segment for s in segments if s.completed), default=None)
            for segment in segments:
                if (
                    segment.segment in changed
                    and segment.segment != keep
                    and segment.truncation is Truncation.TRUNCATED
                ):
                    storage.purge_segment(segment.segment)
        except (HarnessError, OSError) as exc:
            raise self._fail(exc) from exc
        return True

    # -- lifecycle --------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Commit what is buffered, complete the segment and release the log."""
        if self._closed:
            return
        try:
            if self._error is None and (self._buffer or self._work):
                self._transmit()
                if self._current is not None and self._current.last_entry >= 0:
                    self._publish(complete_current=True)
        finally:
            self._release()

    def abort(self) -> None:
        """Release the log without committing, as a crash would: uncommitted records are lost."""
        if not self._closed:
            self._release()

    def _release(self) -> None:
        self._closed = self._blocked = True
        self._buffer.clear()
        self._storage.release_writer()
        self._storage.close()

    def _end(self, failed: bool) -> None:
        """A with-block that raised aborts the writer (uncommitted records are lost); one that
        did not closes it (what is buffered is committed)."""
        if failed:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "error" if self._error else "open"
        return f"<LogWriter log={self._name!r} {state}>"
