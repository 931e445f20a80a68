"""The dlog source's fast path: a LevelDB log's committed entries decoded in bulk into Arrow.

:class:`~harness.log.reader.LogReader` builds a DLSN and a record object per record, which
makes Python the bottleneck of a Spark query over the log. Here the source reads the log's
storage (:class:`~harness.log.storage.base.LogStorage`, the narrow interface every backend
implements) entry by entry, keeps the user records of a DLSN range with the reader's rules
(committed entries only, control records skipped, the end-of-stream marker ends the log,
a missing entry below the committed point is :class:`~harness.errors.CorruptData`) and
builds Arrow columns per entry, with each entry's DLSN prefix Base64-encoded once.

Truncated segments change where a reader starts (DistributedLog's rules, in the reader):
:func:`fast_path` says whether a range touches one, and the source uses the reader there.
pyarrow is imported when a batch is built.
"""

from __future__ import annotations

import base64
import importlib
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from harness.errors import CorruptData
from harness.log.dlsn import DLSN
from harness.log.namespace import LEVELDB_SCHEME
from harness.log.record import FLAG_CONTROL, FLAG_END_OF_STREAM, StoredRecord
from harness.log.storage.base import LogMetadata, LogStorage, SegmentMetadata, Truncation

__all__ = ["RELEASE_RECORDS", "Positions", "Scan", "arrow_schema", "fast_path", "open_storage"]

_PREFIX: Final = struct.Struct(">bqq")  # version 1, segment, entry: 17 of a DLSN's 25 bytes
_SLOT_PAD: Final = bytes(7)  # a slot below 256: seven zero bytes, then the slot's byte
_TAILS: Final = tuple(base64.b64encode(bytes([b])).decode("ascii") for b in range(256))
"""The Base64 of a DLSN's last byte: 24 bytes (a multiple of three) encode on their own."""
_V1: Final = struct.Struct(">bqqq")
_DLSN_CHARS: Final = 36  # the Base64 text of a DLSN's 25 bytes

Columns = tuple[Sequence[int], Sequence[bytes], Sequence[int], Sequence[int]]
"""An entry's records column by column: txids, payloads, flags, positions."""
Entry = tuple[SegmentMetadata, int, Columns]

RELEASE_RECORDS: Final = 16384
"""A scan that shares its log with other readers lets go of it after this many records."""
_WINDOW_ENTRIES: Final = 256  # entries read from the storage at a time


def open_storage(uri: str, log: str) -> LogStorage:
    """The storage of ``log`` in the LevelDB namespace ``uri`` (``LogNotFound`` if absent,
    ``StoreLocked`` while another process holds it)."""
    from harness.log.storage.leveldb import LevelDBNamespaceStorage

    path = unquote(uri[len(f"{LEVELDB_SCHEME}://") :])
    return LevelDBNamespaceStorage(Path(path)).open(log)


def fast_path(metadata: LogMetadata, start: DLSN, end: DLSN) -> bool:
    """Whether ``[start, end)`` can be read from the storage directly: something is
    committed and no segment the range touches is truncated."""
    return metadata.committed is not None and all(
        segment.truncation is Truncation.ACTIVE
        for segment in metadata.segments
        if start.segment <= segment.segment <= end.segment
    )


def _dlsn_text(segment: int, entry: int, slot: int, prefix: str) -> str:
    if slot < 256:
        return prefix + _TAILS[slot]
    return base64.b64encode(_V1.pack(1, segment, entry, slot)).decode("ascii")


def arrow_schema(pa: Any) -> Any:
    """The Arrow form of the source's schema (``SCHEMA_DDL``)."""
    return pa.schema(
        [
            ("log", pa.string()),
            ("txid", pa.int64()),
            ("dlsn", pa.string()),
            ("sequence_id", pa.int64()),
            ("payload", pa.binary()),
        ]
    )


