"""Spark Structured Streaming under the harness: the dlog data source, its contract checks, and
four query variants under drawn crash schedules (raised failures and real SIGKILLs).

Every variant gets its expected verdict exactly: the Parquet sink, the idempotent
``foreachBatch`` and the stateful count are exactly-once; the ``foreachBatch`` that appends
without the batch id is at-least-once, and shows exactly one duplicate per row of every batch
that crashed after its write (and none otherwise).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
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

from harness.check import AnomalyKind, Guarantee, Status, Verdict, check
from harness.errors import ConfigError, LogReadException, StoreLocked
from harness.history import dumps_jsonl
from harness.history.events import EventKind
from harness.log import DLSN, LogRecord, leveldb_uri, open_namespace
from harness.spark.streaming import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    ProduceRecords,
    RunBatches,
    StreamResult,
    StreamSchedule,
    Variant,
    run_stream,
)
from harness.spark.streaming.contract import CONTRACT_CHECKS, ContractFailure, run_contract
from harness.spark.streaming.datasource import (
    SCHEMA_DDL,
    DLogDataSource,
    DLogPartition,
    DLogStreamReader,
    SourceOptions,
    decode_offsets,
    encode_offsets,
    latest_offsets,
    read_range,
    register_dlog,
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
    parallel: int = PARALLEL_RUNS,
) -> list[StreamResult]:
    """Run the jobs, ``parallel`` at a time, each in a fresh directory."""
    workdirs = [factory.mktemp(variant.value) for variant, _ in jobs]

    def one(job: tuple[tuple[Variant, StreamSchedule], Path]) -> StreamResult:
        (variant, schedule), workdir = job
        return run_stream(variant, schedule, workdir=workdir, spark=spark)

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, zip(jobs, workdirs, strict=True)))


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
    variant: Variant,
    schedules: list[StreamSchedule],
) -> None:
    results = run_all(spark, tmp_path_factory, [(variant, s) for s in schedules])
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
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    jobs = [(v, StreamSchedule(steps=steps)) for v, steps in SIGKILL_SCHEDULES.items()]
    results = run_all(spark, tmp_path_factory, jobs, parallel=len(jobs))
    for result in results:
        killed = [c for c in result.crashes if c.how is CrashHow.SIGKILL]
        assert len(killed) == 1, (result.variant, result.crashes)
        assert_expected_verdict(result)
    append = next(r for r in results if r.variant is Variant.FOREACH_BATCH_APPEND)
    assert append.replayed_rows == 4  # batch 1 of four records was written, then SIGKILLed


@pytest.mark.slow
def test_same_schedule_same_history(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
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
    first, second = run_all(spark, tmp_path_factory, jobs, parallel=2)
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


# -- a Python worker that misses Spark's connect-back deadline ------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("failures", [1, 3])
def test_the_drain_restarts_when_a_python_worker_misses_its_deadline(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
) -> None:
    from harness.spark.streaming import runner as streaming

    real = streaming._Runner._in_process
    calls: list[int] = []

    def flaky(self: Any, spec: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:
            return streaming._Outcome(
                error="[STREAM_FAILED] Query terminated with exception: Python worker failed "
                "to connect back. SQLSTATE: XXKST"
            )
        return real(self, spec)

    monkeypatch.setattr(streaming._Runner, "_in_process", flaky)
    schedule = StreamSchedule(steps=(ProduceRecords(3, 0),))  # only the drain runs a query
    result = run_stream(Variant.PARQUET, schedule, workdir=tmp_path, spark=spark)
    kinds_ = [e.kind.value for e in result.history.events]
    assert kinds_.count("start") == 1
    if failures < 3:
        assert len(calls) == failures + 1
        assert result.history.events[-1].detail == "complete"
        assert check(result.history, Guarantee.EXACTLY_ONCE).status is Status.VALID
    else:  # every attempt failed: the run says so, and is not checked as complete
        assert len(calls) == 3
        assert result.history.events[-1].detail.startswith(
            "incomplete: the drain's query failed: [STREAM_FAILED]"
        )
        assert check(result.history, Guarantee.EXACTLY_ONCE).status is Status.UNKNOWN
