"""The HTML report: one self-contained page with a timeline of the run.

One lane per processor instance (and one for the producer, the offset store and each sink)
in logical time, a mark per event, the anomalies' witnesses in red, the anomaly panel, the
schedule, the replay command and every event in a table. A history too large to draw
(:data:`~harness.report._window.FULL_EVENTS`) is capped: the timeline and the table show
the neighbourhood of each witness and the run's crash/restart skeleton, within a fixed
budget, under an overview strip of the whole run, and the page says what it left out; its
size does not grow with the history. Everything is inline: the page
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
from html import escape
from typing import Any, Final

from harness.check.verdict import Anomaly, Status, Verdict
from harness.history.events import EVENT_FIELDS, EventKind, History
from harness.report._facts import (
    ReportFacts,
    anomalous_events,
    anomalous_records,
    anomalous_table_keys,
    as_facts,
    event_line,
    headline,
    is_related,
    stats_of,
    stops_of,
)
from harness.report._timeline import GLYPH, legend, overview, timeline
from harness.report._timeline import lanes as timeline_lanes
from harness.report._window import Window, window
from harness.report.json_report import facts_json
from harness.report.subject import Reported

__all__ = ["render_html"]

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
.gap rect{fill:#e5e7eb;stroke:#9ca3af;stroke-dasharray:2 2}
.gap text{fill:#374151;font-size:10px}
table.events tr.gap td{background:var(--bg);color:var(--muted);font-style:italic}
svg.overview{display:block;border:1px solid var(--line);border-radius:4px;cursor:pointer;
margin-bottom:8px}
.ov-bg{fill:var(--bg)}
.ov-shown{fill:#c7d2fe}
.ov-start{fill:#6b7280}
.ov-fault{fill:#111827}
.ov-drain{fill:#4338ca}
.ov-bad{fill:var(--red)}
.notice{background:#fef3c7;border:1px solid #d97706;border-radius:6px;padding:6px 10px}
"""

_SCRIPT: Final = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var history = data.history || {};
  var rows = {};
  var drawn = document.getElementById("report-events");
  var list = history.events || (drawn ? JSON.parse(drawn.textContent) : null) ||
    history.witness_events || [];
  list.forEach(function (row) { rows[row.index] = row; });
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
  var overview = document.getElementById("overview");
  if (overview !== null) {
    overview.addEventListener("click", function (event) {
      var box = overview.getBoundingClientRect();
      var at = (event.clientX - box.left) / box.width *
        Number(overview.getAttribute("data-total"));
      var best = null;
      var distance = Infinity;
      marks.forEach(function (m) {
        var d = Math.abs(Number(m.getAttribute("data-index")) - at);
        if (d < distance) { distance = d; best = m; }
      });
      if (best !== null) {
        best.scrollIntoView({block: "nearest", inline: "center"});
        show(best);
      }
    });
  }
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


def _anomaly_html(
    group: str, position: int, anomaly: Anomaly, history: History | None, tolerated: bool
) -> str:
    shown = len(anomaly.witnesses)
    more = f" (showing {shown} of {anomaly.count})" if shown < anomaly.count else ""
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
        heading = "Unknown because" if verdict.status is Status.UNKNOWN else "Also found"
        out.append(f'<h3>{heading}</h3><ul id="reasons">')
        out.extend(f"<li>{_e(reason)}</li>" for reason in verdict.reasons)
        out.append("</ul>")
    if verdict.stats:
        stats = ", ".join(f"{_e(k)}&nbsp;=&nbsp;{v}" for k, v in verdict.stats.items())
        out.append(f'<p class="muted" id="stats">stats: {stats}</p>')
    out.append("</section>")
    return "".join(out)


def _events_table(history: History, verdict: Verdict, win: Window) -> str:
    bad = anomalous_events(verdict.anomalies)
    records = anomalous_records(verdict.anomalies)
    table_keys = anomalous_table_keys(history, verdict.anomalies)
    head = "".join(f"<th>{name}</th>" for name in EVENT_FIELDS)
    rows = []
    expected = 0
    for index in win.shown:
        if index > expected:
            rows.append(_gap_row(expected, index - expected))
        event = history.events[index]
        cls = ""
        if event.index in bad:
            cls = ' class="anomalous"'
        elif is_related(event, records, table_keys):
            cls = ' class="related"'
        cells = "".join(
            "<td></td>" if v is None else f"<td>{_e(v)}</td>" for v in event.to_row().values()
        )
        rows.append(f'<tr id="row-{event.index}"{cls}>{cells}</tr>')
        expected = index + 1
    if expected < win.total:
        rows.append(_gap_row(expected, win.total - expected))
    what = (
        f"All {win.total} events" if not win.capped else f"{len(win.shown)} of {win.total:,} events"
    )
    return (
        f'<details id="events" class="panel"><summary><b>{what}</b> (witness rows in red)'
        f'</summary><table class="events"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
        "</tbody></table></details>"
    )


