"""What a processor instance holds: its view of the world. Every call is a fault point.

A processor is a callable ``processor(ctx)``; it is written as ordinary blocking code (a loop
over ``ctx.read(...)``), and runs in a greenlet of its own, so the simulator can pause it
between any two calls into the world, crash it, keep it running as a zombie, or let another
instance run, all in one thread and in an order the schedule alone decides.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from harness.errors import AlreadyTruncatedTransaction, ConfigError, Fenced, LogEmpty
from harness.history.events import EventKind, SinkKind
from harness.log.dlsn import DLSN
from harness.log.reader import LogReader
from harness.log.record import LogRecord
from harness.log.writer import LogWriter
from harness.offsets.base import NO_STATE
from harness.sim.records import Delivery, OutputRecord, decode_input, decode_output, encode_output
from harness.sim.world import table_key

if TYPE_CHECKING:
    from harness.sim.simulator import Instance, Simulator
    from harness.sim.transaction import Transaction

__all__ = ["Context", "Offsets", "OutputLog", "Source", "Table"]

T = TypeVar("T")
R = TypeVar("R")


class Source:
    """Input records of one or more partitions, in order per partition.

    Iterating blocks while no record is available (the instance waits for the producer);
    :meth:`poll` returns ``None`` instead. With several partitions the interleaving is a
    schedule choice (``Reorder``).
    """

    def __init__(self, ctx: Context, starts: Mapping[str, DLSN | None]) -> None:
        self._ctx = ctx
        world = ctx._sim.world
        self._readers: dict[str, LogReader] = {}
        self._ahead: dict[str, Delivery | None] = {}
        # the position each reader must deliver next: its start, or the log's start when a
        # truncation hid the start before this instance fetched its offset (or, without a
        # fetch, before the reader was opened); a later truncation fails the reader
        self._expect: dict[str, int] = {}
        self._starts: dict[str, DLSN] = {}
        for partition, start in starts.items():
            world.check_partition(partition)
            if start is not None and type(start) is not DLSN:
                raise ConfigError(
                    f"read start for {partition!r} must be a DLSN or None, got {start!r}"
                )
            start = DLSN.INITIAL if start is None else start
            reader = world.logs[partition].open_reader(start)
            ctx._inst.readers.append(reader)
            self._readers[partition] = reader
            self._ahead[partition] = None
            self._starts[partition] = start
            low = world.fetched_low.pop((ctx._inst.number, partition), None)
            self._expect[partition] = max(
                world.position(partition, start),
                world.low_watermark[partition] if low is None else low,
            )
            # a reader opened again below what this instance read is its own seek
            world.record.rewind(ctx._inst.number, partition, self._expect[partition])
        self._last: Delivery | None = None

    def _peek(self, partition: str) -> Delivery | None:
        ahead = self._ahead[partition]
        if ahead is None:
            item = self._readers[partition].read_next()
            if item is None:
                return None
            world = self._ctx._sim.world
            record_id, key, value, poison = decode_input(item.payload, f"input log {partition!r}")
            position = world.position(partition, item.dlsn)
            # records appended below a start beyond the log's end are not owed to the reader
            expect = max(
                self._expect[partition], world.position(partition, self._starts[partition])
            )
            if position > expect:
                raise AlreadyTruncatedTransaction(
                    f"the reader of input {partition!r} was at offset {expect}, but a "
                    f"truncation after it was opened removed the records up to offset "
                    f"{position}; read again from the stored offset"
                )
            self._expect[partition] = position + 1
            ahead = self._ahead[partition] = Delivery(
                partition,
                position,
                record_id,
                key,
                value,
                item.dlsn,
                poison=poison,
            )
        return ahead

    def _take(self) -> Delivery | None:
        inst = self._ctx._inst
        delivery: Delivery | None
        if inst.duplicates and self._last is not None:
            inst.duplicates -= 1
            delivery = dataclasses.replace(self._last, redelivered=True)
        else:
            ready = [p for p in self._readers if self._peek(p) is not None]
            if not ready:
                return None
            partition = (
                ready[self._ctx._sim.choose(inst, len(ready))] if len(ready) > 1 else ready[0]
            )
            delivery = self._ahead[partition]
            assert delivery is not None
            self._ahead[partition] = None
            self._last = delivery
        self._ctx._sim.world.record(
            EventKind.READ,
            process=inst.number,
            partition=delivery.partition,
            offset=self._ctx._sim.world.offset_of(delivery.partition, delivery.offset),
            record_id=delivery.record_id,
            dlsn=delivery.dlsn.serialize(),
            detail="redelivered" if delivery.redelivered else None,
        )
        return delivery

    def poll(self) -> Delivery | None:
        """The next record if one is available now, else ``None``."""
        self._ctx._enter("source.poll")
        return self._take()

    def __iter__(self) -> Iterator[Delivery]:
        return self

    def __next__(self) -> Delivery:
        ctx = self._ctx
        ctx._enter("source.next")
        while (delivery := self._take()) is None:
            ctx._sim.block(ctx._inst)
        return delivery


class Offsets:
    """The offset store, keyed by input partition name; tables share its atomic writes."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def get(self, partition: str) -> DLSN | None:
        """The stored DLSN to resume ``partition`` from, or None."""
        ctx = self._ctx
        ctx._enter("offsets.get")
        world = ctx._sim.world
        world.check_partition(partition)
        dlsn = world.read_offset(ctx._inst.machine, partition)
        world.fetched_low[(ctx._inst.number, partition)] = world.low_watermark[partition]
        # the event's offset is where a reader opened at the stored offset resumes: the
        # log's start when a truncation (the processor's own) hid the stored position
        resume = world.resume_position(partition, dlsn)
        world.record(
            EventKind.FETCH,
            process=ctx._inst.number,
            partition=partition,
            offset=None if resume is None else world.shown(partition, resume),
            dlsn=None if dlsn is None else dlsn.serialize(),
        )
        return dlsn

    def put(self, partition: str, dlsn: DLSN) -> None:
        """Store where to resume ``partition`` (one write)."""
        self.commit({partition: dlsn})

    def get_state(self, key: str) -> bytes | None:
        """Processor state committed with offsets (``commit(state=...)``)."""
        ctx = self._ctx
        ctx._enter("offsets.get_state")
        return ctx._sim.world.read_state(ctx._inst.machine, f"state:{key}")

    def commit(
        self,
        offsets: Mapping[str, DLSN] | None = None,
        *,
        tables: Mapping[str, Mapping[str, int]] | None = None,
        increments: Mapping[str, Mapping[str, int]] | None = None,
        state: Mapping[str, bytes | None] | None = None,
        fenced: bool = False,
    ) -> None:
        """Write offsets, table entries and state in one atomic write.

        ``tables`` sets table entries to values; ``increments`` adds to them (a missing entry
        counts as 0), as a store's own atomic increment does (SQL's ``SET n = n + 1``, Redis
        ``INCRBY``). An increment is not idempotent: when the write's acknowledgement is lost
        (``LoseAck``) the client sends it again and it is applied twice. A retried write of
        values changes nothing, so only a write with increments consults ``LoseAck``.
        ``fenced=True`` first checks that this instance still owns the world (it called
        :meth:`Context.claim` and nobody claimed after it), as Kafka's transactional producer
        epochs do; otherwise :class:`Fenced` is raised and nothing is written.
        """
        ctx = self._ctx
        ctx._enter("offsets.commit")
        retried = bool(self._entries(increments, "increments")) and ctx._sim.take_lost_ack(
            ctx._inst
        )
        for _ in range(2 if retried else 1):
            self._write(offsets, tables, state, fenced, increments)

    def _write(
        self,
        offsets: Mapping[str, DLSN] | None,
        tables: Mapping[str, Mapping[str, int]] | None,
        state: Mapping[str, bytes | None] | None,
        fenced: bool,
        increments: Mapping[str, Mapping[str, int]] | None = None,
        exact: Mapping[str, int] | None = None,
    ) -> None:
        """The atomic write itself (not a fault point: a transaction's commit calls it).
        ``exact``: the offsets the commit events show, when the caller knows them better
        than the DLSNs say (a Kafka client's committed offset inside a gap of markers)."""
        ctx = self._ctx
        world = ctx._sim.world
        inst = ctx._inst
        if fenced and world.owner_epoch != inst.number:
            raise Fenced(
                f"instance {inst.number} is fenced: instance {world.owner_epoch} claimed "
                "ownership after it; a zombie must not write"
            )
        offsets = dict(offsets or {})
        positions = {}
        for partition, dlsn in offsets.items():
            world.check_partition(partition)
            if type(dlsn) is not DLSN:
                raise ConfigError(f"offset for {partition!r} must be a DLSN, got {dlsn!r}")
            positions[partition] = world.shown(partition, world.commit_position(partition, dlsn))
        puts = self._entries(tables, "tables")
        added = self._entries(increments, "increments")
        both = sorted({(t, k) for t, k, _ in puts} & {(t, k) for t, k, _ in added})
        if both:
            raise ConfigError(
                f"table {both[0][0]!r} key {both[0][1]!r} is both set (tables=) and "
                "incremented (increments=) in one commit; do one or the other"
            )
        for table, key, delta in added:
            raw_value = world.read_state(inst.machine, table_key(table, key))
            puts.append((table, key, (0 if raw_value is None else int(raw_value)) + delta))
        raw: dict[str, bytes | None] = {table_key(t, k): str(v).encode() for t, k, v in puts}
        for name, value in (state or NO_STATE).items():
            raw[f"state:{name}"] = value
        if not offsets and not raw:
            return
        world.store_write(inst.machine, offsets, raw)
        for partition, dlsn in offsets.items():
            world.record(
                EventKind.COMMIT,
                process=inst.number,
                partition=partition,
                offset=(exact or positions).get(partition, positions[partition]),
                dlsn=dlsn.serialize(),
            )
        for table, key, count in puts:
            world.table_keys[table].add(key)
            world.record(EventKind.PUT, process=inst.number, sink=table, key=key, value=count)

    def _entries(
        self, tables: Mapping[str, Mapping[str, int]] | None, argument: str
    ) -> list[tuple[str, str, int]]:
        """``(table, key, int)`` for every entry of ``tables``, each checked."""
        if tables is not None and not isinstance(tables, Mapping):
            raise ConfigError(
                f"{argument}= must be a mapping of table -> {{key: int}}, got {tables!r}"
            )
        entries = []
        for table, items in (tables or {}).items():
            self._ctx._check_table(table)
            if not isinstance(items, Mapping):
                raise ConfigError(
                    f"{argument}[{table!r}] must be a mapping of str -> int, got {items!r}"
                )
            for key, count in items.items():
                if type(count) is not int or type(key) is not str:
                    raise ConfigError(
                        f"table {table!r} entries must be str -> int, got {key!r}: {count!r}"
                    )
                entries.append((table, key, count))
        return entries


