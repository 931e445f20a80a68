"""``python -m harness replay FILE``: run a saved failing schedule again, without Hypothesis.

The file is an engine replay file (a processor, a Kafka application) or an unchanged Spark
job's (``spark-job`` saves a :class:`~harness.spark.streaming.jobsearch.JobReplay`, which
holds the job): either is run again, judged and printed the same way."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from harness._shown import shown
from harness.cli._common import add_run_budget, exit_code, print_output, run_budget
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.spark.streaming.jobsearch import JobFailure, JobReplay

__all__ = ["DESCRIPTION", "add_arguments", "main", "replay_job_file"]

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
    from harness.engine import Replay, replay
    from harness.history.io import SUFFIXES, write_history
    from harness.spark.streaming.jobsearch import JobReplay

    if args.history is not None:  # before the replay runs: one line, no partial file
        writable(args.history, "--history")
        if args.history.suffix not in SUFFIXES:
            raise ConfigError(
                f"--history {shown(str(args.history))} must end in one of {', '.join(SUFFIXES)}"
            )
    job = JobReplay.recognise(args.file)
    if job is not None:
        done = replay_job_file(job, args.file, run_seconds=args.run_seconds)
        history, verdict = done.history, done.verdict
        run = {"processor": done.processor, "backend": done.backend, "seed": job.seed}
        schedule: Any = job.schedule
    else:
        spec = Replay.load(args.file)
        history, verdict = replay(spec, budget=run_budget(args))
        run = {"processor": spec.processor, "backend": spec.backend, "seed": spec.seed}
        schedule = spec.schedule
    if args.history is not None:
        with writing(args.history, "--history") as tmp:
            write_history(history, tmp)
    headline = (
        f"{verdict.guarantee.value} for {run['processor']} ({run['backend']} backend): "
        f"{verdict.status.name}"
    )
    if args.json:
        print_output(
            "replay",
            verdict.status,
            headline,
            guarantee=verdict.guarantee.value,
            **run,
            verdict=verdict.to_json(),
            schedule=schedule.to_json(),
        )
        return exit_code(verdict)
    from harness.report.live import emit

    emit(headline)
    emit(verdict.summary())
    emit(f"schedule ({len(schedule)} steps):")
    emit(schedule.describe(history.meta.extra.get("stops")))
    return exit_code(verdict)


def replay_job_file(job: JobReplay, source: str, *, run_seconds: float | None = None) -> JobFailure:
    """Run an unchanged Spark job's replay file again on this process's session (started
    quiet if none runs), in a fresh directory it names on stderr; ``run_seconds`` bounds
    each query run of the job."""
    import dataclasses
    import sys
    import tempfile

    from harness.spark.streaming.job import quiet_session
    from harness.spark.streaming.jobsearch import replay_job

    if run_seconds is not None and run_seconds <= 0:
        raise ConfigError(f"--run-seconds must be > 0, got {run_seconds}")
    subject = None  # a built-in variant's file: the file says which
    if job.variant is None:
        subject = job.spark_job()
        if run_seconds is not None:
            subject = dataclasses.replace(subject, timeout_s=float(run_seconds))
    workdir = Path(tempfile.mkdtemp(prefix="harness-replay-spark-job-"))
    print(f"the job's world (checkpoints, sinks, logs) is kept in {workdir}", file=sys.stderr)
    return replay_job(
        job,
        workdir=workdir / "run",
        job=subject,
        spark=quiet_session(),
        replay_command=f"python -m harness replay {source}",
    )
