"""DistributedLog reader with offsets: at-least-once with a periodic offset store.

Seed: ``dlog-at-least-once-reader-offsets.txt`` (DistributedLog's ``ReaderWithOffsets``
tutorial). The reader opens the log at the DLSN kept in a LevelDB offset store (or at the
start), processes records, tracks the last position in an ``AtomicReference`` from the read
listener, and a timer stores that position every 10 seconds. On restart it resumes *at* the
stored DLSN, so the record stored last is delivered again: at-least-once, duplicates allowed,
nothing lost.

Processing here writes outputs in batches of three (or whatever is buffered when the source
is idle), so a record is processed only once its batch is committed. The correct reader's
timer stores the last *processed* position; the two classic bugs store a position that runs
ahead of processing: the position of the last record *read* (an open batch is lost by a crash
after a tick), and the position of the last *completed* asynchronous task (earlier tasks may
still be running).
"""

from __future__ import annotations

from harness import DLSN, AnomalyKind, Context, Delivery, Fault, Guarantee, Scenario, Subject

__all__ = ["SCENARIO"]

P = "in-0"
BATCH = 3


def _batched_reader(ctx: Context, *, track_read: bool) -> None:
    out = ctx.output("out")
    last: list[DLSN] = []  # the AtomicReference<DLSN> the timer reads

    def store_offset() -> None:  # the 10-second scheduleAtFixedRate task
        if last:
            ctx.offsets.put(P, last[-1])

    ctx.on_timer(store_offset)
    source = ctx.read(P, ctx.offsets.get(P))  # at the stored DLSN: it is delivered again
    batch: list[Delivery] = []
    while True:
        record = source.poll()
        if record is None:
            if batch:
                out.commit()
                last.append(batch[-1].dlsn)
                batch.clear()
            record = next(source)
        if track_read:
            last.append(record.dlsn)
        out.emit(record)
        batch.append(record)
        if len(batch) == BATCH:
            out.commit()
            if not track_read:
                last.append(batch[-1].dlsn)
            batch.clear()


def reader_with_offsets(ctx: Context) -> None:
    """Correct: the timer stores the DLSN of the last record whose batch of outputs is
    committed, and a restart resumes at it (that record is processed again)."""
    _batched_reader(ctx, track_read=False)


def offset_tracked_on_read(ctx: Context) -> None:
    """Bug: the read listener records each record's DLSN as soon as it is read, before its
    batch is committed; a tick stores it and a crash loses the open batch."""
    _batched_reader(ctx, track_read=True)


def _async_reader(ctx: Context, *, in_order: bool) -> None:
    out = ctx.output("out")

    def process(record: Delivery) -> None:
        out.emit(record)
        out.commit()

    source = ctx.read(P, ctx.offsets.get(P))
    for record, _ in ctx.map_async(process, source, parallelism=3, ordered=in_order):
        ctx.offsets.put(P, record.dlsn)  # the onSuccess listener stores the position


def async_reader_in_order(ctx: Context) -> None:
    """Correct: records are processed asynchronously, three at a time, and the listener
    stores each completed record's DLSN (the tightest period), but completions reach it in
    read order, so the stored DLSN never passes unfinished work."""
    _async_reader(ctx, in_order=True)


def async_reader_ahead(ctx: Context) -> None:
    """Bug: the listener stores the DLSN of whichever asynchronous task completed last, so
    the stored position runs ahead of records still being processed; a crash loses them."""
    _async_reader(ctx, in_order=False)


SCENARIO = Scenario(
    name="dlog-reader-offsets",
    title="DistributedLog reader with offsets (at-least-once)",
    seed="dlog-at-least-once-reader-offsets.txt",
    variants=(
        Subject("reader-with-offsets", reader_with_offsets, Guarantee.AT_LEAST_ONCE),
        Subject("async-reader-in-order", async_reader_in_order, Guarantee.AT_LEAST_ONCE),
        Subject(
            "offset-tracked-on-read",
            offset_tracked_on_read,
            Guarantee.AT_LEAST_ONCE,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH, Fault.TICK}),
        ),
        Subject(
            "async-reader-ahead",
            async_reader_ahead,
            Guarantee.AT_LEAST_ONCE,
            expected=frozenset({AnomalyKind.LOST}),
            needs=frozenset({Fault.CRASH, Fault.REORDER}),
        ),
    ),
)
