"""A processor that truncates its own input (DistributedLog's ``truncate(dlsn)``):
``ctx.truncate`` is recorded, later readers start at the log's new start, misuse is refused
by name, and the classic bug (truncating up to what was *read*, not what is durably done) is
found by ``explore()`` with its defaults while its fixed twin is never flagged, in
particular never as a ``skip`` when its stored offset falls below the log's start.
"""

from __future__ import annotations

import dataclasses

import pytest

from harness import (
    CounterexampleFound,
    Crash,
    Guarantee,
    Produce,
    Run,
    RunZombie,
    Schedule,
    Status,
    Takeover,
    Topology,
    Truncate,
    explore,
    run_once,
)
from harness.catalogue.pitfalls import PITFALLS
from harness.catalogue.seeds import SCENARIOS
from harness.catalogue.toys import process_then_commit
from harness.check import AnomalyKind, check
from harness.errors import ConfigError
from harness.history.events import EventKind, History
from harness.log.dlsn import DLSN
from harness.sim.context import Context
from harness.sim.simulator import Processor

P = "in-0"
ALO = Guarantee.AT_LEAST_ONCE
BUG = PITFALLS["truncate_to_read_position"]
TWIN = PITFALLS["truncate_to_committed_offset"]
# four records fill the first segment, the fifth completes it: only completed segments
# can be truncated (the segment being written never is)
FIVE = [Produce(count=4), Produce(count=1)]


def _kinds(history: History, *kinds: EventKind) -> list[tuple[str, int | None, int | None]]:
    return [(e.kind.value, e.process, e.offset) for e in history.events if e.kind in kinds]


def test_a_truncation_is_recorded_and_a_restart_reads_from_the_new_start() -> None:
    # the bug truncates below r1 before r0's output is flushed; the crash lands there
    schedule = Schedule([*FIVE, Run(calls=3), Crash()])
    history, verdict = run_once(BUG.processor, schedule, ALO)
    events = _kinds(history, EventKind.TRUNCATE, EventKind.FETCH)
    assert events[:3] == [("fetch", 1, None), ("truncate", 1, 1), ("fetch", 2, None)]
    reads = [(e.process, e.offset) for e in history.events if e.kind is EventKind.READ]
    assert reads[:2] == [(1, 0), (2, 1)]  # instance 2 starts at the log's new start
    assert verdict.status is Status.INVALID
    assert {a.kind for a in verdict.anomalies} == {AnomalyKind.LOST, AnomalyKind.OFFSET_AHEAD}
    _, twin_verdict = run_once(TWIN.processor, schedule, ALO)
    assert twin_verdict.status is Status.VALID


def test_the_segment_being_written_is_never_truncated() -> None:
    # three records, all in the first (unfinished) segment: truncating hides nothing
    history, verdict = run_once(BUG.processor, Schedule([Produce(count=3), Crash()]), ALO)
    assert _kinds(history, EventKind.TRUNCATE) == []
    assert verdict.status is Status.VALID


def _truncating_with(argument: object, partition: object = P) -> Processor:
    def bad(ctx: Context) -> None:
        for record in ctx.read(P):
            if record.offset == 1:
                ctx.truncate(partition, argument)  # type: ignore[arg-type]

    return bad


