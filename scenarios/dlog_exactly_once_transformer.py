"""DistributedLog exactly-once transformer: deduplicate against the last output on restart.

Seed: the DistributedLog tutorials (``dlog-core-library-api.txt``, and
``reference/distributedlog-semantics.md`` section 6 for the real ``StreamTransformer``). Each
output record carries the DLSN of the source record it was made from. On start the
transformer reads the *last* record of the target log, opens the source reader at that source
DLSN and skips every source record at or before it, so whatever reached the target before a
crash is not produced again; nothing else needs an offset store.

The classic bug keeps the resume point but forgets the skip: the reader opens *at* the last
source DLSN, so the record whose output is already in the target is transformed again after
every restart.

DistributedLog's writer is single-owner and its commit is not blindly retried, so the
lost-acknowledgement fault (a client retry) is not part of this scenario.
"""

from __future__ import annotations

from harness import AnomalyKind, Context, Fault, Guarantee, Scenario, Subject
from harness.faults import ALL_FAULTS

__all__ = ["SCENARIO"]

P = "in-0"


def _transformer(ctx: Context, *, dedup: bool) -> None:
    target = ctx.output("out")
    last = target.last()  # getLastLogRecord; an empty target means InitialDLSN
    from_dlsn = None if last is None else last.source
    for record in ctx.read(P, from_dlsn):
        if dedup and from_dlsn is not None and record.dlsn <= from_dlsn:
            continue
        target.emit(record)  # TransformedRecord{payload, srcDlsn}
        target.commit()
        from_dlsn = record.dlsn


def stream_transformer(ctx: Context) -> None:
    """Correct: resume at the last output's source DLSN and skip source records at or before
    it, also a redelivered one."""
    _transformer(ctx, dedup=True)


def transformer_without_dedup(ctx: Context) -> None:
    """Bug: resumes at the last output's source DLSN but does not skip it, so the last
    transformed record is written again after a restart."""
    _transformer(ctx, dedup=False)


SCOPE = ALL_FAULTS - {Fault.LOSE_ACK}

SCENARIO = Scenario(
    name="dlog-exactly-once-transformer",
    title="DistributedLog exactly-once transformer (dedup by source DLSN)",
    seed="dlog-core-library-api.txt",
    variants=(
        Subject("stream-transformer", stream_transformer, Guarantee.EXACTLY_ONCE, scope=SCOPE),
        Subject(
            "transformer-without-dedup",
            transformer_without_dedup,
            Guarantee.EXACTLY_ONCE,
            expected=frozenset({AnomalyKind.DUPLICATE}),
            needs=frozenset({Fault.CRASH}),
            scope=SCOPE,
        ),
    ),
)
