"""The reference log as a Spark data source: ``spark.readStream.format("dlog")``.

A PySpark Python data source (``pyspark.sql.datasource``) over logs of a
``distributedlog-leveldb:///PATH`` namespace, with a batch reader and a streaming reader::

    from harness.spark.streaming.datasource import register_dlog

    register_dlog(spark)
    stream = (
        spark.readStream.format("dlog")
        .option("uri", "distributedlog-leveldb:///data/ns")
        .option("logs", "orders,payments")
        .option("maxRecordsPerBatch", "1000")
        .load()
    )

**Schema** (:data:`SCHEMA_DDL`): ``log`` (the log's name), ``txid``, ``dlsn`` (the record's
DLSN in DistributedLog's Base64 string form, :meth:`DLSN.serialize`), ``sequence_id``
(0-based position of the record in its log) and ``payload`` (bytes).

**Offsets** are JSON objects mapping each log name to a DLSN in its JSON form,
``{"orders": {"segment": 1, "entry": 4, "slot": 0}}``, sorted by log name. A log's offset
is the position to read next: a micro-batch from ``start`` to ``end`` holds, per log, the
committed records with ``start <= dlsn < end``. The initial offset is
:attr:`DLSN.INITIAL` for every log; an end offset is always the ``DLSN.next()`` of a user
record, so ranges of consecutive batches neither overlap nor leave gaps.

**Partitions**: one per log whose range is not empty; with option ``minPartitions`` above
the number of such logs, the ranges with the most records per partition are split
(:func:`split_counts`, pieces of at least :data:`SPLIT_LEAST_RECORDS` records, as even as
whole records allow) at the DLSNs of records found by sequence id, so the pieces cover the
range exactly, without a gap or an overlap. ``read`` reads from the partition's start to
before its end, so the same offsets always give the same rows (a deterministic replay); a
range that the log can no longer serve (its records were truncated or lost) fails with
:class:`~harness.errors.LogReadException` instead of giving fewer rows.

**Options** (names are case-insensitive, values strings):

``uri`` (required; ``load(uri)`` works too)
    The namespace, ``distributedlog-leveldb:///ABSOLUTE/PATH``. Memory namespaces are
    refused: Spark reads in other processes, which cannot see this process's memory.
``logs`` (required)
    Comma-separated log names; one input partition per log (see ``minPartitions``).
``maxRecordsPerBatch``
    At most this many records per micro-batch, over all logs (shared out round-robin in
    log-name order, :func:`share_round_robin`); default: everything available.
    ``Trigger.AvailableNow`` honours it too.
``minPartitions``
    Read each batch in at least this many partitions where the logs' ranges hold enough
    records (default 1: one per log). Partitions of one log are read by processes that take
    turns at it; see :data:`DEFAULT_MIN_PARTITIONS` for why that is not the default.
``lockWaitSeconds``
    The LevelDB backend serves a log to one process at a time (``docs/log.md``); a reader that
    finds the log held by another process retries for this long (default 10) before failing
    with :class:`~harness.errors.StoreLocked`.
``startingOffsets`` / ``endingOffsets`` (batch reads only)
    Offsets in the JSON form above; default: the start of each log / its committed end.

``commit(end)`` does nothing to the log (DistributedLog readers keep no server-side position):
the query's checkpoint is the reader's position. This module imports pyspark (its classes
subclass pyspark's); ``import harness`` never imports it.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import itertools
import json
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from harness.errors import MissingDependency

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError as exc:  # admission control came with Spark 4.2 (SPARK-55304)
    import pyspark

    raise MissingDependency(
        f"the dlog streaming source needs PySpark 4.2 or newer (admission control in "
        f"pyspark.sql.streaming.datasource), found pyspark {pyspark.__version__}; upgrade "
        f"with: pip install -U 'pyspark>=4.2'"
    ) from exc

from harness.errors import (
    ConfigError,
    EndOfStream,
    InvalidDLSN,
    LogNotFound,
    LogReadException,
    StoreLocked,
)
from harness.log.dlsn import DLSN
from harness.log.manager import LogManager
from harness.log.namespace import LEVELDB_SCHEME, Namespace, open_namespace
from harness.log.reader import LogReader
from harness.log.storage.base import LogStorage
from harness.spark.streaming._bulk import (
    Positions,
    Scan,
    arrow_schema,
    fast_path,
    open_storage,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "ARROW_BATCH_ROWS",
    "DEFAULT_MIN_PARTITIONS",
    "SCHEMA_DDL",
    "SPLIT_LEAST_RECORDS",
    "SOURCE_NAME",
    "DLogBatchReader",
    "DLogDataSource",
    "DLogPartition",
    "DLogStreamReader",
    "Offsets",
    "SourceOptions",
    "decode_offsets",
    "encode_offsets",
    "latest_offsets",
    "plan_batch_end",
    "read_arrow",
    "read_range",
    "share_round_robin",
    "split_counts",
    "register_dlog",
]

SOURCE_NAME: Final = "dlog"
"""The short name the source is registered under: ``spark.read.format("dlog")``."""

SCHEMA_DDL: Final = "log string, txid bigint, dlsn string, sequence_id bigint, payload binary"
"""The rows' schema, as a Spark DDL string."""

