"""The fused pass of the Spark checker: one scan of every run's events and one shuffle keyed
by record, producing every count the verdict needs (internal).

:func:`fused` groups every event by what it belongs to, its *grain*: a record
(``append``, ``ack``, ``read``, ``emit`` and log-sink ``observe`` events with a record id),
a key of a table sink (its ``observe`` events, and in an aggregated one a copy of each
non-poison append with that key: :func:`_with_inputs`), a rare event (``fetch``, ``commit``,
``rollback``, ``truncate``, ``end``, ``drain``, ``txn-abort`` or a log-sink ``observe``
without a record id: one group each, its fields as group keys) or the rest of its run
(spread over a few buckets). Each group carries a few counters (events, malformed events,
resends) next to its own facts; the other run-wide counters of the validator (ends, drains,
appends, ...) are counted from the rare events' groups, so one aggregation over the groups,
run by run, gives the :class:`Summary` of each run and the record-level totals (lost
effects, copies, unexpected outputs, the validator's certificate, the keys of aggregated
tables whose last value is not their inputs' total), summed in the same aggregation as
phase one's order certificates (:mod:`._certify`): one action,
whose job keeps the groups (a lazy local checkpoint) for the queries that follow
(witnesses, the partition pass, table aggregates), which read them, not the files.

Every event pays for every aggregate, so the facts only table or ordered sinks need are
aggregated only when some run declares such a sink (:class:`Needs`); phase two counts a
key's acknowledged inputs exactly by a query of its own
(:func:`~harness.spark.check.queries.inputs_per_key`) where phase one could not clear them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.history.events import Aggregate, EndDetail, SinkKind
from harness.spark.check.queries._load import (
    _BITS,
    _LONG,
    ACK,
    APPEND,
    COMMIT,
    DRAIN,
    EMIT,
    END,
    FETCH,
    OBSERVE,
    READ,
    ROLLBACK,
    SINK_COUNT,
    SINK_LOG,
    SINK_ORDERED,
    SINK_SUM,
    SINK_TABLE,
    TRUNCATE,
    TXN_ABORT,
    QueryContext,
    cases,
    in_places,
    sql,
    when,
)

__all__ = [
    "FACT_COLUMNS",
    "Fused",
    "Summary",
    "exact_below",
    "fused",
    "per_run_rows",
    "record_totals",
]

RECORD: Final = 0
"""Grain of a record's events (``gk``: its id)."""
TABLE: Final = 1
"""Grain of a table sink key's observes (``gk``: the key, ``gs``: the sink)."""
CONTROL: Final = 2
"""Grain of one fetch, commit, rollback, truncate, end, drain, transaction abort or log-sink
observe without a record id (``gp``: its position, ``gs``: the detail of an end): the run's
rare events, one group each, so the run-wide counters of the summary are counted from their
groups (:func:`_totals`), not by aggregates every event pays for."""
REST: Final = 3
"""Grain of the other events of a run (``gp``: one of :data:`_BUCKETS` buckets)."""
_BUCKETS: Final = 64
INPUT: Final = -1
"""Kind code of a non-poison append's copy in each aggregated table sink of its run, in the
group of its key there (:func:`_with_inputs`): 1 for a count, its value for a sum."""
_AGGREGATED: Final = SINK_COUNT | SINK_SUM
_INLINE_RUNS: Final = 64
"""Up to this many runs with an aggregated table sink, an append's sinks are found by a
``CASE`` on its run; more, by a map from run to sinks."""
_KEYS: Final = ("run", "grain", "gk", "gp", "own")
"""The group keys. ``own`` holds ``gs`` and a rare event's own fields (``e_*``), null in the
record and other grains: they are keys of its group, which holds it alone, rather than
aggregates every event would pay for; one struct rather than five columns, because Spark's
generated code passes each column of an operator's input as a parameter (two when it can be
null), and HotSpot's optimizing compiler declines methods with that many (``COMPILE SKIPPED:
unsupported calling sequence``, measured in docs/spark.md)."""
_COMPLETE: Final = EndDetail.COMPLETE.value
_BYPASS_PARTIAL: Final = "spark.sql.execution.bypassPartialAggregation"
"""One aggregation after the shuffle, no partial one before it (a setting of Spark 4.3;
versions without it ignore it)."""
_PARTS: Final = "greatest(cast(1 as bigint), parts_max)"
"""A record's expected parts: ``max(1, parts of its emits)``."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Per-run facts of the fused pass (see :func:`fused`)."""

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
    resent: int = 0
    """Appends of a record id again (an upstream's resends)."""
    rollbacks: int = 0
    local_only: int = 0
    """Producer retries (``retried`` appends) and ``indeterminate`` sends, which only the
    local checker's rules judge."""


