"""Realistic pitfalls written against the public API, each a buggy processor with its fixed
twin: the catalogue a search must catch with its *default* faults.

They are in the style of the seeds' pitfalls (``shared/seeds``): an offset stored before the
output is flushed, outputs flushed in batches while offsets move per record, a batch's
offset taken from the wrong element, a resume from another partition's offset or from the
last output of the wrong sink, a count and its offset in two transactions, deduplication
that forgets redeliveries after the start, a resume *at* the processed position under
exactly-once, asynchronous completions committed by the last one to finish, an idle-time
commit ahead of unflushed output, counts whose offset only a timer stores; and five that
need the world's richer vocabulary: a count *incremented* with its offset, which a retry
after a lost acknowledgement counts twice, rows written to an *upsert* sink under a key
that is not the record's identity (the offset without its partition, or a key that moves
after a restart), transactions relied on while the output's reader reads uncommitted
data, and an input the processor *truncates* up to what it has read rather than what is
durably done; and two that need an upstream that *resends* records under their ids
(exactly-once per input position, which a resend at a new position defeats, and ids
deduplicated in memory only); and one that needs *chosen payloads* (a value of 0 taken for
a payload that did not deserialize); and one whose bug is on a path only a burst of 50
records takes (a full batch's offset stored before its flush). None of them names the fault
its bug needs to the search; ``needs`` only documents it.
``PITFALLS`` lists them as catalogue :class:`~harness.catalogue.subject.Subject` s.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Literal

from harness.catalogue.subject import Subject
from harness.catalogue.toys import skip_done_outputs
from harness.check import AnomalyKind, Guarantee
from harness.faults.kinds import Fault
from harness.log.dlsn import DLSN
from harness.sim.context import Context
from harness.sim.records import Delivery
from harness.sim.simulator import Processor
from harness.sim.topology import Topology, entity_sink, log_sink, table_sink

__all__ = [
    "BIG_BATCH",
    "COUNTS",
    "DURABLE_COUNTS",
    "DURABLE_TWO_PARTITIONS",
    "ENTITIES",
    "PITFALLS",
    "RESENDING",
    "ROWS",
    "ROWS_TWO_PARTITIONS",
    "TWO_PARTITIONS",
    "TWO_SINKS",
    "UNCOMMITTED_READER",
    "ZEROES",
]

P = "in-0"
BATCH = 3
BIG_BATCH = 50
COUNTS = Topology(sinks={"counts": table_sink("count")})
DURABLE_COUNTS = Topology(sinks={"counts": table_sink("count")}, offset_sync=True)
"""Counts in a store whose writes are synced (a transactional store's commits are durable)."""
TWO_PARTITIONS = Topology(partitions=2)
DURABLE_TWO_PARTITIONS = Topology(partitions=2, offset_sync=True)
"""Two partitions, a store whose writes are synced (a transactional store's commits are
durable)."""
TWO_SINKS = Topology(sinks={"even": log_sink(), "odd": log_sink()})
ROWS = Topology(sinks={"rows": log_sink(upsert=True)})
"""An upsert sink: one row per key, the last written."""
ROWS_TWO_PARTITIONS = Topology(partitions=2, sinks={"rows": log_sink(upsert=True)})
UNCOMMITTED_READER = Topology(
    sinks={"out": log_sink(isolation="read_uncommitted")}, offset_sync=True
)
"""An output whose downstream reader reads uncommitted data (Kafka consumers' default), next
to a store whose writes are synced (a transactional store's commits are durable)."""
RESENDING = Topology(
    sinks={"out": log_sink(), "seen": table_sink()}, offset_sync=True, upstream_resends=True
)
"""An at-least-once upstream (it resends records under their ids), a table a processor can
keep the ids it has done in, and a store whose writes are synced."""
ENTITIES = Topology(keys=2, sinks={"rows": entity_sink()})
"""An entity table (rows upserted by the input key, last write wins) over two keys."""
ZEROES = Topology(payloads=(("k0", 2), ("k1", 0), ("k2", 1)), poison_every=4)
"""Chosen payloads, one of them a value of 0, and every fourth record a poison record."""


# -- 1. the offset is stored before the output's flush ---------------------------------------


def offset_before_flush(ctx: Context) -> None:
    """Bug: emits, stores the offset, then flushes the output: a crash between the offset
    and the flush loses the record (its output was never durable)."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        ctx.offsets.put(P, record.next)
        out.commit()


def flush_then_offset(ctx: Context) -> None:
    """Correct: emits, flushes the output, then stores the offset."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


# -- 2. outputs flushed in batches, offsets stored per record --------------------------------


def _flush_in_batches(
    ctx: Context, *, offset_at_flush: bool, size: int = 2, full_offset_first: bool = False
) -> None:
    out = ctx.output("out")
    pending: list[Delivery] = []
    source = ctx.read(P, ctx.offsets.get(P))
    while True:
        record = source.poll()
        full = len(pending) == size
        if record is None or full:  # linger expired, or the batch is full
            if pending and full and full_offset_first:
                ctx.offsets.put(P, pending[-1].next)
                out.commit()
            elif pending:
                out.commit()
                if offset_at_flush:
                    ctx.offsets.put(P, pending[-1].next)
            pending.clear()
            if record is None:
                record = next(source)
        out.emit(record)
        pending.append(record)
        if not offset_at_flush:
            ctx.offsets.put(P, record.next)


def offset_per_record_flush_per_pair(ctx: Context) -> None:
    """Bug: the producer flushes every second output (linger/batch.size) but the offset is
    stored after every record, so it runs ahead of the unflushed output."""
    _flush_in_batches(ctx, offset_at_flush=False)


def offset_at_flush(ctx: Context) -> None:
    """Correct: outputs flushed in pairs and the offset stored after each flush."""
    _flush_in_batches(ctx, offset_at_flush=True)


# -- 20. a full batch's path, which only volume takes -----------------------------------------


def full_batch_offset_first(ctx: Context) -> None:
    """Bug (at-least-once): outputs flushed in batches of 50 records or when the input is
    idle, the offset stored at each flush; the idle path flushes first, but the *full
    batch* path stores the offset first, so a crash between the two loses the batch. Only
    a burst of 50 records takes that path."""
    _flush_in_batches(ctx, offset_at_flush=True, size=BIG_BATCH, full_offset_first=True)


def full_batch_flush_first(ctx: Context) -> None:
    """Correct: both paths flush the batch, then store its offset."""
    _flush_in_batches(ctx, offset_at_flush=True, size=BIG_BATCH)


# -- 3. a batch's offset taken from its first element ----------------------------------------


def _count_batches(ctx: Context, *, offset_of_last: bool) -> None:
    ctx.claim()
    table = ctx.table("counts")
    source = ctx.read(P, ctx.offsets.get(P))
    counted = -1
    while True:
        batch = [next(source)]
        while len(batch) < BATCH and (record := source.poll()) is not None:
            batch.append(record)
        counts: dict[str, int] = {}
        for record in batch:
            if record.offset <= counted:
                continue  # a redelivery within this session
            counted = record.offset
            counts[record.key] = counts.get(record.key, table.get(record.key) or 0) + 1
        done = batch[-1] if offset_of_last else batch[0]
        ctx.offsets.commit({P: done.next}, tables={"counts": counts}, fenced=True)


def batch_offset_of_first(ctx: Context) -> None:
    """Bug (exactly-once counts): a batch's counts commit atomically with an offset, but the
    offset is the *first* record's, so a restart counts the rest of the batch again."""
    _count_batches(ctx, offset_of_last=False)


def batch_offset_of_last(ctx: Context) -> None:
    """Correct: a batch's counts commit atomically with the offset after its last record."""
    _count_batches(ctx, offset_of_last=True)


# -- 4. resume from the wrong partition's offset ----------------------------------------------


def _two_partitions(ctx: Context, *, own_offset: bool) -> None:
    out = ctx.output("out")
    stored = {p: ctx.offsets.get(p) for p in ctx.partitions}
    first = stored[ctx.partitions[0]]
    starts = {p: stored[p] if own_offset or stored[p] is not None else first for p in stored}
    for record in ctx.read_all(starts):
        out.emit(record)
        out.commit()
        ctx.offsets.put(record.partition, record.next)


def resume_from_first_partition(ctx: Context) -> None:
    """Bug: a consumer of two partitions keeps an offset per partition, but on restart a
    partition without its own stored offset resumes from the first partition's (a copied
    default), skipping records it never processed."""
    _two_partitions(ctx, own_offset=False)


def resume_each_partition(ctx: Context) -> None:
    """Correct: each partition resumes from its own stored offset (or its beginning)."""
    _two_partitions(ctx, own_offset=True)


# -- 5. resume after the last output of the wrong sink ----------------------------------------


def _two_sinks(ctx: Context, *, every_sink: bool) -> None:
    outs = {name: ctx.output(name, idempotent=True) for name in ("even", "odd")}
    sources = [last.source for name in ("even", "odd") if (last := outs[name].last())]
    if not every_sink:
        last_even = outs["even"].last()
        sources = [] if last_even is None or last_even.source is None else [last_even.source]
    done: DLSN | None = max((s for s in sources if s is not None), default=None)
    for record in ctx.read(P, None if done is None else done.next()):
        if done is not None and record.dlsn <= done:
            continue
        out = outs["even" if record.offset % 2 == 0 else "odd"]
        out.emit(record)
        out.commit()
        done = record.dlsn


def resume_after_one_sink(ctx: Context) -> None:
    """Bug (exactly-once): routes records to two sinks and, on start, resumes after the last
    output of the first sink only, so records the other sink already has are produced
    again."""
    _two_sinks(ctx, every_sink=False)


def resume_after_every_sink(ctx: Context) -> None:
    """Correct: resumes after the newest source DLSN over the last outputs of every sink."""
    _two_sinks(ctx, every_sink=True)


# -- 6. a count and its offset in two transactions --------------------------------------------


def _transactional(ctx: Context, *, one: bool) -> None:
    ctx.claim()
    counted = -1
    for record in ctx.read(P, ctx.offsets.get(P)):
        if record.offset <= counted:
            continue  # a redelivery within this session
        counted = record.offset
        txn = ctx.transaction()
        txn.put("counts", record.key, (txn.get("counts", record.key) or 0) + 1)
        if one:
            txn.commit({P: record.next})
        else:
            txn.commit()
            ctx.transaction().commit({P: record.next})


def count_and_offset_in_two_transactions(ctx: Context) -> None:
    """Bug (exactly-once counts): the count update commits in one transaction and the input
    offset in a second one; a crash between them counts the record twice."""
    _transactional(ctx, one=False)


def count_and_offset_in_one_transaction(ctx: Context) -> None:
    """Correct: count update and offset commit in one fenced transaction."""
    _transactional(ctx, one=True)


# -- 7. deduplication that only looks at the start --------------------------------------------


def dedup_only_at_start(ctx: Context) -> None:
    """Bug (exactly-once): skips records at or before the last output found at start, but
    never moves that mark, so a redelivery later in the session is produced again."""
    skip_done_outputs(ctx, idempotent=True, track=False)


def dedup_tracks_last_output(ctx: Context) -> None:
    """Correct: the deduplication mark follows every output written."""
    skip_done_outputs(ctx, idempotent=True)


# -- 8. resume *at* the processed position under exactly-once ---------------------------------


def _to_count(ctx: Context) -> Iterator[Delivery]:
    """Claims ownership, then yields each record from the stored offset on, once (skipping
    the redeliveries of this session): the loop of a fenced exactly-once counter."""
    ctx.claim()
    counted = -1
    for record in ctx.read(P, ctx.offsets.get(P)):
        if record.offset > counted:
            counted = record.offset
            yield record


def _store_position(ctx: Context, *, after: bool) -> None:
    table = ctx.table("counts")
    for record in _to_count(ctx):
        count = (table.get(record.key) or 0) + 1
        position = record.next if after else record.dlsn
        ctx.offsets.commit({P: position}, tables={"counts": {record.key: count}}, fenced=True)


def store_processed_dlsn(ctx: Context) -> None:
    """Bug (exactly-once counts): stores the processed record's own DLSN with its count (the
    reader tutorial's at-least-once habit), so every restart counts that record again."""
    _store_position(ctx, after=False)


def store_next_dlsn(ctx: Context) -> None:
    """Correct: stores the position after the processed record with its count, atomically."""
    _store_position(ctx, after=True)


# -- 9. asynchronous completions committed by the last one to finish --------------------------


def _async(ctx: Context, *, ordered: bool) -> None:
    out = ctx.output("out")

    def process(record: Delivery) -> None:
        out.emit(record)
        out.commit()

    source = ctx.read(P, ctx.offsets.get(P))
    for record, _ in ctx.map_async(process, source, parallelism=2, ordered=ordered):
        ctx.offsets.put(P, record.next)


def async_last_completion(ctx: Context) -> None:
    """Bug: two records in flight at a time, completions handed on as they finish
    (mapAsyncUnordered); each stores its own offset, so a record that finishes first moves
    the offset past one still in flight."""
    _async(ctx, ordered=False)


def async_in_read_order(ctx: Context) -> None:
    """Correct: two records in flight, but completions are handed on in read order
    (mapAsync), so each stored offset follows only finished records."""
    _async(ctx, ordered=True)


# -- 10. an idle-time commit ahead of unflushed output ----------------------------------------


def _idle_commit(ctx: Context, *, flush_first: bool) -> None:
    out = ctx.output("out")
    source = ctx.read(P, ctx.offsets.get(P))
    last: Delivery | None = None
    while True:
        record = source.poll()
        if record is None:
            if last is not None:  # the source is idle: flush and commit what was read
                if flush_first:
                    out.commit()
                ctx.offsets.put(P, last.next)
                if not flush_first:
                    out.commit()
            record = next(source)
        out.emit(record)
        last = record


def idle_commit_before_flush(ctx: Context) -> None:
    """Bug: outputs are flushed only when the source goes idle, and then the offset of the
    last record read is committed *before* the flush; a crash between them loses the batch."""
    _idle_commit(ctx, flush_first=False)


def idle_commit_after_flush(ctx: Context) -> None:
    """Correct: on idle, flush the producer, then commit the offset of the last record."""
    _idle_commit(ctx, flush_first=True)


# -- 11. counts written per record, the offset only by a timer --------------------------------


def _timer_offsets(ctx: Context, *, atomic: bool) -> None:
    ctx.claim()
    table = ctx.table("counts")
    counts: dict[str, int] = {}
    read: list[Delivery] = []

    stored: list[Delivery] = []

    def store() -> None:  # only what is new since the last checkpoint
        if read and read[-1] not in stored:
            tables = {"counts": dict(counts)} if atomic else None
            ctx.offsets.commit({P: read[-1].next}, tables=tables, fenced=True)
            stored.append(read[-1])

    ctx.on_timer(store)
    for record in ctx.read(P, ctx.offsets.get(P)):
        if read and record.offset <= read[-1].offset:
            continue  # a redelivery within this session
        counts[record.key] = counts.get(record.key, table.get(record.key) or 0) + 1
        if not atomic:
            table.put(record.key, counts[record.key])
        read.append(record)


def counts_now_offset_by_timer(ctx: Context) -> None:
    """Bug (exactly-once counts): every count is written as soon as a record is counted, but
    the offset only by a periodic timer; a restart before the next tick counts again."""
    _timer_offsets(ctx, atomic=False)


def counts_and_offset_by_timer(ctx: Context) -> None:
    """Correct: counts stay in memory and a periodic timer commits them with the offset in
    one atomic write (a restart recounts from the last checkpoint, from the stored counts)."""
    _timer_offsets(ctx, atomic=True)


# -- 12. a count incremented in the store, retried after a lost acknowledgement ---------------


def _count_in_store(ctx: Context, *, increment: bool) -> None:
    counts = ctx.table("counts")
    for record in _to_count(ctx):
        if increment:
            added = {"counts": {record.key: 1}}
            ctx.offsets.commit({P: record.next}, increments=added, fenced=True)
        else:
            count = {"counts": {record.key: (counts.get(record.key) or 0) + 1}}
            ctx.offsets.commit({P: record.next}, tables=count, fenced=True)


def increment_with_offset(ctx: Context) -> None:
    """Bug (exactly-once counts): each record's count is an increment (``SET n = n + 1``)
    committed atomically with its offset and fenced, so crashes and zombies cannot double
    it; but an increment is not idempotent: when the commit's acknowledgement is lost, the
    client sends the commit again and the record is counted twice."""
    _count_in_store(ctx, increment=True)


def count_value_with_offset(ctx: Context) -> None:
    """Correct: reads the count and commits the new *value* with the offset: a commit sent
    again after a lost acknowledgement writes the same value."""
    _count_in_store(ctx, increment=False)


# -- 13. and 14. rows upserted under a key that is not the record's identity ------------------


def _upsert_rows(ctx: Context, row: Callable[[Context, Delivery], str]) -> None:
    """At-least-once processing into an upsert sink: a row per record, flushed, then the
    offset; a redone record rewrites its row, so the sink holds each record once."""
    ctx.claim()
    out = ctx.output("rows")
    for record in ctx.read_all({p: ctx.offsets.get(p) for p in ctx.partitions}):
        out.emit(record, key=row(ctx, record))
        out.commit()
        ctx.offsets.commit({record.partition: record.next}, fenced=True)


def upsert_key_without_partition(ctx: Context) -> None:
    """Bug (exactly-once, two partitions): rows are keyed by the record's offset alone, so
    the records at one offset of two partitions write the same row and one of them is
    overwritten (lost). On an append-only log the key is harmless; on an upsert sink it is
    the record's identity."""
    _upsert_rows(ctx, lambda _, record: str(record.offset))


def upsert_key_with_partition(ctx: Context) -> None:
    """Correct: rows are keyed by (partition, offset), one row per input record."""
    _upsert_rows(ctx, lambda _, record: f"{record.partition}/{record.offset}")


def upsert_key_per_instance(ctx: Context) -> None:
    """Bug (exactly-once): the row key (an idempotency key) is made of the instance's own
    number and the offset, so it moves after a restart: a record redone after a crash
    between its row's flush and its offset writes a second row."""
    _upsert_rows(ctx, lambda c, record: f"{c.instance}/{record.partition}/{record.offset}")


def upsert_key_of_record(ctx: Context) -> None:
    """Correct: the row key is the record's own id, the same after any restart."""
    _upsert_rows(ctx, lambda _, record: record.record_id)


# -- 15. transactions relied on by a reader that reads uncommitted data ------------------------


def output_in_transactions(ctx: Context) -> None:
    """Bug (exactly-once, the output read with ``read_uncommitted``): each record's output
    and offset commit in one fenced transaction, which is exactly-once for a
    ``read_committed`` reader; but this sink's reader sees outputs as they are written, so a
    crash between the emit and the commit leaves it an output of an aborted transaction,
    and the redone record a second one."""
    ctx.claim()
    for record in _to_count(ctx):
        txn = ctx.transaction()
        txn.emit("out", record)
        txn.commit({P: record.next})


def output_deduplicated(ctx: Context) -> None:
    """Correct: no transaction to abort; an idempotent producer, and on start a resume after
    the source of the last output, so each output is written once, whoever reads it."""
    skip_done_outputs(ctx, idempotent=True)


# -- 16. the input truncated up to what was read, not what is durably done ---------------------


def _truncating(ctx: Context, *, after_offset: bool) -> None:
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        if not after_offset:
            ctx.truncate(P, record.next)
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)
        if after_offset:
            ctx.truncate(P, record.next)


