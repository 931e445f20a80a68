"""Reports render a checker's verdict and its history: text, JSON (with a schema) and HTML."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import importlib.util
import itertools
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import harness.report
from harness import CounterexampleFound, explore
from harness.catalogue.toys import TOYS
from harness.check import Anomaly, AnomalyKind, Guarantee, Status, Verdict, Witness, check
from harness.engine import Failure
from harness.errors import ConfigError
from harness.faults import Schedule
from harness.history.events import Event, EventKind, History, HistoryMeta
from harness.report import (
    REPORT_SCHEMA,
    REPORT_VERSION,
    Checked,
    gather,
    render_html,
    render_json,
    render_text,
    report_json,
    write_report,
)
from harness.report._window import MAX_SHOWN, MAX_SKELETON, RADIUS, SKELETON_KINDS, window

ROOT = Path(__file__).resolve().parent.parent

# Payloads a record can carry: each would run script if it reached the page unescaped.
EVIL_ID = 'r0</script><script>document.title="pwned"</script>'
EVIL_KEY = "<script>alert(1)</script>"
EVIL_PARTITION = 'in-0<img src=x onerror="document.title=1">'
EVIL_PROCESSOR = "toys:</script><script>alert(2)</script>"
EVIL_TITLE = "<script>alert(3)</script> & </title>"
EVIL_STRINGS = (EVIL_ID, EVIL_KEY, EVIL_PARTITION, EVIL_PROCESSOR, EVIL_TITLE)


def _explore(name: str) -> Failure:
    toy = TOYS[name]
    with pytest.raises(CounterexampleFound) as found:
        explore(
            toy.processor,
            guarantee=toy.guarantee,
            topology=toy.topology,
            faults=toy.needs,
            failures_dir=None,
            systematic=False,  # the drawn search's counterexamples, as the tests describe them
        )
    return found.value.failure


@pytest.fixture(scope="module")
def lost() -> Failure:
    """A real failure: the offset is stored before the output, a crash loses record r0."""
    return _explore("commit_before_processing")


@pytest.fixture(scope="module")
def zombie() -> Failure:
    """A real failure with two instances alive at once (a zombie and its successor)."""
    return _explore("unfenced_counter")


def poison(history: History, guarantee: Guarantee) -> tuple[History, Verdict]:
    """``history`` with record r0, every key, the partition and the processor name replaced
    by script payloads, and the checker's verdict for it (whose details quote them)."""
    events = []
    for event in history.events:
        changes: dict[str, Any] = {}
        if event.record_id == "r0":
            changes["record_id"] = EVIL_ID
        if event.key is not None:
            changes["key"] = EVIL_KEY + event.key
        if event.partition is not None:
            changes["partition"] = EVIL_PARTITION
        events.append(dataclasses.replace(event, **changes))
    meta = dataclasses.replace(
        history.meta,
        partitions=(EVIL_PARTITION,),
        extra={**history.meta.extra, "processor": EVIL_PROCESSOR},
    )
    poisoned = History(meta, tuple(events))
    return poisoned, check(poisoned, guarantee)


# -- a tiny JSON Schema checker: the subset report.schema.json uses -------------------------


def _schema_errors(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return _schema_errors(value, root["$defs"][ref[len("#/$defs/") :]], root, at)
    errors: list[str] = []
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not _schema_errors(value, s, root, at)]
        if len(matching) != 1:
            errors.append(f"{at}: matches {len(matching)} of oneOf, not exactly 1")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{at}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: {value!r} is not one of {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        checks = {
            "null": lambda v: v is None,
            "boolean": lambda v: isinstance(v, bool),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "string": lambda v: isinstance(v, str),
            "array": lambda v: isinstance(v, list),
            "object": lambda v: isinstance(v, dict),
        }
        if not any(checks[t](value) for t in types):
            return [*errors, f"{at}: {value!r:.60} is not of type {types}"]
    if "minimum" in schema and isinstance(value, int) and value < schema["minimum"]:
        errors.append(f"{at}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        errors += [
            f"{at}: missing {key!r}" for key in schema.get("required", ()) if key not in value
        ]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                errors += _schema_errors(item, properties[key], root, f"{at}.{key}")
            elif extra is False:
                errors.append(f"{at}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                errors += _schema_errors(item, extra, root, f"{at}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _schema_errors(item, schema["items"], root, f"{at}[{i}]")
    return errors


def schema_errors(report: Any) -> list[str]:
    return _schema_errors(report, REPORT_SCHEMA, REPORT_SCHEMA, "report")


# -- a tiny HTML element collector -----------------------------------------------------------


class Elements(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))

    def with_class(self, *classes: str) -> list[dict[str, str]]:
        return [a for _, a in self.found if set(classes) <= set(a.get("class", "").split())]

    def marks(self, *classes: str) -> list[dict[str, str]]:
        """The timeline's event marks (not the legend's samples) with ``classes``."""
        return [a for a in self.with_class("mark", *classes) if "data-index" in a]

    def by_id(self, ident: str) -> tuple[str, dict[str, str]]:
        matches = [(t, a) for t, a in self.found if a.get("id") == ident]
        assert len(matches) == 1, (ident, matches)
        return matches[0]


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.DOTALL)


