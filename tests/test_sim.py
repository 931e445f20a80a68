"""The simulator's semantics: each schedule step, shown on a tiny processor, event by event.

Every test runs a hand-written processor under a hand-written schedule and asserts the exact
events of the history (kinds, processes, offsets, record ids, details). Record ``i`` (the
``i``-th record the producer writes, over all partitions) is ``r{i}`` with key ``k{i % 3}``
and value ``i % 5 + 1``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings

from harness.catalogue.toys import (
    COUNTS,
    atomic_counter,
    process_then_commit,
    retrying_transformer,
    two_step_counter,
)
from harness.check import Guarantee, Status, check, validate
from harness.engine import run_once
from harness.errors import ConfigError
from harness.faults import (
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Restart,
    Run,
    RunZombie,
    Schedule,
    Takeover,
    Tick,
    Truncate,
)
from harness.history import EventKind, History
from harness.log.dlsn import DLSN
from harness.sim import Backend, Context, Delivery, Processor, Topology, simulate
from harness.strategies import schedules

P = "in-0"
NO_DRAIN = "incomplete: the schedule has no drain"
BACKENDS = pytest.mark.parametrize("backend", ["memory", "leveldb"])
Row = dict[str, Any]


# -- expected events ---------------------------------------------------------------------------


def rows(history: History, *kinds: str) -> list[Row]:
    """The events of ``kinds`` (all if none), each as its non-null fields but index and dlsn."""
    return [
        {k: v for k, v in event.to_row().items() if v is not None and k not in ("index", "dlsn")}
        for event in history.events
        if not kinds or event.kind.value in kinds
    ]


def dlsns(history: History, kind: str) -> list[str | None]:
    return [event.dlsn for event in history.events if event.kind.value == kind]


def rec(i: int) -> Row:
    return {"record_id": f"r{i}", "key": f"k{i % 3}", "value": i % 5 + 1}


def start(process: int) -> Row:
    return {"kind": "start", "process": process}


def fetch(process: int, offset: int | None = None) -> Row:
    row: Row = {"kind": "fetch", "process": process, "partition": P}
    if offset is not None:
        row["offset"] = offset
    return row


def append(i: int, offset: int, partition: str = P) -> Row:
    return {"kind": "append", "partition": partition, "offset": offset, **rec(i)}


def ack(i: int, offset: int, partition: str = P) -> Row:
    return {"kind": "ack", "partition": partition, "offset": offset, "record_id": f"r{i}"}


def produced(first: int, count: int, offset: int = 0, partition: str = P) -> list[Row]:
    """The events of one acknowledged Produce: every APPEND, then every ACK."""
    ids = range(first, first + count)
    return [append(i, offset + n, partition) for n, i in enumerate(ids)] + [
        ack(i, offset + n, partition) for n, i in enumerate(ids)
    ]


def read(
    process: int, i: int, offset: int, partition: str = P, *, redelivered: bool = False
) -> Row:
    row: Row = {
        "kind": "read",
        "process": process,
        "partition": partition,
        "offset": offset,
        "record_id": f"r{i}",
    }
    if redelivered:
        row["detail"] = "redelivered"
    return row


def emit(process: int, i: int, output_id: int) -> Row:
    return {
        "kind": "emit",
        "process": process,
        "sink": "out",
        "output_id": output_id,
        "part": 0,
        "parts": 1,
        **rec(i),
    }


def commit(process: int, offset: int, partition: str = P) -> Row:
    return {"kind": "commit", "process": process, "partition": partition, "offset": offset}


def observe(i: int, output_id: int) -> Row:
    return {
        "kind": "observe",
        "sink": "out",
        "output_id": output_id,
        "part": 0,
        "parts": 1,
        **rec(i),
    }


def put(process: int, key: str, value: int) -> Row:
    return {"kind": "put", "process": process, "sink": "counts", "key": key, "value": value}


def counted(key: str, value: int) -> Row:
    return {"kind": "observe", "sink": "counts", "key": key, "value": value}


def crash(process: int, *, machine: bool = False) -> Row:
    return {"kind": "crash", "process": process, "detail": "machine" if machine else "process"}


def rollback(offset: int | None, partition: str = P) -> Row:
    row: Row = {"kind": "rollback", "partition": partition}
    if offset is not None:
        row["offset"] = offset
    return row


def truncate(offset: int, partition: str = P) -> Row:
    return {"kind": "truncate", "partition": partition, "offset": offset}


def zombie(process: int) -> Row:
    return {"kind": "zombie", "process": process}


def error(process: int, detail: str) -> Row:
    return {"kind": "error", "process": process, "detail": detail}


def end(detail: str = "complete") -> Row:
    return {"kind": "end", "detail": detail}


DRAIN: Row = {"kind": "drain"}


# -- processors --------------------------------------------------------------------------------

CALLS = ("get", "get_state", "last", "emit", "commit", "put", "claim", "poll")


def recording(made: list[str]) -> Processor:
    """Makes one Context call of each kind, appending its name once the call returned."""

    def processor(ctx: Context) -> None:
        out = ctx.output()
        ctx.offsets.get(P)
        made.append("get")
        ctx.offsets.get_state("s")
        made.append("get_state")
        out.last()
        made.append("last")
        out.emit("x")
        made.append("emit")
        out.commit()
        made.append("commit")
        ctx.offsets.put(P, DLSN.INITIAL)
        made.append("put")
        ctx.claim()
        made.append("claim")
        ctx.read(P).poll()
        made.append("poll")

    return processor


def six_fetches(ctx: Context) -> None:
    for _ in range(6):
        ctx.offsets.get(P)


def offsets_only(ctx: Context) -> None:
    """Stores the offset after each record; no output."""
    for record in ctx.read(P, ctx.offsets.get(P)):
        ctx.offsets.put(P, record.next)


def offset_before_output_commit(ctx: Context) -> None:
    """Emits, stores the offset, then commits the output (so a crash can lose outputs)."""
    out = ctx.output()
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        ctx.offsets.put(P, record.next)
        out.commit()


def idempotent_then_commit(ctx: Context) -> None:
    out = ctx.output("out", idempotent=True)
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def asynchronous(ordered: bool, completed: list[str]) -> Processor:
    """Runs three records at a time through map_async; emits each result as it is yielded."""

    def processor(ctx: Context) -> None:
        out = ctx.output()

        def work(record: Delivery) -> int:
            completed.append(record.record_id)
            return record.offset

        source = ctx.read(P, None)
        for record, _ in ctx.map_async(work, source, parallelism=3, ordered=ordered):
            out.emit(record)

    return processor


def merged(ctx: Context) -> None:
    for _ in ctx.read_all({p: None for p in ctx.partitions}):
        pass


def timer_commits(ctx: Context) -> None:
    """Reads without committing; only its timer stores the offset after the last record."""
    done: list[Delivery] = []

    def store() -> None:
        if done:
            ctx.offsets.put(P, done[-1].next)

    ctx.on_timer(store)
    for record in ctx.read(P, ctx.offsets.get(P)):
        done.append(record)


def claiming(fenced: bool) -> Processor:
    def processor(ctx: Context) -> None:
        ctx.claim()
        for record in ctx.read(P, None):
            ctx.offsets.commit({P: record.next}, fenced=fenced)

    return processor


def reads_from_start(ctx: Context) -> None:
    """Always reads from the log's first record; stores offsets (so retention can truncate)."""
    for record in ctx.read(P, None):
        ctx.offsets.put(P, record.next)


