"""End-to-end Structured Streaming throughput: the dlog source into a Parquet sink, against
Spark's built-in rate source into the same sink, in the same run, on ``local[2]``.

    python bench/bench_streaming.py [--records 400000] [--logs 2] [--batch 100000] [--repeats 2]
        [--min-partitions 1]

Ours: ``--records`` records (``--payload`` bytes each, JSON with a record id) are written
to ``--logs`` logs of a LevelDB namespace first (not timed); then a query reads them with
``spark.readStream.format("dlog")`` (``maxRecordsPerBatch`` ``--batch``, 0 for no limit;
one input partition per log, or ``minPartitions`` ``--min-partitions``) and writes
``log, sequence_id, payload`` to a Parquet file sink with a checkpoint,
``Trigger.AvailableNow``.

Baseline: Spark's ``rate-micro-batch`` source (the ``rate`` source's deterministic form)
with ``rowsPerBatch`` = ``--batch`` (``--records`` when 0) and ``numPartitions`` = the
larger of ``--logs`` and ``--min-partitions`` (as many Parquet files per batch), projected
to ``value, payload`` (a ``--payload``-byte binary column), into the same kind of sink:
the same rows in the same batches. With one batch it runs under ``Trigger.AvailableNow`` and
ends by itself, like ours; with several it has no end and is stopped once its batches hold
``--records`` rows.

Both sides are timed the same way: from the wall clock just before ``start()`` to the end of
the batch that committed the last of the ``--records`` rows (that batch's trigger start plus
its ``triggerExecution`` in Spark's progress report, so no polling interval is counted).
One untimed run of each at full size warms up the JVM and the Python workers; then each side
runs ``--repeats`` times, alternating, on fresh directories, and the best run counts.
Prints records/s for both and the ratio. Figures, not assertions.

(Until this version the baseline was the ``rate`` source with ``rowsPerSecond``: it makes
rows by the wall-clock second, so a run asked for 400,000 rows wrote its first non-empty
batch of 1,000,000 or more after waiting a second, and the loop polled progress once a
second; neither the rows nor the timing matched the dlog query's.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

from harness.log import LogConfig, LogRecord, leveldb_uri, open_namespace


def write_input(uri: str, logs: Sequence[str], records: int, payload_size: int) -> None:
    config = LogConfig(segment_max_records=1_000_000)
    with open_namespace(uri, config=config) as namespace:
        for index, log in enumerate(logs):
            with namespace.open_log(log) as manager, manager.open_writer() as writer:
                for count, n in enumerate(range(index, records, len(logs)), start=1):
                    body = json.dumps({"id": f"r{n}", "key": f"k{n % 16}", "value": 1})
                    writer.write(LogRecord(n, body.ljust(payload_size).encode()))
                    if count % 5_000 == 0:
                        writer.commit()
                writer.commit()


def _finished_at(query: Any, records: int) -> tuple[float, int]:
    """When the first batch at which ``records`` rows were committed ended (its trigger's
    start plus its ``triggerExecution``, from the progress reports, in epoch seconds), and
    the rows committed by then; (0.0, rows) while fewer are committed."""
    rows = 0
    for progress in sorted(query.recentProgress, key=lambda p: int(p["batchId"])):
        rows += int(progress["numInputRows"])
        if rows >= records:
            begun = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
            took = int(progress["durationMs"]["triggerExecution"]) / 1000
            return begun.timestamp() + took, rows
    return 0.0, rows


def _sink(frame: Any, work: Path) -> Any:
    """The same Parquet file sink for both sides (Spark's default compression, snappy)."""
    return (
        frame.writeStream.format("parquet")
        .option("path", str(work / "sink"))
        .option("checkpointLocation", str(work / "checkpoint"))
    )


def dlog_run(
    spark: Any,
    uri: str,
    logs: Sequence[str],
    records: int,
    batch: int,
    work: Path,
    min_partitions: int = 1,
) -> tuple[float, int]:
    """Seconds from ``start()`` to the end of the batch that committed the last record, and
    the rows read."""
    reader = spark.readStream.format("dlog").option("uri", uri).option("logs", ",".join(logs))
    if batch:
        reader = reader.option("maxRecordsPerBatch", str(batch))
    if min_partitions > 1:
        reader = reader.option("minPartitions", str(min_partitions))
    frame = reader.load().select("log", "sequence_id", "payload")
    start = time.time()
    query = _sink(frame, work).trigger(availableNow=True).start()
    query.awaitTermination()
    ended, rows = _finished_at(query, records)
    if not ended or rows != records:
        raise SystemExit(f"the dlog query read {rows} rows, expected {records}")
    return ended - start, rows


def rate_run(
    spark: Any, records: int, batch: int, partitions: int, payload_size: int, work: Path
) -> tuple[float, int]:
    """The same for Spark's ``rate-micro-batch`` source: ``rowsPerBatch`` rows per batch
    (``batch``, or ``records`` in one batch), ``numPartitions`` = ``partitions``."""
    from pyspark.sql import functions as F

    per_batch = batch or records
    frame = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(per_batch))
        .option("numPartitions", str(partitions))
        .load()
        .select(
            "value",
            F.rpad(F.col("value").cast("string"), payload_size, " ")
            .cast("binary")
            .alias("payload"),
        )
    )
    start = time.time()
    writer = _sink(frame, work)
    if per_batch >= records:  # one batch, and the query ends by itself, as the dlog one does
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        ended, rows = _finished_at(query, records)
        return ended - start, rows
    query = writer.start()  # endless: stopped once the batches hold ``records`` rows
    try:
        ended, rows = 0.0, 0
        while not ended:
            query.awaitTermination(0.05)
            if query.exception() is not None:
                raise RuntimeError(f"the rate query failed: {query.exception()}")
            ended, rows = _finished_at(query, records)
    finally:
        query.stop()
    return ended - start, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--logs", type=int, default=2)
    parser.add_argument(
        "--batch", type=int, default=100_000, help="maxRecordsPerBatch (0: no limit, one batch)"
    )
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per record")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--min-partitions",
        type=int,
        default=1,
        help="the dlog source's minPartitions (the rate side gets as many partitions)",
    )
    args = parser.parse_args(argv)

    from harness.spark.session import spark_session
    from harness.spark.streaming.datasource import register_dlog

    spark = spark_session("local[2]")
    # stopping the endless rate query aborts its running batch, which Spark logs as errors
    # (with stack traces) through loggers the harness's log4j file sets to "error" by name
    spark.sparkContext.setLogLevel("FATAL")
    jvm = spark.sparkContext._jvm
    fatal = jvm.org.apache.logging.log4j.Level.FATAL
    for name in ("org.apache.spark", "org.apache.hadoop", "org.apache.parquet"):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, fatal)
    register_dlog(spark)
    import pyspark

    root = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    try:
        logs = [f"in{i}" for i in range(args.logs)]
        uri = leveldb_uri(root / "namespace")
        loads = os.getloadavg()
        started = time.perf_counter()
        write_input(uri, logs, args.records, args.payload)
        written = time.perf_counter() - started
        print(
            f"streaming benchmark: pyspark {pyspark.__version__}, local[2], python "
            f"{sys.version.split()[0]}; {args.records} records of {args.payload} bytes in "
            f"{args.logs} log(s) (written in {written:.1f}s, not timed), maxRecordsPerBatch "
            f"{args.batch or 'unlimited'}, minPartitions {args.min_partitions}"
        )
        # one untimed run of each warms up the JVM and the Python workers
        split = args.min_partitions
        parts = max(args.logs, split)
        dlog_run(spark, uri, logs, args.records, args.batch, root / "warm-dlog", split)
        rate_run(spark, args.records, args.batch, parts, args.payload, root / "warm-rate")
        ours: list[float] = []
        theirs: list[float] = []
        for repeat in range(args.repeats):
            elapsed, rows = dlog_run(
                spark, uri, logs, args.records, args.batch, root / f"dlog-{repeat}", split
            )
            ours.append(rows / elapsed)
            elapsed, rows = rate_run(
                spark, args.records, args.batch, parts, args.payload, root / f"rate-{repeat}"
            )
            theirs.append(rows / elapsed)
        best_ours, best_theirs = max(ours), max(theirs)
        for name, runs in (("dlog -> parquet", ours), ("rate-micro-batch -> parquet", theirs)):
            print(
                f"  {name:28} {max(runs):>10,.0f} records/s   (runs: "
                f"{', '.join(f'{r:,.0f}' for r in runs)})"
            )
        print(f"  {'ratio (dlog / rate)':28} {best_ours / best_theirs:>10.2f}")
        print(f"  {'ratio of the medians':28} {median(ours) / median(theirs):>10.2f}")
        print(
            f"  load average (1 min) at the start and the end: {loads[0]:.1f}, "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} core(s): a loaded machine starves "
            "the Python source more than the JVM-only rate source"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
