"""Ten realistic buggy processors, each with its fixed twin, written against ``harness``'s
public API only (``Context``, ``Topology``, ``log_sink``, ``table_sink``), in the styles of
different engineers: catch-up batchers, content dedupers, cross-partition batchers,
windowed counters, asynchronous writers, lag-sensitive checkpointers, per-key buffers,
a secondary audit sink, a two-partition resume from the last output, and a per-partition
buffer flushed by a shared budget.

None of them was tuned against the search: they were written before the search changes of
issue 28 and are measured with ``explore()``'s defaults.
"""

from __future__ import annotations

from collections.abc import Iterator

import harness
from harness import Context, Delivery, Subject, Topology, log_sink, table_sink
from harness.log import DLSN

P = "in-0"
ALO = harness.Guarantee.AT_LEAST_ONCE
EO = harness.Guarantee.EXACTLY_ONCE
A = harness.AnomalyKind
LOSS = frozenset({A.LOST, A.OFFSET_AHEAD, A.SKIP})


# -- 1. a catch-up mode after a restart with a backlog ----------------------------------------

CATCH_UP = 3


def _catch_up(ctx: Context, *, flush_first: bool) -> None:
    out = ctx.output("out")
    stored = ctx.offsets.get(P)
    source = ctx.read(P, stored)
    if stored is not None:  # a restart: drain the backlog in bulk before the steady state
        backlog: list[Delivery] = []
        while (record := source.poll()) is not None:
            backlog.append(record)
        if len(backlog) >= CATCH_UP:
            for record in backlog:
                out.emit(record)
            if flush_first:
                out.commit()
                ctx.offsets.put(P, backlog[-1].next)
            else:  # "the output flush is slow; checkpoint the catch-up first"
                ctx.offsets.put(P, backlog[-1].next)
                out.commit()
        else:
            for record in backlog:
                out.emit(record)
                out.commit()
                ctx.offsets.put(P, record.next)
    for record in source:
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def catch_up_offset_first(ctx: Context) -> None:
    """Bug: after a restart with a backlog of three or more records, the bulk catch-up stores
    its offset before flushing the outputs: a crash between the two loses the backlog."""
    _catch_up(ctx, flush_first=False)


def catch_up_flush_first(ctx: Context) -> None:
    """Correct: the catch-up flushes, then stores its offset."""
    _catch_up(ctx, flush_first=True)


# -- 2. a deduplicator keyed by content --------------------------------------------------------

RESENDS = Topology(
    sinks={"out": log_sink(), "seen": table_sink()}, offset_sync=True, upstream_resends=True
)


def _dedup(ctx: Context, *, by_content: bool) -> None:
    out = ctx.output("out")
    seen = ctx.table("seen")
    for record in ctx.read(P, ctx.offsets.get(P)):
        mark = f"{record.key}/{record.value}" if by_content else record.record_id
        if not seen.get(mark):
            out.emit(record)
            out.commit()
            seen.put(mark, 1)
        ctx.offsets.put(P, record.next)


def content_dedup(ctx: Context) -> None:
    """Bug (at-least-once, an upstream that resends): drops resent records by a hash of their
    content (key and value), so two distinct records with the same content lose the second."""
    _dedup(ctx, by_content=True)


def id_dedup(ctx: Context) -> None:
    """Correct: drops resent records by their record id."""
    _dedup(ctx, by_content=False)


# -- 3. a cross-partition batch checkpointed with one high-water mark --------------------------

TWO = Topology(partitions=2)
BATCH = 4


def _batch_two(ctx: Context, *, own_position: bool) -> None:
    out = ctx.output("out")
    parts = ctx.partitions
    source = ctx.read_all({p: ctx.offsets.get(p) for p in parts})
    batch: list[Delivery] = []
    while True:
        record = source.poll()
        if record is None or len(batch) == BATCH:
            if batch:
                out.commit()
                if own_position:
                    last: dict[str, DLSN] = {}
                    for done in batch:
                        last[done.partition] = done.next
                    for p, position in last.items():
                        ctx.offsets.put(p, position)
                else:  # "the batch is done up to its highest position"
                    high = max(done.next for done in batch)
                    for p in sorted({done.partition for done in batch}):
                        ctx.offsets.put(p, high)
                batch.clear()
            if record is None:
                record = next(source)
        out.emit(record)
        batch.append(record)