# -- text ------------------------------------------------------------------------------------


def test_text_report_of_a_real_failure_shows_verdict_witness_events_schedule_and_replay(
    lost: Failure,
) -> None:
    text = render_text(
        gather(
            lost.verdict,
            lost.history,
            schedule=lost.schedule,
            seed=lost.seed,
            replay_command="python -m harness replay failure.json",
        )
    )
    lines = text.splitlines()
    assert lines[0] == "harness report: harness.catalogue.toys:commit_before_processing"
    assert lines[1] == (
        "INVALID: at-least-once does NOT hold for harness.catalogue.toys:commit_before_processing "
        "(memory backend)"
    )
    start = lines.index("anomalies (2 kinds, 2 occurrences):")
    assert lines[start + 1 : start + 9] == [
        "  lost x1",
        "    records [r0] events [2, 4]: record 'r0' part 0 was acknowledged at event 2 but "
        "no log sink shows it",
        "      #2 ack r0 at in-0@0",
        "      #4 p1 read r0 from in-0@0",
        "  offset-ahead x1",
        "    records [r0] events [5]: process 1 committed offset 1 of partition 'in-0', past "
        "lost record 'r0' at offset 0",
        "      #5 p1 commit in-0 offset 1",
        "stats: acknowledged=1 appended=1 duplicates=0 events=11 expected_effects=1 lost=1 "
        "observed_outputs=0",
    ]
    start = lines.index("schedule (3 steps):")
    assert lines[start + 1 : start + 6] == [
        "    0. Produce(partition=0, count=1, ack=True)",
        "    1. Run(calls=3)  # instance 1 stopped before call 4 (output.emit)",
        "    2. Crash(machine=False, keep=0)",
        "       drain",
        f"schedule JSON: {lost.schedule.dumps()}",
    ]
    assert lines[-2:] == [
        f"seed: {lost.seed}",
        "replay: python -m harness replay failure.json",
    ]
    assert any(
        line.startswith(f"history: run {lost.history.meta.run_id}, 11 events, processes 1, 2")
        and line.endswith("ended complete")
        for line in lines
    )
    assert text.endswith("\n") and "\x1b" not in text


def test_text_report_takes_the_schedule_and_processor_from_the_history_header(
    lost: Failure,
) -> None:
    assert render_text(gather(lost.verdict, lost.history)) == render_text(
        gather(
            lost.verdict,
            lost.history,
            schedule=lost.schedule,
            processor=lost.processor,
            backend=lost.backend,
        )
    )


def test_text_report_is_ascii_and_keeps_each_event_on_one_line(lost: Failure) -> None:
    history, verdict = poison(lost.history, lost.guarantee)
    nasty = "\x1b[2J\nforged line é"
    history = History(
        history.meta,
        tuple(
            dataclasses.replace(e, key=nasty) if e.kind is EventKind.APPEND else e
            for e in history.events
        ),
    )
    witness = Witness((EVIL_ID,), (1,), "detail with\nnewline and \u2028 and \x07")
    verdict = Verdict(
        Status.INVALID, Guarantee.AT_LEAST_ONCE, (Anomaly(AnomalyKind.LOST, 7, (witness,)),)
    )
    text = render_text(gather(verdict, history, title="t\x1b]0;x\x07"))
    assert text.isascii()
    assert "\x1b" not in text and "\x07" not in text
    lines = text.splitlines()
    assert lines[0] == "harness report: t\\x1b]0;x\\x07"
    assert "  lost x7 (showing 1 of 7)" in lines
    assert (
        f"    records [{EVIL_ID}] events [1]: detail with\\x0anewline and \\u2028 and \\x07"
        in lines
    )
    assert (
        f"      #1 append {EVIL_ID} -> {EVIL_PARTITION[:37]}...@0 "
        "key='\\x1b[2J\\nforged line \\xe9' "
        "value=1" in lines
    )
    assert not [line for line in lines if line.startswith("forged")]


