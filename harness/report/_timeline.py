"""The HTML report's timeline: lanes, marks and the overview strip, as SVG text.

Draws the events a :class:`~harness.report._window.Window` selected, one column each, in
logical-time order; events left out between two drawn ones become a hatched gap column that
says how many. Every string from the history goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Final, final

from harness.check.verdict import Anomaly, Verdict
from harness.history.events import Event, EventKind, History
from harness.report._facts import (
    anomalous_events,
    anomalous_records,
    anomalous_table_keys,
    event_line,
    is_related,
)
from harness.report._window import OVERVIEW_BINS, Window

__all__ = ["GLYPH", "Lane", "Layout", "lanes", "layout", "legend", "overview", "timeline"]

_K = EventKind

_COL: Final = 28
"""Width of one column (one event), in pixels, for up to _DENSE drawn events."""
_FEW: Final = 300
_COL_WIDE: Final = 40
"""Width of a column for up to _FEW drawn events: room for a six-character record id."""
_DENSE: Final = 1500
_COL_DENSE: Final = 10
_GAP_COLS: Final = 3
"""Columns a run of left-out events takes."""
_LANE_H: Final = 46
_AXIS_H: Final = 30
_PAD: Final = 12
_LABEL_PX: Final = 64
"""The least room between two index labels on the axis."""
MAX_PROCESS_LANES: Final = 24
"""Instances drawn in lanes of their own; the others share the lane ``other instances``."""

GLYPH: Final[dict[EventKind, str]] = {
    _K.APPEND: "+",
    _K.ACK: "A",
    _K.INDETERMINATE: "?",
    _K.TRUNCATE: "T",
    _K.START: "S",
    _K.CRASH: "X",
    _K.ROLLBACK: "B",
    _K.ZOMBIE: "Z",
    _K.ERROR: "!",
    _K.REBALANCE: "G",
    _K.FETCH: "F",
    _K.READ: "R",
    _K.EMIT: "E",
    _K.PUT: "P",
    _K.COMMIT: "C",
    _K.TXN_BEGIN: "tb",
    _K.TXN_COMMIT: "tc",
    _K.TXN_ABORT: "ta",
    _K.OBSERVE: "V",
}
"""The letter drawn in each kind's mark (``drain`` and ``end`` are vertical lines)."""

_LEGEND_TEXT: Final[dict[EventKind, str]] = {
    _K.APPEND: "append (producer writes)",
    _K.ACK: "ack (producer's commit returned)",
    _K.INDETERMINATE: "indeterminate (no answer to the send)",
    _K.TRUNCATE: "truncate (retention)",
    _K.START: "start / restart",
    _K.CRASH: "crash",
    _K.ROLLBACK: "rollback (unsynced offset lost)",
    _K.ZOMBIE: "zombie (lost ownership)",
    _K.ERROR: "error (exception)",
    _K.REBALANCE: "rebalance (partition assigned / revoked)",
    _K.FETCH: "fetch stored offset",
    _K.READ: "read",
    _K.EMIT: "emit output",
    _K.PUT: "put table value",
    _K.COMMIT: "commit offset",
    _K.TXN_BEGIN: "txn begin",
    _K.TXN_COMMIT: "txn commit",
    _K.TXN_ABORT: "txn abort",
    _K.OBSERVE: "observed in sink (after drain)",
}

_FAULTS: Final = frozenset({_K.CRASH, _K.ERROR, _K.ZOMBIE, _K.ROLLBACK, _K.TRUNCATE})
_PRODUCER: Final = frozenset({_K.APPEND, _K.ACK, _K.INDETERMINATE, _K.TRUNCATE})
_GLOBAL: Final = frozenset({_K.DRAIN, _K.END})
_OTHER: Final = "process-other"


def _e(value: object) -> str:
    return escape(str(value), quote=True)


@dataclass
class Lane:
    """One row of the timeline and the drawn events in it."""

    key: str
    name: str
    note: str = ""
    events: list[Event] = field(default_factory=list)


