"""Alpakka Kafka pitfall: non-sequential processing.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Non-Sequential Processing". Messages are
processed asynchronously, three at a time, and each finished message's offset goes to the
committer. ``mapAsync`` hands results on in input order, so a committed offset never passes
unfinished work; ``mapAsyncUnordered`` hands them on as they complete, so a larger offset is
committed while a smaller one is still in flight, and a crash then loses it.
"""

from __future__ import annotations

from harness import AnomalyKind, Context, Delivery, Fault, Guarantee, Scenario, Subject

__all__ = ["SCENARIO"]

P = "in-0"
PARALLELISM = 3


def _flow(ctx: Context, *, ordered: bool) -> None:
    out = ctx.output("out")

    def produce(msg: Delivery) -> Delivery:
        out.emit(msg)
        out.commit()
        return msg

    source = ctx.read(P, ctx.offsets.get(P))
    for msg, _ in ctx.map_async(produce, source, parallelism=PARALLELISM, ordered=ordered):
        ctx.offsets.put(P, msg.next)  # the committer commits what reaches it


def map_async(ctx: Context) -> None:
    """Correct: asynchronous processing whose results keep the input order (mapAsync)."""
    _flow(ctx, ordered=True)


def map_async_unordered(ctx: Context) -> None:
    """Bug: results in completion order (mapAsyncUnordered): a later message's offset is
    committed before an earlier message is processed."""
    _flow(ctx, ordered=False)


SCENARIO = Scenario(
    name="alpakka-non-sequential",
    title="Alpakka: non-sequential processing",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("map-async", map_async, Guarantee.AT_LEAST_ONCE),
        Subject(
            "map-async-unordered",
            map_async_unordered,
            Guarantee.AT_LEAST_ONCE,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH, Fault.REORDER}),
        ),
    ),
)