def fails_in_first(ctx: Context) -> None:
    ctx.offsets.get(P)
    if ctx.instance == 1:
        raise ValueError("boom in 1")


def always_fails(ctx: Context) -> None:
    ctx.offsets.get(P)
    raise RuntimeError(f"broken {ctx.instance}")


def swallows_exceptions(ctx: Context) -> None:
    """Catches every Exception around its reads: a crash must still stop it."""
    source = ctx.read(P, ctx.offsets.get(P))
    while True:
        try:
            record = next(source)
            ctx.offsets.put(P, record.next)
        except Exception:  # swallowing everything is the point
            continue


def run(
    processor: Processor,
    *steps: Any,
    drain: bool = True,
    backend: Backend = "memory",
    topology: Topology | None = None,
) -> History:
    return simulate(
        processor,
        Schedule(tuple(steps), drain=drain),
        topology=topology,
        backend=backend,
    )


# -- instances and Run -------------------------------------------------------------------------


def test_instance_1_starts_before_the_first_step() -> None:
    made: list[str] = []
    assert rows(run(recording(made), drain=False)) == [start(1), end(NO_DRAIN)]
    history = run(recording(made), Produce(), drain=False)
    assert rows(history) == [start(1), *produced(0, 1), end(NO_DRAIN)]
    assert made == []  # started, but it makes no call before a Run


@pytest.mark.parametrize("calls", range(len(CALLS) + 2))
def test_run_lets_the_instance_make_exactly_that_many_calls(calls: int) -> None:
    made: list[str] = []
    run(recording(made), Run(calls), drain=False)
    assert made == list(CALLS[:calls])


def test_run_steps_add_up_and_each_pauses_before_the_next_call() -> None:
    made: list[str] = []
    run(recording(made), Run(2), Run(1), Run(3), drain=False)
    assert made == list(CALLS[:6])
    # the pause is before the next call: nothing of it happens until the next Run
    history = run(six_fetches, Run(3), Produce(), Run(2), Produce(), Run(1), drain=False)
    assert rows(history) == [
        start(1),
        fetch(1),
        fetch(1),
        fetch(1),
        *produced(0, 1),
        fetch(1),
        fetch(1),
        *produced(1, 1, offset=1),
        fetch(1),
        end(NO_DRAIN),
    ]


def test_run_zero_makes_no_call() -> None:
    made: list[str] = []
    run(recording(made), Run(1), Run(0), Run(0), drain=False)
    assert made == ["get"]


def test_run_zombie_zero_makes_no_call() -> None:
    history = run(six_fetches, Run(1), Takeover(), RunZombie(0), drain=False)
    assert rows(history) == [start(1), fetch(1), zombie(1), start(2), end(NO_DRAIN)]


