"""Spark Structured Streaming under the harness: the dlog data source, its contract checks, and
four query variants under drawn crash schedules (raised failures and real SIGKILLs).

Every variant gets its expected verdict exactly: the Parquet sink, the idempotent
``foreachBatch`` and the stateful count are exactly-once; the ``foreachBatch`` that appends
without the batch id is at-least-once, and shows exactly one duplicate per row of every batch
that crashed after its write (and none otherwise).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # in CI a missing pyspark must fail, not skip
    pytest.importorskip("pyspark")

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from harness.check import AnomalyKind, Guarantee, Status, Verdict, check
from harness.errors import (
    ConfigError,
    EndOfStream,
    HarnessError,
    LogReadException,
    StoreLocked,
)
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    ProduceRecords,
    RunBatches,
    StreamSchedule,
)
from harness.history import dumps_jsonl
from harness.history.events import EventKind
from harness.log import DLSN, LogConfig, LogRecord, leveldb_uri, open_namespace
from harness.spark.streaming import StreamResult, Variant, _bulk, run_stream
from harness.spark.streaming.contract import CONTRACT_CHECKS, ContractFailure, run_contract
from harness.spark.streaming.datasource import (
    SCHEMA_DDL,
    DLogDataSource,
    DLogPartition,
    DLogStreamReader,
    SourceOptions,
    _arrow_batches,
    _LogPlan,
    decode_offsets,
    encode_offsets,
    latest_offsets,
    read_arrow,
    read_range,
    register_dlog,
    split_counts,
)
from harness.strategies import stream_schedules

PARALLEL_RUNS = 3
"""Runs in flight at once: queries share the JVM, and much of a run is waiting."""


@pytest.fixture(scope="module")
def spark(harness_spark: SparkSession) -> SparkSession:
    register_dlog(harness_spark)
    return harness_spark


def write_records(uri: str, log: str, first: int, count: int) -> None:
    with open_namespace(uri) as ns, ns.open_log(log) as manager, manager.open_writer() as writer:
        for n in range(first, first + count):
            payload = {"id": f"r{n}", "key": f"k{n % 3}", "value": 1}
            writer.write(LogRecord(n, json.dumps(payload).encode()))
        writer.commit()


# -- the data source ---------------------------------------------------------------------------


def test_offsets_are_dlsns_in_json_form_sorted_by_log() -> None:
    offsets = {"b": DLSN(2, 0, 1), "a": DLSN.INITIAL}
    encoded = encode_offsets(offsets)
    assert list(encoded) == ["a", "b"]
    assert encoded == {
        "a": {"segment": 1, "entry": 0, "slot": 0},
        "b": {"segment": 2, "entry": 0, "slot": 1},
    }
    assert decode_offsets(json.loads(json.dumps(encoded))) == offsets
    with pytest.raises(ConfigError, match="the DLSN of log 'a' is malformed"):
        decode_offsets({"a": {"segment": 1}})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"logs": "a"}, "needs option 'uri'"),
        ({"uri": "distributedlog-memory://x", "logs": "a"}, "must be a distributedlog-leveldb"),
        ({"uri": "distributedlog-leveldb:///tmp/x"}, "needs option 'logs'"),
        ({"uri": "distributedlog-leveldb:///tmp/x", "logs": "a,a"}, "names a log twice"),
        (
            {"uri": "distributedlog-leveldb:///tmp/x", "logs": "a", "maxRecordsPerBatch": "0"},
            "'maxRecordsPerBatch' must be an integer >= 1, got '0'",
        ),
        ({"uri": "distributedlog-leveldb:///tmp/x", "logs": "a", "nope": "1"}, r"\['nope'\]"),
    ],
)
def test_bad_options_are_refused_with_the_fix(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SourceOptions.parse(options)


def test_stream_reader_plans_batches_and_replays_ranges(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 5)
    write_records(uri, "b", 5, 2)
    write_records(uri, "a", 7, 1)  # a second writer writes into a new segment
    options = SourceOptions.parse({"uri": uri, "logs": "b,a", "maxRecordsPerBatch": "3"})
    reader = DLogStreamReader(options)
    start = reader.initialOffset()
    assert start == encode_offsets({"a": DLSN.INITIAL, "b": DLSN.INITIAL})
    limit = reader.getDefaultReadLimit()
    # three records per batch, shared out round-robin over the logs in name order
    first = reader.latestOffset(start, limit)
    assert first == encode_offsets({"a": DLSN(1, 0, 2), "b": DLSN(1, 0, 1)})
    second = reader.latestOffset(first, limit)
    assert second == encode_offsets({"a": DLSN(1, 0, 4), "b": DLSN(1, 0, 2)})
    third = reader.latestOffset(second, limit)
    assert third == encode_offsets({"a": DLSN(2, 0, 1), "b": DLSN(1, 0, 2)})
    assert reader.latestOffset(third, limit) is third  # no new data: the very same offset
    assert reader.partitions(third, third) == []
    parts = reader.partitions(first, second)
    assert [(p.log, p.start, p.end) for p in parts if isinstance(p, DLogPartition)] == [
        ("a", DLSN(1, 0, 2).to_json(), DLSN(1, 0, 4).to_json()),
        ("b", DLSN(1, 0, 1).to_json(), DLSN(1, 0, 2).to_json()),
    ]

    def ids(begin: dict[str, Any], end: dict[str, Any]) -> list[str]:
        batches = [b for p in reader.partitions(begin, end) for b in reader.read(p)]
        return [json.loads(row["payload"])["id"] for b in batches for row in b.to_pylist()]

    assert ids(start, first) == ["r0", "r1", "r5"]
    assert ids(first, second) == ["r2", "r3", "r6"]
    assert ids(second, third) == ["r4", "r7"]
    assert ids(start, third) == ["r0", "r1", "r2", "r3", "r4", "r7", "r5", "r6"]
    assert latest_offsets(uri, ["a", "b"]) == decode_offsets(third)


_LOG_OPS = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from(["commit", "flush", "new-writer"])),
    min_size=1,
    max_size=8,
)


def _build_log(uri: str, ops: list[tuple[int, str]], sealed: bool, truncate_at: int) -> None:
    """A log of small segments, entries of many sizes, control records (empty commits),
    maybe truncated (below a record), maybe sealed with an end-of-stream marker."""
    config = LogConfig(segment_max_records=4, output_buffer_size=150)
    number = 0
    with open_namespace(uri, config=config) as namespace, namespace.open_log("a") as manager:
        writer = manager.open_writer()
        for count, how in ops:
            for _ in range(count):
                writer.write(LogRecord(number, f"payload-{number}".encode() * (number % 4)))
                number += 1
            if how == "flush":
                writer.flush()
            writer.commit()
            if how == "new-writer":
                writer.close()
                writer = manager.open_writer()
        dlsns = [r.dlsn for r in _committed_records(manager)]
        if truncate_at and dlsns:
            writer.truncate(dlsns[min(truncate_at, len(dlsns) - 1)])
        if sealed:
            writer.mark_end_of_stream()
        writer.close()


def _committed_records(manager: Any) -> list[Any]:
    records = []
    with manager.open_reader(DLSN.INITIAL) as reader, contextlib.suppress(EndOfStream):
        while (record := reader.read_next()) is not None:
            records.append(record)
    return records


def _outcome(read: Any) -> Any:
    try:
        return [row for batch in read() for row in batch.to_pylist()]
    except HarnessError as exc:
        return type(exc)


def _drawn_log(
    where: Path, ops: list[tuple[int, str]], sealed: bool, truncate_at: int
) -> tuple[str, list[Any], list[DLSN]]:
    """The log of :func:`_build_log` under ``where``: its URI, its committed records and the
    points to draw ranges from (every record's DLSN and the next, and one past the end,
    where a range is gone)."""
    uri = leveldb_uri(where / "ns")
    _build_log(uri, ops, sealed, truncate_at)
    with open_namespace(uri) as namespace, namespace.open_log("a") as manager:
        records = _committed_records(manager)
    points = sorted({DLSN.INITIAL, *(r.dlsn for r in records), *(r.dlsn.next() for r in records)})
    points.append(DLSN(points[-1].segment + 1, 0, 0))
    return uri, records, points


@settings(max_examples=40, deadline=None)
@given(ops=_LOG_OPS, sealed=st.booleans(), truncate_at=st.integers(0, 6), data=st.data())
def test_bulk_reads_give_exactly_the_reader_s_rows_and_errors(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[int, str]],
    sealed: bool,
    truncate_at: int,
    data: st.DataObject,
) -> None:
    uri, records, points = _drawn_log(tmp_path_factory.mktemp("bulk"), ops, sealed, truncate_at)
    start = data.draw(st.sampled_from(points), label="start")
    end = data.draw(st.sampled_from([p for p in points if p > start] or [start]), label="end")
    expected = _outcome(lambda: _arrow_batches(read_range(uri, "a", start, end)))
    assert _outcome(lambda: read_arrow(uri, "a", start, end)) == expected
    inside = [r for r in records if start <= r.dlsn < end]
    # planning: how many records the range holds, from sequence ids
    with _LogPlan(uri, "a", start, end, 1.0) as plan:
        assert plan.count() == len(inside)
    if inside:  # planning: the end of a batch of n records, from the storage in bulk
        count = data.draw(st.integers(1, len(inside)), label="count")
        with _LogPlan(uri, "a", start, end, 1.0) as plan:
            assert plan.end_after(count) == inside[count - 1].dlsn.next()


@settings(max_examples=40, deadline=None)
@given(
    ops=_LOG_OPS,
    sealed=st.booleans(),
    truncate_at=st.integers(0, 6),
    parts=st.integers(1, 5),
    data=st.data(),
)
def test_a_split_range_is_read_once_by_partitions_that_cover_it_exactly(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[int, str]],
    sealed: bool,
    truncate_at: int,
    parts: int,
    data: st.DataObject,
) -> None:
    uri, records, points = _drawn_log(tmp_path_factory.mktemp("split"), ops, sealed, truncate_at)
    start = data.draw(st.sampled_from(points[:-1]), label="start")
    end = data.draw(st.sampled_from([p for p in points if p > start]), label="end")
    inside = [r for r in records if start <= r.dlsn < end]
    with _LogPlan(uri, "a", start, end, 1.0) as plan:
        by_positions = plan.positions is not None
        bounds = plan.bounds(plan.count(), parts)
    # consecutive half-open ranges from start to end: no gap, no overlap
    assert bounds[0] == start and bounds[-1] == end
    assert all(a < b for a, b in itertools.pairwise(bounds))
    assert len(bounds) - 1 == (max(1, min(parts, len(inside))) if by_positions else 1)
    whole = _outcome(lambda: read_arrow(uri, "a", start, end))
    with pytest.MonkeyPatch.context() as patch:  # let go of the log after every window
        patch.setattr(_bulk, "RELEASE_RECORDS", 1)
        pieces = [
            _outcome(lambda a=a, b=b: read_arrow(uri, "a", a, b, shared=True))
            for a, b in itertools.pairwise(bounds)
        ]
    if len(pieces) == 1:
        assert pieces == [whole]
    elif not isinstance(whole, list):  # the range is gone: its last piece fails the same way
        assert pieces[-1] == whole and all(isinstance(piece, list) for piece in pieces[:-1])
    else:  # every record once, in order, in pieces as even as whole records allow
        assert [row for piece in pieces for row in piece] == whole
        assert [row["sequence_id"] for row in whole] == [r.sequence_id for r in inside]
        sizes = [len(piece) for piece in pieces]
        assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_partitions_split_a_log_while_there_are_fewer_than_the_minimum() -> None:
    assert split_counts({"a": 100, "b": 0}, 2, 10) == {"a": 2}
    assert split_counts({"a": 100, "b": 30}, 3, 10) == {"a": 2, "b": 1}
    assert split_counts({"a": 100, "b": 30}, 4, 10) == {"a": 3, "b": 1}
    assert split_counts({"a": 19, "b": 19}, 4, 10) == {"a": 1, "b": 1}  # 9 each: too few
    assert split_counts({"a": 40, "b": 40}, 3, 10) == {"a": 2, "b": 1}  # name order breaks ties
    assert split_counts({"a": 100, "b": 30}, 1, 10) == {"a": 1, "b": 1}


def test_the_stream_reader_splits_a_lone_log_into_shared_partitions(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 7)
    options = SourceOptions(uri=uri, logs=["a"], min_partitions=3, split_least=2)
    reader = DLogStreamReader(options)
    start, end = reader.initialOffset(), encode_offsets({"a": DLSN(1, 0, 7)})
    parts = [p for p in reader.partitions(start, end) if isinstance(p, DLogPartition)]
    assert [(p.start, p.end, p.shared) for p in parts] == [
        (DLSN(1, 0, 0).to_json(), DLSN(1, 0, 2).to_json(), True),
        (DLSN(1, 0, 2).to_json(), DLSN(1, 0, 4).to_json(), True),
        (DLSN(1, 0, 4).to_json(), DLSN(1, 0, 7).to_json(), True),
    ]
    rows = [row for p in parts for batch in reader.read(p) for row in batch.to_pylist()]
    assert [row["sequence_id"] for row in rows] == list(range(7))
    unsplit = DLogStreamReader(SourceOptions(uri=uri, logs=["a"], min_partitions=1))
    assert len(unsplit.partitions(start, end)) == 1


def test_processes_reading_pieces_of_one_log_at_once_each_get_exactly_their_rows(
    tmp_path: Path,
) -> None:
    """The pieces of a split log, read at the same moment by processes that take turns at
    it (each lets go of the log every RELEASE_RECORDS records): every process gets its
    piece's rows, none a seal or lock error (the seal's flock, harness/_leveldb.py)."""
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 60_000)
    options = SourceOptions(uri=uri, logs=["a"], min_partitions=3)
    reader = DLogStreamReader(options)
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    parts = [p for p in reader.partitions(reader.initialOffset(), end)]
    assert len(parts) == 3 and all(isinstance(p, DLogPartition) and p.shared for p in parts)
    script = (
        "import json, sys\n"
        "from harness.log.dlsn import DLSN\n"
        "from harness.spark.streaming.datasource import read_arrow\n"
        "uri, start, end = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])\n"
        "sys.stdin.readline()\n"  # all readers start reading together
        "ids = [i for b in read_arrow(uri, 'a', DLSN.from_json(start), DLSN.from_json(end), "
        "shared=True) for i in b.column('sequence_id').to_pylist()]\n"
        "print(json.dumps([len(ids), ids[0], ids[-1], ids == list(range(ids[0], ids[-1] + 1))]))"
    )
    for _ in range(2):
        readers = [
            subprocess.Popen(
                [sys.executable, "-c", script, uri, json.dumps(p.start), json.dumps(p.end)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for p in parts
            if isinstance(p, DLogPartition)
        ]
        for process in readers:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [r.communicate(timeout=120) for r in readers]
        assert all(r.returncode == 0 for r in readers), [err for _, err in outcomes]
        got = [json.loads(out) for out, _ in outcomes]
        assert [g[1:] for g in got] == [
            [0, 19_999, True],
            [20_000, 39_999, True],
            [40_000, 59_999, True],
        ]


def test_a_range_that_is_gone_fails_instead_of_reading_less(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 2)
    rows = list(read_range(uri, "a", DLSN.INITIAL, DLSN(1, 0, 2)))
    assert [row[3] for row in rows] == [0, 1]
    with pytest.raises(LogReadException, match="cannot be replayed"):
        list(read_range(uri, "a", DLSN.INITIAL, DLSN(1, 0, 5)))


def test_a_log_held_by_another_process_is_waited_for_then_refused(tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 2)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from harness.log import open_namespace\n"
            f"ns = open_namespace({uri!r}); w = ns.open_log('a').open_writer()\n"
            "print('held', flush=True); sys.stdin.readline(); w.close()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StoreLocked, match="open in another process"):
            list(read_range(uri, "a", DLSN.INITIAL, DLSN(1, 0, 2), lock_wait_s=0.05))
    finally:
        holder.communicate("\n", timeout=60)
    assert [row[3] for row in read_range(uri, "a", DLSN.INITIAL, DLSN(1, 0, 2))] == [0, 1]


@pytest.mark.slow
def test_batch_read_through_spark(spark: SparkSession, tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    write_records(uri, "a", 0, 3)
    write_records(uri, "b", 3, 2)
    frame = spark.read.format("dlog").option("uri", uri).option("logs", "a,b").load()
    assert frame.schema.simpleString() == (
        "struct<log:string,txid:bigint,dlsn:string,sequence_id:bigint,payload:binary>"
    )
    rows = sorted((r.log, r.sequence_id, r.txid, r.dlsn) for r in frame.collect())
    assert rows == [
        ("a", 0, 0, DLSN(1, 0, 0).serialize()),
        ("a", 1, 1, DLSN(1, 0, 1).serialize()),
        ("a", 2, 2, DLSN(1, 0, 2).serialize()),
        ("b", 0, 3, DLSN(1, 0, 0).serialize()),
        ("b", 1, 4, DLSN(1, 0, 1).serialize()),
    ]
    middle = json.dumps(encode_offsets({"a": DLSN(1, 0, 1), "b": DLSN(1, 0, 1)}))
    tail = spark.read.format("dlog").options(uri=uri, logs="a,b", startingOffsets=middle).load()
    assert sorted(r.txid for r in tail.collect()) == [1, 2, 4]


# -- the contract checks ------------------------------------------------------------------------


class _Adder:
    """add_data for the contract: three new records in each of two logs per call."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.written = 0

    def __call__(self) -> None:
        for log in ("a", "b"):
            write_records(self.uri, log, self.written, 3)
            self.written += 3