@dataclass(frozen=True, slots=True)
class Needs:
    """Which facts beyond the record rules' the runs' sinks need (see :func:`needs`)."""

    tables: bool
    """Some run has a table sink with an aggregate (the last value of each key)."""
    ordered: bool
    """Some run has an ordered log sink (a record's first observe and parts there)."""


def needs(context: QueryContext) -> Needs:
    """What the sinks of ``context``'s runs need from the fused pass."""
    sinks = [spec for run in context.runs for spec in run.meta.sinks.values()]
    return Needs(
        tables=any(s.kind is SinkKind.TABLE and s.aggregate is not None for s in sinks),
        ordered=any(s.kind is SinkKind.LOG and s.ordered for s in sinks),
    )


@dataclass(frozen=True, slots=True)
class Fused:
    """What :func:`fused` gives: each run's :class:`Summary` and record totals (a row with
    ``bad, acknowledged, expected_effects, duplicates, lost, unknown, unexpected`` and
    ``multi_read``: records read more than once, ``crowded``: records showing more than one
    part in an ordered sink, ``unacked_inputs``: non-poison records appended and never
    acknowledged), and the cached groups, as frames."""

    summaries: dict[int, Summary]
    totals: dict[int, Any]
    groups: DataFrame

    @property
    def facts(self) -> DataFrame:
        """One row per record (the columns of :data:`FACT_COLUMNS`)."""
        # a record's id is its group key: kept once in the cache, named here
        columns = ["gk AS record_id" if n == "record_id" else f"`{n}`" for n in FACT_COLUMNS]
        return self.groups.where(f"grain = {RECORD}").selectExpr(*columns)

    @property
    def tables(self) -> DataFrame:
        """The last value of every key of every table sink: ``run, sink, key, value, pos``
        (values only when some run has a table sink with an aggregate: :class:`Needs`)."""
        # a key's group with its inputs alone (no observe, no position) shows no value
        shown = (F.col("grain") == TABLE) & F.col("t_pos").isNotNull()
        return self.groups.where(shown).select(
            "run",
            F.col("gs").alias("sink"),
            F.col("gk").alias("key"),
            F.col("t_value").alias("value"),
            F.col("t_pos").alias("pos"),
        )

    def ladder(self, places: Mapping[int, Collection[int | None] | None]) -> DataFrame:
        """The reads, fetches, commits, rollbacks and truncates with a partition (``run, pno,
        pos, kc, off, process, redelivered``) of ``places`` (run -> its partitions, ``None``
        for all: :func:`~._load.in_places`), from the cache; exact for runs whose records
        are read at most once each (``multi_read`` is 0)."""
        grain = F.col("grain")
        reads = self.groups.where(
            (grain == RECORD)
            & (F.col("read_n") == 1)
            & F.col("read_pno").isNotNull()
            & F.expr(in_places(places, "read_pno"))
        ).select(
            "run",
            F.col("read_pno").alias("pno"),
            F.col("read_last").alias("pos"),
            F.lit(READ).alias("kc"),
            F.col("read_off").alias("off"),
            F.col("read_proc").alias("process"),
            F.col("read_red").alias("redelivered"),
        )
        return reads.unionByName(self.control.where(in_places(places)))

    @property
    def control(self) -> DataFrame:
        """Every fetch, commit, rollback and truncate with a partition (the columns of
        :meth:`ladder`), from the cache."""
        return self.groups.where(
            (F.col("grain") == CONTROL)
            & F.col("e_pno").isNotNull()
            & F.col("e_kc").isin(FETCH, COMMIT, ROLLBACK, TRUNCATE)
        ).select(
            "run",
            F.col("e_pno").alias("pno"),
            F.col("gp").alias("pos"),
            F.col("e_kc").alias("kc"),
            F.col("e_off").alias("off"),
            F.col("e_proc").alias("process"),
            F.lit(False).alias("redelivered"),
        )


