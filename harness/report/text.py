"""The terminal report: a verdict, its witnesses and how to run the failure again, as text.

The output is plain ASCII whatever the history holds: a record's key or a processor's error
message can contain anything (control characters, an ANSI escape, non-ASCII text), and each
such character is shown as a Python-style escape (``\\x1b``, ``\\u00e9``) so it can neither
garble the terminal nor forge a line of the report.
"""

from __future__ import annotations

from typing import Final

from harness.check.verdict import Anomaly, Status, Verdict
from harness.errors import ConfigError
from harness.faults.schedule import Schedule
from harness.history.events import History
from harness.report._facts import ReportFacts, event_line, gather, headline, history_stats

__all__ = ["render_text"]

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


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class _Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if self.color else text


def _anomaly_lines(
    anomaly: Anomaly, history: History | None, paint: _Paint, code: str
) -> list[str]:
    shown = len(anomaly.witnesses)
    more = f" (showing {shown})" if shown < anomaly.count else ""
    lines = [f"  {paint(code, anomaly.kind.value)} x{anomaly.count}{more}"]
    for witness in anomaly.witnesses:
        lines.append(f"    {_ascii(witness.summary())}")
        if history is None:
            continue
        for index in witness.events:
            if 0 <= index < len(history.events):
                lines.append(f"      {_ascii(event_line(history.events[index]))}")
            else:
                lines.append(f"      #{index} (not in the history)")
    return lines


def _render(facts: ReportFacts, paint: _Paint) -> str:
    verdict = facts.verdict
    lines = [
        paint(_BOLD, f"harness report: {_ascii(facts.title)}"),
        paint(_STATUS_COLOR[verdict.status], _ascii(headline(facts))),
    ]
    if verdict.anomalies:
        kinds = len(verdict.anomalies)
        total = sum(anomaly.count for anomaly in verdict.anomalies)
        lines.append(f"anomalies ({_plural(kinds, 'kind')}, {_plural(total, 'occurrence')}):")
        for anomaly in verdict.anomalies:
            lines.extend(_anomaly_lines(anomaly, facts.history, paint, _RED))
    if verdict.tolerated:
        lines.append(f"tolerated under {verdict.guarantee.value} (do not change the verdict):")
        for anomaly in verdict.tolerated:
            lines.extend(_anomaly_lines(anomaly, facts.history, paint, _YELLOW))
    if verdict.reasons:
        lines.append("unknown because:")
        lines.extend(f"  {_ascii(reason)}" for reason in verdict.reasons)
    if verdict.stats:
        stats = " ".join(f"{_ascii(name)}={value}" for name, value in verdict.stats.items())
        lines.append(f"stats: {stats}")
    if facts.history is not None:
        summary = history_stats(facts.history)
        processes = ", ".join(str(p) for p in summary["processes"]) or "none"
        ended = "no end event" if summary["end"] is None else f"ended {summary['end']}"
        lines.append(
            _ascii(
                f"history: run {facts.run_id}, {summary['events']} events, "
                f"processes {processes}, {ended}"
            )
        )
    if facts.schedule is not None:
        lines.append(f"schedule ({len(facts.schedule)} steps):")
        lines.extend(f"  {_ascii(line)}" for line in facts.schedule.describe().splitlines())
        lines.append(f"schedule JSON: {_ascii(facts.schedule.dumps())}")
    if facts.seed is not None:
        lines.append(f"seed: {facts.seed}")
    if facts.replay_command is not None:
        lines.append(paint(_DIM, "replay: ") + _ascii(facts.replay_command))
    return "\n".join(lines) + "\n"


def render_text(
    verdict: Verdict,
    history: History | None = None,
    *,
    schedule: Schedule | None = None,
    replay_command: str | None = None,
    seed: int | None = None,
    title: str | None = None,
    processor: str | None = None,
    backend: str | None = None,
    color: bool = False,
) -> str:
    """The report as ASCII text ending in a newline.

    Shows the headline verdict, each anomaly with its count and witnesses (with ``history``,
    each witness event as one short line), tolerated anomalies, the reasons of an UNKNOWN
    verdict, the verdict's stats, the schedule's steps, the seed and the replay command.
    ``processor``, ``backend``, ``seed`` and ``schedule`` default to what the history's
    header records. ``color=True`` adds ANSI colours (red anomalies, a coloured status).
    """
    if type(color) is not bool:
        raise ConfigError(f"color must be True or False, got {color!r}")
    facts = gather(
        verdict,
        history,
        schedule=schedule,
        seed=seed,
        replay_command=replay_command,
        title=title,
        processor=processor,
        backend=backend,
    )
    return _render(facts, _Paint(color))
