"""The events of every run, as the later queries read them (internal; imports pyspark).

:func:`load` reads every run's files in one scan and annotates each event with its run and
position, the codes of its kind, partition and sink (the numbers the other queries compare),
and whether it breaks a per-event rule of the validator (:func:`with_flags` says which, in
the validator's order). :class:`QueryContext` holds the annotated events and keeps (checkpoints)
the frames later queries read more than once, so every query plan stays small.
"""

from __future__ import annotations

import contextlib
import functools
import re
import urllib.parse
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness._shown import shown
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
from harness.spark.check._failure import SparkCheckFailed
from harness.spark.source import RunSource

__all__ = ["QueryContext", "load"]

KIND_CODES: Final = {kind.value: code for code, kind in enumerate(EventKind)}
_K = {kind: code for code, kind in enumerate(EventKind)}
APPEND: Final = _K[EventKind.APPEND]
ACK: Final = _K[EventKind.ACK]
INDETERMINATE: Final = _K[EventKind.INDETERMINATE]
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
_SPLITS_PER_SLOT: Final = 4
"""File splits per unit of the session's default parallelism (its cores, or
``spark.default.parallelism``), unless the session sets ``spark.sql.files.minPartitionNum``."""
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


def conform(frame: DataFrame, columns: Sequence[tuple[str, T.DataType]]) -> DataFrame:
    """``frame`` with exactly ``columns`` (missing ones as typed nulls), in that order."""
    present = set(frame.columns)
    # SQL text: one call into the JVM, not four per column (the ranking query conforms
    # every occurrence frame to some twenty columns)
    return frame.selectExpr(
        *[
            f"CAST({f'`{name}`' if name in present else 'NULL'} AS {kind.simpleString()})"
            f" AS `{name}`"
            for name, kind in columns
        ]
    )