@pytest.mark.slow
def test_the_dlog_source_keeps_the_contract(spark: SparkSession, tmp_path: Path) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    options = {"uri": uri, "logs": "a,b", "maxRecordsPerBatch": "4"}
    run_contract(DLogDataSource, options, add_data=_Adder(uri), spark=spark, workdir=tmp_path)


_READS: collections.Counter[str] = collections.Counter()


class _ReversingReader(DLogStreamReader):
    """Every second read of a range gives its rows in reverse order."""

    def read(self, partition: InputPartition) -> Iterator[Any]:
        batches = list(super().read(partition))
        key = repr(partition)
        _READS[key] += 1
        if _READS[key] % 2 == 0:
            return iter([b.take(list(range(b.num_rows - 1, -1, -1))) for b in reversed(batches)])
        return iter(batches)


class _StuckReader(DLogStreamReader):
    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        return start


class _FromTheStartReader(DLogStreamReader):
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return super().partitions(encode_offsets(dict.fromkeys(end, DLSN.INITIAL)), end)


class _KeyOrderReader(DLogStreamReader):
    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        end = super().latestOffset(start, limit)
        return dict(reversed(list(end.items())))  # equal as a dict, not as Spark's JSON text


def _source(reader: type[DLogStreamReader], ddl: str = SCHEMA_DDL) -> type[DataSource]:
    def stream_reader(self: DLogDataSource, schema: Any) -> DataSourceStreamReader:
        return reader(self._settings())

    def declared(self: DLogDataSource) -> str:
        return ddl

    name = reader.__name__.strip("_").replace("Reader", "Source")
    return type(name, (DLogDataSource,), {"streamReader": stream_reader, "schema": declared})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "failed"),
    [
        (_source(_ReversingReader), ("read-replays",)),
        (
            _source(_StuckReader),
            (
                "offsets-advance",
                "partitions-picklable",
                "read-replays",
                "ranges-compose",
                "rows-match-schema",
            ),
        ),
        (_source(_FromTheStartReader), ("offsets-stable", "ranges-compose")),
        (_source(_KeyOrderReader), ("offsets-stable",)),
        (
            _source(DLogStreamReader, ddl=SCHEMA_DDL.replace("txid bigint", "txid string")),
            ("rows-match-schema",),
        ),
    ],
    ids=["not-a-replay", "offsets-stuck", "ranges-overlap", "offsets-unstable", "wrong-schema"],
)
def test_contract_checks_catch_broken_sources(
    spark: SparkSession, tmp_path: Path, source: type[DataSource], failed: tuple[str, ...]
) -> None:
    uri = leveldb_uri(tmp_path / "ns")
    direct = [c for c in CONTRACT_CHECKS if c.name != "commit-called"]
    with pytest.raises(ContractFailure) as raised:
        run_contract(
            source,
            {"uri": uri, "logs": "a,b"},
            add_data=_Adder(uri),
            spark=spark,
            workdir=tmp_path,
            checks=direct,
        )
    assert raised.value.checks == failed
    assert f"{source.__name__} fails {len(failed)} of {len(direct)} contract checks" in str(
        raised.value
    )


