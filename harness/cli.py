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
    replay = commands.add_parser(
        "replay",
        help="run a saved failing schedule again and print its verdict",
        description=(
            "Replay a schedule saved by a failing exploration (.harness/failures/*.json), "
            "without Hypothesis. Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error."
        ),
    )
    replay.add_argument(
        "file", help="the replay file printed by the failure (or the replay JSON itself)"
    )
    replay.add_argument(
        "--history", type=Path, default=None, help="also write the history (.jsonl or .parquet)"
    )
    return parser


def _replay(file: str, history_path: Path | None) -> int:
    from harness.check import Status
    from harness.runner import Replay, replay

    spec = Replay.load(file)
    history, verdict = replay(spec)
    if history_path is not None:
        from harness.history.io import write_history

        write_history(history, history_path)
    print(
        f"{spec.guarantee.value} for {spec.processor} ({spec.backend} backend): "
        f"{verdict.status.name}"
    )
    print(verdict.summary())
    print(f"schedule ({len(spec.schedule)} steps):")
    print(spec.schedule.describe())
    return {Status.VALID: 0, Status.INVALID: 1}.get(verdict.status, 2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 check failed, 2 usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "replay":
        try:
            return _replay(args.file, args.history)
        except HarnessError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
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
