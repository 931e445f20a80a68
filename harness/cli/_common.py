"""What every command shares: exit codes, the settings' options, fault and scenario lookups.

:func:`add_settings` (``harness.settings.add_options``) declares the settings' options a
command takes, with one spelling, one help text and one set of choices for every command;
:func:`settings_from` (``harness.settings.from_options``) resolves them once with the
environment (docs/settings.md).

Imports only the standard library, ``harness.errors`` and the light ``harness.settings``:
each command module imports the engine inside its ``main``, so building the parser (and
``--help``) stays fast.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from harness.errors import ConfigError
from harness.settings import GUARANTEES
from harness.settings import add_options as add_settings
from harness.settings import from_options as settings_from

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from harness.catalogue.subject import Scenario
    from harness.check import Status, Verdict
    from harness.sim.budget import RunBudget

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_UNKNOWN",
    "GUARANTEES",
    "add_run_budget",
    "add_settings",
    "exit_code",
    "load_scenarios",
    "parse_faults",
    "print_output",
    "run_budget",
    "settings_from",
    "write_reports",
]

EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_UNKNOWN: Final = 2
"""Also the exit code of a usage error."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C, as a shell reports a process SIGINT ended."""


def exit_code(verdict: Verdict | Status) -> int:
    """0 for VALID, 1 for INVALID, 2 for UNKNOWN: ``harness.check.verdict.EXIT_CODES``."""
    from harness.check.verdict import exit_code as code_of

    return code_of(verdict if isinstance(verdict, str) else verdict.status)


def parse_faults(text: str | None) -> list[str] | None:
    """``--faults crash,tick`` as a list of names; None (every fault) when not given."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def load_scenarios() -> dict[str, Scenario]:
    """The shipped scenarios by name."""
    try:
        from harness.catalogue.seeds import SCENARIOS
    except ImportError as exc:  # pragma: no cover - an install without the scenarios package
        raise ConfigError(f"the scenarios package cannot be imported ({exc})") from None
    return dict(SCENARIOS)


def print_output(command: str, status: Status | str, summary: str, **fields: Any) -> str:
    """Print ``command``'s ``--json`` envelope (``harness.report.json_report.output_json``)
    and return the text (``--out`` files hold the same)."""
    from harness.report.json_report import render_output

    text = render_output(command, status, summary, **fields)
    print(text)
    return text


def add_run_budget(parser: argparse.ArgumentParser) -> None:
    """Declare ``--run-calls`` and ``--run-seconds``: what one simulated run may spend."""
    add_settings(parser, ("run_calls", "run_seconds"))


def run_budget(args: argparse.Namespace, base: RunBudget | None = None) -> RunBudget:
    """The run budget ``--run-calls``/``--run-seconds`` and the environment give (over
    ``base``'s, default: the profile's)."""
    from harness.sim.budget import RunBudget

    chosen = settings_from(args)
    if base is None:
        return chosen.run_budget
    return RunBudget(
        calls=base.calls if chosen.source("run_calls") == "profile" else chosen.run_budget.calls,
        seconds=base.seconds
        if chosen.source("run_seconds") == "profile"
        else chosen.run_budget.seconds,
    )


def write_reports(directory: Path | None, failures: Iterable[Any], name: str) -> None:
    """``--report-dir``: each failure's report as ``NAME-<n>.report.{txt,json,html}``."""
    if directory is None:
        return
    from harness.report import gather, write_report

    for number, failure in enumerate(failures, 1):
        facts = gather(failure, replay_command=failure.replay_command)
        write_report(directory, facts, name=f"{name}-{number}.report")
