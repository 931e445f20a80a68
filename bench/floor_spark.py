"""What a narrow phase one would cost, against the per-record count (issue 27's floor).

    python bench/floor_spark.py HISTORY.parquet [--repeat 3] [--parts]

Issue 27 asks for a VALID check within 3x a per-record count of the same file. The checker's
phase one carries every fact of every record to phase two (docs/spark.md, "Throughput"),
and costs 4-5 counts (stop 40). This bench times, in one ``local[2]`` session, interleaved and
``--repeat`` times (the first round includes the JIT's warm-up):

* ``count``: ``groupBy("record_id").count()`` to the no-op sink, the floor (as
  ``bench_spark.py``);
* ``scan-all``: every column a rule reads (all but ``dlsn`` and ``detail``) to the no-op
  sink, and ``shuffle-all``: the same shuffled by record id, with no aggregation: what any
  checker that reads each event's fields and brings a record's events together pays at
  least, whatever it then computes;
* ``narrow``: one shuffle by record of a few counters and positions that a partial
  aggregation folds (appends, acks, reads, emits, observes, the first append, ack and read,
  the last observe), summed per file into the totals a verdict needs (records appended
  other than once, lost, duplicated, unexpected, acknowledged or read before their append):
  the shape a redesigned phase one would have;
* ``pairs``: the order certificate's neighbour pairs (each append keyed by its offset and by
  the next one, in one hash aggregation), which a redesigned phase one keeps;
* ``check``: ``check_parquet`` as it is.

It prints each time and its ratio to the round's count. It is a measurement of a shape, not
a checker: ``narrow`` decides only the rules named above (no transactions, parts, table
counts, read-order or commit rules), so the gap between ``narrow + pairs`` and 3 counts is
what the rest of the rules may cost.

``--parts`` times, instead of ``narrow``, ``pairs`` and ``check``, the checker's own phase one
(the fused pass's one action, as :func:`~harness.spark.check.queries.fused` runs it) and the
same with one of its parts left out at a time, so that what each part costs is measured
rather than guessed: ``no-pairs`` (the order certificate's neighbour pairs and their
shuffle), ``no-tables`` (the aggregated table sinks' input copies and their aggregates),
``no-ordered`` (the ordered log sink's facts), ``no-keep`` (the groups not kept: the action
computes them for each of its two readers) and ``bare`` (all four left out). A part left out
changes what phase one decides, so these are costs, not checks.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from harness.check import Guarantee


def _noop(frame: Any) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _count(events: Any) -> None:
    """The floor: ``groupBy("record_id").count()`` to the no-op sink (as ``bench_spark.py``)."""
    _noop(events.where("record_id IS NOT NULL").groupBy("record_id").count())


def _partitions(spark: Any) -> int:
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def _pairs(events: Any) -> object:
    """The order certificate's neighbour pairs: each append keyed by its offset and the next."""
    from pyspark.sql import functions as F

    appends = events.where(F.col("kind") == "append").select("partition", "offset", "index")
    none = F.lit(None).cast("long")
    mine = appends.select(
        "partition",
        F.col("offset").alias("at"),
        F.col("index").alias("mine"),
        none.alias("below"),
    )
    above = appends.select(
        "partition",
        (F.col("offset") + 1).alias("at"),
        none.alias("mine"),
        F.col("index").alias("below"),
    )
    met = (
        mine.unionByName(above)
        .groupBy("partition", "at")
        .agg(F.max("mine").alias("mine"), F.max("below").alias("below"))
    )
    return met.agg(F.sum((F.col("mine") < F.col("below")).cast("int"))).collect()