@pytest.mark.parametrize(
    ("partition", "argument", "message"),
    [
        (P, DLSN(1, 0, 5), "truncate('in-0', DLSN(segment=1, entry=0, slot=5)) is beyond the end"),
        (P, DLSN(2, 0, 0), "end of the log (DLSN(segment=1, entry=0, slot=2), after its 2"),
        (P, DLSN.INVALID, "DLSN(segment=0, entry=-1, slot=-1)) names a negative position"),
        (P, DLSN(1, -1, 0), "DLSN(segment=1, entry=-1, slot=0)) names a negative position"),
        (P, 3, "truncate('in-0', ...) takes a DLSN (a Delivery's .dlsn or .next, or a stored "),
        (P, None, "takes a DLSN (a Delivery's .dlsn or .next, or a stored offset), got NoneType"),
        (P, "1/0/0", "got str: '1/0/0'"),
        ("in-7", DLSN(1, 0, 0), "unknown input partition 'in-7'"),
        (0, DLSN(1, 0, 0), "unknown input partition 0"),
    ],
)
def test_bad_truncations_are_refused_by_value(
    partition: object, argument: object, message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        run_once(_truncating_with(argument, partition), Schedule([Produce(count=2)]), ALO)
    assert message in str(refused.value)


def test_truncating_at_the_end_of_the_log_is_allowed() -> None:
    # the twin's last truncation is at r4.next, the end of the log: allowed, and it hides
    # nothing of the segment being written (r4's)
    history, verdict = run_once(TWIN.processor, Schedule([*FIVE, Run(calls=30)]), ALO)
    assert _kinds(history, EventKind.TRUNCATE)[-1] == ("truncate", 1, 4)
    assert verdict.status is Status.VALID


def test_a_zombies_truncation_is_fenced() -> None:
    def truncate_first(ctx: Context) -> None:
        for record in ctx.read(P):
            ctx.truncate(P, record.next)

    schedule = Schedule([*FIVE, Run(calls=1), Takeover(), RunZombie(calls=5)])
    history, _ = run_once(truncate_first, schedule, ALO)
    errors = [e.detail for e in history.events if e.kind is EventKind.ERROR]
    assert errors and errors[0] is not None and errors[0].startswith("Fenced: instance 1")
    assert not any(e.process == 1 for e in history.events if e.kind is EventKind.TRUNCATE)


def test_the_fetch_records_where_the_reader_resumes_so_the_twin_is_not_a_skip() -> None:
    """The twin stores its offset (unsynced), then truncates to it; a machine crash keeps the
    first stored offset only, below the log's new start. The restart resumes at the log's
    start, and the ``fetch`` event says so; and the ``skip`` rule compares a read with the
    log's start too, so a fetch of the stored offset would not make that read a ``skip``
    (the truncated records were done: nothing is ``lost``)."""
    schedule = Schedule([*FIVE, Run(calls=30), Crash(machine=True, keep=1)])
    history, verdict = run_once(TWIN.processor, schedule, ALO)
    assert verdict.status is Status.VALID, verdict.summary()
    [rollback] = [e for e in history.events if e.kind is EventKind.ROLLBACK]
    fetch = [e for e in history.events if e.kind is EventKind.FETCH][-1]
    assert rollback.offset == 1 and fetch.offset == 4 and fetch.dlsn == DLSN(1, 0, 1).serialize()
    stored = dataclasses.replace(fetch, offset=rollback.offset)
    events = tuple(stored if e is fetch else e for e in history.events)
    assert check(History(history.meta, events), ALO).status is Status.VALID


def test_an_open_reader_fails_rather_than_jump_over_records_truncated_under_it() -> None:
    """A zombie's open reader, behind the new owner's truncation, raises
    ``AlreadyTruncatedTransaction`` (the zombie dies of it) instead of silently jumping to
    the log's new start, which the ``skip`` rule would flag although nothing is wrong."""
    schedule = Schedule(
        [*FIVE, Run(calls=30), Takeover(), Produce(count=4), Produce(count=4), Run(calls=100)]
    )
    history, verdict = run_once(TWIN.processor, Schedule([*schedule.steps, RunZombie()]), ALO)
    assert verdict.status is Status.VALID, verdict.summary()
    errors = [(e.process, e.detail) for e in history.events if e.kind is EventKind.ERROR]
    assert errors[0][0] == 1 and "AlreadyTruncatedTransaction" in str(errors[0][1])


def test_retention_under_a_zombies_open_reader_is_not_a_skip_either() -> None:
    """The same hole existed with retention alone: the new owner's durable offset let the
    ``Truncate`` fault pass the zombie's reader, which read on past the gap (``skip``)."""
    synced = Topology(offset_sync=True)
    steps = [*FIVE, Run(calls=30), Takeover(), Produce(count=4), Produce(count=4), Run(calls=100)]
    schedule = Schedule([*steps, Truncate(partition=0, upto=13), RunZombie(calls=10)])
    history, verdict = run_once(process_then_commit, schedule, ALO, topology=synced)
    assert _kinds(history, EventKind.TRUNCATE) == [("truncate", None, 12)]
    assert verdict.status is Status.VALID, verdict.summary()


def test_a_reader_opened_after_a_truncation_that_followed_its_fetch_fails() -> None:
    """A zombie fetched its offset, then the new owner truncated past it before the zombie
    opened its reader: the reader fails instead of starting after the fetched offset."""

    def fetch_then_look_then_read(ctx: Context) -> None:
        out = ctx.output("out")
        start = ctx.offsets.get(P)
        out.last()  # a fault point between the fetch and the reader's opening
        for record in ctx.read(P, start):
            out.emit(record)
            out.commit()
            ctx.offsets.put(P, record.next)
            ctx.truncate(P, record.next)

    steps = [Produce(count=4), Produce(count=4), Produce(count=1), Run(calls=9), Crash()]
    schedule = Schedule([*steps, Run(calls=1), Takeover(), Run(calls=100), RunZombie(calls=5)])
    history, verdict = run_once(fetch_then_look_then_read, schedule, ALO)
    assert verdict.status is Status.VALID, verdict.summary()
    fetches = [(e.process, e.offset) for e in history.events if e.kind is EventKind.FETCH]
    assert (2, 1) in fetches
    errors = [(e.process, e.detail) for e in history.events if e.kind is EventKind.ERROR]
    assert errors[0][0] == 2 and "AlreadyTruncatedTransaction" in str(errors[0][1])


def test_a_reader_opened_beyond_the_end_of_the_log_is_not_taken_for_truncated() -> None:
    """Records appended below a reader's start are not owed to it: no error, no gap."""

    def from_the_second_segment(ctx: Context) -> None:
        out = ctx.output("out")
        for record in ctx.read(P, DLSN(2, 0, 0)):  # the first record of the second segment
            out.emit(record)
            out.commit()

    schedule = Schedule([Run(calls=2), *FIVE, Produce(count=1), Run(calls=10)])
    history, _ = run_once(from_the_second_segment, schedule, ALO)
    assert not [e for e in history.events if e.kind is EventKind.ERROR]
    assert [e.offset for e in history.events if e.kind is EventKind.READ] == [4, 5]


def test_default_explore_finds_the_bug_alike_on_both_backends() -> None:
    with pytest.raises(CounterexampleFound) as caught:
        explore(BUG.processor, guarantee=BUG.guarantee, topology=BUG.topology, failures_dir=None)
    failure = caught.value.failure
    assert AnomalyKind.LOST in {a.kind for a in failure.verdict.anomalies}
    runs = [
        run_once(BUG.processor, failure.schedule, ALO, backend=backend)
        for backend in ("memory", "leveldb")
    ]
    (memory, on_memory), (leveldb, on_leveldb) = runs
    assert memory.events == leveldb.events
    assert on_memory.to_json() == on_leveldb.to_json()
    assert on_memory.status is Status.INVALID
    twin_history, twin_verdict = run_once(TWIN.processor, failure.schedule, ALO)
    assert twin_verdict.status is Status.VALID
    assert twin_history.events == run_once(TWIN.processor, failure.schedule, ALO)[0].events


def test_the_twin_holds_a_search_and_is_never_a_skip() -> None:
    held = explore(
        TWIN.processor,
        guarantee=TWIN.guarantee,
        topology=Topology(segment_records=2),
        max_examples=400,
        failures_dir=None,
    )
    assert held.examples == 400


@pytest.mark.parametrize("scenario", ["kafka-client-async-commit", "kafka-client-kafka-python"])
def test_a_zombie_consumer_reset_past_retention_is_not_a_skip(scenario: str) -> None:
    """Found by the nightly false-alarm run: the new owner commits, retention truncates what
    it committed, and the fenced zombie's consumer resets to the earliest record left. Its
    read past the log's start skips nothing a reader could still read (every output is
    observed), so the correct consumer holds."""
    variant = SCENARIOS[scenario].variant("correct")
    schedule = Schedule.from_json(
        '{"version":1,"drain":true,"steps":[{"op":"produce","partition":0,"count":1,"ack":true},'
        '{"op":"run","calls":6},{"op":"produce","partition":0,"count":4,"ack":true},'
        '{"op":"takeover"},{"op":"run","calls":6},{"op":"truncate","partition":0,"upto":2},'
        '{"op":"run-zombie","calls":1}]}'
    )
    history, verdict = run_once(
        variant.processor, schedule, variant.guarantee, topology=variant.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert any(e.kind is EventKind.TRUNCATE for e in history.events)
