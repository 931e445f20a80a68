"""Spark Structured Streaming under test: the dlog data source, its contract, crash schedules.

* :func:`run_stream` runs one :class:`Variant` of a streaming query under a
  :class:`StreamSchedule` (produce, run, crash by exception or ``SIGKILL``, drain) and returns
  a :class:`StreamResult` whose history the checkers judge (:mod:`.runner`); a failure of
  Spark ends the run ``incomplete`` (UNKNOWN), never with an exception.
* The schedules are data (:mod:`harness.faults.streams`: :class:`StreamSchedule` and its
  steps); :func:`harness.strategies.stream_schedules` draws them with Hypothesis.
* :mod:`harness.spark.streaming.datasource` is the reference log as a PySpark Python data
  source, ``spark.readStream.format("dlog")`` (it imports pyspark on import).
* :mod:`harness.spark.streaming.contract` checks the promises Spark's exactly-once rests on,
  on any Python streaming data source.
* :mod:`harness.spark.streaming.job` runs a user's PySpark job, unchanged, under a stream
  schedule (its Kafka source and sink served by the reference log,
  :mod:`~harness.spark.streaming.kafka_source`); :mod:`~harness.spark.streaming.jobsearch`
  makes the job a system under test of the engine's search (a crash at every micro-batch
  point planned, then drawn ones; counterexamples saved; ``python -m harness spark-job``),
  and :mod:`~harness.spark.streaming.variantsearch` does so for the built-in variants.

Importing this package imports neither pyspark nor Hypothesis; a query run imports pyspark.
``docs/streaming.md`` describes the variants, the crashes and the measured throughput.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.spark.streaming.runner import (
        FiredCrash,
        InjectedCrash,
        RunSpec,
        StreamConfig,
        StreamResult,
        Variant,
        run_stream,
    )

__all__ = [
    "FiredCrash",
    "InjectedCrash",
    "RunSpec",
    "StreamConfig",
    "StreamResult",
    "Variant",
    "run_stream",
]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use: Spark's Python processes import
    :mod:`harness.spark.streaming.datasource` (this package first) for every query, and
    need none of the runner."""
    import importlib

    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.runner"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
