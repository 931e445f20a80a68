"""Gearpump's persistent count: monoid state checkpointed with its clock, replayed from the
global minimum checkpoint clock.

Seed: ``gearpump-at-least-once-and-exactly-once.txt``. Every message carries a timestamp (here:
the record's production number, increasing within each partition). A ``CountProcessor``
keeps a ``NonWindowState[Long]`` that adds 1 per message (a monoid: ``+`` with identity 0).
Each task checkpoints its state *together with* the checkpoint time to a persistent store;
Gearpump tracks the global minimum checkpoint clock over all tasks. On restart every task
restores its state at that minimum clock and the time-replayable source replays messages from
it, dropping those a task has already counted: each message updates the state exactly once.

Here two source partitions feed two count tasks (one per partition); a task checkpoints at
every multiple of three timestamps. The total per key is published to the ``counts`` table in
the same atomic write as the task's checkpoint, so the published counts must equal the
number of acknowledged records per key.

The bugs: the clock is persisted in its own write before the state (a crash between them pairs
a clock with no state at it, and the restored task starts from nothing); and the source
replays from the *newest* checkpoint clock instead of the minimum (a task that checkpointed
less recently never sees the messages between its clock and the newest one).

Gearpump's master runs one incarnation of a task at a time, so the zombie fault is not part
of this scenario; neither are ticks (checkpoints follow the message clock, not a timer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness import (
    AnomalyKind,
    Context,
    Delivery,
    Fault,
    Guarantee,
    Scenario,
    Subject,
    Topology,
    table_sink,
)
from harness.faults import ALL_FAULTS

__all__ = ["SCENARIO"]

P = "in-0"

CHECKPOINT_EVERY = (3, 4)
"""Per count task, how far the message clock moves between its checkpoints."""
TASKS = len(CHECKPOINT_EVERY)


def timestamp(record: Delivery) -> int:
    return int(record.record_id[1:])


def task_of(key: str) -> int:
    """The count task of a key (the partitioner after the source)."""
    return int(key[1:]) % TASKS


@dataclass
class _Task:
    number: int
    counts: dict[str, int]
    clock: int
    """The checkpoint time of ``counts``: every message before it is counted, no later one."""


def _restore(ctx: Context, number: int) -> _Task:
    clock = ctx.offsets.get_state(f"clock:{number}")
    state = ctx.offsets.get_state(f"state:{number}")
    counts = {} if state is None else dict(json.loads(state))
    return _Task(number, counts, 0 if clock is None else int(clock))


def _checkpoint(ctx: Context, task: _Task, clock: int, *, clock_first: bool) -> None:
    state = {
        f"state:{task.number}": json.dumps(task.counts, sort_keys=True).encode(),
        f"clock:{task.number}": str(clock).encode(),
    }
    if clock_first:
        ctx.offsets.commit(state={f"clock:{task.number}": state.pop(f"clock:{task.number}")})
    ctx.offsets.commit(state=state)
    task.clock = clock


def _persistent_count(ctx: Context, *, replay_from_newest: bool, clock_first: bool) -> None:
    tasks = [_restore(ctx, number) for number in range(TASKS)]
    clocks = [task.clock for task in tasks]
    replay_from = max(clocks) if replay_from_newest else min(clocks)
    # the time-replayable source replays from ``replay_from``; each task drops what its
    # restored state already holds (and a message delivered twice)
    newest = [max(replay_from, task.clock) - 1 for task in tasks]
    for record in ctx.read(P, None):
        ts = timestamp(record)
        if ts < replay_from:
            continue
        for task in tasks:  # the message clock may pass a task's checkpoint time
            if ts >= task.clock + CHECKPOINT_EVERY[task.number] and ts > newest[task.number]:
                _checkpoint(ctx, task, ts, clock_first=clock_first)
        task = tasks[task_of(record.key)]
        if ts <= newest[task.number]:
            continue
        newest[task.number] = ts
        task.counts[record.key] = task.counts.get(record.key, 0) + 1
        # the task emits its whole state: the published counts follow it
        ctx.offsets.commit(tables={"counts": dict(task.counts)})


def persistent_count(ctx: Context) -> None:
    """Correct: each checkpoint writes the state and its clock in one atomic write, and a
    restart restores every task at the global minimum checkpoint clock and replays from it."""
    _persistent_count(ctx, replay_from_newest=False, clock_first=False)


def clock_saved_apart(ctx: Context) -> None:
    """Bug: the checkpoint clock is persisted in its own write before the state; a crash
    between them leaves a clock with no state at it, and the task restarts from nothing."""
    _persistent_count(ctx, replay_from_newest=False, clock_first=True)


def replay_from_newest_clock(ctx: Context) -> None:
    """Bug: every task restores its own newest checkpoint and the source replays from the
    newest clock of all tasks, so a task that checkpointed less recently misses messages."""
    _persistent_count(ctx, replay_from_newest=True, clock_first=False)


TOPOLOGY = Topology(sinks={"counts": table_sink("count")})
SCOPE = ALL_FAULTS - {Fault.ZOMBIE, Fault.TICK}

SCENARIO = Scenario(
    name="gearpump-persistent-count",
    title="Gearpump persistent count (exactly-once monoid state)",
    seed="gearpump-at-least-once-and-exactly-once.txt",
    variants=(
        Subject(
            "persistent-count", persistent_count, Guarantee.EXACTLY_ONCE, TOPOLOGY, scope=SCOPE
        ),
        Subject(
            "clock-saved-apart",
            clock_saved_apart,
            Guarantee.EXACTLY_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.COUNT_MISMATCH}),
            needs=frozenset({Fault.CRASH}),
            scope=SCOPE,
        ),
        Subject(
            "replay-from-newest-clock",
            replay_from_newest_clock,
            Guarantee.EXACTLY_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.COUNT_MISMATCH}),
            needs=frozenset({Fault.CRASH, Fault.REORDER}),
            scope=SCOPE,
        ),
    ),
)