_LOCAL_ROWS: list[tuple[str, int]] = []


class _ProcessLocalReader(DataSourceStreamReader):
    """Rows kept in this process's memory: direct reads see them, Spark's processes do not."""

    def initialOffset(self) -> dict[str, Any]:
        return {"n": 0}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        return start if start["n"] == len(_LOCAL_ROWS) else {"n": len(_LOCAL_ROWS)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [] if start == end else [InputPartition((start["n"], end["n"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, int]]:
        first, last = partition.value
        return iter(_LOCAL_ROWS[first:last])


class ProcessLocalSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "process-local"

    def schema(self) -> str:
        return "id string, n bigint"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _ProcessLocalReader()


@pytest.mark.slow
def test_the_engine_check_catches_a_source_that_only_works_in_one_process(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark import cloudpickle

    def add() -> None:
        _LOCAL_ROWS.extend((f"r{len(_LOCAL_ROWS)}", len(_LOCAL_ROWS)) for _ in range(3))

    # In this process every direct check passes ...
    direct = [c for c in CONTRACT_CHECKS if c.name != "commit-called"]
    run_contract(ProcessLocalSource, {}, add_data=add, spark=spark, workdir=tmp_path, checks=direct)
    # ... but in a real query the rows are not where Spark's processes look for them.
    engine = [c for c in CONTRACT_CHECKS if c.name == "commit-called"]
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)  # so Spark's processes can load the class
    try:
        with pytest.raises(ContractFailure) as raised:
            run_contract(
                ProcessLocalSource, {}, add_data=add, spark=spark, workdir=tmp_path, checks=engine
            )
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert raised.value.checks == ("commit-called",)
    assert "ran 1 batch(es); the check needs two" in str(raised.value)


# -- the query variants under crash schedules ----------------------------------------------------


def run_all(
    spark: SparkSession,
    factory: pytest.TempPathFactory,
    jobs: Sequence[tuple[Variant, StreamSchedule]],
    record_property: Callable[[str, object], None],
    parallel: int = PARALLEL_RUNS,
) -> list[StreamResult]:
    """Run the jobs, ``parallel`` at a time, each in a fresh directory; the query starts
    made again because a Python worker missed its deadline go to the test's properties
    (``--junitxml``)."""
    workdirs = [factory.mktemp(variant.value) for variant, _ in jobs]

    def one(job: tuple[tuple[Variant, StreamSchedule], Path]) -> StreamResult:
        (variant, schedule), workdir = job
        return run_stream(variant, schedule, workdir=workdir, spark=spark)

    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(one, zip(jobs, workdirs, strict=True)))
    record_property("restarts", sum(len(r.restarts) for r in results))
    return results


def kinds(verdict: Verdict) -> set[AnomalyKind]:
    return {anomaly.kind for anomaly in verdict.anomalies}


def assert_expected_verdict(result: StreamResult) -> None:
    """The variant's verdict, exactly; the schedule is in the message when it is not."""
    history = result.history
    where = f"{result.variant.value} under {result.schedule.dumps()}"
    assert history.events[-1].detail == "complete", where
    at_least_once = check(history, Guarantee.AT_LEAST_ONCE)
    exactly_once = check(history, Guarantee.EXACTLY_ONCE)
    assert at_least_once.status is Status.VALID, (where, at_least_once)
    acknowledged = sum(e.kind is EventKind.ACK for e in history.events)
    assert exactly_once.stats["acknowledged"] == acknowledged
    if result.variant is Variant.FOREACH_BATCH_APPEND and result.replayed_rows:
        assert exactly_once.status is Status.INVALID, (where, exactly_once)
        assert kinds(exactly_once) == {AnomalyKind.DUPLICATE}, (where, exactly_once)
        assert exactly_once.stats["duplicates"] == result.replayed_rows, (where, exactly_once)
    else:
        assert exactly_once.status is Status.VALID, (where, exactly_once)


DRAWN = 10


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(Variant), ids=lambda v: v.value)
@settings(
    max_examples=1,
    phases=[Phase.generate],  # a Spark run is too slow to shrink; the failure names its schedule
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    schedules=st.lists(
        stream_schedules(max_steps=3),
        min_size=DRAWN,
        max_size=DRAWN,
        unique_by=lambda s: s.dumps(),
    )
)
def test_variant_keeps_its_guarantee_under_drawn_crash_schedules(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, object], None],
    variant: Variant,
    schedules: list[StreamSchedule],
) -> None:
    jobs = [(variant, s) for s in schedules]
    results = run_all(spark, tmp_path_factory, jobs, record_property)
    assert len(results) == DRAWN
    for result in results:
        assert_expected_verdict(result)
    # every drawn schedule produces, then crashes a query: that crash always fires
    assert all(result.crashes for result in results)
    if variant is Variant.FOREACH_BATCH_APPEND:
        # the schedule space reaches the duplicate window: some drawn crash lands in it
        assert any(result.replayed_rows for result in results)