def test_a_blocked_read_ends_the_step_early() -> None:
    history = run(
        process_then_commit,
        Run(10),  # fetch, then the read blocks: the step ends after 2 of its 10 calls
        Produce(),
        Run(2),  # the blocked read returns r0; emit; output commit; pauses before the put
        Produce(),
        Run(1),  # the offset put
        drain=False,
    )
    assert rows(history) == [
        start(1),
        fetch(1),
        *produced(0, 1),
        read(1, 0, 0),
        emit(1, 0, 0),
        *produced(1, 1, offset=1),
        commit(1, 1),
        observe(0, 0),
        end(NO_DRAIN),
    ]


def test_run_with_no_active_instance_starts_one() -> None:
    history = run(six_fetches, Run(1), Crash(), Run(2), drain=False)
    assert rows(history) == [
        start(1),
        fetch(1),
        crash(1),
        start(2),
        fetch(2),
        fetch(2),
        end(NO_DRAIN),
    ]


def test_a_finished_processor_stays_finished() -> None:
    history = run(six_fetches, Run(100), Run(100), Restart())
    assert rows(history) == [start(1), *[fetch(1)] * 6, DRAIN, end()]


# -- Crash -------------------------------------------------------------------------------------


@BACKENDS
def test_process_crash_loses_uncommitted_outputs_and_keeps_offsets(backend: Backend) -> None:
    history = run(
        offset_before_output_commit,
        Produce(count=2),
        Run(8),  # ... read r1, emit it, store offset 2; paused before the output commit
        Crash(),
        backend=backend,
    )
    assert rows(history) == [
        start(1),
        *produced(0, 2),
        fetch(1),
        read(1, 0, 0),
        emit(1, 0, 0),
        commit(1, 1),
        read(1, 1, 1),
        emit(1, 1, 1),
        commit(1, 2),
        crash(1),
        DRAIN,
        start(2),
        fetch(2, 2),  # the offset (unsynced, but a process crash keeps it) survived
        observe(0, 0),  # output 1 was emitted but never committed: gone
        end(),
    ]


@BACKENDS
@pytest.mark.parametrize("keep", [0, 2, 4, 10])
def test_machine_crash_loses_unsynced_offsets_after_the_first_keep(
    backend: Backend, keep: int
) -> None:
    history = run(
        offsets_only, Produce(count=4), Run(100), Crash(machine=True, keep=keep), backend=backend
    )
    survived = min(keep, 4)
    assert rows(history) == [
        start(1),
        *produced(0, 4),
        fetch(1),
        *[row for i in range(4) for row in (read(1, i, i), commit(1, i + 1))],
        crash(1, machine=True),
        *([rollback(survived or None)] if survived < 4 else []),
        DRAIN,
        start(2),
        fetch(2, survived or None),
        *[row for i in range(survived, 4) for row in (read(2, i, i), commit(2, i + 1))],
        end(),
    ]
    if 0 < survived < 4:  # the rollback names the DLSN that was committed as that offset
        [rolled] = dlsns(history, "rollback")
        assert rolled == dlsns(history, "commit")[survived - 1]
    if survived == 0:
        assert dlsns(history, "rollback") == [None]


@BACKENDS
def test_machine_crash_loses_unsynced_writes_of_earlier_instances_too(backend: Backend) -> None:
    history = run(
        offsets_only,
        Produce(count=4),
        Run(3),  # instance 1 stores offset 1 (unsynced write 1)
        Crash(),  # a process crash keeps it
        Run(4),  # instance 2 stores offset 2 (unsynced write 2), reads r2
        Crash(machine=True, keep=1),  # keeps write 1 only
        backend=backend,
    )
    assert rows(history, "start", "fetch", "read", "commit", "crash", "rollback", "end") == [
        start(1),
        fetch(1),
        read(1, 0, 0),
        commit(1, 1),
        crash(1),
        start(2),
        fetch(2, 1),
        read(2, 1, 1),
        commit(2, 2),
        read(2, 2, 2),
        crash(2, machine=True),
        rollback(1),
        start(3),
        fetch(3, 1),
        read(3, 1, 1),
        commit(3, 2),
        read(3, 2, 2),
        commit(3, 3),
        read(3, 3, 3),
        commit(3, 4),
        end(),
    ]


def test_machine_crash_is_identical_on_both_backends() -> None:
    schedule = Schedule(
        (
            Produce(count=5),
            Run(5),  # instance 1 stores 1, 2
            Crash(),
            Run(4),  # instance 2 stores 3
            Crash(machine=True, keep=1),  # back to 1
            Run(6),  # instance 3 stores 2, 3
            Crash(machine=True, keep=2),  # both kept: no rollback
            Run(3),  # instance 4 stores 4
            Crash(machine=True, keep=0),  # back to 3: earlier writes survived a machine crash
        )
    )
    memory = simulate(offsets_only, schedule, backend="memory")
    leveldb = simulate(offsets_only, schedule, backend="leveldb")
    assert memory.events == leveldb.events
    assert rows(memory, "crash", "rollback") == [
        crash(1),
        crash(2, machine=True),
        rollback(1),
        crash(3, machine=True),
        crash(4, machine=True),
        rollback(3),
    ]


