"""``python -m harness check-spark HISTORY``: the Spark checker, behind the same front door.

The options are declared by ``harness.spark.command`` (shared with ``spark-submit
harness/spark/job.py``), imported only when this command runs. The history is looked at
before any JVM starts: a missing path, a directory without Parquet files or a file that is
not history Parquet (a JSONL history, say) is one line on stderr within a second, not after
Spark's start-up.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, Final

from harness.errors import ConfigError, CorruptData

__all__ = ["DESCRIPTION", "add_arguments", "main", "preflight", "run_spark_command"]

DESCRIPTION: Final = (
    "Check history Parquet files with the Spark checker (same verdict as "
    "`check`). Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error."
)


def _command() -> Any:
    try:
        return importlib.import_module("harness.spark.command")
    except ImportError as exc:
        raise ConfigError(f"the Spark checker is not available ({exc})") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the Spark command's options (``harness.spark.command.add_arguments``)."""
    _command().add_arguments(parser)


def _jsonl_hint(path: str) -> str | None:
    """What to do with ``path`` when it is a JSONL history rather than Parquet."""
    try:
        with open(path, "rb") as file:
            start = file.read(64).lstrip()
    except OSError:
        return None
    if not (path.endswith(".jsonl") or start.startswith(b"{")):
        return None
    return (
        "it looks like a JSONL history: check it with `python -m harness check "
        f"{path} --guarantee G` (the local checker reads JSONL), or write it as Parquet "
        "with harness.write_history(harness.read_history(FILE), 'history.parquet')"
    )


def preflight(history: str) -> int:
    """Check that ``history`` holds history Parquet files, without starting Spark; returns
    the number of runs found."""
    from harness.spark.source import discover_runs

    try:
        return len(discover_runs(history))
    except CorruptData as exc:
        hint = _jsonl_hint(history)
        if hint is None:
            raise
        raise CorruptData(f"{exc}; {hint}") from None


def main(args: argparse.Namespace) -> int:
    """Check the history with Spark; returns the worst verdict's exit code."""
    from harness.report.live import LiveProgress

    command = _command()
    runs = preflight(str(args.history))
    with LiveProgress(f"check-spark {args.history}", None, units="") as live:
        live.step(detail=f"{runs} run{'s' if runs != 1 else ''}: starting Spark, then checking")
        return int(command.run(args))


def run_spark_command(argv: Sequence[str]) -> int:
    """Parse ``argv`` as ``check-spark``'s arguments and run it (``check --spark`` uses this)."""
    parser = argparse.ArgumentParser(prog="python -m harness check-spark", description=DESCRIPTION)
    add_arguments(parser)
    return main(parser.parse_args(list(argv)))
