"""harness.kafka: unchanged Kafka client code under the simulator."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import Crash, Produce, Run, RunZombie, Schedule, Takeover, Tick
from harness.check import AnomalyKind, Guarantee, Status, check
from harness.errors import ConfigError
from harness.history.events import EventKind
from harness.kafka import Effect, KafkaApp, NotModelled, Produced, default_lineage

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
MISC = str(HERE / "kafka_apps" / "misc.py")
SCRIPT = str(HERE / "kafka_apps" / "script.py")


def _app(function: str, **kwargs: object) -> KafkaApp:
    return KafkaApp(f"{MISC}:{function}", inputs=["orders"], outputs=["receipts"], **kwargs)  # type: ignore[arg-type]


def _kinds(verdict: harness.Verdict) -> set[AnomalyKind]:
    return {a.kind for a in verdict.anomalies}


def test_importing_harness_and_the_plugin_imports_no_kafka_client() -> None:
    code = (
        "import sys, harness, harness.pytest_plugin\n"
        "bad = [m for m in ('harness.kafka', 'confluent_kafka', 'kafka') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import harness.catalogue.seeds, harness.kafka\n"  # runs apps, never imports them
        "bad = [m for m in ('confluent_kafka', 'kafka') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=HERE.parent)


def test_the_doubles_are_in_place_for_the_run_only() -> None:
    before = {name: sys.modules.get(name) for name in ("confluent_kafka", "kafka")}
    app = _app("close_commits")
    harness.run_once(
        app, Schedule([Produce(count=2), Run(calls=20)]), "at-least-once", topology=app.topology
    )
    assert {name: sys.modules.get(name) for name in before} == before


def test_a_misspelt_property_is_an_error_naming_it() -> None:
    app = _app("misspelt")
    with pytest.raises(
        ConfigError,
        match=r'No such configuration property: "enable.auto.comit" '
        r'\(did you mean "enable.auto.commit"\?\)',
    ):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


def test_a_bad_value_is_an_error_naming_it() -> None:
    app = _app("bad_value")
    with pytest.raises(
        ConfigError,
        match=r'Invalid value "oldest" for configuration property "auto\.offset\.reset"',
    ):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


def test_kafka_python_rejects_an_unknown_config_key() -> None:
    app = _app("kafka_python_misspelt")
    with pytest.raises(ConfigError, match=r"Unrecognized configs: \{'enable_auto_comit'\}"):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


def test_an_unmodelled_call_raises_naming_it() -> None:
    app = _app("offsets_for_times")
    with pytest.raises(NotModelled, match=r"Consumer.offsets_for_times\(\) is not modelled"):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


def test_a_parked_loop_is_shut_down_and_close_commits_the_stored_offsets() -> None:
    app = _app("close_commits")
    history, verdict = harness.run_once(
        app, Schedule([Produce(count=2), Run(calls=20)]), "at-least-once", topology=app.topology
    )
    assert verdict.status is Status.VALID
    drain = next(e.index for e in history.events if e.kind is EventKind.DRAIN)
    commits = [(e.index > drain, e.offset) for e in history.events if e.kind is EventKind.COMMIT]
    assert commits == [(True, 2)]  # auto.commit.interval.ms=0: only close() commits


def test_a_script_runs_with_its_arguments() -> None:
    app = KafkaApp(
        SCRIPT, inputs=["in"], outputs=["out"], argv=["-b", "x:9092", "-t", "in", "-o", "out"]
    )
    history, verdict = harness.run_once(
        app,
        Schedule([Produce(count=3), Run(calls=6), Crash(), Run(calls=30)]),
        "at-least-once",
        topology=app.topology,
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert sorted({e.record_id for e in history.events if e.kind is EventKind.OBSERVE}) == [
        "r0",
        "r1",
        "r2",
    ]


def test_a_script_with_bad_arguments_is_one_startup_error_with_its_usage_message() -> None:
    app = KafkaApp(SCRIPT, inputs=["in"], outputs=["out"], argv=["-b", "x"])
    with pytest.raises(ConfigError, match=r"failed to start.*exited with status 2.*required"):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


@pytest.mark.parametrize("function", ["base64_values", "upper_values"])
def test_the_default_lineage_sees_through_one_to_one_transforms(function: str) -> None:
    app = _app(function)
    _, verdict = harness.run_once(
        app, Schedule([Produce(count=3), Run(calls=30)]), "exactly-once", topology=app.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()


def test_an_output_that_cannot_be_attributed_is_unexpected() -> None:
    app = _app("counts_only")
    _, verdict = harness.run_once(
        app, Schedule([Produce(count=2), Run(calls=30)]), "at-least-once", topology=app.topology
    )
    assert _kinds(verdict) >= {AnomalyKind.UNEXPECTED}
    assert "default" in app.lineage


def test_a_user_lineage_function_attributes_what_the_default_cannot() -> None:
    def by_value(produced: Produced) -> Effect:
        return Effect("r0")

    app = _app("counts_only", lineage=by_value)
    _, verdict = harness.run_once(
        app, Schedule([Produce(count=1), Run(calls=30)]), "exactly-once", topology=app.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert app.lineage.startswith("user function ")


def test_default_lineage_rules() -> None:
    assert default_lineage(Produced("t", None, b'{"id":"r12","v":1}')) == ("r12",)
    assert default_lineage(Produced("t", None, b"R3 AND R4")) == ("r3", "r4")
    assert default_lineage(Produced("t", None, b"x", (("harness-record-id", b"r9"),))) == ("r9",)
    assert default_lineage(Produced("t", None, b"r1x nor1")) == ()


def test_a_lost_ack_duplicates_without_idempotence() -> None:
    app = _app("not_idempotent")
    _, verdict = harness.run_once(
        app,
        Schedule([Produce(count=1), harness.LoseAck(), Run(calls=30)]),
        "exactly-once",
        topology=app.topology,
    )
    assert _kinds(verdict) == {AnomalyKind.DUPLICATE}


def test_a_program_that_exits_at_the_end_is_run_again_for_new_input() -> None:
    app = _app("eof_then_exit")
    _, verdict = harness.run_once(
        app,
        Schedule([Run(calls=4), Produce(count=2), Run(calls=3), Produce(count=1)]),
        "exactly-once",
        topology=app.topology,
    )
    assert verdict.status is Status.VALID, verdict.summary()


# -- the scenarios ---------------------------------------------------------------------

from harness.scenarios import kafka_clients as kc  # noqa: E402

LOST = {AnomalyKind.LOST, AnomalyKind.OFFSET_AHEAD}
P1 = [Produce(count=1)]

CASES = [
    # (buggy app, its witness schedule, guarantee, expected anomalies, correct twin)
    (
        kc.auto_commit_commit_at_poll,
        [*P1, Run(calls=2), Tick(), Crash()],
        "at-least-once",
        LOST,
        kc.auto_commit_correct,
    ),
    (
        kc.auto_commit_store_before_produce,
        [*P1, Run(calls=3), Tick(), Crash()],
        "at-least-once",
        LOST,
        kc.auto_commit_correct,
    ),
    (
        kc.manual_commit_commit_before_processing,
        [*P1, Run(calls=3), Crash()],
        "at-least-once",
        LOST,
        kc.manual_commit_correct,
    ),
    (
        kc.manual_commit_commit_before_delivery,
        [*P1, Run(calls=4), Crash()],
        "at-least-once",
        LOST,
        kc.manual_commit_correct,
    ),
    (
        kc.async_commit_commit_racing_the_output,
        [*P1, Run(calls=4), Crash()],
        "at-least-once",
        LOST,
        kc.async_commit_correct,
    ),
    (
        kc.store_offsets_store_before_side_effect,
        [*P1, Run(calls=3), Tick(), Crash()],
        "at-least-once",
        LOST,
        kc.store_offsets_correct,
    ),
    (
        kc.transactional_unstable_transactional_id,
        [*P1, Takeover(), Run(calls=3), RunZombie(calls=8)],
        "exactly-once",
        {AnomalyKind.DUPLICATE},
        kc.transactional_correct,
    ),
    (
        kc.transactional_offsets_of_the_message,
        [*P1, Run(calls=10), Crash()],
        "exactly-once",
        {AnomalyKind.DUPLICATE},
        kc.transactional_correct,
    ),
    (
        kc.transactional_output_outside_transaction,
        [*P1, Run(calls=6), Crash()],
        "exactly-once",
        {AnomalyKind.DUPLICATE},
        kc.transactional_correct,
    ),
    (
        kc.kafka_python_commit_before_send,
        [*P1, Run(calls=3), Crash()],
        "at-least-once",
        LOST,
        kc.kafka_python_correct,
    ),
    (
        kc.kafka_python_auto_commit_fire_and_forget,
        # (a zombie's auto-commit is refused: its group moved on to a new generation)
        [Produce(count=2), Run(calls=4), Tick(), Run(calls=2), Crash()],
        "at-least-once",
        LOST,
        kc.kafka_python_correct,
    ),
]


@pytest.mark.parametrize(
    "buggy,steps,guarantee,expected,correct", CASES, ids=[c[0].__qualname__ for c in CASES]
)
def test_each_bug_shows_under_its_schedule_and_its_correct_twin_holds(
    buggy: KafkaApp,
    steps: list[harness.faults.schedule.Step],
    guarantee: str,
    expected: set[AnomalyKind],
    correct: KafkaApp,
) -> None:
    schedule = Schedule(steps)
    _, verdict = harness.run_once(buggy, schedule, guarantee, topology=buggy.topology)
    assert verdict.status is Status.INVALID
    assert _kinds(verdict) & expected, verdict.summary()
    _, verdict = harness.run_once(correct, schedule, guarantee, topology=correct.topology)
    assert verdict.status is Status.VALID, verdict.summary()


def test_the_zombie_of_a_stable_transactional_id_is_fenced() -> None:
    schedule = Schedule([*P1, Takeover(), Run(calls=3), RunZombie(calls=8)])
    history, verdict = harness.run_once(
        kc.transactional_correct,
        schedule,
        "exactly-once",
        topology=kc.transactional_correct.topology,
    )
    assert verdict.status is Status.VALID
    errors = [e.detail for e in history.events if e.kind is EventKind.ERROR]
    assert errors and "_FENCED" in errors[0] and "fatal" in errors[0]


SEARCH = [
    (kc.auto_commit_commit_at_poll, ["crash", "tick"]),
    (kc.manual_commit_commit_before_processing, ["crash"]),
    (kc.async_commit_commit_racing_the_output, ["crash"]),
    (kc.transactional_unstable_transactional_id, ["zombie"]),
    (kc.kafka_python_commit_before_send, ["crash"]),
]


@pytest.mark.parametrize("app,faults", SEARCH, ids=[s[0].__qualname__ for s in SEARCH])
def test_explore_finds_the_bug(app: KafkaApp, faults: list[str]) -> None:
    scenario, variant = next((s, v) for s in kc.SCENARIOS for v in s.variants if v.processor is app)
    with pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            app,
            guarantee=scenario.guarantee,
            topology=app.topology,
            faults=faults,
            max_examples=1000,
            seed=1,
            failures_dir=None,
        )
    assert {a.kind for a in found.value.failure.verdict.anomalies} & variant.expected
    assert found.value.failure.verdict.status is Status.INVALID


def test_the_pytest_fixture_runs_a_script_and_reports_lineage(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_app=f"""
        import pytest

        def test_script(harness_kafka):
            harness_kafka({SCRIPT!r}, guarantee="at-least-once", inputs=["in"], outputs=["out"],
                          argv=["-b", "x", "-t", "in", "-o", "out"], max_examples=30)

        def test_buggy(harness_kafka):
            harness_kafka({MISC + ":counts_only"!r}, guarantee="at-least-once",
                          inputs=["orders"], outputs=["receipts"], max_examples=30)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*unexpected*", "*lineage: default*"])


