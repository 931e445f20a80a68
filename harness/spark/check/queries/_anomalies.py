"""The passes that find anomalies: the partition pass (skip, offset-ahead,
offset-regression, nonmonotonic-poll), ordered sinks (nonmonotonic), table aggregates
(count-mismatch), aborted reads, unexpected and duplicated outputs (internal)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from harness.history.events import (
    Aggregate,
    SinkKind,
)
from harness.spark.check.queries._load import (
    _BOOL,
    _INT,
    _LONG,
    _STR,
    APPEND,
    COMMIT,
    EMIT,
    FETCH,
    OBSERVE,
    READ,
    ROLLBACK,
    SINK_LOG,
    SINK_ORDERED,
    TRUNCATE,
    TXN_ABORT,
    QueryContext,
    cases,
    conform,
    in_places,
    union_all,
)


def observe_rows(
    context: QueryContext, facts: DataFrame, runs: Sequence[int], *, kind: str, records: int
) -> DataFrame:
    """The observe rows of log sinks that records' facts point at: ``kind`` ``"unexpected"``
    (outputs their record's rules do not allow: of records never acknowledged, of poison
    records, of parts no emit declared: ``run, record_id, pos, output_id, sink, part,
    app_pos, ack_n, poison, parts``) or
    ``"duplicate"`` (acknowledged records with extra copies: ``run, record_id, part, pos,
    output_id``). Few rows in a sound history; the facts side (at most ``records`` rows, a
    bound from the record totals) is broadcast when small, so the observes are not
    shuffled."""
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
        return observes.join(context.side(wanted, records), ["run", "record_id"]).where(
            (F.col("ack_n") == 0) | F.col("poison") | (F.col("part") >= F.col("parts"))
        )
    wanted = facts.where(acked & (F.col("extra") > 0)).select("run", "record_id", "parts")
    rows = (
        observes.join(context.side(wanted, records), ["run", "record_id"])
        .where(F.col("part") < F.col("parts"))
        .drop("parts")
    )
    copies = Window.partitionBy("run", "record_id", "part")
    return (
        rows.select("*", F.count(F.lit(1)).over(copies).alias("copies"))
        .where(F.col("copies") > 1)
        .drop("copies")
    )


def nonmonotonic_from_facts(
    context: QueryContext, facts: DataFrame, partitions: Mapping[int, Collection[int | None]]
) -> DataFrame:
    """:func:`nonmonotonic` for runs with a single ordered log sink where no record shows
    more than one part in it: then each record's first observe there is its only first
    occurrence, and the pairs come from the facts alone (one shuffle and sort of the
    records, no scan; lazily: they are ranked with the other kinds'). ``partitions`` maps
    each run to the partitions to judge (``None``: its undeclared ones), the others being
    those phase one's certificate of the ordered sink covers, where no pair is out of order
    (:mod:`._certify`): so a lost record costs the sort of its partition, not of its run.
    ``sink`` is null in the result (the caller knows the one sink)."""
    # the partitions' test implies the run's
    first = facts.where((F.col("n_app") >= 1) & F.col("ordered_first").isNotNull()).select(
        "run",
        "record_id",
        F.col("app_pno").alias("pno"),
        F.col("app_off").alias("off"),
        F.col("ordered_first").alias("pos"),
    )
    first = first.where(in_places(partitions))
    stream = Window.partitionBy("run", "pno").orderBy("pos")
    pairs = first.select(
        "*",
        F.lit(None).cast(_STR).alias("sink"),
        F.lag("record_id").over(stream).alias("prev_rid"),
        F.lag("off").over(stream).alias("prev_off"),
        F.lag("pos").over(stream).alias("prev_pos"),
    ).where(F.col("off") < F.col("prev_off"))
    del context
    return pairs


def nonmonotonic(context: QueryContext, runs: Sequence[int]) -> DataFrame:
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
    del context
    return pairs


# --------------------------------------------------------------------------- partitions

_INLINE_SINKS: Final = 64
"""Up to this many aggregated table sinks, count-mismatch finds them by expressions."""

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
    ("start", _LONG),
    ("record_id", _STR),
)


PARTITION_ROWS: Final = (
    ("run", _INT),
    ("pno", _INT),
    ("pos", _LONG),
    ("kc", _INT),
    ("off", _LONG),
    ("process", _LONG),
    ("redelivered", _BOOL),
)
"""The columns of the partition pass's input rows (:func:`partition_rows`)."""


def partition_rows(context: QueryContext, runs: Sequence[int]) -> DataFrame:
    """The reads, fetches, commits, rollbacks and truncates of ``runs`` with a partition,
    from the events (the fused pass's cache gives the same rows when every record is read
    at most once: :meth:`Fused.ladder`)."""
    ev = context.events.where(F.col("run").isin(*runs))
    kc = F.col("kc")
    raw = ev.where(kc.isin(READ, FETCH, COMMIT, ROLLBACK, TRUNCATE) & F.col("pno").isNotNull())
    return conform(
        raw.select(
            "run", "pno", "pos", "kc", F.col("offset").alias("off"), "process", "redelivered"
        ),
        PARTITION_ROWS,
    )


def partitions(
    context: QueryContext,
    rows: DataFrame,
    *,
    one_reader: bool,
    truncates: bool,
) -> DataFrame:
    """Pass 3, one shuffle by ``(run, partition)`` and one sort over ``rows`` (reads,
    fetches, commits, rollbacks and truncates: :data:`PARTITION_ROWS`): per partition in
    event order, the checkpointed rows of ``skip`` (S), ``offset-ahead`` by commit (A),
    ``offset-regression`` (G) and ``nonmonotonic-poll`` (B), with the columns of
    :data:`_PARTITION_COLUMNS`.
    ``one_reader``: only one process reads and fetches in these runs, so its previous read
    is the partition's (else a second sort, by process, finds each process's own);
    ``truncates``: some run has ``truncate`` events."""
    if not truncates:
        rows = rows.where(F.col("kc") != TRUNCATE)
    del context
    sequenced = _sequenced(rows, one_reader=one_reader, truncates=truncates)
    return conform(_classified(sequenced), _PARTITION_COLUMNS)


def _sequenced(rows: DataFrame, *, one_reader: bool, truncates: bool) -> DataFrame:
    """``rows`` with what came before each in its partition: the highest read offset
    (``best``), the stored offset and its position, the truncated offset, and the kind,
    offset (-1: none) and position of the reading process's own last read or fetch."""
    kc = F.col("kc")
    before = (
        Window.partitionBy("run", "pno").orderBy("pos").rowsBetween(Window.unboundedPreceding, -1)
    )
    pos = F.col("pos")
    off = F.col("off")
    own = (kc == FETCH) | ((kc == READ) & ~F.col("redelivered"))
    # plain numbers only (a null offset is -1: offsets are never negative here), so the
    # rows that go through the shuffle and the sort stay narrow
    # the highest offset read before, and the first read of it (what an offset-ahead
    # commit names): the greatest (offset, -position) of the reads before
    highest = F.max(F.when(kc == READ, F.struct(off.alias("o"), (-pos).alias("p")))).over(before)
    windowed = [
        highest["o"].alias("best"),
        (-highest["p"]).alias("best_first"),
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
    return sequenced


def _classified(sequenced: DataFrame) -> DataFrame:
    """The occurrences among :func:`_sequenced`'s rows, one row per tag."""
    kc = F.col("kc")
    off = F.col("off")
    own = (kc == FETCH) | ((kc == READ) & ~F.col("redelivered"))
    reading = own & (kc == READ)
    own_kc = F.col("own_kc")
    own_off = F.col("own_off")
    how = (
        F.when(reading & (own_kc == FETCH) & (own_off < 0), 0)
        .when(reading & (own_kc == FETCH), 1)
        .when(reading & (own_kc == READ), 2)
    )
    truncated = F.coalesce(F.col("truncated"), F.lit(0).cast(_LONG))
    low = F.when(how == 0, truncated).when(how >= 1, own_off)
    best = F.col("best")
    # the first offset the read was owed: after the fetched offset or the previous read,
    # never below the log's start (records truncated away cannot be read), and past the
    # highest offset any process read before (the reading frontier; greatest skips a null)
    start = F.greatest(F.when(how == 2, own_off + 1).otherwise(low), truncated, best + 1)
    commit = kc == COMMIT
    tag = F.when(reading & how.isNotNull() & (off > start), "S").when(
        commit & ((best.isNull() & (off > 0)) | (best.isNotNull() & (off - 1 > best))), "A"
    )
    regression = commit & (F.col("stored") >= 0) & (off < F.col("stored"))
    # a read at or below the process's previous read, no fetch or seek between: it went back
    backward = reading & (how == 2) & (off <= own_off)
    tags = F.filter(
        F.array(tag, F.when(regression, F.lit("G")), F.when(backward, F.lit("B"))),
        lambda t: t.isNotNull(),
    )
    classified = sequenced.select(
        "*", how.alias("how"), low.alias("low_"), start.alias("start_"), tags.alias("tags")
    )
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
        F.when(kind.isin("S", "B"), F.col("own_pos"))
        .when(kind == "A", F.col("best_first"))
        .when(kind == "G", F.col("stored_pos"))
        .alias("before"),
        F.when(kind == "S", F.col("low_"))
        .when(kind == "A", best)
        .when(kind == "G", F.col("stored"))
        .when(kind == "B", own_off)
        .alias("low"),
        F.when(kind == "S", F.col("start_")).alias("start"),
    )
    return found


def owed_skips(found: DataFrame, facts: DataFrame, runs: Sequence[int]) -> DataFrame:
    """The partition pass's occurrences (:func:`partitions`) less the ``skip`` (S) rows whose
    skipped range ``start <= o < off`` holds no acknowledged record: records are counted,
    not offsets (a gap of transaction markers, aborted or unacknowledged records is no skip).

    One shuffle and sort by ``(run, partition)`` of the S rows' two ends and the acknowledged
    records' offsets: the running count of records below each end gives the count between
    them (an end sorts before a record at its own offset), then the two ends meet again by
    the read's position. Only the partitions of ``runs`` with a candidate skip are read."""
    tag = F.col("tag")
    skips = found.where(tag == "S")
    places = skips.select("run", "pno").distinct()
    ends = skips.select(
        "run", "pno", "pos", F.explode(F.array(F.col("start"), F.col("off"))).alias("key")
    ).select("run", "pno", "pos", "key", F.lit(0).alias("typ"))
    acked = (
        facts.where(F.col("run").isin(*runs) & (F.col("n_app") >= 1) & (F.col("ack_n") > 0))
        .select(
            "run",
            F.col("app_pno").alias("pno"),
            F.lit(None).cast(_LONG).alias("pos"),
            F.col("app_off").alias("key"),
            F.lit(1).alias("typ"),
        )
        .join(F.broadcast(places), ["run", "pno"], "left_semi")
    )
    running = (
        Window.partitionBy("run", "pno")
        .orderBy("key", "typ")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    below = ends.unionByName(acked).select("*", F.sum(F.col("typ")).over(running).alias("below"))
    owed = (
        below.where(F.col("typ") == 0)
        .groupBy("run", "pos")
        .agg((F.max("below") - F.min("below")).alias("owed"))
        .where(F.col("owed") > 0)
        .select("run", "pos")
    )
    return found.where(tag != "S").unionByName(skips.join(owed, ["run", "pos"], "left_semi"))


def offset_violations(
    context: QueryContext, facts: DataFrame, places: Mapping[int, Collection[int | None] | None]
) -> set[int]:
    """The runs where an append is not above an offset acknowledged before it (the
    validator's append rule), given that every record has at most one append and its acks
    follow it at its place (the certificate of :func:`records`): per partition, an append
    breaks the rule exactly when some record at an offset at or above its own was
    acknowledged before it, i.e. when the earliest first ack among the appends at or above
    its offset precedes it. One shuffle and one sort of the appends of ``places`` (run ->
    the partitions to judge, ``None`` for all of them: :func:`~._load.in_places`)."""
    del context
    appends = facts.where((F.col("n_app") >= 1) & F.expr(in_places(places, "app_pno")))
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


def shared_places(
    facts: DataFrame, places: Mapping[int, Collection[int | None] | None]
) -> set[int]:
    """The runs where one offset of a partition is held by two records (each acknowledged
    or read at its own append's place, the certificate of :func:`records`): an append took
    an offset again whose first record was read there. One shuffle of the held records of
    ``places`` (as :func:`offset_violations`)."""
    held = facts.where(
        F.expr(in_places(places, "app_pno"))
        & (F.col("n_app") == 1)
        & ((F.col("ack_n") > 0) | F.col("read_last").isNotNull())
    )
    rows = (
        held.groupBy("run", "app_pno", "app_off")
        .agg(F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .select("run")
        .distinct()
        .collect()
    )
    return {int(row["run"]) for row in rows}


def past_lost(facts: DataFrame, control: DataFrame, lossy: Sequence[int]) -> DataFrame:
    """offset-ahead past a lost record (tag B): for each record with a lost effect in the
    ``lossy`` runs, the first commit of its partition whose offset, or an earlier commit's,
    is above the record's: ``run, pno, pos (the commit), before (its offset), process, off
    (the record's), record_id``. ``control``: the partition events (:data:`PARTITION_ROWS`)
    with the runs' commits, few."""
    commits = control.where(
        F.col("run").isin(*lossy) & (F.col("kc") == COMMIT) & F.col("pno").isNotNull()
    ).select("run", "pno", "pos", "off", "process")
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
    ladder = union_all([steps.withColumn("record_id", F.lit(None).cast(_STR)), lost])
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
    return conform(past, _PARTITION_COLUMNS)


def unsorted_partitions(
    facts: DataFrame, context: QueryContext, partitions: Sequence[tuple[int, int]]
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


def aborted_reads(context: QueryContext, runs: Sequence[int]) -> DataFrame:
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


def null_observes(context: QueryContext, runs: Sequence[int]) -> DataFrame:
    """Observes of log-sink outputs with no record id: ``run, pos, output_id, sink``."""
    ev = context.events.where(F.col("run").isin(*runs))
    return ev.where(
        (F.col("kc") == OBSERVE)
        & (F.col("sk").bitwiseAND(SINK_LOG) != 0)
        & F.col("record_id").isNull()
    ).select("run", "pos", "output_id", "sink")


def duplicate_effects(context: QueryContext, copies: DataFrame, rows: int) -> DataFrame:
    """One row per duplicated effect from its observe rows (:func:`observe_rows`, at most
    ``rows`` of them): ``run, record_id, part, copies (array of (pos, output_id) in observe
    order), emits (positions of every emit of those outputs)``. The observe rows are
    computed once (one scan) and kept; the emits come from one more scan, joined with the
    outputs broadcast when few."""
    copies = context.keep(copies.select("run", "record_id", "part", "pos", "output_id"))
    outputs = copies.select("run", "output_id").distinct()
    emits = (
        context.events.where(F.col("kc") == EMIT)
        .select("run", "output_id", F.col("pos").alias("emit_pos"))
        .join(context.side(outputs, rows), ["run", "output_id"])
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


def _inputs(context: QueryContext, facts: DataFrame, runs: Sequence[int]) -> DataFrame:
    """The acknowledged non-poison records with their key and value (``run, record_id, key,
    value``): their appends, less those of records never acknowledged (few in a sound
    history, so that side is broadcast)."""
    kc = F.col("kc")
    appends = context.events.where(
        F.col("run").isin(*runs) & (kc == APPEND) & ~F.col("poison")
    ).select("run", "record_id", "key", "value")
    unacked = facts.where((F.col("n_app") >= 1) & (F.col("ack_n") == 0)).select("run", "record_id")
    return appends.join(unacked, ["run", "record_id"], "left_anti")


def _sides(
    context: QueryContext,
    keyed: DataFrame,
    tables: DataFrame,
    sinks: Sequence[tuple[int, str, str]],
) -> tuple[DataFrame, DataFrame]:
    """The expected value of each key of each aggregated table sink (``run, sink, key,
    expected``) and its observed value (``run, sink, key, value, pos``); ``sinks``: run, sink
    name, aggregate. A few sinks are matched by expressions, more by a broadcast join."""
    count = Aggregate.COUNT.value
    if len(sinks) > _INLINE_SINKS:
        aggregated = context.small(list(sinks), "run int, sink string, agg string")
        expected = keyed.join(F.broadcast(aggregated), "run").select(
            "run",
            "sink",
            "key",
            F.when(F.col("agg") == count, F.col("n")).otherwise(F.col("total")).alias("expected"),
        )
        chosen = tables.join(F.broadcast(aggregated.select("run", "sink")), ["run", "sink"])
        return expected, chosen
    per_run: dict[int, list[Column]] = {}
    wanted: Column = F.lit(False)
    for run, name, aggregate in sinks:
        per_run.setdefault(run, []).append(
            F.struct(F.lit(name).alias("sink"), F.lit(aggregate == count).alias("counted"))
        )
        wanted = wanted | ((F.col("run") == run) & (F.col("sink") == name))
    of_run = cases((F.col("run") == run, F.array(*entries)) for run, entries in per_run.items())
    assert of_run is not None
    expected = keyed.select("*", F.explode(of_run).alias("s")).select(
        "run",
        F.col("s.sink").alias("sink"),
        "key",
        F.when(F.col("s.counted"), F.col("n")).otherwise(F.col("total")).alias("expected"),
    )
    return expected, tables.where(wanted)


def inputs_per_key(
    context: QueryContext, facts: DataFrame, runs: Sequence[int], *, all_acknowledged: bool = False
) -> DataFrame:
    """The acknowledged inputs of each key (``run, key, n, total``), from the appends.
    ``all_acknowledged``: the fused pass found no non-poison record of ``runs`` appended
    and never acknowledged (their ``unacked_inputs`` is 0), so the key's non-poison appends
    are its acknowledged inputs (one scan of the appends, no join with the facts)."""
    if all_acknowledged:
        inputs = context.events.where(
            F.col("run").isin(*runs) & (F.col("kc") == APPEND) & ~F.col("poison")
        )
    else:
        inputs = _inputs(context, facts, runs)
    return inputs.groupBy("run", "key").agg(
        F.count(F.lit(1)).alias("n"),
        F.coalesce(F.sum("value"), F.lit(0).cast(_LONG)).alias("total"),
    )


def count_mismatches(
    context: QueryContext,
    facts: DataFrame,
    tables: DataFrame,
    runs: Sequence[int],
    keyed: DataFrame,
) -> DataFrame | None:
    """Keys whose table value differs from the acknowledged input's aggregate:
    ``run, sink, key, expected, observed (null: absent), pos, over, min_rid`` (``min_rid``:
    the smallest id of the key's records, only for absent keys, which sort by it); None when
    there is none. ``keyed``: the inputs per key (``run, key, n, total``) of the runs that
    have them from the fused pass (the others' are counted from their appends)."""
    joined = _joined(context, tables, runs, keyed)
    shown = F.coalesce(F.col("observed"), F.lit(0).cast(_LONG))
    wrong = context.keep(
        joined.where(shown != F.col("expected")).withColumn("over", shown > F.col("expected"))
    )
    if not wrong.take(1):
        return None
    absent = wrong.where(F.col("observed").isNull()).select("run", "key").distinct()
    firsts = (
        _inputs(context, facts, runs)
        .join(absent, ["run", "key"])
        .groupBy("run", "key")
        .agg(F.min("record_id").alias("min_rid"))
    )
    return wrong.join(firsts, ["run", "key"], "left")


def _joined(
    context: QueryContext, tables: DataFrame, runs: Sequence[int], keyed: DataFrame
) -> DataFrame:
    """Each key of each aggregated table sink of ``runs`` with its expected and observed
    value: ``run, sink, key, expected, observed (null: absent), pos``."""
    sinks = [
        (number, name, spec.aggregate.value)
        for number in runs
        for name, spec in context.runs[number].meta.sinks.items()
        if spec.kind is SinkKind.TABLE and spec.aggregate is not None
    ]
    expected, observed = _sides(context, keyed.where(F.col("run").isin(*runs)), tables, sinks)
    # one shuffle: both sides by (run, sink, key), summed up (each side has one row a key)
    joined = (
        expected.select(
            "run",
            "sink",
            "key",
            "expected",
            F.lit(None).cast(_LONG).alias("observed"),
            F.lit(None).cast(_LONG).alias("pos"),
        )
        .unionByName(
            observed.select(
                "run",
                "sink",
                "key",
                F.lit(None).cast(_LONG).alias("expected"),
                F.col("value").alias("observed"),
                "pos",
            )
        )
        .groupBy("run", "sink", "key")
        .agg(
            F.coalesce(F.max("expected"), F.lit(0).cast(_LONG)).alias("expected"),
            F.max("observed").alias("observed"),
            F.max("pos").alias("pos"),
        )
    )
    return joined
