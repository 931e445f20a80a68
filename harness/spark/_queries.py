"""Every Spark query of the checker (internal; this module imports pyspark at import time).

The rules are those of :mod:`harness.check.local` and :mod:`harness.check.validate`; this
module computes, for every run at once, the facts a verdict needs, in few passes over the
data, and returns only small results to the driver (``docs/spark.md``, "How it works"):

1. :func:`summary`: one scan, narrowed and cached for the later passes; per run the counts
   and the events that break a per-event rule of the validator;
2. :func:`records`: one shuffle by ``(run, record_id)``, two hash aggregations, one row per
   record (checkpointed): append, acks, reads, emits, expected and observed parts;
3. :func:`partitions`: one shuffle by ``(run, partition)``, one sort (two with several
   reading processes): skip, offset-ahead, offset-regression, the append-offset rule;
4. targeted queries that run only where they matter: :func:`nonmonotonic`,
   :func:`count_mismatches`, :func:`aborted_reads`, :func:`observe_rows`,
   :func:`past_lost` and the witness details.

A run that fails validation gets its reasons from :func:`problems`, which replays the
validator's per-record and per-partition state with window functions.

Frames that later queries read more than once are computed once and checkpointed
(:meth:`Context.keep`), so every query plan stays small.
"""

from __future__ import annotations

import contextlib
import functools
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.check.verdict import MAX_WITNESSES
from harness.history.events import (
    EVENT_FIELDS,
    INT_FIELDS,
    REQUIRED_FIELDS,
    STR_FIELDS,
    Aggregate,
    AppendDetail,
    EventKind,
    ReadDetail,
    SinkKind,
)
from harness.spark.source import RunSource

__all__ = ["Context", "load", "problems"]

KIND_CODES: Final = {kind.value: code for code, kind in enumerate(EventKind)}
_K = {kind: code for code, kind in enumerate(EventKind)}
APPEND: Final = _K[EventKind.APPEND]
ACK: Final = _K[EventKind.ACK]
TRUNCATE: Final = _K[EventKind.TRUNCATE]
ROLLBACK: Final = _K[EventKind.ROLLBACK]
FETCH: Final = _K[EventKind.FETCH]
READ: Final = _K[EventKind.READ]
EMIT: Final = _K[EventKind.EMIT]
PUT: Final = _K[EventKind.PUT]
COMMIT: Final = _K[EventKind.COMMIT]
TXN_ABORT: Final = _K[EventKind.TXN_ABORT]
DRAIN: Final = _K[EventKind.DRAIN]
OBSERVE: Final = _K[EventKind.OBSERVE]
END: Final = _K[EventKind.END]

SINK_LOG: Final = 1
SINK_TABLE: Final = 2
SINK_ORDERED: Final = 4
SINK_COUNT: Final = 8
SINK_SUM: Final = 16

CHECKED_FIELDS: Final = INT_FIELDS + STR_FIELDS
"""The order in which the validator reports missing fields."""


def _required(name: str) -> list[int]:
    return [_K[kind] for kind, fields in REQUIRED_FIELDS.items() if name in fields]


_COLUMNS: Final = EVENT_FIELDS
_FREQUENT_FIRST: Final = (
    EventKind.APPEND,
    EventKind.ACK,
    EventKind.READ,
    EventKind.EMIT,
    EventKind.OBSERVE,
    EventKind.COMMIT,
    EventKind.FETCH,
)
_UNCOMPRESSED_ROWS: Final = 50_000_000
_BITS: Final = 62
"""Parts below this are tracked in a bit mask per record; rarer higher parts are counted."""

_LONG = T.LongType()
_INT = T.IntegerType()
_STR = T.StringType()
_BOOL = T.BooleanType()


def _schema() -> T.StructType:
    return T.StructType(
        [
            T.StructField(name, _STR if name in STR_FIELDS or name == "kind" else _LONG, True)
            for name in _COLUMNS
        ]
    )


def _conform(frame: DataFrame, columns: Sequence[tuple[str, T.DataType]]) -> DataFrame:
    """``frame`` with exactly ``columns`` (missing ones as typed nulls), in that order."""
    present = set(frame.columns)
    return frame.select(
        *[
            (F.col(name) if name in present else F.lit(None)).cast(kind).alias(name)
            for name, kind in columns
        ]
    )