def test_text_report_colours_only_when_asked(lost: Failure) -> None:
    plain = render_text(gather(lost.verdict, lost.history))
    coloured = render_text(gather(lost.verdict, lost.history), color=True)
    assert "\x1b[1;31mINVALID: at-least-once does NOT hold" in coloured
    assert "  \x1b[31mlost\x1b[0m x1" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    with pytest.raises(ConfigError, match="color must be True or False, got 'yes'"):
        render_text(lost.verdict, color="yes")  # type: ignore[arg-type]


def test_text_report_of_an_unknown_verdict_without_history() -> None:
    verdict = Verdict(
        Status.UNKNOWN,
        Guarantee.EXACTLY_ONCE,
        tolerated=(Anomaly(AnomalyKind.DUPLICATE, 1, (Witness(("r3",), (4, 9), "seen twice"),)),),
        reasons=("incomplete: the processor died 7 times during the drain",),
    )
    assert render_text(verdict) == (
        "harness report: unnamed processor\n"
        "UNKNOWN: exactly-once could not be shown\n"
        "tolerated under exactly-once (do not change the verdict):\n"
        "  duplicate x1\n"
        "    records [r3] events [4, 9]: seen twice\n"
        "unknown because:\n"
        "  incomplete: the processor died 7 times during the drain\n"
    )


def test_a_witness_event_outside_the_history_is_named_not_fatal(lost: Failure) -> None:
    verdict = Verdict(
        Status.INVALID,
        Guarantee.AT_LEAST_ONCE,
        (Anomaly(AnomalyKind.SKIP, 1, (Witness(("r0",), (3, 99), "gap"),)),),
    )
    text = render_text(gather(verdict, lost.history))
    assert "      #99 (not in the history)" in text.splitlines()
    assert "#99 (not in the history)" in render_html(gather(verdict, lost.history))
    assert report_json(gather(verdict, lost.history))["history"]["witness_events"] == [
        lost.history.events[3].to_row()
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": "7"}, "seed must be an int or None, got '7'"),
        ({"seed": True}, "seed must be an int or None, got True"),
        ({"title": 3}, "title must be a str or None, got 3"),
        ({"schedule": {"steps": []}}, "a StreamSchedule or None"),
        ({"replay_command": b"x"}, "replay_command must be a str or None, got b'x'"),
    ],
)
def test_bad_arguments_are_refused_with_the_value(
    lost: Failure, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        gather(lost.verdict, lost.history, **kwargs)
    with pytest.raises(ConfigError, match=re.escape(message)):
        gather(lost, **kwargs)


@pytest.mark.parametrize("render", [render_text, render_json, report_json, render_html])
def test_a_renderer_refuses_what_is_not_a_run_or_a_verdict(render: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape("a report needs a harness.Verdict")) as info:
        render("INVALID")
    assert "got 'INVALID'" in str(info.value)
    bad = Checked(Verdict(Status.VALID, Guarantee.AT_LEAST_ONCE), history="h")  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=re.escape("history must be a harness.History or None, got 'h'")
    ):
        render(bad)


# -- JSON ------------------------------------------------------------------------------------


def test_json_report_round_trips_the_verdict_and_schedule(lost: Failure) -> None:
    text = render_json(lost)
    report = json.loads(text)
    assert report == report_json(
        gather(
            lost.verdict,
            lost.history,
            schedule=lost.schedule,
            seed=lost.seed,
            replay_command=lost.replay_command,
        )
    ) | {"coverage": lost.coverage.summary()}  # a bare verdict carries no coverage
    assert list(report) == REPORT_SCHEMA["required"]
    assert report["harness_report"] == REPORT_VERSION == 1
    assert Verdict.from_json(report["verdict"]) == lost.verdict
    assert Schedule.from_json(report["schedule"]) == lost.schedule
    assert report["processor"] == "harness.catalogue.toys:commit_before_processing"
    assert report["guarantee"] == "at-least-once"
    assert report["backend"] == "memory"
    assert report["seed"] == lost.seed
    assert report["replay_command"] == lost.replay_command
    assert HistoryMeta.from_json(report["history"]["meta"]) == lost.history.meta
    stats = report["history"]["stats"]
    assert stats["events"] == 11
    assert stats["processes"] == [1, 2]
    assert stats["kinds"]["crash"] == 1 and stats["kinds"]["start"] == 2
    assert stats["drain_index"] == 7 and stats["end"] == "complete"
    assert [row["index"] for row in report["history"]["witness_events"]] == [2, 4, 5]
    assert report["history"]["events"] is None


