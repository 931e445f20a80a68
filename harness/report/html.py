"""The HTML report: one self-contained page with a timeline of the run.

One lane per processor instance (and one for the producer, the offset store and each sink)
in logical time, a mark per event, the anomalies' witnesses in red, the anomaly panel, the
schedule, the replay command and every event in a table. Everything is inline: the page
loads nothing, needs no server, and its Content-Security-Policy only allows its own style
and script (by hash), so even a payload that escaped the escaping could not run.

Escaping rules: every string from a history, a verdict or an argument goes through
:func:`html.escape` (``quote=True``) before it reaches the page; the data the script reads
is JSON in a ``<script type="application/json">`` element with ``<``, ``>``, ``&`` and the
two JavaScript line separators written as ``\\uXXXX``, so ``</script>`` in a payload stays
text. The script builds elements with ``textContent`` only.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import Any, Final

from harness.check.verdict import Anomaly, Verdict
from harness.history.events import EVENT_FIELDS, Event, EventKind, History
from harness.report._facts import (
    ReportFacts,
    anomalous_events,
    anomalous_records,
    anomalous_table_keys,
    as_facts,
    clip,
    event_line,
    headline,
    is_related,
)
from harness.report.json_report import facts_json
from harness.report.subject import Reported

__all__ = ["render_html"]

_K = EventKind

_COL: Final = 28
"""Width of one unit of logical time (one event), in pixels, for histories up to _DENSE."""
_FEW: Final = 40
_COL_WIDE: Final = 34
_DENSE: Final = 1500
_COL_DENSE: Final = 10
_LANE_H: Final = 46
_AXIS_H: Final = 30
_PAD: Final = 12

_GLYPH: Final[dict[EventKind, str]] = {
    _K.APPEND: "+",
    _K.ACK: "A",
    _K.TRUNCATE: "T",
    _K.START: "S",
    _K.CRASH: "X",
    _K.ROLLBACK: "B",
    _K.ZOMBIE: "Z",
    _K.ERROR: "!",
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
    _K.TRUNCATE: "truncate (retention)",
    _K.START: "start / restart",
    _K.CRASH: "crash",
    _K.ROLLBACK: "rollback (unsynced offset lost)",
    _K.ZOMBIE: "zombie (lost ownership)",
    _K.ERROR: "error (exception)",
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
_PRODUCER: Final = frozenset({_K.APPEND, _K.ACK, _K.TRUNCATE})
_GLOBAL: Final = frozenset({_K.DRAIN, _K.END})

_STYLE: Final = """
:root{--red:#dc2626;--red-dark:#7f1d1d;--red-soft:#fee2e2;--ink:#111827;--muted:#6b7280;
--line:#e5e7eb;--bg:#f9fafb}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;
color:var(--ink);background:#fff}
header{padding:16px 24px;border-bottom:6px solid var(--muted);display:flex;gap:20px;
align-items:center;flex-wrap:wrap}
header.status-invalid{border-color:var(--red);background:var(--red-soft)}
header.status-valid{border-color:#16a34a;background:#dcfce7}
header.status-unknown{border-color:#d97706;background:#fef3c7}
.badge{font-weight:800;font-size:26px;letter-spacing:.04em;color:#fff;padding:6px 16px;
border-radius:8px;background:var(--muted)}
.status-invalid .badge{background:var(--red)}
.status-valid .badge{background:#16a34a}
.status-unknown .badge{background:#d97706}
h1{font-size:20px;margin:0;word-break:break-all}
h2{font-size:16px;margin:0 0 8px}
h3{font-size:15px;margin:0 0 6px}
.headline{margin:2px 0 0;font-weight:600}
.facts{display:flex;flex-wrap:wrap;gap:4px 18px;margin:6px 0 0;color:#374151}
.facts div{display:flex;gap:6px}
.facts dt{color:var(--muted)}
.facts dd{margin:0;font-family:ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
main{padding:12px 24px 40px;display:grid;grid-template-columns:minmax(0,1fr);gap:14px}
.panel{border:1px solid var(--line);border-radius:8px;padding:12px 14px;background:#fff}
#anomalies{border:2px solid var(--red)}
#processor-errors{border:2px solid #d97706}
#anomalies.none{border-color:var(--line)}
#anomalies h2{color:var(--red)}
#anomalies.none h2{color:var(--ink)}
.anomaly{margin:8px 0 12px}
.anomaly .kind{color:#fff;background:var(--red);padding:1px 8px;border-radius:4px;
font-family:ui-monospace,"DejaVu Sans Mono",monospace}
.anomaly.tolerated .kind{background:#d97706}
.witnesses{margin:4px 0 0;padding-left:22px}
.witness{padding:4px 6px;border-radius:6px;cursor:pointer}
.witness:hover,.witness.focus{background:var(--red-soft)}
.witness .detail{margin:0}
.witness ul{margin:2px 0 0;padding-left:18px;font-family:ui-monospace,"DejaVu Sans Mono",
monospace;font-size:12.5px}
.witness a{color:var(--red-dark)}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
code.record{background:var(--red-soft);color:var(--red-dark);padding:0 4px;border-radius:3px}
.timeline{display:flex;border:1px solid var(--line);border-radius:6px;overflow:hidden}
.lane-labels{flex:none;width:170px;border-right:1px solid var(--line);background:var(--bg)}
.lane-labels .axis-label{height:30px;padding:6px 8px;color:var(--muted);font-size:12px}
.lane-label{height:46px;padding:4px 8px;border-top:1px solid var(--line);overflow:hidden;
white-space:nowrap;text-overflow:ellipsis}
.lane-label b{display:block;font-size:13px}
.lane-label small{color:var(--muted);font-size:11px}
.lane-label.has-anomaly b{color:var(--red)}
.scroller{overflow-x:auto;flex:1;min-width:0}
svg.lanes{display:block}
.lane-bg{fill:#fff}
.lane-bg.odd{fill:var(--bg)}
.lane-sep{stroke:var(--line)}
.drain-bg{fill:#eef2ff;opacity:.6}
.tick{fill:var(--muted);font-size:10px}
.vline{stroke:#4338ca;stroke-width:1.5;stroke-dasharray:4 3}
.vline-label{fill:#4338ca;font-size:10px;font-weight:700}
.band{fill:var(--red);opacity:.16}
.band-flag{fill:var(--red)}
.life{stroke:#9ca3af;stroke-width:2}
.life.zombie{stroke:#d97706;stroke-dasharray:5 3;stroke-width:2.5}
.mark{cursor:pointer}
.mark .shape{stroke:#fff;stroke-width:1.5}
.mark text{fill:#fff;font:700 11px ui-monospace,"DejaVu Sans Mono",monospace;
pointer-events:none}
.mark text.sub{fill:#374151;font:10px ui-monospace,"DejaVu Sans Mono",monospace}
.k-start .shape{fill:#4b5563}
.k-crash .shape,.k-error .shape,.k-rollback .shape,.k-truncate .shape{fill:#111827}
.k-zombie .shape{fill:#d97706}
.k-fetch .shape,.k-read .shape{fill:#2563eb}
.k-read.redelivered .shape{fill:#7c3aed}
.k-emit .shape,.k-put .shape,.k-observe .shape{fill:#059669}
.k-commit .shape{fill:#9333ea}
.k-txn-begin .shape,.k-txn-commit .shape,.k-txn-abort .shape{fill:#0891b2}
.k-append .shape,.k-ack .shape{fill:#64748b}
.mark.related .shape{stroke:var(--red);stroke-width:3}
.mark.related text.sub{fill:var(--red-dark);font-weight:700}
.mark.anomalous .shape{fill:var(--red);stroke:var(--red-dark);stroke-width:3}
.mark.anomalous text.sub{fill:var(--red);font-weight:700}
.mark.selected .shape{stroke:#facc15;stroke-width:4}
.mark.dim{opacity:.25}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin:0 0 10px;font-size:12px;
color:#374151}
.legend span{display:inline-flex;align-items:center;gap:5px}
.legend svg{display:block}
#event-detail table{border-collapse:collapse}
#event-detail td{padding:1px 10px 1px 0;vertical-align:top;word-break:break-all}
#event-detail td:first-child{color:var(--muted)}
pre{margin:0;white-space:pre-wrap;word-break:break-all;background:var(--bg);padding:8px;
border-radius:6px;font-size:12.5px}
table.events{border-collapse:collapse;font-size:12px;margin-top:8px}
table.events th,table.events td{border-bottom:1px solid var(--line);padding:2px 8px;
text-align:left;font-family:ui-monospace,"DejaVu Sans Mono",monospace;max-width:320px;
word-break:break-all}
table.events tr.anomalous td{background:#fecaca;color:var(--red-dark);font-weight:700}
table.events tr.related td{background:var(--red-soft)}
.muted{color:var(--muted)}
"""

_SCRIPT: Final = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var history = data.history || {};
  var rows = {};
  (history.events || history.witness_events || []).forEach(function (row) {
    rows[row.index] = row;
  });
  var body = document.getElementById("event-detail-body");
  var marks = Array.prototype.slice.call(document.querySelectorAll("svg.lanes .mark"));
  function show(mark) {
    marks.forEach(function (m) { m.classList.remove("selected"); });
    mark.classList.add("selected");
    var row = rows[mark.getAttribute("data-index")];
    var table = document.createElement("table");
    var fields = row ? Object.keys(row) : ["index"];
    fields.forEach(function (name) {
      var value = row ? row[name] : mark.getAttribute("data-index");
      if (value === null) { return; }
      var tr = document.createElement("tr");
      var k = document.createElement("td");
      var v = document.createElement("td");
      k.textContent = name;
      v.textContent = String(value);
      tr.appendChild(k);
      tr.appendChild(v);
      table.appendChild(tr);
    });
    var why = mark.getAttribute("data-anomalies");
    if (why) {
      var p = document.createElement("p");
      p.className = "anomaly-note";
      p.textContent = "witness of: " + why;
      body.replaceChildren(p, table);
    } else {
      body.replaceChildren(table);
    }
  }
  marks.forEach(function (mark) {
    mark.addEventListener("click", function () { show(mark); });
  });
  var witnesses = Array.prototype.slice.call(document.querySelectorAll(".witness"));
  function focus(item) {
    var group = item.getAttribute("data-group");
    var a = data.verdict[group][Number(item.getAttribute("data-anomaly"))];
    var w = a.witnesses[Number(item.getAttribute("data-witness"))];
    var events = {};
    w.events.forEach(function (i) { events[i] = true; });
    var records = {};
    w.record_ids.forEach(function (r) { records[r] = true; });
    var first = null;
    marks.forEach(function (m) {
      var hit = events[m.getAttribute("data-index")] ||
        (m.hasAttribute("data-record") && records[m.getAttribute("data-record")]);
      m.classList.toggle("dim", !hit);
      if (hit && first === null) { first = m; }
    });
    witnesses.forEach(function (o) { o.classList.toggle("focus", o === item); });
    if (first !== null) { first.scrollIntoView({block: "nearest", inline: "center"}); }
  }
  witnesses.forEach(function (item) {
    item.addEventListener("click", function (event) {
      if (event.target.tagName === "A") { return; }
      if (item.classList.contains("focus")) {
        item.classList.remove("focus");
        marks.forEach(function (m) { m.classList.remove("dim"); });
      } else {
        focus(item);
      }
    });
  });
  var firstBad = document.querySelector("svg.lanes .mark.anomalous");
  if (firstBad !== null) {
    var scroller = document.querySelector(".scroller");
    var x = Number(firstBad.getAttribute("data-x"));
    scroller.scrollLeft = Math.max(0, x - scroller.clientWidth / 3);
    show(firstBad);
  }
  document.documentElement.setAttribute("data-ready", "true");
})();
"""


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


_CSP: Final = (
    f"default-src 'none'; style-src {_csp_hash(_STYLE)}; script-src {_csp_hash(_SCRIPT)}; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&``
    (they only occur inside strings, so ``\\u003c``-style escapes keep the meaning) and no
    U+2028/U+2029."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, code in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(char, code)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@dataclass
class _Lane:
    key: str
    name: str
    note: str = ""
    events: list[Event] = field(default_factory=list)


def _lane_key(event: Event) -> str | None:
    if event.kind in _GLOBAL:
        return None
    if event.process is not None:
        return f"process-{event.process}"
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
    return ", ".join(notes)


def _lanes(history: History) -> list[_Lane]:
    by_key: dict[str, _Lane] = {}
    for event in history.events:
        key = _lane_key(event)
        if key is None:
            continue
        lane = by_key.get(key)
        if lane is None:
            if key.startswith("process-"):
                name = f"process {event.process}"
            elif key.startswith("sink-"):
                name = f"sink {event.sink}"
            else:
                name = {"producer": "producer", "offsets": "offset store"}.get(key, "other")
            lane = by_key[key] = _Lane(key, name)
        lane.events.append(event)

    def order(lane: _Lane) -> tuple[int, int, str]:
        if lane.key == "producer":
            return (0, 0, "")
        if lane.key.startswith("process-"):
            return (1, lane.events[0].process or 0, "")
        if lane.key == "offsets":
            return (2, 0, "")
        if lane.key.startswith("sink-"):
            return (3, 0, lane.key)
        return (4, 0, "")

    lanes = sorted(by_key.values(), key=order)
    for lane in lanes:
        if lane.key.startswith("process-"):
            lane.note = _process_note(lane.events)
        elif lane.key == "producer":
            acked = sum(1 for event in lane.events if event.kind is _K.ACK)
            appended = sum(1 for event in lane.events if event.kind is _K.APPEND)
            lane.note = f"{appended} appended, {acked} acked"
        elif lane.key.startswith("sink-"):
            lane.note = "contents after the drain"
    return lanes


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
    if kind in (_K.APPEND, _K.ACK):
        return f'<circle class="shape" cx="{x}" cy="{y}" r="{h}"/>'
    return f'<rect class="shape" x="{x - h}" y="{y - h}" width="{size}" height="{size}" rx="4"/>'


def _sub_label(event: Event) -> str | None:
    if event.kind in (_K.PUT,) or (event.kind is _K.OBSERVE and event.record_id is None):
        return None if event.key is None else event.key
    return event.record_id


def _svg(history: History, lanes: list[_Lane], verdict: Verdict) -> str:
    n = len(history.events)
    col = _COL_WIDE if n <= _FEW else _COL if n <= _DENSE else _COL_DENSE
    letters = col >= 20
    width = 2 * _PAD + max(n, 1) * col
    height = _AXIS_H + len(lanes) * _LANE_H
    lane_of = {lane.key: i for i, lane in enumerate(lanes)}
    bad = _kinds_by_event(verdict.anomalies)
    tolerated = _kinds_by_event(verdict.tolerated)
    records = anomalous_records(verdict.anomalies)
    table_keys = anomalous_table_keys(history, verdict.anomalies)

    def cx(index: int) -> int:
        return _PAD + index * col + col // 2

    def cy(lane: int) -> int:
        return _AXIS_H + lane * _LANE_H + _LANE_H // 2 - 5

    out = [
        f'<svg class="lanes" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="timeline">'
    ]
    for i, lane in enumerate(lanes):
        top = _AXIS_H + i * _LANE_H
        odd = " odd" if i % 2 else ""
        out.append(
            f'<rect class="lane-bg{odd}" data-lane="{_e(lane.key)}" x="0" y="{top}" '
            f'width="{width}" height="{_LANE_H}"/>'
            f'<line class="lane-sep" x1="0" y1="{top}" x2="{width}" y2="{top}"/>'
        )
    drain = next((e.index for e in history.events if e.kind is _K.DRAIN), None)
    if drain is not None:
        x = _PAD + drain * col
        out.append(
            f'<rect class="drain-bg" x="{x}" y="{_AXIS_H}" width="{width - x}" '
            f'height="{height - _AXIS_H}"/>'
        )
    for index in sorted(bad):
        if 0 <= index < n:
            x = _PAD + index * col
            out.append(
                f'<rect class="band" x="{x}" y="0" width="{col}" height="{height}"/>'
                f'<polygon class="band-flag" points="{x + 2},1 {x + col - 2},1 '
                f'{x + col // 2},9"/>'
            )
    step = 1 if n <= 30 else 5 if n <= 300 else 10 if n <= _DENSE else 100
    for index in range(0, n, step):
        out.append(f'<text class="tick" x="{cx(index)}" y="22" text-anchor="middle">{index}</text>')
    for event in history.events:
        if event.kind in _GLOBAL:
            x = cx(event.index)
            label = "drain" if event.kind is _K.DRAIN else "end"
            out.append(
                f'<line class="vline" x1="{x}" y1="{_AXIS_H - 4}" x2="{x}" y2="{height}"/>'
                f'<text class="vline-label" x="{x + 3}" y="{_AXIS_H + 10}">{label}</text>'
            )
    for i, lane in enumerate(lanes):
        if not lane.key.startswith("process-"):
            continue
        first, last = lane.events[0].index, lane.events[-1].index
        died = any(e.kind in (_K.CRASH, _K.ERROR) for e in lane.events)
        if not died:
            last = n - 1
        zombie = next((e.index for e in lane.events if e.kind is _K.ZOMBIE), None)
        y = cy(i)
        split = last if zombie is None else zombie
        out.append(f'<line class="life" x1="{cx(first)}" y1="{y}" x2="{cx(split)}" y2="{y}"/>')
        if zombie is not None:
            out.append(
                f'<line class="life zombie" x1="{cx(zombie)}" y1="{y}" x2="{cx(last)}" y2="{y}"/>'
            )
    size = min(22, col - 4)
    for event in history.events:
        key = _lane_key(event)
        if key is None:
            continue
        x, y = cx(event.index), cy(lane_of[key])
        classes = ["mark", f"k-{event.kind.value}"]
        why = bad.get(event.index, []) + [f"tolerated {k}" for k in tolerated.get(event.index, [])]
        if event.index in bad:
            classes.append("anomalous")
        elif event.index in tolerated or is_related(event, records, table_keys):
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
        if letters:
            parts.append(
                f'<text x="{x}" y="{y + 4}" text-anchor="middle">{_GLYPH[event.kind]}</text>'
            )
            sub = _sub_label(event)
            if sub is not None:
                parts.append(
                    f'<text class="sub" x="{x}" y="{y + 24}" text-anchor="middle">'
                    f"{_e(clip(sub, 6))}</text>"
                )
        parts.append("</g>")
        out.append("".join(parts))
    out.append("</svg>")
    return "".join(out)


def _legend(kinds: Iterable[EventKind], redelivered: bool) -> str:
    items = []
    for kind in kinds:
        shape = _shape(kind, 11, 11, 18)
        items.append(
            f'<span><svg width="22" height="22"><g class="mark k-{kind.value}">{shape}'
            f'<text x="11" y="15" text-anchor="middle">{_GLYPH[kind]}</text></g></svg>'
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
    return f'<div class="legend" id="legend">{"".join(items)}</div>'


def _anomaly_html(
    group: str, position: int, anomaly: Anomaly, history: History | None, tolerated: bool
) -> str:
    shown = len(anomaly.witnesses)
    more = f" (showing {shown})" if shown < anomaly.count else ""
    cls = "anomaly tolerated" if tolerated else "anomaly"
    out = [
        f'<article class="{cls}" data-kind="{anomaly.kind.value}">'
        f'<h3><span class="kind">{anomaly.kind.value}</span> &times;{anomaly.count}{more}</h3>'
        '<ol class="witnesses">'
    ]
    for w, witness in enumerate(anomaly.witnesses):
        records = " ".join(f'<code class="record">{_e(r)}</code>' for r in witness.record_ids)
        out.append(
            f'<li class="witness" data-group="{group}" data-anomaly="{position}" '
            f'data-witness="{w}" title="click to show only its events and records">'
            f"<div>records: {records or '-'}</div>"
            f'<p class="detail">{_e(witness.detail)}</p><ul>'
        )
        for index in witness.events:
            if history is not None and 0 <= index < len(history.events):
                line = event_line(history.events[index])
                out.append(f'<li><a href="#ev-{index}">{_e(line)}</a></li>')
            else:
                out.append(f"<li>#{index} (not in the history)</li>")
        out.append("</ul></li>")
    out.append("</ol></article>")
    return "".join(out)


def _errors_panel(facts: ReportFacts) -> str:
    if not facts.processor_errors:
        return ""
    out = ['<section id="processor-errors" class="panel">']
    for error in facts.processor_errors:
        head, *rest = error.lines()
        out.append(f"<h2>{_e(head.rstrip(':'))}</h2><pre>{_e(chr(10).join(rest))}</pre>")
    out.append("</section>")
    return "".join(out)


def _anomalies_panel(facts: ReportFacts) -> str:
    verdict = facts.verdict
    history = facts.history
    cls = "panel" if verdict.anomalies else "panel none"
    out = [f'<section id="anomalies" class="{cls}">']
    if verdict.anomalies:
        kinds = len(verdict.anomalies)
        total = sum(a.count for a in verdict.anomalies)
        out.append(
            f"<h2>Anomalies: {kinds} kind{'s' if kinds != 1 else ''}, {total} "
            f"occurrence{'s' if total != 1 else ''} (breaking {verdict.guarantee.value})</h2>"
        )
        out.extend(
            _anomaly_html("anomalies", i, a, history, False)
            for i, a in enumerate(verdict.anomalies)
        )
    else:
        out.append("<h2>No anomalies breaking the guarantee</h2>")
    if verdict.tolerated:
        out.append(f'<h3 class="muted">Tolerated under {verdict.guarantee.value}</h3>')
        out.extend(
            _anomaly_html("tolerated", i, a, history, True) for i, a in enumerate(verdict.tolerated)
        )
    if verdict.reasons:
        out.append('<h3>Unknown because</h3><ul id="reasons">')
        out.extend(f"<li>{_e(reason)}</li>" for reason in verdict.reasons)
        out.append("</ul>")
    if verdict.stats:
        stats = ", ".join(f"{_e(k)}&nbsp;=&nbsp;{v}" for k, v in verdict.stats.items())
        out.append(f'<p class="muted" id="stats">stats: {stats}</p>')
    out.append("</section>")
    return "".join(out)


def _events_table(history: History, verdict: Verdict) -> str:
    bad = anomalous_events(verdict.anomalies)
    records = anomalous_records(verdict.anomalies)
    table_keys = anomalous_table_keys(history, verdict.anomalies)
    head = "".join(f"<th>{name}</th>" for name in EVENT_FIELDS)
    rows = []
    for event in history.events:
        row = event.to_row()
        cls = ""
        if event.index in bad:
            cls = ' class="anomalous"'
        elif is_related(event, records, table_keys):
            cls = ' class="related"'
        cells = "".join("<td></td>" if v is None else f"<td>{_e(v)}</td>" for v in row.values())
        rows.append(f'<tr id="row-{event.index}"{cls}>{cells}</tr>')
    return (
        f'<details id="events" class="panel"><summary><b>All {len(history.events)} events'
        "</b> (witness rows in red)</summary>"
        f'<table class="events"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
        "</tbody></table></details>"
    )


def _facts_list(facts: ReportFacts) -> str:
    items = [
        ("processor", facts.processor),
        ("guarantee", facts.verdict.guarantee.value),
        ("backend", facts.backend),
        ("run", facts.run_id),
        ("seed", facts.seed),
        ("events", None if facts.history is None else len(facts.history.events)),
    ]
    return (
        '<dl class="facts">'
        + "".join(
            f"<div><dt>{name}</dt><dd>{_e(value)}</dd></div>"
            for name, value in items
            if value is not None
        )
        + "</dl>"
    )


def _page(facts: ReportFacts) -> str:
    verdict = facts.verdict
    history = facts.history
    status = verdict.status.value
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en" data-status="{status}">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{verdict.status.name}: {_e(facts.title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f'<header id="summary" class="status-{status}">',
        f'<div class="badge" id="status">{verdict.status.name}</div>',
        f'<div><h1 id="title">{_e(facts.title)}</h1>',
        f'<p class="headline">{_e(headline(facts))}</p>',
        _facts_list(facts),
        "</div></header>",
        "<main>",
        _errors_panel(facts),
        _anomalies_panel(facts),
    ]
    if history is not None:
        lanes = _lanes(history)
        bad_lanes = {
            _lane_key(history.events[i])
            for i in anomalous_events(verdict.anomalies)
            if 0 <= i < len(history.events)
        }
        labels = "".join(
            f'<div class="lane-label{" has-anomaly" if lane.key in bad_lanes else ""}" '
            f'data-lane="{_e(lane.key)}" title="{_e(lane.note)}"><b>{_e(lane.name)}</b>'
            f"<small>{_e(lane.note)}</small></div>"
            for lane in lanes
        )
        present = {event.kind for event in history.events}
        kinds = [kind for kind in _GLYPH if kind in present]
        parts += [
            '<section id="timeline" class="panel">',
            "<h2>Timeline <span class=muted>(logical time: event index; one lane per "
            "processor instance; click a mark for its event)</span></h2>",
            _legend(
                kinds,
                any(e.kind is _K.READ and e.detail == "redelivered" for e in history.events),
            ),
            '<div class="timeline"><div class="lane-labels">'
            f'<div class="axis-label">event #</div>{labels}</div>',
            f'<div class="scroller">{_svg(history, lanes, verdict)}</div></div>',
            "</section>",
            '<section id="event-detail" class="panel"><h2>Selected event</h2>'
            '<div id="event-detail-body" class="muted">Click a mark in the timeline.</div>'
            "</section>",
        ]
    if facts.schedule is not None:
        parts.append(
            f'<section id="schedule" class="panel"><h2>Schedule ({len(facts.schedule)} '
            f"steps)</h2><pre>{_e(facts.schedule.describe())}</pre></section>"
        )
    if facts.replay_command is not None or facts.seed is not None:
        parts.append('<section id="replay" class="panel"><h2>Run it again</h2>')
        if facts.replay_command is not None:
            parts.append(f'<pre id="replay-command">{_e(facts.replay_command)}</pre>')
        if facts.seed is not None:
            parts.append(f'<p>seed: <code id="seed">{facts.seed}</code></p>')
        parts.append("</section>")
    if history is not None:
        parts.append(_events_table(history, verdict))
    parts += [
        "</main>",
        '<script type="application/json" id="report-data">'
        f"{script_json(facts_json(facts, include_events=True))}</script>",
        f"<script>{_SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def render_html(facts: ReportFacts | Reported | Verdict) -> str:
    """The report as one self-contained HTML page (UTF-8 text).

    With ``history``, the page has a timeline (``<section id="timeline">``): one lane per
    processor instance plus the producer, the offset store and each sink, one mark per event
    (``<g class="mark k-<kind>" id="ev-<index>">``) in logical time, the drain and the end as
    vertical lines. Marks of witness events have the class ``anomalous`` (red), marks of
    other events of a witness's records ``related``. The anomaly panel is
    ``<section id="anomalies">``. The page loads nothing from anywhere.
    """
    return _page(as_facts(facts))
