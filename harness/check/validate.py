"""Whether a history can be checked at all, and if not, why.

A checker judges only histories that follow the schema of :mod:`harness.history.events`;
anything else is UNKNOWN, never VALID. :func:`validate` lists what is wrong, naming the event
index and the bad value, and never raises, whatever the history holds.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from typing import Final

from harness.history.events import (
    REQUIRED_FIELDS,
    SCHEMA_VERSION,
    Aggregate,
    Event,
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
)

__all__ = ["MAX_PROBLEMS", "validate"]

MAX_PROBLEMS: Final = 20
""":func:`validate` stops after this many problems (and says so in one more line)."""

_INT_FIELDS: Final = ("process", "offset", "part", "parts", "value", "output_id", "txn")
_STR_FIELDS: Final = ("partition", "record_id", "key", "sink", "dlsn", "detail")

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 6
_short.maxtuple = 6


def _show(value: object) -> str:
    """``repr`` of a value, cut short; never raises."""
    try:
        return _short.repr(value)
    except Exception:  # a garbage object whose __repr__ fails still gets a message
        return f"<unprintable {type(value).__name__}>"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _TooMany(Exception):
    """Raised by :class:`_Problems` once :data:`MAX_PROBLEMS` have been collected."""


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)
        if len(self.items) >= MAX_PROBLEMS:
            raise _TooMany


def validate(history: History) -> list[str]:
    """Every reason ``history`` cannot be checked (at most :data:`MAX_PROBLEMS`, then a line
    saying the list stops there); an empty list when it can.

    Checked: the schema version; ``events[i].index == i``; each kind is an
    :class:`~harness.history.events.EventKind`; the kind's
    :data:`~harness.history.events.REQUIRED_FIELDS` are non-null; every field has its type
    (ints are ``int`` and not ``bool``, strs are ``str``), offsets and parts are not negative,
    ``parts`` is at least 1 and above ``part``; partitions are declared in ``meta.partitions``;
    ``emit``/``put``/``observe`` name a declared sink (``put`` only a table sink, an
    ``observe`` with ``output_id`` only a log sink; a log ``observe`` has ``output_id`` and
    ``part`` (its ``key``/``value`` are the output's), a table ``observe`` ``key`` and
    ``value``); appended record ids are unique; an append's offset is above the partition's
    highest acknowledged offset (an unacknowledged append's position is taken again);
    ``ack`` and ``read`` name a record appended before them, at the same partition and
    offset; there is exactly one ``end`` event and it is the last; there is at most one
    ``drain``.
    """
    problems = _Problems()
    try:
        _validate(history, problems)
    except _TooMany:
        problems.items.append(f"(stopped after {MAX_PROBLEMS} problems; there may be more)")
    return problems.items


def _validate(history: object, problems: _Problems) -> None:
    partitions, sinks = _validate_meta(getattr(history, "meta", None), problems)
    events = getattr(history, "events", None)
    if not isinstance(events, Sequence) or isinstance(events, str):
        problems.add(f"history.events must be a sequence of Event, got {_show(events)}")
        return
    if not events:
        problems.add("the history has no events; it needs at least its end event")
        return

    appended: dict[str, tuple[str, int, int]] = {}
    last_offset: dict[str, tuple[int, int]] = {}
    ends: list[int] = []
    drains: list[int] = []
    for i, event in enumerate(events):
        if not isinstance(event, Event):
            problems.add(f"event {i} is not an Event: {_show(event)}")
            continue
        if not _is_int(event.index) or event.index != i:
            problems.add(
                f"event {i} has index {_show(event.index)}; events must be numbered "
                f"0, 1, 2, ... in order"
            )
        kind: object = event.kind
        if not isinstance(kind, EventKind):
            problems.add(
                f"event {i} has kind {_show(kind)}, which is not an EventKind "
                f"(one of {', '.join(k.value for k in EventKind)})"
            )
            continue
        if kind is EventKind.END:
            ends.append(i)
        elif kind is EventKind.DRAIN:
            drains.append(i)
        where = f"event {i} ({kind.value})"
        if not _fields_ok(event, where, problems):
            continue
        if event.partition is not None and event.partition not in partitions:
            problems.add(
                f"{where} names partition {event.partition!r}, which is not in "
                f"meta.partitions {sorted(partitions)}"
            )
            continue
        if kind is EventKind.APPEND:
            _check_append(event, where, appended, last_offset, problems)
        elif kind is EventKind.READ:
            _check_appended(event, where, appended, problems)
        elif kind is EventKind.ACK and _check_appended(event, where, appended, problems):
            assert event.partition is not None and event.offset is not None
            previous = last_offset.get(event.partition)
            if previous is None or event.offset > previous[0]:
                last_offset[event.partition] = (event.offset, event.index)
        elif kind in (EventKind.EMIT, EventKind.PUT, EventKind.OBSERVE):
            _check_sink(event, where, sinks, problems)

    last = len(events) - 1
    if not ends:
        problems.add("the history has no end event; its last event must be 'end'")
    elif len(ends) > 1:
        problems.add(
            f"the history has {len(ends)} end events (events {', '.join(map(str, ends))}); "
            f"it must have exactly one, the last"
        )
    elif ends[0] != last:
        problems.add(f"event {ends[0]} (end) is not the last event; the history goes on to {last}")
    if len(drains) > 1:
        problems.add(
            f"the history has {len(drains)} drain events (events "
            f"{', '.join(map(str, drains))}); it may have at most one"
        )


def _validate_meta(meta: object, problems: _Problems) -> tuple[frozenset[str], dict[str, SinkKind]]:
    """Check the header; return the partitions and sink kinds that are usable."""
    if not isinstance(meta, HistoryMeta):
        problems.add(f"history.meta must be a HistoryMeta, got {_show(meta)}")
        return frozenset(), {}
    version: object = meta.version
    if not _is_int(version) or version != SCHEMA_VERSION:
        problems.add(
            f"history schema version {_show(version)} is not supported: this checker reads "
            f"version {SCHEMA_VERSION}"
        )
    partitions: frozenset[str] = frozenset()
    raw_partitions: object = meta.partitions
    if isinstance(raw_partitions, (tuple, list)) and all(
        isinstance(p, str) for p in raw_partitions
    ):
        partitions = frozenset(raw_partitions)
    else:
        problems.add(f"meta.partitions must be a tuple of str, got {_show(raw_partitions)}")
    sinks: dict[str, SinkKind] = {}
    raw_sinks: object = meta.sinks
    if not isinstance(raw_sinks, Mapping):
        problems.add(f"meta.sinks must map sink names to SinkSpec, got {_show(raw_sinks)}")
        return partitions, sinks
    for name, spec in raw_sinks.items():
        if (
            isinstance(name, str)
            and isinstance(spec, SinkSpec)
            and isinstance(spec.kind, SinkKind)
            and isinstance(spec.ordered, bool)
            and (spec.aggregate is None or isinstance(spec.aggregate, Aggregate))
        ):
            sinks[name] = spec.kind
        else:
            problems.add(f"meta.sinks entry {_show(name)}: {_show(spec)} is not a str: SinkSpec")
    return partitions, sinks


def _fields_ok(event: Event, where: str, problems: _Problems) -> bool:
    """Required fields present, types right, numbers in range; report and return False if not."""
    ok = True
    required = REQUIRED_FIELDS[event.kind]
    for name in _INT_FIELDS + _STR_FIELDS:
        value = getattr(event, name)
        if value is None:
            if name in required:
                problems.add(f"{where} is missing {name}")
                ok = False
        elif name in _INT_FIELDS and not _is_int(value):
            problems.add(f"{where} has {name} {_show(value)}; it must be an int")
            ok = False
        elif name in _STR_FIELDS and not isinstance(value, str):
            problems.add(f"{where} has {name} {_show(value)}; it must be a str")
            ok = False
    if not ok:
        return False
    for name in ("offset", "part"):
        value = getattr(event, name)
        if value is not None and value < 0:
            problems.add(f"{where} has {name} {value}; it must not be negative")
            ok = False
    if event.parts is not None and event.parts < 1:
        problems.add(f"{where} has parts {event.parts}; it must be at least 1")
        ok = False
    elif event.parts is not None and event.part is not None and event.part >= event.parts:
        problems.add(f"{where} has part {event.part} of parts {event.parts}; part must be below")
        ok = False
    return ok


def _check_append(
    event: Event,
    where: str,
    appended: dict[str, tuple[str, int, int]],
    last_offset: dict[str, tuple[int, int]],
    problems: _Problems,
) -> None:
    assert event.record_id is not None and event.partition is not None
    assert event.offset is not None
    earlier = appended.get(event.record_id)
    if earlier is not None:
        problems.add(
            f"{where} appends record {event.record_id!r} again; it was appended at event "
            f"{earlier[2]} and record ids must be unique"
        )
        return
    # Compared with the last *acknowledged* offset: an append the producer never got
    # acknowledged was discarded by the log, and the next append takes its position again.
    previous = last_offset.get(event.partition)
    if previous is not None and event.offset <= previous[0]:
        problems.add(
            f"{where} appends at offset {event.offset} of partition {event.partition!r}, not "
            f"above offset {previous[0]} acknowledged at event {previous[1]}"
        )
        return
    appended[event.record_id] = (event.partition, event.offset, event.index)


def _check_appended(
    event: Event,
    where: str,
    appended: Mapping[str, tuple[str, int, int]],
    problems: _Problems,
) -> bool:
    assert event.record_id is not None
    placed = appended.get(event.record_id)
    if placed is None:
        problems.add(f"{where} names record {event.record_id!r}, which was not appended before it")
        return False
    if (event.partition, event.offset) != placed[:2]:
        problems.add(
            f"{where} places record {event.record_id!r} at partition {event.partition!r} "
            f"offset {event.offset}, but event {placed[2]} appended it at partition "
            f"{placed[0]!r} offset {placed[1]}"
        )
        return False
    return True


def _check_sink(
    event: Event, where: str, sinks: Mapping[str, SinkKind], problems: _Problems
) -> None:
    assert event.sink is not None
    sink_kind = sinks.get(event.sink)
    if sink_kind is None:
        problems.add(
            f"{where} names sink {event.sink!r}, which is not declared in meta.sinks "
            f"{sorted(sinks)}"
        )
        return
    if event.kind is EventKind.PUT and sink_kind is not SinkKind.TABLE:
        problems.add(f"{where} puts into sink {event.sink!r}, which is a log, not a table")
    elif event.kind is EventKind.OBSERVE:
        if sink_kind is SinkKind.LOG:
            if event.output_id is None or event.part is None:
                problems.add(
                    f"{where} observes log sink {event.sink!r} without output_id and part "
                    f"(got output_id {event.output_id!r}, part {event.part!r})"
                )
        elif event.output_id is not None:
            problems.add(
                f"{where} observes output {event.output_id} in sink {event.sink!r}, which is a "
                f"table, not a log"
            )
        elif event.key is None or event.value is None:
            problems.add(
                f"{where} observes table sink {event.sink!r} without key and value "
                f"(got key {event.key!r}, value {event.value!r})"
            )
