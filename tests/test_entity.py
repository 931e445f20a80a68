"""Entity tables: a sink of rows upserted by an entity key, last write wins, judged by the
truth the input implies (each key's final row is its last acknowledged record's)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness import AnomalyKind, Produce, Reorder, Run, Schedule, Topology
from harness.check import Guarantee, check
from harness.history import EventKind, History, SinkKind, SinkSpec, read_history, write_history
from harness.sim.context import Context
from harness.sim.topology import entity_sink, log_sink
from harness.strategies.histories import HistoryBuilder

K = EventKind
ALO, EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
ROWS = {"rows": SinkSpec(SinkKind.ENTITY)}


def rows_history(rows: list[tuple[str, int]], *, settled: bool = True) -> History:
    """r0 (k1), r1 (k2), r2 (k1) on partition p, all acknowledged; each written as a row
    (outputs 0, 1, 2); the final rows are ``rows`` as (key, output id)."""
    b = HistoryBuilder(dict(ROWS))
    for rid, key in (("r0", "k1"), ("r1", "k2"), ("r2", "k1")):
        b.append(rid, "p", key=key, value=1)
        b.at(K.ACK, rid)
    for rid, key in (("r0", "k1"), ("r1", "k2"), ("r2", "k1")):
        b.emit(rid, part=0, parts=1, sink="rows", key=key, process=1)
    if settled:
        b.add(K.DRAIN)
    for key, output in rows:
        emit = b.outputs[output]
        b.add(K.OBSERVE, sink="rows", output_id=output, record_id=emit.record_id, part=0, key=key)
    b.add(K.END, detail="complete")
    return b.history()


def kinds(history: History, guarantee: Guarantee = EO) -> dict[str, int]:
    return {a.kind.value: a.count for a in check(history, guarantee).anomalies}


def test_the_latest_row_of_every_key_is_valid_under_both_guarantees() -> None:
    history = rows_history([("k1", 2), ("k2", 1)])
    assert check(history, EO).ok and check(history, ALO).ok


def test_an_older_row_is_stale_with_both_records_as_witnesses() -> None:
    verdict = check(rows_history([("k1", 0), ("k2", 1)]), ALO)
    (stale,) = verdict.anomalies
    assert stale.kind is AnomalyKind.STALE and stale.count == 1
    assert stale.witnesses[0].record_ids == ("r0", "r2")
    assert "key 'k1' holds the row of record 'r0'" in stale.witnesses[0].detail
    assert "last acknowledged record is 'r2'" in stale.witnesses[0].detail


def test_an_unsettled_run_does_not_judge_rows_yet() -> None:
    assert kinds(rows_history([("k1", 0)], settled=False)) == {}


def test_a_key_without_a_row_is_lost_and_a_row_under_another_key_unexpected() -> None:
    assert kinds(rows_history([("k1", 2)])) == {"lost": 1}
    b_rows = rows_history([("k1", 2), ("k3", 1)])  # r1's row under k3, none under k2
    assert kinds(b_rows) == {"lost": 1, "unexpected": 1}


def test_rows_are_not_effects_of_a_log_sink() -> None:
    """With a log sink next to the table, r0's overwritten row is not a lost effect, and
    the log's own effects are still judged."""
    history = rows_history([("k1", 2), ("k2", 1)])
    meta = history.meta
    with_log = History(
        meta=type(meta)(partitions=meta.partitions, sinks={**ROWS, "out": SinkSpec(SinkKind.LOG)}),
        events=history.events,
    )
    assert kinds(with_log) == {"lost": 3}  # the log shows nothing


def test_a_key_spread_over_partitions_accepts_the_last_of_either() -> None:
    b = HistoryBuilder(dict(ROWS))
    for rid, partition in (("r0", "p"), ("r1", "q"), ("r2", "p")):
        b.append(rid, partition, key="k1", value=1)
        b.at(K.ACK, rid)
        b.emit(rid, part=0, parts=1, sink="rows", key="k1", process=1)
    b.add(K.DRAIN)
    b.add(K.OBSERVE, sink="rows", output_id=1, record_id="r1", part=0, key="k1")
    b.add(K.END, detail="complete")
    assert check(b.history(), EO).ok


ENTITY = Topology(keys=1, sinks={"rows": entity_sink()})
UPSERT = Topology(keys=1, sinks={"rows": log_sink(upsert=True)})


def latest_state(ctx: Context) -> None:
    """Correct: each record's row is upserted under its key, then its offset stored."""
    rows = ctx.output("rows")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        rows.emit(record, key=record.key, value=record.value)
        rows.commit()
        ctx.offsets.put("in-0", record.next)


def test_a_correct_entity_table_passes_where_an_upsert_log_cannot() -> None:
    """Two records on one key: the upsert log sink judges per record id (one of them is
    lost); the entity table judges the latest state per key."""
    schedule = Schedule([Produce(count=2), Run(20)])
    _, upsert = harness.run_once(latest_state, schedule, "exactly-once", topology=UPSERT)
    assert AnomalyKind.LOST in {a.kind for a in upsert.anomalies}
    _, entity = harness.run_once(latest_state, schedule, "exactly-once", topology=ENTITY)
    assert entity.ok, entity.summary()
    harness.explore(latest_state, guarantee="exactly-once", topology=ENTITY, failures_dir=None)


def unordered_rows(ctx: Context) -> None:
    rows = ctx.output("rows")
    source = ctx.read("in-0")
    for record, _ in ctx.map_async(lambda r: r, source, parallelism=3, ordered=False):
        rows.emit(record)
        rows.commit()


def test_a_reorder_that_overwrites_a_newer_row_is_stale_in_a_simulated_run() -> None:
    schedule = Schedule([Produce(count=2), Run(2), Reorder(1), Run(100)])
    history, verdict = harness.run_once(unordered_rows, schedule, "at-least-once", topology=ENTITY)
    assert [a.kind for a in verdict.anomalies] == [AnomalyKind.STALE]
    assert "written after it" in verdict.anomalies[0].witnesses[0].detail
    rows = [e for e in history.events if e.kind is K.OBSERVE]
    assert [(e.key, e.record_id) for e in rows] == [("k0", "r0")]


def test_an_entity_sink_needs_a_key_and_round_trips(tmp_path: Path) -> None:
    assert Topology.from_json(ENTITY.to_json()) == ENTITY
    assert ENTITY.log_sinks() == ["rows"]

    def keyless(ctx: Context) -> None:
        ctx.output("rows").emit(None)

    with pytest.raises(harness.ConfigError, match="needs a key"):
        harness.simulate(keyless, Schedule([Produce(), Run(5)]), topology=ENTITY)
    history = rows_history([("k1", 0), ("k2", 1)])
    for suffix in (".jsonl", ".parquet"):
        path = tmp_path / f"h{suffix}"
        write_history(history, path)
        again = read_history(path)
        assert again.meta.sinks["rows"].kind is SinkKind.ENTITY
        assert check(again, ALO) == check(history, ALO)
