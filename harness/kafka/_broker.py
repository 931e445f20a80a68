"""The simulated cluster behind the client doubles: topics over the reference log, group
offsets in the offset store, the transaction coordinator, and the per-instance runtime.

One :class:`Broker` per simulated world (it outlives processor instances, as a cluster
outlives its clients): input topic partition ``p`` of the ``i``-th input topic is the world's
input log ``in-<i * partitions + p>``, Kafka offset = the record's position (its sequence
number); a checked output topic is the log sink of the same name. The consumer group's
offsets live in the offset store: the *checked* group's under the partition's name (so the
history's ``fetch``/``commit`` events and the checker see them), any other group's in the
store's state key space. Every method that touches the world is called by a double right
after its fault point (:meth:`Runtime.enter`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import greenlet

from harness.effects import EffectSession, EffectSource
from harness.history.events import EventKind
from harness.kafka._errors import NotModelled, OutsideRun
from harness.kafka._loops import LoopScope, switching
from harness.kafka.lineage import Effect, Lineage, Produced, attribute
from harness.log.dlsn import DLSN
from harness.log.reader import LogReader
from harness.log.record import LogRecord
from harness.log.writer import LogWriter
from harness.sim.records import decode_input, encode_output

if TYPE_CHECKING:
    from harness.sim.context import Context
    from harness.sim.simulator import Instance, Simulator
    from harness.sim.world import World

__all__ = ["Broker", "Cursor", "InputRecord", "Output", "Runtime", "Wiring", "current"]

Encoder = Callable[[str, str, int], tuple[bytes | None, bytes | None]]


def json_values(record_id: str, key: str, value: int) -> tuple[bytes | None, bytes | None]:
    """The default input encoding: key ``k<n>``, value ``{"id":"r<n>","key":..,"value":..}``."""
    body = json.dumps({"id": record_id, "key": key, "value": value}, separators=(",", ":"))
    return key.encode(), body.encode()


def text_values(record_id: str, key: str, value: int) -> tuple[bytes | None, bytes | None]:
    """Plain-text input values: ``r<n> k<m> <value>``."""
    return key.encode(), f"{record_id} {key} {value}".encode()


@dataclass(frozen=True, slots=True)
class Wiring:
    """Which topics exist, how inputs look and how outputs are attributed."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    unchecked: tuple[str, ...] = ()
    partitions: int = 1
    """Partitions per input topic."""
    group: str | None = None
    """The consumer group whose offsets are checked (None: the first one used)."""
    lineage: Lineage | None = None
    encode: Encoder = json_values
    effects: tuple[EffectSource, ...] = ()
    """Effects outside Kafka (printed lines, files, SQLite rows), judged as log sinks."""
    backlog_owed: bool = True
    """False: the application is taken to have started before the first record was written,
    so its first ``auto.offset.reset`` to latest/end of a partition (no committed offset
    yet) starts at the partition's beginning; a later reset still jumps to the end."""


@dataclass(slots=True)
class Cursor:
    """A consumer's read position in one partition (instance memory)."""

    name: str
    topic: str
    partition: int
    position: int | None = None
    """The next offset to fetch; None until resolved (committed offset or reset)."""
    reader: LogReader | None = None
    reader_pos: int = -1
    paused: bool = False
    eof_at: int = -1
    """The position at which the end of the partition was last reported."""


@dataclass(frozen=True, slots=True)
class InputRecord:
    topic: str
    partition: int
    offset: int
    record_id: str
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass(slots=True)
class Output:
    """A produced message on its way to a topic (instance memory until delivered)."""

    produced: Produced
    partition: int
    payloads: list[bytes] = field(default_factory=list)
    """One encoded output per effect (empty for an unchecked topic)."""
    delivered: bool = False
    offset: int = -1
    opaque: Any = None


_BROKER_ATTRIBUTE: Final = "_harness_kafka_broker"
_RUNTIMES: dict[greenlet.greenlet, Runtime] = {}
BASE_TIMESTAMP: Final = 1_700_000_000_000