@final
@dataclass(frozen=True, slots=True)
class Layout:
    """Where each drawn event goes: its column, and the gaps standing for left-out events."""

    col: int
    """Width of a column in pixels."""
    column: Mapping[int, int]
    """Event index -> column."""
    columns: int
    gaps: tuple[tuple[int, int, int], ...]
    """``(column, first left-out index, how many)`` per gap."""

    def x(self, index: int) -> int:
        """The centre of ``index``'s column."""
        return _PAD + self.column[index] * self.col + self.col // 2


def layout(win: Window) -> Layout:
    """Columns for the events ``win`` shows, a gap column wherever events are left out."""
    n = len(win.shown)
    col = _COL_WIDE if n <= _FEW else _COL if n <= _DENSE else _COL_DENSE
    column: dict[int, int] = {}
    gaps: list[tuple[int, int, int]] = []
    at = 0
    expected = 0
    for index in win.shown:
        if index > expected:
            gaps.append((at, expected, index - expected))
            at += _GAP_COLS
        column[index] = at
        at += 1
        expected = index + 1
    if win.capped and expected < win.total:
        gaps.append((at, expected, win.total - expected))
        at += _GAP_COLS
    return Layout(col, column, at, tuple(gaps))


def _lane_key(event: Event, merged: frozenset[int]) -> str | None:
    if event.kind in _GLOBAL:
        return None
    if event.process is not None:
        return _OTHER if event.process in merged else f"process-{event.process}"
    if event.kind in _PRODUCER:
        return "producer"
    if event.kind is _K.ROLLBACK:
        return "offsets"
    if event.kind is _K.OBSERVE:
        return f"sink-{event.sink}"
    return "other"


def _process_note(events: list[Event]) -> str:
    notes = []
    for event in events:
        if event.kind is _K.START:
            notes.append(f"start #{event.index}")
        elif event.kind is _K.ZOMBIE:
            notes.append(f"zombie #{event.index}")
        elif event.kind is _K.CRASH:
            notes.append(f"{event.detail or ''} crash #{event.index}".strip())
        elif event.kind is _K.ERROR:
            notes.append(f"error #{event.index}")
    return ", ".join(notes[:6]) + (f", ... ({len(notes) - 6} more)" if len(notes) > 6 else "")


def _merged(shown: list[Event], bad: Iterable[int], history: History) -> frozenset[int]:
    """The instances that share one lane: all but the first MAX_PROCESS_LANES (those with
    witness events first)."""
    order = list(dict.fromkeys(e.process for e in shown if e.process is not None))
    if len(order) <= MAX_PROCESS_LANES:
        return frozenset()
    events = history.events
    witnesses = {events[i].process for i in bad if 0 <= i < len(events)}
    ranked = [p for p in order if p in witnesses] + [p for p in order if p not in witnesses]
    return frozenset(ranked[MAX_PROCESS_LANES:])


def _order(lane: Lane) -> tuple[int, int, str]:
    if lane.key == "producer":
        return (0, 0, "")
    if lane.key == _OTHER:
        return (2, 0, "")
    if lane.key.startswith("process-"):
        return (1, lane.events[0].process or 0, "")
    if lane.key == "offsets":
        return (3, 0, "")
    if lane.key.startswith("sink-"):
        return (4, 0, lane.key)
    return (5, 0, "")


def lanes(
    history: History, win: Window, verdict: Verdict, kinds: Mapping[str, int]
) -> tuple[list[Lane], frozenset[int]]:
    """The lanes of the drawn events, in display order, and the instances merged into the
    lane ``other instances``. ``kinds`` counts every event kind in the whole history."""
    shown = [history.events[i] for i in win.shown]
    merged = _merged(shown, anomalous_events(verdict.anomalies), history)
    by_key: dict[str, Lane] = {}
    for event in shown:
        key = _lane_key(event, merged)
        if key is None:
            continue
        lane = by_key.get(key)
        if lane is None:
            if key == _OTHER:
                name = "other instances"
            elif key.startswith("process-"):
                name = f"process {event.process}"
            elif key.startswith("sink-"):
                name = f"sink {event.sink}"
            else:
                name = {"producer": "producer", "offsets": "offset store"}.get(key, "other")
            lane = by_key[key] = Lane(key, name)
        lane.events.append(event)
    ordered = sorted(by_key.values(), key=_order)
    for lane in ordered:
        if lane.key == _OTHER:
            lane.note = f"{len(merged)} more instances"
        elif lane.key.startswith("process-"):
            lane.note = _process_note(lane.events)
        elif lane.key == "producer":
            lane.note = f"{kinds.get('append', 0)} appended, {kinds.get('ack', 0)} acked"
        elif lane.key.startswith("sink-"):
            lane.note = "contents after the drain"
    return ordered, merged