def test_json_report_can_embed_every_event(lost: Failure) -> None:
    report = report_json(gather(lost.verdict, lost.history), include_events=True)
    rows = report["history"]["events"]
    assert [Event(**{**row, "kind": EventKind(row["kind"])}) for row in rows] == list(
        lost.history.events
    )
    assert schema_errors(report) == []
    with pytest.raises(ConfigError, match="include_events must be True or False, got 1"):
        report_json(lost.verdict, include_events=1)  # type: ignore[arg-type]


def test_json_reports_satisfy_the_schema(lost: Failure, zombie: Failure) -> None:
    unknown = Verdict(Status.UNKNOWN, Guarantee.EXACTLY_ONCE, reasons=("no end event",))
    evil_history, evil_verdict = poison(lost.history, lost.guarantee)
    reports = [
        report_json(gather(lost.verdict, lost.history, seed=1, replay_command="x")),
        report_json(gather(zombie.verdict, zombie.history), include_events=True),
        report_json(gather(evil_verdict, evil_history, title=EVIL_TITLE)),
        report_json(unknown),
        report_json(Verdict(Status.VALID, Guarantee.AT_LEAST_ONCE)),
    ]
    for report in reports:
        assert schema_errors(report) == []
        assert schema_errors(json.loads(json.dumps(report))) == []


def test_a_spark_job_s_stream_schedule_is_reported_like_any_schedule(lost: Failure) -> None:
    """An unchanged Spark job's run (``JobFailure``) carries a ``StreamSchedule``: every
    format shows it, the JSON satisfies the schema, and a job's history header gives it."""
    from harness.faults.streams import CrashPoint, CrashQuery, ProduceRecords, StreamSchedule

    schedule = StreamSchedule(
        steps=(ProduceRecords(4), CrashQuery(1, CrashPoint.AFTER_WRITE), ProduceRecords(2))
    )
    run = Checked(lost.verdict, lost.history, schedule=schedule, processor="job.py")
    report = report_json(run)
    assert schema_errors(report) == []
    assert report["schedule"] == schedule.to_json()
    assert "CrashQuery(batch=1, point=after-write, how=raise)" in render_text(run)
    assert "schedule (3 steps):" in render_text(run)
    assert "CrashQuery(batch=1, point=after-write" in render_html(run)
    extra = {"system": "spark-job", "app": "job.py", "schedule": schedule.to_json()}
    header = dataclasses.replace(lost.history.meta, extra=extra)
    from_header = gather(lost.verdict, History(header, lost.history.events))
    assert from_header.schedule == schedule


def test_the_schema_check_catches_a_broken_report(lost: Failure) -> None:
    report = report_json(gather(lost.verdict, lost.history))
    del report["seed"]
    report["verdict"]["anomalies"][0]["kind"] = "misplaced"
    report["history"]["stats"]["events"] = "11"
    report["surprise"] = 1
    assert schema_errors(report) == [
        "report: missing 'seed'",
        "report.verdict.anomalies[0].kind: 'misplaced' is not one of "
        f"{[kind.value for kind in AnomalyKind]}",
        "report.history: matches 0 of oneOf, not exactly 1",
        "report: unexpected key 'surprise'",
    ]


def test_the_schema_file_is_the_schema_constant() -> None:
    path = ROOT / "harness" / "report" / "report.schema.json"
    assert json.loads(path.read_text(encoding="utf-8")) == REPORT_SCHEMA
    assert REPORT_SCHEMA["properties"]["harness_report"] == {"const": REPORT_VERSION}


def test_the_docs_show_the_text_report_as_it_is_printed(lost: Failure) -> None:
    docs = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    section = docs[docs.index("## Text") : docs.index("## JSON")]
    (example,) = re.findall(r"```\n(.*?)```", section, flags=re.DOTALL)
    replay = example.splitlines()[-1].removeprefix("replay: ")
    assert render_text(
        gather(lost.verdict, lost.history, seed=lost.seed, replay_command=replay)
    ) == (example)


