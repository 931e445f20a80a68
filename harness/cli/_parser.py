"""The command table, the small top-level parser and ``main``.

Each command is a module with ``DESCRIPTION``, ``add_arguments(parser)`` and
``main(args) -> int``; :data:`COMMANDS` names it with its one-line help. Only the module of
the command being run is imported (``--help`` lists the table), and each imports the engine
inside its ``main``, so a mistyped option is answered at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness._usage import UsageParser, wants_json
from harness.cli._common import EXIT_INTERRUPTED
from harness.errors import HarnessError, MissingDependency

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "EXIT_BROKEN_PIPE", "Command", "build_parser", "main"]

EXIT_BROKEN_PIPE: Final = 141
"""The exit code when stdout is closed early (``... | head -1``): 128 + SIGPIPE, as a shell
reports a program that SIGPIPE ended."""


@dataclass(frozen=True, slots=True)
class Command:
    """A command: its name, the module that declares and runs it, its line in ``--help``."""

    name: str
    module: str
    """Importable module with ``add_arguments(parser)`` and ``main(args) -> int``."""
    help: str
    raw: bool = False
    """True: the module parses its own arguments, ``main(argv) -> int`` gets the words after
    the command's name (for a command that passes arguments on to a program it runs)."""


COMMANDS: Final = (
    Command(
        "demo",
        "harness.cli.demo",
        "run the DistributedLog offsets tutorial on LevelDB (the default command)",
    ),
    Command(
        "run",
        "harness.cli.run",
        "run scenarios (the mutation matrix) or your own processor under drawn schedules",
    ),
    Command("list", "harness.cli.listing", "list the scenarios and their variants"),
    Command("replay", "harness.cli.replay", "run a saved failing schedule again"),
    Command(
        "report",
        "harness.cli.report",
        "render a failing run as text, JSON and a self-contained HTML timeline",
    ),
    Command(
        "check",
        "harness.cli.check",
        "check a stored history (.jsonl or .parquet) against a guarantee",
    ),
    Command(
        "generate",
        "harness.cli.generate",
        "write a history of any size (.parquet or .jsonl), anomalies planted on request",
    ),
    Command(
        "check-spark",
        "harness.cli.check_spark",
        "check history Parquet with Spark, locally or on a cluster",
    ),
    Command(
        "kafka",
        "harness.kafka.command",
        "explore an unchanged Kafka client app (confluent-kafka, kafka-python, aiokafka) under "
        "faults",
        raw=True,
    ),
    Command(
        "spark-job",
        "harness.cli.spark_job",
        "explore an unchanged PySpark Structured Streaming job under crash schedules",
        raw=True,
    ),
    # A new command is one more row here and one module with add_arguments/main.
)
"""Every command, in the order ``--help`` lists them."""

DEFAULT_COMMAND: Final = "demo"
"""What ``python -m harness`` with no command runs."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stream-harness")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        import harness

        return harness.__version__


def _load(command: Command) -> Any:
    """``command``'s module; a package it needs that is not installed is a typed error.

    The command modules import only the package's own dependencies at their top (an extra's
    packages, pyspark or pyarrow, are imported where they are used, with their own message),
    so one missing here means an incomplete install or another Python."""
    try:
        return importlib.import_module(command.module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "harness":
            raise
        raise MissingDependency(
            f"the {command.name!r} command needs the package {missing!r}, which "
            f"{sys.executable} cannot import: it is one of stream-harness's own dependencies, "
            "so this install is incomplete (or another Python runs it); reinstall with: "
            "pip install --force-reinstall stream-harness"
        ) from exc


def build_parser(selected: Command | None = None) -> argparse.ArgumentParser:
    """The parser; only ``selected``'s module is imported to declare its arguments."""
    parser = UsageParser(
        prog="python -m harness",
        description="Correctness harness for at-least-once and exactly-once stream processing.",
        epilog="Exit codes: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error.",
    )
    parser.add_argument("--version", action="version", version=f"stream-harness {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if command is selected:
            module = _load(command)
            sub = commands.add_parser(
                command.name,
                help=command.help,
                description=getattr(module, "DESCRIPTION", command.help),
            )
            module.add_arguments(sub)
        else:
            commands.add_parser(command.name, help=command.help, add_help=False)
    return parser


def _run(argv: list[str]) -> int:
    selected = next((c for c in COMMANDS if argv[:1] == [c.name]), None)
    if selected is not None and selected.raw:
        return int(_load(selected).main(argv[1:]))
    parser = build_parser(selected)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help / --version (usage errors raise UsageError)
        return int(exc.code or 0)
    if selected is None:
        selected = next(c for c in COMMANDS if c.name == DEFAULT_COMMAND)
    return int(_load(selected).main(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 check failed, 2 unknown/usage).

    Without ``argv`` (run as a program) the command runs in a child process whose death is
    observed (:mod:`harness.cli._supervise`): no way out of it passes for a verdict."""
    if argv is None:
        from harness.cli._supervise import supervised

        return supervised(lambda: _main(sys.argv[1:]))
    return _main(list(argv))


def _main(argv: list[str]) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except HarnessError as exc:
        from harness.report.errors import show_error

        named = next((c.name for c in COMMANDS if argv[:1] == [c.name]), None)
        return show_error(exc, command=named, json_output=wants_json(argv))
    except BrokenPipeError:
        # the reader went away (`... | head -1`): stop quietly, and keep Python's final flush
        # of stdout from failing again at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # a real Ctrl-C (a processor's own cannot get here)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
