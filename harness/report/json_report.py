"""Machine-readable output: the report (one JSON object, versioned, described by
``REPORT_SCHEMA``) and the envelope every command's ``--json`` prints (``OUTPUT_SCHEMA``)."""

from __future__ import annotations

import json
from typing import Any

from harness.check.verdict import Status, Verdict
from harness.errors import ConfigError
from harness.report._facts import ReportFacts, anomalous_events, as_facts, stats_of
from harness.report.schema import OUTPUT_FIELDS, OUTPUT_VERSION, REPORT_VERSION
from harness.report.subject import Reported

__all__ = ["output_json", "render_json", "render_output", "report_json"]


def _history_json(facts: ReportFacts, include_events: bool) -> dict[str, Any] | None:
    history = facts.history
    if history is None:
        return None
    verdict = facts.verdict
    pointed = anomalous_events(verdict.anomalies) | anomalous_events(verdict.tolerated)
    return {
        "meta": history.meta.to_json(),
        "stats": stats_of(facts),
        "witness_events": [
            history.events[i].to_row() for i in sorted(pointed) if 0 <= i < len(history.events)
        ],
        "events": [event.to_row() for event in history.events] if include_events else None,
    }


def facts_json(facts: ReportFacts, *, include_events: bool) -> dict[str, Any]:
    """The report object for gathered facts (shared with the HTML report's embedded data)."""
    return {
        "harness_report": REPORT_VERSION,
        "title": facts.title,
        "processor": facts.processor,
        "guarantee": facts.verdict.guarantee.value,
        "backend": facts.backend,
        "run_id": facts.run_id,
        "seed": facts.seed,
        "replay_command": facts.replay_command,
        "coverage": facts.coverage,
        "verdict": facts.verdict.to_json(),
        "schedule": None if facts.schedule is None else facts.schedule.to_json(),
        "history": _history_json(facts, include_events),
    }


def report_json(
    facts: ReportFacts | Reported | Verdict, *, include_events: bool = False
) -> dict[str, Any]:
    """The report as a plain JSON-able dict satisfying :data:`REPORT_SCHEMA`.

    ``facts`` is what :func:`~harness.report.gather` returns (a checked run or a bare
    verdict is gathered first). Keys are in a fixed order; ``verdict`` is
    ``Verdict.to_json()`` (``Verdict.from_json`` reads it back) and ``schedule`` is the
    schedule's ``to_json()`` (a ``Schedule``, or an unchanged Spark job's
    ``StreamSchedule``). With a history, the ``history`` key holds its header, summary
    stats and the events the witnesses point at; ``include_events=True`` embeds every
    event too (as the rows of the JSONL history format).
    """
    if type(include_events) is not bool:
        raise ConfigError(f"include_events must be True or False, got {include_events!r}")
    return facts_json(as_facts(facts), include_events=include_events)


def render_json(facts: ReportFacts | Reported | Verdict, *, include_events: bool = False) -> str:
    """:func:`report_json` as indented UTF-8 JSON text ending in a newline."""
    report = report_json(facts, include_events=include_events)
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def output_json(command: str, status: Status | str, summary: str, **fields: Any) -> dict[str, Any]:
    """The envelope of ``command``'s ``--json`` output, satisfying :data:`OUTPUT_SCHEMA`.

    ``harness_output`` (the version), ``command``, ``status`` (``valid``, ``invalid`` or
    ``unknown``, as the exit code 0, 1 or 2) and a one-line ``summary`` come first, then
    ``fields``: exactly the command's keys of :data:`OUTPUT_FIELDS`, in that order.
    """
    keys = OUTPUT_FIELDS.get(command)
    if keys is None:
        raise ConfigError(
            f"unknown command {command!r:.40}; the commands are {list(OUTPUT_FIELDS)}"
        )
    if set(fields) != set(keys):
        raise ConfigError(f"the {command} output takes the keys {list(keys)}, got {sorted(fields)}")
    head: dict[str, Any] = {
        "harness_output": OUTPUT_VERSION,
        "command": command,
        "status": Status(status).value,
        "summary": summary,
    }
    return head | {key: fields[key] for key in keys}


def render_output(command: str, status: Status | str, summary: str, **fields: Any) -> str:
    """:func:`output_json` as indented JSON text (no trailing newline, for ``print``)."""
    value = output_json(command, status, summary, **fields)
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
