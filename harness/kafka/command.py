"""``python -m harness kafka``: explore an unchanged Kafka client application.

``python -m harness kafka path/to/app.py --guarantee at-least-once --input TOPIC [--output
TOPIC] [--effect stdout|stderr|file:PATH|sqlite:PATH:TABLE [--by RULE]] -- <app args>`` runs
the script (or ``app.py:function``, ``module:function``) under drawn schedules with the client
doubles in place of ``confluent_kafka`` / ``kafka`` and prints the verdict: how outputs are
attributed to inputs, then either what was tried or every distinct problem found (up to
``--max-problems``), each with its shrunk schedule and a replay command (``--replay FILE``;
``python -m harness replay FILE`` and ``report FILE`` read the same files). Exit code: 0 the
guarantee held, 1 it does not, 2 it could not be shown or a usage error.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness._usage import UsageParser, wants_json
from harness.check import Status, exit_code
from harness.effects.sources import load_named
from harness.errors import ConfigError, HarnessError
from harness.settings import Settings, add_options, from_options

__all__ = ["add_arguments", "main", "run"]


class _EffectAction(argparse.Action):
    """``--effect SPEC`` appends an effect; ``--by RULE`` sets the last one's attribution."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        effects: list[list[str | None]] = list(getattr(namespace, "effect", None) or [])
        if option_string == "--by":
            if not effects:
                parser.error("--by RULE applies to the --effect given just before it")
            if effects[-1][1] is not None:
                parser.error(f"--effect {effects[-1][0]} has two --by rules; keep one")
            effects[-1] = [effects[-1][0], values]
        else:
            effects.append([values, None])
        namespace.effect = effects


def _add_topics(parser: argparse.ArgumentParser) -> None:
    add_options(parser, ("guarantee",))
    parser.add_argument(
        "--input", action="append", required=True, metavar="TOPIC", help="an input topic"
    )
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a checked output topic (repeatable; an --output or an --effect is needed)",
    )
    parser.add_argument(
        "--effect",
        action=_EffectAction,
        default=[],
        metavar="SPEC",
        help="a checked effect outside Kafka: stdout, stderr, file:PATH or sqlite:PATH:TABLE "
        "(repeatable; see docs/kafka.md)",
    )
    parser.add_argument(
        "--by",
        action=_EffectAction,
        dest="effect",
        metavar="RULE",
        help="how the --effect before it names its records: column=NAME, pattern=REGEX or "
        "function=MODULE:FUNCTION (default: the r<N> record ids in it)",
    )
    parser.add_argument(
        "--unchecked-topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a topic the app may also produce to, not checked",
    )
    parser.add_argument(
        "--partitions", type=int, default=1, help="partitions per input topic (default 1)"
    )
    parser.add_argument(
        "--group",
        default=None,
        help="the consumer group whose offsets are checked (default: the first used)",
    )
    parser.add_argument(
        "--lineage",
        default=None,
        metavar="MODULE:FUNCTION",
        help="attribute output messages to inputs with this function (default: docs/kafka.md)",
    )


