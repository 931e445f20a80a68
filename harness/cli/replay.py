"""``python -m harness replay FILE``: run a saved failing schedule again, without Hypothesis."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Final

from harness.cli._common import exit_code

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = (
    "Replay a schedule saved by a failing exploration (.harness/failures/*.json), "
    "without Hypothesis. Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``replay``'s file and options."""
    parser.add_argument(
        "file", help="the replay file printed by the failure (or the replay JSON itself)"
    )
    parser.add_argument(
        "--history", type=Path, default=None, help="also write the history (.jsonl or .parquet)"
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def main(args: argparse.Namespace) -> int:
    """Replay the file and print the verdict; returns the verdict's exit code."""
    from harness.runner import Replay, replay

    spec = Replay.load(args.file)
    history, verdict = replay(spec)
    if args.history is not None:
        from harness.history.io import write_history

        write_history(history, args.history)
    if args.json:
        print(json.dumps(verdict.to_json(), indent=2))
        return exit_code(verdict)
    print(
        f"{spec.guarantee.value} for {spec.processor} ({spec.backend} backend): "
        f"{verdict.status.name}"
    )
    print(verdict.summary())
    print(f"schedule ({len(spec.schedule)} steps):")
    print(spec.schedule.describe())
    return exit_code(verdict)