FACT_COLUMNS: Final = (
    "run",
    "record_id",
    "n_app",
    "app_pos",
    "app_pno",
    "app_off",
    "app_value",
    "poison",
    "ack_n",
    "ack_first",
    "read_last",
    "emit_last",
    "parts",
    "obs_n",
    "below",
    "extra",
    "unacc",
    "omask",
    "cert_bad",
    "ordered_first",
    "ordered_effects",
)
"""The facts of a record: its append (``n_app``, ``app_pos``, ``app_pno``, ``app_off``,
``app_value``, ``poison``), its acks (``ack_n``, ``ack_first``), its last read
and emit, ``parts`` (the expected parts, ``max(1, parts of its emits)``), its observes
(``obs_n``; ``below``: how many expected parts a log sink shows, null when that needs
:func:`exact_below`; ``extra``: copies beyond the first of each part; ``unacc``: outputs its
rules do not allow, null when that needs :func:`exact_below`; ``omask``: the observed parts
below 62 as bits), ``cert_bad`` (its acks and reads do not match its single append: the
history fails validation), and for ordered log sinks ``ordered_effects`` (how many of its
parts they show) and ``ordered_first`` (the first such observe)."""


def fused(context: QueryContext) -> Fused:
    """The fused pass over every run and phase one's certificates (one scan, one shuffle by
    record, one by partition and offset, one action collecting a row per run and partition,
    and a small one for the detail of a last ``end`` that is not ``complete``); the groups
    stay kept for the later queries, until :meth:`QueryContext.release`. ``totals`` also
    holds per run ``order_open`` and ``sink_open`` (the partitions the order certificate, or
    the ordered sink's, does not cover, ``None`` for the undeclared ones: empty when it
    covers the run) and ``under`` and ``over`` (keys of aggregated table sinks below and
    above their expected value)."""
    from harness.spark.check.queries._certify import open_partition, pair_rows, partition_inputs

    # the groups' aggregation, planned in this block (a kept frame is planned when kept),
    # aggregates once, after its shuffle (measured in docs/spark.md): a record's events lie
    # far apart in the files, so a partial aggregation before it folds little and costs a
    # second pass
    with context.setting(_BYPASS_PARTIAL, "true"):
        # kept lazily: the one action below stores the groups as it reads them, for phase two
        groups = context.keep(_groups(context, needs(context)), eager=False)
    pairs = partition_inputs(pair_rows(groups, f"grain = {RECORD}", f"grain = {CONTROL}"))
    collected = per_run_rows(groups, pairs).collect()
    rows: dict[int, dict[str, Any]] = {}
    for row in collected:
        if row["pno"] is None:
            rows.setdefault(int(row["run"]), {}).update(row.asDict())
    for row in collected:
        entry = rows.setdefault(int(row["run"]), {})
        order, sink = open_partition(row.asDict())
        # the totals' row (partition null) also holds the pairs of undeclared partitions
        for name, opened in (("order_open", order), ("sink_open", sink)):
            entry.setdefault(name, set()).update([row["pno"]] if opened else [])
    rows = {run: row for run, row in rows.items() if row.get("n")}
    # the detail of a run's last end: "complete" from the totals, any other read back
    ends = [row["end_pos"] for row in rows.values() if row["end_complete"] is False]
    details = {(run, row["end_pos"]): _COMPLETE for run, row in rows.items() if row["end_complete"]}
    if ends:
        found = groups.where(
            (F.col("grain") == CONTROL) & (F.col("e_kc") == END) & F.col("gp").isin(*ends)
        )
        details.update(
            {
                (int(row["run"]), row["gp"]): row["gs"]
                for row in found.select("run", "gp", "gs").collect()
            }
        )
    summaries = {
        run: _summary(row, details.get((run, row["end_pos"]))) for run, row in rows.items()
    }
    return Fused(summaries, rows, groups)