def _add_payloads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--value-format",
        choices=["json", "text"],
        default="json",
        help="how input values look without a template (default json)",
    )
    parser.add_argument(
        "--value-template",
        default=None,
        metavar="TEXT",
        help="input values from a template with {id} {n} {key} {value}, e.g. "
        '\'{"order_id": {n}, "amount": {value}}\'',
    )
    parser.add_argument(
        "--key-template", default=None, metavar="TEXT", help="input keys from a template"
    )
    parser.add_argument(
        "--sample", default=None, metavar="FILE", help="input values from a JSON-lines file"
    )
    parser.add_argument(
        "--value-strategy",
        default=None,
        metavar="MODULE:NAME",
        help="input values drawn from a Hypothesis strategy",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the app (repeatable)",
    )
    parser.add_argument(
        "--backlog-not-owed",
        action="store_true",
        help="records written before the app first starts are not owed: its first "
        "auto.offset.reset=latest of a partition starts at the beginning",
    )
    parser.add_argument(
        "--transactional-input",
        action="store_true",
        help="the input topics are written by a transactional producer: offsets have gaps "
        "(markers, aborted records), as on a real transactional topic",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (the application's own arguments follow ``--``)."""
    parser.add_argument(
        "app", help="the application: path/to/app.py, app.py:function or module:function"
    )
    _add_topics(parser)
    _add_payloads(parser)
    add_options(
        parser,
        ("profile", "max_examples", "max_steps", "max_problems", "faults", "seed"),
        help={"faults": "here: every fault but duplicate"},
    )
    add_options(parser, ("run_calls", "run_seconds"))
    parser.add_argument("--failures-dir", default=".harness/failures")
    parser.add_argument(
        "--replay",
        default=None,
        metavar="FILE",
        help="run the schedule of a replay file instead of searching",
    )
    parser.add_argument("--show-output", action="store_true", help="let the application print")
    add_options(parser, ("json",))


def _encoder(args: argparse.Namespace) -> Any:
    from harness.kafka import json_values, text_values
    from harness.kafka.payloads import from_strategy, sample_file, template

    given = [
        n for n in ("value_template", "sample", "value_strategy") if getattr(args, n) is not None
    ]
    if len(given) > 1:
        raise ConfigError(
            f"give one of --value-template, --sample and --value-strategy, got {len(given)}"
        )
    key = args.key_template or "{key}"
    if args.value_template is not None:
        return template(args.value_template, key)
    if args.sample is not None:
        return sample_file(args.sample, key)
    if args.value_strategy is not None:
        strategy = load_named(args.value_strategy, "value strategy")
        return from_strategy(strategy() if callable(strategy) else strategy, key=key)
    if args.key_template is not None:
        body = '{"id":"{id}","key":"{key}","value":{value}}'
        return template(body if args.value_format == "json" else "{id} {key} {value}", key)
    return text_values if args.value_format == "text" else json_values


def _env(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise ConfigError(f"bad --env {pair!r}: give NAME=VALUE")
        env[name] = value
    return env


def _app(args: argparse.Namespace, app_args: Sequence[str]) -> Any:
    from harness.effects import parse_by, parse_effect
    from harness.kafka import KafkaApp

    effects = [parse_effect(spec, None if by is None else parse_by(by)) for spec, by in args.effect]
    return KafkaApp(
        args.app,
        inputs=args.input,
        outputs=args.output,
        unchecked=args.unchecked_topic,
        partitions=args.partitions,
        argv=app_args,
        lineage=None if args.lineage is None else load_named(args.lineage, "lineage function"),
        group=args.group,
        encode=_encoder(args),
        show_output=args.show_output,
        effects=effects,
        env=_env(args.env),
        backlog_owed=not args.backlog_not_owed,
        transactional_input=args.transactional_input,
    )


def _heading(app: Any) -> list[str]:
    lines = [f"lineage: {app.lineage}"] if app.wiring.outputs else []
    if app.effects:
        lines.append(f"effects: {app.effects}")
    return lines


def _replay_command(argv: Sequence[str], replay_file: Any) -> str:
    command = ["python", "-m", "harness", "kafka", *argv]
    cut = command.index("--") if "--" in command else len(command)
    command[cut:cut] = ["--replay", str(replay_file)]
    return shlex.join(command)


def _replay(args: argparse.Namespace, app: Any) -> int:
    import harness

    spec = harness.Replay.load(args.replay)
    history, verdict = harness.run_once(app, spec.schedule, args.guarantee, topology=app.topology)
    if args.json:
        _print_json(args, app, verdict.status, verdict.summary().splitlines()[0], [], spec)
    else:
        print("\n".join(_heading(app)))
        print(verdict.summary())
        print(spec.schedule.describe(history.meta.extra.get("stops")))
    return exit_code(verdict.status)


def _print_json(
    args: argparse.Namespace,
    app: Any,
    status: Status,
    summary: str,
    failures: Sequence[Any],
    replayed: Any = None,
    result: Any = None,
) -> None:
    from harness.report.json_report import render_output
    from harness.search.coverage import Coverage

    first = failures[0] if failures else None
    problems = [
        f.problem_json(line.removeprefix("hint: ") for line in app.hints(f)) for f in failures
    ]
    coverage = (first or result).coverage if (first or result) is not None else None
    text = render_output(
        "kafka",
        status,
        summary,
        guarantee=args.guarantee,
        processor=args.app,
        lineage=app.lineage,
        effects=[f"{e.sink}: {e.describe()}" for e in app.wiring.effects],
        seed=None if first is None and result is None else (first or result).seed,
        examples=0 if first is None and result is None else (first or result).examples,
        verdict=None if first is None else first.verdict.to_json(),
        schedule=(
            replayed.schedule.to_json()
            if replayed is not None
            else None
            if first is None
            else first.schedule.to_json()
        ),
        replay_command=None if first is None else first.replay_command,
        coverage=(coverage or Coverage()).to_json(),
        problems=problems,
    )
    print(text)


def _explore(args: argparse.Namespace, app: Any, argv: Sequence[str]) -> int:
    import harness
    from harness.report.live import searching

    settings: Settings = args.settings
    try:
        with searching(Path(args.app).name, settings.max_examples, json_output=args.json):
            result = harness.explore(
                app, topology=app.topology, failures_dir=args.failures_dir, settings=settings
            )
    except harness.CounterexampleFound as found:
        return _report(args, app, argv, found.failures)
    summary = result.summary()  # the run door's words: what was tried, and the seed
    if args.json:
        _print_json(args, app, Status.VALID, summary, [], result=result)
    else:
        print("\n".join(_heading(app)))
        print(summary)
    return 0


def _report(args: argparse.Namespace, app: Any, argv: Sequence[str], failures: Any) -> int:
    from harness.engine.results import COMMAND_LINE_REPEAT

    first = failures[0]
    status = first.verdict.status
    for failure in failures:
        if failure.replay_file is not None:
            object.__setattr__(
                failure, "replay_command", _replay_command(argv, failure.replay_file)
            )
    count = len(failures)
    summary = (
        f"{args.guarantee} does not hold for {args.app}: {count} distinct "
        f"problem{'s' if count > 1 else ''}"
        if status is Status.INVALID
        else f"{args.guarantee} could not be shown for {args.app}"
    )
    if args.json:
        _print_json(args, app, status, summary, failures)
    else:
        print("\n".join(_heading(app)))
        if count > 1:
            print(f"{count} distinct problems found (--max-problems {args.max_problems})")
        for number, failure in enumerate(failures, 1):
            if count > 1:
                print(f"\nproblem {number} of {count}:")
            text = failure.report(repeat=COMMAND_LINE_REPEAT).splitlines()
            cut = next((i for i, line in enumerate(text) if line.startswith("shrunk schedule")), 0)
            text[cut:cut] = app.hints(failure)  # after the verdict it explains
            print("\n".join(text))
    return exit_code(status)


def run(args: argparse.Namespace, app_args: Sequence[str], argv: Sequence[str]) -> int:
    """Explore (or replay) and print the verdict; the exit code."""
    from harness.kafka.pytest_support import KAFKA_FAULTS

    # one settings value: the options over the environment over the profile; this door's
    # faults default to every fault but duplicate (a Kafka broker's own redelivery)
    args.settings = from_options(args, defaults={"faults": KAFKA_FAULTS})
    args.guarantee = args.settings.require_guarantee("--guarantee")
    args.json, args.max_problems = args.settings.json, args.settings.max_problems
    app = _app(args, app_args)
    if args.replay is not None:
        return _replay(args, app)
    return _explore(args, app, argv)


def _unknown_options(parser: argparse.ArgumentParser, words: Sequence[str]) -> list[str]:
    """The ``--options`` in ``words`` that are not the parser's, with their values."""
    options = parser._option_string_actions
    unknown: list[str] = []
    taking = False
    for word in words:
        name = word.split("=")[0]
        if name.startswith("-"):
            taking = name.startswith("--") and name not in options
            if taking:
                unknown.append(word)
        elif taking:  # its value, as the user meant it for the application
            unknown.append(word)
    return unknown


def main(argv: Sequence[str]) -> int:
    """``python -m harness kafka ...``; errors are one line on stderr (exit code 2)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, app_args = argv[:cut], argv[cut + 1 :]
    parser = UsageParser(
        prog="python -m harness kafka",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        passes_on="python -m harness kafka APP --guarantee ... --input ...",
    )
    add_arguments(parser)
    try:
        unknown = _unknown_options(parser, ours)
        if unknown:  # before argparse names a required option they were meant to be
            parser.refuse(unknown)
        try:
            args = parser.parse_args(ours)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        return run(args, app_args, argv)
    except HarnessError as exc:
        from harness.report.errors import show_error

        return show_error(exc, command="kafka", json_output=wants_json(ours))