class Scan:
    """The user records of one log with ``start <= dlsn < end``, from its storage.

    After the iteration, :attr:`last` is the DLSN of the last record kept (None if none),
    :attr:`beyond` whether a user record at or past ``end`` was seen, and
    :attr:`end_of_stream` whether the log's end-of-stream marker stopped it.
    """

    def __init__(
        self,
        storage: LogStorage,
        name: str,
        start: DLSN,
        end: DLSN,
        *,
        reopen: Callable[[], LogStorage] | None = None,
    ) -> None:
        self.storage: LogStorage | None = storage
        self.metadata = storage.metadata
        self.name = name
        self.start = start
        self.end = end
        self.last: DLSN | None = None
        self.beyond = False
        self.end_of_stream = False
        self._reopen = reopen
        self._held = 0

    def close(self) -> None:
        """Release the log (if the scan holds it)."""
        if self.storage is not None:
            self.storage.close()
            self.storage = None

    def entries(self) -> Iterator[Entry]:
        """The committed entries from ``start``'s to ``end``'s, in order, read a window at a
        time. With ``reopen``, the scan shares the log with readers in other processes:
        it closes the log after every :data:`RELEASE_RECORDS` records it read and takes it
        again with ``reopen()`` for the next window (committed entries do not change)."""
        metadata = self.metadata
        committed = metadata.committed
        if committed is None:
            return
        start, end = self.start, self.end
        for segment in sorted(metadata.segments, key=lambda s: s.segment):
            number = segment.segment
            if number < start.segment:
                continue
            if number > end.segment or number > committed[0]:
                return
            first = start.entry if number == start.segment else 0
            last = segment.last_entry
            if number == committed[0]:
                last = min(last, committed[1])
            if number == end.segment:
                last = min(last, end.entry)
            expected = first
            while expected <= last:
                upper = min(last, expected + _WINDOW_ENTRIES - 1)
                for entry, records in self._window(number, expected, upper):
                    if entry != expected:
                        break
                    expected = entry + 1
                    yield segment, entry, records
                if expected <= upper:
                    raise CorruptData(
                        f"log {self.name!r} is missing entry {expected} of segment {number} "
                        "below its committed point; the stored log is damaged"
                    )

    def _window(self, number: int, first: int, last: int) -> list[tuple[int, Columns]]:
        if self.storage is None:
            assert self._reopen is not None, "only a scan with reopen lets go of its log"
            self.storage = self._reopen()
        window = _entry_columns(self.storage, number, first, last)
        self._held += sum(len(columns[0]) for _, columns in window)
        if self._reopen is not None and self._held >= RELEASE_RECORDS:
            self.close()
            self._held = 0
        return window

    def _slots(self, number: int, entry: int, flags: Sequence[int]) -> range:
        """The slots of an entry (its records' ``flags``) inside the range, up to an
        end-of-stream marker (which sets :attr:`end_of_stream`); marks :attr:`beyond` when
        the entry holds user records past it."""
        low = self.start.slot if (number, entry) == (self.start.segment, self.start.entry) else 0
        high = len(flags)
        if (number, entry) == (self.end.segment, self.end.entry):
            high = min(high, self.end.slot)
            self.beyond = 0 in flags[high:]
        if any(flags[low:high]):
            for index, flag in enumerate(flags[low:high]):
                if flag & FLAG_END_OF_STREAM:
                    self.end_of_stream = True
                    self.beyond = False
                    return range(low, low + index)
        return range(low, high)

    def columns(self, rows: int) -> Iterator[_Columns]:
        """The range's user records as columns, about ``rows`` records at a time."""
        chunk = _Columns()
        for segment, entry, (txid, payload, flags, position) in self.entries():
            number = segment.segment
            slots = self._slots(number, entry, flags)
            low, high = slots.start, slots.stop
            kept: Sequence[int] = slots
            if low < high:
                prefix = base64.b64encode(_PREFIX.pack(1, number, entry) + _SLOT_PAD).decode()
                if any(flags[low:high]):  # control records among them: keep the user records
                    kept = [slot for slot in slots if not flags[slot] & FLAG_CONTROL]
                    chunk.add(
                        [txid[s] for s in kept],
                        [payload[s] for s in kept],
                        [position[s] for s in kept],
                        "".join([_dlsn_text(number, entry, s, prefix) for s in kept]),
                        segment.start_sequence_id,
                    )
                else:
                    chunk.add(
                        txid[low:high],
                        payload[low:high],
                        position[low:high],
                        _dlsn_texts(number, entry, prefix, low, high),
                        segment.start_sequence_id,
                    )
                if kept:
                    self.last = DLSN(number, entry, kept[-1])
            if self.end_of_stream or self.beyond:
                break
            if chunk.rows >= rows:
                yield chunk
                chunk = _Columns()
        if chunk.rows:
            yield chunk

    def batches(self, rows: int) -> Iterator[Any]:
        """Arrow record batches of the source's schema, about ``rows`` rows each."""
        pa = importlib.import_module("pyarrow")
        schema = arrow_schema(pa)
        for chunk in self.columns(rows):
            yield chunk.batch(pa, schema, self.name)


def _entry_columns(
    storage: LogStorage, number: int, first: int, last: int
) -> list[tuple[int, Columns]]:
    """The entries of segment ``number`` in [first, last], their records as columns: decoded
    straight into columns where the storage can (the LevelDB backend's
    ``read_entry_columns``), otherwise transposed from :meth:`LogStorage.read_entries`."""
    read_columns = getattr(storage, "read_entry_columns", None)
    if read_columns is not None:
        return list(read_columns(number, first, last))
    window: list[tuple[int, Columns]] = []
    for entry, records in storage.read_entries(number, first, last):
        txid, payload, flags, position = zip(*records, strict=True) if records else ((),) * 4
        window.append((entry, (txid, payload, flags, position)))
    return window


def _dlsn_texts(number: int, entry: int, prefix: str, low: int, high: int) -> str:
    """The DLSN texts of slots ``low..high-1`` of an entry, back to back."""
    if high <= len(_TAILS):  # each text is the prefix and its slot's tail
        return prefix + prefix.join(_TAILS[low:high])
    return "".join([_dlsn_text(number, entry, s, prefix) for s in range(low, high)])