@BACKENDS
def test_machine_crash_with_synced_offsets_loses_nothing(backend: Backend) -> None:
    history = run(
        offsets_only,
        Produce(count=4),
        Run(100),
        Crash(machine=True, keep=0),
        backend=backend,
        topology=Topology(offset_sync=True),
    )
    assert rows(history, "crash", "rollback", "drain", "start", "fetch", "read", "end") == [
        start(1),
        fetch(1),
        *[read(1, i, i) for i in range(4)],
        crash(1, machine=True),
        DRAIN,
        start(2),
        fetch(2, 4),
        end(),
    ]


@BACKENDS
def test_machine_crash_rolls_back_table_state_with_offsets(backend: Backend) -> None:
    history = run(
        atomic_counter,
        Produce(count=3),
        Run(100),
        Crash(machine=True, keep=1),
        backend=backend,
        topology=COUNTS,
    )
    assert rows(history, "commit", "put", "crash", "rollback", "fetch", "observe", "end") == [
        fetch(1),
        commit(1, 1),
        put(1, "k0", 1),
        commit(1, 2),
        put(1, "k1", 1),
        commit(1, 3),
        put(1, "k2", 1),
        crash(1, machine=True),
        rollback(1),
        fetch(2, 1),
        commit(2, 2),
        put(2, "k1", 1),  # the lost k1 = 1 is not there: counted from scratch again
        commit(2, 3),
        put(2, "k2", 1),
        counted("k0", 1),
        counted("k1", 1),
        counted("k2", 1),
        end(),
    ]


def test_exceptions_caught_by_the_processor_do_not_swallow_a_crash() -> None:
    history = run(swallows_exceptions, Produce(count=2), Run(3), Crash(), drain=False)
    assert rows(history, "start", "read", "commit", "crash", "end") == [
        start(1),
        read(1, 0, 0),
        commit(1, 1),
        crash(1),
        end(NO_DRAIN),
    ]


# -- Produce -----------------------------------------------------------------------------------


@BACKENDS
def test_unacknowledged_produce_is_never_read_and_its_offsets_are_reused(backend: Backend) -> None:
    history = run(
        process_then_commit, Produce(count=2, ack=False), Produce(), Run(100), backend=backend
    )
    assert rows(history) == [
        start(1),
        append(0, 0),
        append(1, 1),  # no ACK: the producer crashed before its commit
        append(2, 0),  # the next record takes offset 0 again
        ack(2, 0),
        fetch(1),
        read(1, 2, 0),
        emit(1, 2, 0),
        commit(1, 1),
        DRAIN,
        observe(2, 0),
        end(),
    ]
    assert dlsns(history, "ack") == [DLSN.INITIAL.serialize()]


@BACKENDS
def test_produce_to_several_partitions(backend: Backend) -> None:
    history = run(
        merged,
        Produce(1, 2),
        Produce(0, 1),
        Produce(1, 1),
        Run(100),
        backend=backend,
        topology=Topology(partitions=2),
    )
    assert rows(history, "append", "ack", "read") == [
        *produced(0, 2, partition="in-1"),
        *produced(2, 1, partition="in-0"),
        *produced(3, 1, offset=2, partition="in-1"),
        read(1, 2, 0, "in-0"),
        read(1, 0, 0, "in-1"),
        read(1, 1, 1, "in-1"),
        read(1, 3, 2, "in-1"),
    ]


# -- Duplicate, LoseAck ------------------------------------------------------------------------


def test_duplicate_redelivers_the_last_record() -> None:
    history = run(
        process_then_commit,
        Produce(count=2),
        Run(5),  # r0 processed and its offset stored; paused before the next read
        Duplicate(),
        Run(100),
    )
    assert rows(history, "read", "emit", "commit", "observe", "end") == [
        read(1, 0, 0),
        emit(1, 0, 0),
        commit(1, 1),
        read(1, 0, 0, redelivered=True),
        emit(1, 0, 1),
        commit(1, 1),
        read(1, 1, 1),
        emit(1, 1, 2),
        commit(1, 2),
        observe(0, 0),
        observe(0, 1),
        observe(1, 2),
        end(),
    ]
    first, again, _ = dlsns(history, "read")
    assert first == again


def test_duplicate_before_any_read_redelivers_the_first_record_read() -> None:
    history = run(offsets_only, Produce(count=2), Duplicate(), Run(100))
    assert rows(history, "read") == [
        read(1, 0, 0),
        read(1, 0, 0, redelivered=True),
        read(1, 1, 1),
    ]


@BACKENDS
@pytest.mark.parametrize(
    ("processor", "observed"),
    [
        (process_then_commit, [observe(0, 0), observe(0, 0)]),
        (idempotent_then_commit, [observe(0, 0)]),
    ],
    ids=["plain", "idempotent"],
)
def test_lose_ack_retries_the_committed_batch(
    backend: Backend, processor: Processor, observed: list[Row]
) -> None:
    history = run(processor, Produce(), Run(2), LoseAck(), Run(100), backend=backend)
    assert rows(history) == [
        start(1),
        *produced(0, 1),
        fetch(1),
        read(1, 0, 0),
        emit(1, 0, 0),
        commit(1, 1),
        DRAIN,
        *observed,
        end(),
    ]


