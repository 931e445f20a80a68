"""Tiny processors: correct ones, and twins that each carry one classic bug.

They are the engine's own test subjects (every checker and every fault is shown to catch one
of the broken ones and to pass its correct twin), the benchmark's workload and examples of
how a processor is written. ``TOYS`` lists them as catalogue :class:`Subject` s: the guarantee
each one claims, the topology it needs and, for the broken ones, the anomaly the checker must
report, the faults the bug is known to need and the correct twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.catalogue.subject import Subject
from harness.check import AnomalyKind, Guarantee
from harness.faults.kinds import ALL_FAULTS, Fault
from harness.sim.context import Context
from harness.sim.records import Delivery
from harness.sim.simulator import Processor
from harness.sim.topology import Topology, log_sink, table_sink

__all__ = ["COUNTS", "COUNTS_SYNCED", "ORDERED", "TOYS", "skip_done_outputs"]

P = "in-0"
COUNTS = Topology(sinks={"counts": table_sink("count")})
ORDERED = Topology(sinks={"out": log_sink(ordered=True)})
COUNTS_SYNCED = Topology(sinks={"counts": table_sink("count")}, offset_sync=True)


# -- at-least-once: output log, offsets in the offset store ---------------------------------


def process_then_commit(ctx: Context) -> None:
    """Correct at-least-once: emit, make the output durable, then store the offset."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def commit_before_processing(ctx: Context) -> None:
    """Bug: the offset is stored as soon as a record is read, before it is processed."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        ctx.offsets.put(P, record.next)
        out.emit(record)
        out.commit()


def _batching_with_timer(ctx: Context, *, store_read: bool) -> None:
    # Outputs are committed in batches of three (or when the source is drained for now);
    # a timer stores the offset, as the tutorial's 10-second timer does.
    out = ctx.output("out")
    read: list[Delivery] = []
    flushed: list[Delivery] = []

    def store_offset() -> None:
        done = read if store_read else flushed
        if done:
            ctx.offsets.put(P, done[-1].next)

    ctx.on_timer(store_offset)
    source = ctx.read(P, ctx.offsets.get(P))
    batch: list[Delivery] = []
    while True:
        record = source.poll()
        if record is None:
            if batch:
                out.commit()
                flushed.extend(batch)
                batch.clear()
            record = next(source)
        read.append(record)
        out.emit(record)
        batch.append(record)
        if len(batch) == 3:
            out.commit()
            flushed.extend(batch)
            batch.clear()


def timer_commits_processed(ctx: Context) -> None:
    """Correct at-least-once: outputs go out in batches and a periodic timer stores the
    offset after the last record whose batch was committed."""
    _batching_with_timer(ctx, store_read=False)


def timer_commits_read(ctx: Context) -> None:
    """Bug: the periodic timer stores the offset after the last record *read*, so a tick
    while a batch is still open moves the offset past outputs that are not yet durable."""
    _batching_with_timer(ctx, store_read=True)


def _emit_one(ctx: Context, record: Delivery) -> Delivery:
    out = ctx.output("out")
    out.emit(record)
    out.commit()
    return record


def async_ordered(ctx: Context) -> None:
    """Correct at-least-once with asynchronous work: results come back in input order, so
    committing each one's offset never passes an unfinished record (Akka's mapAsync)."""
    source = ctx.read(P, ctx.offsets.get(P))
    work = ctx.map_async(lambda r: _emit_one(ctx, r), source, parallelism=3, ordered=True)
    for record, _ in work:
        ctx.offsets.put(P, record.next)


def async_unordered_highest(ctx: Context) -> None:
    """Bug: results come back in completion order and the highest finished offset is
    committed, passing records still in flight (mapAsyncUnordered with a max-offset commit)."""
    source = ctx.read(P, ctx.offsets.get(P))
    work = ctx.map_async(lambda r: _emit_one(ctx, r), source, parallelism=3, ordered=False)
    highest = -1
    for record, _ in work:
        if record.offset > highest:
            highest = record.offset
            ctx.offsets.put(P, record.next)


def async_ordered_emitter(ctx: Context) -> None:
    """Correct for an ordered sink: asynchronous work whose outputs are emitted in input order
    (Akka's mapAsync); no offsets, so a restart replays everything (at-least-once)."""
    out = ctx.output("out")
    work = ctx.map_async(lambda r: r, ctx.read(P, None), parallelism=3, ordered=True)
    for record, _ in work:
        out.emit(record)
        out.commit()


def async_unordered_emitter(ctx: Context) -> None:
    """Bug for an ordered sink: each task emits its output when it completes, in completion
    order (mapAsyncUnordered), so one partition's outputs come out of order."""
    source = ctx.read(P, None)
    for _ in ctx.map_async(lambda r: _emit_one(ctx, r), source, parallelism=3, ordered=False):
        pass


def off_by_one_resume(ctx: Context) -> None:
    """Bug: stores "the next position" but resumes *after* the stored position, so every
    restart skips one record."""
    out = ctx.output("out")
    stored = ctx.offsets.get(P)
    for record in ctx.read(P, None if stored is None else stored.next()):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def rewind_on_restart(ctx: Context) -> None:
    """Bug (claimed exactly-once): on every start it reprocesses the log from the beginning
    and stores offsets from there, re-emitting outputs and moving the offset back."""
    out = ctx.output("out", idempotent=True)
    for record in ctx.read(P, None):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def marker_in_output(ctx: Context) -> None:
    """Bug: writes a batch marker into the data sink next to the real outputs; a consumer of
    the sink sees an output that no input explains."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        if record.offset % 2 == 1:
            out.emit(None, key="marker", value=0)
        out.commit()
        ctx.offsets.put(P, record.next)


def rebuild_from_start(ctx: Context) -> None:
    """Bug: rebuilds its counts by re-reading the log from its first record on every start,
    yet stores offsets (never moving them back), which lets retention truncate records it will
    need to read again: after a truncation and a restart it counts too few."""
    counts: dict[str, int] = {}
    stored = ctx.offsets.get(P)
    for record in ctx.read(P, None):
        counts[record.key] = counts.get(record.key, 0) + 1
        offsets = {P: record.next} if stored is None or record.next > stored else {}
        ctx.offsets.commit(offsets, tables={"counts": {record.key: counts[record.key]}})


# -- exactly-once: deduplicating transformer (DistributedLog's tutorial) ----------------------


def skip_done_outputs(ctx: Context, *, idempotent: bool, track: bool = True) -> None:
    """The tutorial's transformer: each output carries its source DLSN; on start it reads the
    last output and resumes after its source, skipping redeliveries at or before the mark
    (which moves with every output unless ``track`` is False)."""
    out = ctx.output("out", idempotent=idempotent)
    last = out.last()
    done = None if last is None else last.source
    for record in ctx.read(P, None if done is None else done.next()):
        if done is not None and record.dlsn <= done:
            continue
        out.emit(record)
        out.commit()
        if track:
            done = record.dlsn


def dedup_transformer(ctx: Context) -> None:
    """Correct exactly-once: each output carries its source DLSN; on start the processor reads
    the last output and resumes after its source; redeliveries at or before the last emitted
    source are skipped; the producer is idempotent, so a lost ack does not duplicate."""
    skip_done_outputs(ctx, idempotent=True)


def no_dedup_transformer(ctx: Context) -> None:
    """Bug (claimed exactly-once): output then offset, not atomic and not deduplicated, so a
    redelivery or a crash between the two writes duplicates the output."""
    out = ctx.output("out", idempotent=True)
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def retrying_transformer(ctx: Context) -> None:
    """Bug (claimed exactly-once): deduplicates like ``dedup_transformer`` but its producer
    is not idempotent, so a retried write after a lost acknowledgement duplicates a batch."""
    skip_done_outputs(ctx, idempotent=False)


# -- exactly-once: counting with state and offsets ------------------------------------------


def _count(ctx: Context, *, atomic: bool, fenced: bool) -> None:
    if fenced:
        ctx.claim()
    table = ctx.table("counts")
    start = ctx.offsets.get(P)
    position = -1
    for record in ctx.read(P, start):
        if record.offset <= position:
            continue  # a redelivery of something already counted
        position = record.offset
        count = (table.get(record.key) or 0) + 1
        if atomic:
            ctx.offsets.commit(
                {P: record.next}, tables={"counts": {record.key: count}}, fenced=fenced
            )
        else:
            table.put(record.key, count)
            ctx.offsets.put(P, record.next)


def atomic_counter(ctx: Context) -> None:
    """Exactly-once count per key: count and offset in one atomic write (no fencing)."""
    _count(ctx, atomic=True, fenced=False)


def fenced_counter(ctx: Context) -> None:
    """Correct exactly-once count per key: atomic writes, and a zombie is fenced by epoch."""
    _count(ctx, atomic=True, fenced=True)


def unfenced_counter(ctx: Context) -> None:
    """Bug (claimed exactly-once): atomic writes but no fencing, so a zombie that resumes
    after a takeover counts records the new owner already counted."""
    _count(ctx, atomic=True, fenced=False)


def two_step_counter(ctx: Context) -> None:
    """Bug: the count and the offset are saved in two writes; a crash between them counts a
    record twice."""
    _count(ctx, atomic=False, fenced=False)


def unsynced_offsets_transformer(ctx: Context) -> None:
    """Bug (claimed exactly-once): deduplicates redeliveries against the offset it stored,
    but stores offsets without fsync while outputs are durable, so a machine crash forgets
    offsets of outputs that survived and they are produced again."""
    out = ctx.output("out", idempotent=True)
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


_A = AnomalyKind
_ALO, _EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
_NO_ZOMBIE = ALL_FAULTS - {Fault.ZOMBIE}


def _toy(
    processor: Processor,
    guarantee: Guarantee,
    topology: Topology | None = None,
    *,
    expected: Iterable[AnomalyKind] = (),
    needs: Iterable[Fault] = (),
    scope: frozenset[Fault] = ALL_FAULTS,
    twin: Processor | None = None,
) -> Subject:
    return Subject(
        processor.__name__,
        processor,
        guarantee,
        topology or Topology(),
        expected=frozenset(expected),
        needs=frozenset(needs),
        scope=scope,
        twin=None if twin is None else twin.__name__,
    )


TOYS: Mapping[str, Subject] = {
    toy.name: toy
    for toy in (
        _toy(process_then_commit, _ALO),
        _toy(
            commit_before_processing,
            _ALO,
            expected={_A.LOST, _A.OFFSET_AHEAD},
            needs={Fault.CRASH},
            twin=process_then_commit,
        ),
        _toy(timer_commits_processed, _ALO),
        _toy(
            timer_commits_read,
            _ALO,
            expected={_A.LOST},
            needs={Fault.CRASH, Fault.TICK},
            twin=timer_commits_processed,
        ),
        _toy(async_ordered, _ALO),
        _toy(
            async_unordered_highest,
            _ALO,
            expected={_A.LOST},
            needs={Fault.CRASH, Fault.REORDER},
            twin=async_ordered,
        ),
        _toy(async_ordered_emitter, _ALO, ORDERED),
        _toy(
            async_unordered_emitter,
            _ALO,
            ORDERED,
            expected={_A.NONMONOTONIC},
            needs={Fault.REORDER},
            twin=async_ordered_emitter,
        ),
        _toy(
            off_by_one_resume,
            _ALO,
            expected={_A.SKIP, _A.LOST},
            needs={Fault.CRASH},
            twin=process_then_commit,
        ),
        _toy(
            rewind_on_restart,
            _EO,
            expected={_A.OFFSET_REGRESSION, _A.DUPLICATE},
            needs={Fault.CRASH},
            twin=dedup_transformer,
        ),
        _toy(
            marker_in_output,
            _ALO,
            expected={_A.UNEXPECTED},
            twin=process_then_commit,
        ),
        _toy(
            rebuild_from_start,
            _EO,
            COUNTS_SYNCED,
            expected={_A.COUNT_MISMATCH},
            needs={Fault.CRASH, Fault.TRUNCATE},
            twin=fenced_counter,
        ),
        _toy(dedup_transformer, _EO),
        _toy(
            no_dedup_transformer,
            _EO,
            expected={_A.DUPLICATE},
            needs={Fault.DUPLICATE},
            twin=dedup_transformer,
        ),
        _toy(
            retrying_transformer,
            _EO,
            expected={_A.DUPLICATE},
            needs={Fault.LOSE_ACK},
            twin=dedup_transformer,
        ),
        _toy(
            unsynced_offsets_transformer,
            _EO,
            expected={_A.DUPLICATE},
            needs={Fault.MACHINE_CRASH},
            twin=dedup_transformer,
        ),
        _toy(fenced_counter, _EO, COUNTS),
        _toy(atomic_counter, _EO, COUNTS, scope=_NO_ZOMBIE),
        _toy(
            two_step_counter,
            _EO,
            COUNTS,
            expected={_A.COUNT_MISMATCH},
            needs={Fault.CRASH},
            twin=atomic_counter,
        ),
        _toy(
            unfenced_counter,
            _EO,
            COUNTS,
            expected={_A.COUNT_MISMATCH},
            needs={Fault.ZOMBIE},
            twin=fenced_counter,
        ),
    )
}
"""Every toy by name: correct ones, and broken twins with the anomaly their bug shows."""