def per_run_rows(groups: DataFrame, pairs: tuple[DataFrame, list[Column]] | None) -> DataFrame:
    """Phase one's one action: the run's totals (the groups' row, partition null) and each
    partition's certificate findings (``pairs``: the rows and the aggregates of
    :func:`~._certify.partition_inputs`; None leaves them out, for ``bench/floor_spark.py``)
    in one aggregation. Planned with a partial aggregation before its shuffle, which folds
    the groups' rows to one per run and task there (without it every group's row was
    shuffled to one task)."""
    rows = groups.withColumn("pno", F.lit(None).cast("int"))
    aggregates = _total_aggregates()
    if pairs is not None:
        rows = rows.unionByName(pairs[0], allowMissingColumns=True)
        aggregates = [*aggregates, *pairs[1]]
    return rows.groupBy("run", "pno").agg(*aggregates)


def _summary(row: Any, end_detail: str | None) -> Summary:
    return Summary(
        events=int(row["n"]),
        bad=int(row["bad_events"]),
        ends=int(row["n_end"]),
        end_pos=row["end_pos"],
        end_detail=end_detail,
        drains=int(row["n_drain"]),
        drain_pos=row["drain_pos"],
        aborts=int(row["n_abort"]),
        log_observes=int(row["n_log"]),
        null_observes=int(row["n_null"]),
        appends=int(row["n_append"]),
        truncates=int(row["n_truncate"]),
        one_reader=row["reader_lo"] == row["reader_hi"],
        resent=int(row["n_resent"]),
        local_only=int(row["n_local"]),
        rollbacks=int(row["n_rollback"]),
    )


def _grained(context: QueryContext, needs: Needs) -> DataFrame:
    """Every event with its grain and group keys, and only the columns the groups need (and
    the table inputs' copies, :func:`_with_inputs`, when ``needs`` says some run has an
    aggregated table sink)."""
    log_observe = f"(kc = {OBSERVE} AND (sk & {SINK_LOG}) != 0)"
    table_observe = f"(kc = {OBSERVE} AND (sk & {SINK_TABLE}) != 0)"
    record = (
        f"(record_id IS NOT NULL AND (kc IN ({APPEND}, {ACK}, {READ}, {EMIT}) OR {log_observe}))"
    )
    null_observe = f"({log_observe} AND record_id IS NULL)"
    control = ", ".join(str(code) for code in _CONTROL_KINDS)
    grain = (
        f"CASE WHEN {record} THEN {RECORD} WHEN {table_observe} THEN {TABLE}"
        f" WHEN kc IN ({control}) OR {null_observe} THEN {CONTROL} ELSE {REST} END"
    )
    events = context.events.selectExpr(
        "run",
        f"{grain} AS grain",
        "pos",
        "kc",
        "pno",
        "`offset`",
        "parts",
        "part",
        "record_id",
        "`key`",
        "sink",
        "sk",
        "`value`",
        "process",
        f"CASE WHEN kc = {APPEND} THEN poison END AS poison",
        "redelivered",
        "resent",
        "local_only",
        "ed",
        "bad",
    )
    if needs.tables:
        events = _with_inputs(context, events)
    own = ", ".join(
        [
            f"'gs', CASE WHEN grain = {TABLE} THEN sink"
            f" WHEN grain = {CONTROL} AND kc = {END} THEN ed END",
            f"'g_agg', (grain = {TABLE} AND (sk & {_AGGREGATED}) != 0)",
            *[f"'e_{n}', {when(f'grain = {CONTROL}', c)}" for n, c in _OWN.items()],
        ]
    )
    flags = " + ".join(
        f"CASE WHEN {test} THEN {bit} ELSE 0 END"
        for test, bit in (
            (f"kc = {APPEND} AND poison", _POISON),
            ("redelivered", _REDELIVERED),
            ("resent", _RESENT),
            ("local_only", _LOCAL_ONLY),
            ("bad", _BAD),
            (f"grain = {RECORD} AND kc = {OBSERVE} AND (sk & {SINK_ORDERED}) != 0", _ORDERED),
        )
    )
    return events.selectExpr(
        "run",
        "grain",
        f"CASE WHEN grain = {RECORD} THEN record_id WHEN grain = {TABLE} THEN `key` END AS gk",
        f"CASE WHEN grain = {CONTROL} THEN pos WHEN grain = {REST} THEN pos % {_BUCKETS} END AS gp",
        f"CASE WHEN grain IN ({TABLE}, {CONTROL}) THEN named_struct({own}) END AS own",
        "pos",
        "kc",
        "pno",
        f"CASE WHEN kc IN ({APPEND}, {ACK}, {READ}) THEN `offset` WHEN kc = {EMIT} THEN parts"
        f" WHEN grain = {RECORD} AND kc = {OBSERVE} THEN part END AS a",
        f"CASE WHEN kc = {READ} THEN process ELSE `value` END AS b",
        f"{flags} AS fl",
    )


