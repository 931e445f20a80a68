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
lost record, whose neighbour has no observe before it). Each certificate is per partition,
given the run-wide conditions above (one reader, no rollback, no record read twice): when
they hold, phase two judges only the partitions a certificate left open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.spark.check.queries._load import COMMIT, FETCH, sql, when

__all__ = ["PARTITION_COLUMNS", "open_partition", "pair_rows", "partition_inputs"]

_SELF: Final = 0
_NEXT: Final = 1
_COMMIT: Final = 2
_FETCH: Final = 3
_ORDER: Final = 0
"""Pair group of a partition's offset (records, their neighbours, commits)."""
_FETCHES: Final = 1
_PAIR_KEYS: Final = ("run", "bt", "pno", "k")


def pair_rows(groups: DataFrame, record: str, control: str) -> DataFrame:
    """The rows of the pairs' aggregation from the fused pass's groups (``record``,
    ``control``: SQL tests of a record's and a rare event's group): each appended record
    under its offset and the next, each commit and fetch of a partition. Written as SQL
    text, as the fused pass's aggregates are (one call into the JVM each)."""

    def row(bt: int, role: int, pno: str, k: str, **fields: str) -> str:
        values = {n: fields.get(n, "false" if n == "odd" else "cast(null as bigint)") for n in _ROW}
        return (
            f"named_struct('run', run, 'bt', {bt}, 'pno', cast({pno} as int), 'k', {k},"
            f" 'role', {role}, " + ", ".join(f"'{n}', {value}" for n, value in values.items()) + ")"
        )

    appended = f"({record} AND n_app >= 1)"
    own = {
        "pos": "app_pos",
        "read": "CASE WHEN read_n >= 1 THEN read_last END",
        "ord": "ordered_first",
        "odd": "(read_n > 1 OR coalesce(read_red, false))",
    }
    parted = f"({control} AND e_pno IS NOT NULL)"
    # one read of the groups: each group's rows (a record's two, a commit's or a fetch's
    # one) from one generator, not one scan of the kept groups per role
    first = (
        f"CASE WHEN {appended} THEN {row(_ORDER, _SELF, 'app_pno', 'app_off', **own)}"
        f" WHEN {parted} AND e_kc = {COMMIT}"
        f" THEN {row(_ORDER, _COMMIT, 'e_pno', 'e_off', pos='gp')}"
        f" WHEN {parted} AND e_kc = {FETCH}"
        f" THEN {row(_FETCHES, _FETCH, 'e_pno', 'cast(null as bigint)', pos='gp', off='e_off')}"
        " END"
    )
    second = f"CASE WHEN {appended} THEN {row(_ORDER, _NEXT, 'app_pno', 'app_off + 1', **own)} END"
    return (
        groups.where(f"{appended} OR ({parted} AND e_kc IN ({COMMIT}, {FETCH}))")
        .selectExpr(f"explode(array({first}, {second})) AS g")
        .where("g IS NOT NULL")
        .select("g.*")
    )


_ROW: Final = ("pos", "read", "ord", "odd", "off")
"""The fields of a pairs' row after its keys and role."""


def _pairs(rows: DataFrame) -> DataFrame:
    """One row per pair group: what its record, its neighbour, its commits, a partition's
    fetches or a key's sides hold."""

    def of(which: int, column: str, how: str = "max") -> str:
        return f"{how}({when(f'role = {which}', column)})"

    return rows.groupBy(*_PAIR_KEYS).agg(
        *sql(
            f"count(CASE WHEN role = {_SELF} THEN 1 END) AS self_n",
            f"{of(_SELF, 'pos')} AS self_pos",
            f"{of(_SELF, 'read')} AS self_read",
            f"{of(_SELF, 'ord')} AS self_ord",
            f"{of(_SELF, 'odd')} AS self_odd",
            f"count(CASE WHEN role = {_NEXT} THEN 1 END) AS prev_n",
            f"{of(_NEXT, 'pos')} AS prev_pos",
            f"{of(_NEXT, 'read')} AS prev_read",
            f"{of(_NEXT, 'ord')} AS prev_ord",
            f"count(CASE WHEN role = {_COMMIT} THEN 1 END) AS commit_n",
            f"{of(_COMMIT, 'pos', 'min')} AS commit_lo",
            f"{of(_COMMIT, 'pos')} AS commit_hi",
            f"count(CASE WHEN role = {_FETCH} THEN 1 END) AS fetch_n",
            f"{of(_FETCH, 'pos', 'min')} AS fetch_pos",
            f"{of(_FETCH, 'off')} AS fetch_off",
        )
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
    single = "self_n = 1"
    prev = "prev_n = 1"
    record_open = (
        f"({single} AND (coalesce(self_odd, false) OR prev_n > 1"
        f" OR ({prev} AND self_pos <= prev_pos)"
        " OR (prev_read IS NOT NULL AND self_read IS NOT NULL AND self_read <= prev_read)))"
    )
    # a commit of c follows the read of c - 1 (or c is 0) and precedes the read of c
    commit_open = (
        f"(commit_n > 0 AND (NOT (k = 0 OR ({prev} AND prev_read IS NOT NULL"
        " AND prev_read < commit_lo))"
        " OR (self_read IS NOT NULL AND commit_hi >= self_read)))"
    )
    first = f"({single} AND self_read IS NOT NULL AND prev_read IS NULL)"
    head = f"({single} AND self_ord IS NOT NULL AND prev_ord IS NULL)"
    flagged = p.selectExpr(
        "run",
        "pno",
        f"CASE WHEN {single} THEN k END AS i_off",
        f"{single} AS i_record",
        "self_n > 1 AS i_twice",
        f"coalesce({record_open} OR {commit_open}, false) AS i_open",
        f"{first} AS i_first",
        f"CASE WHEN {first} THEN self_read END AS i_first_pos",
        f"CASE WHEN {first} THEN k END AS i_first_off",
        f"({single} AND self_read IS NOT NULL) AS i_read",
        "(commit_n > 0 AND k = 0 AND self_read IS NULL) AS i_zero",
        "fetch_n",
        "fetch_pos",
        "fetch_off",
        f"{head} AS i_head",
        "coalesce(self_ord IS NOT NULL AND prev_ord IS NOT NULL AND self_ord <= prev_ord, false)"
        " AS i_unordered",
    )
    aggregates = sql(
        "count(CASE WHEN i_record THEN 1 END) AS p_records",
        "min(i_off) AS p_low",
        "max(i_off) AS p_high",
        "count(CASE WHEN i_open THEN 1 END) AS p_open",
        "count(CASE WHEN i_twice THEN 1 END) AS p_twice",
        "count(CASE WHEN i_first THEN 1 END) AS p_firsts",
        "min(i_first_pos) AS p_first_pos",
        "min(i_first_off) AS p_first_off",
        "count(CASE WHEN i_read THEN 1 END) AS p_reads",
        "count(CASE WHEN i_zero THEN 1 END) AS p_zero",
        "sum(fetch_n) AS p_fetches",
        "min(fetch_pos) AS p_fetch_pos",
        "max(fetch_off) AS p_fetch_off",
        "count(CASE WHEN i_head THEN 1 END) AS p_heads",
        "count(CASE WHEN i_unordered THEN 1 END) AS p_unordered",
    )
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