def batch_high_water(ctx: Context) -> None:
    """Bug (2 partitions): a batch across partitions stores its highest position for every
    partition in it; when the partitions are uneven, one is checkpointed past records not
    yet read."""
    _batch_two(ctx, own_position=False)


def batch_own_positions(ctx: Context) -> None:
    """Correct: each partition's offset is its own last record in the batch."""
    _batch_two(ctx, own_position=True)


# -- 4. a windowed counter that persists partial windows when idle ----------------------------

COUNTS = Topology(sinks={"counts": table_sink("count")})
WINDOW = 3


def _windowed(ctx: Context, *, idle_offset: bool) -> None:
    ctx.claim()
    counts = ctx.table("counts")
    window: dict[str, int] = {}
    committed = ctx.offsets.get(P)
    source = ctx.read(P, committed)
    size = 0
    last: Delivery | None = None

    def close() -> None:
        nonlocal size, committed
        assert last is not None
        totals = {k: (counts.get(k) or 0) + n for k, n in window.items()}
        offsets = {P: last.next} if idle_offset or size == WINDOW else {}
        if committed is not None and not offsets:
            offsets = {P: committed}
        ctx.offsets.commit(offsets, tables={"counts": totals}, fenced=True)
        if P in offsets:
            committed = offsets[P]
        window.clear()
        size = 0

    while True:
        record = source.poll()
        if record is None:
            if size:
                close()  # idle: persist the partial window
            record = next(source)
        if last is not None and record.dlsn < last.next:
            continue  # a redelivery
        window[record.key] = window.get(record.key, 0) + 1
        size += 1
        last = record
        if size == WINDOW:
            close()


def window_idle_counts_only(ctx: Context) -> None:
    """Bug (exactly-once counts): when the input goes idle, the partial window's counts are
    committed with the offset of the last *full* window, so a restart counts them again."""
    _windowed(ctx, idle_offset=False)


def window_idle_counts_and_offset(ctx: Context) -> None:
    """Correct: the partial window commits its counts with its own offset."""
    _windowed(ctx, idle_offset=True)


# -- 5. an asynchronous writer flushing every fourth result ----------------------------------

FLUSH_EVERY = 4


def _async_writer(ctx: Context, *, offset_at_flush: bool) -> None:
    out = ctx.output("out")
    source = ctx.read(P, ctx.offsets.get(P))
    pending: Delivery | None = None
    results = ctx.map_async(lambda r: r.value * 2, source, parallelism=3, ordered=True)
    for done, (record, _) in enumerate(results, start=1):
        out.emit(record)
        pending = record
        if done % FLUSH_EVERY == 0:
            out.commit()
            if offset_at_flush:
                ctx.offsets.put(P, record.next)
                pending = None
        if not offset_at_flush:
            ctx.offsets.put(P, record.next)
        if offset_at_flush and pending is not None and done % FLUSH_EVERY != 0:
            out.commit()
            ctx.offsets.put(P, pending.next)
            pending = None


def async_offset_per_result(ctx: Context) -> None:
    """Bug: enrichment runs asynchronously (ordered); outputs are flushed every fourth result
    but the offset is stored after every result, ahead of the unflushed outputs."""
    _async_writer(ctx, offset_at_flush=False)


def async_offset_at_flush(ctx: Context) -> None:
    """Correct: the offset is stored only after a flush."""
    _async_writer(ctx, offset_at_flush=True)


# -- 6. a lag-sensitive checkpointer -----------------------------------------------------------

LAG = 8