def test_lose_ack_retries_the_whole_batch() -> None:
    def two_per_batch(ctx: Context) -> None:
        out = ctx.output()
        for record in ctx.read(P, ctx.offsets.get(P)):
            out.emit(record)
            if record.offset % 2 == 1:
                out.commit()
                ctx.offsets.put(P, record.next)

    history = run(two_per_batch, Produce(count=4), LoseAck(), Run(100))
    assert rows(history, "observe") == [
        observe(0, 0),
        observe(1, 1),
        observe(0, 0),
        observe(1, 1),
        observe(2, 2),
        observe(3, 3),
    ]


@BACKENDS
def test_lose_ack_retries_a_table_put(backend: Backend) -> None:
    history = run(
        two_step_counter, Produce(), LoseAck(), Run(100), backend=backend, topology=COUNTS
    )
    assert rows(history, "put", "commit", "observe") == [
        put(1, "k0", 1),
        put(1, "k0", 1),
        commit(1, 1),
        counted("k0", 1),
    ]


# -- Reorder -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("picks", "completed"),
    [
        ((), ["r0", "r1", "r2"]),
        ((2,), ["r2", "r0", "r1"]),
        ((1, 1), ["r1", "r2", "r0"]),
        ((5, 1), ["r2", "r1", "r0"]),  # picks are taken modulo the in-flight tasks
    ],
)
@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_reorder_picks_which_async_task_completes(
    picks: tuple[int, ...], completed: list[str], ordered: bool
) -> None:
    done: list[str] = []
    history = run(
        asynchronous(ordered, done),
        Produce(count=3),
        *[Reorder(pick) for pick in picks],
        Run(100),
        drain=False,
    )
    assert done == completed
    yielded = ["r0", "r1", "r2"] if ordered else completed
    ids = {"r0": 0, "r1": 1, "r2": 2}
    assert rows(history, "read", "emit") == [
        read(1, 0, 0),
        read(1, 1, 1),
        read(1, 2, 2),
        *[emit(1, ids[rid], n) for n, rid in enumerate(yielded)],
    ]


@pytest.mark.parametrize(
    ("picks", "order"),
    [
        ((), [(0, "in-0"), (1, "in-0"), (2, "in-1"), (3, "in-1")]),
        ((1, 0, 1), [(2, "in-1"), (0, "in-0"), (3, "in-1"), (1, "in-0")]),
        ((1, 1), [(2, "in-1"), (3, "in-1"), (0, "in-0"), (1, "in-0")]),
    ],
)
def test_reorder_interleaves_partitions(
    picks: tuple[int, ...], order: list[tuple[int, str]]
) -> None:
    history = run(
        merged,
        Produce(0, 2),
        Produce(1, 2),
        *[Reorder(pick) for pick in picks],
        Run(100),
        topology=Topology(partitions=2),
    )
    offsets = {0: 0, 1: 1, 2: 0, 3: 1}
    assert rows(history, "read") == [read(1, i, offsets[i], p) for i, p in order]


def test_reorder_pick_waits_for_a_real_choice() -> None:
    # with one partition there is no choice: the pick stays queued for the first real one
    done: list[str] = []
    history = run(asynchronous(False, done), Reorder(1), Produce(count=3), Run(100), drain=False)
    assert done == ["r1", "r0", "r2"]
    assert [row["record_id"] for row in rows(history, "emit")] == ["r1", "r0", "r2"]


# -- Tick --------------------------------------------------------------------------------------


def test_tick_runs_the_timers_now() -> None:
    history = run(timer_commits, Produce(count=2), Run(10), Tick(), Produce(), Run(10))
    assert rows(history) == [
        start(1),
        *produced(0, 2),
        fetch(1),
        read(1, 0, 0),
        read(1, 1, 1),
        commit(1, 2),  # the timer, at the Tick
        *produced(2, 1, offset=2),
        read(1, 2, 2),
        DRAIN,
        commit(1, 3),  # the drain fires timers until nothing changes
        commit(1, 3),
        end(),
    ]


def test_without_tick_timers_fire_only_in_the_drain() -> None:
    history = run(timer_commits, Produce(count=2), Run(10), Produce(), Run(10))
    assert rows(history, "read", "commit", "drain", "end") == [
        read(1, 0, 0),
        read(1, 1, 1),
        read(1, 2, 2),
        DRAIN,
        commit(1, 3),
        commit(1, 3),
        end(),
    ]


def test_timers_die_with_their_instance() -> None:
    history = run(timer_commits, Produce(count=2), Run(10), Crash(), Tick(), drain=False)
    assert rows(history, "read", "commit", "crash", "end") == [
        read(1, 0, 0),
        read(1, 1, 1),
        crash(1),
        end(NO_DRAIN),
    ]