def test_every_format_shows_the_fault_coverage_of_a_failure(lost: Failure) -> None:
    summary = lost.coverage.summary()
    assert summary  # the search says what it exercised
    facts = gather(lost)
    assert facts.coverage == summary
    assert f"coverage: {summary}" in render_text(facts)
    assert report_json(facts)["coverage"] == summary
    assert Elements(render_html(facts)).by_id("coverage") is not None
    assert gather(lost.verdict).coverage is None  # a bare verdict has none to show


def test_the_docs_list_every_top_level_key() -> None:
    docs = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    for key in REPORT_SCHEMA["required"]:
        assert f"`{key}`" in docs, key


# -- HTML ------------------------------------------------------------------------------------


def test_html_has_one_lane_per_process_and_marks_the_witnesses(lost: Failure) -> None:
    page = render_html(gather(lost.verdict, lost.history, schedule=lost.schedule, seed=lost.seed))
    elements = Elements(page)
    lanes = [a["data-lane"] for a in elements.with_class("lane-label")]
    assert lanes == ["producer", "process-1", "process-2"]
    assert [a["data-lane"] for a in elements.with_class("lane-label", "has-anomaly")] == [
        "producer",
        "process-1",
    ]
    lane_marks = elements.marks()
    # every event but the drain and the end is a mark; they are vertical lines
    assert [int(m["data-index"]) for m in lane_marks] == [0, 1, 2, 3, 4, 5, 6, 8, 9]
    assert {m["data-process"] for m in lane_marks if m["data-kind"] == "start"} == {"1", "2"}
    assert [m["id"] for m in elements.marks("anomalous")] == [
        "ev-2",
        "ev-4",
        "ev-5",
    ]
    assert [m["id"] for m in elements.marks("related")] == ["ev-1"]
    assert [m["id"] for m in elements.marks("k-crash")] == ["ev-6"]
    assert elements.by_id("anomalies")[0] == "section"
    assert [a["data-kind"] for a in elements.with_class("anomaly")] == ["lost", "offset-ahead"]
    assert elements.by_id("status")[0] == "div" and ">INVALID</div>" in page
    assert elements.by_id("timeline")[0] == "section"
    assert elements.by_id("schedule")[0] == "section"
    assert '<a href="#ev-4">#4 p1 read r0 from in-0@0</a>' in page
    assert ">process 1</b><small>start #0, process crash #6</small>" in page


def test_html_shows_a_zombie_lane_and_table_keys_of_a_count_mismatch(zombie: Failure) -> None:
    elements = Elements(render_html(gather(zombie.verdict, zombie.history)))
    assert [a["data-lane"] for a in elements.with_class("lane-label")] == [
        "producer",
        "process-1",
        "process-2",
        "sink-counts",
    ]
    assert len(elements.with_class("life", "zombie")) == 2  # the lane and the legend
    (observed,) = elements.marks("anomalous")
    assert observed["data-kind"] == "observe"
    related = {m["data-kind"] for m in elements.marks("related")}
    assert "put" in related  # the writes of the key whose count is wrong


def test_html_escapes_every_payload(lost: Failure) -> None:
    history, verdict = poison(lost.history, lost.guarantee)
    page = render_html(gather(verdict, history, title=EVIL_TITLE, replay_command=EVIL_KEY))
    for evil in EVIL_STRINGS:
        assert evil not in page
    # only the page's own two scripts, and the only </script> are theirs
    assert page.count("<script") == 2
    assert page.count("</script>") == 2
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "r0&lt;/script&gt;&lt;script&gt;document.title=&quot;pwned&quot;" in page
    elements = Elements(page)
    # attribute values decode back to the payload: escaped, not mangled
    assert {m.get("data-record") for m in elements.marks("anomalous")} == {
        EVIL_ID,
        None,
    }
    assert elements.by_id("title")[0] == "h1"


def test_html_embeds_the_report_as_script_safe_json(lost: Failure) -> None:
    history, verdict = poison(lost.history, lost.guarantee)
    page = render_html(gather(verdict, history, title=EVIL_TITLE))
    data_text, script = _scripts(page)
    assert "<" not in data_text and ">" not in data_text and "&" not in data_text
    data = json.loads(data_text)
    assert data == report_json(gather(verdict, history, title=EVIL_TITLE), include_events=True)
    assert data["history"]["events"][2]["record_id"] == EVIL_ID
    assert "innerHTML" not in script and "eval(" not in script