class _Columns:
    """A chunk of the range's records, column by column: txids, payloads, positions in
    their segments (with each segment's first sequence id, by runs of rows) and the DLSN
    texts, which are all :data:`_DLSN_CHARS` long, back to back."""

    __slots__ = ("payloads", "positions", "rows", "runs", "texts", "txids")

    def __init__(self) -> None:
        self.txids: list[int] = []
        self.payloads: list[bytes] = []
        self.positions: list[int] = []
        self.texts: list[str] = []
        self.runs: list[list[int]] = []  # [rows, start sequence id of their segment]
        self.rows = 0

    def add(
        self,
        txids: Sequence[int],
        payloads: Sequence[bytes],
        positions: Sequence[int],
        texts: str,
        start_sequence_id: int,
    ) -> None:
        count = len(txids)
        if not count:
            return
        self.txids.extend(txids)
        self.payloads.extend(payloads)
        self.positions.extend(positions)
        self.texts.append(texts)
        if self.runs and self.runs[-1][1] == start_sequence_id:
            self.runs[-1][0] += count
        else:
            self.runs.append([count, start_sequence_id])
        self.rows += count

    def batch(self, pa: Any, schema: Any, name: str) -> Any:
        """The chunk as an Arrow record batch of the source's schema."""
        compute = importlib.import_module("pyarrow.compute")
        rows = self.rows
        positions = pa.array(self.positions, pa.int64())
        sequences, done = [], 0
        for count, first in self.runs:  # sequence id = first + position - 1
            sequences.append(compute.add(positions.slice(done, count), first - 1))
            done += count
        data = "".join(self.texts).encode("ascii")
        assert len(data) == rows * _DLSN_CHARS, "every DLSN text is 36 characters"
        offsets = pa.array(range(0, len(data) + 1, _DLSN_CHARS), pa.int32())
        dlsns = pa.StringArray.from_buffers(rows, offsets.buffers()[1], pa.py_buffer(data))
        arrays = [
            pa.repeat(pa.scalar(name, pa.string()), rows),
            pa.array(self.txids, pa.int64()),
            dlsns,
            pa.concat_arrays(sequences) if len(sequences) > 1 else sequences[0],
            pa.array(self.payloads, pa.binary()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class Positions:
    """Where a log's committed user records are, by sequence id, found from its storage
    with a few entry reads each (a binary search over a segment's entries), not by reading
    the records in between: the planner's counts, batch ends and partition bounds.

    Every stored record carries its position in its segment: a user record its 1-based
    position (so its sequence id is the segment's ``start_sequence_id + position - 1``), a
    control record (and the end-of-stream marker) the number of user records before it. For
    ranges where :func:`fast_path` holds (no truncated segment); entries are read only up
    to the log's committed point.
    """

    def __init__(self, storage: LogStorage, name: str) -> None:
        self.storage = storage
        self.name = name
        self.metadata = storage.metadata
        self.segments = sorted(self.metadata.segments, key=lambda s: s.segment)

    def _last_entry(self, segment: SegmentMetadata) -> int:
        committed = self.metadata.committed
        if committed is None or segment.segment > committed[0]:
            return -1
        if segment.segment == committed[0]:
            return min(segment.last_entry, committed[1])
        return segment.last_entry

    def _entry(self, number: int, entry: int) -> tuple[StoredRecord, ...]:
        for found, records in self.storage.read_entries(number, entry, entry):
            if found == entry and records:
                return records
        raise CorruptData(
            f"log {self.name!r} is missing entry {entry} of segment {number} below its "
            "committed point; the stored log is damaged"
        )

    def users_before(self, at: DLSN) -> int:
        """How many committed user records lie before ``at``: the sequence id of the first
        one at or after it, or the log's record count when there is none."""
        for segment in self.segments:
            if segment.segment < at.segment:
                continue
            if segment.segment > at.segment or self._last_entry(segment) < 0:
                return segment.start_sequence_id
            if at.entry > self._last_entry(segment):
                return segment.start_sequence_id + segment.record_count
            records = self._entry(segment.segment, at.entry)
            if at.slot >= len(records):
                return segment.start_sequence_id + records[-1][3]
            _, _, flags, position = records[at.slot]
            return segment.start_sequence_id + (position if flags else position - 1)
        return max((s.start_sequence_id + s.record_count for s in self.segments), default=0)

    def dlsn_of(self, sequence: int) -> DLSN | None:
        """The DLSN of the committed user record with ``sequence`` (None: no such record)."""
        for segment in self.segments:
            position = sequence - segment.start_sequence_id + 1
            if not 1 <= position <= segment.record_count:
                continue
            number = segment.segment
            low, high = 0, self._last_entry(segment)
            while low < high:  # the first entry through which ``position`` users are written
                middle = (low + high) // 2
                if self._entry(number, middle)[-1][3] >= position:
                    high = middle
                else:
                    low = middle + 1
            for slot, (_, _, flags, found) in enumerate(self._entry(number, low)):
                if not flags and found == position:
                    return DLSN(number, low, slot)
            raise CorruptData(
                f"log {self.name!r} has no record at position {position} of segment {number}, "
                "which its metadata counts; the stored log is damaged"
            )
        return None
