"""``python -m harness spark-job``: an unchanged PySpark Structured Streaming job under crashes.

``python -m harness spark-job job.py --guarantee exactly-once --input TOPIC (--output TOPIC |
--sink KIND:WHERE) -- <job args>`` runs the job (``job.py``, ``job.py:function`` or
``module:function``) with its Kafka source and sink served by the reference log, first under
a planned crash at every point of every micro-batch of a small workload, then under drawn
schedules, and prints the verdict: what was tried, or the counterexample with a replay
command (``--replay FILE``). Exit code: 0 the guarantee held, 1 it does not, 2 it could not
be shown or a usage error. See docs/streaming.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from harness._usage import UsageParser, wants_json
from harness.check import Status, exit_code
from harness.errors import ConfigError, HarnessError
from harness.settings import Settings, add_options, from_options

__all__ = ["add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (the job's own arguments follow ``--``)."""
    parser.add_argument("app", help="the job: path/to/job.py, job.py:function or module:function")
    add_options(parser, ("guarantee",))
    parser.add_argument("--input", action="append", required=True, metavar="TOPIC")
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a Kafka topic the job writes, observed and checked (repeatable)",
    )
    parser.add_argument(
        "--sink",
        action="append",
        default=[],
        metavar="KIND:WHERE",
        help="files:PATH, sqlite:DB:TABLE, lines:GLOB, table:NAME or console (job's paths)",
    )
    parser.add_argument("--partitions", type=int, default=1, help="partitions per input topic")
    parser.add_argument("--value-format", choices=["json", "text", "words"], default="json")
    parser.add_argument(
        "--id-column",
        default=None,
        help="the output column naming the input record id (default: r<N> tokens)",
    )
    parser.add_argument(
        "--lineage",
        default=None,
        metavar="MODULE:FUNCTION",
        help="a function of an output row (a dict) returning its input record id(s)",
    )
    parser.add_argument(
        "--table",
        default=None,
        metavar="KEY_COLUMN:COUNT_COLUMN",
        help="the sink is a key -> count table checked against the input's keys",
    )
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help="the source's maxOffsetsPerTrigger when the job sets none",
    )
    add_options(
        parser,
        ("max_examples", "seed"),
        help={"max_examples": "here default 20 (each starts Spark queries)", "seed": "here 0"},
        aliases={"max_examples": ("--max-schedules",)},
    )
    parser.add_argument("--no-sigkill", action="store_true", help="crash in process only")
    parser.add_argument(
        "--upstream-resends",
        action="store_true",
        help="the input's producer is at-least-once: also plan and draw its resends",
    )
    parser.add_argument("--workdir", default=None, help="where the schedules' worlds go")
    parser.add_argument("--failures-dir", default=".harness/failures")
    parser.add_argument("--replay", default=None, metavar="FILE")
    add_options(parser, ("json",))


def _lineage(spec: str | None) -> Any:
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"cannot load lineage function {spec!r}: {exc}") from None


def _job(args: argparse.Namespace, app_args: Sequence[str]) -> Any:
    from harness.spark.streaming.job import SparkJob

    table = None
    if args.table is not None:
        key, _, count = args.table.partition(":")
        if not key or not count:
            raise ConfigError(f"--table must be KEY_COLUMN:COUNT_COLUMN, got {args.table!r}")
        table = (key, count)
    return SparkJob(
        args.app,
        inputs=tuple(args.input),
        outputs=tuple(args.output),
        sinks=tuple(args.sink),
        argv=tuple(app_args),
        partitions=args.partitions,
        value_format=args.value_format,
        table=table,
        id_column=args.id_column,
        lineage=_lineage(args.lineage),
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        upstream_resends=args.upstream_resends,
    )


SPARK_JOB_DEFAULTS: Final = {"max_examples": 20, "seed": 0}
"""This door's own defaults: a schedule here starts Spark queries (seconds each), so the
profile's hundreds are not its default; the seed is fixed."""


