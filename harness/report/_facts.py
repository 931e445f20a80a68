"""What every report format says, gathered once: the facts of a run and short event lines.

The renderers (text, JSON, HTML) only lay these out; none of them looks at a history or a
verdict in its own way, so the three formats always agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final, final

from harness.check.verdict import Anomaly, Status, Verdict
from harness.errors import ConfigError, HarnessError
from harness.faults.schedule import Schedule
from harness.faults.streams import StreamSchedule
from harness.history.events import Event, EventKind, History, RebalanceDetail
from harness.report.subject import ProcessorError, Reported, ReportedSchedule

__all__ = [
    "ReportFacts",
    "anomalous_events",
    "anomalous_records",
    "anomalous_table_keys",
    "as_facts",
    "clip",
    "event_line",
    "gather",
    "headline",
    "history_stats",
    "rebalanced_before",
    "stats_of",
    "is_related",
]

CLIP: Final = 40
"""The longest a payload string (key, value, detail) is shown inside a one-line event."""


@final
@dataclass(frozen=True, slots=True)
class ReportFacts:
    """Everything a report shows, resolved once (by :func:`gather`) from the thing reported,
    explicit overrides and the history's header. Every renderer takes one."""

    verdict: Verdict
    history: History | None
    schedule: ReportedSchedule | None
    seed: int | None
    replay_command: str | None
    processor: str | None
    backend: str | None
    run_id: str | None
    title: str
    processor_errors: tuple[ProcessorError, ...] = ()
    stats: Mapping[str, Any] | None = None
    """:func:`history_stats` of the history (None without one), read once for every format."""
    coverage: str | None = None
    """What the search exercised before it failed (the reported run's ``coverage.summary()``,
    e.g. ``38/38 fault points, ... 211 pairs, 1000 schedules``), when it says."""


def _check_type(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ConfigError(f"{name} must be {what} or None, got {value!r:.80}")


def _subject_fields(subject: object) -> dict[str, Any]:
    if isinstance(subject, Verdict):
        return {"verdict": subject}
    verdict = getattr(subject, "verdict", None)
    if not isinstance(verdict, Verdict):
        raise ConfigError(
            "a report needs a harness.Verdict, or a checked run with a verdict (such as "
            f"CounterexampleFound.failure or harness.report.Checked), got {subject!r:.80}"
        )
    fields = {name: getattr(subject, name, None) for name in _SUBJECT_FIELDS}
    errors = getattr(subject, "processor_errors", ())
    if not isinstance(errors, tuple) or not all(isinstance(e, ProcessorError) for e in errors):
        raise ConfigError(f"processor_errors must be a tuple of ProcessorError, got {errors!r:.80}")
    fields["processor_errors"] = errors
    summary = getattr(getattr(subject, "coverage", None), "summary", None)
    fields["coverage"] = summary() if callable(summary) else None
    return fields


_SCHEDULES: Final = (Schedule, StreamSchedule)
"""The schedules a report shows: the simulator's, and a Structured Streaming job's."""

_SUBJECT_FIELDS: Final = (
    "verdict",
    "history",
    "schedule",
    "seed",
    "replay_command",
    "processor",
    "backend",
)


def gather(
    subject: Reported | Verdict,
    history: History | None = None,
    *,
    schedule: ReportedSchedule | None = None,
    seed: int | None = None,
    replay_command: str | None = None,
    title: str | None = None,
    processor: str | None = None,
    backend: str | None = None,
) -> ReportFacts:
    """The facts of a report on ``subject``: a :class:`Reported` run (its fields are used)
    or a bare :class:`Verdict`. Explicit arguments override the subject's fields; what is
    still missing comes from ``history.meta.extra``; the title defaults to the processor."""
    given: dict[str, Any] = _subject_fields(subject)
    overrides = {
        "history": history,
        "schedule": schedule,
        "seed": seed,
        "replay_command": replay_command,
        "processor": processor,
        "backend": backend,
    }
    given.update({name: value for name, value in overrides.items() if value is not None})
    history = given.get("history")
    if history is not None and not isinstance(history, History):
        raise ConfigError(f"history must be a harness.History or None, got {history!r:.80}")
    schedule = given.get("schedule")
    if schedule is not None and not isinstance(schedule, _SCHEDULES):
        raise ConfigError(
            f"schedule must be a harness.Schedule, a StreamSchedule or None, got {schedule!r:.80}"
        )
    _check_type("seed", given.get("seed"), int, "an int")
    for name in ("replay_command", "processor", "backend"):
        _check_type(name, given.get(name), str, "a str")
    _check_type("title", title, str, "a str")
    extra: Mapping[str, Any] = {} if history is None else history.meta.extra
    for name in ("processor", "backend"):
        if given.get(name) is None and isinstance(extra.get(name), str):
            given[name] = extra[name]
    if given.get("seed") is None and type(extra.get("seed")) is int:
        given["seed"] = extra["seed"]
    if schedule is None and extra.get("schedule") is not None:
        # an unchanged Spark job's history (system "spark-job") records a stream schedule
        kind = StreamSchedule if extra.get("system") == "spark-job" else Schedule
        try:
            schedule = kind.from_json(extra["schedule"])
        except HarnessError:
            schedule = None  # a report of a damaged history still renders; it just lacks steps
    return ReportFacts(
        verdict=given["verdict"],
        history=history,
        schedule=schedule,
        seed=given.get("seed"),
        replay_command=given.get("replay_command"),
        processor=given.get("processor"),
        backend=given.get("backend"),
        run_id=None if history is None else history.meta.run_id,
        title=title if title is not None else given.get("processor") or "unnamed processor",
        processor_errors=given.get("processor_errors", ()),
        stats=None if history is None else history_stats(history),
        coverage=given.get("coverage") if isinstance(given.get("coverage"), str) else None,
    )


def as_facts(subject: ReportFacts | Reported | Verdict) -> ReportFacts:
    """``subject`` itself when it is :class:`ReportFacts`, else :func:`gather` of it."""
    return subject if isinstance(subject, ReportFacts) else gather(subject)


def headline(facts: ReportFacts) -> str:
    """``INVALID: at-least-once does NOT hold for P (memory backend)`` and the like."""
    verdict = facts.verdict
    held = {
        Status.VALID: "holds",
        Status.INVALID: "does NOT hold",
        Status.UNKNOWN: "could not be shown",
    }[verdict.status]
    where = f" for {facts.processor}" if facts.processor else ""
    backend = f" ({facts.backend} backend)" if facts.backend else ""
    return f"{verdict.status.name}: {verdict.guarantee.value} {held}{where}{backend}"


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 3, 1)] + "..."


