"""Witness details only the data can give: the records of a skipped or claimed range, a
key's records, a record's observed parts, event positions (internal)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from harness.check.verdict import MAX_WITNESSES
from harness.spark.check.queries._anomalies import (
    _inputs,
)
from harness.spark.check.queries._load import (
    OBSERVE,
    SINK_LOG,
    QueryContext,
)

# ---------------------------------------------------------------------- witness details


def records_between(
    facts: DataFrame,
    context: QueryContext,
    ranges: Sequence[tuple[int, int, int, int, int]],
    *,
    acknowledged: bool = False,
) -> dict[int, tuple[list[str], int]]:
    """For each ``(id, run, pno, low, high)``: the first :data:`MAX_WITNESSES` records
    appended at offsets ``low <= o < high`` of the partition, in append order, and how many
    there are (the local checker's ``records_between`` when offsets are in order; with
    ``acknowledged``, of the acknowledged records only: its ``owed_between``, exactly)."""
    if not ranges:
        return {}
    wanted = context.small(list(ranges), "id int, run int, pno int, low long, high long")
    appended = (F.col("n_app") >= 1) & ((F.col("ack_n") > 0) if acknowledged else F.lit(True))
    appends = facts.where(appended).select(
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
    facts: DataFrame, context: QueryContext, partitions: Sequence[tuple[int, int]]
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
    context: QueryContext, facts: DataFrame, keys: Sequence[tuple[int, str]]
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
    context: QueryContext, runs: Sequence[int], wanted: Sequence[tuple[int, str]]
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


def positions(context: QueryContext, runs: Sequence[int], code: int) -> dict[int, list[int]]:
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
