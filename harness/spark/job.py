"""The Spark checker as a Spark application, for ``spark-submit``.

::

    spark-submit --master spark://HOST:7077 harness/spark/job.py HISTORY \\
        --guarantee exactly-once --out verdict.json

takes the same options as ``python -m harness check-spark`` (see
:mod:`harness.spark.check.command`) and exits with the same codes: 0 VALID, 1 INVALID, 2 UNKNOWN
or an error. The ``harness`` package must be importable by the driver's Python (installed,
or on ``PYTHONPATH``). ``python -m harness.spark.job`` runs it without spark-submit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), check, stop Spark; return the exit code."""
    from harness.spark.check.command import add_arguments, run
    from harness.spark.session import stop_spark_session

    parser = argparse.ArgumentParser(
        prog="spark-submit harness/spark/job.py",
        allow_abbrev=False,
        description="Check history Parquet files with the Spark checker. Exit code: 0 VALID, "
        "1 INVALID, 2 UNKNOWN or an error.",
    )
    add_arguments(parser)
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        return run(args)
    finally:
        stop_spark_session()


if __name__ == "__main__":
    # run as a file (spark-submit job.py), this directory is sys.path[0]: drop it so that
    # its modules (java.py, session.py, ...) cannot shadow top-level ones
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.exit(main())
