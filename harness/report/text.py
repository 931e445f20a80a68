"""The terminal report: a verdict, its witnesses and how to run the failure again, as text.

The output is plain ASCII whatever the history holds: a record's key or a processor's error
message can contain anything (control characters, an ANSI escape, non-ASCII text), and each
such character is shown as a Python-style escape (``\\x1b``, ``\\u00e9``) so it can neither
garble the terminal nor forge a line of the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness._shown import counted
from harness.check.verdict import Anomaly, Status, Verdict
from harness.errors import ConfigError
from harness.history.events import History
from harness.report._facts import (
    ReportFacts,
    as_facts,
    event_line,
    headline,
    rebalanced_before,
    stats_of,
    stops_of,
)
from harness.report.subject import Reported, ReportedSchedule

__all__ = ["SCHEDULE_STEPS", "WITNESS_EVENTS", "render_text"]

WITNESS_EVENTS: Final = 20
"""The most events shown under one witness (the JSON report has them all)."""
SCHEDULE_STEPS: Final = 200
"""The most schedule steps listed; a longer schedule is cut, and the report says so."""

_RESET: Final = "\x1b[0m"
_STATUS_COLOR: Final = {
    Status.VALID: "\x1b[1;32m",
    Status.INVALID: "\x1b[1;31m",
    Status.UNKNOWN: "\x1b[1;33m",
}
_RED: Final = "\x1b[31m"
_YELLOW: Final = "\x1b[33m"
_BOLD: Final = "\x1b[1m"
_DIM: Final = "\x1b[2m"


def _ascii(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def _few(numbers: list[int]) -> str:
    """``1, 2, 3`` or, for many, ``1, 2, 3, ..., 3002 (3002 in all)``: bounded whatever the
    history."""
    if not numbers:
        return "none"
    if len(numbers) <= 8:
        return ", ".join(str(n) for n in numbers)
    return f"{', '.join(str(n) for n in numbers[:3])}, ..., {numbers[-1]} ({len(numbers)} in all)"


class _Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if self.color else text


def _anomaly_lines(
    anomaly: Anomaly, history: History | None, paint: _Paint, code: str
) -> list[str]:
    shown = len(anomaly.witnesses)
    more = f" (showing {shown} of {anomaly.count})" if shown < anomaly.count else ""
    lines = [f"  {paint(code, anomaly.kind.value)} x{anomaly.count}{more}"]
    for witness in anomaly.witnesses:
        lines.append(f"    {_ascii(witness.summary())}")
        if history is None:
            continue
        for index in witness.events[:WITNESS_EVENTS]:
            if 0 <= index < len(history.events):
                for cause in rebalanced_before(history, index):
                    lines.append(f"      {_ascii(event_line(cause))} (the fetch's cause)")
                lines.append(f"      {_ascii(event_line(history.events[index]))}")
            else:
                lines.append(f"      #{index} (not in the history)")
        if len(witness.events) > WITNESS_EVENTS:
            lines.append(f"      ... {len(witness.events) - WITNESS_EVENTS} more events")
    return lines


def _schedule_lines(schedule: ReportedSchedule, stops: Mapping[str, str] | None) -> list[str]:
    steps = schedule.describe(stops).splitlines()
    lines = [f"schedule ({len(schedule)} steps):"]
    if len(schedule) <= SCHEDULE_STEPS:
        lines.extend(f"  {_ascii(line)}" for line in steps)
        lines.append(f"schedule JSON: {_ascii(schedule.dumps())}")
    else:
        lines.extend(f"  {_ascii(line)}" for line in steps[:SCHEDULE_STEPS])
        lines.append(
            f"  ... {len(schedule) - SCHEDULE_STEPS} more steps: the JSON report and the "
            "replay file have the whole schedule"
        )
        lines.append(f"  {_ascii(steps[-1])}")
    return lines


def _render(facts: ReportFacts, paint: _Paint) -> str:
    verdict = facts.verdict
    lines = [
        paint(_BOLD, f"harness report: {_ascii(facts.title)}"),
        paint(_STATUS_COLOR[verdict.status], _ascii(headline(facts))),
    ]
    for error in facts.processor_errors:
        lines.extend(_ascii(line) for line in error.lines())
    if verdict.anomalies:
        kinds = len(verdict.anomalies)
        total = sum(anomaly.count for anomaly in verdict.anomalies)
        lines.append(f"anomalies ({counted(kinds, 'kind')}, {counted(total, 'occurrence')}):")
        for anomaly in verdict.anomalies:
            lines.extend(_anomaly_lines(anomaly, facts.history, paint, _RED))
    if verdict.tolerated:
        lines.append(f"tolerated under {verdict.guarantee.value} (do not change the verdict):")
        for anomaly in verdict.tolerated:
            lines.extend(_anomaly_lines(anomaly, facts.history, paint, _YELLOW))
    if verdict.reasons:
        # an INVALID verdict's reasons (its processor errors, a flaky rerun) are no unknowns
        lines.append("unknown because:" if verdict.status is Status.UNKNOWN else "also found:")
        lines.extend(f"  {_ascii(reason)}" for reason in verdict.reasons)
    if verdict.stats:
        stats = " ".join(f"{_ascii(name)}={value}" for name, value in verdict.stats.items())
        lines.append(f"stats: {stats}")
    summary = stats_of(facts)
    if summary is not None:
        processes = _few(summary["processes"])
        ended = "no end event" if summary["end"] is None else f"ended {summary['end']}"
        lines.append(
            _ascii(
                f"history: run {facts.run_id}, {summary['events']} events, "
                f"processes {processes}, {ended}"
            )
        )
    if facts.schedule is not None:
        lines.extend(_schedule_lines(facts.schedule, stops_of(facts)))
    if facts.seed is not None:
        lines.append(f"seed: {facts.seed}")
    if facts.coverage is not None:
        lines.append(_ascii(f"coverage: {facts.coverage}"))
    if facts.replay_command is not None:
        lines.append(paint(_DIM, "replay: ") + _ascii(facts.replay_command))
    return "\n".join(lines) + "\n"


def render_text(facts: ReportFacts | Reported | Verdict, *, color: bool = False) -> str:
    """The report as ASCII text ending in a newline.

    ``facts`` is what :func:`~harness.report.gather` returns (a checked run such as
    ``CounterexampleFound.failure``, or a bare verdict, is gathered first). Shows the
    headline verdict, the processor's own errors with their tracebacks, each anomaly with
    its count and witnesses (with a history, each witness event as one short line),
    tolerated anomalies, the reasons of an UNKNOWN verdict, the verdict's stats, the
    schedule's steps, the seed and the replay command. ``color=True`` adds ANSI colours
    (red anomalies, a coloured status).
    """
    if type(color) is not bool:
        raise ConfigError(f"color must be True or False, got {color!r}")
    return _render(as_facts(facts), _Paint(color))
