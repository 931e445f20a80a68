"""Alpakka Kafka pitfall: conditional processing to message-dependent topics.

Seed: ``alpakka-kafka-at-least-once-pitfalls.txt``, "Conditional Message Processing" and
"Publishing to Message-Dependent Topics". Messages go to different topics depending on their
content: odd values to ``topic2``, even ones to ``topic3``, and the value 5 to both (a
``MultiMessage``). One producer flow that writes to any topic keeps the messages in order, so
committing after each keeps at-least-once. Sending the ``topic3`` messages off to a distinct
flow that commits on its own breaks it: that flow is slower (it writes in pairs), and the main
flow commits offsets past messages the other flow has not produced yet.
"""

from __future__ import annotations

from harness import (
    AnomalyKind,
    Context,
    Delivery,
    Fault,
    Guarantee,
    Scenario,
    Subject,
    Topology,
    log_sink,
)
from harness.sim import OutputLog

__all__ = ["SCENARIO"]

P = "in-0"
TOPICS = ("topic2", "topic3")


def destinations(msg: Delivery) -> tuple[str, ...]:
    """The topics a message is produced to."""
    if msg.value == 5:
        return TOPICS
    return ("topic2",) if msg.value % 2 else ("topic3",)


def _produce(producers: dict[str, OutputLog], msg: Delivery) -> None:
    topics = destinations(msg)
    for part, topic in enumerate(topics):
        producers[topic].emit(msg, part=part, parts=len(topics))
    for topic in topics:
        producers[topic].commit()


def one_flow(ctx: Context) -> None:
    """Correct: one producer flow writes each message to its topics (ProducerRecord names the
    topic), then the offset is committed, in message order."""
    producers = {topic: ctx.output(topic) for topic in TOPICS}
    for msg in ctx.read(P, ctx.offsets.get(P)):
        _produce(producers, msg)
        ctx.offsets.put(P, msg.next)


def split_flows(ctx: Context) -> None:
    """Bug: ``topic3`` messages go to a distinct flow that writes them in pairs and commits
    on its own, while the main flow commits offsets past them."""
    producers = {topic: ctx.output(topic) for topic in TOPICS}
    side: list[Delivery] = []
    source = ctx.read(P, ctx.offsets.get(P))
    while True:
        msg = source.poll()
        if msg is None:
            if side:  # the side flow's timeout: write what it has
                for pending in side:
                    _produce(producers, pending)
                ctx.offsets.put(P, side[-1].next)
                side.clear()
            msg = next(source)
        if destinations(msg) == ("topic3",):
            side.append(msg)
            if len(side) == 2:
                for pending in side:
                    _produce(producers, pending)
                ctx.offsets.put(P, side[-1].next)
                side.clear()
            continue
        _produce(producers, msg)
        ctx.offsets.put(P, msg.next)


TOPOLOGY = Topology(sinks={topic: log_sink() for topic in TOPICS})

SCENARIO = Scenario(
    name="alpakka-conditional",
    title="Alpakka: conditional processing to message-dependent topics",
    seed="alpakka-kafka-at-least-once-pitfalls.txt",
    variants=(
        Subject("one-flow", one_flow, Guarantee.AT_LEAST_ONCE, TOPOLOGY),
        Subject(
            "split-flows",
            split_flows,
            Guarantee.AT_LEAST_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH}),
        ),
    ),
)