_KILL_BEFORE = CrashQuery(1, CrashPoint.BEFORE_WRITE, CrashHow.SIGKILL)
_KILL_AFTER = CrashQuery(1, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL)
SIGKILL_SCHEDULES = {
    Variant.PARQUET: (ProduceRecords(6, 0), ProduceRecords(4, 1), _KILL_BEFORE, ProduceRecords(2)),
    Variant.FOREACH_BATCH_APPEND: (ProduceRecords(6, 0), ProduceRecords(3, 1), _KILL_AFTER),
    Variant.FOREACH_BATCH_IDEMPOTENT: (ProduceRecords(9, 1), RunBatches(1), _KILL_AFTER),
    Variant.STATEFUL_COUNT: (
        ProduceRecords(7, 0),
        ProduceRecords(5, 1),
        _KILL_AFTER,
        CrashQuery(0, CrashPoint.AFTER_WRITE),  # the replayed batch crashes again, in-process
    ),
}
"""One real SIGKILL per variant: before or after the batch's write."""


@pytest.mark.slow
def test_every_variant_survives_a_sigkill_of_its_driver(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, object], None],
) -> None:
    jobs = [(v, StreamSchedule(steps=steps)) for v, steps in SIGKILL_SCHEDULES.items()]
    results = run_all(spark, tmp_path_factory, jobs, record_property, parallel=len(jobs))
    for result in results:
        killed = [c for c in result.crashes if c.how is CrashHow.SIGKILL]
        assert len(killed) == 1, (result.variant, result.crashes)
        assert_expected_verdict(result)
    append = next(r for r in results if r.variant is Variant.FOREACH_BATCH_APPEND)
    assert append.replayed_rows == 4  # batch 1 of four records was written, then SIGKILLed


