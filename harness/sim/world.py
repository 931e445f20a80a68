"""The durable world a simulated run happens in: logs, the offset store, the producer, truth.

The world owns everything that outlives a processor instance: the input and output logs (a
reference-log namespace, memory or LevelDB), the offset store (memory or LevelDB; table sinks
live in its state key space so they can be committed atomically with offsets) and the history
being recorded. Instances reach it only through their :class:`~harness.sim.context.Context`.

A machine crash loses the unsynced offset-store writes *that machine* made, never another
machine's (:mod:`harness.sim.unsynced` has the model and the journal). Neither backend can
drop a page cache, so the world journals every unsynced write and, after a crash, puts every
key the lost writes touched back to what survives: on memory by resetting the storage and
writing the surviving image, on LevelDB by deleting the journaled keys and writing it.
"""

from __future__ import annotations

import bisect
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from harness._shown import shown
from harness.errors import ConfigError, LogEmpty
from harness.history.events import (
    POISON,
    RESENT,
    Event,
    EventKind,
    FetchDetail,
    History,
    HistoryMeta,
    RebalanceDetail,
    SinkKind,
)
from harness.log.config import LogConfig
from harness.log.dlsn import DLSN
from harness.log.manager import LogManager
from harness.log.namespace import Namespace, leveldb_uri, open_namespace
from harness.log.record import LogRecord
from harness.log.writer import LogWriter
from harness.offsets.leveldb import LevelDBOffsetStore
from harness.offsets.memory import MemoryOffsetStorage, MemoryOffsetStore
from harness.sim.records import decode_input, decode_output, encode_input
from harness.sim.topology import Topology
from harness.sim.unsynced import Key, UnsyncedWrites, Value

__all__ = ["Backend", "World"]

Backend = Literal["memory", "leveldb"]
BACKENDS: tuple[Backend, ...] = ("memory", "leveldb")
_names = itertools.count()
_ASSIGNED, _REVOKED = RebalanceDetail.ASSIGNED.value, RebalanceDetail.REVOKED.value
_Input = tuple[str, str, int, bool]
"""An input record as the producer writes it: record id, key, value, poison."""


def table_key(table: str, key: str) -> str:
    return f"table:{table}:{key}"


class Recorder:
    """Appends events with consecutive indices."""

    __slots__ = ("events", "last_read")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.last_read: dict[tuple[int, str], int] = {}
        """(process, partition) -> the offset of its last read there, until it fetches."""

    def __call__(self, kind: EventKind, **fields: Any) -> Event:
        event = Event(len(self.events), kind, **fields)
        self.events.append(event)
        if event.process is not None and event.partition is not None:
            where = (event.process, event.partition)
            if kind is EventKind.FETCH:
                self.last_read.pop(where, None)
            elif kind is EventKind.READ and event.detail is None:
                assert event.offset is not None
                self.last_read[where] = event.offset
        return event

    def rebalance(self, process: int, before: Iterable[str], after: Iterable[str]) -> None:
        """Instance ``process``'s assignment went from partitions ``before`` to ``after``: a
        ``rebalance`` event for each one revoked, then each one assigned (in their order)."""
        before, after = list(dict.fromkeys(before)), list(dict.fromkeys(after))
        for partition in before:
            if partition not in after:
                self(EventKind.REBALANCE, process=process, partition=partition, detail=_REVOKED)
        for partition in after:
            if partition not in before:
                self(EventKind.REBALANCE, process=process, partition=partition, detail=_ASSIGNED)

    def rewind(self, process: int, partition: str, offset: int) -> None:
        """The application moved its reader of ``partition`` to ``offset`` itself: a
        ``fetch`` with detail ``seek`` when that is at or below its last read there (the
        reads that follow go back on its word, not the reader's: no ``nonmonotonic-poll``);
        nothing otherwise, so a history without rewinds is what it always was."""
        last = self.last_read.get((process, partition))
        if last is not None and offset <= last:
            self(
                EventKind.FETCH,
                process=process,
                partition=partition,
                offset=offset,
                detail=FetchDetail.SEEK.value,
            )


