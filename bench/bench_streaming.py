"""End-to-end Structured Streaming throughput: the dlog source into a Parquet sink, against
Spark's built-in ``rate`` source into the same sink, in the same run, on ``local[2]``.

    python bench/bench_streaming.py [--records 400000] [--logs 2] [--batch 100000] [--repeats 2]

Ours: ``--records`` records (``--payload`` bytes each, JSON with a record id) are written
to ``--logs`` logs of a LevelDB namespace first (not timed); then a query reads them with
``spark.readStream.format("dlog")`` (``maxRecordsPerBatch`` ``--batch``, 0 for no limit;
one input partition per log) and writes ``log, sequence_id, payload`` to a Parquet file sink
with a checkpoint, ``Trigger.AvailableNow``. Timed: from ``start()`` to the query's end
(every record committed in the sink).

Baseline: ``spark.readStream.format("rate")`` with ``numPartitions`` = ``--logs`` and
``rowsPerSecond`` far above what the sink takes, projected to ``value, payload`` (a
``--payload``-byte binary column), into the same kind of sink. The rate source has no end,
so it is timed from ``start()`` to the first progress report at which ``--records`` rows are
committed; its batches then hold what arrived while the previous one ran, a sink-bound
rate. Each side runs ``--repeats`` times on fresh directories; the best run counts.
Prints records/s for both and the ratio. Figures, not assertions.
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
from pathlib import Path
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


def dlog_run(
    spark: Any, uri: str, logs: Sequence[str], batch: int, work: Path
) -> tuple[float, int]:
    reader = spark.readStream.format("dlog").option("uri", uri).option("logs", ",".join(logs))
    if batch:
        reader = reader.option("maxRecordsPerBatch", str(batch))
    frame = reader.load().select("log", "sequence_id", "payload")
    start = time.perf_counter()
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(work / "sink"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
    return elapsed, rows


def rate_run(
    spark: Any, records: int, partitions: int, payload_size: int, work: Path
) -> tuple[float, int]:
    from pyspark.sql import functions as F

    frame = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(max(records, 1_000_000)))
        .option("numPartitions", str(partitions))
        .load()
        .select(
            "value",
            F.rpad(F.col("value").cast("string"), payload_size, " ")
            .cast("binary")
            .alias("payload"),
        )
    )
    start = time.perf_counter()
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(work / "sink"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .start()
    )
    seen: set[int] = set()
    rows = 0
    try:
        while rows < records:
            # progress reports arrive once per batch; poll them (the rate source never ends)
            query.awaitTermination(1)
            for progress in query.recentProgress:
                if progress["batchId"] not in seen and progress["numInputRows"]:
                    seen.add(progress["batchId"])
                    rows += int(progress["numInputRows"])
            if query.exception() is not None:
                raise RuntimeError(f"the rate query failed: {query.exception()}")
        elapsed = time.perf_counter() - start
    finally:
        query.stop()
    return elapsed, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--logs", type=int, default=2)
    parser.add_argument(
        "--batch", type=int, default=100_000, help="maxRecordsPerBatch (0: no limit, one batch)"
    )
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per record")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)

    from harness.spark.session import spark_session
    from harness.spark.streaming.datasource import register_dlog

    spark = spark_session("local[2]")
    # stopping the endless rate query aborts its running batch, which Spark logs as errors
    spark.sparkContext.setLogLevel("FATAL")
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
            f"{args.batch or 'unlimited'}"
        )
        # one untimed run of each warms up the JVM and the Python workers
        dlog_run(spark, uri, logs, args.batch, root / "warm-dlog")
        rate_run(spark, min(args.records, 20_000), args.logs, args.payload, root / "warm-rate")
        ours: list[float] = []
        theirs: list[float] = []
        for repeat in range(args.repeats):
            elapsed, rows = dlog_run(spark, uri, logs, args.batch, root / f"dlog-{repeat}")
            if rows != args.records:
                raise SystemExit(f"the dlog query read {rows} rows, expected {args.records}")
            ours.append(rows / elapsed)
            elapsed, rows = rate_run(
                spark, args.records, args.logs, args.payload, root / f"rate-{repeat}"
            )
            theirs.append(rows / elapsed)
        best_ours, best_theirs = max(ours), max(theirs)
        print(
            f"  {'dlog -> parquet':24} {best_ours:>12,.0f} records/s   (runs: "
            f"{', '.join(f'{r:,.0f}' for r in ours)})"
        )
        print(
            f"  {'rate -> parquet':24} {best_theirs:>12,.0f} records/s   (runs: "
            f"{', '.join(f'{r:,.0f}' for r in theirs)})"
        )
        print(f"  {'ratio (dlog / rate)':24} {best_ours / best_theirs:>12.2f}")
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