# What the groups' shuffle carries beside the keys, ``pos``, ``kc`` and ``pno``: one number
# for the fields no event has two of, ``a`` (the offset of an append, ack or read, the parts
# of an emit, the part of a record's observe) and ``b`` (the process of a read, the value of
# any other event), and the booleans as bits of ``fl``. A row of the shuffle is fixed-width
# slots, 8 bytes each: 10 columns instead of 18 (and of 25 with the columns Spark 4 adds for
# each ``count_if``, which the aggregates therefore do not use) are about half its bytes.
_POISON: Final = 1
_REDELIVERED: Final = 2
_RESENT: Final = 4
_LOCAL_ONLY: Final = 8
_BAD: Final = 16
_ORDERED: Final = 32
_OPART: Final = f"(CASE WHEN kc = {OBSERVE} THEN a END)"
"""SQL text: the part a record's observe shows (null in other events and grains)."""


def _flag(bit: int) -> str:
    """SQL text: whether an event's ``fl`` has ``bit``."""
    return f"((fl & {bit}) != 0)"


def _with_inputs(context: QueryContext, events: DataFrame) -> DataFrame:
    """``events`` and, after each non-poison append with a record id, its copy (kind
    :data:`INPUT`, no position, its input as ``value``) under its key in each aggregated
    table sink of its run: each key's expected value is then aggregated in the same group as
    its observes (``t_in``), with no query of its own. The copies count in no counter of the
    run (``n``, ``bad_events``, ...); they are inputs only where every non-poison record
    appended is acknowledged (``unacked_inputs`` 0), the only runs whose table counts phase
    one clears."""
    count = Aggregate.COUNT.value
    per_run: dict[int, list[Column]] = {}
    for number, run in enumerate(context.runs):
        for name, spec in run.meta.sinks.items():
            if spec.kind is SinkKind.TABLE and spec.aggregate is not None:
                per_run.setdefault(number, []).append(
                    F.struct(
                        F.lit(name).alias("s_sink"),
                        F.lit(spec.aggregate.value == count).alias("s_counted"),
                    )
                )
    sinks: Column | None
    if len(per_run) <= _INLINE_RUNS:
        sinks = cases((F.col("run") == n, F.array(*entries)) for n, entries in per_run.items())
    else:
        pairs = [item for n, entries in per_run.items() for item in (F.lit(n), F.array(*entries))]
        sinks = F.try_element_at(F.create_map(*pairs), F.col("run"))
    assert sinks is not None
    itself = (
        "array(named_struct('s_sink', cast(null as string), 's_counted', cast(null as boolean)))"
    )
    copied = f"kc = {APPEND} AND record_id IS NOT NULL AND NOT coalesce(poison, false)"
    exploded = events.select(
        "*",
        F.explode(
            F.when(
                F.expr(copied), F.coalesce(F.concat(F.expr(itself), sinks), F.expr(itself))
            ).otherwise(F.expr(itself))
        ).alias("s"),
    )
    # SQL text over column names and constants: one call into the JVM for the frame
    replaced = {
        "grain": str(TABLE),
        "pos": "cast(null as bigint)",
        "kc": str(INPUT),
        "sink": "s.s_sink",
        "value": "CASE WHEN s.s_counted THEN cast(1 as bigint) ELSE `value` END",
        "sk": str(SINK_TABLE | SINK_COUNT),
        "poison": "cast(null as boolean)",
        "resent": "false",
        "local_only": "false",
        "bad": "false",
        "record_id": "cast(null as string)",
    }
    return exploded.selectExpr(
        *[
            f"CASE WHEN s.s_sink IS NOT NULL THEN {replaced[name]} ELSE `{name}` END AS `{name}`"
            if name in replaced
            else f"`{name}`"
            for name in events.columns
        ]
    )


def _groups(context: QueryContext, needs: Needs) -> DataFrame:
    """The groups of every grain, with their record facts and run counters: one hash
    aggregation (numbers only in its buffers: a string would make it a sort aggregation),
    run after the shuffle alone while :func:`fused` plans it."""
    grouped = (
        _grained(context, needs)
        .groupBy(*_KEYS)
        .agg(*_event_aggregates(needs), *_counters())
        .select("*", "own.*", *_unneeded(needs))
        .drop("own")
    )
    return _with_facts(grouped)


