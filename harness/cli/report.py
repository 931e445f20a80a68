"""``python -m harness report SOURCE``: a replay file or a history rendered as a report.

A replay file is an engine one or an unchanged Spark job's (``spark-job``'s): either is run
again and its run rendered (the job's run satisfies the reports' ``Reported`` protocol)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from harness._shown import shown
from harness.cli._common import GUARANTEES, exit_code
from harness.errors import ConfigError

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = (
    "Render a replay file (the schedule is run again) or a stored history (checked "
    "against --guarantee) as a report: text to stdout, and with --out DIR also "
    "report.txt, report.json and report.html (docs/reports.md). Exit code: the "
    "verdict's (0 VALID, 1 INVALID, 2 UNKNOWN)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``report``'s source and options."""
    parser.add_argument("source", help="a replay file (.json) or a history (.jsonl/.parquet)")
    parser.add_argument(
        "--guarantee",
        choices=GUARANTEES,
        default=None,
        help="the guarantee to check a history against (a replay file names its own)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the report files here")
    parser.add_argument(
        "--format",
        action="append",
        choices=("txt", "json", "html"),
        default=None,
        help="which files to write with --out (repeatable; default all three)",
    )


def main(args: argparse.Namespace) -> int:
    """Print the text report (and write the files); returns the verdict's exit code."""
    from harness._output import writable
    from harness._progress import metering
    from harness.report import gather, render_text, write_report
    from harness.report.live import LiveProgress, emit

    if args.out is not None:  # before the work: one line, and no report half written
        writable(args.out, "--out", directory=True)
    source = str(args.source)
    # a history of millions of events takes a while to read and check: say how far it got
    with (
        LiveProgress(f"report {Path(source).name}", None, units="events") as live,
        metering(live.amount),
    ):
        history, verdict, details = _checked(args, source, live)
        live.step(detail="rendering the report", now=True)
        subject = details.pop("subject", verdict)
        facts = gather(subject, history, **details)
        text = render_text(facts)
    emit(text)
    if args.out is not None:
        try:
            written = write_report(args.out, facts, formats=args.format or ("txt", "json", "html"))
        except OSError as exc:
            raise ConfigError(
                f"cannot write the report to --out {shown(str(args.out))}: "
                f"{exc.strerror or type(exc).__name__}; give another directory"
            ) from None
        for path in written.values():
            print(f"wrote {path}", file=sys.stderr)
    return exit_code(verdict)


def _checked(args: argparse.Namespace, source: str, live: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The history, its verdict and what the report says about where they came from."""
    from harness.spark.streaming.jobsearch import JobReplay

    if source.endswith((".jsonl", ".parquet")):
        from harness.check import Guarantee, check
        from harness.history.io import read_history

        if args.guarantee is None:
            raise ConfigError(f"--guarantee is required to report on history {shown(source)}")
        try:
            history = read_history(source)
        except OSError as exc:
            raise ConfigError(f"cannot read history {shown(source)}: {exc.strerror}") from None
        live.step(detail=f"checking {len(history.events):,} events", now=True)
        verdict = check(history, Guarantee(args.guarantee))
        details: dict[str, Any] = {"title": source}
    elif (job := JobReplay.recognise(source)) is not None:
        from harness.cli.replay import replay_job_file

        live.step(detail="running the job's schedule again")
        done = replay_job_file(job, source)
        history, verdict = done.history, done.verdict
        details = {"subject": done}
    else:
        from harness.engine import Replay, replay

        spec = Replay.load(source)
        live.step(detail="running the schedule again")
        history, verdict = replay(spec)
        details = {
            "schedule": spec.schedule,
            "seed": spec.seed,
            "replay_command": f"python -m harness replay {source}",
            "processor": spec.processor,
            "backend": spec.backend,
        }
    return history, verdict, details