def current(call: str) -> Runtime:
    """The runtime of the instance running now; :class:`OutsideRun` outside a harness run."""
    rt = _RUNTIMES.get(greenlet.getcurrent())
    if rt is None:
        raise OutsideRun(
            f"{call} was called outside a harness run: these are the harness's in-process "
            "doubles of the Kafka clients, usable only in code the harness runs (python -m "
            "harness kafka, harness.kafka.KafkaApp)"
        )
    return rt


def _effect_point(point: str) -> None:
    """An effect outside Kafka is about to happen in the application's code: a fault point."""
    rt = _RUNTIMES.get(greenlet.getcurrent())
    if rt is not None:
        rt.enter(point)


def _wait_turn() -> None:
    """The application waits for a lock another process holds: the others run meanwhile."""
    rt = _RUNTIMES.get(greenlet.getcurrent())
    if rt is None:
        raise RuntimeError("a lock wait outside a harness run")
    rt.park()


class Runtime:
    """One processor instance's link to the simulator and the broker."""

    __slots__ = (
        "background",
        "broker",
        "ctx",
        "inst",
        "loops",
        "shutdown_handler",
        "sim",
        "stopping",
        "world",
    )

    def __init__(self, ctx: Context, broker: Broker) -> None:
        self.ctx = ctx
        self.sim: Simulator = ctx._sim
        self.inst: Instance = ctx._inst
        self.world: World = ctx._sim.world
        self.broker = broker
        self.stopping = False
        self.background: list[Callable[[], None]] = []
        """Work the clients' background threads finish before the application's next call
        (asynchronous commits that were sent): run at the next fault point survived."""
        self.shutdown_handler: Callable[[], bool] | None = None
        """Called when a parked client is shut down; True when the application's own
        signal handler ran (the call then returns empty instead of raising)."""
        self.loops = LoopScope()

    def register(self) -> None:
        self.loops.enter(first=not _RUNTIMES)
        _RUNTIMES[greenlet.getcurrent()] = self

    def unregister(self) -> None:
        _RUNTIMES.pop(greenlet.getcurrent(), None)
        self.loops.leave(alone=not _RUNTIMES)

    def enter(self, point: str | None = None) -> None:
        """A fault point: the client is about to call the cluster (``point`` names the call
        for reports; default: the client method that calls this, or that calls the client's
        ``_enter`` helper that calls this: ``kafka.getone``, never ``kafka._enter``)."""
        if point is None:
            frame = sys._getframe(1)
            while frame.f_code.co_name == "_enter" and frame.f_back is not None:
                frame = frame.f_back
            point = f"kafka.{frame.f_code.co_name}"
        switching(self.sim.enter, self.loops.loops, self.inst, point, idle=self._idle)
        if self.background:
            work, self.background = self.background, []
            for job in work:
                job()

    def _idle(self, loop: Any) -> None:
        """The instance's event loop would wait for ever: wait for input instead (a
        settled run's shutdown reaches it as SIGTERM, :mod:`harness.kafka.aio`)."""
        from harness.kafka.aio import park_loop

        park_loop(self, loop)

    def park(self) -> None:
        """Wait for input; the simulator resumes the instance on the next run step."""
        if self.inst.dead:  # a crashed instance's code runs on (its event loop's other tasks)
            switching(self.sim.enter, self.loops.loops, self.inst, "kafka.park")  # refused
        switching(self.sim.block, self.loops.loops, self.inst)

    def choose(self, options: int) -> int:
        return self.sim.choose(self.inst, options) if options > 1 else 0

    @property
    def process(self) -> int:
        return self.inst.number