class Table:
    """A key -> int table sink (stored in the offset store's state): :meth:`put` sets a
    value (last write wins), :meth:`add` increments one."""

    def __init__(self, ctx: Context, name: str) -> None:
        ctx._check_table(name)
        self._ctx = ctx
        self.name = name

    def get(self, key: str) -> int | None:
        ctx = self._ctx
        ctx._enter("table.get")
        raw = ctx._sim.world.read_state(ctx._inst.machine, table_key(self.name, key))
        return None if raw is None else int(raw)

    def put(self, key: str, value: int) -> None:
        """Store ``value`` under ``key`` (one write; a lost ack makes the client write twice)."""
        ctx = self._ctx
        retries = 2 if ctx._sim.take_lost_ack(ctx._inst) else 1
        for _ in range(retries):
            ctx.offsets.commit(tables={self.name: {key: value}})

    def add(self, key: str, delta: int = 1) -> None:
        """Add ``delta`` to the value under ``key`` (missing: 0) in one write, the store's own
        atomic increment; a lost acknowledgement makes the client send it again, so it is
        added twice (an increment is not idempotent, unlike :meth:`put`)."""
        self._ctx.offsets.commit(increments={self.name: {key: delta}})


class OutputLog:
    """An output log sink: ``emit`` buffers, ``commit`` makes outputs visible and durable."""

    def __init__(self, ctx: Context, name: str, idempotent: bool) -> None:
        spec = ctx._sim.world.topology.sinks.get(name)
        if spec is None or spec.kind not in (SinkKind.LOG, SinkKind.ENTITY):
            raise ConfigError(
                f"{name!r} is not a log sink of this topology; its log sinks are "
                f"{ctx._sim.world.topology.log_sinks()}"
            )
        self._ctx = ctx
        self.name = name
        self._log = f"out-{name}"
        self._writer: LogWriter | None = None
        self._pending: list[bytes] = []
        self.idempotent = idempotent

    def _open(self) -> LogWriter:
        ctx = self._ctx
        if ctx._inst.fenced:
            raise Fenced(
                f"instance {ctx._inst.number} lost ownership of log {self._log!r} (another "
                "instance took over); its writes are fenced"
            )
        if self._writer is None:
            world = ctx._sim.world
            world.sync_txid(self._log)
            self._writer = world.logs[self._log].open_writer()
            ctx._inst.writers.append(self._writer)
        return self._writer

    def emit(
        self,
        source: Delivery | str | None,
        *,
        key: str | None = None,
        value: int | None = None,
        part: int = 0,
        parts: int = 1,
    ) -> int:
        """Write one output derived from ``source`` (a Delivery, a record id, or None).

        ``key``/``value`` default to the delivery's. ``part``/``parts`` name this output
        among several produced for one input. Returns the output id.
        """
        self._ctx._enter("output.emit")
        return self._emit(source, key, value, part, parts, None)

    def _emit(
        self,
        source: Delivery | str | None,
        key: str | None,
        value: int | None,
        part: int,
        parts: int,
        txn: int | None,
    ) -> int:
        ctx = self._ctx
        writer = self._open()
        world = ctx._sim.world
        if isinstance(source, Delivery):
            record_id: str | None = source.record_id
            dlsn: DLSN | None = source.dlsn
            key = source.key if key is None else key
            value = source.value if value is None else value
        else:
            record_id, dlsn = source, None
        spec = world.topology.sinks[self.name]
        if key is None and (spec.upsert or spec.kind is SinkKind.ENTITY):
            raise ConfigError(
                f"an output of upsert sink {self.name!r} needs a key (the row it writes), got "
                f"none: emit({source!r}) with no key= and no Delivery to take it from"
            )
        output_id = world.next_output_id
        world.next_output_id += 1
        payload = encode_output(output_id, record_id, part, parts, key, value, dlsn)
        writer.write(LogRecord(world.next_txid(self._log), payload))
        self._pending.append(payload)
        world.record(
            EventKind.EMIT,
            process=ctx._inst.number,
            sink=self.name,
            output_id=output_id,
            record_id=record_id,
            part=part,
            parts=parts,
            key=key,
            value=value,
            txn=txn,
        )
        return output_id

    def commit(self) -> None:
        """Make every emitted output visible and durable (a lost ack resends them)."""
        self._ctx._enter("output.commit")
        self._flush(retry=True)

    def _flush(self, *, retry: bool) -> None:
        ctx = self._ctx
        writer = self._open()
        writer.commit()
        # An idempotent producer's retry is recognised by the log and dropped (Kafka's
        # enable.idempotence); a plain one appends the batch a second time.
        lost_ack = retry and ctx._sim.take_lost_ack(ctx._inst)
        if lost_ack and self._pending and not self.idempotent:
            world = ctx._sim.world
            for payload in self._pending:
                writer.write(LogRecord(world.next_txid(self._log), payload))
            writer.commit()
        self._pending.clear()

    def _discard(self) -> None:
        """Abort the writer: what was emitted and not committed is gone."""
        if self._writer is not None:
            self._writer.abort()
            inst = self._ctx._inst
            if self._writer in inst.writers:
                inst.writers.remove(self._writer)
            self._writer = None
        self._pending.clear()

    def last(self) -> OutputRecord | None:
        """The last committed output of this log, or None if there is none."""
        ctx = self._ctx
        ctx._enter("output.last")
        try:
            item = ctx._sim.world.logs[self._log].get_last_log_record()
        except LogEmpty:
            return None
        return decode_output(item.payload, f"output log {self._log!r}")