# -- Takeover and RunZombie --------------------------------------------------------------------

FENCED_LOG = (
    "Fenced: instance 1 lost ownership of log 'out-out' (another instance took over); its "
    "writes are fenced"
)
FENCED_COMMIT = (
    "Fenced: instance 1 is fenced: instance 2 claimed ownership after it; a zombie must not write"
)


@BACKENDS
def test_a_zombie_output_write_raises_fenced(backend: Backend) -> None:
    history = run(
        process_then_commit,
        Produce(count=2),
        Run(2),  # fetch, read r0
        Takeover(),
        RunZombie(5),  # the zombie emits r0: Fenced
        backend=backend,
    )
    assert rows(history) == [
        start(1),
        *produced(0, 2),
        fetch(1),
        read(1, 0, 0),
        zombie(1),
        start(2),
        error(1, FENCED_LOG),
        DRAIN,
        fetch(2),
        read(2, 0, 0),
        emit(2, 0, 0),
        commit(2, 1),
        read(2, 1, 1),
        emit(2, 1, 1),
        commit(2, 2),
        observe(0, 0),
        observe(1, 1),
        end(),
    ]


@BACKENDS
def test_takeover_discards_the_zombies_uncommitted_outputs(backend: Backend) -> None:
    history = run(
        process_then_commit,
        Produce(),
        Run(3),  # fetch, read r0, emit it (not committed)
        Takeover(),
        RunZombie(1),  # its output commit: Fenced
        backend=backend,
    )
    assert rows(history, "emit", "zombie", "start", "error", "observe", "end") == [
        start(1),
        emit(1, 0, 0),
        zombie(1),
        start(2),
        error(1, FENCED_LOG),
        emit(2, 0, 1),
        observe(0, 1),
        end(),
    ]


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_zombie_commit_after_a_new_claim(fenced: bool) -> None:
    history = run(
        claiming(fenced),
        Produce(count=2),
        Run(2),  # claim, read r0
        Takeover(),
        RunZombie(1),  # instance 2 has not claimed yet: the zombie still owns the world
        Run(3),  # instance 2: claim, read r0, commit
        RunZombie(2),  # the zombie reads r1 and commits after instance 2 claimed
    )
    zombie_end = (
        [error(1, FENCED_COMMIT), DRAIN]
        if fenced
        else [commit(1, 2), DRAIN, crash(1)]  # the drain crashes a live zombie
    )
    assert rows(history, "start", "zombie", "read", "commit", "error", "crash", "drain") == [
        start(1),
        read(1, 0, 0),
        zombie(1),
        start(2),
        commit(1, 1),
        read(2, 0, 0),
        commit(2, 1),
        read(1, 1, 1),
        *zombie_end,
        read(2, 1, 1),
        commit(2, 2),
    ]


def test_a_zombie_keeps_its_place_while_the_new_instance_runs() -> None:
    history = run(six_fetches, Run(1), Takeover(), Run(2), RunZombie(2), Run(1), drain=False)
    assert rows(history) == [
        start(1),
        fetch(1),
        zombie(1),
        start(2),
        fetch(2),
        fetch(2),
        fetch(1),
        fetch(1),
        fetch(2),
        end(NO_DRAIN),
    ]


def test_run_zombie_reaches_the_next_zombie_once_the_oldest_finished() -> None:
    history = run(six_fetches, Takeover(), RunZombie(10), Takeover(), RunZombie(1), drain=False)
    assert rows(history, "fetch") == [fetch(1)] * 6 + [fetch(2)]


# -- Truncate ----------------------------------------------------------------------------------

SYNCED = Topology(offset_sync=True)


@BACKENDS
def test_truncate_never_passes_the_stored_offset(backend: Backend) -> None:
    history = run(
        process_then_commit,
        Produce(count=6),
        Truncate(0, 5),  # nothing stored yet: nothing truncated
        Run(9),  # r0 and r1 processed, offset 2 stored
        Truncate(0, 5),  # only up to the stored offset
        Truncate(0, 1),  # never back
        Truncate(0, 2),  # nothing new
        drain=False,
        backend=backend,
        topology=SYNCED,
    )
    assert rows(history, "commit", "truncate") == [commit(1, 1), commit(1, 2), truncate(2)]


@BACKENDS
def test_truncate_honours_only_offsets_a_machine_crash_cannot_take_back(
    backend: Backend,
) -> None:
    history = run(
        process_then_commit,
        Produce(count=6),
        Run(9),  # offset 2 stored, not synced
        Truncate(0, 5),  # nothing durable yet: nothing truncated
        Crash(machine=True, keep=2),  # both unsynced writes survive and are now durable
        Truncate(0, 5),
        drain=False,
        backend=backend,
    )
    assert rows(history, "commit", "truncate") == [commit(1, 1), commit(1, 2), truncate(2)]