@pytest.mark.slow
def test_same_schedule_same_history(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    record_property: Callable[[str, object], None],
) -> None:
    schedule = StreamSchedule(
        steps=(
            ProduceRecords(5, 0),
            ProduceRecords(3, 1),
            CrashQuery(1, CrashPoint.AFTER_WRITE),
            RunBatches(1),
            ProduceRecords(2, 1),
        )
    )
    jobs = [(Variant.FOREACH_BATCH_APPEND, schedule)] * 2
    first, second = run_all(spark, tmp_path_factory, jobs, record_property, parallel=2)
    assert dumps_jsonl(first.history) == dumps_jsonl(second.history)
    kinds_ = [e.kind.value for e in first.history.events]
    assert kinds_ == [
        *["append"] * 5, *["ack"] * 5, *["append"] * 3, *["ack"] * 3,
        "start", "crash",  # batch 1 (of 2) wrote four records, then failed
        "start",  # replays batch 1, then stops: one batch
        *["append"] * 2, *["ack"] * 2,
        "drain", "start", *["observe"] * 14, "end",
    ]  # fmt: skip
    assert first.replayed_rows == 4


def test_the_built_in_variants_are_searched_through_the_engine_s_door(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A catalogue variant through the spark-job door (``variant:NAME``): the engine's
    search, the door's JSON, a replay file ``replay FILE`` runs again to the same verdict."""
    from harness.cli import main
    from harness.spark.streaming.variantsearch import explore_variant

    door = [*("spark-job", "variant:foreach-batch-append", "--guarantee", "exactly-once")]
    door += [*("--max-examples", "2", "--no-sigkill", "--workdir", str(tmp_path / "append"))]
    assert main([*door, "--failures-dir", str(tmp_path / "failures"), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "invalid" and printed["examples"] == 1
    assert printed["coverage"]["fired"] == {"after-write/raise": 1}
    (problem,) = printed["problems"]
    assert {a["kind"] for a in problem["verdict"]["anomalies"]} == {"duplicate"}
    assert main(["replay", problem["replay_file"], "--json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["verdict"] == problem["verdict"]  # same schedule, same history
    assert replayed["schedule"] == problem["schedule"]
    held = explore_variant(  # the variant's own claim: exactly-once
        Variant.FOREACH_BATCH_IDEMPOTENT,
        workdir=tmp_path / "idempotent",
        max_examples=2,
        sigkill=False,
        spark=spark,
    )
    assert held.examples == 2 and held.guarantee is Guarantee.EXACTLY_ONCE
    assert held.coverage.fired["after-write/raise"] == 2


# -- schedules as data ---------------------------------------------------------------------------


def test_stream_schedules_round_trip_through_json() -> None:
    schedule = StreamSchedule(
        steps=(
            ProduceRecords(5, 1),
            RunBatches(2),
            CrashQuery(1, CrashPoint.BEFORE_WRITE, CrashHow.SIGKILL),
        )
    )
    text = schedule.dumps()
    assert text == (
        '{"version":1,"drain":true,"steps":[{"op":"produce","count":5,"log":1},'
        '{"op":"run","batches":2},'
        '{"op":"crash","batch":1,"point":"before-write","how":"sigkill"}]}'
    )
    assert StreamSchedule.from_json(text) == schedule
    assert schedule.kills == 1
    with pytest.raises(ConfigError, match="field 'point' must be one of before-write, after-write"):
        StreamSchedule.from_json('{"steps":[{"op":"crash","point":"later"}]}')
    with pytest.raises(ConfigError, match=r"field 'batches' must be an integer in \[1, 10000\]"):
        StreamSchedule(steps=(RunBatches(0),))


# -- every failure of Spark is a verdict -------------------------------------------------------

_START_FAILURE = (
    "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Python worker "
    "failed to connect back. SQLSTATE: XXKST"
)


def error_events(result: StreamResult) -> list[str]:
    return [str(e.detail) for e in result.history.events if e.kind is EventKind.ERROR]


def assert_unknown(result: StreamResult, reason: str) -> None:
    """The run ends incomplete with ``reason`` and every checker says UNKNOWN."""
    end = result.history.events[-1]
    assert end.kind is EventKind.END
    assert end.detail is not None and end.detail.startswith(f"incomplete: {reason}"), end.detail
    assert "\n" not in end.detail
    for guarantee in Guarantee:
        assert check(result.history, guarantee).status is Status.UNKNOWN


@pytest.mark.slow
@pytest.mark.parametrize("failures", [1, 3])
def test_a_query_whose_python_worker_missed_its_start_deadline_starts_again(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
) -> None:
    from harness.spark.streaming import _driver

    real = _driver.run_in_process
    calls: list[int] = []

    def flaky(session: Any, spec: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:  # the query died initializing its source: nothing happened
            return {"fired": False, "batch": None, "rows": None, "error": _START_FAILURE}
        return real(session, spec, **kwargs)

    monkeypatch.setattr(_driver, "run_in_process", flaky)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0),))  # only the drain runs a query
    result = run_stream(Variant.PARQUET, schedule, workdir=tmp_path, spark=spark)
    kinds_ = [e.kind.value for e in result.history.events]
    assert kinds_.count("start") == 1
    if failures < 3:
        assert len(calls) == failures + 1
        assert result.restarts == (_START_FAILURE,) * failures
        assert result.history.events[-1].detail == "complete"
        assert check(result.history, Guarantee.EXACTLY_ONCE).status is Status.VALID
    else:  # every attempt failed: the run says so, and is not checked as complete
        assert len(calls) == 3
        assert result.restarts == (_START_FAILURE,) * 2
        assert_unknown(result, "the drain's query failed: [STREAM_FAILED]")
        assert error_events(result) == [_START_FAILURE]


def test_a_query_that_got_somewhere_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's query that failed after it logged a batch is a different run when started
    again: the failure is recorded, not hidden by a restart."""
    from harness.spark.streaming import _driver

    calls: list[int] = []

    def logs_a_batch_then_fails(session: Any, spec: Any, **kwargs: Any) -> Any:
        calls.append(1)
        offsets = Path(spec.checkpoint) / "offsets"
        offsets.mkdir(parents=True, exist_ok=True)
        (offsets / str(len(calls) - 1)).write_text("v1\n{}\n{}\n", encoding="utf-8")
        return {"fired": False, "batch": None, "rows": None, "error": _START_FAILURE}

    monkeypatch.setattr(_driver, "run_in_process", logs_a_batch_then_fails)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0), RunBatches(1)), drain=False)
    result = run_stream(Variant.PARQUET, schedule, workdir=tmp_path, spark=object())  # type: ignore[arg-type]
    assert len(calls) == 1 and result.restarts == ()
    assert error_events(result) == [_START_FAILURE]


@pytest.mark.slow
def test_a_sink_without_files_after_a_failed_drain_is_unknown(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain's query dies before it writes (its sink has a metadata log and no file):
    reading the sink fails in Spark too, and the run says so instead of raising."""
    from harness.spark.streaming import _driver

    def dies_before_writing(session: Any, spec: Any, **kwargs: Any) -> Any:
        (Path(spec.sink) / "_spark_metadata").mkdir(parents=True)
        return {"fired": False, "batch": None, "rows": None, "error": "Py4JError: gone"}

    monkeypatch.setattr(_driver, "run_in_process", dies_before_writing)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0),))
    result = run_stream(Variant.PARQUET, schedule, workdir=tmp_path, spark=spark)
    assert_unknown(result, "the drain's query failed: Py4JError: gone")
    drain_error, sink_error = error_events(result)
    assert drain_error == "Py4JError: gone"
    assert sink_error.startswith("AnalysisException: [UNABLE_TO_INFER_SCHEMA]"), sink_error
    assert not any(e.kind is EventKind.OBSERVE for e in result.history.events)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["at-load", "in-the-source-runner"])
