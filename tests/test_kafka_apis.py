"""The client APIs real applications import: admin clients, the serializing clients,
aiokafka, and a one-line NotModelled for everything else (programs in tests/kafka_apps,
written as the clients' own examples are)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import Crash, Produce, Run, RunZombie, Schedule, Takeover, Tick
from harness.check import AnomalyKind, Status
from harness.history.events import EventKind
from harness.kafka import KafkaApp, NotModelled

APPS = Path(__file__).parent / "kafka_apps"
ROOT = Path(__file__).parent.parent


def _app(script: str, *argv: str, **kwargs: object) -> KafkaApp:
    return KafkaApp(
        str(APPS / script),
        inputs=["orders"],
        outputs=["receipts"],
        argv=list(argv),
        **kwargs,  # type: ignore[arg-type]
    )


def _explore(
    app: KafkaApp, guarantee: str, tmp_path: Path, examples: int = 120
) -> set[AnomalyKind]:
    """The anomaly kinds of the counterexample explore finds (empty: the guarantee held)."""
    try:
        harness.explore(
            app,
            guarantee=guarantee,
            topology=app.topology,
            max_examples=examples,
            seed=3,
            failures_dir=tmp_path,
        )
    except harness.CounterexampleFound as found:
        verdict = found.failure.verdict
        assert verdict.status is Status.INVALID, verdict.summary()
        return {a.kind for a in verdict.anomalies}
    return set()


def _once(
    app: KafkaApp, *steps: object, guarantee: str = "at-least-once", fenced: str | None = None
) -> harness.Verdict:
    """One schedule's verdict; no instance died of an error (but ``fenced``: a zombie's
    ``ProducerFenced`` or ``CommitFailedError``)."""
    history, verdict = harness.run_once(
        app,
        Schedule(list(steps)),  # type: ignore[arg-type]
        guarantee,
        topology=app.topology,
    )
    errors = [e.detail or "" for e in history.events if e.kind is EventKind.ERROR]
    assert [e.split(":")[0] for e in errors] == ([fenced] if fenced else []), errors
    return verdict


# -- aiokafka ------------------------------------------------------------------------------


def test_aiokafka_relay_with_manual_commits_holds(tmp_path: Path) -> None:
    assert _explore(_app("aiokafka_relay.py"), "at-least-once", tmp_path) == set()


def test_aiokafka_commit_before_the_effect_loses_records(tmp_path: Path) -> None:
    kinds = _explore(_app("aiokafka_relay.py", "--commit-first"), "at-least-once", tmp_path)
    assert AnomalyKind.LOST in kinds


def test_aiokafka_auto_commit_commits_what_getone_returned_before_the_effect() -> None:
    # the auto-commit task runs while the application awaits its send: then a crash
    witness = (Produce(count=1), Run(calls=3), Tick(), Crash())
    verdict = _once(_app("aiokafka_relay.py", "--auto-commit"), *witness)
    assert verdict.status is Status.INVALID
    assert AnomalyKind.LOST in {a.kind for a in verdict.anomalies}
    assert _once(_app("aiokafka_relay.py"), *witness).status is Status.VALID


def test_aiokafka_auto_commit_is_found_by_explore(tmp_path: Path) -> None:
    # a Tick and a Crash in a narrow window: the systematic phase's pairs reach it
    app = _app("aiokafka_relay.py", "--auto-commit")
    kinds = _explore(app, "at-least-once", tmp_path, examples=300)
    assert AnomalyKind.LOST in kinds


def test_aiokafka_transactions_hold_exactly_once(tmp_path: Path) -> None:
    assert _explore(_app("aiokafka_transactional.py"), "exactly-once", tmp_path) == set()


def test_aiokafka_unstable_transactional_id_duplicates_under_a_zombie(tmp_path: Path) -> None:
    app = _app("aiokafka_transactional.py", "--random-id")
    assert AnomalyKind.DUPLICATE in _explore(app, "exactly-once", tmp_path)
    witness = (Produce(count=1), Takeover(), Run(calls=4), RunZombie(calls=8))
    assert _once(app, *witness, guarantee="exactly-once").status is Status.INVALID
    fixed = _app("aiokafka_transactional.py")
    verdict = _once(fixed, *witness, guarantee="exactly-once", fenced="ProducerFenced")
    assert verdict.status is Status.VALID, verdict.summary()


def test_client_calls_are_fault_points_named_by_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a client's helper that enters the cluster for its public calls (``_enter``) is not
    # what a report or the systematic phase's coverage names: the call is
    from harness.sim.simulator import Simulator

    points: set[str] = set()
    enter = Simulator.enter

    def noting(self: Simulator, inst: object, point: str) -> None:
        points.add(point)
        enter(self, inst, point)  # type: ignore[arg-type]

    monkeypatch.setattr(Simulator, "enter", noting)
    _once(_app("aiokafka_relay.py"), Produce(count=2), Run())
    assert {"kafka.getone", "kafka.commit", "kafka.start"} <= points, points
    confluent = KafkaApp(
        f"{APPS / 'misc.py'}:upper_values", inputs=["orders"], outputs=["receipts"]
    )
    _once(confluent, Produce(count=2), Run())
    assert {"kafka.poll", "kafka.commit"} <= points, points
    assert not {p for p in points if p.startswith("kafka._")}, points


def test_aiokafka_tasks_queue_and_signal_handler_hold(tmp_path: Path) -> None:
    app = _app("aiokafka_worker.py")
    assert _explore(app, "at-least-once", tmp_path) == set()
    # a settled run ends it through its own loop.add_signal_handler(SIGTERM): its finally
    # block stops the clients, so the last commits are in the history after the drain
    history, verdict = harness.run_once(
        app, Schedule([Produce(count=3), Run(calls=40)]), "at-least-once", topology=app.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert [e.offset for e in history.events if e.kind is EventKind.COMMIT] == [1, 2, 3]


def test_aiokafka_worker_acking_as_it_queues_loses_records(tmp_path: Path) -> None:
    app = _app("aiokafka_worker.py", "--ack-early")
    assert AnomalyKind.LOST in _explore(app, "at-least-once", tmp_path)


def test_a_zombie_and_its_successor_each_run_an_event_loop() -> None:
    app = _app("aiokafka_relay.py")
    steps = (Produce(count=2), Run(calls=3), Takeover(), Run(calls=6), RunZombie(calls=6))
    # the zombie's commit is refused: its group has a new generation
    assert _once(app, *steps, fenced="CommitFailedError").status is Status.VALID
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()  # nothing is left running after the run


# -- confluent_kafka admin and serializing clients, kafka-python's admin --------------------


def test_admin_and_serializing_clients_hold(tmp_path: Path) -> None:
    app = _app("confluent_admin_serde.py", unchecked=["audit-log"])
    assert _explore(app, "at-least-once", tmp_path) == set()


def test_serializing_clients_committing_first_lose_records(tmp_path: Path) -> None:
    app = _app("confluent_admin_serde.py", "--commit-first", unchecked=["audit-log"])
    assert AnomalyKind.LOST in _explore(app, "at-least-once", tmp_path)


def test_kafka_python_admin_program_holds(tmp_path: Path) -> None:
    assert _explore(_app("kafka_python_admin.py"), "at-least-once", tmp_path) == set()


def test_admin_calls_answer_as_the_real_clients_do(tmp_path: Path) -> None:
    seen_file = tmp_path / "seen.json"
    _once(_app("admin_calls.py", str(seen_file)), Run(calls=80))
    seen = json.loads(seen_file.read_text())
    assert seen["create"] == {
        "orders": "TOPIC_ALREADY_EXISTS",
        "dlq": "ok",
        "bad name!": "INVALID_TOPIC_EXCEPTION",
    }
    assert seen["topics"] == {"orders": 1, "receipts": 1, "dlq": 3}
    assert seen["partitions"] == ["ok", "INVALID_PARTITIONS"]
    assert seen["describe"] == [5, "UNKNOWN_TOPIC_OR_PART"]
    assert seen["cleanup.policy"] == "delete"
    assert (seen["delete"], seen["after_delete"]) == ("ok", ["orders", "receipts"])
    assert seen["group_offsets"] == [["orders", 0, 0]]
    assert seen["consumer_list_topics"] == ["orders"]
    assert seen["missing_topic"] == "UNKNOWN_TOPIC_OR_PART"
    assert (seen["int"], seen["double"], seen["string_error"]) == (
        [0, 0, 0, 7],
        2.5,
        "SerializationError",
    )
    assert seen["kafka_python_exists"] == "TopicAlreadyExistsError"
    assert seen["kafka_python_topics"] == ["audit", "orders", "receipts"]
    assert seen["kafka_python_describe"] == [2]
    assert seen["kafka_python_consumer"] == [["audit", "orders", "receipts"], [0, 1]]
    assert seen["aiokafka_create"] == [
        ["orders", 36, "Topic 'orders' already exists."],
        ["fresh", 0, None],
    ]
    assert sorted(seen["aiokafka_topics"]) == ["audit", "fresh", "orders", "receipts"]


def test_deleting_a_topic_the_run_checks_is_not_modelled(tmp_path: Path) -> None:
    script = tmp_path / "delete.py"
    script.write_text(
        "from confluent_kafka.admin import AdminClient\n"
        "AdminClient({'bootstrap.servers': 'b'}).delete_topics(['receipts'])\n"
    )
    app = KafkaApp(str(script), inputs=["orders"], outputs=["receipts"])
    with pytest.raises(NotModelled, match=r"delete_topics\('receipts'\) is not modelled"):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


# -- everything else: one line, once -------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("from confluent_kafka.avro import AvroProducer", "import confluent_kafka.avro"),
        (
            "from confluent_kafka.schema_registry import SchemaRegistryClient",
            "import confluent_kafka.schema_registry",
        ),
        ("from confluent_kafka import ShareConsumer", "confluent_kafka.ShareConsumer"),
        ("import kafka.coordinator.assignors.range", "import kafka.coordinator"),
        ("from aiokafka.helpers import create_ssl_context", "import aiokafka.helpers"),
    ],
)
def test_an_unmodelled_import_is_one_line_at_startup(
    tmp_path: Path, source: str, named: str
) -> None:
    starts = tmp_path / "starts"
    script = tmp_path / "app.py"
    script.write_text(f"with open({str(starts)!r}, 'a') as f:\n    f.write('x')\n{source}\n")
    failures = tmp_path / "failures"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "kafka", str(script), "--guarantee", "at-least-once",
         "--input", "orders", "--output", "receipts", "--failures-dir", str(failures)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"{named}" in lines[0] and "is not modelled" in lines[0]
    assert "modelled modules" in lines[0] or " has " in lines[0]  # says what is modelled
    assert "replay" not in done.stdout and not failures.exists()
    assert starts.read_text() == "x"  # started once: no retries


def test_the_import_guard_acts_during_runs_only() -> None:
    code = (
        "import harness.kafka._modules as m\n"
        "m.double_modules()\n"
        "try:\n"
        "    import confluent_kafka.avro\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "ModuleNotFoundError"


def test_confluent_kafka_aio_relay_holds(tmp_path: Path) -> None:
    assert _explore(_app("confluent_aio_relay.py"), "at-least-once", tmp_path) == set()


def test_confluent_kafka_aio_commit_without_awaiting_the_delivery_loses_records(
    tmp_path: Path,
) -> None:
    kinds = _explore(_app("confluent_aio_relay.py", "--no-wait"), "at-least-once", tmp_path)
    assert AnomalyKind.LOST in kinds


# the program is written old-style on purpose: Python 3.12+ warns about it (this suite turns
# warnings into errors), 3.10 and 3.11 do not
@pytest.mark.filterwarnings("ignore:There is no current event loop:DeprecationWarning")
def test_a_module_level_get_event_loop_is_each_instances_own(tmp_path: Path) -> None:
    """Old-style programs share ``get_event_loop()``'s loop within a process: a successor
    must not find its zombie's loop running, nor a restart its crashed predecessor's."""
    policy = asyncio.get_event_loop_policy()
    before = getattr(policy, "_local", None) and policy._local._loop  # type: ignore[attr-defined]
    app = _app("aiokafka_loop_style.py")
    steps = (Produce(count=2), Run(calls=4), Takeover(), Run(calls=6), RunZombie(calls=6))
    # (the zombie's commit is refused: its group has a new generation)
    verdict = _once(app, *steps, Crash(), Run(calls=20), fenced="CommitFailedError")
    assert verdict.status is Status.VALID
    assert _explore(app, "at-least-once", tmp_path) == set()
    after = getattr(policy, "_local", None) and policy._local._loop  # type: ignore[attr-defined]
    assert after is before  # the thread's current loop is as it was


def test_asyncio_sleeps_take_no_real_time(tmp_path: Path) -> None:
    """The simulated world has no clock: a loop with only timers pending moves its clock on
    at once (the skew of the loop's clock over real time is the time skipped)."""
    report = tmp_path / "clock.json"
    app = _app("aiokafka_sleepy.py", str(report))
    assert _once(app, Produce(count=3), Run(calls=30)).status is Status.VALID
    loop_elapsed, real_elapsed = json.loads(report.read_text())
    assert loop_elapsed >= 30 and loop_elapsed - real_elapsed > 0
    assert _explore(app, "at-least-once", tmp_path) == set()


def test_a_crashed_instance_s_event_loop_leaves_no_signal_wakeup_fd_behind() -> None:
    """A loop that handles signals points the process's wakeup fd at its own socket; a crashed
    instance's loop is never closed by asyncio, so without the harness restoring the fd every
    later signal (the run budget's SIGALRM, a Ctrl-C) would report a bad file descriptor."""
    import signal

    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    app = _app("aiokafka_worker.py")
    _once(app, Produce(3), Run(4), Crash(), Run(40), Tick(), Crash(), Run(60))
    after = signal.set_wakeup_fd(before)
    assert after == before