def truncate_to_read_position(ctx: Context) -> None:
    """Bug: truncates its input (DistributedLog's ``truncate(dlsn)``) up to the record it
    has just *read*, before that record's output and offset are stored: a crash in between
    leaves a restart nothing to read the record from, so it is lost for good."""
    _truncating(ctx, after_offset=False)


def truncate_to_committed_offset(ctx: Context) -> None:
    """Correct: truncates only up to the offset it has stored, after the output it covers
    is flushed, so a restart needs nothing that truncation hid."""
    _truncating(ctx, after_offset=True)


# -- 17. and 18. an upstream that resends records under their ids ----------------------------


def _transact_each(ctx: Context, *, dedup: Literal["none", "memory", "table"]) -> None:
    """Each record's output and offset in one fenced transaction (exactly-once per input
    position); ``dedup`` says how record ids already done are skipped: ``"none"``, in
    ``"memory"`` (this instance's), or in the ``seen`` table, in the same transaction."""
    ctx.claim()
    seen: set[str] = set()
    for record in ctx.read(P, ctx.offsets.get(P)):
        txn = ctx.transaction()
        if dedup == "memory":
            done = record.record_id in seen
        elif dedup == "table":
            done = txn.get("seen", record.record_id) is not None
        else:
            done = False
        if not done:
            txn.emit("out", record)
            if dedup == "table":
                txn.put("seen", record.record_id, 1)
            seen.add(record.record_id)
        txn.commit({P: record.next})