def _lag_mode(ctx: Context, *, fast_flush_first: bool) -> None:
    out = ctx.output("out")
    source = ctx.read(P, ctx.offsets.get(P))
    streak = 0
    unflushed: Delivery | None = None
    while True:
        record = source.poll()
        if record is None:
            if unflushed is not None:  # idle: flush what the lagging mode left
                out.commit()
                ctx.offsets.put(P, unflushed.next)
                unflushed = None
            streak = 0
            record = next(source)
        streak += 1
        out.emit(record)
        unflushed = record
        if streak >= LAG:  # lagging: checkpoint every other record to catch up faster
            if streak % 2 == 0:
                if fast_flush_first:
                    out.commit()
                    ctx.offsets.put(P, record.next)
                else:
                    ctx.offsets.put(P, record.next)
                    out.commit()
                unflushed = None
        else:
            out.commit()
            ctx.offsets.put(P, record.next)
            unflushed = None


def lag_mode_offset_first(ctx: Context) -> None:
    """Bug: after eight records in a row without idling, it checkpoints every other record,
    and in that mode stores the offset before flushing."""
    _lag_mode(ctx, fast_flush_first=False)


def lag_mode_flush_first(ctx: Context) -> None:
    """Correct: the lagging mode flushes before its checkpoint too; an unflushed odd record
    is flushed with the next one."""
    _lag_mode(ctx, fast_flush_first=True)


# -- 7. per-key buffers checkpointed by the flushed key -----------------------------------------

PER_KEY = 2


def _per_key(ctx: Context, *, oldest_pending: bool) -> None:
    out = ctx.output("out")
    source = ctx.read(P, ctx.offsets.get(P))
    buffers: dict[str, list[Delivery]] = {}

    def checkpoint(flushed: Delivery) -> None:
        waiting = [r for buf in buffers.values() for r in buf]
        if oldest_pending and waiting:
            ctx.offsets.put(P, min(r.dlsn for r in waiting))
        else:
            ctx.offsets.put(P, flushed.next)

    while True:
        record = source.poll()
        if record is None:
            flushed = [r for buf in buffers.values() for r in buf]
            for r in flushed:
                out.emit(r)
            for buf in buffers.values():
                buf.clear()
            if flushed:
                out.commit()
                ctx.offsets.put(P, max(r.next for r in flushed))
            record = next(source)
        buf = buffers.setdefault(record.key, [])
        buf.append(record)
        if len(buf) == PER_KEY:
            for r in buf:
                out.emit(r)
            buf.clear()
            out.commit()
            checkpoint(record)


def per_key_flushed_offset(ctx: Context) -> None:
    """Bug: outputs are buffered per key and a key's pair flushed together; the checkpoint is
    the flushed record's own position, past records of other keys still buffered."""
    _per_key(ctx, oldest_pending=False)


def per_key_oldest_pending(ctx: Context) -> None:
    """Correct: the checkpoint is the oldest record still buffered."""
    _per_key(ctx, oldest_pending=True)


# -- 8. a secondary audit sink ---------------------------------------------------------------

AUDITED = Topology(sinks={"out": log_sink(), "audit": log_sink()})


def _audited(ctx: Context, *, audit_first: bool) -> None:
    out, audit = ctx.output("out"), ctx.output("audit")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        audit.emit(record)
        out.commit()
        if audit_first:
            audit.commit()
            ctx.offsets.put(P, record.next)
        else:  # "the audit trail is best effort"
            ctx.offsets.put(P, record.next)
            audit.commit()


def audit_after_offset(ctx: Context) -> None:
    """Bug (both sinks at-least-once): the audit log is flushed after the offset."""
    _audited(ctx, audit_first=False)


def audit_before_offset(ctx: Context) -> None:
    """Correct: both sinks flushed before the offset."""
    _audited(ctx, audit_first=True)


# -- 9. two partitions resumed from the last output --------------------------------------------

TWO_SYNCED = Topology(partitions=2, offset_sync=True)


def _resume_two(ctx: Context, *, every_record: bool) -> None:
    ctx.claim()
    out = ctx.output("out", idempotent=True)
    parts = ctx.partitions
    last = out.last()
    starts = {p: ctx.offsets.get(p) for p in parts}
    if last is not None and last.source is not None and last.key in starts:
        starts[last.key] = last.source.next()  # the output's key carries its partition
    done: dict[str, DLSN] = {}
    for record in ctx.read_all(starts):
        if record.partition in done and record.dlsn < done[record.partition]:
            continue  # a redelivery
        out.emit(record, key=record.partition, value=record.value)
        out.commit()
        done[record.partition] = record.next
        if every_record or record.offset % 2 == 1:
            ctx.offsets.commit({record.partition: record.next}, fenced=True)