def _gap_row(first: int, count: int) -> str:
    return (
        f'<tr class="gap"><td colspan="{len(EVENT_FIELDS)}">{count:,} events not shown '
        f"(#{first} to #{first + count - 1})</td></tr>"
    )


def _capped_note(win: Window) -> str:
    return (
        f'<p id="capped" class="notice">This history has {win.total:,} events, more than '
        f"a page can draw: the timeline and the table show {len(win.shown):,} of them, the "
        f"{win.radius} events either side of each witness event and "
        f"{win.skeleton_shown:,} of the {win.skeleton:,} starts, crashes, errors and other "
        "events that give the run its shape (the overview above marks all of them; click it "
        "to jump to the nearest drawn event). The history file, and the JSON report with "
        "<code>include_events</code>, have every event.</p>"
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


def _timeline_panel(facts: ReportFacts, history: History, win: Window) -> list[str]:
    verdict = facts.verdict
    stats = stats_of(facts) or {}
    lanes, merged = timeline_lanes(history, win, verdict, stats["kinds"])
    events = history.events
    bad = anomalous_events(verdict.anomalies)
    bad_lanes = {lane.key for lane in lanes for event in lane.events if event.index in bad}
    labels = "".join(
        f'<div class="lane-label{" has-anomaly" if lane.key in bad_lanes else ""}" '
        f'data-lane="{_e(lane.key)}" title="{_e(lane.note)}"><b>{_e(lane.name)}</b>'
        f"<small>{_e(lane.note)}</small></div>"
        for lane in lanes
    )
    kinds = [kind for kind in GLYPH if stats["kinds"][kind.value]]
    redelivered = any(
        events[i].kind is EventKind.READ and events[i].detail == "redelivered" for i in win.shown
    )
    out = ['<section id="timeline" class="panel">']
    if win.capped:
        out += [
            "<h2>Overview <span class=muted>(the whole run: drawn stretches shaded, starts "
            "grey, faults black, witnesses red, the drain blue)</span></h2>",
            overview(win, verdict, stats["drain_index"]),
            _capped_note(win),
        ]
    out += [
        "<h2>Timeline <span class=muted>(logical time: event index; one lane per "
        "processor instance; click a mark for its event)</span></h2>",
        legend(kinds, redelivered, win.capped),
        '<div class="timeline"><div class="lane-labels">'
        f'<div class="axis-label">event #</div>{labels}</div>',
        f'<div class="scroller">{timeline(history, verdict, win, lanes, merged)}</div></div>',
        "</section>",
        '<section id="event-detail" class="panel"><h2>Selected event</h2>'
        '<div id="event-detail-body" class="muted">Click a mark in the timeline.</div>'
        "</section>",
    ]
    return out


def _head(facts: ReportFacts) -> list[str]:
    verdict = facts.verdict
    status = verdict.status.value
    return [
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
    ]


def _run_again(facts: ReportFacts) -> list[str]:
    parts = []
    if facts.schedule is not None:
        parts.append(
            f'<section id="schedule" class="panel"><h2>Schedule ({len(facts.schedule)} '
            f"steps)</h2><pre>{_e(facts.schedule.describe(stops_of(facts)))}</pre></section>"
        )
    if facts.replay_command is not None or facts.seed is not None:
        parts.append('<section id="replay" class="panel"><h2>Run it again</h2>')
        if facts.replay_command is not None:
            parts.append(f'<pre id="replay-command">{_e(facts.replay_command)}</pre>')
        if facts.seed is not None:
            parts.append(f'<p>seed: <code id="seed">{facts.seed}</code></p>')
        if facts.coverage is not None:
            parts.append(f'<p>fault coverage: <span id="coverage">{_e(facts.coverage)}</span></p>')
        parts.append("</section>")
    return parts


def _page(facts: ReportFacts) -> str:
    history = facts.history
    verdict = facts.verdict
    pointed = anomalous_events(verdict.anomalies) | anomalous_events(verdict.tolerated)
    win = None if history is None else window(history, pointed)
    parts = [*_head(facts), "<main>", _errors_panel(facts), _anomalies_panel(facts)]
    if history is not None and win is not None:
        parts += _timeline_panel(facts, history, win)
    parts += _run_again(facts)
    if history is not None and win is not None:
        parts.append(_events_table(history, verdict, win))
    capped = win is not None and win.capped
    parts += [
        "</main>",
        '<script type="application/json" id="report-data">'
        f"{script_json(facts_json(facts, include_events=not capped))}</script>",
    ]
    if capped and history is not None and win is not None:
        rows = [history.events[i].to_row() for i in win.shown]
        parts.append(
            f'<script type="application/json" id="report-events">{script_json(rows)}</script>'
        )
    parts += [f"<script>{_SCRIPT}</script>", "</body>", "</html>"]
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