@BACKENDS
@pytest.mark.parametrize(
    ("segment_records", "records", "low"),
    [(4, 6, 4), (4, 9, 8), (2, 8, 6), (1, 3, 2)],
)
def test_truncate_never_touches_the_segment_being_written(
    backend: Backend, segment_records: int, records: int, low: int
) -> None:
    history = run(
        offsets_only,
        Produce(count=records),
        Run(100),
        Truncate(0, records),
        drain=False,
        backend=backend,
        topology=Topology(segment_records=segment_records, offset_sync=True),
    )
    assert rows(history, "truncate") == [truncate(low)]


@BACKENDS
def test_truncated_records_are_not_read_again(backend: Backend) -> None:
    history = run(
        reads_from_start,
        Produce(count=6),
        Run(100),
        Truncate(0, 6),
        Crash(),
        backend=backend,
        topology=SYNCED,
    )
    assert rows(history, "truncate", "crash", "start", "read") == [
        start(1),
        *[read(1, i, i) for i in range(6)],
        truncate(4),
        crash(1),
        start(2),
        read(2, 4, 4),
        read(2, 5, 5),
    ]


# -- errors ------------------------------------------------------------------------------------


def test_a_processor_error_is_an_error_event() -> None:
    history = run(fails_in_first, Run(5))
    assert rows(history) == [
        start(1),
        fetch(1),
        error(1, "ValueError: boom in 1"),
        DRAIN,
        start(2),
        fetch(2),
        end(),
    ]


def test_a_processor_that_dies_on_every_start_is_incomplete() -> None:
    history = run(always_fails, Run(5))
    assert rows(history)[:4] == [start(1), fetch(1), error(1, "RuntimeError: broken 1"), DRAIN]
    assert rows(history)[4:-1] == [
        row
        for n in range(2, 8)
        for row in (start(n), fetch(n), error(n, f"RuntimeError: broken {n}"))
    ]
    detail = history.events[-1].detail
    assert detail is not None
    assert detail.startswith("incomplete: the processor died 6 times during the drain")
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    assert verdict.status is Status.UNKNOWN
    assert verdict.reasons == (detail,)


def test_the_drain_counts_every_death() -> None:
    history = run(always_fails)
    drained = history.events[[e.kind for e in history.events].index(EventKind.DRAIN) :]
    deaths = sum(event.kind is EventKind.ERROR for event in drained)
    assert deaths == 7
    detail = history.events[-1].detail
    assert detail is not None
    assert detail.startswith(f"incomplete: the processor died {deaths} times during the drain")


def test_a_harness_misuse_in_the_processor_raises_config_error() -> None:
    def bad_partition(ctx: Context) -> None:
        ctx.offsets.get("in-9")

    with pytest.raises(ConfigError, match="unknown input partition 'in-9'"):
        run(bad_partition, Run(1))


def test_a_harness_misuse_in_a_timer_raises_config_error() -> None:
    def bad_timer(ctx: Context) -> None:
        ctx.on_timer(lambda: ctx.offsets.get("in-9"))
        for _ in ctx.read(P, None):
            pass

    with pytest.raises(ConfigError, match="unknown input partition 'in-9'"):
        run(bad_timer, Run(1), Tick())


# -- determinism -------------------------------------------------------------------------------

RICH = Schedule(
    (
        Produce(count=3),
        Run(4),
        Duplicate(),
        Run(3),
        LoseAck(),
        Run(4),
        Crash(),
        Produce(count=5, ack=False),
        Produce(count=2),
        Run(6),
        Crash(machine=True, keep=1),
        Run(9),
        Truncate(0, 4),
        Takeover(),
        Run(3),
        RunZombie(3),
        Tick(),
        Restart(),
        Produce(count=2),
        Run(2),
    )
)


@BACKENDS
def test_same_processor_and_schedule_give_equal_histories(backend: Backend) -> None:
    first = simulate(process_then_commit, RICH, backend=backend)
    second = simulate(process_then_commit, RICH, backend=backend)
    assert first == second
    kinds = {event.kind.value for event in first.events}
    assert kinds >= {"crash", "rollback", "truncate", "zombie", "error", "drain", "end"}
    assert "redelivered" in {event.detail for event in first.events}
    assert first.events[-1].detail == "complete"


@pytest.mark.parametrize(
    ("processor", "topology"),
    [(process_then_commit, Topology()), (atomic_counter, COUNTS), (offsets_only, Topology())],
    ids=["process_then_commit", "atomic_counter", "offsets_only"],
)
def test_memory_and_leveldb_give_equal_events(processor: Processor, topology: Topology) -> None:
    memory = simulate(processor, RICH, topology=topology, backend="memory")
    leveldb = simulate(processor, RICH, topology=topology, backend="leveldb")
    assert memory.events == leveldb.events
    assert memory.meta.extra["backend"] == "memory"
    assert leveldb.meta.extra["backend"] == "leveldb"
    assert memory.meta.partitions == leveldb.meta.partitions
    assert memory.meta.sinks == leveldb.meta.sinks


@settings(max_examples=30)
@given(schedules(Topology(partitions=2), max_steps=12))
def test_any_drawn_schedule_runs_deterministically(schedule: Schedule) -> None:
    topology = Topology(partitions=2)
    first = simulate(merged, schedule, topology=topology)
    assert first == simulate(merged, schedule, topology=topology)
    assert validate(first) == []
    assert first.events[0].kind is EventKind.START
    assert first.events[-1].kind is EventKind.END
    assert first.meta.extra["schedule"] == schedule.to_json()


