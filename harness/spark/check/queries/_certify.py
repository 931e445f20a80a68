"""Phase one's certificates, folded into the fused pass's one action: that no order rule
fires (internal; the table counts are the fused pass's own groups', :mod:`._records`).

The order rules (``skip``, ``offset-ahead`` by commit, ``offset-regression``, the
validator's append-offset rule, ``nonmonotonic``) each need their events in order; phase two
answers them exactly, one sort each (:mod:`._anomalies`). Phase one sorts nothing: each
appended record meets its neighbour, the record at the offset below it in its partition, in
one hash aggregation keyed by partition and offset (each record is sent once under its own
offset and once under the next one), and a commit of offset ``c`` meets the records at
``c - 1`` and ``c`` there. Per partition, the pairs' findings are summed with the run's
totals in the same aggregation (:func:`partition_inputs`), and the driver reads each
partition's row (:func:`open_partition`). When the records' offsets are consecutive, a check
of every record against its neighbour is a check of the whole partition in offset order, and
then no order rule can fire, by these arguments (a run is *certified* when every partition
passes):

* **append-offset rule** (an append below an offset acknowledged before it): the offsets
  are consecutive and each record is appended after its neighbour, so the offsets strictly
  increase with the append positions, and each record's acks follow its append (the fused
  pass's certificate): a record at a higher offset is acknowledged after the lower one is
  appended.
* **skip**: one process reads and fetches the run, each record is read at most once and
  never as a redelivery, each read record whose neighbour is read is read after it, at most
  one read record has no read neighbour (so the reads are at consecutive offsets in
  increasing position), and the partition has no fetch or one fetch before its first read
  whose offset (0 when null) is at least the first read's.
* **offset-ahead** (a commit ``c`` above the highest offset read before it plus one): each
  commit ``c`` is 0 or follows the read of offset ``c - 1``.
* **offset-regression**: no rollback, and each commit ``c`` precedes the read of offset
  ``c`` when that record is read (a commit of 0 whose record is not read only in a partition
  without reads). Then two commits ``c1 < c2`` are in order: the read of ``c2 - 1`` precedes
  ``c2`` and follows or is the read of ``c1``, which follows ``c1``'s commit (if ``c1``'s
  record were not read, neither would be ``c2 - 1``'s).
* **nonmonotonic** (one ordered sink, no record with two parts there; its own certificate):
  each record's first observe there follows its neighbour's, when both have one, and at most
  one record with an observe there has a neighbour without (the first): so the first
  observes increase with the offsets, and no adjacent pair in observe order has decreasing
  offsets (an unsorted sequence always has one).

A run that is not certified is not wrong: phase two runs the exact rules over it (the
``nonmonotonic`` rule alone when only the ordered sink's certificate fails, e.g. after a
lost record, whose neighbour has no observe before it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.spark.check.queries._load import _LONG, COMMIT, FETCH

__all__ = ["PARTITION_COLUMNS", "open_partition", "pair_rows", "partition_inputs"]

_SELF: Final = 0
_NEXT: Final = 1
_COMMIT: Final = 2
_FETCH: Final = 3
_ORDER: Final = 0
"""Pair group of a partition's offset (records, their neighbours, commits)."""
_FETCHES: Final = 1
_PAIR_KEYS: Final = ("run", "bt", "pno", "k")