def union_all(frames: Iterable[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def sorted_events(*columns: Column) -> Column:
    """The distinct non-null event positions among ``columns``, ascending."""
    return F.array_sort(F.array_distinct(F.filter(F.array(*columns), lambda x: x.isNotNull())))


BROADCAST_ROWS: Final = 200_000
"""Up to this many rows, the small side of a join the driver can bound is broadcast."""


@dataclass(slots=True)
class QueryContext:
    """The annotated events of all runs and the small tables the queries share."""

    spark: SparkSession
    runs: tuple[RunSource, ...]
    events: DataFrame
    """Every event, compact: ``run``, ``pos`` (its position in its run), ``kc`` (kind code,
    null for an unknown kind), ``pno`` (partition number, null if undeclared), ``sk`` (sink
    code, null if undeclared), the other fields but ``partition``, ``index``, ``kind``,
    ``dlsn`` and ``detail``, which become ``poison``, ``redelivered``, ``ed`` (the detail of
    an ``end``) and ``bad`` (the event fails a per-event rule of the validator). Read from
    the files by every query over it (the fused pass caches what the later ones need)."""
    partitions: int
    cached: list[DataFrame]
    persisted: list[DataFrame] = field(default_factory=list)
    restore: dict[str, str | None] = field(default_factory=dict)
    raw: DataFrame | None = None
    """All fields of every event, read from the files (for the validator's messages)."""

    def keep(self, frame: DataFrame, *, eager: bool = True) -> DataFrame:
        """Compute ``frame`` now (or, not ``eager``, in the first query over it) and keep its
        rows (memory, spilling to disk) until :meth:`release`; the result has a one-node
        plan, so later queries over it stay small and never compute it again. Kept lazily,
        the rows cost no job of their own: the first query's job stores them as it reads
        them (the columnar cache, :meth:`cache`, costs a job per scan of it in a query)."""
        kept = frame.localCheckpoint(eager=eager, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self.cached.append(kept)
        return kept

    def cache(self, frame: DataFrame) -> DataFrame:
        """``frame`` cached (memory, spilling to disk) by the first query over it.

        Up to :data:`_UNCOMPRESSED_ROWS` events the cache is built uncompressed (about a
        third faster to build; larger ones stay compressed to spill less), unless the
        session sets ``spark.sql.inMemoryColumnarStorage.compressed`` itself."""
        if sum(run.rows for run in self.runs) <= _UNCOMPRESSED_ROWS:
            self.prefer("spark.sql.inMemoryColumnarStorage.compressed", "false")
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self.persisted.append(frame)
        return frame

    def prefer(self, key: str, value: str) -> None:
        """Set the SQL setting ``key`` to ``value`` until :meth:`release`, unless the session
        was started with a value of its own for it (the user's choice wins)."""
        if key in self.restore or self._started_with(key):
            return
        self.restore[key] = self.spark.conf.get(key, None)
        self.spark.conf.set(key, value)

    def _started_with(self, key: str) -> bool:
        """Whether the session was started with a value of its own for ``key`` (asked of the
        JVM's configuration: pyspark's ``getConf`` copies it, a call into the JVM per
        setting, some 125 of them)."""
        return bool(self.spark.sparkContext._jsc.sc().getConf().contains(key))

    @contextlib.contextmanager
    def setting(self, key: str, value: str) -> Iterator[None]:
        """Set the SQL setting ``key`` to ``value`` for the queries planned in the block
        (Spark plans a query at its action, or a kept frame at :meth:`keep`), unless the
        session was started with a value of its own for it or :meth:`prefer` set it."""
        if key in self.restore or self._started_with(key):
            yield
            return
        before = self.spark.conf.get(key, None)
        self.spark.conf.set(key, value)
        try:
            yield
        finally:
            if before is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, before)

    def release(self) -> None:
        """Drop the rows of every kept and cached frame (and restore the settings
        :meth:`prefer` changed)."""
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

    def side(self, frame: DataFrame, rows: int) -> DataFrame:
        """``frame`` marked for broadcasting when it has at most :data:`BROADCAST_ROWS` rows
        (``rows``: a bound the driver knows, e.g. from the fused pass's totals). Spark
        cannot know it: a frame filtered from the cache is estimated at the cache's size,
        so a join with it would shuffle and sort the large side."""
        return F.broadcast(frame) if rows <= BROADCAST_ROWS else frame

    def small(self, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
        """:func:`local_frame` in this session."""
        return local_frame(self.spark, rows, schema)


def local_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: str) -> DataFrame:
    """A small table of ``rows`` (``schema``: ``"name type, ..."``) held in the query plan
    itself (a local relation): broadcasting it runs no Spark job, unlike a frame made from
    a list, which is an RDD. The values are bound as parameters, never spliced into SQL."""
    columns = [part.strip().split(" ") for part in schema.split(",")]
    casts = ", ".join(f"CAST(c{i} AS {kind}) AS {name}" for i, (name, kind) in enumerate(columns))
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    if not rows:
        nulls = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in columns)
        return spark.sql(f"SELECT {nulls} WHERE false")
    args: dict[str, Any] = {}
    values = []
    for i, row in enumerate(rows):
        marks = []
        for j, value in enumerate(row):
            args[f"v{i}_{j}"] = value
            marks.append(f":v{i}_{j}")
        values.append(f"({', '.join(marks)})")
    table = f"VALUES {', '.join(values)} AS t({names})"
    return spark.sql(f"SELECT {casts} FROM {table}", args=args)


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


def load(spark: SparkSession, runs: tuple[RunSource, ...], partitions: int) -> QueryContext:
    """Read every file of ``runs`` in one scan and annotate the events (lazily: no job runs).

    Each row gets its run and position from its file (``_metadata.file_path`` and
    ``_metadata.row_index``), its kind code and the codes of its partition and sink."""
    context = QueryContext(spark, runs, _scanned(spark, runs), partitions, [])
    # a history is one file or few, read by default in about as many splits as the session
    # has cores: a core whose split is done idles while another finishes (on the 20M-event
    # bench history, 4 splits per unit of parallelism took the check from 67.9 s to 61.5 s)
    parallelism = spark.sparkContext.defaultParallelism
    context.prefer("spark.sql.files.minPartitionNum", str(_SPLITS_PER_SLOT * parallelism))
    # no row group is skipped by its statistics: they are footer bytes no checksum covers
    # (the digests are of the decoded columns), so damaged ones must not drop events unseen
    context.prefer("spark.sql.parquet.filterPushdown", "false")
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
    events = _coded(context, context.events, "partition", "pno", partition_rows)
    events = _coded(context, events, "sink", "sk", sink_rows)
    events = events.withColumn("kc", _kind_code())
    context.raw = events.withColumn("bad", _bad())
    context.events = _compact(context.raw)
    return context


_INLINE_CODES: Final = 64
"""Up to this many names, their codes are looked up by an expression, not a join."""


def sql(*expressions: str) -> list[Column]:
    """Columns from SQL text (``"expression AS name"``): one call into the JVM each, where a
    column built from functions and operators makes one per node. For expressions over
    column names and the checker's constants only: a value from a history is a literal."""
    return [F.expr(expression) for expression in expressions]


def when(test: str, column: str) -> str:
    """SQL text: column ``column`` where ``test`` (SQL) holds, else null."""
    return f"CASE WHEN {test} THEN `{column}` END"


def in_places(places: Mapping[int, Collection[int | None] | None], pno: str = "pno") -> str:
    """SQL text: whether a row's ``run`` and partition (column ``pno``) are among ``places``
    (run -> its partition numbers, ``None`` among them for the undeclared ones; ``None``
    instead of a collection for every partition of the run). Numbers only, spliced as such;
    the partitions are a set of literal structs, which Spark tests by a hash set, not a
    chain of ORs."""
    pairs = sorted(
        {
            (int(run), int(number))
            for run, numbers in places.items()
            for number in numbers or ()
            if number is not None
        }
    )
    undeclared = sorted(
        {int(run) for run, numbers in places.items() if numbers is not None and None in numbers}
    )
    whole = sorted({int(run) for run, numbers in places.items() if numbers is None})
    tests = ["false"]
    if whole:
        tests.append(f"run IN ({', '.join(map(str, whole))})")
    if pairs:
        listed = ", ".join(f"named_struct('r', {run}, 'p', {number})" for run, number in pairs)
        tests.append(f"named_struct('r', run, 'p', `{pno}`) IN ({listed})")
    if undeclared:
        tests.append(f"(`{pno}` IS NULL AND run IN ({', '.join(map(str, undeclared))}))")
    return "(" + " OR ".join(tests) + ")"


def cases(pairs: Iterable[tuple[Column, Any]]) -> Column | None:
    """``CASE WHEN test THEN value ... END`` over ``pairs`` in order (null where no test
    holds), or None for no pairs: the expression the queries use instead of a small join."""
    chain: Column | None = None
    for test, value in pairs:
        chain = F.when(test, value) if chain is None else chain.when(test, value)
    return chain


def _coded(
    context: QueryContext, events: DataFrame, name: str, code: str, rows: list[tuple[int, str, int]]
) -> DataFrame:
    """``events`` with column ``code``: the code of column ``name`` in the event's run
    (``rows``: run, name, code), null when the run declares no such name."""
    if len(rows) > _INLINE_CODES:
        table = context.small(rows, f"run int, {name} string, {code} int")
        return events.join(F.broadcast(table), ["run", name], "left")
    tests = [
        f"WHEN run = {int(run)} AND `{name}` = {_text(value)} THEN {int(number)}"
        for run, value, number in rows
    ]
    # SQL text: one call into the JVM, where the columns made five per name
    cased = f"CASE {' '.join(tests)} END" if tests else "NULL"
    return events.withColumn(code, F.expr(f"CAST({cased} AS INT)"))


def _text(value: str) -> str:
    """SQL text of the string ``value`` from a history (a partition's or a sink's name, a
    file's path): its UTF-8 bytes in hexadecimal, decoded by Spark (folded to a literal when
    the query is planned), so that nothing of the value itself is ever spliced into SQL."""
    return f"decode(unhex('{value.encode('utf-8').hex()}'), 'UTF-8')"


def _scanned(spark: SparkSession, runs: tuple[RunSource, ...]) -> DataFrame:
    """Every event of ``runs`` in one scan, with its ``run`` and ``pos``. Its columns are SQL
    text (one call into the JVM per frame), the files' paths hex-decoded literals
    (:func:`_text`)."""
    columns = [f"`{name}`" for name in _COLUMNS if name != "dlsn"]
    reader = spark.read.schema(_schema()).option("recursiveFileLookup", "true")
    files = [(number, file) for number, run in enumerate(runs) for file in run.files]
    if not files:
        raise ValueError("no runs to load")
    if len(files) == 1:
        return reader.parquet(files[0][1].uri).selectExpr(
            f"CAST({int(files[0][0])} AS INT) AS run", "_metadata.row_index AS pos", *columns
        )
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
            raise SparkCheckFailed(
                f"Spark scans {shown(uri)}, a file the checker did not list among the "
                f"{len(files)} it found: was the history changed while it was checked? "
                "Check it again once nothing writes to it"
            )
        mapping.append((_normalized(uri), found[0], found[1]))
    if not mapping:  # Spark lists the files it scans; a CASE without a branch fails to parse
        raise SparkCheckFailed(
            f"Spark lists none of the {len(files)} history files the checker found (the first: "
            f"{shown(files[0][1].uri)}): check again, and report it if it happens again"
        )
    events = frame.selectExpr(
        "regexp_replace(_metadata.file_path, '^file:/+', '/') AS file",
        "_metadata.row_index AS row",
        *columns,
    )
    if len(mapping) > _INLINE_CODES:
        table = local_frame(spark, mapping, "file string, run int, base long")
        events = events.join(F.broadcast(table), "file")
    else:
        # a few files are matched by an expression: a broadcast costs a Spark job in every
        # query that scans the files
        def of(values: Iterable[tuple[str, int]], kind: str) -> str:
            tests = " ".join(f"WHEN file = {_text(path)} THEN {int(v)}" for path, v in values)
            return f"CAST(CASE {tests} END AS {kind})"

        events = events.selectExpr(
            "*",
            f"{of(((path, run) for path, run, _ in mapping), 'INT')} AS run",
            f"{of(((path, base) for path, _, base in mapping), 'BIGINT')} AS base",
        ).where("run IS NOT NULL")
    return events.selectExpr("run", "base + row AS pos", *columns)


# The constant expressions of the annotation are written as SQL text: one call into the
# JVM each, where building them from columns made thousands (about half a second of the
# driver's per check, measured in docs/spark.md). They name only the history's own columns
# and this module's constants, never a value from a history.


def _sql_string(value: str) -> str:
    """``value``, one of this module's constant names, as a SQL string literal."""
    if not value.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"not a constant name: {value!r}")
    return f"'{value}'"


