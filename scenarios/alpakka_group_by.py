"""Alpakka Kafka pitfall: ``groupBy`` substreams.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Using groupBy". Messages are split into
substreams that run concurrently and are merged back (``mergeSubstreams``) before the
committer. Messages of different substreams can overtake each other, so at-least-once holds
only if all messages of one partition go to the same substream: then each partition's offsets
still reach the committer in order. Grouping by an arbitrary key puts messages of one
partition into different substreams, and a later message's offset can be committed while an
earlier one waits in another substream.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from harness import AnomalyKind, Context, Delivery, Fault, Guarantee, Scenario, Subject, Topology

__all__ = ["SCENARIO"]

IN_FLIGHT = 4
"""Messages buffered in the substreams at most (the stream's buffer)."""


def _grouped_flow(ctx: Context, group: Callable[[Delivery], str]) -> None:
    out = ctx.output("out")
    source = ctx.read_all({p: ctx.offsets.get(p) for p in ctx.partitions})
    substreams: dict[str, deque[Delivery]] = {}
    buffered = 0
    while True:
        while buffered < IN_FLIGHT and (msg := source.poll()) is not None:
            substreams.setdefault(group(msg), deque()).append(msg)
            buffered += 1
        busy = [queue for queue in substreams.values() if queue]
        if not busy:
            msg = next(source)
            substreams.setdefault(group(msg), deque()).append(msg)
            buffered += 1
            continue
        msg = busy[ctx.choose(len(busy))].popleft()  # whichever substream is faster
        buffered -= 1
        out.emit(msg)
        out.commit()
        ctx.offsets.put(msg.partition, msg.next)  # after mergeSubstreams: the committer


def group_by_partition(ctx: Context) -> None:
    """Correct: one substream per partition, so each partition's offsets are committed in
    order."""
    _grouped_flow(ctx, lambda msg: msg.partition)


def group_by_key(ctx: Context) -> None:
    """Bug: substreams by message key; messages of one partition in different substreams
    reach the committer out of order."""
    _grouped_flow(ctx, lambda msg: msg.key)


TOPOLOGY = Topology(partitions=2)

SCENARIO = Scenario(
    name="alpakka-group-by",
    title="Alpakka: groupBy substreams",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("group-by-partition", group_by_partition, Guarantee.AT_LEAST_ONCE, TOPOLOGY),
        Subject(
            "group-by-key",
            group_by_key,
            Guarantee.AT_LEAST_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH, Fault.REORDER}),
        ),
    ),
)