def pair_rows(groups: DataFrame, record: Column, control: Column) -> DataFrame:
    """The rows of the pairs' aggregation from the fused pass's groups (``record``,
    ``control``: the conditions of a record's and a rare event's group): each appended
    record under its offset and the next, each commit and fetch of a partition."""
    long_null = F.lit(None).cast(_LONG)
    kc = F.col("e_kc")

    def row(bt: int, role: int, pno: Column, k: Column, **fields: Column) -> list[Column]:
        names = ("pos", "read", "ord", "odd", "off")
        return [
            F.col("run"),
            F.lit(bt).alias("bt"),
            pno.cast("int").alias("pno"),
            k.alias("k"),
            F.lit(role).alias("role"),
            *[fields.get(n, long_null if n != "odd" else F.lit(False)).alias(n) for n in names],
        ]

    appended = record & (F.col("n_app") >= 1)
    read = F.when(F.col("read_n") >= 1, F.col("read_last"))
    odd = (F.col("read_n") > 1) | F.coalesce(F.col("read_red"), F.lit(False))
    own = {"pos": F.col("app_pos"), "read": read, "ord": F.col("ordered_first"), "odd": odd}
    parted = control & F.col("e_pno").isNotNull()
    # one read of the groups: each group's rows (a record's two, a commit's or a fetch's
    # one) from one generator, not one scan of the kept groups per role
    first = (
        F.when(appended, F.struct(*row(_ORDER, _SELF, F.col("app_pno"), F.col("app_off"), **own)))
        .when(
            parted & (kc == COMMIT),
            F.struct(*row(_ORDER, _COMMIT, F.col("e_pno"), F.col("e_off"), pos=F.col("gp"))),
        )
        .when(
            parted & (kc == FETCH),
            F.struct(
                *row(
                    _FETCHES, _FETCH, F.col("e_pno"), long_null, pos=F.col("gp"), off=F.col("e_off")
                )
            ),
        )
    )
    second = F.when(
        appended,
        F.struct(*row(_ORDER, _NEXT, F.col("app_pno"), F.col("app_off") + 1, **own)),
    )
    generated = (
        groups.where(appended | (parted & kc.isin(COMMIT, FETCH)))
        .select(F.explode(F.array(first, second)).alias("g"))
        .where(F.col("g").isNotNull())
        .select("g.*")
    )
    return generated


def _pairs(rows: DataFrame) -> DataFrame:
    """One row per pair group: what its record, its neighbour, its commits, a partition's
    fetches or a key's sides hold."""
    role = F.col("role")

    def of(which: int, column: str, how: Any = F.max) -> Column:
        found: Column = how(F.when(role == which, F.col(column)))
        return found

    return rows.groupBy(*_PAIR_KEYS).agg(
        F.count_if(role == _SELF).alias("self_n"),
        of(_SELF, "pos").alias("self_pos"),
        of(_SELF, "read").alias("self_read"),
        of(_SELF, "ord").alias("self_ord"),
        F.max(F.when(role == _SELF, F.col("odd"))).alias("self_odd"),
        F.count_if(role == _NEXT).alias("prev_n"),
        of(_NEXT, "pos").alias("prev_pos"),
        of(_NEXT, "read").alias("prev_read"),
        of(_NEXT, "ord").alias("prev_ord"),
        F.count_if(role == _COMMIT).alias("commit_n"),
        of(_COMMIT, "pos", F.min).alias("commit_lo"),
        of(_COMMIT, "pos").alias("commit_hi"),
        F.count_if(role == _FETCH).alias("fetch_n"),
        of(_FETCH, "pos", F.min).alias("fetch_pos"),
        of(_FETCH, "off").alias("fetch_off"),
    )


PARTITION_COLUMNS: Final = (
    "p_records",
    "p_low",
    "p_high",
    "p_open",
    "p_twice",
    "p_firsts",
    "p_first_pos",
    "p_first_off",
    "p_reads",
    "p_zero",
    "p_fetches",
    "p_fetch_pos",
    "p_fetch_off",
    "p_heads",
    "p_unordered",
)
"""The per-partition columns of the fused pass's collected rows (:func:`partition_inputs`)."""