class Broker:
    """The cluster of one simulated run (see the module docstring)."""

    def __init__(self, world: World, wiring: Wiring) -> None:
        self.world = world
        self.wiring = wiring
        self.names: dict[tuple[str, int], str] = {}
        for i, topic in enumerate(wiring.inputs):
            for p in range(wiring.partitions):
                self.names[(topic, p)] = world.partitions[i * wiring.partitions + p]
        self.group = wiring.group
        self.txn_epoch: dict[str, int] = {}
        self.txn_owner: dict[str, Any] = {}
        self._writers: dict[str, LogWriter] = {}
        self._offsets: dict[str, int] = dict.fromkeys(wiring.outputs + wiring.unchecked, 0)
        self.created: dict[str, int] = {}
        """Topics an admin client created during the run, and their partition counts."""
        self.exact: dict[str, tuple[DLSN, int]] = {}
        """The checked group's last committed offset per partition, and its DLSN."""
        self.reset_once: set[str] = set()
        """Partitions whose position an offset reset has resolved at least once."""
        self.notes: set[str] = set()
        """What the run noticed that explains a verdict (a subscription matching no topic);
        the application's :meth:`~harness.kafka.KafkaApp.hints` show them."""
        self.generations: dict[str, int] = {}
        """Each consumer group's generation: one more each time a subscriber joins."""
        self.effects: EffectSession | None = None
        if wiring.effects:
            self.effects = EffectSession(wiring.effects, _effect_point, _wait_turn)
            world.before_observe.append(self._observe_effects)
            world.on_close.append(self.effects.close)

    @classmethod
    def of(cls, world: World, wiring: Wiring) -> Broker:
        # kept on the world itself: the broker lives and dies with its run
        broker: Broker | None = getattr(world, _BROKER_ATTRIBUTE, None)
        if broker is None:
            broker = cls(world, wiring)
            setattr(world, _BROKER_ATTRIBUTE, broker)
        return broker

    # -- topics ------------------------------------------------------------------------

    def partitions_of(self, topic: str, call: str) -> int:
        if topic in self.wiring.inputs:
            return self.wiring.partitions
        if topic in self._offsets:
            raise NotModelled(
                f"{call} on output topic {topic!r}",
                "consumers read the input topics only",
            )
        raise NotModelled(
            f"{call} on topic {topic!r}",
            f"it is not an input topic of this run (inputs: {list(self.wiring.inputs)}); "
            "declare it with --input",
        )

    def matching(self, pattern: str, call: str, *, anchored: bool) -> list[str]:
        """The input topics a regex subscription matches (``anchored``: ``re.match``, as
        kafka-python and aiokafka; else ``re.search``, as librdkafka's ``^...`` entries). A
        match that is not an input topic cannot be read (``NotModelled``); no match at all is
        what the consumer gets (nothing to read), noted for the report."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{call}: invalid regular expression {pattern!r}: {exc}") from None
        topics = sorted(self.topics())
        found = [t for t in topics if (regex.match if anchored else regex.search)(t)]
        other = [t for t in found if t not in self.wiring.inputs]
        if other:
            raise NotModelled(
                f"{call} matching topic {other[0]!r}",
                f"consumers read the input topics only (inputs: {list(self.wiring.inputs)}); "
                "narrow the pattern or declare the topic with --input",
            )
        if not found:
            self.notes.add(
                f"the application subscribed to the pattern {pattern!r}, which matched no "
                f"topic, so it read nothing; the cluster's topics are {', '.join(topics)} "
                f"(its input topics, --input: {', '.join(self.wiring.inputs)})"
            )
        return found

    def name(self, topic: str, partition: int, call: str) -> str:
        count = self.partitions_of(topic, call)
        if type(partition) is not int or not 0 <= partition < count:
            raise NotModelled(f"{call} on {topic} [{partition}]", f"{topic!r} has {count}")
        return self.names[(topic, partition)]

    def topics(self) -> dict[str, int]:
        """Every topic of the cluster and its partition count (output topics have one)."""
        declared = dict.fromkeys(self.wiring.inputs, self.wiring.partitions)
        return {**declared, **dict.fromkeys(self._offsets, 1), **self.created}

    def watermarks(self, name: str) -> tuple[int, int]:
        """The partition's low and high watermarks (the high one after the last marker of a
        transactional input)."""
        world = self.world
        return world.shown(name, world.low_watermark[name]), world.end_offset[name]

    def readable(self, name: str) -> int:
        """The offset after the last committed record: a position below it has a record
        to read (markers and aborted records after it are stepped over, never returned)."""
        return self.world.shown(name, len(self.world.dlsns[name]))

    # -- reading -----------------------------------------------------------------------

    def read(self, rt: Runtime, cursor: Cursor) -> InputRecord | None:
        """The record at the cursor's position, if it is there; records a ``read``."""
        world = self.world
        assert cursor.position is not None
        # a read_committed reader steps over markers and aborted records to the next record
        at = world.position_of(cursor.name, cursor.position)
        dlsns = world.dlsns[cursor.name]
        if at >= len(dlsns):
            return None
        pos = world.offset_of(cursor.name, at)
        reader = cursor.reader
        if reader is None or cursor.reader_pos != at:
            self.close_reader(rt, cursor)
            reader = cursor.reader = world.logs[cursor.name].open_reader(dlsns[at])
            rt.inst.readers.append(reader)
        item = reader.read_next()
        if item is None:  # pragma: no cover - committed records are always readable
            return None
        cursor.reader_pos = at + 1
        record_id, key, value, poison = decode_input(item.payload, f"input log {cursor.name!r}")
        world.record(
            EventKind.READ,
            process=rt.process,
            partition=cursor.name,
            offset=pos,
            record_id=record_id,
            dlsn=item.dlsn.serialize(),
        )
        raw_key: bytes | None
        raw_value: bytes | None
        if poison:
            raw_key, raw_value = key.encode() or None, b"\x00\xff" + record_id.encode()
        else:
            raw_key, raw_value = self.wiring.encode(record_id, key, value)
        number = int(record_id[1:]) if record_id[1:].isdigit() else pos
        return InputRecord(
            cursor.topic,
            cursor.partition,
            pos,
            record_id,
            raw_key,
            raw_value,
            BASE_TIMESTAMP + number,
        )

    @staticmethod
    def close_reader(rt: Runtime, cursor: Cursor) -> None:
        if cursor.reader is not None:
            cursor.reader.close()
            if cursor.reader in rt.inst.readers:
                rt.inst.readers.remove(cursor.reader)
            cursor.reader = None

    # -- group offsets -----------------------------------------------------------------

    def _checked(self, group: str) -> bool:
        if self.group is None:
            self.group = group
        return group == self.group

    @staticmethod
    def _state_key(group: str, name: str) -> str:
        return f"kafka-group:{group}:{name}"

    def committed(self, rt: Runtime, group: str, name: str) -> int | None:
        """The group's committed offset of partition ``name`` (a ``fetch`` event when it is
        the checked group)."""
        world = self.world
        if not self._checked(group):
            raw = world.store.get_state(self._state_key(group, name))
            return None if raw is None else int(raw)
        dlsn = world.store.get(name)
        offset = None if dlsn is None else world.shown(name, world.position(name, dlsn))
        exact = self.exact.get(name)
        if exact is not None and dlsn == exact[0]:
            offset = exact[1]  # what the client committed, inside a gap of markers
        world.record(
            EventKind.FETCH,
            process=rt.process,
            partition=name,
            offset=offset,
            dlsn=None if dlsn is None else dlsn.serialize(),
        )
        return offset

    def join(self, group: str) -> int:
        """A consumer subscribed: the group's next generation (the one it is a member of)."""
        generation = self.generations[group] = self.generations.get(group, 0) + 1
        return generation

    def _dlsn(self, name: str, offset: int, call: str) -> DLSN:
        world = self.world
        dlsns = world.dlsns[name]
        at = world.position_of(name, offset) if offset >= 0 else -1
        if 0 <= at < len(dlsns):
            return dlsns[at]
        end = world.end_offset[name]
        if 0 <= offset <= end:
            return dlsns[-1].next() if dlsns else DLSN.INITIAL
        raise NotModelled(
            f"{call} of offset {offset} for {name}",
            f"the partition ends at {end}; offsets beyond the end are not modelled",
        )

    def commit_offsets(
        self, rt: Runtime, group: str, offsets: Mapping[str, int], call: str
    ) -> None:
        """Store ``offsets`` (partition name -> next offset) for ``group`` in one write."""
        if not offsets:
            return
        if self._checked(group):
            dlsns = {name: self._dlsn(name, off, call) for name, off in offsets.items()}
            rt.ctx.offsets._write(dlsns, None, None, False, exact=offsets)
            self._remember(dlsns, offsets)
        else:
            state = {self._state_key(group, n): str(o).encode() for n, o in offsets.items()}
            rt.ctx.offsets._write(None, None, state, False)

    def transaction_write(
        self,
        rt: Runtime,
        outputs: list[Output],
        offsets: Mapping[str, Mapping[str, int]],
        txn: int,
    ) -> None:
        """Commit a transaction: its outputs and its offsets, in one step."""
        self.append(rt, outputs, retry=False, idempotent=True)
        checked: dict[str, DLSN] = {}
        state: dict[str, bytes | None] = {}
        for group, parts in offsets.items():
            for name, off in parts.items():
                if self._checked(group):
                    checked[name] = self._dlsn(name, off, "send_offsets_to_transaction")
                else:
                    state[self._state_key(group, name)] = str(off).encode()
        exact = {name: off for parts in offsets.values() for name, off in parts.items()}
        exact = {name: exact[name] for name in checked}
        rt.ctx.offsets._write(checked, None, state, False, exact=exact)
        self._remember(checked, exact)
        self.world.record(EventKind.TXN_COMMIT, process=rt.process, txn=txn)

    def _remember(self, dlsns: Mapping[str, DLSN], offsets: Mapping[str, int]) -> None:
        """The checked group's offsets as committed: several offsets in a gap of markers
        stand for one DLSN, and a fetch gives back the one committed."""
        for name, dlsn in dlsns.items():
            self.exact[name] = (dlsn, offsets[name])

    # -- producing ---------------------------------------------------------------------

    def output(
        self, rt: Runtime, produced: Produced, partition: int, txn: int | None, call: str
    ) -> Output:
        """Accept a produced message: attribute it and record its ``emit`` events."""
        topic = produced.topic
        if topic not in self._offsets:
            raise NotModelled(
                f"{call} to topic {topic!r}",
                f"the run's output topics are {list(self.wiring.outputs)}; declare it with "
                "--output (checked) or --unchecked-topic (accepted, not checked)",
            )
        out = Output(produced, partition)
        if topic not in self.wiring.outputs:
            return out
        world = self.world
        effects = attribute(self.wiring.lineage, produced) or (Effect(""),)
        key = None if produced.key is None else produced.key.decode("utf-8", "replace")[:200]
        for effect in effects:
            record_id = effect.record_id or None
            output_id = world.next_output_id
            world.next_output_id += 1
            out.payloads.append(
                encode_output(output_id, record_id, effect.part, effect.parts, key, None, None)
            )
            world.record(
                EventKind.EMIT,
                process=rt.process,
                sink=topic,
                output_id=output_id,
                record_id=record_id,
                part=effect.part,
                parts=effect.parts,
                key=key,
                txn=txn,
            )
        return out

    def _observe_effects(self) -> None:
        """At the drain: what the effect sources show becomes their log sinks' outputs."""
        assert self.effects is not None
        world = self.world
        for sink, found in self.effects.observe().items():
            if not found:
                continue
            log = f"out-{sink}"
            writer = self._writer(log)
            for item in found:
                output_id = world.next_output_id
                world.next_output_id += 1
                payload = encode_output(output_id, item.record_id, 0, 1, item.key, None, None)
                writer.write(LogRecord(world.next_txid(log), payload))
            writer.commit()

    def _writer(self, log: str) -> LogWriter:
        writer = self._writers.get(log)
        if writer is None:
            world = self.world
            world.sync_txid(log)
            writer = self._writers[log] = world.logs[log].open_writer()
            # the world aborts its producers' writers when it closes: so it does this one
            world._producer_writers[f"kafka-broker:{log}"] = writer
        return writer

    def append(self, rt: Runtime, outputs: list[Output], *, retry: bool, idempotent: bool) -> None:
        """The broker appends a batch; a lost acknowledgement makes a producer that is not
        idempotent send it again (``enable.idempotence``)."""
        pending = [o for o in outputs if not o.delivered]
        if not pending:
            return
        lost_ack = retry and rt.sim.take_lost_ack(rt.inst)
        for _ in range(2 if lost_ack and not idempotent else 1):
            logs = []
            for out in pending:
                topic = out.produced.topic
                out.offset = self._offsets[topic]
                self._offsets[topic] += 1
                if out.payloads:
                    log = f"out-{topic}"
                    writer = self._writer(log)
                    for payload in out.payloads:
                        writer.write(LogRecord(self.world.next_txid(log), payload))
                    logs.append(writer)
            for writer in dict.fromkeys(logs):
                writer.commit()
        for out in pending:
            out.delivered = True