# The groups' aggregates and derived facts, and the run totals, are SQL text: one call into
# the JVM per aggregate instead of dozens (the driver built phase one's plan in about a second
# before, measured in docs/spark.md). They name only columns and this module's constants.


def _when(kind: int, column: str) -> str:
    return when(f"kc = {kind}", column)


def _bit(condition: str) -> str:
    """The bit of the observed part (below :data:`_BITS`) where ``condition`` holds."""
    return (
        f"CASE WHEN ({condition}) AND {_OPART} < {_BITS}"
        f" THEN shiftleft(cast(1 as bigint), cast({_OPART} as int)) END"
    )


def _event_aggregates(needs: Needs) -> list[Column]:
    """Per group, the facts of its events (those of table and ordered sinks only if
    ``needs`` says some run has such a sink)."""
    matched = f"kc IN ({ACK}, {READ})"

    def among(how: str, test: str, column: str) -> str:
        return f"{how}({when(test, column)})"

    facts = [
        f"count(CASE WHEN kc = {APPEND} THEN 1 END) AS n_app",
        f"min({_when(APPEND, 'pos')}) AS app_pos",
        f"max({_when(APPEND, 'pno')}) AS app_pno",
        f"max({_when(APPEND, 'a')}) AS app_off",
        f"max({_when(APPEND, 'b')}) AS app_value",
        f"max(CASE WHEN kc = {APPEND} THEN {_flag(_POISON)} END) AS poison",
        f"count(CASE WHEN kc = {ACK} THEN 1 END) AS ack_n",
        f"min({_when(ACK, 'pos')}) AS ack_first",
        f"count(CASE WHEN {matched} THEN 1 END) AS ar_n",
        f"{among('min', matched, 'pos')} AS ar_pos",
        f"{among('min', matched, 'pno')} AS ar_pno_lo",
        f"{among('max', matched, 'pno')} AS ar_pno_hi",
        f"{among('min', matched, 'a')} AS ar_off_lo",
        f"{among('max', matched, 'a')} AS ar_off_hi",
        f"count(CASE WHEN kc = {READ} THEN 1 END) AS read_n",
        f"max({_when(READ, 'pos')}) AS read_last",
        f"max({_when(READ, 'pno')}) AS read_pno",
        f"max({_when(READ, 'a')}) AS read_off",
        f"max({_when(READ, 'b')}) AS read_proc",
        f"max(CASE WHEN kc = {READ} THEN {_flag(_REDELIVERED)} END) AS read_red",
        f"max({_when(EMIT, 'pos')}) AS emit_last",
        f"max({_when(EMIT, 'a')}) AS parts_max",
        f"count(CASE WHEN kc = {OBSERVE} THEN 1 END) AS obs_n",
        f"bit_or({_bit(f'{_OPART} IS NOT NULL')}) AS omask",
        f"max({_OPART}) AS omax",
    ]
    ordered = _flag(_ORDERED)
    if needs.ordered:
        facts += [
            f"min(CASE WHEN {ordered} THEN pos END) AS ordered_first",
            f"bit_or({_bit(ordered)}) AS ordered_mask",
            f"count(CASE WHEN {ordered} AND {_OPART} >= {_BITS} THEN 1 END) AS ordered_big",
        ]
    if needs.tables:
        facts += [
            f"max_by(b, CASE WHEN kc = {OBSERVE} THEN pos END) AS t_value",
            f"sum(CASE WHEN kc = {INPUT} THEN b END) AS t_in",
        ]
    return sql(*facts)


def _unneeded(needs: Needs) -> list[Column]:
    """The facts :func:`_event_aggregates` leaves out, as the values they would have."""
    none = F.lit(None).cast(_LONG)
    columns = []
    if not needs.ordered:
        columns += [
            none.alias("ordered_first"),
            none.alias("ordered_mask"),
            F.lit(0).cast(_LONG).alias("ordered_big"),
        ]
    if not needs.tables:
        columns += [none.alias("t_value"), none.alias("t_in")]
    return columns