def _kind_code() -> Column:
    """The code of an event's kind (null for an unknown kind), frequent kinds tested first."""
    kinds = (*_FREQUENT_FIRST, *[k for k in EventKind if k not in _FREQUENT_FIRST])
    tests = " ".join(f"WHEN kind = {_sql_string(k.value)} THEN {_K[k]}" for k in kinds)
    return F.expr(f"CASE {tests} END")


def _detail_is(kind: int, detail: str) -> str:
    """The SQL test of an event of kind code ``kind`` (any kind if negative) with ``detail``."""
    test = f"coalesce(detail = {_sql_string(detail)}, false)"
    return test if kind < 0 else f"(kc = {kind} AND {test})"


def _compact(raw: DataFrame) -> DataFrame:
    """The columns of :attr:`QueryContext.events` from the annotated events."""
    return raw.selectExpr(
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
        f"{_detail_is(APPEND, AppendDetail.POISON.value)} AS poison",
        f"{_detail_is(-1, ReadDetail.REDELIVERED.value)} AS redelivered",
        f"{_detail_is(APPEND, AppendDetail.RESENT.value)} AS resent",
        f"(kc = {INDETERMINATE} OR {_detail_is(APPEND, AppendDetail.RETRIED.value)}) AS local_only",
        f"CASE WHEN kc = {END} THEN detail END AS ed",
        "bad",
    )