def exactly_once_per_position(ctx: Context) -> None:
    """Bug (exactly-once, an at-least-once upstream): each record's output and offset
    commit in one fenced transaction, which is exactly-once per *input position*; but the
    upstream resends a record under its id after a lost acknowledgement, and the copy, at a
    new position, is output again."""
    _transact_each(ctx, dedup="none")


def dedup_ids_in_memory(ctx: Context) -> None:
    """Bug (exactly-once, an at-least-once upstream): skips the record ids it has done, but
    keeps them in memory, so after a restart a resent record is output again."""
    _transact_each(ctx, dedup="memory")


def dedup_ids_in_transaction(ctx: Context) -> None:
    """Correct: keeps the record ids it has done in a table, written in the transaction that
    writes the output and the offset, so a resend is skipped whatever restarted in between."""
    _transact_each(ctx, dedup="table")


# -- 19. a value of zero taken for a payload that did not deserialize -------------------------


def _forward_values(ctx: Context, *, falsy: bool) -> None:
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        unreadable = not record.value if falsy else record.poison
        if not unreadable:
            out.emit(record)
            out.commit()
        ctx.offsets.put(P, record.next)


def skip_falsy_values(ctx: Context) -> None:
    """Bug (at-least-once, payloads with zeros): means to skip the payloads that do not
    deserialize (their value is 0) with ``if not record.value``, so a record whose real
    value is 0 is skipped too, and lost. Generated payloads (values 1 to 5) never show it."""
    _forward_values(ctx, falsy=True)


