"""The Spark checker: the local checker's verdicts for history Parquet far larger than memory.

* :func:`check_parquet` checks every run stored at a path (a history Parquet file, or a
  directory of them) against a guarantee and returns a :class:`SparkCheck` (a
  :class:`~harness.check.verdict.Verdict` per run, and the worst status);
  :func:`analyze_parquet` runs the queries once for both guarantees. A check Spark cannot
  read or plan raises :class:`SparkCheckFailed` (:class:`UnreadableHistory` for a damaged
  file), never a verdict; so does a file that does not match its checksum
  (:class:`~harness.errors.CorruptData`: the driver verifies the rows beside the check).
* :func:`generate_history` writes large histories with anomalies planted at known places
  and returns the exact answer (:class:`GeneratedHistory`).
* ``python -m harness check-spark`` and ``spark-submit harness/spark/job.py`` are the
  command line (:mod:`harness.spark.check.command`).

The rules, the wording and the verdict assembly are :mod:`harness.check`'s (``wording``,
``policy``); this package only computes the facts with Spark (:mod:`.queries`, split by
idea). Importing it imports neither pyspark nor pyarrow.
"""

from harness.spark.check._failure import SparkCheckFailed, UnreadableHistory
from harness.spark.check.checker import Analysis, SparkCheck, analyze_parquet, check_parquet
from harness.spark.check.generate import (
    EVENTS_PER_RECORD,
    GeneratedHistory,
    Plan,
    generate_history,
)

__all__ = [
    "EVENTS_PER_RECORD",
    "Analysis",
    "GeneratedHistory",
    "Plan",
    "SparkCheck",
    "SparkCheckFailed",
    "UnreadableHistory",
    "analyze_parquet",
    "check_parquet",
    "generate_history",
]
