"""``python -m harness check HISTORY --guarantee G``: check a stored history file.

``--guarantee`` is required, as in every command (docs/settings.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from harness._shown import shown
from harness.cli._common import add_settings, exit_code, settings_from
from harness.errors import ConfigError, CorruptData

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = (
    "Check a history file with the local checker or Spark (--engine; auto picks by size)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``check``'s history file and options."""
    parser.add_argument("history", type=Path, help="the history file (.jsonl or .parquet)")
    add_settings(parser, ("guarantee", "json"))
    parser.add_argument("--out", type=Path, default=None, help="also write the verdict JSON here")
    parser.add_argument(
        "--engine",
        choices=("auto", "local", "spark"),
        default="auto",
        help="which checker (same verdict): auto (default) picks Spark for a history too "
        "large for the local checker to be faster or to fit in memory, the local checker "
        "otherwise, and says why on stderr",
    )
    parser.add_argument(
        "--spark",
        action="store_true",
        help="the same as --engine spark (see `check-spark` for cluster options)",
    )


def _engine(args: argparse.Namespace) -> str:
    """The engine to run, printing the automatic choice and its reason on stderr."""
    if args.spark or args.engine == "spark":
        return "spark"
    if args.engine == "local" or not (args.history.suffix == ".parquet" or args.history.is_dir()):
        return "local"  # only the local checker reads JSONL: no choice to print
    from harness.spark.check.engine import choose_engine

    choice = choose_engine(args.history)
    print(f"engine: {choice.engine} ({choice.reason})", file=sys.stderr)
    return choice.engine


def main(args: argparse.Namespace) -> int:
    """Check the history; returns the verdict's exit code."""
    from harness._output import writable, write_atomic

    settings = settings_from(args)
    guarantee = settings.require_guarantee("--guarantee")
    if args.out is not None:
        writable(args.out, "--out")  # before the history is read: one line, no partial file
    if _engine(args) == "spark":
        from harness.cli.check_spark import run_spark_command

        return run_spark_command(
            [str(args.history), "--guarantee", guarantee]
            + (["--out", str(args.out)] if args.out else [])
            + (["--json"] if settings.json else [])
        )
    from harness._progress import metering
    from harness.check import check
    from harness.history.io import read_history
    from harness.report.json_report import render_output
    from harness.report.live import LiveProgress, emit

    with (
        LiveProgress(f"check {args.history}", None, json_output=settings.json, units="") as live,
        metering(live.amount),
    ):
        live.step(detail="reading the history")
        try:
            history = read_history(args.history)
        except OSError as exc:
            raise ConfigError(
                f"cannot read history {shown(str(args.history))}: {exc.strerror}"
            ) from None
        except CorruptData as exc:  # pyarrow's causes span lines: the error is one line
            raise CorruptData(" ".join(str(exc).split())) from None
        live.step(detail=f"checking {len(history.events)} events")
        verdict = check(history, guarantee)
    headline = f"{guarantee} for {args.history}: {verdict.status.name}"
    text = render_output(
        "check",
        verdict.status,
        headline,
        guarantee=guarantee,
        source=str(args.history),
        verdict=verdict.to_json(),
    )
    if args.out is not None:
        write_atomic(args.out, text + "\n", "--out")
    if settings.json:
        print(text)
    else:
        emit(headline)
        emit(verdict.summary())
    return exit_code(verdict)