def test_html_json_escapes_javascript_line_separators() -> None:
    from harness.report.html import script_json

    assert script_json({"k": "a\u2028b\u2029</script>&"}) == (
        '{"k":"a\\u2028b\\u2029\\u003c/script\\u003e\\u0026"}'
    )


def test_html_is_self_contained(lost: Failure, zombie: Failure) -> None:
    for failure in (lost, zombie):
        page = render_html(gather(failure.verdict, failure.history, replay_command="x"))
        assert "http://" not in page and "https://" not in page
        assert "@import" not in page and "url(" not in page
        for tag, attrs in Elements(page).found:
            assert "src" not in attrs, tag
            assert attrs.get("href", "#").startswith("#"), (tag, attrs)


def test_html_content_security_policy_allows_exactly_its_own_style_and_script(
    lost: Failure,
) -> None:
    page = render_html(gather(lost.verdict, lost.history))
    (policy,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    (style,) = re.findall(r"<style>(.*?)</style>", page, flags=re.DOTALL)
    script = _scripts(page)[1]

    def digest(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"style-src 'sha256-{digest(style)}'" in policy
    assert f"script-src 'sha256-{digest(script)}'" in policy
    assert policy.startswith("default-src 'none';")


def test_html_without_history_still_has_the_anomaly_panel(lost: Failure) -> None:
    page = render_html(gather(lost.verdict, None, title="no history"))
    elements = Elements(page)
    assert elements.by_id("anomalies")[0] == "section"
    assert not [a for _, a in elements.found if a.get("id") == "timeline"]
    assert "#2 (not in the history)" in page


def test_html_of_a_valid_verdict_says_so() -> None:
    page = render_html(Verdict(Status.VALID, Guarantee.AT_LEAST_ONCE))
    assert 'data-status="valid"' in page
    assert "No anomalies breaking the guarantee" in page
    assert 'class="panel none"' in page


# -- files -----------------------------------------------------------------------------------


def test_write_report_writes_the_three_formats_for_a_failure(lost: Failure, tmp_path: Path) -> None:
    paths = write_report(tmp_path / "out", lost)
    assert paths == {
        "txt": tmp_path / "out" / "report.txt",
        "json": tmp_path / "out" / "report.json",
        "html": tmp_path / "out" / "report.html",
    }
    text = paths["txt"].read_text(encoding="utf-8")
    assert text == render_text(gather(lost))
    assert f"replay: {lost.replay_command}" in text.splitlines()
    report = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert report["seed"] == lost.seed and schema_errors(report) == []
    assert paths["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "report.html",
        "report.json",
        "report.txt",
    ]


def test_write_report_writes_only_the_formats_asked_for(lost: Failure, tmp_path: Path) -> None:
    paths = write_report(
        tmp_path,
        gather(lost.verdict, lost.history),
        formats=("json",),
        name="run-7",
        include_events=True,
    )
    assert paths == {"json": tmp_path / "run-7.json"}
    assert len(json.loads(paths["json"].read_text())["history"]["events"]) == 11
    assert [p.name for p in tmp_path.iterdir()] == ["run-7.json"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"facts": "nope"}, "a report needs a harness.Verdict, or a checked run"),
        ({"formats": ("pdf",)}, "formats must be a non-empty selection of ['txt', 'json', 'html']"),
        ({"formats": ()}, "formats must be a non-empty selection"),
        ({"name": "../x"}, "name must be a plain file name stem"),
    ],
)
def test_write_report_refuses_bad_arguments_before_writing(
    lost: Failure, tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    kwargs = {"facts": lost, **kwargs}
    with pytest.raises(ConfigError, match=re.escape(message)):
        write_report(tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


# -- the package -----------------------------------------------------------------------------


def test_every_public_name_exists_once() -> None:
    names = harness.report.__all__
    assert len(names) == len(set(names))
    assert [name for name in names if not hasattr(harness.report, name)] == []


def test_importing_the_reports_loads_nothing_heavy() -> None:
    code = (
        "import sys, harness.report; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'plyvel', 'py4j', 'pyarrow', 'hypothesis')); print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# -- large histories ---------------------------------------------------------------------------


def _bench() -> Any:
    """bench/bench_report.py, whose history generator the size benchmark measures."""
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench/bench_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def big() -> tuple[History, Verdict]:
    history = _bench().big_history(30_000, crash_every=5)
    return history, check(history, Guarantee.AT_LEAST_ONCE)


def _marks(page: str) -> dict[int, str]:
    return {
        int(index): classes
        for classes, index in re.findall(r'<g class="mark ([^"]*)" id="ev-(\d+)"', page)
    }


def test_a_large_history_draws_each_witness_neighbourhood_and_the_skeleton(
    big: tuple[History, Verdict],
) -> None:
    history, verdict = big
    assert {a.kind.value for a in verdict.anomalies} == {"lost", "offset-ahead"}
    page = render_html(gather(verdict, history))
    marks = _marks(page)
    pointed = sorted({i for a in verdict.anomalies for w in a.witnesses for i in w.events})
    assert len(marks) <= MAX_SHOWN
    # every witness event is drawn red, with the events around it
    assert all("anomalous" in marks[i] for i in pointed)
    assert all(j in marks for i in pointed for j in range(i - RADIUS, i + RADIUS + 1))
    # the skeleton: the drain, the end and (sampled, there are more) the starts and crashes
    kinds = {i: history.events[i].kind for i in marks}
    drain_end = [e.index for e in history.events if e.kind.value in ("drain", "end")]
    assert all('class="vline" x1=' in page for _ in drain_end)
    skeleton = [e.index for e in history.events if e.kind in SKELETON_KINDS]
    assert len(skeleton) > MAX_SKELETON
    drawn = [i for i in skeleton if i in marks or history.events[i].kind.value in ("drain", "end")]
    assert MAX_SKELETON // 2 < len(drawn) <= MAX_SKELETON + 2 * RADIUS * len(pointed)
    assert sum(1 for k in kinds.values() if k.value == "crash") > 20
    # the page says what it left out, and the overview stands for the whole run
    assert f"This history has {len(history.events):,} events" in page
    assert f"the {RADIUS} events either side of each witness event" in page
    assert f'data-total="{len(history.events)}"' in page
    assert "events not drawn</text>" in page
    (table,) = re.findall(r"<b>([\d,]+) of ([\d,]+) events</b>", page)
    assert int(table[0]) == len(marks) + len(drain_end) and table[1] == f"{len(history.events):,}"
    assert '<tr class="gap">' in page


def test_a_large_history_embeds_only_the_drawn_events(big: tuple[History, Verdict]) -> None:
    history, verdict = big
    page = render_html(gather(verdict, history))
    data = json.loads(_scripts(page)[0])
    rows = json.loads(_scripts(page)[1])
    assert data == report_json(gather(verdict, history))  # every event left out
    assert data["history"]["events"] is None
    drawn = [row["index"] for row in rows]
    assert [i for i in drawn if history.events[i].kind.value not in ("drain", "end")] == sorted(
        _marks(page)
    )
    assert rows[0] == history.events[rows[0]["index"]].to_row()


def test_the_size_of_a_report_does_not_grow_with_the_history(
    big: tuple[History, Verdict],
) -> None:
    history, verdict = big
    larger = _bench().big_history(90_000, crash_every=5)
    larger_verdict = check(larger, Guarantee.AT_LEAST_ONCE)
    pages = [render_html(gather(v, h)) for h, v in ((history, verdict), (larger, larger_verdict))]
    texts = [render_text(gather(v, h)) for h, v in ((history, verdict), (larger, larger_verdict))]
    assert len(pages[0]) < 1_000_000 and len(pages[1]) < 1.25 * len(pages[0])
    assert len(texts[1]) < 4000 and len(texts[1]) < 1.25 * len(texts[0])


def test_a_history_of_a_thousand_events_is_drawn_whole_with_labels_that_fit() -> None:
    history = _bench().big_history(1000, crash_every=40)
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    page = render_html(gather(verdict, history))
    marks = _marks(page)
    assert len(marks) == sum(1 for e in history.events if e.kind.value not in ("drain", "end"))
    assert 'id="capped"' not in page and 'id="overview"' not in page
    xs = sorted({int(x) for x in re.findall(r'data-x="(\d+)"', page)})
    col = min(b - a for a, b in itertools.pairwise(xs))
    labels = re.findall(r'<text class="sub"[^>]*>([^<]*)</text>', page)
    assert labels and max(len(html.unescape(label)) for label in labels) * 6 <= col - 2


def test_window_keeps_small_histories_whole_and_caps_large_ones(
    big: tuple[History, Verdict],
) -> None:
    history, verdict = big
    pointed = {i for a in verdict.anomalies for w in a.witnesses for i in w.events}
    win = window(history, pointed)
    assert win.capped and win.total == len(history.events) and len(win.shown) <= MAX_SHOWN
    assert win.skeleton > MAX_SKELETON >= win.skeleton_shown - len(pointed) * (2 * RADIUS + 1)
    assert win.segments()[0][0] == 0 and all(a <= b for a, b in win.segments())
    tight = window(history, pointed, max_shown=40)
    assert len(tight.shown) <= 40 and tight.radius < RADIUS and pointed <= set(tight.shown)
    whole = window(history, pointed, full=len(history.events))
    assert not whole.capped and whole.shown == tuple(range(len(history.events)))


def test_a_rebalance_is_drawn_and_listed() -> None:
    """Schema 4's ``rebalance`` events are drawn in the timeline (their own mark and
    legend line) and listed as ``partition assigned``/``revoked`` (issue 31)."""
    from harness.history.events import Event, EventKind, History, HistoryMeta, SinkKind, SinkSpec
    from harness.report import gather, render_html

    K = EventKind
    events = (
        Event(0, K.APPEND, partition="p", offset=0, record_id="r1", key="k", value=1),
        Event(1, K.ACK, partition="p", offset=0, record_id="r1"),
        Event(2, K.REBALANCE, process=1, partition="p", detail="revoked"),
        Event(3, K.REBALANCE, process=1, partition="p", detail="assigned"),
        Event(4, K.FETCH, process=1, partition="p"),
        Event(5, K.READ, process=1, partition="p", offset=0, record_id="r1"),
        Event(6, K.DRAIN),
        Event(7, K.END, detail="complete"),
    )
    history = History(HistoryMeta(("p",), {"out": SinkSpec(SinkKind.LOG)}), events)
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    assert [a.kind for a in verdict.anomalies] == [AnomalyKind.LOST]
    page = render_html(gather(verdict, history))
    assert page.count("k-rebalance") >= 2
    assert "rebalance (partition assigned / revoked)" in page
    assert "p1 rebalance p assigned" in page


def test_a_fetch_a_rebalance_caused_is_explained_in_the_text_report() -> None:
    """A reader given its partition back by a rebalance resumes at the fetch that follows;
    when a witness points at that fetch (here a ``skip`` from it), the text report shows
    the rebalance that assigned the partition just above it (issue 31); a fetch without one
    gets no such line."""
    from harness.history.events import Event, EventKind, History, HistoryMeta
    from harness.report import gather, render_text

    K = EventKind

    def skipping(*changes: Event) -> History:
        events = [
            Event(0, K.APPEND, partition="p", offset=0, record_id="r1", key="k", value=1),
            Event(0, K.ACK, partition="p", offset=0, record_id="r1"),
            Event(0, K.APPEND, partition="p", offset=1, record_id="r2", key="k", value=1),
            Event(0, K.ACK, partition="p", offset=1, record_id="r2"),
            *changes,
            Event(0, K.FETCH, process=1, partition="p", offset=0),
            Event(0, K.READ, process=1, partition="p", offset=1, record_id="r2"),
            Event(0, K.DRAIN),
            Event(0, K.END, detail="complete"),
        ]
        numbered = tuple(dataclasses.replace(e, index=i) for i, e in enumerate(events))
        return History(HistoryMeta(("p",), {}), numbered)

    changes = (
        Event(0, K.REBALANCE, process=1, partition="p", detail="revoked"),
        Event(0, K.REBALANCE, process=1, partition="p", detail="assigned"),
    )
    rebalanced = skipping(*changes)
    verdict = check(rebalanced, Guarantee.AT_LEAST_ONCE)
    assert [a.kind for a in verdict.anomalies] == [AnomalyKind.SKIP]
    text = render_text(gather(verdict, rebalanced))
    assert "#5 p1 rebalance p assigned (the fetch's cause)\n      #6 p1 fetch p -> 0" in text
    assert "#4 p1 rebalance p revoked" not in text
    plain = skipping()
    assert "the fetch's cause" not in render_text(
        gather(check(plain, Guarantee.AT_LEAST_ONCE), plain)
    )
