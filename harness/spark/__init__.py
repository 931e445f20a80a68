"""The Spark checker: the local checker's verdicts for histories far larger than memory.

* :func:`check_parquet` checks every run stored at a path (a history Parquet file, or a
  directory of them) against a guarantee and returns a :class:`SparkCheck` (a
  :class:`~harness.check.verdict.Verdict` per run, and the worst status);
  :func:`analyze_parquet` runs the queries once for both guarantees.
* :func:`spark_session` gives the process's test-safe SparkSession (UI off, loopback,
  ephemeral ports, per-worker scratch directories); :func:`java_info` checks Java 17+ first
  and :class:`JavaUnavailable` says what to install.
* :func:`generate_history` writes large histories with anomalies planted at known places and
  returns the exact answer (:class:`GeneratedHistory`).
* ``python -m harness check-spark`` and ``spark-submit harness/spark/job.py`` are the command
  line (:mod:`harness.spark.check.command`).

Importing this package imports none of its modules (each name is imported from its module on
first use), nor pyspark or pyarrow, which are needed (``pip install 'stream-harness[spark]'``)
only when a check or a generator runs. ``docs/spark.md`` explains
the passes, the parity with the local checker and the measured throughput.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from harness._lazy import lazy_names

if TYPE_CHECKING:
    from harness.spark.check import (
        EVENTS_PER_RECORD,
        Analysis,
        GeneratedHistory,
        Plan,
        SparkCheck,
        analyze_parquet,
        check_parquet,
        generate_history,
    )
    from harness.spark.java import MIN_JAVA, JavaInfo, JavaUnavailable, java_info
    from harness.spark.session import spark_session, stop_spark_session
    from harness.spark.source import HistoryFile, RunSource, discover_runs

_LAZY: Final[dict[str, tuple[str, ...]]] = {
    "harness.spark.check": (
        "EVENTS_PER_RECORD",
        "Analysis",
        "GeneratedHistory",
        "Plan",
        "SparkCheck",
        "analyze_parquet",
        "check_parquet",
        "generate_history",
    ),
    "harness.spark.java": ("MIN_JAVA", "JavaInfo", "JavaUnavailable", "java_info"),
    "harness.spark.session": ("spark_session", "stop_spark_session"),
    "harness.spark.source": ("HistoryFile", "RunSource", "discover_runs"),
}
# Spark's Python processes import harness.spark.streaming.datasource (this package first) for
# every streaming query, and need none of the checker
__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)


__all__ = [
    "EVENTS_PER_RECORD",
    "MIN_JAVA",
    "Analysis",
    "GeneratedHistory",
    "HistoryFile",
    "JavaInfo",
    "JavaUnavailable",
    "Plan",
    "RunSource",
    "SparkCheck",
    "analyze_parquet",
    "check_parquet",
    "discover_runs",
    "generate_history",
    "java_info",
    "spark_session",
    "stop_spark_session",
]
