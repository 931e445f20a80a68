"""Alpakka Kafka pitfall: committing a batch of offsets.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Batches". Messages are grouped (up to
three, or whatever is available when the source is idle) to update a store more efficiently,
and the batch's ``CommittableOffsetBatch`` is committed. It must be committed only after every
message of the batch is fully processed; the bug commits it as soon as the batch is formed, so
a crash while the batch is being processed loses the rest of it.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness import AnomalyKind, Context, Delivery, Fault, Guarantee, Scenario, Subject
from harness.sim import Source

__all__ = ["SCENARIO"]

P = "in-0"
BATCH = 3


def grouped(source: Source, size: int) -> Iterator[list[Delivery]]:
    """Batches of up to ``size`` records: a batch closes when full or when the source is
    idle (Akka's ``batch``/``groupedWithin``)."""
    while True:
        batch = [next(source)]
        while len(batch) < size and (record := source.poll()) is not None:
            batch.append(record)
        yield batch


def commit_processed_batch(ctx: Context) -> None:
    """Correct: every message of the batch is processed, then the batch's offset is
    committed."""
    out = ctx.output("out")
    for batch in grouped(ctx.read(P, ctx.offsets.get(P)), BATCH):
        for msg in batch:
            out.emit(msg)
            out.commit()
        ctx.offsets.put(P, batch[-1].next)


def commit_formed_batch(ctx: Context) -> None:
    """Bug: the batch's offset is committed as soon as the batch is formed, before its
    messages are processed."""
    out = ctx.output("out")
    for batch in grouped(ctx.read(P, ctx.offsets.get(P)), BATCH):
        ctx.offsets.put(P, batch[-1].next)
        for msg in batch:
            out.emit(msg)
            out.commit()


SCENARIO = Scenario(
    name="alpakka-batches",
    title="Alpakka: batches of committable offsets",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("commit-processed-batch", commit_processed_batch, Guarantee.AT_LEAST_ONCE),
        Subject(
            "commit-formed-batch",
            commit_formed_batch,
            Guarantee.AT_LEAST_ONCE,
            expected=frozenset({AnomalyKind.LOST, AnomalyKind.OFFSET_AHEAD}),
            needs=frozenset({Fault.CRASH}),
        ),
    ),
)