def _kinds_by_event(anomalies: Iterable[Anomaly]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for anomaly in anomalies:
        for witness in anomaly.witnesses:
            for index in witness.events:
                kinds = found.setdefault(index, [])
                if anomaly.kind.value not in kinds:
                    kinds.append(anomaly.kind.value)
    return found


def _shape(kind: EventKind, x: int, y: int, size: int) -> str:
    h = size // 2
    if kind in _FAULTS:
        h += 2
        points = f"{x},{y - h} {x + h},{y} {x},{y + h} {x - h},{y}"
        return f'<polygon class="shape" points="{points}"/>'
    if kind in (_K.APPEND, _K.ACK, _K.INDETERMINATE):
        return f'<circle class="shape" cx="{x}" cy="{y}" r="{h}"/>'
    return f'<rect class="shape" x="{x - h}" y="{y - h}" width="{size}" height="{size}" rx="4"/>'


def _sub_label(event: Event) -> str | None:
    if event.kind in (_K.PUT,) or (event.kind is _K.OBSERVE and event.record_id is None):
        return None if event.key is None else event.key
    return event.record_id


def _fit(text: str, room: int) -> str:
    # the end of a record id ("r25000") tells records apart better than its start
    return text if len(text) <= room else "\u2026" + text[-(room - 1) :]


@final
@dataclass(frozen=True, slots=True)
class _Marks:
    """What the marks need to know about the verdict."""

    bad: dict[int, list[str]]
    tolerated: dict[int, list[str]]
    records: frozenset[str]
    table_keys: frozenset[tuple[str, str]]


def _mark(event: Event, x: int, y: int, size: int, marks: _Marks, label: int) -> str:
    classes = ["mark", f"k-{event.kind.value}"]
    why = marks.bad.get(event.index, []) + [
        f"tolerated {k}" for k in marks.tolerated.get(event.index, [])
    ]
    if event.index in marks.bad:
        classes.append("anomalous")
    elif event.index in marks.tolerated or is_related(event, marks.records, marks.table_keys):
        classes.append("related")
    if event.kind is _K.READ and event.detail == "redelivered":
        classes.append("redelivered")
    tip = event_line(event) + (f"  [witness of: {', '.join(why)}]" if why else "")
    attrs = [
        f'class="{" ".join(classes)}"',
        f'id="ev-{event.index}"',
        f'data-index="{event.index}"',
        f'data-kind="{event.kind.value}"',
        f'data-x="{x}"',
        'tabindex="0"',
    ]
    if event.process is not None:
        attrs.append(f'data-process="{event.process}"')
    if event.record_id is not None:
        attrs.append(f'data-record="{_e(event.record_id)}"')
    if why:
        attrs.append(f'data-anomalies="{_e(", ".join(why))}"')
    parts = [f"<g {' '.join(attrs)}><title>{_e(tip)}</title>", _shape(event.kind, x, y, size)]
    if size >= 16:
        parts.append(f'<text x="{x}" y="{y + 4}" text-anchor="middle">{GLYPH[event.kind]}</text>')
        sub = _sub_label(event)
        if sub is not None and label >= 3:
            parts.append(
                f'<text class="sub" x="{x}" y="{y + 24}" text-anchor="middle">'
                f"{_e(_fit(sub, label))}</text>"
            )
    parts.append("</g>")
    return "".join(parts)


def _axis(win: Window, lay: Layout, height: int) -> list[str]:
    out = []
    step = 1 if win.total <= 30 else 5 if win.total <= 300 else 10 if win.total <= _DENSE else 100
    room = max(1, -(-_LABEL_PX // lay.col))  # columns between two labels, rounded up
    starts = {first for first, _ in win.segments()}
    last = -room
    for index in win.shown:
        column = lay.column[index]
        if (index % step == 0 or index in starts) and column - last >= room:
            x = lay.x(index)
            out.append(f'<text class="tick" x="{x}" y="22" text-anchor="middle">{index}</text>')
            last = column
    for column, first, count in lay.gaps:
        x = _PAD + column * lay.col
        w = _GAP_COLS * lay.col
        mid = x + w // 2
        out.append(
            f'<g class="gap" data-first="{first}" data-count="{count}">'
            f"<title>{count:,} events (#{first} to #{first + count - 1}) are not drawn</title>"
            f'<rect x="{x}" y="0" width="{w}" height="{height}"/>'
            f'<text x="{mid}" y="{_AXIS_H + 8}" transform="rotate(90 {mid} {_AXIS_H + 8})">'
            f"{count:,} events not drawn</text></g>"
        )
    return out


def timeline(
    history: History,
    verdict: Verdict,
    win: Window,
    lanes_: list[Lane],
    merged: frozenset[int],
) -> str:
    """The timeline's SVG: lanes, gaps, witness bands, lifelines and one mark per drawn
    event (``merged`` instances share the lane ``other instances``)."""
    lay = layout(win)
    events = history.events
    width = 2 * _PAD + max(lay.columns, 1) * lay.col
    height = _AXIS_H + len(lanes_) * _LANE_H
    lane_of = {lane.key: i for i, lane in enumerate(lanes_)}
    marks = _Marks(
        _kinds_by_event(verdict.anomalies),
        _kinds_by_event(verdict.tolerated),
        anomalous_records(verdict.anomalies),
        anomalous_table_keys(history, verdict.anomalies),
    )

    def cy(lane: int) -> int:
        return _AXIS_H + lane * _LANE_H + _LANE_H // 2 - 5

    out = [
        f'<svg class="lanes" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="timeline">'
    ]
    for i, lane in enumerate(lanes_):
        top = _AXIS_H + i * _LANE_H
        odd = " odd" if i % 2 else ""
        out.append(
            f'<rect class="lane-bg{odd}" data-lane="{_e(lane.key)}" x="0" y="{top}" '
            f'width="{width}" height="{_LANE_H}"/>'
            f'<line class="lane-sep" x1="0" y1="{top}" x2="{width}" y2="{top}"/>'
        )
    shown = [events[i] for i in lay.column]
    drain = next((e.index for e in shown if e.kind is _K.DRAIN), None)
    if drain is not None:
        x = lay.x(drain) - lay.col // 2
        out.append(
            f'<rect class="drain-bg" x="{x}" y="{_AXIS_H}" width="{width - x}" '
            f'height="{height - _AXIS_H}"/>'
        )
    for index in sorted(marks.bad):
        if index in lay.column:
            x = lay.x(index) - lay.col // 2
            c = lay.col
            out.append(
                f'<rect class="band" x="{x}" y="0" width="{c}" height="{height}"/>'
                f'<polygon class="band-flag" points="{x + 2},1 {x + c - 2},1 {x + c // 2},9"/>'
            )
    out.extend(_axis(win, lay, height))
    for event in shown:
        if event.kind in _GLOBAL:
            x = lay.x(event.index)
            label = "drain" if event.kind is _K.DRAIN else "end"
            out.append(
                f'<line class="vline" x1="{x}" y1="{_AXIS_H - 4}" x2="{x}" y2="{height}"/>'
                f'<text class="vline-label" x="{x + 3}" y="{_AXIS_H + 10}">{label}</text>'
            )
    out.extend(_lifelines(lanes_, lay, width, cy))
    size = min(22, lay.col - 4)
    room = (lay.col - 2) // 6  # characters of a record id that fit under its mark
    for event in shown:
        key = _lane_key(event, merged)
        if key is not None:
            out.append(_mark(event, lay.x(event.index), cy(lane_of[key]), size, marks, room))
    out.append("</svg>")
    return "".join(out)


def _lifelines(lanes_: list[Lane], lay: Layout, width: int, cy: Callable[[int], int]) -> list[str]:
    out = []
    for i, lane in enumerate(lanes_):
        if not lane.key.startswith("process-") or lane.key == _OTHER:
            continue
        x1 = lay.x(lane.events[0].index)
        died = any(e.kind in (_K.CRASH, _K.ERROR) for e in lane.events)
        x2 = lay.x(lane.events[-1].index) if died else width - _PAD
        zombie = next((e.index for e in lane.events if e.kind is _K.ZOMBIE), None)
        y = cy(i)
        split = x2 if zombie is None else lay.x(zombie)
        out.append(f'<line class="life" x1="{x1}" y1="{y}" x2="{split}" y2="{y}"/>')
        if zombie is not None:
            out.append(f'<line class="life zombie" x1="{split}" y1="{y}" x2="{x2}" y2="{y}"/>')
    return out


def overview(win: Window, verdict: Verdict, drain: int | None) -> str:
    """A strip standing for the whole run: where the drawn stretches, the starts, the faults
    and the witnesses are, and the drain. Clicking it shows the nearest drawn event."""
    total = max(win.total, 1)

    def at(index: int) -> float:
        return round(index * OVERVIEW_BINS / total, 2)

    out = [
        f'<svg id="overview" class="overview" data-total="{win.total}" width="100%" '
        f'height="40" viewBox="0 0 {OVERVIEW_BINS} 40" preserveAspectRatio="none" '
        'role="img" aria-label="overview of the whole run">'
        f'<rect class="ov-bg" x="0" y="0" width="{OVERVIEW_BINS}" height="40"/>'
    ]
    for first, last in win.segments():
        w = max(at(last + 1) - at(first), 1.5)
        out.append(f'<rect class="ov-shown" x="{at(first)}" y="0" width="{w}" height="40"/>')
    for column in sorted(win.start_bins):
        out.append(f'<rect class="ov-start" x="{column}" y="22" width="1" height="14"/>')
    for column in sorted(win.fault_bins):
        out.append(f'<rect class="ov-fault" x="{column}" y="14" width="1" height="22"/>')
    if drain is not None:
        out.append(f'<rect class="ov-drain" x="{at(drain)}" y="0" width="1.5" height="40"/>')
    for index in sorted(anomalous_events(verdict.anomalies)):
        if 0 <= index < win.total:
            out.append(f'<rect class="ov-bad" x="{at(index)}" y="0" width="2" height="40"/>')
    out.append("</svg>")
    return "".join(out)


def legend(kinds: Iterable[EventKind], redelivered: bool, gaps: bool) -> str:
    """The legend above the timeline: a sample mark per kind drawn, and the other glyphs."""
    items = []
    for kind in kinds:
        shape = _shape(kind, 11, 11, 18)
        items.append(
            f'<span><svg width="22" height="22"><g class="mark k-{kind.value}">{shape}'
            f'<text x="11" y="15" text-anchor="middle">{GLYPH[kind]}</text></g></svg>'
            f"{_e(_LEGEND_TEXT[kind])}</span>"
        )
    if redelivered:
        items.append(
            '<span><svg width="22" height="22"><g class="mark k-read redelivered">'
            f'{_shape(_K.READ, 11, 11, 18)}<text x="11" y="15" text-anchor="middle">R</text>'
            "</g></svg>read again (redelivered)</span>"
        )
    items.append(
        '<span><svg width="22" height="22"><g class="mark anomalous k-read">'
        f"{_shape(_K.READ, 11, 11, 18)}</g></svg><b>anomaly witness</b></span>"
        '<span><svg width="22" height="22"><g class="mark related k-read">'
        f"{_shape(_K.READ, 11, 11, 18)}</g></svg>same record as a witness</span>"
        '<span><svg width="30" height="22"><line class="life" x1="2" y1="11" x2="28" y2="11"/>'
        "</svg>instance alive</span>"
        '<span><svg width="30" height="22"><line class="life zombie" x1="2" y1="11" x2="28" '
        'y2="11"/></svg>zombie</span>'
        '<span><svg width="14" height="22"><line class="vline" x1="7" y1="0" x2="7" y2="22"/>'
        "</svg>drain / end</span>"
    )
    if gaps:
        items.append(
            '<span><svg width="22" height="22"><g class="gap"><rect x="2" y="0" width="18" '
            'height="22"/></g></svg>events not drawn</span>'
        )
    return f'<div class="legend" id="legend">{"".join(items)}</div>'
