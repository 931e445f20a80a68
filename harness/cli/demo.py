"""``python -m harness demo`` (the default command): DistributedLog's offsets tutorial."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from harness.cli._common import EXIT_INVALID, EXIT_OK

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = "Write, read, crash, truncate and resume a reader from stored offsets."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the demo's options."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="keep the LevelDB files in this directory (default: a temporary one, removed)",
    )
    parser.add_argument("--records", type=_records, default=1000, help="records to write (1000)")


def _records(text: str) -> int:
    try:
        records = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if records < 1:
        raise argparse.ArgumentTypeError(f"--records must be >= 1, got {records}")
    return records


def main(args: argparse.Namespace) -> int:
    """Run the demo; 0 when at-least-once held."""
    records: int = getattr(args, "records", 1000)
    from harness.demo import run_demo

    result = run_demo(
        getattr(args, "dir", None),
        records=records,
        records_per_segment=max(1, records // 4),
        commit_every=max(1, min(100, records // 4)),
        crash_after=max(1, (records * 13) // 20),
    )
    return EXIT_OK if result.ok else EXIT_INVALID
