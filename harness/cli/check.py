"""``python -m harness check HISTORY --guarantee G``: check a stored history file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Final

from harness.cli._common import GUARANTEES, exit_code
from harness.errors import ConfigError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = "Check a history file; --spark runs the Spark checker instead."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``check``'s history file and options."""
    parser.add_argument("history", type=Path, help="the history file (.jsonl or .parquet)")
    parser.add_argument(
        "--guarantee",
        choices=GUARANTEES,
        required=True,
        help="the guarantee to check",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--out", type=Path, default=None, help="also write the verdict JSON here")
    parser.add_argument(
        "--spark",
        action="store_true",
        help="check with Spark (same verdict; see `check-spark` for cluster options)",
    )


def main(args: argparse.Namespace) -> int:
    """Check the history; returns the verdict's exit code."""
    if args.spark:
        from harness.cli.check_spark import run_spark_command

        return run_spark_command(
            [str(args.history), "--guarantee", args.guarantee]
            + (["--out", str(args.out)] if args.out else [])
        )
    from harness.check import Guarantee, check
    from harness.history.io import read_history

    try:
        history = read_history(args.history)
    except OSError as exc:
        raise ConfigError(f"cannot read history {str(args.history)!r}: {exc.strerror}") from None
    verdict = check(history, Guarantee(args.guarantee))
    text = json.dumps(verdict.to_json(), indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        print(f"{args.guarantee} for {args.history}: {verdict.status.name}")
        print(verdict.summary())
    return exit_code(verdict)