ARROW_BATCH_ROWS: Final = 4096
"""Rows per Arrow record batch that ``read`` hands to Spark."""

DEFAULT_MIN_PARTITIONS: Final = 1
"""Partitions a batch is read in at least (option ``minPartitions``), where its logs' ranges
hold enough records; by default one per log. Above the number of logs, processes take turns
at the same log (the LevelDB backend serves a log to one process at a time): correct, but
measured slower on two cores than one partition per log (see ``docs/streaming.md``)."""

SPLIT_LEAST_RECORDS: Final = 16384
"""A log's range is split only into partitions of at least this many records: a partition
costs a Python task and an open of the log."""

_DEFAULT_LOCK_WAIT_S: Final = 10.0
_DLSN_V1: Final = struct.Struct(">bqqq")  # DLSN.serialize_bytes(), inlined for the read loop

Offsets = dict[str, DLSN]
"""A source offset: the next DLSN to read, per log name."""

_T = TypeVar("_T")


def encode_offsets(offsets: Mapping[str, DLSN]) -> dict[str, dict[str, int]]:
    """The JSON form of ``offsets``: log name -> ``DLSN.to_json()``, sorted by log name.

    Spark compares offsets by their JSON text, so the form is canonical: equal offsets give
    equal dicts in equal order.
    """
    return {log: offsets[log].to_json() for log in sorted(offsets)}


def decode_offsets(value: object, *, what: str = "offset") -> Offsets:
    """Inverse of :func:`encode_offsets`; anything else raises :class:`ConfigError`."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{what} must be a JSON object mapping log names to DLSNs such as "
            f'{{"orders": {{"segment": 1, "entry": 0, "slot": 0}}}}, got {value!r:.200}'
        )
    offsets: Offsets = {}
    for log, dlsn in value.items():
        if not isinstance(log, str):
            raise ConfigError(f"{what}: log names must be strings, got {log!r}")
        try:
            offsets[log] = DLSN.from_json(dict(dlsn) if isinstance(dlsn, Mapping) else dlsn)
        except InvalidDLSN as exc:
            raise ConfigError(f"{what}: the DLSN of log {log!r} is malformed: {exc}") from None
    return offsets


def _retrying(action: Callable[[], _T], wait_s: float) -> _T:
    """``action()``, retried while another process holds the log's LevelDB database."""
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            return action()
        except StoreLocked:
            if time.monotonic() >= deadline:
                raise
            # polling a lock held by another process: there is nothing to wait on
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