def test_a_source_that_fails_to_open_is_unknown(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The drain's source cannot open its namespace: refused when the query is defined
    (Spark's planner raises from ``load()``) or once it runs (the source runner fails)."""
    import dataclasses

    from harness.spark.streaming import runner

    if where == "at-load":
        broken = "distributedlog-memory://nowhere"  # refused by the source's options
    else:
        (tmp_path / "a-file").write_text("not a namespace", encoding="utf-8")
        broken = leveldb_uri(tmp_path / "a-file")
    real = runner._Runner._spec

    def elsewhere(self: Any, **gate: Any) -> Any:
        return dataclasses.replace(real(self, **gate), uri=broken)

    monkeypatch.setattr(runner._Runner, "_spec", elsewhere)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0),))
    result = run_stream(Variant.FOREACH_BATCH_APPEND, schedule, workdir=tmp_path / "w", spark=spark)
    assert_unknown(result, "the drain's query failed: ")
    (error,) = error_events(result)
    assert error in result.history.events[-1].detail
    if where == "at-load":
        assert error.startswith("AnalysisException: "), error
        assert "distributedlog-memory://nowhere" in error
    else:
        assert error.startswith("[STREAM_FAILED]"), error


def test_a_child_driver_that_dies_without_reporting_is_an_error_of_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.spark.streaming import runner

    def dies(self: Any, spec: Any, number: int, log_path: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])

    monkeypatch.setattr(runner._Runner, "_launch", dies)
    kill = CrashQuery(0, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0), kill), drain=False)
    result = run_stream(Variant.FOREACH_BATCH_APPEND, schedule, workdir=tmp_path)
    assert result.crashes == ()
    (error,) = error_events(result)
    assert error.startswith("the child driver (pid "), error
    assert "exited with status 3 without reporting" in error


