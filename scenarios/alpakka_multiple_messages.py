"""Alpakka Kafka pitfall: several messages produced per consumed message.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Multiple Effects per Commit / Multiple
Messages". Each consumed message becomes two produced messages, one to ``topic2`` and one to
``topic3`` (a ``ProducerMessage.MultiMessage``). To keep at-least-once, the consumed message's
offset may be committed only after *all* its messages are produced. The bug commits after the
first one: a crash before the second is produced loses it, and the restarted consumer never
sees the message again.
"""

from __future__ import annotations

from harness import AnomalyKind, Context, Fault, Guarantee, Scenario, Subject, Topology, log_sink

__all__ = ["SCENARIO"]

P = "in-0"
TOPICS = ("topic2", "topic3")


def multi_message(ctx: Context) -> None:
    """Correct: both messages are produced (MultiMessage through one producer flow), then the
    offset is committed."""
    producers = [ctx.output(topic) for topic in TOPICS]
    for msg in ctx.read(P, ctx.offsets.get(P)):
        for part, producer in enumerate(producers):
            producer.emit(msg, part=part, parts=len(TOPICS))
        for producer in producers:
            producer.commit()
        ctx.offsets.put(P, msg.next)


def commit_after_first(ctx: Context) -> None:
    """Bug: the offset is committed once the first message is produced; a crash before the
    second one is produced loses it."""
    producers = [ctx.output(topic) for topic in TOPICS]
    for msg in ctx.read(P, ctx.offsets.get(P)):
        for part, producer in enumerate(producers):
            producer.emit(msg, part=part, parts=len(TOPICS))
            producer.commit()
            if part == 0:
                ctx.offsets.put(P, msg.next)


TOPOLOGY = Topology(sinks={topic: log_sink() for topic in TOPICS})

SCENARIO = Scenario(
    name="alpakka-multiple-messages",
    title="Alpakka: several messages per consumed message",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("multi-message", multi_message, Guarantee.AT_LEAST_ONCE, TOPOLOGY),
        Subject(
            "commit-after-first",
            commit_after_first,
            Guarantee.AT_LEAST_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH}),
        ),
    ),
)
