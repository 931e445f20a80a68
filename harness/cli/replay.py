"""``python -m harness replay FILE``: run a saved failing schedule again, without Hypothesis."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from harness._shown import shown
from harness.cli._common import add_run_budget, exit_code, print_output, run_budget
from harness.errors import ConfigError

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
    add_run_budget(parser)
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def main(args: argparse.Namespace) -> int:
    """Replay the file and print the verdict; returns the verdict's exit code."""
    from harness._output import writable, writing
    from harness.history.io import SUFFIXES, write_history
    from harness.runner import Replay, replay

    if args.history is not None:  # before the replay runs: one line, no partial file
        writable(args.history, "--history")
        if args.history.suffix not in SUFFIXES:
            raise ConfigError(
                f"--history {shown(str(args.history))} must end in one of {', '.join(SUFFIXES)}"
            )
    spec = Replay.load(args.file)
    history, verdict = replay(spec, budget=run_budget(args))
    if args.history is not None:
        with writing(args.history, "--history") as tmp:
            write_history(history, tmp)
    headline = (
        f"{spec.guarantee.value} for {spec.processor} ({spec.backend} backend): "
        f"{verdict.status.name}"
    )
    if args.json:
        print_output(
            "replay",
            verdict.status,
            headline,
            guarantee=spec.guarantee.value,
            processor=spec.processor,
            backend=spec.backend,
            seed=spec.seed,
            verdict=verdict.to_json(),
            schedule=spec.schedule.to_json(),
        )
        return exit_code(verdict)
    from harness.report.live import emit

    emit(headline)
    emit(verdict.summary())
    emit(f"schedule ({len(spec.schedule)} steps):")
    emit(spec.schedule.describe(history.meta.extra.get("stops")))
    return exit_code(verdict)
