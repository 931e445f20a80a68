"""``python -m harness kafka``: explore an unchanged Kafka client application.

``python -m harness kafka path/to/app.py --guarantee exactly-once --input TOPIC --output TOPIC
-- <app args>`` runs the script (or ``module:function``) under drawn schedules with the
client doubles in place of ``confluent_kafka`` / ``kafka`` and prints the verdict: how
outputs were attributed to inputs, then either what was tried or the counterexample with a
replay command (``--replay FILE``). Exit code: 0 the guarantee held, 1 it does not, 2 it could
not be shown or a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from harness.check import Status
from harness.errors import ConfigError, HarnessError

__all__ = ["add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (the application's own arguments follow ``--``)."""
    parser.add_argument(
        "app", help="the application: path/to/app.py, app.py:function or module:function"
    )
    parser.add_argument("--guarantee", required=True, choices=["at-least-once", "exactly-once"])
    parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="TOPIC",
        help="an input topic (repeatable)",
    )
    parser.add_argument(
        "--output",
        action="append",
        required=True,
        metavar="TOPIC",
        help="a checked output topic (repeatable)",
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
        help="attribute outputs to inputs with this function (default: see docs/kafka.md)",
    )
    parser.add_argument(
        "--value-format",
        choices=["json", "text"],
        default="json",
        help="how input values look (default json)",
    )
    parser.add_argument(
        "--profile", default=None, help="search budget: dev, ci (default) or nightly"
    )
    parser.add_argument(
        "--max-examples", type=int, default=None, help="schedules to draw (overrides the profile)"
    )
    parser.add_argument(
        "--faults",
        default=None,
        help="comma-separated fault names (default: every fault but duplicate)",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--failures-dir", default=".harness/failures")
    parser.add_argument(
        "--replay",
        default=None,
        metavar="FILE",
        help="run the schedule of a replay file instead of searching",
    )
    parser.add_argument("--show-output", action="store_true", help="let the application print")


def _lineage(spec: str | None) -> Any:
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load lineage function {spec!r}: {exc}") from None


def _app(args: argparse.Namespace, app_args: Sequence[str]) -> Any:
    from harness.kafka import KafkaApp, json_values, text_values

    return KafkaApp(
        args.app,
        inputs=args.input,
        outputs=args.output,
        unchecked=args.unchecked_topic,
        partitions=args.partitions,
        argv=app_args,
        lineage=_lineage(args.lineage),
        group=args.group,
        encode=text_values if args.value_format == "text" else json_values,
        show_output=args.show_output,
    )


def run(args: argparse.Namespace, app_args: Sequence[str], argv: Sequence[str]) -> int:
    """Explore (or replay) and print the verdict; the exit code."""
    import harness
    from harness.faults import ALL_FAULTS, Fault
    from harness.search.profiles import profile

    app = _app(args, app_args)
    print(f"lineage: {app.lineage}")
    if args.replay is not None:
        spec = harness.Replay.load(args.replay)
        _, verdict = harness.run_once(app, spec.schedule, args.guarantee, topology=app.topology)
        print(verdict.summary())
        print(spec.schedule.describe())
        return {Status.VALID: 0, Status.INVALID: 1}.get(verdict.status, 2)
    budget = profile(args.profile)
    faults = (
        [f for f in args.faults.split(",") if f]
        if args.faults is not None
        else sorted(f.value for f in ALL_FAULTS - {Fault.DUPLICATE})
    )
    try:
        result = harness.explore(
            app,
            guarantee=args.guarantee,
            topology=app.topology,
            max_examples=args.max_examples or budget.max_examples,
            max_steps=budget.max_steps,
            faults=faults,
            seed=args.seed,
            failures_dir=args.failures_dir,
        )
    except harness.CounterexampleFound as found:
        failure = found.failure
        text = str(found).splitlines()
        print("\n".join(line for line in text if not line.startswith("replay: ")))
        if failure.replay_file is not None:
            command = ["python", "-m", "harness", "kafka", *argv]
            cut = command.index("--") if "--" in command else len(command)
            command[cut:cut] = ["--replay", str(failure.replay_file)]
            print("replay: " + shlex.join(command))
        return 1 if failure.verdict.status is Status.INVALID else 2
    print(
        f"{args.guarantee} held for {args.app}: {result.examples} schedules, faults "
        f"{', '.join(faults) or 'none'}, seed {result.seed}"
    )
    return 0


def main(argv: Sequence[str]) -> int:
    """``python -m harness kafka ...``; errors are one line on stderr (exit code 2)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, app_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m harness kafka",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_arguments(parser)
    try:
        args = parser.parse_args(ours)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run(args, app_args, argv)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