def skip_poison_records(ctx: Context) -> None:
    """Correct: skips exactly the records whose payload does not deserialize
    (``Delivery.poison``)."""
    _forward_values(ctx, falsy=False)


# -- 21. a catch-up after a restart that keeps the latest record per key ----------------------


CATCH_UP = 5
"""A restart that finds this many records waiting catches up in bulk."""


def _catch_up(ctx: Context, *, latest_only: bool) -> None:
    out = ctx.output("out")
    stored = ctx.offsets.get(P)
    source = ctx.read(P, stored)
    # a restart: what waits is a backlog; a long one is caught up in one flush
    waiting = list(iter(source.poll, None)) if stored is not None else []
    if len(waiting) >= CATCH_UP:
        latest = {r.key: r for r in waiting}  # "only a key's latest state matters"
        for record in sorted(latest.values(), key=lambda r: r.offset) if latest_only else waiting:
            out.emit(record)
        out.commit()
        ctx.offsets.put(P, waiting[-1].next)
        waiting = []
    for record in itertools.chain(waiting, source):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def catch_up_latest_per_key(ctx: Context) -> None:
    """Bug (at-least-once): a restart that finds a backlog of five records or more catches
    up in one flush that keeps only the latest record of each key, as if the output were a
    table; every record's output is expected, so an earlier record of a repeated key is
    lost. Only a restart with that much input waiting takes the path: input produced while
    the processor was down."""
    _catch_up(ctx, latest_only=True)


