"""``python -m harness check-spark HISTORY``: the Spark checker, behind the same front door.

The options are declared by ``harness.spark.command`` (shared with ``spark-submit
harness/spark/job.py``), imported only when this command runs.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, Final

from harness.errors import ConfigError

__all__ = ["DESCRIPTION", "add_arguments", "main", "run_spark_command"]

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


def main(args: argparse.Namespace) -> int:
    """Check the history with Spark; returns the worst verdict's exit code."""
    return int(_command().run(args))


def run_spark_command(argv: Sequence[str]) -> int:
    """Parse ``argv`` as ``check-spark``'s arguments and run it (``check --spark`` uses this)."""
    parser = argparse.ArgumentParser(prog="python -m harness check-spark", description=DESCRIPTION)
    add_arguments(parser)
    return main(parser.parse_args(list(argv)))
