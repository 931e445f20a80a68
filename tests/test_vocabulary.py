"""What the world can express beyond put-only tables and append-only logs: increments that a
retry after a lost acknowledgement applies twice, and upsert sinks that keep one output per
key. Each is shown to change what a run records, to be refused when misused, and to catch
a processor that only it can catch, while that processor's fixed twin passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import (
    CounterexampleFound,
    Crash,
    Fault,
    Guarantee,
    LoseAck,
    Produce,
    Run,
    Schedule,
    Status,
    Topology,
    explore,
    log_sink,
    run_once,
    table_sink,
)
from harness.catalogue.pitfalls import PITFALLS, ROWS, ROWS_TWO_PARTITIONS
from harness.errors import ConfigError, CorruptData
from harness.history.events import EventKind, Isolation, SinkKind, SinkSpec
from harness.history.io import read_history, write_history
from harness.sim.context import Context
from harness.sim.simulator import Processor

P = "in-0"
COUNTS = Topology(sinks={"counts": table_sink("count")})
EO = Guarantee.EXACTLY_ONCE


def _holds(processor: Processor, guarantee: Guarantee, topology: Topology, **options: Any) -> None:
    """A search of 300 schedules finds nothing (``explore`` raises if it does)."""
    held = explore(
        processor,
        guarantee=guarantee,
        topology=topology,
        max_examples=300,
        failures_dir=None,
        **options,
    )
    assert held.examples == 300


# -- increments --------------------------------------------------------------------------------


def add_then_offset(ctx: Context) -> None:
    counts = ctx.table("counts")
    for record in ctx.read(P, ctx.offsets.get(P)):
        counts.add(record.key)
        ctx.offsets.put(P, record.next)


def put_then_offset(ctx: Context) -> None:
    counts = ctx.table("counts")
    for record in ctx.read(P, ctx.offsets.get(P)):
        counts.put(record.key, (counts.get(record.key) or 0) + 1)
        ctx.offsets.put(P, record.next)


def _puts(processor: object, schedule: Schedule) -> list[tuple[str | None, int | None]]:
    history, _ = run_once(processor, schedule, EO, topology=COUNTS)  # type: ignore[arg-type]
    return [(e.key, e.value) for e in history.events if e.kind is EventKind.PUT]


def test_an_increment_retried_after_a_lost_ack_is_applied_twice_a_put_is_not() -> None:
    # offsets.get, read r0, then the lost acknowledgement arms the next sink write
    lost = Schedule([Produce(count=2), Run(calls=2), LoseAck(), Run(calls=10)])
    assert _puts(add_then_offset, Schedule([Produce(count=2)])) == [("k0", 1), ("k1", 1)]
    assert _puts(add_then_offset, lost) == [("k0", 1), ("k0", 2), ("k1", 1)]
    assert _puts(put_then_offset, lost) == [("k0", 1), ("k0", 1), ("k1", 1)]
    _, verdict = run_once(add_then_offset, lost, EO, topology=COUNTS)
    assert verdict.status is Status.INVALID
    assert "sink counts key k0: expected 1, observed 2" in verdict.summary()


def test_a_commit_of_values_does_not_take_the_lost_ack_an_increment_does() -> None:
    def values_then_increments(ctx: Context) -> None:
        for record in ctx.read(P, ctx.offsets.get(P)):
            ctx.offsets.commit({P: record.next}, tables={"counts": {record.key: 1}})
            ctx.offsets.commit(increments={"counts": {record.key: 1}})

    schedule = Schedule([Produce(count=1), Run(calls=2), LoseAck(), Run(calls=10)])
    assert _puts(values_then_increments, schedule) == [("k0", 1), ("k0", 2), ("k0", 3)]


def test_increments_builds_on_the_stored_value_and_survive_a_process_crash() -> None:
    # r0 and r3 share key k0: the second increment adds to the first; a crash after the
    # first increment and before its offset counts r0 again (the classic two-write bug)
    assert _puts(add_then_offset, Schedule([Produce(count=4)]))[-1] == ("k0", 2)
    crashed = Schedule([Produce(count=1), Run(calls=3), Crash(), Run(calls=10)])
    assert _puts(add_then_offset, crashed) == [("k0", 1), ("k0", 2)]


@pytest.mark.parametrize(
    ("increments", "message"),
    [
        ([("counts", 1)], "increments= must be a mapping of table -> {key: int}, got [("),
        ({"counts": 1}, "increments['counts'] must be a mapping of str -> int, got 1"),
        ({"counts": {"k0": True}}, "table 'counts' entries must be str -> int, got 'k0': True"),
        ({"nope": {"k0": 1}}, "'nope' is not a table sink of this topology"),
    ],
)
def test_bad_increments_are_refused_by_name(increments: object, message: str) -> None:
    def bad(ctx: Context) -> None:
        ctx.offsets.commit(increments=increments)  # type: ignore[arg-type]

    with pytest.raises(ConfigError) as refused:
        run_once(bad, Schedule([Produce()]), EO, topology=COUNTS)
    assert message in str(refused.value)


def test_a_key_both_set_and_incremented_in_one_commit_is_refused() -> None:
    def both(ctx: Context) -> None:
        ctx.offsets.commit(tables={"counts": {"k0": 5}}, increments={"counts": {"k0": 1}})

    with pytest.raises(ConfigError, match=r"'k0' is both set .* and incremented"):
        run_once(both, Schedule([Produce()]), EO, topology=COUNTS)


# -- upsert sinks ------------------------------------------------------------------------------


def rows_by_key(ctx: Context) -> None:
    out = ctx.output("rows")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record, key="same" if record.offset < 2 else record.record_id)
        out.commit()
        ctx.offsets.put(P, record.next)


def test_an_upsert_sink_is_observed_as_its_last_output_per_key() -> None:
    history, verdict = run_once(rows_by_key, Schedule([Produce(count=3)]), EO, topology=ROWS)
    observed = [(e.record_id, e.key) for e in history.events if e.kind is EventKind.OBSERVE]
    assert observed == [("r1", "same"), ("r2", "r2")]
    assert verdict.status is Status.INVALID
    assert [a.kind.value for a in verdict.anomalies] == ["lost", "offset-ahead"]
    plain = Topology(sinks={"rows": log_sink()})
    _, verdict = run_once(rows_by_key, Schedule([Produce(count=3)]), EO, topology=plain)
    assert verdict.status is Status.VALID


def test_an_upsert_row_rewritten_by_a_retry_is_one_row() -> None:
    schedule = Schedule([Produce(count=2), Run(calls=2), LoseAck(), Run(calls=10)])
    upsert = PITFALLS["upsert_key_of_record"]
    history, verdict = run_once(upsert.processor, schedule, EO, topology=ROWS)
    assert verdict.status is Status.VALID, verdict.summary()
    emits = [e for e in history.events if e.kind is EventKind.EMIT]
    observes = [e for e in history.events if e.kind is EventKind.OBSERVE]
    assert (len(emits), len(observes)) == (2, 2)
    plain = Topology(sinks={"rows": log_sink()})
    _, verdict = run_once(upsert.processor, schedule, EO, topology=plain)
    assert [a.kind.value for a in verdict.anomalies] == ["duplicate"]


def test_upsert_misuse_is_refused() -> None:
    with pytest.raises(ConfigError, match="upsert sink keeps one row per key and has no order"):
        log_sink(ordered=True, upsert=True)
    with pytest.raises(ConfigError, match="log_sink upsert must be True or False, got 1"):
        log_sink(upsert=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="upsert=True applies to an unordered log sink only"):
        Topology(sinks={"t": SinkSpec(SinkKind.TABLE, upsert=True)})

    def keyless(ctx: Context) -> None:
        ctx.output("rows").emit(None)

    with pytest.raises(ConfigError, match="an output of upsert sink 'rows' needs a key"):
        run_once(keyless, Schedule([Produce()]), EO, topology=ROWS)


def test_the_upsert_flag_round_trips_through_topology_history_and_replay_json(
    tmp_path: Path,
) -> None:
    assert Topology.from_json(ROWS.to_json()) == ROWS
    assert "upsert" not in json.dumps(Topology().to_json())  # other headers read as before
    history, _ = run_once(rows_by_key, Schedule([Produce(count=1)]), EO, topology=ROWS)
    path = tmp_path / "rows.jsonl"
    write_history(history, path)
    assert read_history(path).meta.sinks["rows"].upsert is True
    header = json.loads(path.read_text().splitlines()[0])
    header["history"]["sinks"]["rows"]["upsert"] = "yes"
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(CorruptData, match="'upsert' must be a boolean, true only for a log"):
        read_history(path)


# -- the isolation level of an output's reader ------------------------------------------------


def one_transaction(ctx: Context) -> None:
    ctx.claim()
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction()
        txn.emit("out", record)
        txn.commit({P: record.next})


@pytest.mark.parametrize(
    ("isolation", "seen"), [("read_committed", []), ("read_uncommitted", ["aborted-read"])]
)
def test_a_reader_of_uncommitted_data_sees_an_aborted_transactions_output(
    isolation: str, seen: list[str]
) -> None:
    # offsets.get, claim, read r0, begin, emit; the crash aborts the open transaction
    schedule = Schedule([Produce(count=1), Run(calls=5), Crash()])
    topology = Topology(sinks={"out": log_sink(isolation=isolation)}, offset_sync=True)
    history, verdict = run_once(
        one_transaction, schedule, Guarantee.AT_LEAST_ONCE, topology=topology
    )
    kinds = [e.kind for e in history.events]
    assert EventKind.TXN_ABORT in kinds
    assert [a.kind.value for a in verdict.anomalies] == seen
    observed = [e.output_id for e in history.events if e.kind is EventKind.OBSERVE]
    assert observed == ([0, 1] if seen else [1])


def test_isolation_misuse_is_refused_and_the_level_round_trips(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="log_sink isolation must be one of read_committed"):
        log_sink(isolation="serializable")
    with pytest.raises(ConfigError, match="applies to a log sink only"):
        Topology(sinks={"t": SinkSpec(SinkKind.TABLE, isolation=Isolation.READ_UNCOMMITTED)})
    topology = PITFALLS["output_in_transactions"].topology
    assert Topology.from_json(topology.to_json()) == topology
    assert "isolation" not in json.dumps(Topology().to_json())
    with pytest.raises(ConfigError, match="unknown isolation 1; choose from read_committed"):
        Topology.from_json(
            {**topology.to_json(), "sinks": {"out": {"kind": "log", "isolation": 1}}}
        )
    history, _ = run_once(one_transaction, Schedule([Produce()]), EO, topology=topology)
    path = tmp_path / "txn.jsonl"
    write_history(history, path)
    assert read_history(path).meta.sinks["out"].isolation is Isolation.READ_UNCOMMITTED
    header = json.loads(path.read_text().splitlines()[0])
    header["history"]["sinks"]["out"]["isolation"] = "dirty"
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(CorruptData, match="'isolation' must be one of read_committed"):
        read_history(path)


def test_transactions_hold_for_a_read_committed_reader_of_the_same_output() -> None:
    bug = PITFALLS["output_in_transactions"]
    committed = Topology(sinks={"out": log_sink()}, offset_sync=True)
    _holds(bug.processor, bug.guarantee, committed)


# -- the pitfalls only these can catch ---------------------------------------------------------

NEW_PITFALLS = [
    "increment_with_offset",
    "upsert_key_without_partition",
    "upsert_key_per_instance",
    "output_in_transactions",
]


@pytest.mark.parametrize("name", NEW_PITFALLS)
def test_the_new_pitfalls_are_catalogued_and_their_twins_hold(name: str) -> None:
    """``tests/test_search.py`` explores every pitfall with ``explore()``'s defaults (found by
    the systematic phase, the twin passing the failing schedule); here each fixed twin also
    holds a search of its own."""
    bug = PITFALLS[name]
    assert not bug.correct and bug.twin is not None
    twin = PITFALLS[bug.twin]
    assert twin.correct and twin.topology == bug.topology
    _holds(twin.processor, twin.guarantee, twin.topology)


@pytest.mark.parametrize("name", NEW_PITFALLS)
def test_the_new_pitfalls_fail_alike_on_both_backends(name: str) -> None:
    bug = PITFALLS[name]
    with pytest.raises(CounterexampleFound) as caught:
        explore(bug.processor, guarantee=bug.guarantee, topology=bug.topology, failures_dir=None)
    schedule = caught.value.failure.schedule
    runs = [
        run_once(bug.processor, schedule, bug.guarantee, topology=bug.topology, backend=backend)
        for backend in ("memory", "leveldb")
    ]
    (memory, on_memory), (leveldb, on_leveldb) = runs
    assert on_memory.to_json() == on_leveldb.to_json()
    assert memory.events == leveldb.events


def test_the_increment_bug_needs_the_lost_ack_on_an_increment() -> None:
    bug = PITFALLS["increment_with_offset"]
    others = [fault for fault in Fault if fault is not Fault.LOSE_ACK]
    _holds(bug.processor, bug.guarantee, bug.topology, faults=others)


def test_the_partitionless_row_key_is_invisible_on_an_append_only_log() -> None:
    bug = PITFALLS["upsert_key_without_partition"]
    assert bug.topology == ROWS_TWO_PARTITIONS
    appended = Topology(partitions=2, sinks={"rows": log_sink()})
    _holds(bug.processor, Guarantee.AT_LEAST_ONCE, appended)
