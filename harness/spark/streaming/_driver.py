"""The pyspark side of :mod:`harness.spark.streaming`: the queries, their crash points, and the
child driver that a SIGKILL step kills.

:func:`run_in_process` runs one :class:`~harness.spark.streaming.RunSpec` on a session of this
process; ``python -m harness.spark.streaming._driver SPEC.json`` runs one in a fresh driver process
(own JVM), reporting on the spec's FIFO one line: ``fired <point> <batch> <rows>`` when it
reached its crash point (it then blocks until the parent kills it), ``done`` when the query
finished, ``error <message>`` when it failed.

Crash points live in two places. The *gated source* (:class:`GatedDLogDataSource`, the dlog
source with ``harness.*`` options) counts the batches of its run as Spark plans them and can
report no new data after ``harness.stopAfterBatches``, raise (``harness.raiseAtBatch``) or
signal and block (``harness.blockAtBatch``) while planning a batch: after the batch is in the
offset log, before anything is written. The ``foreachBatch`` functions call a hook after their
write, which raises or signals and blocks at ``after_write_at``. This module imports pyspark;
:mod:`harness.spark.streaming` imports it only when a query runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from harness.spark.streaming._gate import start_gate
from harness.spark.streaming.datasource import DLogDataSource, DLogStreamReader, SourceOptions
from harness.spark.streaming.runner import InjectedCrash, RunSpec, Variant, describe, first_line

__all__ = ["GATED_SOURCE_NAME", "GatedDLogDataSource", "main", "observe", "run_in_process"]

GATED_SOURCE_NAME: Final = "dlog-harness-gated"
_GATE_PREFIX: Final = "harness."
_PAYLOAD_SCHEMA: Final = "id string, key string, value bigint"
_APPENDED: Final = "appended.jsonl"
_SOURCES_WAIT_S: Final = 60.0


def _signal(path: str, line: str) -> None:
    """Report one line on the parent's FIFO (a single write below PIPE_BUF is atomic)."""
    with open(path, "w", encoding="utf-8") as fifo:
        fifo.write(line.replace("\n", " ") + "\n")


def _block_forever() -> None:
    """Wait for the SIGKILL the parent sends once it has read the signal."""
    threading.Event().wait()


class _GatedStreamReader(DLogStreamReader):
    """The dlog stream reader with crash points; lives in Spark's source-runner process for
    one query run, so its batch count is the run's."""

    def __init__(self, settings: SourceOptions, gate: Mapping[str, str]) -> None:
        super().__init__(settings)
        self._stop_after = _gate_int(gate, "stopafterbatches")
        self._raise_at = _gate_int(gate, "raiseatbatch")
        self._block_at = _gate_int(gate, "blockatbatch")
        self._signal_path = gate.get(_GATE_PREFIX + "signal")
        self._planned: list[str] = []

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if self._stop_after is not None and len(self._planned) >= self._stop_after:
            return start
        return super().latestOffset(start, limit)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        parts = super().partitions(start, end)
        if not parts:
            return parts
        # Spark may plan one batch more than once (one plan per action on it): count ranges.
        key = json.dumps([start, end], sort_keys=True)
        if key not in self._planned:
            self._planned.append(key)
        batch = self._planned.index(key)
        if batch == self._raise_at:
            raise InjectedCrash(f"injected crash before batch {batch} of this run writes")
        if batch == self._block_at and self._signal_path is not None:
            _signal(self._signal_path, f"fired before-write {batch} -1")
            _block_forever()
        return parts


def _gate_int(gate: Mapping[str, str], name: str) -> int | None:
    value = gate.get(_GATE_PREFIX + name)
    return None if value is None else int(value)


class GatedDLogDataSource(DLogDataSource):
    """The dlog source plus the runner's crash points (options ``harness.*``)."""

    @classmethod
    def name(cls) -> str:
        return GATED_SOURCE_NAME

    def _split(self) -> tuple[dict[str, str], dict[str, str]]:
        plain: dict[str, str] = {}
        gate: dict[str, str] = {}
        for key, value in self.options.items():
            lowered = str(key).lower()
            (gate if lowered.startswith(_GATE_PREFIX) else plain)[lowered] = value
        return plain, gate

    def _settings(self) -> SourceOptions:
        return SourceOptions.parse(self._split()[0])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        plain, gate = self._split()
        return _GatedStreamReader(SourceOptions.parse(plain), gate)