def _s(value: object) -> str:
    # payload strings are quoted so that spaces or an empty key stay visible
    if value is None:
        return "?"
    if isinstance(value, str):
        return repr(clip(value))
    return str(value)


def _name(value: str | None) -> str:
    # sink and partition names come from the topology, not from payloads: shown bare
    return "?" if value is None else clip(value)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _where(event: Event) -> str:
    return f"{_name(event.partition)}@{_n(event.offset)}"


def _body(event: Event) -> str:
    k = event.kind
    record = event.record_id if event.record_id is not None else "?"
    if k is EventKind.APPEND:
        return f"{record} -> {_where(event)} key={_s(event.key)} value={_s(event.value)}"
    if k in (EventKind.ACK, EventKind.INDETERMINATE):
        return f"{record} at {_where(event)}"
    if k in (EventKind.TRUNCATE, EventKind.ROLLBACK, EventKind.FETCH, EventKind.COMMIT):
        verb = {
            EventKind.TRUNCATE: "below",
            EventKind.ROLLBACK: "offset now",
            EventKind.FETCH: "->",
            EventKind.COMMIT: "offset",
        }[k]
        offset = "none" if event.offset is None else str(event.offset)
        sought = " (seek)" if k is EventKind.FETCH and event.detail == "seek" else ""
        return f"{_name(event.partition)} {verb} {offset}{sought}"
    if k is EventKind.REBALANCE:
        return f"{_name(event.partition)} {_name(event.detail)}"
    if k is EventKind.READ:
        again = " (redelivered)" if event.detail == "redelivered" else ""
        return f"{record} from {_where(event)}{again}"
    if k is EventKind.EMIT:
        return (
            f"output {_n(event.output_id)} = {record} part {_n(event.part)}/{_n(event.parts)} "
            f"to {_name(event.sink)}"
        )
    if k is EventKind.PUT:
        return f"{_name(event.sink)}[{_s(event.key)}] = {_s(event.value)}"
    if k is EventKind.OBSERVE:
        if event.output_id is not None or event.record_id is not None:
            return (
                f"{_name(event.sink)} has output {_n(event.output_id)} = {record} "
                f"part {_n(event.part)}"
            )
        return f"{_name(event.sink)}[{_s(event.key)}] = {_s(event.value)}"
    if k in (EventKind.TXN_BEGIN, EventKind.TXN_COMMIT, EventKind.TXN_ABORT):
        return f"txn {_n(event.txn)}"
    if k in (EventKind.CRASH, EventKind.ERROR, EventKind.END):
        return _s(event.detail)
    return ""


