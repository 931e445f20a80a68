"""The group generation check of the Kafka doubles: a consumer fenced out of its group (a
zombie whose process was taken over, or a member that has not rejoined since another one
joined) has its commits refused, as the real clients' are, so the checker sees no offset
regression that Kafka would not allow; an ``assign()`` consumer is no member and is not
fenced (Kafka takes its commits as a standalone consumer's)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness import Produce, Run, RunZombie, Schedule, Takeover
from harness.check import AnomalyKind, Status
from harness.history.events import EventKind
from harness.kafka import KafkaApp

APPS = Path(__file__).parent / "kafka_apps" / "group_members.py"

# the zombie reads and processes r0 and is paused before its commit; its successor processes
# and commits all three; then the zombie commits offset 1
ZOMBIE = Schedule([Produce(count=3), Run(calls=3), Takeover(), Run(calls=40), RunZombie(calls=10)])


def _run(function: str, schedule: Schedule = ZOMBIE) -> tuple[harness.History, harness.Verdict]:
    app = KafkaApp(f"{APPS}:{function}", inputs=["orders"], outputs=["receipts"])
    return harness.run_once(app, schedule, "at-least-once", topology=app.topology)


def _all_kinds(verdict: harness.Verdict) -> set[AnomalyKind]:
    return {a.kind for a in (*verdict.anomalies, *verdict.tolerated)}


def _errors(history: harness.History) -> list[str]:
    return [e.detail or "" for e in history.events if e.kind is EventKind.ERROR]


@pytest.mark.parametrize(
    "function,error",
    [
        ("confluent_subscribe", "UNKNOWN_MEMBER_ID"),
        ("confluent_subscribe_async_commits", "UNKNOWN_MEMBER_ID"),
        ("kafka_python_subscribe", "CommitFailedError"),
        ("aiokafka_subscribe", "CommitFailedError"),
    ],
)
def test_a_zombie_members_commit_is_refused_and_no_regression_is_seen(
    function: str, error: str
) -> None:
    history, verdict = _run(function)
    assert AnomalyKind.OFFSET_REGRESSION not in _all_kinds(verdict), verdict.summary()
    assert verdict.status is Status.VALID, verdict.summary()
    commits = [e for e in history.events if e.kind is EventKind.COMMIT]
    zombie = next(e.process for e in history.events if e.kind is EventKind.ZOMBIE)
    assert commits and all(e.process != zombie for e in commits[1:])
    errors = _errors(history)
    assert len(errors) == 1 and error in errors[0], errors


def test_an_assign_consumers_zombie_commit_is_accepted_as_kafka_accepts_it() -> None:
    # no group membership, no generation: the regression is real and reported (tolerated
    # under at-least-once)
    history, verdict = _run("confluent_assign")
    assert AnomalyKind.OFFSET_REGRESSION in _all_kinds(verdict), verdict.summary()
    assert _errors(history) == []


def test_a_member_rejoins_at_its_next_poll() -> None:
    history, verdict = _run("two_members", Schedule([Produce(count=1), Run(calls=30)]))
    assert _errors(history) == [], _errors(history)
    assert verdict.status is Status.VALID, verdict.summary()


def test_a_module_imported_during_the_run_that_holds_a_double_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    # the app imports tests.kafka_apps.holds_a_double by name: the repository's root must be
    # on sys.path, which pytest's own rootdir handling does not promise under tox
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    import tests.kafka_apps  # noqa: F401  (imported before the run: kept)

    name = "tests.kafka_apps.holds_a_double"
    sys.modules.pop(name, None)
    _, verdict = _run(
        "imports_a_module_holding_a_double", Schedule([Produce(count=1), Run(calls=10)])
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert name not in sys.modules
    assert "tests.kafka_apps" in sys.modules