_OWN: Final = {"kc": "kc", "pno": "pno", "off": "offset", "proc": "process"}
"""The fields of a rare event its group keeps (as ``e_<name>``)."""
_CONTROL_KINDS: Final = (FETCH, COMMIT, ROLLBACK, TRUNCATE, END, DRAIN, TXN_ABORT)


def _counters() -> list[Column]:
    """The per-group counters the run-wide summary needs beyond the control events' own
    groups (each event is in one group)."""
    return sql(
        f"count(CASE WHEN NOT (kc <=> {INPUT}) THEN 1 END) AS n",
        f"count(CASE WHEN {_flag(_BAD)} THEN 1 END) AS bad_events",
        f"count(CASE WHEN {_flag(_RESENT)} THEN 1 END) AS n_resent",
        f"count(CASE WHEN {_flag(_LOCAL_ONLY)} THEN 1 END) AS n_local",
        f"min({_when(READ, 'b')}) AS read_proc_lo",
        "max(pos) AS t_pos",
    )


def _with_facts(grouped: DataFrame) -> DataFrame:
    """The groups with the derived facts of a record (``below``, ``extra``, ``unacc``,
    ``cert_bad``, ``poison``, ``ordered_effects``), see :data:`FACT_COLUMNS`. Parts at or
    above :data:`_BITS` are counted exactly by :func:`exact_below` (``below``, ``extra`` or
    ``unacc`` null), and make the record count as showing several parts in an ordered sink
    (the exact nonmonotonic pass runs then)."""
    zero = "cast(0 as bigint)"
    none = "cast(null as bigint)"
    parts = f"({_PARTS})"
    omax = f"coalesce(omax, {zero})"
    low_mask = f"(shiftleft(cast(1 as bigint), cast(least({_PARTS}, {_BITS}) as int)) - 1)"
    mask = f"coalesce(omask, {zero})"
    small = f"cast(bit_count({mask} & {low_mask}) as bigint)"
    misplaced = (
        "(ar_pos < app_pos OR ar_pno_lo != app_pno OR ar_pno_hi != app_pno"
        " OR ar_off_lo != app_off OR ar_off_hi != app_off)"
    )
    certificate_bad = (
        f"(n_app > 1 OR (n_app = 0 AND ar_n > 0) OR (n_app = 1 AND ar_n > 0 AND {misplaced}))"
    )
    # outputs its rules do not allow (all of a poison record's; parts above its emits'
    # declared ones, rare, counted exactly by exact_below) are unexpected, never copies
    poison = "coalesce(poison, false)"
    beyond = f"({omax} >= {parts})"
    derived = {
        "parts": parts,
        "poison": poison,
        "below": (
            f"cast(CASE WHEN {parts} <= {_BITS} THEN {small}"
            f" WHEN {omax} < {_BITS} THEN {small} ELSE NULL END as bigint)"
        ),
        "extra": (
            f"CASE WHEN {poison} THEN {zero} WHEN {beyond} OR {omax} >= {_BITS} THEN {none}"
            f" ELSE obs_n - cast(bit_count({mask}) as bigint) END"
        ),
        "unacc": (
            f"CASE WHEN {poison} THEN cast(obs_n as bigint) WHEN {beyond} THEN {none}"
            f" ELSE {zero} END"
        ),
        "cert_bad": f"coalesce({certificate_bad}, false)",
        "ordered_effects": (
            f"cast(bit_count(coalesce(ordered_mask, {zero})) as bigint) + ordered_big"
        ),
    }
    used = (
        "omax",
        "ordered_mask",
        "ordered_big",
        "parts_max",
        "ar_n",
        "ar_pos",
        "ar_pno_lo",
        "ar_pno_hi",
        "ar_off_lo",
        "ar_off_hi",
    )
    kept = [f"`{name}`" for name in grouped.columns if name not in derived and name not in used]
    return grouped.selectExpr(*kept, *[f"{value} AS {name}" for name, value in derived.items()])


