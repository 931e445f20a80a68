"""Committed positions read as positions: a commit past a partition's end is recorded where it
points, not clamped to the end, so the checker flags it ``offset-ahead`` when it is made."""

from __future__ import annotations

import harness
from harness import AnomalyKind, Produce, Run, Schedule, Topology
from harness.history import EventKind
from harness.sim.context import Context

TWO = Topology(partitions=2)


def mirror_offsets(ctx: Context) -> None:
    """Bug: after each record of ``in-0`` it stores that record's ``next`` for *every*
    partition, taking the busy partition's position for the idle one's."""
    out = ctx.output("out")
    source = ctx.read_all({p: ctx.offsets.get(p) for p in ctx.partitions})
    for record in source:
        out.emit(record)
        out.commit()
        for partition in ctx.partitions:
            ctx.offsets.put(partition, record.next)


def own_offsets(ctx: Context) -> None:
    """Correct: each partition's offset is its own record's ``next``."""
    out = ctx.output("out")
    source = ctx.read_all({p: ctx.offsets.get(p) for p in ctx.partitions})
    for record in source:
        out.emit(record)
        out.commit()
        ctx.offsets.put(record.partition, record.next)


IDLE_SECOND = Schedule([Produce(partition=0, count=3), Run(calls=40)])
"""Three records on the first partition, none on the second: no fault at all."""


def test_a_commit_past_an_empty_partitions_end_is_offset_ahead() -> None:
    history, verdict = harness.run_once(mirror_offsets, IDLE_SECOND, "at-least-once", topology=TWO)
    commits = [e for e in history.events if e.kind is EventKind.COMMIT and e.partition == "in-1"]
    # the position is kept as committed: 1, 2, 3 past an empty partition's start
    assert [e.offset for e in commits] == [1, 2, 3]
    assert AnomalyKind.OFFSET_AHEAD in {a.kind for a in verdict.anomalies}
    _, fixed = harness.run_once(own_offsets, IDLE_SECOND, "at-least-once", topology=TWO)
    assert fixed.ok, fixed.summary()


def test_a_commit_past_a_shorter_partitions_end_is_offset_ahead() -> None:
    """3 records on one partition, 1 on the other (in one producer batch each): the second
    partition is committed at position 2 and 3 while it ends at 1."""
    schedule = Schedule([Produce(partition=1, count=1), Produce(partition=0, count=3), Run(40)])
    history, verdict = harness.run_once(mirror_offsets, schedule, "at-least-once", topology=TWO)
    ahead = [a for a in verdict.anomalies if a.kind is AnomalyKind.OFFSET_AHEAD]
    assert ahead, verdict.summary()
    commits = [e.offset for e in history.events if e.kind is EventKind.COMMIT]
    assert max(c for c in commits if c is not None) == 3


def test_commit_positions_within_the_log_are_unchanged() -> None:
    history, verdict = harness.run_once(
        own_offsets,
        Schedule([Produce(count=3), Produce(partition=1, count=2), Run(40)]),
        "at-least-once",
        topology=TWO,
    )
    assert verdict.ok
    assert [(e.partition, e.offset) for e in history.events if e.kind is EventKind.COMMIT] == [
        ("in-0", 1),
        ("in-0", 2),
        ("in-0", 3),
        ("in-1", 1),
        ("in-1", 2),
    ]