def test_a_held_guarantee_is_said_in_the_run_doors_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from harness.kafka.command import main

    argv = ["--guarantee", "at-least-once", "--input", "in", "--output", "out"]
    argv += ["--max-examples", "12", "--seed", "3", "--failures-dir", str(tmp_path)]
    assert main([SCRIPT, *argv, "--", "-b", "x", "-t", "in", "-o", "out"]) == 0
    held = capsys.readouterr().out.splitlines()[-1]
    assert held.startswith("at-least-once held for ") and held.endswith(", seed 3")
    assert "12 schedules (" in held and " systematic, " in held  # coverage's summary


def test_the_cli_command_explores_a_script(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "harness", "kafka", MISC + ":counts_only"]
    options = ["--guarantee", "at-least-once", "--input", "orders", "--output", "receipts"]
    found = subprocess.run(
        [*command, *options, "--max-examples", "30", "--failures-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert found.returncode == 1, found.stderr
    assert found.stderr == ""  # no progress line off a terminal
    assert found.stdout.startswith("lineage: default")
    assert "unexpected" in found.stdout
    *_, replay, report = found.stdout.splitlines()
    assert report.startswith("report: python -m harness report ")
    assert replay.startswith("replay: python -m harness kafka ") and "--replay" in replay
    again = subprocess.run(
        [*command, *options, "--replay", replay.split("--replay ")[1].split()[0]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert again.returncode == 1 and "unexpected" in again.stdout
    usage = subprocess.run(
        [*command, "--input", "orders", "--output", "receipts"], capture_output=True, text=True
    )
    assert usage.returncode == 2 and "--guarantee" in usage.stderr


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_cli_command_draws_the_progress_line_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # as the run and spark-job doors do: on a terminal's stderr, never under --json (and
    # never off a terminal: the subprocess test above reads an empty stderr)
    from harness.kafka.command import main

    monkeypatch.chdir(tmp_path)
    for name in ("CI", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "100")
    argv = [MISC + ":counts_only", "--guarantee", "at-least-once", "--input", "orders"]
    argv += ["--output", "receipts", "--max-examples", "30", "--failures-dir", str(tmp_path)]
    for extra, drawn in (([], True), (["--json"], False)):
        out, err = _Terminal(), _Terminal()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        assert main(argv + extra) == 1
        line = err.getvalue()
        assert ("explore misc.py:counts_only" in line and "/30 schedules" in line) is drawn, line
        assert "unexpected" in out.getvalue()


def test_an_application_seek_back_is_recorded_and_its_re_reads_are_no_anomaly() -> None:
    """A consumer that seeks back on purpose re-reads by its own word: the double records
    the seek (a ``fetch`` with detail ``seek``), so the re-reads are no ``nonmonotonic-poll``
    (issue 31), and the app, which produces each offset once, holds exactly-once. Without
    the seek event the same reads are a backward poll (checked on the history itself)."""
    app = _app("seek_back_once")
    history, verdict = harness.run_once(
        app, Schedule([Produce(count=2), Run(calls=40)]), "exactly-once", topology=app.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    seeks = [e for e in history.events if e.kind is EventKind.FETCH and e.detail == "seek"]
    assert len(seeks) == 1 and seeks[0].offset == 0
    without = [e for e in history.events if e is not seeks[0]]
    renumbered = tuple(dataclasses.replace(e, index=i) for i, e in enumerate(without))
    stripped = harness.History(history.meta, renumbered)
    found = check(stripped, Guarantee.EXACTLY_ONCE)
    assert AnomalyKind.NONMONOTONIC_POLL in _kinds(found), found.summary()


def test_a_rebalance_is_recorded_and_judged_by_what_the_reader_then_does() -> None:
    """A consumer that leaves its group and joins again (issue 31): the double records the
    rebalance (its partition ``revoked``, then ``assigned`` back, before the ``fetch`` of
    the committed offset the reader resumes from), the first assignment and the close
    record none. The events change no rule: an app that committed before the rebalance
    holds exactly-once (no false alarm); one that did not re-reads and produces its last
    message again, a ``duplicate``, caught."""
    schedule = Schedule([Produce(count=3), Run(calls=60)])
    committed = _app("resubscribe_committed")
    history, verdict = harness.run_once(
        committed, schedule, "exactly-once", topology=committed.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    changes = [e for e in history.events if e.kind is EventKind.REBALANCE]
    assert [(e.partition, e.detail) for e in changes] == [
        ("orders[0]", "revoked"),
        ("orders[0]", "assigned"),
    ]
    after = history.events[changes[-1].index + 1]
    assert (after.kind, after.process) == (EventKind.FETCH, changes[-1].process)
    uncommitted = _app("resubscribe_uncommitted")
    history, verdict = harness.run_once(
        uncommitted, schedule, "exactly-once", topology=uncommitted.topology
    )
    assert AnomalyKind.DUPLICATE in _kinds(verdict), verdict.summary()
    assert [e.detail for e in history.events if e.kind is EventKind.REBALANCE] == [
        "revoked",
        "assigned",
    ]
