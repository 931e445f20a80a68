"""``python -m harness spark-job``: an unchanged PySpark Structured Streaming job under crashes.

``python -m harness spark-job job.py --guarantee exactly-once --input TOPIC (--output TOPIC |
--sink KIND:WHERE) -- <job args>`` runs the job (``job.py``, ``job.py:function`` or
``module:function``) with its Kafka source and sink served by the reference log, first under
a planned crash at every point of every micro-batch of a small workload, then under drawn
schedules, through the engine's common front (``jobsearch.explore_spark_job``): the
progress line, the ``--json`` output and the exit codes of every door, and
``--max-problems``. It prints what was tried, or every problem found with the commands that
run it again (``python -m harness replay FILE``) and render its report (``report FILE``).
Exit code: 0 the guarantee held, 1 it does not, 2 it could not be shown or a usage error.
See docs/streaming.md.
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
    parser.add_argument(
        "app",
        help="the job: path/to/job.py, job.py:function or module:function; or variant:NAME, "
        "a built-in streaming variant (harness.catalogue.streams)",
    )
    add_options(parser, ("guarantee",))
    parser.add_argument(
        "--input", action="append", default=[], metavar="TOPIC", help="an input topic (a job's)"
    )
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
        ("max_examples", "seed", "max_problems"),
        help={
            "max_examples": "here default 20 (each starts Spark queries)",
            "seed": "here 0",
            "max_problems": "here default 1 (each further search runs the rest of the budget)",
        },
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
    add_options(parser, ("report_dir", "json"))


def _lineage(spec: str | None) -> Any:
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"cannot load lineage function {spec!r}: {exc}") from None


def _variant(args: argparse.Namespace, app_args: Sequence[str]) -> Any:
    """The catalogue's built-in variant ``variant:NAME`` names (None: the target is a job);
    a job's options are refused for it, each named."""
    from harness.catalogue.streams import VARIANT_PREFIX, stream_subject

    if not args.app.startswith(VARIANT_PREFIX):
        return None
    subject = stream_subject(args.app)
    given = [
        flag
        for flag, value in (
            ("--input", args.input),
            ("--output", args.output),
            ("--sink", args.sink),
            ("--partitions", args.partitions != 1),
            ("--value-format", args.value_format != "json"),
            ("--id-column", args.id_column),
            ("--lineage", args.lineage),
            ("--table", args.table),
            ("--max-offsets-per-trigger", args.max_offsets_per_trigger),
            ("--upstream-resends", args.upstream_resends),
            ("arguments after --", app_args),
        )
        if value
    ]
    if given:
        raise ConfigError(
            f"{args.app} is the harness's own query, not a job: {', '.join(given)} apply to a "
            "job only; leave them out"
        )
    return subject


def _job(args: argparse.Namespace, app_args: Sequence[str]) -> Any:
    from harness.spark.streaming.job import SparkJob

    if not args.input:
        raise ConfigError(
            f"--input TOPIC is required for the job {args.app!r}: the topic it reads (or give "
            "variant:NAME, a built-in streaming variant)"
        )
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


SPARK_JOB_DEFAULTS: Final = {"max_examples": 20, "seed": 0, "max_problems": 1}
"""This door's own defaults: a schedule here starts Spark queries (seconds each), so the
profile's hundreds are not its default; the seed is fixed; the search stops at the first
problem (a search for another runs the rest of the budget: ``--max-problems N``)."""


def run(args: argparse.Namespace, app_args: Sequence[str], argv: Sequence[str]) -> int:
    """Explore (or replay) and print the verdict; the exit code (0 VALID, 1 INVALID, 2
    UNKNOWN), as every door's."""
    from harness._output import writable
    from harness.spark.streaming.job import quiet_session

    settings = from_options(args, defaults=SPARK_JOB_DEFAULTS)
    variant = _variant(args, app_args)
    # a built-in variant names its own claim, as a scenario does; a job's is never assumed
    args.guarantee = settings.guarantee or (
        variant.guarantee.value
        if variant is not None
        else settings.require_guarantee("--guarantee")
    )
    # the outputs are checked before the work: one line, not a traceback after the search
    writable(args.failures_dir, "--failures-dir", directory=True)
    if settings.report_dir is not None:
        writable(settings.report_dir, "--report-dir", directory=True)
    job = None if variant is not None else _job(args, app_args)
    quiet_session()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="harness-spark-job-"))
    if args.replay is not None:
        return _replay(args, settings, job, workdir)
    return _explore(args, settings, job, workdir, argv)


def _replay(args: argparse.Namespace, settings: Settings, job: Any, workdir: Path) -> int:
    from harness.check.verdict import Guarantee
    from harness.report.live import emit
    from harness.spark.streaming.jobsearch import JobReplay, replay_job

    saved = JobReplay.load(args.replay)
    if job is None and saved.app != args.app:  # a variant runs what the file holds
        raise ConfigError(
            f"replay file {args.replay!r} holds a schedule of {saved.app}, not of {args.app}; "
            "run it with python -m harness replay FILE"
        )
    replay = dataclasses.replace(saved, guarantee=Guarantee(args.guarantee))
    replayed = replay_job(replay, workdir=workdir / "replay", job=job)
    verdict = replayed.verdict
    if settings.json:
        headline = verdict.summary().splitlines()[0]
        _print_json(args, settings, verdict.status, headline, [], replayed=(replay, verdict))
    else:
        emit(verdict.summary())
        emit(replay.schedule.describe())
    return exit_code(verdict.status)


