"""Phase one's order certificate: one sort of the cached records that shows a run has no
occurrence of the order rules, or says it cannot tell (internal).

The order rules (``skip``, ``offset-ahead`` by commit, ``offset-regression``,
``nonmonotonic`` and the validator's append-offset rule) each need their events in order.
Phase two answers them exactly, one sort each (:mod:`._anomalies`). Phase one sorts the
records and the commits of each partition once, by offset, and checks that the offset order
is also the order of every position that matters (appends, reads, first observes in the
ordered sink, commits). When it is, no order rule can fire, by these arguments (a row is
*certified* when its check holds; a run is certified when all its rows are):

* **append-offset rule** (an append below an offset acknowledged before it): the records'
  offsets strictly increase with their append positions and each record's acks follow its
  append (the fused pass's certificate), so a record at a higher offset is acknowledged
  after the lower one is appended.
* **skip**: one process reads and fetches the run, each record is read at most once and
  never as a redelivery, the reads of a partition are at consecutive offsets in increasing
  position, and the partition has no fetch, or one fetch before its first read, whose
  offset (0 when null) is at least the first read's. So each read follows the previous
  read's offset, or its fetch's, and never lies above it (a truncation only raises the
  bound).
* **offset-ahead** (a commit ``c`` above the highest offset read before it plus one): with
  those reads, ``c = 0`` or the read of offset ``c - 1`` precedes the commit.
* **offset-regression**: the run has no rollback, and the commits of a partition in offset
  order are also in position order (so no commit is below the one before it).
* **nonmonotonic** (one ordered sink, no record with two parts there): the records' first
  observes there increase with their offsets, so no adjacent pair in observe order has
  decreasing offsets (an unsorted sequence always has one).

A run that is not certified is not wrong: phase two runs the exact rules over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from harness.spark.check.queries._load import _LONG, COMMIT, FETCH
from harness.spark.check.queries._records import CONTROL, RECORD

__all__ = ["certified"]

_RECORD: Final = 0
_COMMIT: Final = 1
_FETCH: Final = 2


def _rows(groups: DataFrame, runs: Sequence[int]) -> DataFrame:
    """The appended records, the commits and the fetches of ``runs``, from the fused
    pass's cached groups, keyed for one sort: ``run, pno, key`` (a record's offset, a
    commit's offset less one, so it follows the record it needs read), ``typ``, ``pos``."""
    grain = F.col("grain")
    wanted = F.col("run").isin(*runs)
    records = groups.where(wanted & (grain == RECORD) & (F.col("n_app") >= 1)).select(
        "run",
        F.col("app_pno").alias("pno"),
        F.col("app_off").alias("key"),
        F.lit(_RECORD).alias("typ"),
        F.col("app_pos").alias("pos"),
        F.when(F.col("read_n") >= 1, F.col("read_last")).alias("read"),
        ((F.col("read_n") > 1) | F.coalesce(F.col("read_red"), F.lit(False))).alias("odd"),
        F.col("ordered_first").alias("ord"),
        F.lit(None).cast(_LONG).alias("off"),
    )
    control = groups.where(
        wanted & (grain == CONTROL) & F.col("e_pno").isNotNull() & F.col("e_kc").isin(COMMIT, FETCH)
    ).select(
        "run",
        F.col("e_pno").alias("pno"),
        F.when(F.col("e_kc") == COMMIT, F.col("e_off") - 1).otherwise(F.lit(-2)).alias("key"),
        F.when(F.col("e_kc") == COMMIT, _COMMIT).otherwise(_FETCH).alias("typ"),
        F.col("gp").alias("pos"),
        F.lit(None).cast(_LONG).alias("read"),
        F.lit(False).alias("odd"),
        F.lit(None).cast(_LONG).alias("ord"),
        F.col("e_off").alias("off"),
    )
    return records.unionByName(control)


def _checks(rows: DataFrame) -> Column:
    """True for a row its certificate does not cover (see the module docstring)."""
    order = Window.partitionBy("run", "pno").orderBy("key", "typ", "pos")
    # running frames only: a frame over the whole partition would buffer it (fetches sort
    # first, so at any record the running count and last fetch are the partition's)
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    typ = F.col("typ")
    record = typ == _RECORD
    read = F.col("read")

    def last(condition: Column, value: Column) -> Column:
        return F.last(F.when(condition, value), True).over(before)

    prev_record = last(record, F.struct(F.col("key").alias("o"), F.col("pos").alias("p")))
    prev_read = last(record & read.isNotNull(), F.struct(F.col("key").alias("o"), read.alias("p")))
    prev_ord = last(record & F.col("ord").isNotNull(), F.col("ord"))
    prev_commit = last(typ == _COMMIT, F.col("pos"))
    fetches = F.count(F.when(typ == _FETCH, 1)).over(before)
    fetch = last(typ == _FETCH, F.struct("pos", "off"))
    appended = prev_record.isNull() | (
        (F.col("key") > prev_record["o"]) & (F.col("pos") > prev_record["p"])
    )
    first_read = (fetches == 0) | (
        (fetches == 1)
        & (fetch["pos"] < read)
        & (F.col("key") <= F.coalesce(fetch["off"], F.lit(0).cast(_LONG)))
    )
    in_turn = F.when(prev_read.isNull(), first_read).otherwise(
        (F.col("key") == prev_read["o"] + 1) & (read > prev_read["p"])
    )
    reads = read.isNull() | (~F.col("odd") & in_turn)
    ordered = F.col("ord").isNull() | prev_ord.isNull() | (F.col("ord") > prev_ord)
    record_ok = appended & reads & ordered & ~F.col("odd")
    commit_ok = (F.col("off") == 0) | (
        prev_read.isNotNull() & (prev_read["o"] == F.col("key")) & (prev_read["p"] < F.col("pos"))
    )
    commit_ok = commit_ok & (prev_commit.isNull() | (prev_commit < F.col("pos")))
    ok = F.when(record, record_ok).when(typ == _COMMIT, commit_ok).otherwise(F.lit(True))
    return ~F.coalesce(ok, F.lit(False))


def certified(groups: DataFrame, runs: Sequence[int]) -> set[int]:
    """The runs among ``runs`` whose every row the certificate covers (one shuffle and
    sort of their records, commits and fetches; a row per uncovered partition collected)."""
    if not runs:
        return set()
    rows = _rows(groups, runs)
    flagged = rows.select("run", "pno", _checks(rows).alias("open"))
    # grouped by the window's own partitioning: no second shuffle, one row per partition
    found = (
        flagged.groupBy("run", "pno")
        .agg(F.count_if("open").alias("open"))
        .where(F.col("open") > 0)
        .select("run")
        .collect()
    )
    return set(runs) - {int(row["run"]) for row in found}
