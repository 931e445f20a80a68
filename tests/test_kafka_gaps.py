"""Offsets as Kafka has them: a transactional input topic's markers and aborted records
take offsets (``KafkaApp(transactional_input=True)``), the history shows those offsets, and
the checker counts skipped records, not offsets (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness import Crash, Produce, Run, Schedule
from harness.check import AnomalyKind, Guarantee, Status, check
from harness.history.events import EventKind
from harness.kafka import KafkaApp

APPS = str(Path(__file__).parent / "kafka_apps" / "gapped_offsets.py")
EO = Guarantee.EXACTLY_ONCE


def app(function: str, *, transactional_input: bool = True) -> KafkaApp:
    return KafkaApp(
        f"{APPS}:{function}",
        inputs=["orders"],
        outputs=["receipts"],
        transactional_input=transactional_input,
    )


# two committed upstream transactions around an aborted one (a producer crash), a crash of
# the app after its first batch, then more input
WITNESS = Schedule(
    [
        Produce(count=2),
        Produce(count=1, ack=False),
        Produce(count=3),
        Run(40),
        Crash(),
        Produce(count=2),
        Run(40),
    ]
)


def test_the_history_shows_kafka_offsets_markers_and_aborted_records_take_offsets() -> None:
    history = harness.simulate(app("correct"), WITNESS, topology=app("correct").topology)
    appends = [(e.record_id, e.offset) for e in history.events if e.kind is EventKind.APPEND]
    # r0 r1 | marker 2 | r2 (aborted) 3 | marker 4 | r3 r4 r5 | marker 8 | r6 r7 | marker 11
    assert appends == [
        ("r0", 0),
        ("r1", 1),
        ("r2", 3),
        ("r3", 5),
        ("r4", 6),
        ("r5", 7),
        ("r6", 9),
        ("r7", 10),
    ]
    acked = {e.record_id for e in history.events if e.kind is EventKind.ACK}
    assert "r2" not in acked
    reads = [e.offset for e in history.events if e.kind is EventKind.READ]
    assert set(reads) == {0, 1, 5, 6, 7, 9, 10}  # the aborted record is never read
    commits = [e.offset for e in history.events if e.kind is EventKind.COMMIT]
    # each is the batch's last message + 1 (batches of three: r0 r1 r3, r4 r5, r6 r7)
    assert commits == [6, 8, 11]
    assert check(history, EO).status is Status.VALID


def test_without_transactional_input_the_offsets_are_positions() -> None:
    plain = app("correct", transactional_input=False)
    history = harness.simulate(plain, WITNESS, topology=plain.topology)
    appends = [e.offset for e in history.events if e.kind is EventKind.APPEND]
    assert appends == [0, 1, 2, 2, 3, 4, 5, 6]  # the aborted append's position is taken again


def test_a_correct_transactional_app_holds_over_gapped_offsets() -> None:
    correct = app("correct")
    exploration = harness.explore(
        correct,
        guarantee=EO,
        topology=correct.topology,
        faults=["crash", "producer-crash", "tick"],
        max_examples=60,
        seed=3,
        failures_dir=None,
    )
    assert exploration.examples > 0


def test_an_app_that_assumes_contiguous_offsets_is_caught() -> None:
    # its first batch (r0 0, r1 1, r3 5) commits 0 + 3 = 3, below r3: after a crash r3 is
    # processed again
    short = Schedule(
        [Produce(count=2), Produce(count=1, ack=False), Produce(count=1), Run(40), Crash()]
    )
    buggy = app("contiguous_count")
    history = harness.simulate(buggy, short, topology=buggy.topology)
    verdict = check(history, EO)
    assert verdict.status is Status.INVALID
    assert {a.kind for a in verdict.anomalies} == {AnomalyKind.DUPLICATE}
    # the same code over a topic without gaps is right: the bug is the assumption
    plain = app("contiguous_count", transactional_input=False)
    assert check(harness.simulate(plain, short, topology=plain.topology), EO).status is (
        Status.VALID
    )
    with pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            buggy,
            guarantee=EO,
            topology=buggy.topology,
            faults=["crash", "producer-crash"],
            max_examples=200,
            seed=1,
            failures_dir=None,
        )
    assert AnomalyKind.DUPLICATE in {a.kind for a in found.value.failure.verdict.anomalies}


def test_the_flag_travels_in_the_topology_and_the_replay_spec() -> None:
    from harness.errors import ConfigError
    from harness.kafka._spec import from_spec, to_spec
    from harness.sim.topology import Topology

    gapped = app("correct")
    assert gapped.topology.to_json()["transactional_input"] is True
    assert Topology.from_json(gapped.topology.to_json()) == gapped.topology
    assert "transactional_input" not in app("correct", transactional_input=False).topology.to_json()
    spec = to_spec(gapped, set())
    assert spec is not None and from_spec(spec).topology == gapped.topology
    with pytest.raises(ConfigError, match="transactional_input must be True or False"):
        KafkaApp(f"{APPS}:correct", inputs=["orders"], outputs=["receipts"], transactional_input=1)  # type: ignore[arg-type]
