"""Tiny processors: correct ones, and twins that each carry one classic bug.

They are the engine's own test subjects (every checker and every fault is shown to catch one
of the broken ones and to pass its correct twin), the benchmark's workload and examples of
how a processor is written. ``TOYS`` lists them with the guarantee each one claims, the
topology it needs and, for the broken ones, the anomaly the checker must report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.check import AnomalyKind, Guarantee
from harness.sim.context import Context
from harness.sim.records import Delivery
from harness.sim.simulator import Processor
from harness.sim.topology import Topology, log_sink, table_sink
from harness.strategies.schedules import ALL_FAULTS, Fault

__all__ = ["TOYS", "Toy"]

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


def dedup_transformer(ctx: Context) -> None:
    """Correct exactly-once: each output carries its source DLSN; on start the processor reads
    the last output and resumes after its source; redeliveries at or before the last emitted
    source are skipped; the producer is idempotent, so a lost ack does not duplicate."""
    out = ctx.output("out", idempotent=True)
    last = out.last()
    done = None if last is None else last.source
    for record in ctx.read(P, None if done is None else done.next()):
        if done is not None and record.dlsn <= done:
            continue
        out.emit(record)
        out.commit()
        done = record.dlsn


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
    out = ctx.output("out")
    last = out.last()
    done = None if last is None else last.source
    for record in ctx.read(P, None if done is None else done.next()):
        if done is not None and record.dlsn <= done:
            continue
        out.emit(record)
        out.commit()
        done = record.dlsn


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


@dataclass(frozen=True, slots=True)
class Toy:
    """A toy processor, the guarantee it claims and what the harness must find."""

    processor: Processor
    guarantee: Guarantee
    topology: Topology = field(default_factory=Topology)
    expected: frozenset[AnomalyKind] = frozenset()
    """The anomaly kinds its bug shows as; at least one of them must be reported (which ones
    depends on the schedule found). Empty for a correct toy."""
    faults: frozenset[Fault] = ALL_FAULTS
    """The faults it is explored under (a broken toy: the faults its bug needs)."""
    twin: str | None = None
    """For a broken toy: its correct twin's name."""

    @property
    def name(self) -> str:
        return self.processor.__name__


_A = AnomalyKind
_ALO, _EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
_NO_ZOMBIE = ALL_FAULTS - {Fault.ZOMBIE}

TOYS: Mapping[str, Toy] = {
    toy.name: toy
    for toy in (
        Toy(process_then_commit, _ALO),
        Toy(
            commit_before_processing,
            _ALO,
            expected=frozenset({_A.LOST, _A.OFFSET_AHEAD}),
            faults=frozenset({Fault.CRASH}),
            twin="process_then_commit",
        ),
        Toy(timer_commits_processed, _ALO),
        Toy(
            timer_commits_read,
            _ALO,
            expected=frozenset({_A.LOST}),
            faults=frozenset({Fault.CRASH, Fault.TICK}),
            twin="timer_commits_processed",
        ),
        Toy(async_ordered, _ALO),
        Toy(
            async_unordered_highest,
            _ALO,
            expected=frozenset({_A.LOST}),
            faults=frozenset({Fault.CRASH, Fault.REORDER}),
            twin="async_ordered",
        ),
        Toy(async_ordered_emitter, _ALO, ORDERED),
        Toy(
            async_unordered_emitter,
            _ALO,
            ORDERED,
            expected=frozenset({_A.NONMONOTONIC}),
            faults=frozenset({Fault.REORDER}),
            twin="async_ordered_emitter",
        ),
        Toy(
            off_by_one_resume,
            _ALO,
            expected=frozenset({_A.SKIP, _A.LOST}),
            faults=frozenset({Fault.CRASH}),
            twin="process_then_commit",
        ),
        Toy(
            rewind_on_restart,
            _EO,
            expected=frozenset({_A.OFFSET_REGRESSION, _A.DUPLICATE}),
            faults=frozenset({Fault.CRASH}),
            twin="dedup_transformer",
        ),
        Toy(
            marker_in_output,
            _ALO,
            expected=frozenset({_A.UNEXPECTED}),
            faults=frozenset(),
            twin="process_then_commit",
        ),
        Toy(
            rebuild_from_start,
            _EO,
            COUNTS_SYNCED,
            expected=frozenset({_A.COUNT_MISMATCH}),
            faults=frozenset({Fault.CRASH, Fault.TRUNCATE}),
            twin="fenced_counter",
        ),
        Toy(dedup_transformer, _EO),
        Toy(
            no_dedup_transformer,
            _EO,
            expected=frozenset({_A.DUPLICATE}),
            faults=frozenset({Fault.DUPLICATE}),
            twin="dedup_transformer",
        ),
        Toy(
            retrying_transformer,
            _EO,
            expected=frozenset({_A.DUPLICATE}),
            faults=frozenset({Fault.LOSE_ACK}),
            twin="dedup_transformer",
        ),
        Toy(
            unsynced_offsets_transformer,
            _EO,
            expected=frozenset({_A.DUPLICATE}),
            faults=frozenset({Fault.MACHINE_CRASH}),
            twin="dedup_transformer",
        ),
        Toy(fenced_counter, _EO, COUNTS),
        Toy(atomic_counter, _EO, COUNTS, faults=_NO_ZOMBIE),
        Toy(
            two_step_counter,
            _EO,
            COUNTS,
            expected=frozenset({_A.COUNT_MISMATCH}),
            faults=frozenset({Fault.CRASH}),
            twin="atomic_counter",
        ),
        Toy(
            unfenced_counter,
            _EO,
            COUNTS,
            expected=frozenset({_A.COUNT_MISMATCH}),
            faults=frozenset({Fault.ZOMBIE}),
            twin="fenced_counter",
        ),
    )
}