def _total_aggregates() -> list[Column]:
    """Over the groups of a run: the summary counters and the record totals."""
    record = f"grain = {RECORD}"

    def controls(code: int) -> str:
        return f"(grain = {CONTROL} AND e_kc = {code})"

    def at(code: int) -> str:
        return f"CASE WHEN {controls(code)} THEN gp END"

    fetch_process = f"CASE WHEN {controls(FETCH)} THEN e_proc END"
    # a key of an aggregated table sink: its last value shown against its inputs' total
    aggregated = f"(grain = {TABLE} AND coalesce(g_agg, false))"
    shown = "coalesce(t_value, cast(0 as bigint))"
    expected = "coalesce(t_in, cast(0 as bigint))"
    null_observes = f"count(CASE WHEN {controls(OBSERVE)} THEN 1 END)"
    return sql(
        "sum(n) AS n",
        "sum(bad_events) AS bad_events",
        f"count(CASE WHEN {controls(END)} THEN 1 END) AS n_end",
        f"max({at(END)}) AS end_pos",
        f"max_by(CASE WHEN {controls(END)} THEN gs = '{_COMPLETE}' END, {at(END)}) AS end_complete",
        f"count(CASE WHEN {controls(DRAIN)} THEN 1 END) AS n_drain",
        f"min({at(DRAIN)}) AS drain_pos",
        f"count(CASE WHEN {controls(TXN_ABORT)} THEN 1 END) AS n_abort",
        f"coalesce(sum(CASE WHEN {record} THEN obs_n END), 0) + {null_observes} AS n_log",
        f"{null_observes} AS n_null",
        f"coalesce(sum(CASE WHEN {record} THEN n_app END), 0) AS n_append",
        f"count(CASE WHEN {controls(TRUNCATE)} THEN 1 END) AS n_truncate",
        f"count(CASE WHEN {controls(ROLLBACK)} THEN 1 END) AS n_rollback",
        "coalesce(sum(n_resent), 0) AS n_resent",
        "coalesce(sum(n_local), 0) AS n_local",
        f"least(min(CASE WHEN {record} THEN read_proc_lo END), min({fetch_process})) AS reader_lo",
        f"greatest(max(CASE WHEN {record} THEN read_proc END), max({fetch_process})) AS reader_hi",
        *_record_aggregates(record),
        f"count(CASE WHEN {record} AND read_n > 1 THEN 1 END) AS multi_read",
        f"count(CASE WHEN {record} AND ordered_effects > 1 THEN 1 END) AS crowded",
        f"count(CASE WHEN {record} AND n_app >= 1 AND ack_n = 0 AND NOT poison THEN 1 END)"
        " AS unacked_inputs",
        f"count(CASE WHEN {aggregated} AND {shown} < {expected} THEN 1 END) AS under",
        f"count(CASE WHEN {aggregated} AND {shown} > {expected} THEN 1 END) AS over",
    )


def record_totals(facts: DataFrame) -> dict[int, Any]:
    """The record totals of :class:`Fused` (``bad`` to ``unexpected``) of every run in
    ``facts`` (after :func:`exact_below`), one row per run."""
    rows = facts.groupBy("run").agg(*sql(*_record_aggregates("true"))).collect()
    return {int(row["run"]): row for row in rows}


def _record_aggregates(record: str) -> list[str]:
    """Per run, over the rows where ``record`` (SQL) holds: records breaking the validator's
    certificate (``bad``), ``acknowledged`` records, ``expected_effects``, ``duplicates``,
    ``lost`` effects, records whose counts need :func:`exact_below` (``unknown``) and records
    with ``unexpected`` outputs."""
    acked = f"({record} AND ack_n > 0)"
    kept = f"({acked} AND NOT poison)"
    missing = "(parts - coalesce(below, 0))"
    return [
        f"count(CASE WHEN {record} AND cert_bad THEN 1 END) AS bad",
        f"count(CASE WHEN {acked} THEN 1 END) AS acknowledged",
        f"sum(CASE WHEN {kept} THEN parts END) AS expected_effects",
        f"sum(CASE WHEN {acked} THEN coalesce(extra, 0) END) AS duplicates",
        f"sum(CASE WHEN {kept} THEN {missing} END) AS lost",
        f"count(CASE WHEN {record} AND (below IS NULL OR unacc IS NULL) THEN 1 END) AS unknown",
        f"count(CASE WHEN {record} AND ((ack_n = 0 AND obs_n > 0) OR ({acked} AND unacc > 0))"
        " THEN 1 END) AS unexpected",
    ]


def exact_below(context: QueryContext, runs: Sequence[int], facts: DataFrame) -> DataFrame:
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