def event_line(event: Event) -> str:
    """One short line for an event: ``#4 p1 read r0 from in-0@0``.

    Payload strings are quoted with ``repr`` and cut to :data:`CLIP` characters; the result
    may still hold any character (the text report makes it ASCII, the HTML one escapes it).
    """
    who = f" p{event.process}" if event.process is not None else ""
    body = _body(event)
    return f"#{event.index}{who} {event.kind.value}{' ' + body if body else ''}"


def rebalanced_before(history: History, index: int) -> list[Event]:
    """The ``rebalance`` events that assigned a ``fetch``'s partition to its process just
    before it (the fetch is where the reader of a newly assigned partition resumes), in
    order; none for any other event. Looks back over that process's rebalances and
    fetches only, so the cost is the length of one rebalance."""
    events = history.events
    if not 0 <= index < len(events) or events[index].kind is not EventKind.FETCH:
        return []
    fetch = events[index]
    found: list[Event] = []
    at = index - 1
    while at >= 0 and events[at].kind in (EventKind.REBALANCE, EventKind.FETCH):
        event = events[at]
        if event.process != fetch.process:
            break
        if event.kind is EventKind.REBALANCE and event.partition == fetch.partition:
            found.append(event)
        at -= 1
    return [e for e in reversed(found) if e.detail == RebalanceDetail.ASSIGNED.value]


def anomalous_events(anomalies: tuple[Anomaly, ...]) -> frozenset[int]:
    """Every event index some witness of ``anomalies`` points at."""
    return frozenset(i for a in anomalies for w in a.witnesses for i in w.events)


def anomalous_records(anomalies: tuple[Anomaly, ...]) -> frozenset[str]:
    """Every record id some witness of ``anomalies`` names."""
    return frozenset(r for a in anomalies for w in a.witnesses for r in w.record_ids)


def is_related(
    event: Event, records: frozenset[str], table_keys: frozenset[tuple[str, str]]
) -> bool:
    """Whether ``event`` touches a witness's record, or a table key a witness observed."""
    if event.record_id is not None and event.record_id in records:
        return True
    return (
        event.kind in (EventKind.PUT, EventKind.OBSERVE)
        and event.sink is not None
        and event.key is not None
        and (event.sink, event.key) in table_keys
    )


def anomalous_table_keys(
    history: History, anomalies: tuple[Anomaly, ...]
) -> frozenset[tuple[str, str]]:
    """``(sink, key)`` of every table value a witness of ``anomalies`` points at (an observed
    or written table entry), so that every write of that key can be shown with it."""
    found = set()
    for index in anomalous_events(anomalies):
        if 0 <= index < len(history.events):
            event = history.events[index]
            if (
                event.kind in (EventKind.PUT, EventKind.OBSERVE)
                and event.record_id is None
                and event.sink is not None
                and event.key is not None
            ):
                found.add((event.sink, event.key))
    return frozenset(found)


def history_stats(history: History) -> dict[str, Any]:
    """Summary numbers of a history (the ``history.stats`` object of the JSON report).

    Read at C speed where it can be (a history may hold millions of events): the kinds are
    counted by identity, the processes collected in a set.
    """
    events = history.events
    kinds_seen = list(map(_KIND_OF, events))
    by_identity = Counter(map(id, kinds_seen))
    kinds = {kind.value: by_identity.get(id(kind), 0) for kind in EventKind}
    processes = {p for p in map(_PROCESS_OF, events) if p is not None}
    drain = kinds_seen.index(EventKind.DRAIN) if kinds[EventKind.DRAIN.value] else None
    end = next((e.detail for e in reversed(events) if e.kind is EventKind.END), None)
    return {
        "events": len(events),
        "processes": sorted(processes),
        "partitions": list(history.meta.partitions),
        "sinks": sorted(history.meta.sinks),
        "kinds": kinds,
        "drain_index": None if drain is None else events[drain].index,
        "end": end,
    }


def stops_of(facts: ReportFacts) -> Mapping[str, str] | None:
    """Where the schedule's run steps stopped (the history's ``extra["stops"]``: step index
    -> the call it stopped before), when the history is a run of the reported schedule."""
    if facts.history is None or facts.schedule is None:
        return None
    extra = facts.history.meta.extra
    stops = extra.get("stops")
    if not isinstance(stops, Mapping) or extra.get("schedule") != facts.schedule.to_json():
        return None
    return stops


def stats_of(facts: ReportFacts) -> Mapping[str, Any] | None:
    """The history's summary numbers: gathered ones, or read now for facts built by hand."""
    if facts.stats is not None or facts.history is None:
        return facts.stats
    return history_stats(facts.history)


_KIND_OF: Final = attrgetter("kind")
_PROCESS_OF: Final = attrgetter("process")
