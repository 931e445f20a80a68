"""Pass 1 and 2 of the Spark checker: the per-run summary (one scan, cached) and the
facts of every record (one shuffle by record, checkpointed) (internal)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from harness.spark.check.queries._load import (
    _BITS,
    _LONG,
    ACK,
    APPEND,
    DRAIN,
    EMIT,
    END,
    FETCH,
    OBSERVE,
    READ,
    SINK_LOG,
    SINK_ORDERED,
    SINK_TABLE,
    TRUNCATE,
    TXN_ABORT,
    Context,
)

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