def catch_up_every_record(ctx: Context) -> None:
    """Correct: the catch-up flushes every record of the backlog, then stores its end."""
    _catch_up(ctx, latest_only=False)


# -- 22. a batch across partitions committed with its last record's partition only ------------

MERGED_BATCH = 2


def _merged_batches(ctx: Context, *, every_partition: bool) -> None:
    ctx.claim()
    source = ctx.read_all({p: ctx.offsets.get(p) for p in ctx.partitions})
    done: dict[str, DLSN] = {}
    batch: list[Delivery] = []
    while True:
        record = source.poll()
        if batch and (record is None or len(batch) == MERGED_BATCH):
            txn = ctx.transaction()
            for item in batch:
                txn.emit("out", item)
            last = {item.partition: item.next for item in batch}
            txn.commit(last if every_partition else {batch[-1].partition: batch[-1].next})
            batch.clear()
        if record is None:
            record = next(source)
        if record.partition in done and record.dlsn < done[record.partition]:
            continue  # a redelivery within this session
        done[record.partition] = record.next
        batch.append(record)


def merged_batch_last_partition(ctx: Context) -> None:
    """Bug (exactly-once, 2 partitions): batches of two records of the merged partitions,
    each written in one fenced transaction with the offset of the partition of its *last*
    record only. While each batch holds one partition (two records on each, in order) that
    is right; when a batch mixes partitions (uneven partitions, or interleaved arrivals) the
    other partition's offset stays behind, and a restart outputs its records again."""
    _merged_batches(ctx, every_partition=False)


