"""An at-least-once upstream: the input's producer resends records under their ids after a
lost acknowledgement (``Resend``, for a topology with ``upstream_resends=True``).

The world appends the same record again at a new position; the history marks the copy
``resent``; the validator accepts it only as a copy of an earlier append; both the checker's
truth and its counts treat the copies as one record; the search draws and plans resends only
for a topology that has them, and they catch the processors that only they can catch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest

from harness import (
    Crash,
    Fault,
    Guarantee,
    Produce,
    Resend,
    Restart,
    Run,
    Schedule,
    Status,
    Topology,
    log_sink,
    run_once,
    table_sink,
)
from harness.catalogue.pitfalls import PITFALLS, RESENDING
from harness.catalogue.toys import process_then_commit
from harness.check import AnomalyKind, check, validate
from harness.errors import ConfigError
from harness.history.events import RESENT, EventKind, History
from harness.search.guided import fault_points
from harness.search.systematic import plan
from harness.sim.context import Context
from harness.sim.records import Delivery

P = "in-0"
EO, ALO = Guarantee.EXACTLY_ONCE, Guarantee.AT_LEAST_ONCE
RESENDS = Topology(upstream_resends=True)
COUNTED = Topology(sinks={"counts": table_sink("count")}, upstream_resends=True)


forward = process_then_commit
"""Output then offset, per input position (correct for an idempotent upstream)."""


def _forward_if(ctx: Context, keep: Callable[[Delivery, set[str]], bool]) -> None:
    """Like :func:`forward`, outputting only the records ``keep`` accepts (given the ids
    this instance has read before)."""
    out = ctx.output("out")
    done: set[str] = set()
    for record in ctx.read(P, ctx.offsets.get(P)):
        if keep(record, done):
            out.emit(record)
            out.commit()
        done.add(record.record_id)
        ctx.offsets.put(P, record.next)


def forward_new_ids(ctx: Context) -> None:
    """Skips a record id this instance has read before (one instance, no crashes in the
    schedules that use it: a fine deduplication for them)."""
    _forward_if(ctx, lambda record, done: record.record_id not in done)


def drop_resent(ctx: Context) -> None:
    """Outputs nothing for 'r0' (either copy), so its loss is counted once."""
    _forward_if(ctx, lambda record, _: record.record_id != "r0")


def count_each(ctx: Context, *, dedup: bool) -> None:
    counts = ctx.table("counts")
    done: set[str] = set()
    for record in ctx.read(P, ctx.offsets.get(P)):
        if not dedup or record.record_id not in done:
            counts.put(record.key, (counts.get(record.key) or 0) + 1)
            done.add(record.record_id)
        ctx.offsets.put(P, record.next)


def count_positions(ctx: Context) -> None:
    count_each(ctx, dedup=False)


def count_ids(ctx: Context) -> None:
    count_each(ctx, dedup=True)


def steps(*items: Any) -> Schedule:
    return Schedule(tuple(items))


RESENT_ONCE = steps(Produce(0, 2), Run(20), Resend(0, 2), Run(20))


# -- the world ---------------------------------------------------------------------------------


def test_a_resend_appends_the_same_records_again_at_new_positions() -> None:
    history, verdict = run_once(forward_new_ids, RESENT_ONCE, EO, topology=RESENDS)
    appends = [e for e in history.events if e.kind is EventKind.APPEND]
    assert [(e.record_id, e.offset, e.detail) for e in appends] == [
        ("r0", 0, None),
        ("r1", 1, None),
        ("r0", 2, RESENT),
        ("r1", 3, RESENT),
    ]
    assert [(e.key, e.value) for e in appends[2:]] == [(e.key, e.value) for e in appends[:2]]
    acks = [(e.record_id, e.offset) for e in history.events if e.kind is EventKind.ACK]
    assert acks == [("r0", 0), ("r1", 1), ("r0", 2), ("r1", 3)]
    reads = [(e.record_id, e.offset) for e in history.events if e.kind is EventKind.READ]
    assert reads[-2:] == [("r0", 2), ("r1", 3)]  # the processor is handed both copies
    assert verdict.status is Status.VALID, verdict.summary()
    assert verdict.stats["appended"] == 2 and verdict.stats["expected_effects"] == 2


def test_a_resend_resends_at_most_what_the_partition_holds_and_nothing_before_it() -> None:
    schedule = steps(Resend(0, 3), Produce(0, 1), Resend(0, 5), Run(20))
    history, _ = run_once(forward_new_ids, schedule, EO, topology=RESENDS)
    appended = [(e.record_id, e.detail) for e in history.events if e.kind is EventKind.APPEND]
    assert appended == [("r0", None), ("r0", RESENT)]


def test_an_upstream_that_does_not_resend_ignores_the_step() -> None:
    with_step, _ = run_once(forward, RESENT_ONCE, EO)
    without, _ = run_once(forward, steps(Produce(0, 2), Run(20), Run(20)), EO)
    assert with_step.events == without.events


def test_upstream_resends_is_a_checked_topology_flag_that_round_trips() -> None:
    assert Topology.from_json(RESENDS.to_json()) == RESENDS
    assert Topology.from_json({"partitions": 1, "keys": 3, "sinks": {"out": {"kind": "log"}}}) == (
        Topology()
    )
    with pytest.raises(ConfigError, match="upstream_resends must be True or False, got 1"):
        Topology(upstream_resends=1)  # type: ignore[arg-type]


# -- the checker -------------------------------------------------------------------------------


def test_output_per_position_under_resends_is_a_duplicate_and_per_id_is_valid() -> None:
    _, verdict = run_once(forward, RESENT_ONCE, EO, topology=RESENDS)
    assert verdict.status is Status.INVALID
    (anomaly,) = verdict.anomalies
    assert anomaly.kind is AnomalyKind.DUPLICATE and anomaly.count == 2
    _, tolerated = run_once(forward, RESENT_ONCE, ALO, topology=RESENDS)
    assert tolerated.status is Status.VALID  # at-least-once tolerates the copies
    _, verdict = run_once(forward_new_ids, RESENT_ONCE, EO, topology=RESENDS)
    assert verdict.status is Status.VALID, verdict.summary()


def test_a_record_output_from_neither_copy_is_lost_once() -> None:
    _, verdict = run_once(drop_resent, RESENT_ONCE, ALO, topology=RESENDS)
    assert verdict.status is Status.INVALID
    lost = [a for a in verdict.anomalies if a.kind is AnomalyKind.LOST]
    assert lost and lost[0].count == 1 and verdict.stats["lost"] == 1


def test_a_resent_record_is_counted_once_in_an_aggregate() -> None:
    _, verdict = run_once(count_positions, RESENT_ONCE, EO, topology=COUNTED)
    assert verdict.status is Status.INVALID
    assert {a.kind for a in verdict.anomalies} == {AnomalyKind.COUNT_MISMATCH}
    _, verdict = run_once(count_ids, RESENT_ONCE, EO, topology=COUNTED)
    assert verdict.status is Status.VALID, verdict.summary()


def _resent_history(*changes: tuple[int, dict[str, Any]]) -> History:
    history, _ = run_once(forward_new_ids, RESENT_ONCE, EO, topology=RESENDS)
    events = list(history.events)
    for index, fields in changes:
        events[index] = replace(events[index], **fields)
    return History(history.meta, tuple(events))


def _first(history: History, kind: EventKind, record_id: str, detail: str | None) -> int:
    return next(
        e.index
        for e in history.events
        if e.kind is kind and e.record_id == record_id and e.detail == detail
    )


def test_the_validator_accepts_a_resend_and_reads_of_either_copy() -> None:
    history = _resent_history()
    assert validate(history) == []
    assert check(history, EO).status is Status.VALID


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"detail": None}, "appends record 'r0' again; it was appended at event"),
        ({"record_id": "r9"}, "resends record 'r9', which was not appended before it"),
        ({"value": 99}, "resends record 'r0' with another partition, key or value than its"),
        ({"key": "k9"}, "resends record 'r0' with another partition, key or value than its"),
    ],
)
def test_the_validator_refuses_a_resend_that_is_not_a_copy(
    change: dict[str, Any], problem: str
) -> None:
    clean = _resent_history()
    at = _first(clean, EventKind.APPEND, "r0", RESENT)
    problems = validate(_resent_history((at, change)))
    assert problems and problem in problems[0], problems
    assert check(_resent_history((at, change)), EO).status is Status.UNKNOWN


def test_a_read_at_no_place_of_the_record_is_a_log_duplicate_or_an_inconsistent_offset() -> None:
    """A read is the reader's word for where the record is: at an offset where the record
    was never appended it is a second copy in the log (nothing else there) or a second
    record at that offset (issue 31); either way a checked anomaly, not a malformed file."""
    clean = _resent_history()
    read = max(e.index for e in clean.events if e.kind is EventKind.READ and e.record_id == "r0")
    moved = _resent_history((read, {"offset": 3}))
    assert validate(moved) == []
    found = {a.kind for a in (*check(moved, EO).anomalies, *check(moved, EO).tolerated)}
    held = {e.offset for e in clean.events if e.kind is EventKind.ACK and e.partition == "in-0"}
    expected = AnomalyKind.INCONSISTENT_OFFSETS if 3 in held else AnomalyKind.LOG_DUPLICATE
    assert expected in found


# -- the search ------------------------------------------------------------------------------


def _faults(planned: Iterable[Any]) -> set[Fault]:
    return {fault for p in planned for fault in p.faults}


def test_resends_are_planned_only_for_an_upstream_that_resends() -> None:
    assert Fault.RESEND in _faults(plan(forward, RESENDS).schedules)
    assert Fault.RESEND not in _faults(plan(forward, Topology()).schedules)
    assert Fault.RESEND not in _faults(plan(forward, RESENDS, faults=["crash"]).schedules)
    pairs = {p.faults for p in plan(forward, RESENDS).schedules if p.pair}
    assert {(Fault.CRASH, Fault.RESEND), (Fault.RESEND, Fault.CRASH)} <= pairs


def test_a_resend_is_a_fault_point_for_guidance() -> None:
    history, _ = run_once(forward, RESENT_ONCE, EO, topology=RESENDS)
    assert ("resend", "commit") in fault_points(history)
    history, _ = run_once(forward, RESENT_ONCE, EO)
    assert not any(fault == "resend" for fault, _ in fault_points(history))


def test_deduplicating_in_memory_needs_a_crash_between_the_copies() -> None:
    bug, twin = PITFALLS["dedup_ids_in_memory"], PITFALLS["dedup_ids_in_transaction"]
    assert bug.topology == twin.topology == RESENDING
    crash_between = steps(Produce(0, 2), Run(20), Crash(), Restart(), Resend(0, 2), Run(20))
    no_crash = steps(Produce(0, 2), Run(20), Resend(0, 2), Run(20))
    assert run_once(bug.processor, no_crash, EO, topology=RESENDING)[1].status is Status.VALID
    _, verdict = run_once(bug.processor, crash_between, EO, topology=RESENDING)
    assert {a.kind for a in verdict.anomalies} == {AnomalyKind.DUPLICATE}
    for schedule in (no_crash, crash_between):
        assert run_once(twin.processor, schedule, EO, topology=RESENDING)[1].status is (
            Status.VALID
        )


def test_a_resend_of_an_ordered_sink_judges_order_by_first_positions() -> None:
    ordered = Topology(sinks={"out": log_sink(ordered=True)}, upstream_resends=True)
    _, verdict = run_once(forward_new_ids, RESENT_ONCE, EO, topology=ordered)
    assert verdict.status is Status.VALID, verdict.summary()