def resume_last_output_lazy_offsets(ctx: Context) -> None:
    """Bug (exactly-once, 2 partitions): deduplicates by resuming after its last output, so
    it stores each partition's offset only every second record ("the last output says where
    to resume"); that holds for the last output's partition only, so after a crash the
    other partition outputs its unstored record again."""
    _resume_two(ctx, every_record=False)


def resume_last_output_every_offset(ctx: Context) -> None:
    """Correct: every partition's offset is stored after each flushed output, so only the
    last output's partition can lag its output, and the last output covers it."""
    _resume_two(ctx, every_record=True)


# -- 10. per-partition buffers flushed by a shared budget ---------------------------------------

BUDGET = 4


def _shared_budget(ctx: Context, *, per_partition_offsets: bool) -> None:
    out = ctx.output("out")
    parts = ctx.partitions
    source = ctx.read_all({p: ctx.offsets.get(p) for p in parts})
    buffered: dict[str, list[Delivery]] = {p: [] for p in parts}
    size = 0

    def flush() -> None:
        nonlocal size
        for buf in buffered.values():
            for r in buf:
                out.emit(r)
        out.commit()
        head = _head(buffered)
        for p, buf in buffered.items():
            if buf:
                ctx.offsets.put(p, buf[-1].next)
            elif not per_partition_offsets:
                # "an empty buffer means the partition is caught up": store the head
                ctx.offsets.put(p, head)
        for buf in buffered.values():
            buf.clear()
        size = 0

    while True:
        record = source.poll()
        if record is None:
            if size:
                flush()
            record = next(source)
        buffered[record.partition].append(record)
        size += 1
        if size == BUDGET:
            flush()


def _head(buffered: dict[str, list[Delivery]]) -> DLSN:
    return max(buf[-1].next for buf in buffered.values() if buf)


def shared_budget_idle_head(ctx: Context) -> None:
    """Bug (2 partitions): a partition whose buffer is empty at a flush is taken as caught up
    and checkpointed at the busiest partition's position, past its own unread records."""
    _shared_budget(ctx, per_partition_offsets=False)


def shared_budget_own_offsets(ctx: Context) -> None:
    """Correct: only partitions with buffered records are checkpointed."""
    _shared_budget(ctx, per_partition_offsets=True)


# -- the list ----------------------------------------------------------------------------------


def _pair(bug, twin, guarantee, expected, topology=None) -> Iterator[Subject]:  # type: ignore[no-untyped-def]
    topology = topology or Topology()
    yield Subject(
        bug.__name__, bug, guarantee, topology, expected=frozenset(expected), twin=twin.__name__
    )
    yield Subject(twin.__name__, twin, guarantee, topology)


HELDOUT: dict[str, Subject] = {
    s.name: s
    for pairs in (
        _pair(catch_up_offset_first, catch_up_flush_first, ALO, LOSS),
        _pair(content_dedup, id_dedup, ALO, LOSS, RESENDS),
        _pair(batch_high_water, batch_own_positions, ALO, LOSS, TWO),
        _pair(
            window_idle_counts_only,
            window_idle_counts_and_offset,
            EO,
            {A.COUNT_MISMATCH},
            COUNTS,
        ),
        _pair(async_offset_per_result, async_offset_at_flush, ALO, LOSS),
        _pair(lag_mode_offset_first, lag_mode_flush_first, ALO, LOSS),
        _pair(per_key_flushed_offset, per_key_oldest_pending, ALO, LOSS),
        _pair(audit_after_offset, audit_before_offset, ALO, LOSS, AUDITED),
        _pair(
            resume_last_output_lazy_offsets,
            resume_last_output_every_offset,
            EO,
            {A.DUPLICATE},
            TWO_SYNCED,
        ),
        _pair(shared_budget_idle_head, shared_budget_own_offsets, ALO, LOSS, TWO),
    )
    for s in pairs
}
