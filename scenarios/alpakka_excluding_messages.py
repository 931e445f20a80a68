"""Alpakka Kafka pitfall: excluding messages that fail to deserialize.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Excluding Messages". Every fifth record
is undeserializable (``Topology(poison_every=5)``); it produces nothing, but the consumer must
still move past it. Good messages are written in batches (up to three, or what is there when
the source is idle), so some are usually on their way downstream. The correct flow passes the
bad message's offset through in order (``PassThroughMessage``): it is committed with the
batch it arrived in. The bug commits the bad message's offset at once, past good messages
still in the open batch, and a crash loses them.
"""

from __future__ import annotations

from harness import AnomalyKind, Context, Delivery, Fault, Guarantee, Scenario, Subject, Topology

__all__ = ["SCENARIO"]

P = "in-0"
BATCH = 3


def _flow(ctx: Context, *, commit_bad_at_once: bool) -> None:
    out = ctx.output("out")
    batch: list[Delivery] = []

    def flush() -> None:
        if any(not msg.poison for msg in batch):
            out.commit()
        ctx.offsets.put(P, batch[-1].next)
        batch.clear()

    source = ctx.read(P, ctx.offsets.get(P))
    while True:
        msg = source.poll()
        if msg is None:
            if batch:
                flush()
            msg = next(source)
        if msg.poison and commit_bad_at_once:
            ctx.offsets.put(P, msg.next)
            continue
        if not msg.poison:
            out.emit(msg)
        batch.append(msg)  # a bad message rides along as a pass-through
        if len(batch) == BATCH:
            flush()


def pass_through(ctx: Context) -> None:
    """Correct: a bad message passes its offset through the flow in order and is committed
    with its batch."""
    _flow(ctx, commit_bad_at_once=False)


def commit_bad_at_once(ctx: Context) -> None:
    """Bug: a bad message's offset is committed as soon as it is seen, past good messages
    still in the open batch."""
    _flow(ctx, commit_bad_at_once=True)


TOPOLOGY = Topology(poison_every=5)

SCENARIO = Scenario(
    name="alpakka-excluding-messages",
    title="Alpakka: excluding messages that fail to deserialize",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("pass-through", pass_through, Guarantee.AT_LEAST_ONCE, TOPOLOGY),
        Subject(
            "commit-bad-at-once",
            commit_bad_at_once,
            Guarantee.AT_LEAST_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.LOST, AnomalyKind.OFFSET_AHEAD}),
            needs=frozenset({Fault.CRASH}),
        ),
    ),
)