class Context:
    """A processor instance's handle on the world (see the module docstring)."""

    def __init__(self, sim: Simulator, inst: Instance) -> None:
        self._sim = sim
        self._inst = inst
        self.offsets = Offsets(self)
        self._outputs: dict[str, OutputLog] = {}

    @property
    def instance(self) -> int:
        """This instance's number (1, 2, ... in start order); also its ownership epoch."""
        return self._inst.number

    @property
    def partitions(self) -> tuple[str, ...]:
        """The input partition names (``in-0``, ...)."""
        return self._sim.world.partitions

    def _enter(self, point: str) -> None:
        self._sim.enter(self._inst, point)

    def _check_table(self, name: str) -> None:
        spec = self._sim.world.topology.sinks.get(name)
        if spec is None or spec.kind is not SinkKind.TABLE:
            raise ConfigError(
                f"{name!r} is not a table sink of this topology; its table sinks are "
                f"{self._sim.world.topology.table_sinks()}"
            )

    def read(self, partition: str, start: DLSN | None = None) -> Source:
        """Records of ``partition`` from ``start`` (None: the beginning)."""
        return Source(self, {partition: start})

    def read_all(self, starts: Mapping[str, DLSN | None]) -> Source:
        """Records of several partitions, merged in an order the schedule picks."""
        return Source(self, dict(starts))

    def truncate(self, partition: str, dlsn: DLSN) -> None:
        """Truncate input ``partition`` below ``dlsn``, as DistributedLog's
        ``truncate(dlsn)``: completed log segments entirely before ``dlsn`` are deleted and
        the one holding it starts at ``dlsn``; the segment being written is never truncated.
        Readers opened later, by any instance, start at the log's new start, so records
        truncated before their effects are durable are gone for good. Like the instance's
        output writers it needs ownership: a zombie's truncation raises :class:`Fenced`."""
        self._enter("input.truncate")
        inst = self._inst
        world = self._sim.world
        partition = world.check_truncation(partition, dlsn)
        if inst.fenced:
            raise Fenced(
                f"instance {inst.number} lost ownership (another instance took over); its "
                f"truncation of {partition!r} at {dlsn!r} is fenced"
            )
        world.truncate_input(partition, dlsn, inst.number)

    def output(self, name: str = "out", *, idempotent: bool = False) -> OutputLog:
        """The output log sink ``name`` (one writer per instance).

        ``idempotent=True`` is a producer whose retries the log deduplicates, so a lost
        acknowledgement (``LoseAck``) does not duplicate the batch.
        """
        out = self._outputs.get(name)
        if out is None:
            out = self._outputs[name] = OutputLog(self, name, idempotent)
        return out

    def table(self, name: str) -> Table:
        return Table(self, name)

    def choose(self, options: int) -> int:
        """Which of ``options`` concurrent things happens next (0-based): a schedule choice
        (``Reorder``), for modelling concurrency inside the processor (substreams, flows)."""
        if type(options) is not int or options < 1:
            raise ConfigError(f"choose needs an int >= 1 options, got {options!r}")
        return self._sim.choose(self._inst, options) if options > 1 else 0

    def transaction(self, *, fenced: bool = True) -> Transaction:
        r"""Begin a transaction: its emits, table puts and input offsets become visible and
        durable together at :meth:`Transaction.commit`, or not at all (Kafka's transactional
        read-process-write). ``fenced=True`` uses producer epochs: after a newer instance
        :meth:`claim`\ s, this one's commit raises :class:`Fenced` and the transaction
        aborts. One transaction at a time per instance."""
        from harness.sim.transaction import Transaction

        return Transaction(self, fenced=fenced)

    def claim(self) -> None:
        """Become the owner: later ``commit(fenced=True)`` by older instances fail."""
        self._enter("claim")
        self._sim.world.owner_epoch = self._inst.number

    def on_shutdown(self, exception: type[BaseException]) -> None:
        """Ask to be shut down, not released, when a settled run ends while this instance
        waits for input: ``exception`` is raised at the point where it waits, and the
        instance runs on, without faults, until it returns (its ``finally`` blocks run, as
        on SIGTERM); ``exception`` escaping the instance is a normal end. A crash still
        gives no such chance. Used by loops that never return (``while True: poll()``)."""
        self._inst.shutdown = exception

    def on_timer(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` whenever the schedule fires this instance's timers (``Tick``)."""
        self._inst.timers.append(callback)

    def map_async(
        self,
        fn: Callable[[T], R],
        items: Iterable[T],
        *,
        parallelism: int,
        ordered: bool,
    ) -> Iterator[tuple[T, R]]:
        """Run ``fn`` on up to ``parallelism`` items at a time; yield ``(item, result)``.

        Which in-flight task completes next is a schedule choice (``Reorder``); each
        completion is a fault point and runs ``fn`` then. ``ordered=True`` yields in input
        order (Akka's ``mapAsync``), ``ordered=False`` in completion order
        (``mapAsyncUnordered``).
        """
        if type(parallelism) is not int or parallelism < 1:
            raise ConfigError(f"map_async parallelism must be an int >= 1, got {parallelism!r}")
        return self._map_async(fn, items, parallelism, ordered)

    def _map_async(
        self, fn: Callable[[T], R], items: Iterable[T], parallelism: int, ordered: bool
    ) -> Iterator[tuple[T, R]]:
        sim, inst = self._sim, self._inst
        iterator: Iterator[Any] = iter(items)
        poll = iterator.poll if isinstance(iterator, Source) else None
        in_flight: deque[tuple[int, Any]] = deque()
        finished: dict[int, tuple[T, R]] = {}
        submitted = yielded = 0
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < parallelism:
                item: Any
                if poll is not None and in_flight:
                    item = poll()
                    if item is None:
                        break
                else:
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                in_flight.append((submitted, item))
                submitted += 1
            if not in_flight:
                return
            self._enter("map_async")
            pick = sim.choose(inst, len(in_flight)) if len(in_flight) > 1 else 0
            number, task = in_flight[pick]
            del in_flight[pick]
            result = fn(task)
            if not ordered:
                yield task, result
                continue
            finished[number] = (task, result)
            while yielded in finished:
                yield finished.pop(yielded)
                yielded += 1
