"""Kafka Streams exactly-once: read-process-write in one transaction, zombies fenced by epoch.

Seed: ``kafka-streams-exactly-once.txt``. A running count per key: read a record, update the
count in the state store, write the new count to the output (the count's changelog topic,
here the ``counts`` table) and commit the input offset. With ``processing.guarantee =
exactly_once`` the state update, the output and the offset commit are one transaction, and
the transactional producer's epoch fences an older instance (a zombie that was taken over
while paused) so it cannot commit after the new owner started.

The bugs are the two the seed describes. In at-least-once mode the count is written and the
offset committed separately, so a crash between them makes the restarted application fetch
the record again and count it twice ("the application state will be updated twice").
Without fencing, a zombie that wakes up after a takeover commits transactions for records the
new owner also counts.

Kafka never delivers a record twice within one consumer session, so the duplicate-delivery
fault is not part of this scenario.
"""

from __future__ import annotations

from harness import AnomalyKind, Context, Fault, Guarantee, Scenario, Subject, Topology, table_sink
from harness.faults import ALL_FAULTS

__all__ = ["SCENARIO"]

P = "in-0"


def _transactional_count(ctx: Context, *, fenced: bool) -> None:
    if fenced:
        ctx.claim()  # initTransactions: bump the producer epoch, fencing older instances
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction(fenced=fenced)
        count = (txn.get("counts", record.key) or 0) + 1
        txn.put("counts", record.key, count)
        txn.commit({P: record.next})  # output, changelog and offset, atomically


def exactly_once(ctx: Context) -> None:
    """Correct: each record's count update and its offset commit are one transaction, tied
    to this instance's producer epoch."""
    _transactional_count(ctx, fenced=True)


def at_least_once_mode(ctx: Context) -> None:
    """Bug: processing.guarantee=at_least_once: the count is written, then the offset is
    committed; a crash between them counts the record again after the restart."""
    counts = ctx.table("counts")
    for record in ctx.read(P, ctx.offsets.get(P)):
        counts.put(record.key, (counts.get(record.key) or 0) + 1)
        ctx.offsets.put(P, record.next)


def without_fencing(ctx: Context) -> None:
    """Bug: transactions without producer epochs: a zombie that was taken over while paused
    still commits, counting records the new owner counts too."""
    _transactional_count(ctx, fenced=False)


TOPOLOGY = Topology(sinks={"counts": table_sink("count")})
SCOPE = ALL_FAULTS - {Fault.DUPLICATE}

SCENARIO = Scenario(
    name="kafka-streams-exactly-once",
    title="Kafka Streams exactly-once count (transactions and fencing)",
    seed="kafka-streams-exactly-once.txt",
    variants=(
        Subject("exactly-once", exactly_once, Guarantee.EXACTLY_ONCE, TOPOLOGY, scope=SCOPE),
        Subject(
            "at-least-once-mode",
            at_least_once_mode,
            Guarantee.EXACTLY_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.COUNT_MISMATCH}),
            needs=frozenset({Fault.CRASH}),
            scope=SCOPE,
        ),
        Subject(
            "without-fencing",
            without_fencing,
            Guarantee.EXACTLY_ONCE,
            TOPOLOGY,
            expected=frozenset({AnomalyKind.COUNT_MISMATCH}),
            needs=frozenset({Fault.ZOMBIE}),
            scope=SCOPE,
        ),
    ),
)
