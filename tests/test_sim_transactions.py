"""Transactions, poison records and in-processor choices: the simulator features that the
Kafka Streams, Alpakka and Gearpump scenarios are built on, shown event by event."""

from __future__ import annotations

from typing import Any

import pytest

from harness.check import Guarantee, Status, check
from harness.errors import ConfigError
from harness.faults import Crash, Produce, Reorder, Run, RunZombie, Schedule, Takeover
from harness.history import EventKind, History
from harness.sim import Backend, Context, Topology, log_sink, simulate, table_sink

P = "in-0"
BACKENDS = pytest.mark.parametrize("backend", ["memory", "leveldb"])
BOTH = Topology(sinks={"out": log_sink(), "counts": table_sink("count")})


def kinds(history: History, *wanted: EventKind) -> list[tuple[str, Any, Any]]:
    return [
        (e.kind.value, e.process, e.txn if e.kind.value.startswith("txn") else e.record_id)
        for e in history.events
        if e.kind in wanted
    ]


def txn_counter(ctx: Context) -> None:
    ctx.claim()
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction()
        txn.emit("out", record)
        txn.put("counts", record.key, (txn.get("counts", record.key) or 0) + 1)
        txn.commit({P: record.next})


@BACKENDS
def test_a_committed_transaction_writes_output_table_and_offset_together(
    backend: Backend,
) -> None:
    history = simulate(
        txn_counter, Schedule((Produce(0, 2), Run(20))), topology=BOTH, backend=backend
    )
    txn_events = kinds(history, EventKind.TXN_BEGIN, EventKind.TXN_COMMIT, EventKind.EMIT)
    assert txn_events[:6] == [
        ("txn-begin", 1, 1),
        ("emit", 1, "r0"),
        ("txn-commit", 1, 1),
        ("txn-begin", 1, 2),
        ("emit", 1, "r1"),
        ("txn-commit", 1, 2),
    ]
    emits = [e for e in history.events if e.kind is EventKind.EMIT]
    assert [e.txn for e in emits[:2]] == [1, 2]
    # the commit event of the offset and the put of the count come with the txn commit
    i = next(e.index for e in history.events if e.kind is EventKind.TXN_COMMIT)
    assert [history.events[j].kind for j in range(i - 2, i)] == [EventKind.COMMIT, EventKind.PUT]
    assert check(history, Guarantee.EXACTLY_ONCE).status is Status.VALID


@BACKENDS
@pytest.mark.parametrize("calls", range(3, 8))
def test_a_crash_inside_a_transaction_aborts_all_of_it(backend: Backend, calls: int) -> None:
    # calls: claim, fetch, read, begin, emit, get, put, commit (the 8th call commits)
    history = simulate(
        txn_counter,
        Schedule((Produce(0, 1), Run(calls), Crash()), drain=False),
        topology=BOTH,
        backend=backend,
    )
    events = kinds(history, EventKind.TXN_BEGIN, EventKind.TXN_COMMIT, EventKind.TXN_ABORT)
    if calls >= 4:  # the transaction began
        assert events == [("txn-begin", 1, 1), ("txn-abort", 1, 1)]
    else:
        assert events == []
    assert not [e for e in history.events if e.kind in (EventKind.COMMIT, EventKind.PUT)]
    # nothing of the aborted transaction is visible, and the run then recovers it all
    drained = simulate(txn_counter, Schedule((Produce(0, 1), Run(calls), Crash())), topology=BOTH)
    assert check(drained, Guarantee.EXACTLY_ONCE).status is Status.VALID


def test_a_fenced_zombie_cannot_commit_its_transaction() -> None:
    schedule = Schedule((Produce(0, 1), Run(5), Takeover(), Run(20), RunZombie(5)))
    history = simulate(txn_counter, schedule, topology=BOTH)
    zombie = [e for e in history.events if e.process == 1]
    assert [e.kind.value for e in zombie if e.kind.value.startswith(("txn", "error"))] == [
        "txn-begin",
        "txn-abort",
        "error",
    ]
    error = next(e for e in zombie if e.kind is EventKind.ERROR)
    assert error.detail is not None and error.detail.startswith("Fenced: ")
    assert check(history, Guarantee.EXACTLY_ONCE).status is Status.VALID


def unfenced_count(ctx: Context) -> None:
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction(fenced=False)
        txn.put("counts", record.key, (txn.get("counts", record.key) or 0) + 1)
        txn.commit({P: record.next})