# -- steps that do not apply -------------------------------------------------------------------


def test_steps_without_an_active_instance_do_nothing() -> None:
    history = run(
        offsets_only,
        Produce(count=2),
        Crash(),
        Crash(),  # nothing running
        Crash(machine=True),
        Duplicate(),
        LoseAck(),
        Reorder(1),
        Tick(),
        RunZombie(5),  # no zombie
        Run(100),  # starts instance 2, with none of the faults above pending
    )
    assert rows(history) == [
        start(1),
        *produced(0, 2),
        crash(1),
        start(2),
        fetch(2),
        read(2, 0, 0),
        commit(2, 1),
        read(2, 1, 1),
        commit(2, 2),
        DRAIN,
        end(),
    ]


def test_restart_only_starts_an_instance_when_none_is_active() -> None:
    history = run(
        six_fetches,
        Restart(),
        Run(1),
        Restart(),
        Crash(),
        Restart(),
        Restart(),
        Run(1),
        drain=False,
    )
    assert rows(history) == [start(1), fetch(1), crash(1), start(2), fetch(2), end(NO_DRAIN)]


def test_takeover_with_no_active_instance_just_starts_one() -> None:
    history = run(six_fetches, Crash(), Takeover(), RunZombie(3), Run(1), drain=False)
    assert rows(history) == [start(1), crash(1), start(2), fetch(2), end(NO_DRAIN)]


def test_partition_numbers_beyond_the_topology_fold_onto_it() -> None:
    history = run(
        offsets_only,
        Produce(partition=5),  # 5 % 2: in-1
        Produce(partition=4, count=6),  # 4 % 2: in-0
        Run(100),
        Truncate(partition=6, upto=6),  # in-0: stored 6, the completed first segment goes
        Truncate(partition=7, upto=6),  # in-1 has no stored offset: nothing
        drain=False,
        topology=Topology(partitions=2, offset_sync=True),
    )
    assert rows(history, "append", "ack", "truncate") == [
        *produced(0, 1, partition="in-1"),
        *produced(1, 6, partition="in-0"),
        truncate(4, "in-0"),
    ]


def test_a_step_that_does_not_apply_never_raises() -> None:
    steps = [
        Crash(machine=True, keep=1_000_000),
        RunZombie(1_000_000),
        Restart(),
        Duplicate(),
        LoseAck(),
        Reorder(1_000_000),
        Tick(),
        Truncate(1_000, 10_000_000),
        Produce(1_000, 0),
        Run(0),
        Takeover(),
    ]
    for topology in (Topology(), Topology(partitions=3)):
        history = run(six_fetches, *steps, *steps, topology=topology)
        assert history.events[-1].kind is EventKind.END
        assert validate(history) == []


def test_the_drain_disarms_faults_the_schedule_armed_but_did_not_use() -> None:
    # docs/engine.md, "the drain": only what the schedule's steps did is judged
    used = Schedule([Produce(), LoseAck(), Run(calls=4)])
    unused = Schedule([LoseAck(), Produce()])
    assert run_once(retrying_transformer, used, "exactly-once")[1].status is Status.INVALID
    assert run_once(retrying_transformer, unused, "exactly-once")[1].status is Status.VALID


def rereads_its_first_record(ctx: Context) -> None:
    """Reads the first record, then opens its reader again at that record (as a processor
    retrying a failed batch does) and goes on; outputs each record once and commits it
    with its output."""
    out = ctx.output("out")
    start = ctx.offsets.get(P)
    source = ctx.read(P, start)
    first = next(iter(source))
    done: set[str] = set()
    for record in ctx.read(P, first.dlsn):
        if record.record_id not in done:
            out.emit(record)
            out.commit()
            done.add(record.record_id)
        ctx.offsets.put(P, record.next)


def test_a_reader_opened_again_below_the_last_read_is_a_seek_not_a_backward_poll() -> None:
    """Issue 31: a processor that reopens its reader below what it read moves it by its
    own word; the simulator records a ``fetch`` with detail ``seek``, so the re-read is no
    ``nonmonotonic-poll`` (exactly-once holds: each record is output once). Without that
    event the same reads are one."""
    history = simulate(rereads_its_first_record, Schedule([Produce(count=3), Run(40)]))
    verdict = check(history, Guarantee.EXACTLY_ONCE)
    assert verdict.status is Status.VALID, verdict.summary()
    seeks = [e for e in history.events if e.kind is EventKind.FETCH and e.detail == "seek"]
    assert [(e.process, e.offset) for e in seeks] == [(1, 0)]
    kept = [e for e in history.events if e is not seeks[0]]
    events = tuple(dataclasses.replace(e, index=i) for i, e in enumerate(kept))
    without = check(History(history.meta, events), Guarantee.EXACTLY_ONCE)
    assert [a.kind.value for a in without.anomalies] == ["nonmonotonic-poll"]
