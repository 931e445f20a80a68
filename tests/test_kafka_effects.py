"""Effects outside Kafka (prints, files, SQLite rows), real payloads and the Kafka door's
replay files: third-party-style programs held as data in tests/kafka_apps/effects/."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import strategies as st

import harness
from harness import Crash, Produce, Restart, Run, Schedule, Tick
from harness.check import AnomalyKind, Status
from harness.effects import (
    By,
    file_lines,
    parse_by,
    parse_effect,
    sqlite_rows,
    stderr_lines,
    stdout_lines,
)
from harness.errors import ConfigError
from harness.history.events import EventKind
from harness.kafka import KafkaApp
from harness.kafka.payloads import from_strategy, sample_file, template

APPS = Path(__file__).parent / "kafka_apps" / "effects"
ORDERS = template('{"order_id": {n}, "customer": "{key}", "amount": {value}}')
SHIPPED = r"shipped order (\d+)"


def _kinds(verdict: harness.Verdict) -> set[AnomalyKind]:
    return {a.kind for a in verdict.anomalies}


def _observed(history: harness.History, sink: str) -> list[str | None]:
    return [e.record_id for e in history.events if e.kind is EventKind.OBSERVE and e.sink == sink]


def _printer(name: str, **kwargs: object) -> KafkaApp:
    return KafkaApp(
        str(APPS / f"{name}.py"),
        inputs=["orders"],
        encode=ORDERS,
        effects=[stdout_lines(pattern=SHIPPED)],
        **kwargs,  # type: ignore[arg-type]
    )


def _run(app: KafkaApp, *steps: object) -> tuple[harness.History, harness.Verdict]:
    return harness.run_once(app, Schedule(list(steps)), "at-least-once", topology=app.topology)  # type: ignore[arg-type]


# -- prints ----------------------------------------------------------------------------------


def test_a_print_is_the_effect_and_a_fault_free_run_holds() -> None:
    history, verdict = _run(_printer("print_autocommit"), Produce(count=3), Run(calls=30))
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted(_observed(history, "stdout")) == ["r0", "r1", "r2"]  # the banner is no effect


def test_auto_commit_before_the_print_loses_the_order_after_a_crash() -> None:
    # poll() returned r0 and stored its offset; the timer commits it; the crash comes before
    # the print: r0 is never printed, and the restart resumes after it
    steps = (Produce(count=1), Run(calls=3), Tick(), Crash(), Restart(), Run(calls=30))
    _, verdict = _run(_printer("print_autocommit"), *steps)
    assert verdict.status is Status.INVALID
    assert AnomalyKind.LOST in _kinds(verdict)
    _, fixed = _run(_printer("print_manual"), *steps)
    assert fixed.status is Status.VALID, fixed.summary()


def test_explore_catches_the_auto_committing_printer_and_passes_the_correct_one() -> None:
    with pytest.raises(harness.CounterexampleFound) as found:
        app = _printer("print_autocommit")
        harness.explore(app, guarantee="at-least-once", topology=app.topology, failures_dir=None)
    assert AnomalyKind.LOST in _kinds(found.value.failure.verdict)
    assert "crash" in found.value.failure.schedule.dumps()
    app = _printer("print_manual")
    harness.explore(
        app, guarantee="at-least-once", topology=app.topology, max_examples=400, failures_dir=None
    )


def test_a_partial_line_is_lost_with_the_crash_and_a_buffered_stream_counts_flushes() -> None:
    from harness.effects import EffectSession

    class Proc:
        dead = False

    session = EffectSession([stdout_lines(), stderr_lines(buffered=True)])
    try:
        one, two = Proc(), Proc()
        session.write("stdout", one, "done r1\ndone r")
        session.write("stderr", one, "done r7\n")
        session.write("stderr", two, "done r8\n")
        session.flush("stderr", two)
        one.dead = True
        session.end(one, crashed=True)
        session.write("stdout", two, "done r2\n")
        session.end(two, crashed=False)
        assert session.lines("stdout") == ["done r1", "done r2"]
        assert session.lines("stderr") == ["done r8"]  # r7 was still in the pipe's buffer
    finally:
        session.close()


# -- SQLite ----------------------------------------------------------------------------------


def _orders_db(tmp_path: Path, *extra: str) -> KafkaApp:
    db = str(tmp_path / "state" / "orders.db")  # a directory that does not even exist
    return KafkaApp(
        str(APPS / "sqlite_sink.py"),
        inputs=["orders"],
        encode=ORDERS,
        argv=["--db", db, *extra],
        effects=[sqlite_rows(db, "orders", column="order_id")],
    )


def test_committed_rows_survive_a_crash_and_the_database_is_fresh_per_schedule(
    tmp_path: Path,
) -> None:
    app = _orders_db(tmp_path)
    steps = (Produce(count=3), Run(calls=9), Crash(), Restart(), Run(calls=40))
    first, verdict = _run(app, *steps)
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted(_observed(first, "sqlite-orders")) == ["r0", "r1", "r2"]
    again, _ = _run(app, *steps)  # a fresh database: not six rows
    assert _observed(again, "sqlite-orders") == _observed(first, "sqlite-orders")
    assert not (tmp_path / "state").exists()  # redirected under the run's own directory


@pytest.mark.parametrize(("extra", "holds"), [((), True), (("--commit-first",), False)])
def test_explore_judges_the_sqlite_consumer(
    tmp_path: Path, extra: tuple[str, ...], holds: bool
) -> None:
    app = _orders_db(tmp_path, *extra)
    try:
        harness.explore(
            app,
            guarantee="at-least-once",
            topology=app.topology,
            max_examples=300,
            failures_dir=None,
        )
    except harness.CounterexampleFound as found:
        assert not holds, str(found)
        assert AnomalyKind.LOST in _kinds(found.failure.verdict)
    else:
        assert holds


def test_an_uncommitted_row_is_rolled_back_by_the_crash(tmp_path: Path) -> None:
    app = _orders_db(tmp_path, "--commit-first")
    # r0's row is inserted and the offset committed; the crash comes before db.commit()
    history, verdict = _run(app, Produce(count=1), Run(calls=5), Crash(), Restart(), Run(calls=30))
    assert _observed(history, "sqlite-orders") == []
    assert AnomalyKind.LOST in _kinds(verdict)


# -- files -----------------------------------------------------------------------------------


def _csv(tmp_path: Path, **env: str) -> KafkaApp:
    path = str(tmp_path / "out" / "orders.csv")
    return KafkaApp(
        str(APPS / "file_writer.py"),
        inputs=["orders"],
        encode=ORDERS,
        env={"ORDERS_CSV": path, **env},
        effects=[file_lines(path, pattern=r"^(\d+),")],
    )


def test_buffered_file_lines_are_lost_with_the_process_and_flushed_ones_are_kept(
    tmp_path: Path,
) -> None:
    steps = (Produce(count=2), Run(calls=5), Crash(), Restart(), Run(calls=40))
    history, verdict = _run(_csv(tmp_path), *steps)
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted(_observed(history, "file-orders.csv")) == ["r0", "r1"]
    _, buggy = _run(_csv(tmp_path, BUGGY_FLUSH="1"), *steps)
    assert AnomalyKind.LOST in _kinds(buggy)
    assert not (tmp_path / "out").exists()


# -- attribution, payloads -------------------------------------------------------------------


def test_attribution_rules() -> None:
    assert By().ids("order r7 and R8, not r9x") == ["r7", "r8"]
    assert By(pattern=r"order (\d+)").ids("order 12 shipped") == ["r12"]
    assert By(pattern=r"id=\S+").ids("id=r3") == ["r3"]
    assert By(column="order_id").ids({"order_id": 4, "x": "r9"}) == ["r4"]
    assert By(column="order_id").ids({"order_id": None}) == [None]
    assert By(function=lambda row: [row["a"], "r2"]).ids({"a": 1}) == ["r1", "r2"]
    with pytest.raises(ConfigError, match="no column 'nope'"):
        By(column="nope").ids({"order_id": 1})
    with pytest.raises(ConfigError, match="bad effect pattern"):
        By(pattern="(")
    assert parse_effect("sqlite:/tmp/a.db:orders", parse_by("column=id")).sink == "sqlite-orders"
    with pytest.raises(ConfigError, match=r"bad --effect 'sqlite:x'"):
        parse_effect("sqlite:x")
    with pytest.raises(ConfigError, match="bad --by"):
        parse_by("col=x")


def test_a_row_naming_no_record_is_unexpected(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE t (note TEXT)")
        connection.execute("INSERT INTO t VALUES ('hello'), ('done r3')")
    connection.close()

    class Seen:
        def lines(self, stream: str) -> list[str]:
            return []

        def path(self, original: str) -> Path:
            return Path(original)

    found = sqlite_rows(db, "t").observe(Seen())
    assert [f.record_id for f in found] == [None, "r3"]


def test_payloads_from_a_template_a_sample_file_and_a_strategy(tmp_path: Path) -> None:
    assert ORDERS("r7", "k1", 3) == (b"k1", b'{"order_id": 7, "customer": "k1", "amount": 3}')
    sample = tmp_path / "orders.jsonl"
    sample.write_text('{"sku": "A-1", "ref": "{id}"}\n\n{"sku": "B-2"}\n', encoding="utf-8")
    encode = sample_file(sample, key=None)
    assert encode("r2", "k0", 1) == (None, b'{"sku": "A-1", "ref": "r2"}')
    assert encode("r1", "k0", 1)[1] == b'{"sku": "B-2"}'
    sample.write_text("not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 1 is not JSON"):
        sample_file(sample)
    strategy = st.fixed_dictionaries({"qty": st.integers(0, 9)})
    drawn = from_strategy(strategy, count=8)
    assert drawn.samples == from_strategy(strategy, count=8).samples  # derandomized
    assert all(json.loads(value)["qty"] in range(10) for value in drawn.samples)


def test_lineage_never_depends_on_the_payload_the_record_id_header_carries_it() -> None:
    app = KafkaApp(
        str(Path(__file__).parent / "kafka_apps" / "misc.py") + ":copy_headers",
        inputs=["orders"],
        outputs=["receipts"],
        encode=template("no id in here: {value}", key=None),
    )
    history, verdict = _run(app, Produce(count=2), Run(calls=30))
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted(_observed(history, "receipts")) == ["r0", "r1"]


# -- problems ----------------------------------------------------------------------------------


def test_records_before_the_first_start_can_be_declared_not_owed() -> None:
    steps = (Produce(count=2), Run(calls=30))
    owed = KafkaApp(
        str(APPS / "two_bugs.py"),
        inputs=["orders"],
        encode=ORDERS,
        effects=[stdout_lines(pattern=r"handled (\d+)")],
    )
    _, verdict = _run(owed, *steps)
    assert AnomalyKind.LOST in _kinds(verdict)  # auto.offset.reset=latest skips them
    not_owed = KafkaApp(
        str(APPS / "two_bugs.py"),
        inputs=["orders"],
        encode=ORDERS,
        backlog_owed=False,
        effects=[stdout_lines(pattern=r"handled (\d+)")],
    )
    _, verdict = _run(not_owed, *steps)
    assert verdict.status is Status.VALID, verdict.summary()
    # a later reset (a crash before the first commit) still jumps to the end
    _, verdict = _run(not_owed, Produce(count=1), Run(calls=2), Crash(), Restart(), Run(calls=30))
    assert AnomalyKind.LOST in _kinds(verdict)


def test_explore_stops_at_one_problem_unless_asked_for_more() -> None:
    app = KafkaApp(
        str(APPS / "two_bugs.py"),
        inputs=["orders"],
        encode=ORDERS,
        effects=[stdout_lines(pattern=r"handled (\d+)")],
    )
    with pytest.raises(harness.CounterexampleFound) as one:
        harness.explore(app, guarantee="at-least-once", topology=app.topology, failures_dir=None)
    assert len(one.value.failures) == 1
    with pytest.raises(ConfigError, match="max_problems"):
        harness.explore(app, guarantee="at-least-once", topology=app.topology, max_problems=0)


def test_environment_variables_read_by_the_app_are_kept_for_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUGGY_FLUSH", "1")
    app = _csv(tmp_path)
    _run(app, Produce(count=1), Run(calls=5))
    spec = app.replay_spec()
    assert spec is not None
    assert spec["args"]["env"]["BUGGY_FLUSH"] == "1"
    assert spec["args"]["env"]["ORDERS_CSV"].endswith("orders.csv")


def test_a_function_target_gets_the_arguments_given_after_the_separator() -> None:
    app = KafkaApp(
        f"{APPS / 'main_args.py'}:main",
        inputs=["orders"],
        argv=["--topic", "orders", "--prefix", "shipped"],
        effects=[stdout_lines(pattern=r"^shipped .*")],
    )
    history, verdict = _run(app, Produce(count=2), Run(calls=30))
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted(_observed(history, "stdout")) == ["r0", "r1"]


def test_the_effect_line_shows_a_pattern_as_the_user_wrote_it() -> None:
    # repr() doubled every backslash: the lineage line said 'shipped order (\\d+)' for the
    # pattern given as 'shipped order (\d+)', which is not the regular expression in use
    expected = r"stdout lines, by pattern 'shipped order (\d+)'"
    assert stdout_lines(pattern=SHIPPED).describe() == expected
    assert By(column="order_id").describe() == "column 'order_id'"