def partition_inputs(rows: DataFrame) -> tuple[DataFrame, list[Column]]:
    """The pairs of ``rows`` (:func:`pair_rows`) with their findings, and the aggregates
    that sum them per run and partition (:data:`PARTITION_COLUMNS`)."""
    # shuffled by the pairs' keys first, so that their aggregation runs after that shuffle
    # alone: a partial aggregation before it folds nothing (a record meets its neighbour only
    # after it) and aggregates every row twice; the one action's other aggregation, the
    # per-run totals, keeps its own (measured in docs/spark.md)
    p = _pairs(rows.repartition(*[F.col(key) for key in _PAIR_KEYS]))
    k = F.col("k")
    single = F.col("self_n") == 1
    prev = F.col("prev_n") == 1
    self_read = F.col("self_read")
    prev_read = F.col("prev_read")
    record_open = single & (
        F.coalesce(F.col("self_odd"), F.lit(False))
        | (F.col("prev_n") > 1)
        | (prev & (F.col("self_pos") <= F.col("prev_pos")))
        | (prev_read.isNotNull() & self_read.isNotNull() & (self_read <= prev_read))
    )
    # a commit of c follows the read of c - 1 (or c is 0) and precedes the read of c
    commit_open = (F.col("commit_n") > 0) & (
        ~((k == 0) | (prev & prev_read.isNotNull() & (prev_read < F.col("commit_lo"))))
        | (self_read.isNotNull() & (F.col("commit_hi") >= self_read))
    )
    first = single & self_read.isNotNull() & prev_read.isNull()
    head = single & F.col("self_ord").isNotNull() & F.col("prev_ord").isNull()
    flagged = p.select(
        "run",
        "pno",
        F.when(single, k).alias("i_off"),
        single.alias("i_record"),
        (F.col("self_n") > 1).alias("i_twice"),
        F.coalesce(record_open | commit_open, F.lit(False)).alias("i_open"),
        first.alias("i_first"),
        F.when(first, self_read).alias("i_first_pos"),
        F.when(first, k).alias("i_first_off"),
        (single & self_read.isNotNull()).alias("i_read"),
        ((F.col("commit_n") > 0) & (k == 0) & self_read.isNull()).alias("i_zero"),
        "fetch_n",
        "fetch_pos",
        "fetch_off",
        head.alias("i_head"),
        F.coalesce(
            F.col("self_ord").isNotNull()
            & F.col("prev_ord").isNotNull()
            & (F.col("self_ord") <= F.col("prev_ord")),
            F.lit(False),
        ).alias("i_unordered"),
    )
    aggregates = [
        F.count_if(F.col("i_record")).alias("p_records"),
        F.min("i_off").alias("p_low"),
        F.max("i_off").alias("p_high"),
        F.count_if(F.col("i_open")).alias("p_open"),
        F.count_if(F.col("i_twice")).alias("p_twice"),
        F.count_if(F.col("i_first")).alias("p_firsts"),
        F.min("i_first_pos").alias("p_first_pos"),
        F.min("i_first_off").alias("p_first_off"),
        F.count_if(F.col("i_read")).alias("p_reads"),
        F.count_if(F.col("i_zero")).alias("p_zero"),
        F.sum("fetch_n").alias("p_fetches"),
        F.min("fetch_pos").alias("p_fetch_pos"),
        F.max("fetch_off").alias("p_fetch_off"),
        F.count_if(F.col("i_head")).alias("p_heads"),
        F.count_if(F.col("i_unordered")).alias("p_unordered"),
    ]
    return flagged, aggregates


def open_partition(row: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether a partition's row (:data:`PARTITION_COLUMNS`) leaves the order rules open,
    and whether it leaves the ordered sink's rule (``nonmonotonic``) open."""
    records = int(row["p_records"] or 0)
    firsts = int(row["p_firsts"] or 0)
    fetches = int(row["p_fetches"] or 0)
    gap = int(row["p_twice"] or 0) > 0 or (
        records > 0 and row["p_high"] - row["p_low"] + 1 != records
    )
    fetched = fetches == 0 or (
        fetches == 1
        and row["p_first_pos"] is not None
        and row["p_fetch_pos"] < row["p_first_pos"]
        and row["p_first_off"] <= (row["p_fetch_off"] or 0)
    )
    order = (
        gap
        or int(row["p_open"] or 0) > 0
        or firsts > 1
        or (firsts == 1 and not fetched)
        or (int(row["p_zero"] or 0) > 0 and int(row["p_reads"] or 0) > 0)
    )
    sink = gap or int(row["p_heads"] or 0) > 1 or int(row["p_unordered"] or 0) > 0
    return order, sink