def merged_batch_every_partition(ctx: Context) -> None:
    """Correct: the transaction commits the offset of every partition in the batch."""
    _merged_batches(ctx, every_partition=True)


# -- 23. an entity table written by asynchronous completions ----------------------------------


def _entity_rows(ctx: Context, *, ordered: bool) -> None:
    """Materializes the latest state per key: the table is rebuilt by replaying the input
    from its start on every start (no offsets: the table is the state); each record is
    enriched asynchronously and its row upserted when its enrichment completes."""
    rows = ctx.output("rows")
    source = ctx.read(P)
    for record, value in ctx.map_async(
        lambda r: r.value * 10, source, parallelism=3, ordered=ordered
    ):
        rows.emit(record, key=record.key, value=value)
        rows.commit()


def entity_rows_on_completion(ctx: Context) -> None:
    """Bug (at-least-once, an entity table): rows are upserted as enrichments complete
    (``mapAsyncUnordered``), so when a key's older record completes after its newer one,
    the older row overwrites the newer: the table ends ``stale``."""
    _entity_rows(ctx, ordered=False)


def entity_rows_in_input_order(ctx: Context) -> None:
    """Correct: completions are taken in input order (``mapAsync``), so each key's last
    write is its last record's, whatever the reorders, crashes and replays."""
    _entity_rows(ctx, ordered=True)