class World:
    """Logs, offset store, producer and history of one run. Close it when done."""

    def __init__(
        self,
        topology: Topology,
        backend: Backend = "memory",
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.topology = topology
        self.backend: Backend = backend
        self.record = Recorder()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._memory_name = ""
        config = LogConfig(segment_max_records=topology.segment_records)
        if backend == "memory":
            self._memory_name = f"harness-sim-{os.getpid()}-{next(_names)}"
            self.namespace: Namespace = open_namespace(
                f"distributedlog-memory://{self._memory_name}", config=config
            )
            self._storage: MemoryOffsetStorage | None = MemoryOffsetStorage(self._memory_name)
            self.store: MemoryOffsetStore | LevelDBOffsetStore = MemoryOffsetStore(
                sync=topology.offset_sync, storage=self._storage
            )
        else:
            if directory is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="harness-sim-")
                directory = self._tmp.name
            root = Path(directory)
            self.namespace = open_namespace(leveldb_uri(root / "logs"), config=config)
            self._storage = None
            self.store = LevelDBOffsetStore(root / "offsets", sync=topology.offset_sync)
        self._unsynced: UnsyncedWrites | None = UnsyncedWrites()
        self.partitions = topology.partition_names
        self.logs: dict[str, LogManager] = {}
        for name in self.partitions + tuple(f"out-{s}" for s in topology.log_sinks()):
            self.namespace.create_log(name)
            self.logs[name] = self.namespace.open_log(name)
        # Input truth: per partition, DLSNs and record ids of committed records, by position.
        self.dlsns: dict[str, list[DLSN]] = {p: [] for p in self.partitions}
        self.record_ids: dict[str, list[str]] = {p: [] for p in self.partitions}
        self.low_watermark: dict[str, int] = dict.fromkeys(self.partitions, 0)
        # the offset each committed record shows (its position, unless the input is
        # transactional: then markers and aborted records take offsets too) and the next
        # offset the partition gives (Kafka's high watermark: after the last marker)
        self.gaps = topology.transactional_input
        self.offsets: dict[str, list[int]] = {p: [] for p in self.partitions}
        self.end_offset: dict[str, int] = dict.fromkeys(self.partitions, 0)
        # per (instance, partition): the low watermark when the instance last fetched the
        # stored offset and has not opened a reader of the partition since
        self.fetched_low: dict[tuple[int, str], int] = {}
        self._producer_writers: dict[str, LogWriter] = {}
        self._producer_readers = {
            p: self.logs[p].open_reader(DLSN.INITIAL) for p in self.partitions
        }
        self._next_record = 0
        # every record id appended, with what the upstream would write again for it (kept
        # only when the topology's upstream resends)
        self._inputs: dict[str, _Input] = {}
        self._txid: dict[str, int] = dict.fromkeys(self.logs, 0)
        self.next_output_id = 0
        self.next_txn = 1
        # What the offset store holds per partition, as a position (None: no offset).
        self.stored: dict[str, int | None] = dict.fromkeys(self.partitions, None)
        self.table_keys: dict[str, set[str]] = {t: set() for t in topology.table_sinks()}
        self.owner_epoch = 0
        self.closed = False
        self.before_observe: list[Callable[[], None]] = []
        """Called first by :meth:`observe`: a door that observes effects outside the world
        (printed lines, files, a database) writes them into its log sinks here."""
        self.on_close: list[Callable[[], None]] = []
        """Called by :meth:`close` (what such a door must clean up)."""

    # -- positions -------------------------------------------------------------------------

    def position(self, partition: str, dlsn: DLSN) -> int:
        """How many committed input records of ``partition`` lie before ``dlsn``."""
        return bisect.bisect_left(self.dlsns[partition], dlsn)

    def commit_position(self, partition: str, dlsn: DLSN) -> int:
        """The position a committed ``dlsn`` claims for ``partition``, read as a position.

        Within the records committed so far it is :meth:`position`. Past the partition's end
        (``dlsn`` above the last record's ``next()``, or above ``DLSN.INITIAL`` in an empty
        partition) it is *not* clamped to the end: a commit there claims records that do not
        exist yet, which the checker must see as ``offset-ahead`` when it is made, not when a
        later record is skipped. In the end's own entry the slots say how far past it is
        (another partition's ``record.next``, say); beyond that entry, one past the end.
        """
        dlsns = self.dlsns[partition]
        end = dlsns[-1].next() if dlsns else DLSN.INITIAL
        if dlsn <= end:
            return self.position(partition, dlsn)
        if (dlsn.segment, dlsn.entry) == (end.segment, end.entry):
            return len(dlsns) + dlsn.slot - end.slot
        return len(dlsns) + 1

    def shown(self, partition: str, position: int) -> int:
        """The offset that stands for ``position`` (the next record to read is the
        ``position``-th) in the history and to Kafka clients: the position itself, or, with
        transactional input, the offset after the record before it (0 for the first), so a
        resume point never claims the markers and aborted records before the next record;
        past the end, as far past the last record's next offset."""
        if not self.gaps or position <= 0:
            return position
        offsets = self.offsets[partition]
        if not offsets:
            return position
        return offsets[min(position, len(offsets)) - 1] + 1 + max(0, position - len(offsets))

    def offset_of(self, partition: str, position: int) -> int:
        """The offset of the committed record at ``position``."""
        return self.offsets[partition][position] if self.gaps else position

    def position_of(self, partition: str, offset: int) -> int:
        """The position of the first committed record at ``offset`` or after it."""
        if not self.gaps:
            return offset
        return bisect.bisect_left(self.offsets[partition], offset)

    def check_partition(self, partition: object) -> str:
        if partition not in self.dlsns:
            raise ConfigError(
                f"unknown input partition {partition!r}; this topology's partitions are "
                f"{list(self.partitions)} (offsets are stored under the partition name)"
            )
        return partition

    def next_txid(self, log: str) -> int:
        self._txid[log] += 1
        return self._txid[log]

    def sync_txid(self, log: str) -> None:
        """Continue after the highest txid already in ``log`` (a new writer after a crash)."""
        try:
            last = self.logs[log].get_last_txid()
        except LogEmpty:
            return
        self._txid[log] = max(self._txid[log], last)

    # -- the input producer ----------------------------------------------------------------

    def partition_at(self, number: int) -> str:
        """The partition a schedule's partition number names (folded onto the topology's)."""
        return self.partitions[number % len(self.partitions)]

    def _producer_writer(self, partition: str) -> LogWriter:
        """The producer's writer of ``partition``, opened after the log's last txid."""
        writer = self._producer_writers.get(partition)
        if writer is None:
            self.sync_txid(partition)
            writer = self._producer_writers[partition] = self.logs[partition].open_writer()
        return writer

    def produce(
        self, partition: str, count: int, ack: bool, *, stop: Callable[[], bool] | None = None
    ) -> None:
        """Append ``count`` records; acknowledged only if ``ack`` (else the producer crashes).
        ``stop`` is asked every 1024 records: when it says so the producer crashes there."""
        keys, poison_every = self.topology.keys, self.topology.poison_every
        payloads = self.topology.payloads
        first = self._next_record
        self._next_record += count

        def records() -> Iterator[_Input]:
            for n in range(first, first + count):
                poison = poison_every > 0 and n % poison_every == poison_every - 1
                key, value = (
                    payloads[n % len(payloads)] if payloads else (f"k{n % keys}", n % 5 + 1)
                )
                yield f"r{n}", key, value, poison

        self._append(partition, records(), ack, stop=stop)

    def resend(self, partition: str, count: int) -> None:
        """The upstream appends its last ``count`` committed records of ``partition`` again,
        under the same ids, keys and values (an at-least-once producer's resend after a lost
        acknowledgement), committed and acknowledged; nothing when the topology's upstream
        does not resend, or the partition has no records yet."""
        if not self.topology.upstream_resends or count <= 0:
            return
        again = [self._inputs[rid] for rid in self.record_ids[partition][-count:]]
        if again:
            self._append(partition, iter(again), True, resent=True)

    def _append(
        self,
        partition: str,
        records: Iterator[_Input],
        ack: bool,
        *,
        resent: bool = False,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Write ``records`` in one producer transaction, recording an ``append`` each; then
        commit and acknowledge them, or (``ack`` False) abort: the producer crashed."""
        writer = self._producer_writer(partition)
        record = self.record
        # an aborted transaction's records and a marker keep their offsets
        base = self.end_offset[partition] if self.gaps else len(self.dlsns[partition])
        resends = self.topology.upstream_resends  # only an upstream that resends keeps them
        written = 0
        for i, (record_id, key, value, poison) in enumerate(records):
            if stop is not None and i & 1023 == 1023 and stop():
                ack = False
                break
            written += 1
            payload = encode_input(record_id, key, value, poison=poison)
            writer.write(LogRecord(self.next_txid(partition), payload))
            if resends:
                self._inputs.setdefault(record_id, (record_id, key, value, poison))
            record(
                EventKind.APPEND,
                partition=partition,
                offset=base + i,
                record_id=record_id,
                key=key,
                value=value,
                detail=RESENT if resent else POISON if poison else None,
            )
        if self.gaps:  # the commit or abort marker
            self.end_offset[partition] = base + written + 1
        if not ack:
            writer.abort()
            del self._producer_writers[partition]
            return
        writer.commit()
        reader = self._producer_readers[partition]
        dlsns, ids = self.dlsns[partition], self.record_ids[partition]
        offsets, first = self.offsets[partition], len(dlsns)
        while (item := reader.read_next()) is not None:
            rid, _, _, _ = decode_input(item.payload, f"input log {partition!r}")
            offsets.append(base + len(dlsns) - first if self.gaps else len(dlsns))
            dlsns.append(item.dlsn)
            ids.append(rid)
            record(
                EventKind.ACK,
                partition=partition,
                offset=offsets[-1],
                record_id=rid,
                dlsn=item.dlsn.serialize(),
            )
        if not self.gaps:
            self.end_offset[partition] = len(dlsns)

    def truncate(self, partition: str, upto: int) -> None:
        """Retention: truncate below ``upto``, never past the durably stored offset.

        Retention that followed an offset a machine crash can still take back would lose
        records no processor bug explains, so it honours only what is durable.
        """
        stored = self.durable_position(partition) or 0
        target = min(upto, stored, len(self.dlsns[partition]))
        if target <= self.low_watermark[partition]:
            return
        dlsns = self.dlsns[partition]
        self._truncate_at(partition, dlsns[target] if target < len(dlsns) else dlsns[-1].next())

    def truncate_input(self, partition: str, dlsn: DLSN, process: int) -> None:
        """A processor's own ``truncate(dlsn)`` of its input (DistributedLog's rules: only
        completed segments are truncated, never the one being written); unlike retention it
        does not wait for any stored offset, so it may hide records nothing has done yet.
        ``dlsn`` is checked by the caller (:meth:`check_truncation`)."""
        self._truncate_at(partition, dlsn, process)

    def check_truncation(self, partition: object, dlsn: object) -> str:
        """``partition`` if truncating it below ``dlsn`` is allowed, else ConfigError."""
        self.check_partition(partition)
        assert isinstance(partition, str)
        if type(dlsn) is not DLSN:
            raise ConfigError(
                f"truncate({partition!r}, ...) takes a DLSN (a Delivery's .dlsn or .next, or "
                f"a stored offset), got {type(dlsn).__name__}: {shown(dlsn)}"
            )
        if min(dlsn.segment, dlsn.entry, dlsn.slot) < 0:
            raise ConfigError(
                f"truncate({partition!r}, {dlsn!r}) names a negative position (DLSN.INVALID is "
                "one); truncate at a DLSN the log gave you, such as record.next"
            )
        dlsns = self.dlsns[partition]
        end = dlsns[-1].next() if dlsns else DLSN.INITIAL
        if dlsn > end:
            raise ConfigError(
                f"truncate({partition!r}, {dlsn!r}) is beyond the end of the log ({end!r}, after "
                f"its {len(dlsns)} committed records); truncate at or below the next record "
                "to read"
            )
        return partition

    def _truncate_at(self, partition: str, dlsn: DLSN, process: int | None = None) -> None:
        """Truncate ``partition`` below ``dlsn``; record a ``truncate`` event if the log's
        first readable record moved up."""
        self._producer_writer(partition).truncate(dlsn)
        low = self.log_start(partition)
        if low > self.low_watermark[partition]:
            self.low_watermark[partition] = low
            shown = self.shown(partition, low)
            self.record(EventKind.TRUNCATE, process=process, partition=partition, offset=shown)

    def log_start(self, partition: str) -> int:
        """The position of ``partition``'s first readable record (its length: none left)."""
        try:
            first = self.logs[partition].get_first_log_record().dlsn
        except LogEmpty:
            return len(self.dlsns[partition])
        return self.position(partition, first)

    def resume_position(self, partition: str, dlsn: DLSN | None) -> int | None:
        """Where a reader opened at the stored offset ``dlsn`` resumes now: its position, or
        the log's start when truncation hid it (None: no stored offset)."""
        if dlsn is None:
            return None
        return max(self.position(partition, dlsn), self.low_watermark[partition])

    # -- the offset store ------------------------------------------------------------------

    def store_write(
        self,
        machine: int,
        offsets: Mapping[str, DLSN],
        state: Mapping[str, bytes | None],
    ) -> None:
        """One atomic offset-store write by ``machine`` (journaled while it is unsynced)."""
        store = self.store
        if not store.sync and self._unsynced is not None:
            values: dict[Key, Value] = {("offset", p): dlsn for p, dlsn in offsets.items()}
            values.update((("state", k), v) for k, v in state.items())
            self._unsynced.record(machine, values, self._current)
        if len(offsets) == 1 and not state:
            [(partition, dlsn)] = offsets.items()
            store.put(partition, dlsn)
        else:
            store.commit(dict(offsets), dict(state))
        for partition, dlsn in offsets.items():
            self.stored[partition] = self.commit_position(partition, dlsn)

    def read_offset(self, machine: int, partition: str) -> DLSN | None:
        """The stored offset of ``partition``, as an instance on ``machine`` reads it (which
        flushes another machine's unsynced write of it: see :mod:`harness.sim.unsynced`)."""
        if self._unsynced is not None:
            self._unsynced.read(machine, ("offset", partition))
        return self.store.get(partition)

    def read_state(self, machine: int, key: str) -> bytes | None:
        """State (or a table entry) ``key``, as an instance on ``machine`` reads it."""
        if self._unsynced is not None:
            self._unsynced.read(machine, ("state", key))
        return self.store.get_state(key)

    def _current(self, key: Key) -> Value:
        kind, name = key
        return self.store.get(name) if kind == "offset" else self.store.get_state(name)

    def forget_unsynced(self) -> None:
        """Stop journaling: no machine crash and no retention will follow (the drain)."""
        self._unsynced = None

    def durable_position(self, partition: str) -> int | None:
        """The stored offset of ``partition`` that no machine crash can take back."""
        dlsn: Value = self.store.get(partition)
        if self._unsynced is not None:
            dlsn = self._unsynced.durable_value(("offset", partition), dlsn)
        return self.position(partition, dlsn) if isinstance(dlsn, DLSN) else None

    def machine_crash(self, machine: int, keep: int) -> None:
        """``machine`` loses its unsynced offset-store writes except its first ``keep``;
        record a ``rollback`` for every partition whose stored offset changed."""
        if self._unsynced is not None and self._unsynced.crash(machine, keep):
            self._restore()
        for partition in self.partitions:
            dlsn = self.store.get(partition)
            now = None if dlsn is None else self.commit_position(partition, dlsn)
            if now != self.stored[partition]:
                self.stored[partition] = now
                self.record(
                    EventKind.ROLLBACK,
                    partition=partition,
                    offset=None if now is None else self.shown(partition, now),
                    dlsn=None if dlsn is None else dlsn.serialize(),
                )

    def _restore(self) -> None:
        """Make the store hold what the journal says survived (no backend can drop a page
        cache: clear every journaled key, then write the surviving image in one write)."""
        assert self._unsynced is not None
        image = self._unsynced.image()
        store = self.store
        if isinstance(store, LevelDBOffsetStore):
            db = store._db
            assert db is not None
            with db.write_batch(sync=True) as batch:
                for kind, name in image:
                    batch.delete(
                        store._reader_key(name) if kind == "offset" else store._state_key(name)
                    )
        else:
            assert self._storage is not None  # its durable part is empty: nothing is synced
            self._storage.lose_unsynced(0)
        offsets = {n: v for (k, n), v in image.items() if k == "offset" and isinstance(v, DLSN)}
        state = {n: v for (k, n), v in image.items() if k == "state" and isinstance(v, bytes)}
        store.commit(offsets, state)

    # -- the end ---------------------------------------------------------------------------

    def observe(self) -> None:
        """Record the final contents of every sink (after the drain)."""
        for hook in self.before_observe:
            hook()
        record = self.record
        for sink in self.topology.log_sinks():
            log = f"out-{sink}"
            with self.logs[log].open_reader(DLSN.INITIAL) as reader:
                items = []
                while (item := reader.read_next()) is not None:
                    items.append((item.dlsn, decode_output(item.payload, f"output log {log!r}")))
            spec = self.topology.sinks[sink]
            if spec.upsert or spec.kind is SinkKind.ENTITY:
                # one row per key, the last written, found where that write is in the log
                last = {out.key: position for position, (_, out) in enumerate(items)}
                items = [items[position] for position in sorted(last.values())]
            for dlsn, out in items:
                record(
                    EventKind.OBSERVE,
                    sink=sink,
                    output_id=out.output_id,
                    record_id=out.record_id,
                    part=out.part,
                    parts=out.parts,
                    key=out.key,
                    value=out.value,
                    dlsn=dlsn.serialize(),
                )
        for table in self.topology.table_sinks():
            for key in sorted(self.table_keys[table]):
                raw = self.store.get_state(table_key(table, key))
                if raw is not None:
                    record(EventKind.OBSERVE, sink=table, key=key, value=int(raw))

    def history(self, run_id: str, extra: Mapping[str, Any]) -> History:
        meta = HistoryMeta(
            partitions=self.partitions,
            sinks=dict(self.topology.sinks),
            run_id=run_id,
            extra=dict(extra),
        )
        return History(meta, tuple(self.record.events))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for hook in self.on_close:
            hook()
        for writer in self._producer_writers.values():
            writer.abort()
        for reader in self._producer_readers.values():
            reader.close()
        for manager in self.logs.values():
            manager.close()
        self.store.close()
        self.namespace.close()
        if self._memory_name:
            from harness.log.storage.memory import forget_memory_namespaces

            # (the offset storage was never registered by name: it goes with this world)
            forget_memory_namespaces(self._memory_name)
        if self._tmp is not None:
            self._tmp.cleanup()
