"""What every command shares: exit codes, the verdict's exit code, fault and scenario lookups.

Imports only the standard library and ``harness.errors``: each command module imports the
engine inside its ``main``, so building the parser (and ``--help``) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from harness.errors import ConfigError

if TYPE_CHECKING:
    import argparse

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
    "exit_code",
    "load_scenarios",
    "parse_faults",
    "print_output",
    "run_budget",
]

EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_UNKNOWN: Final = 2
"""Also the exit code of a usage error."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C, as a shell reports a process SIGINT ended."""

GUARANTEES: Final = ("at-least-once", "exactly-once")
"""The ``--guarantee`` choices (``harness.check.Guarantee``'s values, without importing it)."""


def exit_code(verdict: Verdict) -> int:
    """0 for VALID, 1 for INVALID, 2 for UNKNOWN."""
    from harness.check import Status

    return {Status.VALID: EXIT_OK, Status.INVALID: EXIT_INVALID}.get(verdict.status, EXIT_UNKNOWN)


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
    parser.add_argument(
        "--run-calls",
        type=int,
        default=None,
        help="calls into the world one run may make before it ends UNKNOWN (default 1000000)",
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=None,
        help="wall-clock seconds one run may take before it ends UNKNOWN (default 60)",
    )


def run_budget(args: argparse.Namespace, base: RunBudget | None = None) -> RunBudget:
    """``base`` (default: the default run budget) with ``--run-calls``/``--run-seconds``."""
    from harness.sim.budget import DEFAULT_RUN_BUDGET, RunBudget

    base = DEFAULT_RUN_BUDGET if base is None else base
    return RunBudget(
        calls=base.calls if args.run_calls is None else args.run_calls,
        seconds=base.seconds if args.run_seconds is None else args.run_seconds,
    )