# -- the catalogue ----------------------------------------------------------------------------

_A = AnomalyKind
_ALO, _EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
_LOST = {_A.LOST, _A.OFFSET_AHEAD}


def _pair(
    bug: Processor,
    twin: Processor,
    guarantee: Guarantee,
    expected: Iterable[AnomalyKind],
    needs: Iterable[Fault],
    topology: Topology | None = None,
) -> tuple[Subject, Subject]:
    topology = topology or Topology()
    return (
        Subject(
            bug.__name__,
            bug,
            guarantee,
            topology,
            expected=frozenset(expected),
            needs=frozenset(needs),
            twin=twin.__name__,
        ),
        Subject(twin.__name__, twin, guarantee, topology),
    )


PITFALLS: Mapping[str, Subject] = {
    subject.name: subject
    for pair in (
        _pair(offset_before_flush, flush_then_offset, _ALO, _LOST, {Fault.CRASH}),
        _pair(offset_per_record_flush_per_pair, offset_at_flush, _ALO, _LOST, {Fault.CRASH}),
        _pair(
            batch_offset_of_first,
            batch_offset_of_last,
            _EO,
            {_A.COUNT_MISMATCH},
            {Fault.CRASH},
            COUNTS,
        ),
        _pair(
            resume_from_first_partition,
            resume_each_partition,
            _ALO,
            _LOST | {_A.SKIP},
            {Fault.CRASH},
            TWO_PARTITIONS,
        ),
        _pair(
            resume_after_one_sink,
            resume_after_every_sink,
            _EO,
            {_A.DUPLICATE},
            {Fault.CRASH},
            TWO_SINKS,
        ),
        _pair(
            count_and_offset_in_two_transactions,
            count_and_offset_in_one_transaction,
            _EO,
            {_A.COUNT_MISMATCH},
            {Fault.CRASH},
            DURABLE_COUNTS,
        ),
        _pair(
            dedup_only_at_start, dedup_tracks_last_output, _EO, {_A.DUPLICATE}, {Fault.DUPLICATE}
        ),
        _pair(
            store_processed_dlsn, store_next_dlsn, _EO, {_A.COUNT_MISMATCH}, {Fault.CRASH}, COUNTS
        ),
        _pair(
            async_last_completion,
            async_in_read_order,
            _ALO,
            _LOST,
            {Fault.CRASH, Fault.REORDER},
        ),
        _pair(idle_commit_before_flush, idle_commit_after_flush, _ALO, _LOST, {Fault.CRASH}),
        _pair(
            counts_now_offset_by_timer,
            counts_and_offset_by_timer,
            _EO,
            {_A.COUNT_MISMATCH},
            {Fault.CRASH},
            COUNTS,
        ),
        _pair(
            increment_with_offset,
            count_value_with_offset,
            _EO,
            {_A.COUNT_MISMATCH},
            {Fault.LOSE_ACK},
            COUNTS,
        ),
        _pair(
            upsert_key_without_partition,
            upsert_key_with_partition,
            _EO,
            {_A.LOST},
            (),
            ROWS_TWO_PARTITIONS,
        ),
        _pair(
            upsert_key_per_instance,
            upsert_key_of_record,
            _EO,
            {_A.DUPLICATE},
            {Fault.CRASH},
            ROWS,
        ),
        _pair(
            output_in_transactions,
            output_deduplicated,
            _EO,
            {_A.ABORTED_READ},
            {Fault.CRASH},
            UNCOMMITTED_READER,
        ),
        _pair(truncate_to_read_position, truncate_to_committed_offset, _ALO, _LOST, {Fault.CRASH}),
        _pair(
            exactly_once_per_position,
            dedup_ids_in_transaction,
            _EO,
            {_A.DUPLICATE},
            {Fault.RESEND},
            RESENDING,
        ),
        _pair(
            dedup_ids_in_memory,
            dedup_ids_in_transaction,
            _EO,
            {_A.DUPLICATE},
            {Fault.RESEND, Fault.CRASH},
            RESENDING,
        ),
        _pair(skip_falsy_values, skip_poison_records, _ALO, _LOST, (), ZEROES),
        _pair(full_batch_offset_first, full_batch_flush_first, _ALO, _LOST, {Fault.CRASH}),
        _pair(catch_up_latest_per_key, catch_up_every_record, _ALO, _LOST, {Fault.CRASH}),
        _pair(
            entity_rows_on_completion,
            entity_rows_in_input_order,
            _ALO,
            {_A.STALE},
            {Fault.REORDER},
            ENTITIES,
        ),
        _pair(
            merged_batch_last_partition,
            merged_batch_every_partition,
            _EO,
            {_A.DUPLICATE},
            {Fault.CRASH},
            DURABLE_TWO_PARTITIONS,
        ),
    )
    for subject in pair
}
"""Every pitfall and its fixed twin, by processor name."""
