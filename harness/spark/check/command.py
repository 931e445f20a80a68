"""The ``check-spark`` command: check history Parquet with Spark and print the verdict JSON.

``python -m harness check-spark HISTORY --guarantee G [--master URL] [--out FILE] [--json]`` and
``spark-submit harness/spark/job.py HISTORY ...`` run the same code: :func:`add_arguments`
declares the options, :func:`run` does the work and returns the exit code (0 VALID,
1 INVALID, 2 UNKNOWN or an error, which is printed as one ``error: ...`` line on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from harness._shown import describe_exception
from harness.check.verdict import EXIT_CODES
from harness.errors import ConfigError, HarnessError
from harness.report.json_report import render_output
from harness.settings import add_options, from_options

__all__ = ["add_arguments", "run"]

_ERROR_EXIT: Final = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's positional argument and options on ``parser``."""
    parser.add_argument(
        "history",
        help="a history Parquet file, or a directory of them (one run per run_id=<id>/ "
        "directory, or per header run_id)",
    )
    add_options(
        parser,
        ("guarantee", "json"),
        help={"json": "the verdict JSON on stdout: what check-spark prints without --out too"},
    )
    parser.add_argument(
        "--master",
        default=None,
        help="the Spark master: local[N] (default local[2]) or spark://HOST:PORT; under "
        "spark-submit the default is the master spark-submit was given",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the verdict JSON to this file (stdout then gets a short summary)",
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="spark.sql.shuffle.partitions (default: 4 per local core, at least 4)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print how many Spark jobs the check ran and how long it took (on stderr)",
    )
    parser.add_argument(
        "--driver-memory",
        default=None,
        help="the driver JVM heap for local runs, e.g. 8g (default: Spark's, 1g)",
    )


def _partitions(args: argparse.Namespace) -> int:
    if args.shuffle_partitions is not None:
        if args.shuffle_partitions < 1:
            raise ConfigError(
                f"--shuffle-partitions must be at least 1, got {args.shuffle_partitions}"
            )
        return int(args.shuffle_partitions)
    master = args.master or "local[2]"
    if master.startswith("local["):
        cores = master[len("local[") : -1]
        if cores.isdigit():
            return max(4, 4 * int(cores))
    return 16


def run(args: argparse.Namespace, live: Any = None) -> int:
    """Check ``args.history`` and report; returns the exit code (never raises: an error is
    printed as one ``error: ...`` line and gives exit code 2). ``live``: the
    ``LiveProgress`` to draw on (its total: the history's rows), else one is made here."""
    try:
        from harness.report.live import LiveProgress
        from harness.spark.source import discover_runs

        rows = sum(run.rows for run in discover_runs(args.history))
        if live is not None:
            return _checked(args, live, rows)
        with LiveProgress(f"check-spark {args.history}", rows, units="rows") as own:
            return _checked(args, own, rows)
    except HarnessError as exc:
        _close(live)
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line
        return _ERROR_EXIT
    except Exception as exc:  # fail closed: no verdict is ever exit code 1
        _close(live)
        print(
            f"error: the Spark check of {args.history!s} failed: {describe_exception(exc)}",
            file=sys.stderr,
        )
        return _ERROR_EXIT


def _close(live: Any) -> None:
    """Take the caller's progress line down, so that the error line stands on its own."""
    if live is not None:
        live.close()


def _checked(args: argparse.Namespace, live: Any, rows: int) -> int:
    """:func:`run`'s work, with progress on ``live``."""
    from harness.spark.check._watch import watched
    from harness.spark.check.checker import check_parquet
    from harness.spark.session import spark_session

    settings = from_options(args)
    guarantee = settings.require_guarantee("--guarantee")
    live.step(detail="starting Spark")
    spark = spark_session(
        args.master,
        shuffle_partitions=_partitions(args),
        driver_memory=args.driver_memory,
    )
    start = time.perf_counter()
    with _quiet_logs(spark), watched(spark, live, rows):
        result = check_parquet(args.history, guarantee, spark=spark)
    live.close()
    if args.explain:
        print(
            f"explain: {result.jobs} Spark jobs for {len(result.verdicts)} run"
            f"{'s' if len(result.verdicts) != 1 else ''} in "
            f"{time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
    text = render_output(  # the envelope of every command's --json
        "check-spark",
        result.status,
        result.summary().splitlines()[0],
        guarantee=result.guarantee.value,
        runs=result.to_json()["runs"],
    )
    if args.out is not None:
        try:
            args.out.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot write the verdict to {str(args.out)!r}: {exc.strerror}"
            ) from None
    print(text if args.out is None or settings.json else result.summary())
    return EXIT_CODES[result.status]


@contextlib.contextmanager
def _quiet_logs(spark: Any) -> Iterator[None]:
    """Spark's own log off while the check runs: a task that cannot read a file logs its
    Java stack trace (hundreds of lines) before the check fails with one typed error,
    which says the same on one line. Every configured logger's level is restored afterwards."""
    try:
        jvm = spark.sparkContext._jvm
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        loggers = [config.getRootLogger()] + [
            config.getLoggers().get(name) for name in config.getLoggers().keySet().toArray()
        ]
        levels = [logger.getLevel() for logger in loggers]
        for logger in loggers:
            logger.setLevel(jvm.org.apache.logging.log4j.Level.OFF)
        context.updateLoggers()
    except Exception:  # not log4j 2, or no JVM: leave the logs alone
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # the JVM may be gone
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)
            context.updateLoggers()