@final
class SourceOptions:
    """The data source's options, validated; see the module docstring."""

    __slots__ = (
        "ending",
        "lock_wait_s",
        "logs",
        "max_records",
        "min_partitions",
        "split_least",
        "starting",
        "uri",
    )

    def __init__(
        self,
        *,
        uri: str,
        logs: Sequence[str],
        max_records: int | None = None,
        lock_wait_s: float = _DEFAULT_LOCK_WAIT_S,
        starting: Offsets | None = None,
        ending: Offsets | None = None,
        min_partitions: int = DEFAULT_MIN_PARTITIONS,
        split_least: int = SPLIT_LEAST_RECORDS,
    ) -> None:
        if not isinstance(uri, str) or not uri.startswith(f"{LEVELDB_SCHEME}:///"):
            raise ConfigError(
                f"option 'uri' must be a {LEVELDB_SCHEME}:///ABSOLUTE/PATH namespace URI, got "
                f"{uri!r}: Spark reads in worker processes, which share LevelDB namespaces but "
                "not memory ones (build one with harness.log.leveldb_uri(path))"
            )
        names = tuple(logs)
        if not names or any(not isinstance(n, str) or not n for n in names):
            raise ConfigError(
                f"option 'logs' must name one or more logs, comma-separated, got {logs!r}"
            )
        if len(set(names)) != len(names):
            raise ConfigError(f"option 'logs' names a log twice: {','.join(names)!r}")
        if max_records is not None and (type(max_records) is not int or max_records < 1):
            raise ConfigError(
                f"option 'maxRecordsPerBatch' must be an integer >= 1, got {max_records!r}"
            )
        for name, value in (("minPartitions", min_partitions), ("split_least", split_least)):
            if type(value) is not int or value < 1:
                raise ConfigError(f"option {name!r} must be an integer >= 1, got {value!r}")
        self.uri = uri
        self.logs = names
        self.min_partitions = min_partitions
        self.split_least = split_least
        self.max_records = max_records
        self.lock_wait_s = lock_wait_s
        self.starting = starting
        self.ending = ending

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Read Spark's (case-insensitive) options; a bad one raises :class:`ConfigError`."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        known = {
            "uri",
            "logs",
            "maxrecordsperbatch",
            "lockwaitseconds",
            "minpartitions",
            "startingoffsets",
            "endingoffsets",
            "path",
        }
        unknown = sorted(set(lowered) - known)
        if unknown:
            raise ConfigError(
                f"unknown dlog option(s) {unknown}; the options are uri, logs, "
                "maxRecordsPerBatch, minPartitions, lockWaitSeconds, startingOffsets, "
                "endingOffsets"
            )
        uri = lowered.get("uri") or lowered.get("path")
        if not uri:
            raise ConfigError(
                "the dlog source needs option 'uri' (a distributedlog-leveldb:///PATH "
                "namespace URI), e.g. .option('uri', leveldb_uri(path))"
            )
        logs_text = lowered.get("logs")
        if not logs_text:
            raise ConfigError(
                "the dlog source needs option 'logs': the log names, comma-separated, "
                "e.g. .option('logs', 'orders,payments')"
            )
        max_records = _int_option(lowered, "maxrecordsperbatch", "maxRecordsPerBatch")
        min_partitions = _int_option(lowered, "minpartitions", "minPartitions")
        wait = lowered.get("lockwaitseconds")
        lock_wait_s = _DEFAULT_LOCK_WAIT_S
        if wait is not None:
            try:
                lock_wait_s = float(wait)
            except ValueError:
                lock_wait_s = -1.0
            if not lock_wait_s >= 0:
                raise ConfigError(f"option 'lockWaitSeconds' must be a number >= 0, got {wait!r}")
        return cls(
            uri=str(uri),
            logs=[name.strip() for name in logs_text.split(",")],
            max_records=max_records,
            lock_wait_s=lock_wait_s,
            starting=_offsets_option(lowered, "startingoffsets", "startingOffsets"),
            ending=_offsets_option(lowered, "endingoffsets", "endingOffsets"),
            min_partitions=DEFAULT_MIN_PARTITIONS if min_partitions is None else min_partitions,
        )


def _int_option(options: Mapping[str, str], key: str, name: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"option {name!r} must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise ConfigError(f"option {name!r} must be an integer >= 1, got {text!r}")
    return value


def _offsets_option(options: Mapping[str, str], key: str, name: str) -> Offsets | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"option {name!r} is not JSON ({exc}): {text!r:.200}") from None
    return decode_offsets(value, what=f"option {name!r}")


def _log_end(uri: str, log: str, wait_s: float) -> DLSN | None:
    """The DLSN after the log's last committed user record; None when it has none."""

    def look() -> DLSN | None:
        with open_namespace(uri) as namespace:
            if not namespace.log_exists(log):
                return None
            with namespace.open_log(log) as manager:
                try:
                    segments = manager.segments()
                except LogNotFound:
                    return None
        last = max((s.last_dlsn for s in segments if s.last_dlsn is not None), default=None)
        return None if last is None else last.next()

    return _retrying(look, wait_s)