def run(args: argparse.Namespace, app_args: Sequence[str], argv: Sequence[str]) -> int:
    """Explore (or replay) and print the verdict; the exit code."""
    from harness.check.verdict import Guarantee
    from harness.spark.streaming.job import quiet_session
    from harness.spark.streaming.jobsearch import JobReplay, explore_job, replay_job

    settings = from_options(args, defaults=SPARK_JOB_DEFAULTS)
    guarantee = settings.require_guarantee("--guarantee")
    job = _job(args, app_args)
    quiet_session()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="harness-spark-job-"))
    if args.replay is not None:
        replay = dataclasses.replace(JobReplay.load(args.replay), guarantee=Guarantee(guarantee))
        replayed = replay_job(replay, workdir=workdir / "replay", job=job)
        if settings.json:
            _print_json(args, settings, replayed.verdict, replay.schedule, 1, None, "a replay")
        else:
            print(replayed.verdict.summary())
            print(replay.schedule.describe())
        return exit_code(replayed.verdict.status)
    explored = explore_job(
        job,
        guarantee,
        workdir=workdir,
        max_schedules=settings.max_examples,
        seed=settings.seed or 0,
        sigkill=not args.no_sigkill,
        failures_dir=args.failures_dir,
    )
    command = None
    if explored.replay_file is not None:
        words = ["python", "-m", "harness", "spark-job", *argv]
        cut = words.index("--") if "--" in words else len(words)
        words[cut:cut] = ["--replay", str(explored.replay_file)]
        command = shlex.join(words)
    if settings.json:
        schedule = None if explored.failure is None else explored.failure.schedule
        _print_json(
            args,
            settings,
            explored.verdict,
            schedule,
            explored.schedules,
            command,
            explored.coverage(),
        )
        return 0 if explored.verdict is None else exit_code(explored.verdict.status)
    print(f"tried: {explored.coverage()}")
    print(f"the schedules' worlds (checkpoints, sinks, logs) are kept in {workdir}")
    if explored.verdict is None:
        print(f"{guarantee} held for {args.app}")
        return 0
    assert explored.failure is not None
    print(explored.verdict.summary())
    print(explored.failure.schedule.describe())
    if explored.replay_file is not None:
        _print_replay(explored.replay_file, argv, holds_job=job.to_json() is not None)
    return exit_code(explored.verdict.status)


def _print_json(
    args: argparse.Namespace,
    settings: Settings,
    verdict: Any,
    schedule: Any,
    examples: int,
    command: str | None,
    tried: str,
) -> None:
    from harness.report.json_report import render_output

    status = Status.VALID if verdict is None else verdict.status
    summary = (
        f"{settings.guarantee} held for {args.app}"
        if verdict is None
        else verdict.summary().splitlines()[0]
    )
    print(
        render_output(
            "spark-job",
            status,
            summary,
            guarantee=settings.guarantee,
            processor=args.app,
            seed=settings.seed,
            examples=examples,
            verdict=None if verdict is None else verdict.to_json(),
            stream_schedule=None if schedule is None else schedule.to_json(),
            replay_command=command,
            tried=tried,
        )
    )


def _print_replay(file: Path, argv: Sequence[str], *, holds_job: bool) -> None:
    """The commands that run the counterexample again and render its report: ``replay`` and
    ``report`` as for every other door when the file holds the job, else this command."""
    command = ["python", "-m", "harness", "spark-job", *argv]
    cut = command.index("--") if "--" in command else len(command)
    command[cut:cut] = ["--replay", str(file)]
    if not holds_job:  # a lineage function that cannot be imported by name
        print("replay: " + shlex.join(command))
        return
    out = file.with_name(file.stem + "-report")
    print(f"replay: {shlex.join(['python', '-m', 'harness', 'replay', str(file)])}")
    print(
        f"report: {shlex.join(['python', '-m', 'harness', 'report', str(file), '--out', str(out)])}"
    )
    print("(or: " + shlex.join(command) + ")")


def main(argv: Sequence[str]) -> int:
    """``python -m harness spark-job ...``; errors are one line on stderr (exit code 2)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, app_args = argv[:cut], argv[cut + 1 :]
    parser = UsageParser(
        prog="python -m harness spark-job",
        passes_on="python -m harness spark-job JOB --guarantee ... --input ...",
    )
    add_arguments(parser)
    try:
        try:
            args = parser.parse_args(ours)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        return run(args, app_args, argv)
    except HarnessError as exc:
        from harness.report.errors import show_error

        return show_error(exc, command="spark-job", json_output=wants_json(ours))
