"""What verifying a history's checksum costs the Spark checker, against the same check without.

    python bench/bench_spark_checksum.py HISTORY.parquet [--rounds 3]

The Spark checker verifies the rows of a file that carries a checksum on the driver, in a
thread beside the Spark jobs (``harness/spark/check/_verify.py``). ``HISTORY`` is a history
Parquet file without a checksum (what ``bench_spark.py --keep`` leaves, since the generator
writes none); this bench writes a copy with one beside it (the same row groups, the
checksum added to the footer, as ``write_parquet`` would), then times, in one ``local[2]``
session, ``--rounds`` rounds of: the driver's verification alone (no Spark), the check of
the file (the baseline: nothing to verify) and the check of the copy (verified), in turn
first and second. It prints each round and the ratio of the verified check to the baseline;
the first round includes the JIT's warm-up, the medians of the others are the measure. Both
checks must give the same verdict.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
from pathlib import Path

from harness.check import Guarantee


def checksummed_copy(source: Path) -> Path:
    """``source`` written again row group by row group, with the checksum in its footer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.history.integrity import CHECKSUM_KEY, parquet_checksum, row_group_digest
    from harness.history.io import PARQUET_METADATA_KEY, PARQUET_WRITER_OPTIONS

    target = source.with_name(f"checksummed-{source.name}")
    if target.exists():
        return target
    pc = importlib.import_module("pyarrow.compute")
    parquet = pq.ParquetFile(source)
    schema = parquet.schema_arrow
    digests = []
    tmp = target.with_name(f".{target.name}.tmp")
    with pq.ParquetWriter(tmp, schema, **PARQUET_WRITER_OPTIONS) as writer:
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group)
            digests.append(row_group_digest(pa, pc, table.to_batches()))
            writer.write_table(table, row_group_size=table.num_rows)
        header = schema.metadata[PARQUET_METADATA_KEY]
        writer.add_key_value_metadata({CHECKSUM_KEY: parquet_checksum(header, digests)})
    os.replace(tmp, target)
    return target


def _verify_alone(path: Path) -> None:
    from harness.spark.check._verify import verified
    from harness.spark.source import discover_runs

    runs = discover_runs(path)
    assert runs[0].files[0].digests is not None, "the copy carries no checksum"
    with verified(runs):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path, help="a history Parquet file without a checksum")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args()
    from harness.spark import check_parquet, spark_session

    copy = checksummed_copy(args.history)
    spark = spark_session("local[2]")
    print(f"{args.history} and {copy.name}, load average {os.getloadavg()[0]:.1f}", flush=True)
    ratios = []
    for number in range(1, args.rounds + 1):
        start = time.perf_counter()
        _verify_alone(copy)
        alone = time.perf_counter() - start
        seconds: dict[Path, float] = {}
        verdicts = {}
        # in turn first and second: a check right after another is faster (the JIT warms up)
        for path in (args.history, copy) if number % 2 else (copy, args.history):
            start = time.perf_counter()
            verdicts[path] = check_parquet(path, Guarantee.EXACTLY_ONCE, spark=spark)
            seconds[path] = time.perf_counter() - start
        plain, verified = verdicts[args.history], verdicts[copy]
        baseline, checked = seconds[args.history], seconds[copy]
        if list(plain.verdicts.values()) != list(verified.verdicts.values()):
            raise SystemExit("error: the verified copy got another verdict")
        if number > 1:
            ratios.append(checked / baseline)
        print(
            f"round {number}: verification alone {alone:.2f} s, check {baseline:.2f} s, "
            f"check with verification {checked:.2f} s ({checked / baseline:.2f}x), "
            f"{plain.status.value}",
            flush=True,
        )
    if ratios:
        print(f"median of the warm rounds: {statistics.median(ratios):.2f}x the check")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