def _union(frames: Iterable[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def _sorted_events(*columns: Column) -> Column:
    """The distinct non-null event positions among ``columns``, ascending."""
    return F.array_sort(F.array_distinct(F.filter(F.array(*columns), lambda x: x.isNotNull())))


@dataclass(slots=True)
class Context:
    """The annotated events of all runs and the small tables the queries share."""

    spark: SparkSession
    runs: tuple[RunSource, ...]
    events: DataFrame
    """Every event, compact: ``run``, ``pos`` (its position in its run), ``kc`` (kind code,
    null for an unknown kind), ``pno`` (partition number, null if undeclared), ``sk`` (sink
    code, null if undeclared), the other fields but ``partition``, ``index``, ``kind``,
    ``dlsn`` and ``detail``, which become ``poison``, ``redelivered``, ``ed`` (the detail of
    an ``end``) and ``bad`` (the event fails a per-event rule of the validator). Cached by
    :func:`summary`, so the later passes read it from memory (or local disk)."""
    partitions: int
    cached: list[DataFrame]
    persisted: list[DataFrame] = field(default_factory=list)
    restore: dict[str, str | None] = field(default_factory=dict)
    raw: DataFrame | None = None
    """All fields of every event, read from the files (for the validator's messages)."""

    def keep(self, frame: DataFrame) -> DataFrame:
        """Compute ``frame`` now and keep its rows (memory, spilling to disk) until
        :meth:`release`; the result has a one-node plan, so later queries over it stay small
        and never compute it again."""
        kept = frame.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self.cached.append(kept)
        return kept

    def cache(self, frame: DataFrame) -> DataFrame:
        """``frame`` cached (memory, spilling to disk) by the first query over it.

        Up to :data:`_UNCOMPRESSED_ROWS` events the cache is built uncompressed (about a
        third faster to build; larger ones stay compressed to spill less), unless the
        session sets ``spark.sql.inMemoryColumnarStorage.compressed`` itself."""
        key = "spark.sql.inMemoryColumnarStorage.compressed"
        rows = sum(run.rows for run in self.runs)
        if rows <= _UNCOMPRESSED_ROWS and not self.spark.sparkContext.getConf().contains(key):
            self.restore[key] = self.spark.conf.get(key)
            self.spark.conf.set(key, "false")
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self.persisted.append(frame)
        return frame

    def release(self) -> None:
        """Drop the rows of every kept and cached frame."""
        for frame in self.persisted:
            frame.unpersist()
        self.persisted.clear()
        for key, value in self.restore.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)
        self.restore.clear()
        for frame in self.cached:
            with contextlib.suppress(Exception):  # best effort: Spark's cleaner also frees them
                frame._jdf.queryExecution().analyzed().rdd().unpersist(False)
        self.cached.clear()

    def small(self, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
        return self.spark.createDataFrame(rows, schema=schema)


def _normalized(uri: str) -> str:
    """A file URI as Spark's ``_metadata.file_path`` gives it, without the ``file:`` scheme."""
    return re.sub(r"^file:/+", "/", uri)


def _location(uri: str) -> str:
    """A file URI or path, decoded, to match Spark's file list against the checker's."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "file":
        return urllib.parse.unquote(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:
        return urllib.parse.unquote(uri)
    return uri


def _sink_code(kind: SinkKind, ordered: bool, aggregate: Aggregate | None) -> int:
    code = SINK_LOG if kind is SinkKind.LOG else SINK_TABLE
    if ordered:
        code |= SINK_ORDERED
    if aggregate is Aggregate.COUNT:
        code |= SINK_COUNT
    elif aggregate is Aggregate.SUM:
        code |= SINK_SUM
    return code


def load(spark: SparkSession, runs: tuple[RunSource, ...], partitions: int) -> Context:
    """Read every file of ``runs`` in one scan and annotate the events (lazily: no job runs).

    Each row gets its run and position from its file (``_metadata.file_path`` and
    ``_metadata.row_index``), its kind code and the codes of its partition and sink."""
    columns = [F.col(name) for name in _COLUMNS if name != "dlsn"]
    reader = spark.read.schema(_schema()).option("recursiveFileLookup", "true")
    files = [(number, file) for number, run in enumerate(runs) for file in run.files]
    if not files:
        raise ValueError("no runs to load")
    row_index = F.col("_metadata.row_index")
    if len(files) == 1:
        events = reader.parquet(files[0][1].uri).select(
            F.lit(files[0][0]).cast(_INT).alias("run"), row_index.alias("pos"), *columns
        )
    else:
        # one scan for all files; each row finds its run and position through its file
        frame = reader.parquet(*[file.uri for _, file in files])
        where: dict[str, tuple[int, int]] = {}
        for number, run in enumerate(runs):
            base = 0
            for file in run.files:
                where[_location(file.uri)] = (number, base)
                base += file.rows
        mapping = []
        for uri in frame.inputFiles():
            found = where.get(_location(uri))
            if found is None:
                raise ValueError(f"Spark read a file the checker did not list: {uri}")
            mapping.append((_normalized(uri), found[0], found[1]))
        table = spark.createDataFrame(mapping, "file string, run int, base long")
        events = frame.select(
            F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/").alias("file"),
            row_index.alias("row"),
            *columns,
        ).join(F.broadcast(table), "file")
        events = events.select(
            "run",
            (F.col("base") + F.col("row")).alias("pos"),
            *[n for n in _COLUMNS if n != "dlsn"],
        )
    partition_rows: list[tuple[int, str, int]] = []
    sink_rows: list[tuple[int, str, int]] = []
    for number, run in enumerate(runs):
        numbers: dict[str, int] = {}
        for name in run.meta.partitions:
            numbers.setdefault(name, len(numbers))
        partition_rows.extend((number, name, pno) for name, pno in numbers.items())
        sink_rows.extend(
            (number, name, _sink_code(spec.kind, spec.ordered, spec.aggregate))
            for name, spec in run.meta.sinks.items()
        )
    context = Context(spark, runs, events, partitions, [])
    partition_table = context.small(partition_rows, "run int, partition string, pno int")
    sink_table = context.small(sink_rows, "run int, sink string, sk int")
    kind = F.col("kind")
    code: Column | None = None
    for event_kind in (*_FREQUENT_FIRST, *[k for k in EventKind if k not in _FREQUENT_FIRST]):
        test = kind == event_kind.value
        code = F.when(test, _K[event_kind]) if code is None else code.when(test, _K[event_kind])
    assert code is not None
    events = (
        events.join(F.broadcast(partition_table), ["run", "partition"], "left")
        .join(F.broadcast(sink_table), ["run", "sink"], "left")
        .withColumn("kc", code)
    )
    kc = F.col("kc")
    context.raw = events.withColumn("bad", _bad())
    context.events = context.raw.select(
        "run",
        "pos",
        "kc",
        "pno",
        "sk",
        "sink",
        "process",
        "offset",
        "record_id",
        "part",
        "parts",
        "key",
        "value",
        "output_id",
        "txn",
        (
            (kc == APPEND) & F.coalesce(F.col("detail") == AppendDetail.POISON.value, F.lit(False))
        ).alias("poison"),
        F.coalesce(F.col("detail") == ReadDetail.REDELIVERED.value, F.lit(False)).alias(
            "redelivered"
        ),
        F.when(kc == END, F.col("detail")).alias("ed"),
        "bad",
    )
    return context


def _bad() -> Column:
    """True when the event breaks any per-event rule of the validator (a flat test: which
    rules and in which order is :func:`with_flags`'s business, for the messages)."""
    kc = F.col("kc")
    sk = F.col("sk")
    missing: Column | None = None
    for kind, fields in REQUIRED_FIELDS.items():
        test = F.lit(False)
        for name in fields:
            test = test | F.col(name).isNull()
        missing = (
            F.when(kc == _K[kind], test) if missing is None else missing.when(kc == _K[kind], test)
        )
    assert missing is not None
    part = F.col("part")
    parts = F.col("parts")
    bad = (
        F.col("index").isNull()
        | (F.col("index") != F.col("pos"))
        | missing.otherwise(True)
        | (F.col("offset") < 0)
        | (part < 0)
        | (parts < 1)
        | (part >= parts)
        | (F.col("partition").isNotNull() & F.col("pno").isNull())
        | (kc.isin(EMIT, PUT, OBSERVE) & sk.isNull())
        | ((kc == PUT) & (sk.bitwiseAND(SINK_TABLE) == 0))
        | (
            (kc == OBSERVE)
            & (sk.bitwiseAND(SINK_LOG) != 0)
            & (F.col("output_id").isNull() | part.isNull())
        )
        | (
            (kc == OBSERVE)
            & (sk.bitwiseAND(SINK_TABLE) != 0)
            & (F.col("output_id").isNotNull() | F.col("key").isNull() | F.col("value").isNull())
        )
    )
    return F.coalesce(bad, F.lit(False))


PROBLEM_FLAGS: Final = (
    "index",
    "kind",
    *[f"missing_{name}" for name in CHECKED_FIELDS if _required(name)],
    "neg_offset",
    "neg_part",
    "parts_low",
    "part_high",
    "partition",
    "sink",
    "put_log",
    "observe_log",
    "observe_output",
    "observe_table",
)
"""Boolean columns :func:`with_flags` adds, one per per-event rule of the validator."""


def with_flags(frame: DataFrame) -> DataFrame:
    """``frame`` with a ``f_<rule>`` column per entry of :data:`PROBLEM_FLAGS` (true when the
    event breaks the rule; later rules only where the validator gets to them), ``stateful``
    (the event goes on to the append/ack/read rules) and ``bad`` (any rule broken)."""
    kc = F.col("kc")
    sk = F.col("sk")

    def flag(condition: Column) -> Column:
        return F.coalesce(condition, F.lit(False))

    known = kc.isNotNull()
    first = [
        flag(F.col("index").isNull() | (F.col("index") != F.col("pos"))).alias("f_index"),
        flag(~known).alias("f_kind"),
    ]
    missing_names = [name for name in CHECKED_FIELDS if _required(name)]
    for name in missing_names:
        first.append(
            flag(known & F.col(name).isNull() & kc.isin(*_required(name))).alias(
                f"f_missing_{name}"
            )
        )
    frame = frame.select("*", *first)
    any_missing = F.lit(False)
    for name in missing_names:
        any_missing = any_missing | F.col(f"f_missing_{name}")
    frame = frame.select("*", flag(known & ~any_missing).alias("ranged"))
    ranged = F.col("ranged")
    frame = frame.select(
        "*",
        flag(ranged & (F.col("offset") < 0)).alias("f_neg_offset"),
        flag(ranged & (F.col("part") < 0)).alias("f_neg_part"),
        flag(ranged & (F.col("parts") < 1)).alias("f_parts_low"),
        flag(ranged & (F.col("parts") >= 1) & (F.col("part") >= F.col("parts"))).alias(
            "f_part_high"
        ),
    )
    fields_ok = ranged & ~(
        F.col("f_neg_offset") | F.col("f_neg_part") | F.col("f_parts_low") | F.col("f_part_high")
    )
    frame = frame.select(
        "*",
        flag(fields_ok & F.col("partition").isNotNull() & F.col("pno").isNull()).alias(
            "f_partition"
        ),
        flag(fields_ok).alias("fields_ok"),
    )
    placed = F.col("fields_ok") & ~F.col("f_partition")
    sinky = placed & kc.isin(EMIT, PUT, OBSERVE)
    is_log = sk.bitwiseAND(SINK_LOG) != 0
    is_table = sk.bitwiseAND(SINK_TABLE) != 0
    declared = sinky & sk.isNotNull()
    observe = declared & (kc == OBSERVE)
    frame = frame.select(
        "*",
        flag(placed & kc.isin(APPEND, ACK, READ)).alias("stateful"),
        flag(sinky & sk.isNull()).alias("f_sink"),
        flag(declared & (kc == PUT) & ~is_table).alias("f_put_log"),
        flag(observe & is_log & (F.col("output_id").isNull() | F.col("part").isNull())).alias(
            "f_observe_log"
        ),
        flag(observe & is_table & F.col("output_id").isNotNull()).alias("f_observe_output"),
        flag(
            observe
            & is_table
            & F.col("output_id").isNull()
            & (F.col("key").isNull() | F.col("value").isNull())
        ).alias("f_observe_table"),
    )
    bad = F.lit(False)
    for name in PROBLEM_FLAGS:
        bad = bad | F.col(f"f_{name}")
    return frame.select("*", bad.alias("bad"))


_SEQ: Final = {
    "index": 0,
    "kind": 1,
    **{f"missing_{name}": 2 + i for i, name in enumerate(CHECKED_FIELDS)},
    "neg_offset": 20,
    "neg_part": 21,
    "parts_low": 22,
    "part_high": 23,
    "partition": 30,
    "sink": 40,
    "put_log": 40,
    "observe_log": 40,
    "observe_output": 40,
    "observe_table": 40,
}
"""The order in which the validator reports an event's problems."""


# ------------------------------------------------------------------------------ summary


@dataclass(frozen=True, slots=True)
class Summary:
    """Per-run facts from the first pass (see :func:`summary`)."""

    events: int
    bad: int
    ends: int
    end_pos: int | None
    end_detail: str | None
    drains: int
    drain_pos: int | None
    aborts: int
    log_observes: int
    null_observes: int
    appends: int
    truncates: int
    one_reader: bool
    """At most one process reads and fetches."""


def summary(context: Context) -> tuple[dict[int, Summary], DataFrame]:
    """Pass 1: per run a :class:`Summary`, and the cached last value of every key of every
    table sink (``run, sink, key, value, pos``)."""
    context.events = context.cache(context.events)
    ev = context.events
    kc = F.col("kc")
    sk = F.col("sk")
    table_observe = (kc == OBSERVE) & (sk.bitwiseAND(SINK_TABLE) != 0)
    log_observe = (kc == OBSERVE) & (sk.bitwiseAND(SINK_LOG) != 0)
    # plain numbers grouped by run (this query also fills the cache); the end details and
    # the table values come from small queries over the cache afterwards
    totals = ev.groupBy("run").agg(
        F.count(F.lit(1)).alias("n"),
        F.count_if(F.col("bad")).alias("bad"),
        F.count_if(kc == END).alias("n_end"),
        F.max(F.when(kc == END, F.col("pos"))).alias("end_pos"),
        F.count_if(kc == DRAIN).alias("n_drain"),
        F.min(F.when(kc == DRAIN, F.col("pos"))).alias("drain_pos"),
        F.count_if(kc == TXN_ABORT).alias("n_abort"),
        F.count_if(log_observe).alias("n_log"),
        F.count_if(log_observe & F.col("record_id").isNull()).alias("n_null"),
        F.count_if(kc == APPEND).alias("n_append"),
        F.count_if(kc == TRUNCATE).alias("n_truncate"),
        F.min(F.when(kc.isin(READ, FETCH), F.col("process"))).alias("reader_lo"),
        F.max(F.when(kc.isin(READ, FETCH), F.col("process"))).alias("reader_hi"),
    )
    rows = totals.collect()
    details = (
        {
            (row["run"], row["pos"]): row["ed"]
            for row in ev.where((kc == END) & F.col("pos").isin(*[r["end_pos"] for r in rows]))
            .select("run", "pos", "ed")
            .collect()
        }
        if any(r["end_pos"] is not None for r in rows)
        else {}
    )
    result: dict[int, Summary] = {}
    for row in rows:
        result[int(row["run"])] = Summary(
            events=int(row["n"]),
            bad=int(row["bad"]),
            ends=int(row["n_end"]),
            end_pos=row["end_pos"],
            end_detail=details.get((row["run"], row["end_pos"])),
            drains=int(row["n_drain"]),
            drain_pos=row["drain_pos"],
            aborts=int(row["n_abort"]),
            log_observes=int(row["n_log"]),
            null_observes=int(row["n_null"]),
            appends=int(row["n_append"]),
            truncates=int(row["n_truncate"]),
            one_reader=row["reader_lo"] == row["reader_hi"],
        )
    tables = (
        ev.where(table_observe)
        .groupBy("run", "sink", "key")
        .agg(F.max_by(F.col("value"), F.col("pos")).alias("value"), F.max("pos").alias("pos"))
    )
    return result, tables


# ------------------------------------------------------------------------------ records


def records(context: Context, runs: Sequence[int]) -> DataFrame:
    """Pass 2: the checkpointed facts of every record, one row each, from one shuffle by
    ``(run, record_id)`` and two hash aggregations over it (numbers only in the buffers, no
    join, no sort): its append (``n_app``, ``app_pos``, ``app_pno``, ``app_off``,
    ``app_value``, ``poison``), its acks (``ack_n``, ``ack_first``), its last read and emit,
    ``parts`` (the expected parts, ``max(1, parts of its emits)``), its observes (``obs_n``;
    ``below``: how many expected parts a log sink shows, null when that needs
    :func:`exact_below`; ``extra``: copies beyond the first of each part; ``omask``: the
    observed parts below 62 as bits), ``cert_bad`` (its acks and reads do not match its
    single append: the history fails validation), and for ordered log sinks
    ``ordered_effects`` (how many of its parts they show) and ``ordered_first`` (the first
    such observe)."""
    ev = context.events.where(F.col("run").isin(*runs))
    kc = F.col("kc")
    log_observe = (kc == OBSERVE) & (F.col("sk").bitwiseAND(SINK_LOG) != 0)
    rows = ev.where(
        F.col("record_id").isNotNull() & (kc.isin(APPEND, ACK, READ, EMIT) | log_observe)
    ).select(
        "run",
        "record_id",
        "pos",
        "kc",
        "pno",
        "offset",
        "parts",
        "value",
        F.when(kc == APPEND, F.col("poison")).alias("poison"),
        F.when(kc == OBSERVE, F.col("part")).alias("opart"),
        ((kc == OBSERVE) & (F.col("sk").bitwiseAND(SINK_ORDERED) != 0)).alias("ordered"),
    )
    shuffled = rows.repartition(context.partitions, "run", "record_id")
    pos = F.col("pos")
    is_append = kc == APPEND
    is_ack = kc == ACK
    matched = kc.isin(ACK, READ)
    # level 1: the record's own events (opart null) and each observed part (its copies)
    level1 = shuffled.groupBy("run", "record_id", "opart").agg(
        F.count_if(is_append).alias("n_app"),
        F.min(F.when(is_append, pos)).alias("app_pos"),
        F.max(F.when(is_append, F.col("pno"))).alias("app_pno"),
        F.max(F.when(is_append, F.col("offset"))).alias("app_off"),
        F.max(F.when(is_append, F.col("value"))).alias("app_value"),
        F.max("poison").alias("poison"),
        F.count_if(is_ack).alias("ack_n"),
        F.min(F.when(is_ack, pos)).alias("ack_first"),
        F.count_if(matched).alias("ar_n"),
        F.min(F.when(matched, pos)).alias("ar_pos"),
        F.min(F.when(matched, F.col("pno"))).alias("ar_pno_lo"),
        F.max(F.when(matched, F.col("pno"))).alias("ar_pno_hi"),
        F.min(F.when(matched, F.col("offset"))).alias("ar_off_lo"),
        F.max(F.when(matched, F.col("offset"))).alias("ar_off_hi"),
        F.max(F.when(kc == READ, pos)).alias("read_last"),
        F.max(F.when(kc == EMIT, pos)).alias("emit_last"),
        F.max(F.when(kc == EMIT, F.col("parts"))).alias("parts_max"),
        F.count_if(kc == OBSERVE).alias("copies"),
        F.min(F.when(F.col("ordered"), pos)).alias("ordered_first"),
    )
    opart = F.col("opart")
    observed = opart.isNotNull()
    level2 = level1.groupBy("run", "record_id").agg(
        F.sum("n_app").alias("n_app"),
        F.min("app_pos").alias("app_pos"),
        F.max("app_pno").alias("app_pno"),
        F.max("app_off").alias("app_off"),
        F.max("app_value").alias("app_value"),
        F.max("poison").alias("poison"),
        F.sum("ack_n").alias("ack_n"),
        F.min("ack_first").alias("ack_first"),
        F.sum("ar_n").alias("ar_n"),
        F.min("ar_pos").alias("ar_pos"),
        F.min("ar_pno_lo").alias("ar_pno_lo"),
        F.max("ar_pno_hi").alias("ar_pno_hi"),
        F.min("ar_off_lo").alias("ar_off_lo"),
        F.max("ar_off_hi").alias("ar_off_hi"),
        F.max("read_last").alias("read_last"),
        F.max("emit_last").alias("emit_last"),
        F.greatest(F.lit(1).cast(_LONG), F.max("parts_max")).alias("parts"),
        F.sum("copies").alias("obs_n"),
        F.sum(F.when(observed, F.col("copies") - 1)).alias("extra"),
        F.bit_or(
            F.when(
                observed & (opart < _BITS),
                F.expr("shiftleft(cast(1 as bigint), cast(opart as int))"),
            )
        ).alias("omask"),
        F.count_if(observed & (opart >= _BITS)).alias("obig"),
        F.max(opart).alias("omax"),
        F.min("ordered_first").alias("ordered_first"),
        F.count(F.col("ordered_first")).alias("ordered_effects"),
    )
    n_app = F.col("n_app")
    parts = F.col("parts")
    low_mask = F.expr(f"shiftleft(cast(1 as bigint), cast(least(parts, {_BITS}) as int)) - 1")
    small = F.bit_count(F.coalesce(F.col("omask"), F.lit(0).cast(_LONG)).bitwiseAND(low_mask))
    below = (
        F.when(parts <= _BITS, small)
        .when(F.coalesce(F.col("omax"), F.lit(0).cast(_LONG)) < parts, small + F.col("obig"))
        .otherwise(F.lit(None))
    )
    certificate_bad = (
        (n_app > 1)
        | ((n_app == 0) & (F.col("ar_n") > 0))
        | (
            (n_app == 1)
            & (F.col("ar_n") > 0)
            & (
                (F.col("ar_pos") < F.col("app_pos"))
                | (F.col("ar_pno_lo") != F.col("app_pno"))
                | (F.col("ar_pno_hi") != F.col("app_pno"))
                | (F.col("ar_off_lo") != F.col("app_off"))
                | (F.col("ar_off_hi") != F.col("app_off"))
            )
        )
    )
    # outputs its rules do not allow (all of a poison record's; parts above its emits'
    # declared ones, rare, counted exactly by exact_below) are unexpected, never copies
    poison = F.coalesce(F.col("poison"), F.lit(False))
    beyond = F.coalesce(F.col("omax") >= parts, F.lit(False))
    extra = (
        F.when(poison, F.lit(0).cast(_LONG))
        .when(beyond, F.lit(None).cast(_LONG))
        .otherwise(F.coalesce(F.col("extra"), F.lit(0).cast(_LONG)))
    )
    unaccounted = (
        F.when(poison, F.col("obs_n").cast(_LONG))
        .when(beyond, F.lit(None).cast(_LONG))
        .otherwise(F.lit(0).cast(_LONG))
    )
    facts = level2.select(
        "run",
        "record_id",
        "n_app",
        "app_pos",
        "app_pno",
        "app_off",
        "app_value",
        F.coalesce(F.col("poison"), F.lit(False)).alias("poison"),
        "ack_n",
        "ack_first",
        "read_last",
        "emit_last",
        "parts",
        "obs_n",
        below.cast(_LONG).alias("below"),
        extra.alias("extra"),
        unaccounted.alias("unacc"),
        "omask",
        F.coalesce(certificate_bad, F.lit(False)).alias("cert_bad"),
        "ordered_first",
        "ordered_effects",
    )
    return context.keep(facts)


def exact_below(context: Context, runs: Sequence[int], facts: DataFrame) -> DataFrame:
    """``facts`` with ``below``, ``extra`` and ``unacc`` counted exactly for the (rare)
    records the aggregation left open: parts past the bit mask, or observed parts their
    emits never declared (those outputs are unexpected, not copies)."""
    open_ = F.col("below").isNull() | F.col("unacc").isNull()
    unknown = facts.where(open_).select("run", "record_id", "parts")
    ev = context.events.where(F.col("run").isin(*runs))
    within = F.col("part") < F.col("parts")
    observed = (
        ev.where(
            (F.col("kc") == OBSERVE)
            & (F.col("sk").bitwiseAND(SINK_LOG) != 0)
            & F.col("record_id").isNotNull()
        )
        .groupBy("run", "record_id", "part")
        .agg(F.count(F.lit(1)).alias("copies"))
        .join(unknown, ["run", "record_id"])
        .groupBy("run", "record_id")
        .agg(
            F.count_if(within).alias("x_below"),
            F.sum(F.when(within, F.col("copies") - 1).otherwise(0)).alias("x_extra"),
            F.sum(F.when(~within, F.col("copies")).otherwise(0)).alias("x_unacc"),
        )
    )
    fixed = facts.join(observed, ["run", "record_id"], "left").select(
        *[
            F.coalesce(F.col(name), F.col(f"x_{name}"), F.lit(0).cast(_LONG)).alias(name)
            if name in ("below", "extra", "unacc")
            else F.col(name)
            for name in facts.columns
        ]
    )
    return context.keep(fixed)


def observe_rows(
    context: Context, facts: DataFrame, runs: Sequence[int], *, kind: str
) -> DataFrame:
    """The observe rows of log sinks that records' facts point at: ``kind`` ``"unexpected"``
    (outputs their record's rules do not allow: of records never acknowledged, of poison
    records, of parts no emit declared: ``run, record_id, pos, output_id, sink, part,
    app_pos, ack_n, poison, parts``) or
    ``"duplicate"`` (acknowledged records with extra copies: ``run, record_id, part, pos,
    output_id``). Few rows in a sound history; the facts side is broadcast when small."""
    ev = context.events.where(F.col("run").isin(*runs))
    observes = ev.where(
        (F.col("kc") == OBSERVE)
        & (F.col("sk").bitwiseAND(SINK_LOG) != 0)
        & F.col("record_id").isNotNull()
    ).select("run", "record_id", "pos", "output_id", "sink", "part")
    acked = F.col("ack_n") > 0
    if kind == "unexpected":
        wanted = facts.where(
            (~acked & (F.col("obs_n") > 0)) | (acked & (F.col("unacc") > 0))
        ).select("run", "record_id", "app_pos", "ack_n", "poison", "parts")
        return observes.join(wanted, ["run", "record_id"]).where(
            (F.col("ack_n") == 0) | F.col("poison") | (F.col("part") >= F.col("parts"))
        )
    wanted = facts.where(acked & (F.col("extra") > 0)).select("run", "record_id", "parts")
    rows = (
        observes.join(wanted, ["run", "record_id"])
        .where(F.col("part") < F.col("parts"))
        .drop("parts")
    )
    copies = Window.partitionBy("run", "record_id", "part")
    return (
        rows.select("*", F.count(F.lit(1)).over(copies).alias("copies"))
        .where(F.col("copies") > 1)
        .drop("copies")
    )


def nonmonotonic_from_facts(context: Context, facts: DataFrame, runs: Sequence[int]) -> DataFrame:
    """:func:`nonmonotonic` for runs with a single ordered log sink where no record shows
    more than one part in it: then each record's first observe there is its only first
    occurrence, and the pairs come from the facts alone (one shuffle and sort of the
    records, no scan). ``sink`` is null in the result (the caller knows the one sink)."""
    first = facts.where(
        F.col("run").isin(*runs) & (F.col("n_app") >= 1) & F.col("ordered_first").isNotNull()
    ).select(
        "run",
        "record_id",
        F.col("app_pno").alias("pno"),
        F.col("app_off").alias("off"),
        F.col("ordered_first").alias("pos"),
    )
    stream = Window.partitionBy("run", "pno").orderBy("pos")
    pairs = first.select(
        "*",
        F.lit(None).cast(_STR).alias("sink"),
        F.lag("record_id").over(stream).alias("prev_rid"),
        F.lag("off").over(stream).alias("prev_off"),
        F.lag("pos").over(stream).alias("prev_pos"),
    ).where(F.col("off") < F.col("prev_off"))
    return context.keep(pairs)


def nonmonotonic(context: Context, runs: Sequence[int]) -> DataFrame:
    """Per ordered log sink and source partition, the first occurrence of every effect in
    observe order; one checkpointed row per adjacent pair whose source offsets decrease:
    ``run, record_id, sink, pno, off, pos, prev_rid, prev_off, prev_pos``. One scan, one
    shuffle by record (appends and ordered observes, aggregated and joined there), one by
    ``(run, sink, partition)``."""
    ev = context.events.where(F.col("run").isin(*runs))
    kc = F.col("kc")
    ordered_log = SINK_LOG | SINK_ORDERED
    rows = ev.where(
        F.col("record_id").isNotNull()
        & (
            (kc == APPEND)
            | ((kc == OBSERVE) & (F.col("sk").bitwiseAND(ordered_log) == ordered_log))
        )
    ).select(
        "run",
        "record_id",
        "pos",
        "kc",
        "pno",
        "offset",
        F.when(kc == OBSERVE, F.col("sink")).alias("osink"),
        F.when(kc == OBSERVE, F.col("part")).alias("opart"),
    )
    shuffled = rows.repartition(context.partitions, "run", "record_id")
    firsts = (
        shuffled.where(kc == OBSERVE)
        .groupBy("run", "record_id", "osink", "opart")
        .agg(F.min("pos").alias("pos"))
    )
    appends = (
        shuffled.where(kc == APPEND)
        .groupBy("run", "record_id")
        .agg(F.max("pno").alias("pno"), F.max("offset").alias("off"))
    )
    first = firsts.join(appends.hint("shuffle_hash"), ["run", "record_id"]).select(
        "run", "record_id", F.col("osink").alias("sink"), "pno", "off", "pos"
    )
    stream = Window.partitionBy("run", "sink", "pno").orderBy("pos")
    pairs = first.select(
        "*",
        F.lag("record_id").over(stream).alias("prev_rid"),
        F.lag("off").over(stream).alias("prev_off"),
        F.lag("pos").over(stream).alias("prev_pos"),
    ).where(F.col("off") < F.col("prev_off"))
    return context.keep(pairs)


# --------------------------------------------------------------------------- partitions

_PARTITION_COLUMNS: Final = (
    ("tag", _STR),
    ("run", _INT),
    ("pno", _INT),
    ("pos", _LONG),
    ("off", _LONG),
    ("process", _LONG),
    ("how", _INT),
    ("before", _LONG),
    ("low", _LONG),
    ("record_id", _STR),
)


def partitions(
    context: Context,
    runs: Sequence[int],
    *,
    one_reader: bool,
    truncates: bool,
) -> DataFrame:
    """Pass 3, one shuffle by ``(run, partition)`` and one sort over reads, fetches, commits,
    rollbacks (and truncates): per partition in event order, the checkpointed rows of
    ``skip`` (S), ``offset-ahead`` by commit (A) and ``offset-regression`` (G).
    ``one_reader``: only one process reads and fetches in these runs, so its previous read
    is the partition's (else a second sort, by process, finds each process's own);
    ``truncates``: some run has ``truncate`` events."""
    ev = context.events.where(F.col("run").isin(*runs))
    kc = F.col("kc")
    kinds = [READ, FETCH, COMMIT, ROLLBACK] + ([TRUNCATE] if truncates else [])
    raw = ev.where(kc.isin(*kinds) & F.col("pno").isNotNull()).select(
        "run", "pno", "pos", "kc", F.col("offset").alias("off"), "process", "redelivered"
    )
    columns = (
        ("run", _INT),
        ("pno", _INT),
        ("pos", _LONG),
        ("kc", _INT),
        ("off", _LONG),
        ("process", _LONG),
        ("redelivered", _BOOL),
    )
    rows = _conform(raw, columns)
    before = (
        Window.partitionBy("run", "pno").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    )
    pos = F.col("pos")
    off = F.col("off")
    own = (kc == FETCH) | ((kc == READ) & ~F.col("redelivered"))
    reading = own & (kc == READ)
    # plain numbers only (a null offset is -1: offsets are never negative here), so the
    # rows that go through the shuffle and the sort stay narrow
    windowed = [
        F.max(F.when(kc == READ, off)).over(before).alias("best"),
        F.last(F.when(kc.isin(COMMIT, ROLLBACK), F.coalesce(off, F.lit(-1))), True)
        .over(before)
        .alias("stored"),
        F.last(F.when(kc.isin(COMMIT, ROLLBACK), pos), True).over(before).alias("stored_pos"),
    ]
    if truncates:
        windowed.append(F.last(F.when(kc == TRUNCATE, off), True).over(before).alias("truncated"))
    else:
        windowed.append(F.lit(None).cast(_LONG).alias("truncated"))

    def own_events(window: Any) -> list[Column]:
        """The kind, offset (-1: none) and position of the process's last read or fetch."""
        return [
            F.last(F.when(own, kc), True).over(window).alias("own_kc"),
            F.last(F.when(own, F.coalesce(off, F.lit(-1))), True).over(window).alias("own_off"),
            F.last(F.when(own, pos), True).over(window).alias("own_pos"),
        ]

    if one_reader:
        sequenced = rows.select("*", *windowed, *own_events(before))
    else:
        mine = (
            Window.partitionBy("run", "pno", F.when(own, F.col("process")).alias("own"))
            .orderBy("pos")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        sequenced = rows.select("*", *windowed).select("*", *own_events(mine))
    own_kc = F.col("own_kc")
    own_off = F.col("own_off")
    how = (
        F.when(reading & (own_kc == FETCH) & (own_off < 0), 0)
        .when(reading & (own_kc == FETCH), 1)
        .when(reading & (own_kc == READ), 2)
    )
    low = F.when(how == 0, F.coalesce(F.col("truncated"), F.lit(0).cast(_LONG))).when(
        how >= 1, own_off
    )
    best = F.col("best")
    commit = kc == COMMIT
    tag = F.when(reading & (((how < 2) & (off > low)) | ((how == 2) & (off - 1 > low))), "S").when(
        commit & ((best.isNull() & (off > 0)) | (best.isNotNull() & (off - 1 > best))), "A"
    )
    regression = commit & (F.col("stored") >= 0) & (off < F.col("stored"))
    tags = F.filter(F.array(tag, F.when(regression, F.lit("G"))), lambda t: t.isNotNull())
    classified = sequenced.select("*", how.alias("how"), low.alias("low_"), tags.alias("tags"))
    exploded = classified.where(F.size("tags") > 0).select("*", F.explode("tags").alias("kind"))
    kind = F.col("kind")
    found = exploded.select(
        kind.alias("tag"),
        "run",
        "pno",
        "pos",
        "off",
        "process",
        F.when(kind == "S", F.col("how")).alias("how"),
        F.when(kind == "S", F.col("own_pos"))
        .when(kind == "G", F.col("stored_pos"))
        .alias("before"),
        F.when(kind == "S", F.col("low_"))
        .when(kind == "A", best)
        .when(kind == "G", F.col("stored"))
        .alias("low"),
    )
    found = context.keep(_conform(found, _PARTITION_COLUMNS))
    return _best_reads(context, found)


def _best_reads(context: Context, found: DataFrame) -> DataFrame:
    """``found`` with ``before`` of each offset-ahead commit set to the position of the first
    read of its highest offset before it (a few commits: the reads of those offsets are
    looked up on their own)."""
    ahead = found.where((F.col("tag") == "A") & F.col("low").isNotNull())
    wanted = ahead.select("run", "pno", F.col("low").alias("offset"), F.col("pos").alias("cpos"))
    reads = context.events.where(F.col("kc") == READ).select("run", "pno", "offset", "pos")
    firsts = (
        reads.join(wanted, ["run", "pno", "offset"])
        .where(F.col("pos") < F.col("cpos"))
        .groupBy("run", "pno", "cpos")
        .agg(F.min("pos").alias("first_read"))
    )
    columns = [name for name, _ in _PARTITION_COLUMNS]
    resolved = ahead.join(
        firsts.withColumnRenamed("cpos", "pos"), ["run", "pno", "pos"], "left"
    ).select(*[F.col("first_read").alias("before") if c == "before" else c for c in columns])
    others = found.where(~((F.col("tag") == "A") & F.col("low").isNotNull()))
    return context.keep(_union([others.select(*columns), resolved]))


def offset_violations(context: Context, facts: DataFrame, runs: Sequence[int]) -> set[int]:
    """The runs where an append is not above an offset acknowledged before it (the
    validator's append rule), given that every record has at most one append and its acks
    follow it at its place (the certificate of :func:`records`): per partition, an append
    breaks the rule exactly when some record at an offset at or above its own was
    acknowledged before it, i.e. when the earliest first ack among the appends at or above
    its offset precedes it. One shuffle and one sort of the appends."""
    del context
    appends = facts.where(F.col("run").isin(*runs) & (F.col("n_app") >= 1))
    above = (
        Window.partitionBy("run", "app_pno")
        .orderBy(F.col("app_off").desc())
        .rangeBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rows = (
        appends.select("run", "app_pos", F.min("ack_first").over(above).alias("acked"))
        .where(F.col("acked") < F.col("app_pos"))
        .select("run")
        .distinct()
        .collect()
    )
    return {int(row["run"]) for row in rows}


def past_lost(context: Context, facts: DataFrame, lossy: Sequence[int]) -> DataFrame:
    """offset-ahead past a lost record (tag B): for each record with a lost effect in the
    ``lossy`` runs, the first commit of its partition whose offset, or an earlier commit's,
    is above the record's: ``run, pno, pos (the commit), before (its offset), process, off
    (the record's), record_id``. Commits are few: they are read once more, on their own."""
    kc = F.col("kc")
    commits = context.events.where(
        F.col("run").isin(*lossy) & (kc == COMMIT) & F.col("pno").isNotNull()
    ).select("run", "pno", "pos", F.col("offset").alias("off"), "process")
    before = (
        Window.partitionBy("run", "pno").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    )
    steps = (
        commits.select("*", F.max("off").over(before).alias("committed"))
        .where(F.col("committed").isNull() | (F.col("off") > F.col("committed")))
        .select("run", "pno", "pos", "off", "process", F.lit(0).alias("typ"))
    )
    lost = facts.where(
        F.col("run").isin(*lossy)
        & (F.col("ack_n") > 0)
        & ~F.col("poison")
        & (F.col("n_app") >= 1)
        & (F.coalesce(F.col("below"), F.lit(0)) < F.col("parts"))
    ).select(
        "run",
        F.col("app_pno").alias("pno"),
        F.lit(None).cast(_LONG).alias("pos"),
        F.col("app_off").alias("off"),
        F.lit(None).cast(_LONG).alias("process"),
        F.lit(1).alias("typ"),
        "record_id",
    )
    ladder = _union([steps.withColumn("record_id", F.lit(None).cast(_STR)), lost])
    following = (
        Window.partitionBy("run", "pno")
        .orderBy("off", "typ")
        .rowsBetween(1, Window.unboundedFollowing)
    )
    past = (
        ladder.select(
            "*",
            F.first(F.when(F.col("typ") == 0, F.struct("pos", "off", "process")), True)
            .over(following)
            .alias("step"),
        )
        .where((F.col("typ") == 1) & F.col("step").isNotNull())
        .select(
            F.lit("B").alias("tag"),
            "run",
            "pno",
            F.col("step.pos").alias("pos"),
            F.col("step.off").alias("before"),
            F.col("step.process").alias("process"),
            "off",
            "record_id",
        )
    )
    return _conform(past, _PARTITION_COLUMNS)


def unsorted_partitions(
    facts: DataFrame, context: Context, partitions: Sequence[tuple[int, int]]
) -> set[tuple[int, int]]:
    """Which of the ``(run, pno)`` partitions have an append at an offset below an earlier
    append's (then the local checker's binary search needs replaying exactly)."""
    if not partitions:
        return set()
    wanted = context.small(list(partitions), "run int, pno int")
    appends = (
        facts.where(F.col("n_app") >= 1)
        .select(
            "run",
            F.col("app_pno").alias("pno"),
            F.col("app_pos").alias("pos"),
            F.col("app_off").alias("off"),
        )
        .join(F.broadcast(wanted), ["run", "pno"])
    )
    order = Window.partitionBy("run", "pno").orderBy("pos")
    rows = (
        appends.select("run", "pno", "off", F.lag("off").over(order).alias("prev"))
        .where(F.col("off") < F.col("prev"))
        .select("run", "pno")
        .distinct()
        .collect()
    )
    return {(row["run"], row["pno"]) for row in rows}


# ------------------------------------------------------------------------- other passes


def aborted_reads(context: Context, runs: Sequence[int]) -> DataFrame:
    """Observes of log-sink outputs emitted in a transaction that aborted (only for runs that
    have a ``txn-abort``): ``run, pos, output_id, sink, record_id, emit_pos, txn, abort_pos``."""
    ev = context.events.where(F.col("run").isin(*runs))
    kc = F.col("kc")
    aborts = ev.where(kc == TXN_ABORT).groupBy("run", "txn").agg(F.min("pos").alias("abort_pos"))
    emits = (
        ev.where((kc == EMIT) & F.col("txn").isNotNull())
        .select("run", "txn", "output_id", "pos")
        .join(aborts, ["run", "txn"])
        .groupBy("run", "output_id")
        .agg(F.min(F.struct("pos", "txn", "abort_pos")).alias("emit"))
    )
    observes = ev.where((kc == OBSERVE) & (F.col("sk").bitwiseAND(SINK_LOG) != 0))
    return observes.join(emits, ["run", "output_id"]).select(
        "run",
        "pos",
        "output_id",
        "sink",
        "record_id",
        F.col("emit.pos").alias("emit_pos"),
        F.col("emit.txn").alias("txn"),
        F.col("emit.abort_pos").alias("abort_pos"),
    )


def null_observes(context: Context, runs: Sequence[int]) -> DataFrame:
    """Observes of log-sink outputs with no record id: ``run, pos, output_id, sink``."""
    ev = context.events.where(F.col("run").isin(*runs))
    return ev.where(
        (F.col("kc") == OBSERVE)
        & (F.col("sk").bitwiseAND(SINK_LOG) != 0)
        & F.col("record_id").isNull()
    ).select("run", "pos", "output_id", "sink")


def duplicate_effects(context: Context, copies: DataFrame) -> DataFrame:
    """One row per duplicated effect from its observe rows (:func:`observe_rows`): ``run,
    record_id, part, copies (array of (pos, output_id) in observe order), emits (positions
    of every emit of those outputs)``."""
    copies = copies.select("run", "record_id", "part", "pos", "output_id")
    outputs = copies.select("run", "output_id").distinct()
    emits = (
        context.events.where(F.col("kc") == EMIT)
        .select("run", "output_id", F.col("pos").alias("emit_pos"))
        .join(outputs, ["run", "output_id"])
    )
    emitted = (
        copies.select("run", "record_id", "part", "output_id")
        .distinct()
        .join(emits, ["run", "output_id"])
        .groupBy("run", "record_id", "part")
        .agg(F.collect_set("emit_pos").alias("emits"))
    )
    grouped = copies.groupBy("run", "record_id", "part").agg(
        F.array_sort(F.collect_list(F.struct("pos", "output_id"))).alias("copies")
    )
    return grouped.join(emitted, ["run", "record_id", "part"], "left")


def _inputs(context: Context, facts: DataFrame, runs: Sequence[int]) -> DataFrame:
    """The acknowledged non-poison records with their key and value (``run, record_id, key,
    value``): their appends, less those of records never acknowledged (few in a sound
    history, so that side is broadcast)."""
    kc = F.col("kc")
    appends = context.events.where(
        F.col("run").isin(*runs) & (kc == APPEND) & ~F.col("poison")
    ).select("run", "record_id", "key", "value")
    unacked = facts.where((F.col("n_app") >= 1) & (F.col("ack_n") == 0)).select("run", "record_id")
    return appends.join(unacked, ["run", "record_id"], "left_anti")


def count_mismatches(
    context: Context, facts: DataFrame, tables: DataFrame, runs: Sequence[int]
) -> DataFrame:
    """Keys whose table value differs from the acknowledged input's aggregate:
    ``run, sink, key, expected, observed (null: absent), pos, over, min_rid`` (``min_rid``:
    the smallest id of the key's records, only for absent keys, which sort by it)."""
    sinks = [
        (number, name, spec.aggregate.value)
        for number in runs
        for name, spec in context.runs[number].meta.sinks.items()
        if spec.kind is SinkKind.TABLE and spec.aggregate is not None
    ]
    aggregated = context.small(sinks, "run int, sink string, agg string")
    inputs = _inputs(context, facts, runs)
    per_key = inputs.groupBy("run", "key").agg(
        F.count(F.lit(1)).alias("n"), F.sum("value").alias("total")
    )
    expected = per_key.join(F.broadcast(aggregated), "run").select(
        "run",
        "sink",
        "key",
        F.when(F.col("agg") == Aggregate.COUNT.value, F.col("n"))
        .otherwise(F.col("total"))
        .alias("expected"),
    )
    observed = tables.join(F.broadcast(aggregated.select("run", "sink")), ["run", "sink"])
    joined = expected.join(observed, ["run", "sink", "key"], "full_outer").select(
        "run",
        "sink",
        "key",
        F.coalesce(F.col("expected"), F.lit(0).cast(_LONG)).alias("expected"),
        F.col("value").alias("observed"),
        "pos",
    )
    shown = F.coalesce(F.col("observed"), F.lit(0).cast(_LONG))
    wrong = context.keep(
        joined.where(shown != F.col("expected")).withColumn("over", shown > F.col("expected"))
    )
    absent = wrong.where(F.col("observed").isNull()).select("run", "key").distinct()
    firsts = (
        inputs.join(absent, ["run", "key"])
        .groupBy("run", "key")
        .agg(F.min("record_id").alias("min_rid"))
    )
    return wrong.join(firsts, ["run", "key"], "left")


# ---------------------------------------------------------------------- witness details


def records_between(
    facts: DataFrame, context: Context, ranges: Sequence[tuple[int, int, int, int, int]]
) -> dict[int, tuple[list[str], int]]:
    """For each ``(id, run, pno, low, high)``: the first :data:`MAX_WITNESSES` records
    appended at offsets ``low <= o < high`` of the partition, in append order, and how many
    there are (the local checker's ``records_between`` when offsets are in order)."""
    if not ranges:
        return {}
    wanted = context.small(list(ranges), "id int, run int, pno int, low long, high long")
    appends = facts.where(F.col("n_app") >= 1).select(
        "run",
        F.col("app_pno").alias("pno"),
        F.col("app_off").alias("off"),
        F.col("app_pos").alias("pos"),
        "record_id",
    )
    inside = appends.join(F.broadcast(wanted), ["run", "pno"]).where(
        (F.col("off") >= F.col("low")) & (F.col("off") < F.col("high"))
    )
    order = Window.partitionBy("id").orderBy("pos")
    counted = inside.select(
        "id",
        "record_id",
        "pos",
        F.row_number().over(order).alias("rn"),
        F.count(F.lit(1)).over(Window.partitionBy("id")).alias("n"),
    ).where(F.col("rn") <= MAX_WITNESSES)
    result: dict[int, tuple[list[str], int]] = {rid: ([], 0) for rid, *_ in ranges}
    grouped: dict[int, list[tuple[int, str]]] = {}
    counts: dict[int, int] = {}
    for row in counted.collect():
        grouped.setdefault(row["id"], []).append((row["pos"], row["record_id"]))
        counts[row["id"]] = row["n"]
    for rid, items in grouped.items():
        result[rid] = ([name for _, name in sorted(items)], counts[rid])
    return result


def append_offsets(
    facts: DataFrame, context: Context, partitions: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], list[tuple[int, str]]]:
    """The offsets and record ids of every append of the given ``(run, pno)`` partitions,
    in append order (used only for partitions whose appends are out of offset order)."""
    wanted = context.small(list(partitions), "run int, pno int")
    rows = (
        facts.where(F.col("n_app") >= 1)
        .select(
            "run",
            F.col("app_pno").alias("pno"),
            F.col("app_off").alias("off"),
            F.col("app_pos").alias("pos"),
            "record_id",
        )
        .join(F.broadcast(wanted), ["run", "pno"])
        .collect()
    )
    result: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for row in rows:
        result.setdefault((row["run"], row["pno"]), []).append(
            (row["pos"], row["off"], row["record_id"])
        )
    return {key: [(off, rid) for _, off, rid in sorted(items)] for key, items in result.items()}


def key_records(
    context: Context, facts: DataFrame, keys: Sequence[tuple[int, str]]
) -> dict[tuple[int, str], list[str]]:
    """The first :data:`MAX_WITNESSES` ids (sorted) of the acknowledged non-poison records
    with each ``(run, key)``."""
    if not keys:
        return {}
    wanted = context.small(list(keys), "run int, key string")
    runs = sorted({run for run, _ in keys})
    inputs = _inputs(context, facts, runs).join(F.broadcast(wanted), ["run", "key"])
    order = Window.partitionBy("run", "key").orderBy("record_id")
    rows = (
        inputs.select("run", "key", "record_id", F.row_number().over(order).alias("rn"))
        .where(F.col("rn") <= MAX_WITNESSES)
        .collect()
    )
    result: dict[tuple[int, str], list[str]] = {key: [] for key in keys}
    for row in sorted(rows, key=lambda r: (r["run"], r["key"], r["rn"])):
        result[(row["run"], row["key"])].append(row["record_id"])
    return result


def observed_parts(
    context: Context, runs: Sequence[int], wanted: Sequence[tuple[int, str]]
) -> dict[tuple[int, str], set[int]]:
    """Every part of each ``(run, record_id)`` that a log sink shows."""
    if not wanted:
        return {}
    table = context.small(list(wanted), "run int, record_id string")
    ev = context.events.where(F.col("run").isin(*runs))
    rows = (
        ev.where((F.col("kc") == OBSERVE) & (F.col("sk").bitwiseAND(SINK_LOG) != 0))
        .join(F.broadcast(table), ["run", "record_id"])
        .select("run", "record_id", "part")
        .distinct()
        .collect()
    )
    result: dict[tuple[int, str], set[int]] = {key: set() for key in wanted}
    for row in rows:
        result[(row["run"], row["record_id"])].add(int(row["part"]))
    return result


def positions(context: Context, runs: Sequence[int], code: int) -> dict[int, list[int]]:
    """The positions of every event of kind ``code`` in each of ``runs``."""
    rows = (
        context.events.where(F.col("run").isin(*runs) & (F.col("kc") == code))
        .select("run", "pos")
        .collect()
    )
    result: dict[int, list[int]] = {run: [] for run in runs}
    for row in rows:
        result[row["run"]].append(row["pos"])
    return {run: sorted(items) for run, items in result.items()}


# ----------------------------------------------------------------------------- problems


def problems(context: Context, runs: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """For each run that fails validation: its first 20 event problems in the validator's
    order (by event, then by rule), as rows of ``pos, code`` and the event's fields, plus
    ``earlier_*`` (the append that placed the record) and ``acked_*`` (the acknowledged
    offset an append is not above); like the validator, these name events by their
    ``index`` field, and the event itself by its position."""
    assert context.raw is not None
    ev = with_flags(context.raw.where(F.col("run").isin(*runs)).drop("bad"))
    entries = [
        F.when(
            F.col(f"f_{name}"),
            F.struct(F.lit(_SEQ[name]).alias("seq"), F.lit(name).alias("code")),
        )
        for name in PROBLEM_FLAGS
    ]
    local = ev.select(
        *[name for name in ev.columns if not name.startswith("f_")],
        F.filter(F.array(*entries), lambda x: x.isNotNull()).alias("found"),
    )
    cached = context.keep(local)
    per_event = cached.select("*", F.explode("found").alias("problem")).select(
        "*", F.col("problem.seq").alias("seq"), F.col("problem.code").alias("code")
    )
    stateful = _stateful(cached.where(F.col("stateful")))
    columns = [
        ("run", _INT),
        ("pos", _LONG),
        ("seq", _INT),
        ("code", _STR),
        *[
            (name, _LONG if name in INT_FIELDS or name == "index" else _STR)
            for name in _COLUMNS
            if name != "dlsn"
        ],
        ("earlier_pos", _LONG),
        ("earlier_partition", _STR),
        ("earlier_offset", _LONG),
        ("acked_offset", _LONG),
        ("acked_pos", _LONG),
    ]
    found = _union([_conform(per_event, columns), _conform(stateful, columns)])
    order = Window.partitionBy("run").orderBy("pos", "seq")
    rows = (
        found.select("*", F.row_number().over(order).alias("rn")).where(F.col("rn") <= 20).collect()
    )
    result: dict[int, list[dict[str, Any]]] = {run: [] for run in runs}
    for row in sorted(rows, key=lambda r: (r["run"], r["rn"])):
        result[row["run"]].append(row.asDict())
    return result


def _stateful(candidates: DataFrame, rounds: int = 2) -> DataFrame:
    """The validator's append/ack/read rules over events that pass the per-event rules.

    The validator keeps, per record, the first append it accepted, and per partition the
    highest offset acknowledged so far (by an ack of an accepted append at the same place).
    Both depend on each other in event order; this computes them with window functions by
    first counting every ack that matches an earlier append at its place, then (``rounds -
    1`` more times) only the acks that match the append accepted before them. That is the
    validator's answer whenever no record id is appended twice at different places (and
    in nearly all cases when one is)."""
    kc = F.col("kc")
    pos = F.col("pos")
    base = candidates.select(
        "run",
        "pos",
        "kc",
        "index",
        "kind",
        "process",
        "partition",
        "pno",
        "offset",
        "record_id",
        "part",
        "parts",
        "key",
        "value",
        "sink",
        "output_id",
        "txn",
        "detail",
    )
    same_place = Window.partitionBy("run", "record_id", "pno", "offset").orderBy("pos")
    matching = base.select(
        "*",
        (
            (kc == ACK)
            & F.min(F.when(kc == APPEND, pos))
            .over(same_place.rowsBetween(Window.unboundedPreceding, -1))
            .isNotNull()
        ).alias("counts"),
    )
    per_partition = (
        Window.partitionBy("run", "pno").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    )
    per_record = Window.partitionBy("run", "record_id")
    current = matching
    for round_number in range(rounds):
        step = current.select(
            *[c for c in current.columns if c not in ("acked", "accepted")],
            F.max(
                F.when(
                    F.col("counts"),
                    F.struct(
                        F.col("offset").alias("o"), (-pos).alias("p"), F.col("index").alias("i")
                    ),
                )
            )
            .over(per_partition)
            .alias("acked"),
        )
        accepts = (kc == APPEND) & (F.col("acked").isNull() | (F.col("offset") > F.col("acked.o")))
        step = step.select(
            "*",
            F.min(
                F.when(
                    accepts,
                    F.struct(
                        pos.alias("p"),
                        F.col("pno").alias("n"),
                        F.col("offset").alias("o"),
                        F.col("partition").alias("name"),
                        F.col("index").alias("i"),
                    ),
                )
            )
            .over(per_record)
            .alias("accepted"),
        )
        if round_number + 1 < rounds:
            step = step.withColumn(
                "counts",
                (kc == ACK)
                & F.col("accepted").isNotNull()
                & (F.col("accepted.p") < pos)
                & (F.col("accepted.n") == F.col("pno"))
                & (F.col("accepted.o") == F.col("offset")),
            )
        current = step
    accepted = F.col("accepted")
    earlier = accepted.isNotNull() & (F.col("accepted.p") < pos)
    code = (
        F.when((kc == APPEND) & earlier, "duplicate")
        .when(
            (kc == APPEND) & F.col("acked").isNotNull() & (F.col("offset") <= F.col("acked.o")),
            "not_above",
        )
        .when(kc.isin(ACK, READ) & ~F.coalesce(earlier, F.lit(False)), "not_appended")
        .when(
            kc.isin(ACK, READ)
            & ((F.col("accepted.n") != F.col("pno")) | (F.col("accepted.o") != F.col("offset"))),
            "misplaced",
        )
    )
    return current.select(
        "*",
        code.alias("code"),
        F.lit(50).alias("seq"),
        F.col("accepted.i").alias("earlier_pos"),
        F.col("accepted.name").alias("earlier_partition"),
        F.col("accepted.o").alias("earlier_offset"),
        F.col("acked.o").alias("acked_offset"),
        F.col("acked.i").alias("acked_pos"),
    ).where(F.col("code").isNotNull())