def test_an_unfenced_zombie_commits_and_double_counts() -> None:
    topology = Topology(sinks={"counts": table_sink("count")})
    schedule = Schedule((Produce(0, 1), Run(2), Takeover(), Run(20), RunZombie(5)))
    history = simulate(unfenced_count, schedule, topology=topology)
    commits = [e.process for e in history.events if e.kind is EventKind.TXN_COMMIT]
    assert commits == [2, 1]
    verdict = check(history, Guarantee.EXACTLY_ONCE)
    assert verdict.status is Status.INVALID
    assert [a.kind.value for a in verdict.anomalies] == ["count-mismatch"]


def test_transaction_misuse_is_a_config_error() -> None:
    def unclaimed(ctx: Context) -> None:
        ctx.transaction()

    with pytest.raises(ConfigError, match=r"needs a producer epoch: call ctx.claim\(\) first"):
        simulate(unclaimed, Schedule((Run(5),)), topology=BOTH)

    def nested(ctx: Context) -> None:
        ctx.transaction(fenced=False)
        ctx.transaction(fenced=False)

    with pytest.raises(ConfigError, match="already has transaction 1 open"):
        simulate(nested, Schedule((Run(5),)), topology=BOTH)

    def reused(ctx: Context) -> None:
        txn = ctx.transaction(fenced=False)
        txn.commit()
        txn.put("counts", "k", 1)

    with pytest.raises(ConfigError, match="transaction 1 is already committed or aborted"):
        simulate(reused, Schedule((Run(5),)), topology=BOTH)

    def bad_table(ctx: Context) -> None:
        ctx.transaction(fenced=False).put("nope", "k", 1)

    with pytest.raises(ConfigError, match="'nope' is not a table sink"):
        simulate(bad_table, Schedule((Run(5),)), topology=BOTH)


def test_an_aborted_transaction_shows_nothing() -> None:
    def abort_odd(ctx: Context) -> None:
        for record in ctx.read(P, None):
            txn = ctx.transaction(fenced=False)
            txn.emit("out", record)
            if record.offset % 2:
                txn.abort()
            else:
                txn.commit()

    history = simulate(abort_odd, Schedule((Produce(0, 2), Run(20))))
    observed = [e.record_id for e in history.events if e.kind is EventKind.OBSERVE]
    assert "r0" in observed and "r1" not in observed
    verdict = check(history, Guarantee.AT_LEAST_ONCE)
    assert [a.kind.value for a in verdict.anomalies] == ["lost"]


# -- poison records ------------------------------------------------------------------------


@BACKENDS
def test_poison_records_are_marked_and_exempt(backend: Backend) -> None:
    seen: list[tuple[str, bool, str, int]] = []

    def skip_poison(ctx: Context) -> None:
        out = ctx.output("out")
        for record in ctx.read(P, None):
            seen.append((record.record_id, record.poison, record.key, record.value))
            if not record.poison:
                out.emit(record)
                out.commit()

    topology = Topology(poison_every=3)
    history = simulate(skip_poison, Schedule((Produce(0, 6), Run(30))), topology=topology)
    assert [s for s in seen if s[1]] == [("r2", True, "", 0), ("r5", True, "", 0)]
    appends = {e.record_id: e.detail for e in history.events if e.kind is EventKind.APPEND}
    assert appends == {
        "r0": None,
        "r1": None,
        "r2": "poison",
        "r3": None,
        "r4": None,
        "r5": "poison",
    }
    assert check(history, Guarantee.EXACTLY_ONCE).status is Status.VALID


def test_poison_every_is_validated_and_round_trips() -> None:
    topology = Topology(poison_every=5)
    assert Topology.from_json(topology.to_json()) == topology
    assert Topology.from_json({**Topology().to_json()} | {"poison_every": 0}) == Topology()
    for bad in (-1, 1.5, True, 10_001):
        with pytest.raises(ConfigError, match="poison_every must be an int in"):
            Topology(poison_every=bad)  # type: ignore[arg-type]


# -- choose --------------------------------------------------------------------------------


def test_choose_takes_the_schedules_reorder_picks() -> None:
    picks: list[int] = []

    def chooser(ctx: Context) -> None:
        for _ in ctx.read(P, None):
            picks.append(ctx.choose(3))

    simulate(chooser, Schedule((Produce(0, 3), Reorder(2), Reorder(4), Run(10))))
    assert picks == [2, 1, 0]
    with pytest.raises(ConfigError, match="choose needs an int >= 1 options, got 0"):
        simulate(lambda ctx: ctx.choose(0), Schedule((Run(1),)))