class _AfterWrite:
    """Called by the foreachBatch functions after each write; fires at batch ``at``."""

    def __init__(self, at: int | None, signal_path: str | None) -> None:
        self.at = at
        self.signal_path = signal_path
        self.seen = 0
        self.fired: tuple[int, int] | None = None

    def __call__(self, rows: int) -> None:
        batch = self.seen
        self.seen += 1
        if batch != self.at:
            return
        self.fired = (batch, rows)
        if self.signal_path is None:
            raise InjectedCrash(f"injected crash after batch {batch} of this run wrote {rows} rows")
        _signal(self.signal_path, f"fired after-write {batch} {rows}")
        _block_forever()


def _atomic_write(path: Path, lines: Sequence[str]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        out.writelines(line + "\n" for line in lines)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _output_lines(batch: DataFrame, batch_id: int) -> list[str]:
    return [
        json.dumps(
            {
                "batch": batch_id,
                "record_id": row["record_id"],
                "log": row["log"],
                "offset": row["sequence_id"],
                "key": row["key"],
            },
            separators=(",", ":"),
        )
        for row in batch.select("record_id", "log", "sequence_id", "key").collect()
    ]


def _append(store: Path, hook: _AfterWrite) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        lines = _output_lines(batch, batch_id)
        with (store / _APPENDED).open("a", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
            out.flush()
            os.fsync(out.fileno())
        hook(len(lines))

    return write


def _idempotent(store: Path, hook: _AfterWrite) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        lines = _output_lines(batch, batch_id)
        _atomic_write(store / f"batch-{batch_id:010d}.jsonl", lines)
        hook(len(lines))

    return write


def _counts(store: Path, hook: _AfterWrite) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        rows = sorted((row["key"], row["count"]) for row in batch.collect())
        lines = [json.dumps({"key": k, "count": c}, separators=(",", ":")) for k, c in rows]
        _atomic_write(store / f"batch-{batch_id:010d}.jsonl", lines)
        hook(len(lines))

    return write


def _register(spark: SparkSession) -> None:
    spark.dataSource.register(GatedDLogDataSource)


def start_query(spark: SparkSession, spec: RunSpec, hook: _AfterWrite) -> StreamingQuery:
    """Start ``spec``'s query (``Trigger.AvailableNow``) on ``spark``."""
    gate = {
        "harness.stopAfterBatches": spec.stop_after,
        "harness.raiseAtBatch": spec.raise_at,
        "harness.blockAtBatch": spec.block_at,
        "harness.signal": spec.signal,
    }
    reader = (
        spark.readStream.format(GATED_SOURCE_NAME)
        .option("uri", spec.uri)
        .option("logs", ",".join(spec.logs))
        .option("maxRecordsPerBatch", str(spec.max_records))
    )
    for key, value in gate.items():
        if value is not None:
            reader = reader.option(key, str(value))
    record = F.from_json(F.col("payload").cast("string"), _PAYLOAD_SCHEMA)
    parsed = reader.load().select("log", "sequence_id", record.alias("r"))
    parsed = parsed.select(
        "log",
        "sequence_id",
        F.col("r.id").alias("record_id"),
        F.col("r.key").alias("key"),
        F.col("r.value").alias("value"),
    )
    store = Path(spec.store)
    if spec.variant is Variant.PARQUET:
        writer = parsed.writeStream.format("parquet").option("path", spec.sink)
    elif spec.variant is Variant.FOREACH_BATCH_APPEND:
        writer = parsed.writeStream.foreachBatch(_append(store, hook))
    elif spec.variant is Variant.FOREACH_BATCH_IDEMPOTENT:
        writer = parsed.writeStream.foreachBatch(_idempotent(store, hook))
    else:
        counts = parsed.groupBy("key").count()
        writer = counts.writeStream.outputMode("update").foreachBatch(_counts(store, hook))
    writer = writer.option("checkpointLocation", spec.checkpoint).trigger(availableNow=True)
    with start_gate(spec.start_gate):
        query = writer.start()
        _await_sources(query)
    return query


def _await_sources(query: StreamingQuery) -> None:
    """Return once the query's sources are initialized (Spark's Python source runner has
    connected back and opened the source), the query has ended, or after
    ``_SOURCES_WAIT_S``: the window the start gate covers."""
    deadline = time.monotonic() + _SOURCES_WAIT_S
    while query.isActive and time.monotonic() < deadline:
        if not str(query.status.get("message", "")).startswith("Initializing"):
            return
        try:
            query.awaitTermination(0.05)  # type: ignore[arg-type]  # a bounded wait (seconds)
        except StreamingQueryException:
            return  # it failed; the caller's awaitTermination reports how


def _runner_session(spark: SparkSession, spec: RunSpec) -> SparkSession:
    """A session of its own (same JVM) with the gated source and the run's SQL settings, so
    the caller's session keeps its configuration."""
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", str(spec.shuffle_partitions))
    session.conf.set("spark.sql.adaptive.enabled", "false")
    _register(session)
    return session


def run_in_process(spark: SparkSession, spec: RunSpec, *, timeout_s: float) -> dict[str, Any]:
    """Run ``spec`` to its end or its crash point on ``spark``'s JVM.

    Returns ``{"fired": bool, "batch": int | None, "rows": int | None, "error": str | None}``;
    never raises for a failure of Spark (``error`` is its one-line description then), a
    query that outlives ``timeout_s`` included (it is stopped).
    """
    hook = _AfterWrite(spec.after_write_at, None)
    query: StreamingQuery | None = None
    try:
        query = start_query(_runner_session(spark, spec), spec, hook)
        finished = query.awaitTermination(max(1, int(timeout_s)))
    except StreamingQueryException as exc:
        if hook.fired is not None:
            return {"fired": True, "batch": hook.fired[0], "rows": hook.fired[1], "error": None}
        text = str(exc)
        if "InjectedCrash" in text and spec.raise_at is not None:
            return {"fired": True, "batch": spec.raise_at, "rows": None, "error": None}
        return _failed(first_line(text))
    except Exception as exc:  # the engine failed to start or to answer: a verdict, not a crash
        _stop(query)
        return _failed(describe(exc))
    if not finished:
        _stop(query)
        return _failed(
            f"the {spec.variant.value} query did not finish within {timeout_s:.0f}s "
            f"(checkpoint {spec.checkpoint}); it was stopped"
        )
    return {"fired": False, "batch": None, "rows": None, "error": None}


def _failed(error: str) -> dict[str, Any]:
    return {"fired": False, "batch": None, "rows": None, "error": error}


def _stop(query: StreamingQuery | None) -> None:
    if query is not None:
        with contextlib.suppress(Exception):  # a dead JVM cannot stop anything
            query.stop()


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def observe(spark: SparkSession, spec: RunSpec) -> list[dict[str, Any]]:
    """What the variant's sink holds, in a stable order: outputs (``record_id``, ``log``,
    ``offset``, ``key``) for the log sinks, ``key``/``count`` (last write wins) for counts."""
    store = Path(spec.store)
    if spec.variant is Variant.PARQUET:
        if not (Path(spec.sink) / "_spark_metadata").is_dir():
            return []
        # through the sink's metadata log, as every reader of a file sink must read it:
        # files of uncommitted batches are in the directory too
        frame = spark.read.parquet(spec.sink).select("record_id", "log", "sequence_id", "key")
        rows = [
            {
                "record_id": r["record_id"],
                "log": r["log"],
                "offset": r["sequence_id"],
                "key": r["key"],
            }
            for r in frame.collect()
        ]
        return sorted(rows, key=lambda r: (r["log"], r["offset"], r["record_id"]))
    if spec.variant is Variant.FOREACH_BATCH_APPEND:
        path = store / _APPENDED
        return _json_lines(path) if path.exists() else []
    batches = sorted(store.glob("batch-*.jsonl"))
    if spec.variant is Variant.FOREACH_BATCH_IDEMPOTENT:
        return [row for path in batches for row in _json_lines(path)]
    counts: dict[str, int] = {}
    for path in batches:
        for row in _json_lines(path):
            counts[row["key"]] = row["count"]
    return [{"key": key, "count": counts[key]} for key in sorted(counts)]


def main(argv: Sequence[str]) -> int:
    """The child driver: run the spec in ``argv[1]`` and report on its FIFO."""
    spec = RunSpec.from_json(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    assert spec.signal is not None, "a child driver needs the spec's signal FIFO"
    try:
        from harness.spark.session import spark_session

        spark = spark_session(shuffle_partitions=spec.shuffle_partitions)
        session = _runner_session(spark, spec)
        hook = _AfterWrite(spec.after_write_at, spec.signal)
        query = start_query(session, spec, hook)
        _signal(spec.signal, "started")  # the parent lets the next query start
        query.awaitTermination()
    except BaseException as exc:
        _signal(spec.signal, f"error {describe(exc)}")
        return 1
    _signal(spec.signal, "done")
    spark.stop()
    return 0


if __name__ == "__main__":
    # Run through the importable module, so that the classes Spark pickles are
    # harness.spark.streaming._driver's and not __main__'s.
    from harness.spark.streaming import _driver

    sys.exit(_driver.main(sys.argv))