_KILL_THE_JVM_MID_DRAIN = """
import json, os, signal, sys
from harness.spark.session import spark_session
from harness.faults.streams import ProduceRecords, StreamSchedule
from harness.spark.streaming import Variant, run_stream, _driver

spark = spark_session()
start_query = _driver.start_query

def start_then_kill_the_jvm(session, spec, hook):
    query = start_query(session, spec, hook)
    os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL)
    return query

_driver.start_query = start_then_kill_the_jvm
schedule = StreamSchedule(steps=(ProduceRecords(6, 0), ProduceRecords(6, 1)))
result = run_stream(Variant.PARQUET, schedule, workdir=sys.argv[1], spark=spark)
events = result.history.events
errors = [e.detail for e in events if e.kind.value == "error"]
print(json.dumps({"end": events[-1].detail, "errors": errors}), flush=True)
os._exit(0)  # the JVM is gone: skip pyspark's exit handlers
"""


@pytest.mark.slow
def test_a_jvm_killed_mid_drain_is_unknown(tmp_path: Path) -> None:
    env = dict(os.environ, HARNESS_SPARK_TMPDIR=str(tmp_path / "spark"))
    done = subprocess.run(
        [sys.executable, "-c", _KILL_THE_JVM_MID_DRAIN, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["end"].startswith("incomplete: the drain's query failed: "), report
    assert "\n" not in report["end"]
    drain_error, sink_error = report["errors"]
    assert drain_error in report["end"]
    assert "Py4J" in drain_error or "Connection" in drain_error, drain_error
    assert "Py4J" in sink_error or "Connection" in sink_error, sink_error


def test_the_start_gate_admits_as_many_holders_as_it_has_slots(tmp_path: Path) -> None:
    import fcntl

    from harness.spark.streaming._gate import start_gate

    path = str(tmp_path / "gate")

    def free(slot: int) -> bool:
        descriptor = os.open(f"{path}.{slot}", os.O_CREAT | os.O_RDWR)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(descriptor)
        return True

    with start_gate(path, slots=2):
        assert (free(0), free(1)) == (False, True)
        with start_gate(path, slots=2):
            assert (free(0), free(1)) == (False, False)
        assert (free(0), free(1)) == (False, True)
    assert (free(0), free(1)) == (True, True)
    with start_gate(None):  # no gate: the caller holds it
        assert free(0)
    with start_gate(str(tmp_path / "no-such-dir" / "gate")):  # cannot open it: no gate
        pass


def test_a_spark_error_is_described_in_one_line_with_the_python_exception() -> None:
    from harness.spark.streaming.runner import first_line

    message = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback "
        '(most recent call last):\n  File "datasource.py", line 9, in schema\n'
        "    raise ConfigError(text)\nharness.errors.ConfigError: option 'uri' is bad\n"
        " SQLSTATE: 38000\n\tat org.apache.spark.Thing(Thing.scala:1)"
    )
    assert first_line(message) == (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback "
        "(most recent call last): ... harness.errors.ConfigError: option 'uri' is bad"
    )
    assert first_line("\n  \n  one\ntwo") == "one"
    assert first_line("") == "(no message)"
    assert len(first_line("x" * 2000)) == 500


@pytest.mark.slow
def test_spark_python_processes_import_the_installed_compiled_pyspark(
    spark: SparkSession,
) -> None:
    """Not pyspark.zip, which Spark puts first on its Python processes' path: compiled from
    source in every process, it made the source runner miss its start deadline."""

    def where(_: Any) -> str:
        import pyspark

        return str(pyspark.__file__)

    (location,) = set(spark.sparkContext.parallelize(range(2), 2).map(where).collect())
    assert "pyspark.zip" not in location, location
    assert location.endswith(os.path.join("pyspark", "__init__.py")), location


def test_the_source_runner_s_module_imports_none_of_the_checker() -> None:
    """Spark starts a fresh Python process per streaming query that imports the source's
    module before its first call: it loads the log and the bulk reader, not the Spark
    checker, the local checker or the history (they cost 0.15 s of CPU per query start)."""
    script = (
        "import sys, harness.spark.streaming.datasource\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('harness'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "harness.spark.streaming.datasource" in out, out
    assert "harness.log.storage.base" in out, out
    needless = ("harness.spark.check", "harness.check", "harness.history", "harness.faults")
    loaded = [m for m in out if m.startswith(needless)]
    assert not loaded, loaded