def _bad() -> Column:
    """True when the event breaks any per-event rule of the validator (a flat test: which
    rules and in which order is :func:`with_flags`'s business, for the messages)."""
    missing = " ".join(
        f"WHEN kc = {_K[kind]} THEN ({' OR '.join(f'`{n}` IS NULL' for n in fields) or 'false'})"
        for kind, fields in REQUIRED_FIELDS.items()
    )
    tests = [
        "`index` IS NULL",
        "`index` != pos",
        f"CASE {missing} ELSE true END",
        "`offset` < 0",
        "part < 0",
        "parts < 1",
        "part >= parts",
        "(`partition` IS NOT NULL AND pno IS NULL)",
        f"(kc IN ({EMIT}, {PUT}, {OBSERVE}) AND sk IS NULL)",
        f"(kc = {PUT} AND (sk & {SINK_TABLE}) = 0)",
        f"(kc = {OBSERVE} AND (sk & {SINK_LOG}) != 0 AND (output_id IS NULL OR part IS NULL))",
        f"(kc = {OBSERVE} AND (sk & {SINK_TABLE}) != 0"
        " AND (output_id IS NOT NULL OR `key` IS NULL OR `value` IS NULL))",
    ]
    return F.expr(f"coalesce({' OR '.join(tests)}, false)")


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
