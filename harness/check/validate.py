"""Whether a history can be checked at all, and if not, why.

A checker judges only histories that follow the schema of :mod:`harness.history.events`;
anything else is UNKNOWN, never VALID. :func:`validate` lists what is wrong, naming the event
index and the bad value, and never raises, whatever the history holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from harness.check import wording
from harness.history.events import (
    AGAIN,
    INT_FIELDS,
    REQUIRED_FIELDS,
    SCHEMA_VERSION,
    STR_FIELDS,
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

_INT_FIELDS: Final = INT_FIELDS
_STR_FIELDS: Final = STR_FIELDS

_show = wording.show


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
    ``value``); appended record ids are unique, except that an append with ``detail ==
    "resent"`` or ``"retried"`` appends an earlier record again (same partition, key and
    value: an at-least-once upstream's resend, a producer's retry); an append may take any
    offset (one below an offset acknowledged before it is the checker's
    ``nonmonotonic-send`` when its send is in the log, one at an acknowledged record's
    offset its ``inconsistent-offsets``; an unacknowledged append's position is taken
    again by the next); ``ack`` and ``indeterminate``
    name a record appended before them, at the same partition and offset as one of its
    appends; ``read`` names a record appended before it (at any offset: one where the
    record was not appended is the checker's ``log-duplicate`` or
    ``inconsistent-offsets``); there is exactly one ``end`` event and it is the last;
    there is at most one ``drain``.
    """
    problems = _Problems()
    try:
        _validate(history, problems)
    except _TooMany:
        problems.items.append(wording.stopped_after(MAX_PROBLEMS))
    return problems.items


def _validate(history: object, problems: _Problems) -> None:
    partitions, sinks = _validate_meta(getattr(history, "meta", None), problems)
    events = getattr(history, "events", None)
    if not isinstance(events, Sequence) or isinstance(events, str):
        problems.add(f"history.events must be a sequence of Event, got {_show(events)}")
        return
    if not events:
        problems.add(wording.EMPTY_HISTORY)
        return

    appended: _Appended = {}
    ends: list[int] = []
    drains: list[int] = []
    for i, event in enumerate(events):
        if not isinstance(event, Event):
            problems.add(f"event {i} is not an Event: {_show(event)}")
            continue
        if not _is_int(event.index) or event.index != i:
            problems.add(wording.index_out_of_order(i, event.index))
        kind: object = event.kind
        if not isinstance(kind, EventKind):
            problems.add(wording.kind_unknown(i, kind))
            continue
        if kind is EventKind.END:
            ends.append(i)
        elif kind is EventKind.DRAIN:
            drains.append(i)
        where = wording.where(i, kind.value)
        if not _fields_ok(event, where, problems):
            continue
        if event.partition is not None and event.partition not in partitions:
            problems.add(wording.undeclared_partition(where, event.partition, partitions))
            continue
        if kind is EventKind.APPEND:
            _check_append(event, where, appended, problems)
        elif kind is EventKind.READ:
            _check_appended(event, where, appended, problems, anywhere=True)
        elif kind in (EventKind.INDETERMINATE, EventKind.ACK):
            _check_appended(event, where, appended, problems)
        elif kind in (EventKind.EMIT, EventKind.PUT, EventKind.OBSERVE):
            _check_sink(event, where, sinks, problems)

    last = len(events) - 1
    if not ends:
        problems.add(wording.NO_END)
    elif len(ends) > 1:
        problems.add(wording.many_ends(ends))
    elif ends[0] != last:
        problems.add(wording.end_not_last(ends[0], last))
    if len(drains) > 1:
        problems.add(wording.many_drains(drains))


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
                problems.add(wording.field_missing(where, name))
                ok = False
        elif name in _INT_FIELDS and not _is_int(value):
            problems.add(wording.field_type(where, name, value, "int"))
            ok = False
        elif name in _STR_FIELDS and not isinstance(value, str):
            problems.add(wording.field_type(where, name, value, "str"))
            ok = False
    if not ok:
        return False
    for name in ("offset", "part"):
        value = getattr(event, name)
        if value is not None and value < 0:
            problems.add(wording.negative(where, name, value))
            ok = False
    if event.parts is not None and event.parts < 1:
        problems.add(wording.parts_too_low(where, event.parts))
        ok = False
    elif event.parts is not None and event.part is not None and event.part >= event.parts:
        problems.add(wording.part_not_below(where, event.part, event.parts))
        ok = False
    return ok


_Appended = dict[str, tuple[Event, set[tuple[str, int]]]]
"""record id -> its first accepted append, and the places (partition, offset) of all."""


def _check_append(event: Event, where: str, appended: _Appended, problems: _Problems) -> None:
    assert event.record_id is not None and event.partition is not None
    assert event.offset is not None
    earlier = appended.get(event.record_id)
    if event.detail in AGAIN:
        if earlier is None:
            problems.add(wording.resent_unknown(where, event.record_id))
            return
        first = earlier[0]
        if (event.partition, event.key, event.value) != (first.partition, first.key, first.value):
            problems.add(
                wording.resent_differs(
                    where, event.record_id, first.index, first.partition, first.key, first.value
                )
            )
            return
    elif earlier is not None:
        problems.add(wording.append_again(where, event.record_id, earlier[0].index))
        return
    # Any offset: one below an acknowledged one is the checker's nonmonotonic-send (or,
    # the very offset of an acknowledged record, its inconsistent-offsets).
    if earlier is None:
        appended[event.record_id] = (event, {(event.partition, event.offset)})
    else:
        earlier[1].add((event.partition, event.offset))


def _check_appended(
    event: Event,
    where: str,
    appended: _Appended,
    problems: _Problems,
    *,
    anywhere: bool = False,
) -> bool:
    """Whether ``event`` names a record appended before it, at one of its places (at any
    place with ``anywhere``); reports the problem if not."""
    assert event.record_id is not None
    placed = appended.get(event.record_id)
    if placed is None:
        problems.add(wording.not_appended(where, event.record_id))
        return False
    first, places = placed
    if not anywhere and (event.partition, event.offset) not in places:
        assert first.partition is not None and first.offset is not None
        problems.add(
            wording.misplaced(
                where,
                event.record_id,
                event.partition,
                event.offset,
                first.index,
                first.partition,
                first.offset,
            )
        )
        return False
    return True


def _check_sink(
    event: Event, where: str, sinks: Mapping[str, SinkKind], problems: _Problems
) -> None:
    assert event.sink is not None
    sink_kind = sinks.get(event.sink)
    if sink_kind is None:
        problems.add(wording.undeclared_sink(where, event.sink, sinks))
        return
    if event.kind is EventKind.PUT and sink_kind is not SinkKind.TABLE:
        problems.add(wording.put_into_log(where, event.sink))
    elif event.kind is EventKind.OBSERVE:
        if sink_kind is SinkKind.ENTITY and event.key is None:
            problems.add(wording.observe_table_fields(where, event.sink, event.key, event.value))
        if sink_kind is not SinkKind.TABLE:
            if event.output_id is None or event.part is None:
                problems.add(
                    wording.observe_log_fields(
                        where, event.sink, event.output_id, event.part, sink_kind.value
                    )
                )
        elif event.output_id is not None:
            problems.add(wording.observe_output_in_table(where, event.output_id, event.sink))
        elif event.key is None or event.value is None:
            problems.add(wording.observe_table_fields(where, event.sink, event.key, event.value))