def _explore(
    args: argparse.Namespace, settings: Settings, job: Any, workdir: Path, argv: Sequence[str]
) -> int:
    """The engine's search of the job (or the built-in variant) behind the progress line
    every door draws."""
    from harness.engine import CounterexampleFound
    from harness.report.live import emit, searching
    from harness.spark.streaming.jobsearch import explore_spark_job
    from harness.spark.streaming.variantsearch import explore_variant

    common: dict[str, Any] = {
        "workdir": workdir,
        "max_examples": settings.max_examples,
        "seed": settings.seed or 0,
        "max_problems": settings.max_problems,
        "sigkill": not args.no_sigkill,
        "failures_dir": args.failures_dir,
    }
    try:
        with searching(Path(args.app).name, settings.max_examples, json_output=settings.json):
            if job is None:
                result = explore_variant(args.app.partition(":")[2], args.guarantee, **common)
            else:
                result = explore_spark_job(job, args.guarantee, **common)
    except CounterexampleFound as found:
        return _report(args, settings, job, workdir, argv, found.failures)
    if settings.json:
        _print_json(args, settings, Status.VALID, result.summary(), [], result=result)
    else:
        emit(result.summary())
        emit(f"the schedules' worlds (checkpoints, sinks, logs) are kept in {workdir}")
    return 0


def _report(
    args: argparse.Namespace,
    settings: Settings,
    job: Any,
    workdir: Path,
    argv: Sequence[str],
    failures: Sequence[Any],
) -> int:
    """Every problem found, each with the commands that run it again and render its report."""
    from harness.cli._common import write_reports
    from harness.engine.results import COMMAND_LINE_REPEAT
    from harness.report.live import emit

    first, count = failures[0], len(failures)
    name = args.app.replace(":", "-") if job is None else Path(args.app.split(":")[0]).stem
    write_reports(settings.report_dir, failures, name)
    if settings.json:
        summary = (
            f"{args.guarantee} does not hold for {args.app}: {count} distinct "
            f"problem{'s' if count > 1 else ''}"
            if first.verdict.status is Status.INVALID
            else f"{args.guarantee} could not be shown for {args.app}"
        )
        _print_json(args, settings, first.verdict.status, summary, failures)
        return exit_code(first.verdict.status)
    if count > 1:
        emit(f"{count} distinct problems found (--max-problems {settings.max_problems})")
    for number, failure in enumerate(failures, 1):
        if count > 1:
            emit(f"\nproblem {number} of {count}:")
        report = failure.report(repeat=COMMAND_LINE_REPEAT)
        text = [line for line in report.splitlines() if not line.startswith(_COMMANDS)]
        emit("\n".join(text))
        _print_replay(failure, argv, holds_job=job is None or job.to_json() is not None)
    emit(f"the schedules' worlds (checkpoints, sinks, logs) are kept in {workdir}")
    return exit_code(first.verdict.status)


def _print_json(
    args: argparse.Namespace,
    settings: Settings,
    status: Status,
    summary: str,
    failures: Sequence[Any],
    *,
    result: Any = None,
    replayed: Any = None,
) -> None:
    """The door's ``--json``: ``run``'s keys and ``problems`` (every problem, as ``kafka``
    prints them), with ``stream_schedule`` and ``tried`` as version 1 of this output had
    them (the first problem's schedule, the coverage's line)."""
    from harness.cli._common import print_output
    from harness.search.coverage import Coverage

    first = failures[0] if failures else None
    done = first or result
    coverage = Coverage() if done is None else done.coverage
    schedule = None if first is None else first.schedule.to_json()
    verdict = None if first is None else first.verdict.to_json()
    if replayed is not None:
        schedule, verdict = replayed[0].schedule.to_json(), replayed[1].to_json()
    print_output(
        "spark-job",
        status,
        summary,
        guarantee=args.guarantee,
        processor=args.app,
        backend="spark",
        seed=settings.seed,
        examples=1 if done is None else done.examples,
        verdict=verdict,
        schedule=schedule,
        replay_command=None if first is None else first.replay_command,
        coverage=coverage.to_json(),
        problems=[failure.problem_json() for failure in failures],
        stream_schedule=schedule,
        tried="a replay" if replayed is not None else coverage.summary(),
    )


_COMMANDS: Final = ("replay: ", "report: ")
"""The report's lines that :func:`_print_replay` writes for this door."""


def _print_replay(failure: Any, argv: Sequence[str], *, holds_job: bool) -> None:
    """The commands that run the counterexample again and render its report: ``replay`` and
    ``report`` as for every other door when the file holds the job, else this command."""
    file = failure.replay_file
    if file is None:  # not written (the failures directory refused it): the inline JSON
        print(f"replay: {failure.replay_command}")
        return
    command = ["python", "-m", "harness", "spark-job", *argv]
    cut = command.index("--") if "--" in command else len(command)
    command[cut:cut] = ["--replay", str(file)]
    if not holds_job:  # a lineage function that cannot be imported by name
        print("replay: " + shlex.join(command))
        return
    print(f"replay: {failure.replay_command}")
    print(f"report: {failure.report_command}")
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