def _queries(spark: Any, path: str) -> dict[str, Callable[[], object]]:
    from pyspark.sql import functions as F

    events = spark.read.parquet(path)
    kind = F.col("kind")

    def counted(name: str) -> Any:
        return F.sum((kind == name).cast("int")).alias(name)

    def first(name: str) -> Any:
        return F.min(F.when(kind == name, F.col("index"))).alias(f"first_{name}")

    # every column but the two no rule reads (``dlsn``, ``detail``): what any checker scans
    read = [name for name in events.columns if name not in ("dlsn", "detail")]

    def scan_all() -> object:
        return _noop(events.select(*read))

    def shuffle_all() -> object:
        return _noop(events.select(*read).repartition(_partitions(spark), "record_id"))

    def narrow() -> object:
        records = (
            events.where(F.col("record_id").isNotNull())
            .groupBy("record_id")
            .agg(
                *(counted(name) for name in ("append", "ack", "read", "emit", "observe")),
                *(first(name) for name in ("append", "ack", "read")),
                F.max(F.when(kind == "observe", F.col("index"))).alias("last_observe"),
            )
        )
        column = F.col

        def total(condition: Any, name: str) -> Any:
            return F.sum(condition.cast("int")).alias(name)

        return records.agg(
            total(column("append") != 1, "appended_other_than_once"),
            total((column("ack") > 0) & (column("observe") == 0), "lost"),
            total(column("observe") > 1, "duplicated"),
            total((column("observe") > 0) & (column("append") == 0), "unexpected"),
            total(column("first_ack") < column("first_append"), "acked_before_append"),
            total(column("first_read") < column("first_append"), "read_before_append"),
            F.count(F.lit(1)).alias("records"),
        ).collect()

    def check() -> object:
        from harness.spark import check_parquet

        return check_parquet(path, Guarantee.EXACTLY_ONCE, spark=spark).status.value

    return {
        "count": lambda: _count(events),
        "scan-all": scan_all,
        "shuffle-all": shuffle_all,
        "narrow": narrow,
        "pairs": lambda: _pairs(events),
        "check": check,
    }


def _phase_one_parts(spark: Any, path: str) -> dict[str, Callable[[], object]]:
    """The count and phase one's one action, whole and with each part left out."""
    from harness.spark.check import queries
    from harness.spark.check.queries import _certify, _records
    from harness.spark.source import discover_runs

    runs = discover_runs(path)
    partitions = _partitions(spark)
    events = spark.read.parquet(path)

    def phase_one(
        pairs: bool = True, tables: bool = True, ordered: bool = True, keep: bool = True
    ) -> Callable[[], object]:
        def run() -> object:
            context = queries.load(spark, runs, partitions)
            try:
                needs = _records.needs(context)
                needs = _records.Needs(needs.tables and tables, needs.ordered and ordered)
                with context.setting(_records._BYPASS_PARTIAL, "true"):
                    groups = _records._groups(context, needs)
                    if keep:
                        groups = context.keep(groups, eager=False)
                found = None
                if pairs:
                    found = _certify.partition_inputs(
                        _certify.pair_rows(
                            groups, f"grain = {_records.RECORD}", f"grain = {_records.CONTROL}"
                        )
                    )
                return _records.per_run_rows(groups, found).collect()
            finally:
                context.release()

        return run

    return {
        "count": lambda: _count(events),
        "phase-one": phase_one(),
        "no-pairs": phase_one(pairs=False),
        "no-tables": phase_one(tables=False),
        "no-ordered": phase_one(ordered=False),
        "no-keep": phase_one(keep=False),
        "bare": phase_one(False, False, False, False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", help="a history Parquet file (bench_spark.py --keep)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument(
        "--parts", action="store_true", help="phase one with each of its parts left out"
    )
    args = parser.parse_args()
    from harness.spark import spark_session

    spark = spark_session("local[2]")
    queries = (_phase_one_parts if args.parts else _queries)(spark, args.history)
    print(f"{args.history}, load average {os.getloadavg()[0]:.1f}")
    for round_number in range(1, args.repeat + 1):
        seconds: dict[str, float] = {}
        for name, query in queries.items():
            start = time.perf_counter()
            query()
            seconds[name] = time.perf_counter() - start
        floor = seconds["count"]
        shown = ", ".join(
            f"{name} {value:.2f} s ({value / floor:.1f}x)" for name, value in seconds.items()
        )
        if args.parts:
            print(f"round {round_number}: {shown}", flush=True)
            continue
        both = (seconds["narrow"] + seconds["pairs"]) / floor
        print(f"round {round_number}: {shown}; narrow + pairs {both:.1f}x the count", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
