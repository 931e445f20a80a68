"""Command line: ``python -m harness`` (also installed as ``stream-harness``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="Correctness harness for at-least-once and exactly-once stream processing.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the DistributedLog offsets tutorial on LevelDB (the default command)",
        description="Write, read, crash, truncate and resume a reader from stored offsets.",
    )
    demo.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="keep the LevelDB files in this directory (default: a temporary one, removed)",
    )
    demo.add_argument("--records", type=int, default=1000, help="records to write (1000)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 check failed, 2 usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    # Subcommands arrive with later issues; until then "demo" is the only (and default) one.
    records = getattr(args, "records", 1000)
    if records < 1:
        parser.error(f"--records must be >= 1, got {records}")
    from harness.demo import run_demo

    try:
        result = run_demo(
            getattr(args, "dir", None),
            records=records,
            records_per_segment=max(1, records // 4),
            commit_every=max(1, min(100, records // 4)),
            crash_after=max(1, (records * 13) // 20),
        )
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if result.ok else 1