def latest_offsets(uri: str, logs: Sequence[str], *, lock_wait_s: float = 10.0) -> Offsets:
    """Every log's committed end: the offset a query has processed everything at.

    A log without records (or not created yet) is at :attr:`DLSN.INITIAL`.
    """
    return {log: _log_end(uri, log, lock_wait_s) or DLSN.INITIAL for log in logs}


def _sequence_at(manager: LogManager, position: DLSN) -> int | None:
    """The sequence id of the first record at or after ``position``; None when there is none."""
    with manager.open_reader(position) as reader:
        try:
            record = reader.read_next()
        except EndOfStream:
            return None
    return None if record is None else record.sequence_id


@final
class _LogPlan:
    """One log's records in ``[start, cap)`` for planning: counted and located by sequence
    id from the log's storage (:class:`Positions`, one open of the log for a whole plan),
    or through readers where the range touches a truncated segment (whose rules a reader
    applies) or the log does not exist. Close it to release the log."""

    def __init__(self, uri: str, log: str, start: DLSN, cap: DLSN, wait_s: float) -> None:
        self.uri, self.log, self.start, self.cap, self.wait_s = uri, log, start, cap, wait_s
        self.positions: Positions | None = _retrying(self._open, wait_s)

    def _open(self) -> Positions | None:
        try:
            storage = open_storage(self.uri, self.log)
        except LogNotFound:
            return None
        if not fast_path(storage.metadata, self.start, self.cap):
            storage.close()
            return None
        return Positions(storage, self.log)

    def close(self) -> None:
        if self.positions is not None:
            self.positions.storage.close()
            self.positions = None

    def __enter__(self) -> _LogPlan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def count(self) -> int:
        """How many records lie in the range: a difference of sequence ids."""
        at = self.positions
        if at is not None:
            return max(0, at.users_before(self.cap) - at.users_before(self.start))
        return _retrying(self._count_reading, self.wait_s)

    def _count_reading(self) -> int:
        with open_namespace(self.uri) as namespace:
            if not namespace.log_exists(self.log):
                return 0
            with namespace.open_log(self.log) as manager:
                first = _sequence_at(manager, self.start)
                if first is None:
                    return 0
                after = _sequence_at(manager, self.cap)
                if after is None:  # cap is at or past the log's end
                    after = max(s.start_sequence_id + s.record_count for s in manager.segments())
                return max(0, after - first)

    def end_after(self, count: int) -> DLSN:
        """The offset just after the range's ``count``-th record."""
        at = self.positions
        if at is not None:
            last = at.dlsn_of(at.users_before(self.start) + count - 1)
        else:
            last = _retrying(lambda: self._nth_reading(count), self.wait_s)
        if last is None or last >= self.cap:
            raise LogReadException(
                f"log {self.log!r} in {self.uri} has fewer than {count} records from "
                f"{self.start} below {self.cap}, the number it had a moment ago: was it "
                "truncated while being read?"
            )
        return last.next()

    def bounds(self, count: int, parts: int) -> list[DLSN]:
        """``start``, the DLSNs of the records that begin partitions 2 to ``parts`` of the
        range's ``count`` records (as even as whole records allow), and ``cap``: ``parts``
        ranges that cover ``[start, cap)`` without a gap or an overlap, none empty. The whole
        range (one part) where a reader decides (:attr:`positions` is None)."""
        at = self.positions
        parts = min(parts, count)
        if at is None or parts <= 1:
            return [self.start, self.cap]
        first = at.users_before(self.start)
        inner = [at.dlsn_of(first + (index * count) // parts) for index in range(1, parts)]
        if any(dlsn is None or not self.start < dlsn < self.cap for dlsn in inner):
            raise LogReadException(
                f"log {self.log!r} in {self.uri} has fewer than {count} records in "
                f"[{self.start}, {self.cap}), the number it had a moment ago: was it truncated "
                "while being read?"
            )
        return [self.start, *(d for d in inner if d is not None), self.cap]

    def _nth_reading(self, count: int) -> DLSN | None:
        with (
            open_namespace(self.uri) as namespace,
            namespace.open_log(self.log) as manager,
            manager.open_reader(self.start) as reader,
        ):
            records = reader.read_bulk(count)
        return records[-1].dlsn if len(records) == count else None


def share_round_robin(available: Mapping[str, int], budget: int) -> dict[str, int]:
    """How many of ``budget`` records each log gets when the logs take one record each in
    turn (in the mapping's order) until the budget or the logs run out."""
    taken = dict.fromkeys(available, 0)
    active = [log for log in available if available[log] > 0]
    remaining = budget
    while remaining > 0 and active:
        share = remaining // len(active)
        if share == 0:  # a last, partial round: one more for the first logs in turn
            for log in active[:remaining]:
                taken[log] += 1
            break
        for log in active:
            give = min(share, available[log] - taken[log])
            taken[log] += give
            remaining -= give
        active = [log for log in active if taken[log] < available[log]]
    return taken


def plan_batch_end(
    settings: SourceOptions, start: Offsets, cap: Offsets, max_rows: int | None
) -> Offsets:
    """The end offset of the batch that starts at ``start``: up to ``cap``, at most
    ``max_rows`` records over all logs (None: no limit), shared out round-robin in log-name
    order (:func:`share_round_robin`), so the same log contents always give the same
    batches. Without a limit this reads only metadata; with one, it counts each log's
    records by sequence ids and finds where a batch ends inside a log by a binary search
    over its entries (:class:`Positions`; readers where a truncated segment is in range)."""
    logs = sorted(settings.logs)
    begin = {log: start.get(log, DLSN.INITIAL) for log in logs}
    if max_rows is None:
        return {log: max(begin[log], cap[log]) for log in logs}
    with contextlib.ExitStack() as stack:
        plans = {
            log: stack.enter_context(
                _LogPlan(settings.uri, log, begin[log], cap[log], settings.lock_wait_s)
            )
            for log in logs
            if cap[log] > begin[log]
        }
        available = {log: plans[log].count() if log in plans else 0 for log in logs}
        taken = share_round_robin(available, max_rows)
        end: Offsets = {}
        for log in logs:
            if taken[log] == 0:
                end[log] = begin[log]
            elif taken[log] == available[log]:
                end[log] = cap[log]
            else:
                end[log] = plans[log].end_after(taken[log])
    return end


def _pyarrow() -> Any:
    return importlib.import_module("pyarrow")


def read_range(
    uri: str, log: str, start: DLSN, end: DLSN, *, lock_wait_s: float = _DEFAULT_LOCK_WAIT_S
) -> Iterator[tuple[str, int, str, int, bytes]]:
    """The rows of ``log`` with ``start <= dlsn < end``, as ``(log, txid, dlsn, sequence_id,
    payload)`` tuples; the log is released when the iterator is exhausted or closed.

    Raises :class:`LogReadException` when the log ends before ``end`` (the range is no longer
    readable as it was planned), rather than returning fewer rows.
    """
    if end <= start:
        return
    namespace, reader, first = _retrying(lambda: _positioned(uri, log, start), lock_wait_s)
    try:
        last: DLSN | None = None
        beyond = False
        pack, encode = _DLSN_V1.pack, base64.b64encode
        record = first
        try:
            while record is not None:
                dlsn = record.dlsn
                if dlsn >= end:
                    beyond = True
                    break
                last = dlsn
                text = encode(pack(1, dlsn.segment, dlsn.entry, dlsn.slot)).decode("ascii")
                yield (log, record.txid, text, record.sequence_id, record.payload)
                record = reader.read_next()
        except EndOfStream:
            pass
        _check_reached(uri, log, start, end, last, beyond)
    finally:
        reader.close()
        namespace.close()


def _check_reached(
    uri: str, log: str, start: DLSN, end: DLSN, last: DLSN | None, beyond: bool
) -> None:
    reached = end if beyond else (start if last is None else last.next())
    if reached < end:
        raise LogReadException(
            f"log {log!r} in {uri} ends at {reached} but the planned range runs to "
            f"{end}: records below the range's end are gone (truncated or never "
            "committed), so the range cannot be replayed"
        )


def read_arrow(
    uri: str,
    log: str,
    start: DLSN,
    end: DLSN,
    *,
    lock_wait_s: float = _DEFAULT_LOCK_WAIT_S,
    shared: bool = False,
) -> Iterator[Any]:
    """The rows of :func:`read_range` as Arrow record batches of about
    :data:`ARROW_BATCH_ROWS` rows, decoded in bulk from the log's storage (through a reader
    where a truncated segment decides where reading starts); the same rows, the same
    errors. ``shared``: other processes read other ranges of the log at the same time (a
    split partition), so the log is let go of every :data:`RELEASE_RECORDS` records and
    taken again (waiting up to ``lock_wait_s``), instead of held to the end."""
    if end <= start:
        return
    try:
        storage = _retrying(lambda: open_storage(uri, log), lock_wait_s)
    except LogNotFound:
        storage = None
    if storage is None or not fast_path(storage.metadata, start, end):
        if storage is not None:
            storage.close()
        yield from _arrow_batches(read_range(uri, log, start, end, lock_wait_s=lock_wait_s))
        return

    def reopen() -> LogStorage:
        again = _retrying(lambda: open_storage(uri, log), lock_wait_s)
        if not fast_path(again.metadata, start, end):
            again.close()
            raise LogReadException(
                f"log {log!r} in {uri} was truncated inside [{start}, {end}) while the range "
                "was read; the range cannot be replayed"
            )
        return again

    scan = Scan(storage, log, start, end, reopen=reopen if shared else None)
    try:
        yield from scan.batches(ARROW_BATCH_ROWS)
        _check_reached(uri, log, start, end, scan.last, scan.beyond)
    finally:
        scan.close()


def _positioned(uri: str, log: str, start: DLSN) -> tuple[Namespace, LogReader, Any]:
    """A reader of ``log`` at ``start`` with its first record read, so that the log's
    database is open (held by the reader until it closes): a log held by another process
    fails here, inside the caller's retry, and not half-way through the rows."""
    namespace = open_namespace(uri)
    reader: LogReader | None = None
    try:
        if not namespace.log_exists(log):
            raise LogReadException(f"log {log!r} does not exist in {uri}; nothing can be read")
        reader = namespace.open_log(log).open_reader(start)
        try:
            first = reader.read_next()
        except EndOfStream:
            first = None
    except BaseException:
        if reader is not None:
            reader.close()
        namespace.close()
        raise
    return namespace, reader, first


def _arrow_batches(
    rows: Iterator[tuple[str, int, str, int, bytes]],
) -> Iterator[Any]:
    pa = _pyarrow()
    schema = arrow_schema(pa)
    chunk: list[tuple[str, int, str, int, bytes]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= ARROW_BATCH_ROWS:
            yield _batch(pa, schema, chunk)
            chunk = []
    if chunk:
        yield _batch(pa, schema, chunk)


def _batch(pa: Any, schema: Any, rows: Sequence[tuple[Any, ...]]) -> Any:
    columns = zip(*rows, strict=True)
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class DLogPartition(InputPartition):
    """One log's range ``[start, end)`` of one batch (both DLSNs in JSON form); ``shared``
    when other partitions of the batch read other ranges of the same log."""

    def __init__(
        self, log: str, start: dict[str, int], end: dict[str, int], shared: bool = False
    ) -> None:
        super().__init__(log)
        self.log = log
        self.start = start
        self.end = end
        self.shared = shared
        self.batch: int | None = None
        """The micro-batch's number in its query run, where a reader tags it."""

    def _key(self) -> tuple[str, str, str, bool]:
        return (self.log, json.dumps(self.start), json.dumps(self.end), self.shared)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DLogPartition) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def split_counts(available: Mapping[str, int], min_partitions: int, least: int) -> dict[str, int]:
    """How many partitions each log with records is read in: one each; while there are
    fewer than ``min_partitions``, one more for the log with the most records per partition
    (the first in the mapping's order among equals), as long as each of its partitions
    keeps at least ``least`` records. A pure function of its arguments."""
    parts = {log: 1 for log, count in available.items() if count > 0}
    while sum(parts.values()) < min_partitions:
        splittable = [log for log in parts if available[log] // (parts[log] + 1) >= least]
        if not splittable:
            break
        widest = max(splittable, key=lambda log: available[log] / parts[log])
        parts[widest] += 1
    return parts


def _partitions(settings: SourceOptions, start: Offsets, end: Offsets) -> list[DLogPartition]:
    ranges: dict[str, tuple[DLSN, DLSN]] = {}
    for log in sorted(settings.logs):
        begin = start.get(log, DLSN.INITIAL)
        stop = end.get(log, begin)
        if stop < begin:
            raise ConfigError(
                f"the end offset of log {log!r} ({stop}) is before its start ({begin}); "
                "offsets of a source never go backwards (was the checkpoint taken from another "
                "namespace?)"
            )
        if stop > begin:
            ranges[log] = (begin, stop)
    if len(ranges) >= settings.min_partitions:
        return [DLogPartition(log, b.to_json(), e.to_json()) for log, (b, e) in ranges.items()]
    parts: list[DLogPartition] = []
    with contextlib.ExitStack() as stack:
        plans = {
            log: stack.enter_context(_LogPlan(settings.uri, log, b, e, settings.lock_wait_s))
            for log, (b, e) in ranges.items()
        }
        # a range a reader must decide (a truncated segment in it) is read whole
        counts = {log: plan.count() if plan.positions else 1 for log, plan in plans.items()}
        pieces = split_counts(counts, settings.min_partitions, settings.split_least)
        for log, plan in plans.items():
            bounds = plan.bounds(counts[log], pieces[log])
            parts.extend(
                DLogPartition(log, b.to_json(), e.to_json(), shared=len(bounds) > 2)
                for b, e in itertools.pairwise(bounds)
            )
    return parts


def _read_partition(settings: SourceOptions, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, DLogPartition):
        raise ConfigError(f"the dlog source cannot read partition {partition!r}")
    return read_arrow(
        settings.uri,
        partition.log,
        DLSN.from_json(partition.start),
        DLSN.from_json(partition.end),
        lock_wait_s=settings.lock_wait_s,
        shared=partition.shared,
    )


class DLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader: offsets are DLSNs per log (see the module docstring)."""

    def __init__(self, settings: SourceOptions) -> None:
        self.settings = settings
        self._target: Offsets | None = None
        self._seen: Offsets | None = None

    def initialOffset(self) -> dict[str, Any]:
        return encode_offsets(dict.fromkeys(self.settings.logs, DLSN.INITIAL))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.settings.max_records is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.settings.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def _latest(self) -> Offsets:
        return latest_offsets(
            self.settings.uri, self.settings.logs, lock_wait_s=self.settings.lock_wait_s
        )

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = decode_offsets(start, what="start offset")
        cap = self._seen = self._target if self._target is not None else self._latest()
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = plan_batch_end(self.settings, begin, cap, max_rows)
        if all(end[log] == begin.get(log, DLSN.INITIAL) for log in end) and set(begin) >= set(end):
            return start  # no new data: hand back the very same offset
        return encode_offsets(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The newest offsets the last :meth:`latestOffset` planned against (under
        ``Trigger.AvailableNow``, its target), as Spark's Kafka source reports them: Spark
        asks right after planning, for its progress metrics only, and looking again would
        open every log once more per batch."""
        return encode_offsets(self._seen if self._seen is not None else self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return _partitions(
            self.settings,
            decode_offsets(start, what="start offset"),
            decode_offsets(end, what="end offset"),
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.settings, partition)

    def commit(self, end: dict[str, Any]) -> None:
        decode_offsets(end, what="committed offset")


class DLogBatchReader(DataSourceReader):
    """The batch reader: every log from ``startingOffsets`` to ``endingOffsets``."""

    def __init__(self, settings: SourceOptions) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        settings = self.settings
        start = settings.starting or {}
        end = settings.ending
        if end is None:
            end = latest_offsets(settings.uri, settings.logs, lock_wait_s=settings.lock_wait_s)
        end = {log: end.get(log, start.get(log, DLSN.INITIAL)) for log in settings.logs}
        return _partitions(settings, start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.settings, partition)


class DLogDataSource(DataSource):
    """The reference log's data source, short name ``dlog``; options in the module docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _settings(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def schema(self) -> str:
        self._settings()  # bad options fail at load(), on the driver
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return DLogBatchReader(self._settings())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DLogStreamReader(self._settings())


def register_dlog(spark: SparkSession) -> str:
    """Register :class:`DLogDataSource` with ``spark``; returns its short name, ``"dlog"``."""
    spark.dataSource.register(DLogDataSource)
    return SOURCE_NAME
