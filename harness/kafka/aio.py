"""The ``aiokafka`` double: ``AIOKafkaConsumer`` and ``AIOKafkaProducer`` for asyncio code.

The application's event loop runs inside its processor instance's greenlet (``asyncio.run``
as it is written), and every client coroutine is a fault point: awaiting it may hand
control to the simulator, which crashes, pauses or restarts the instance there, exactly as
for the synchronous doubles. While control is elsewhere the instance's loop is not the
thread's running loop, so a zombie and its successor may each run a loop of their own.

* ``AIOKafkaConsumer``: ``start``/``stop``, ``getone``/``getmany`` (optionally of some
  partitions), ``async for``, ``commit()`` (the consumed positions) / ``commit(offsets)``,
  ``seek``, ``seek_to_beginning``/``_end``/``_committed``, ``position``, ``committed``,
  ``highwater``, ``beginning_offsets``/``end_offsets``, ``pause``/``resume``,
  ``assign``/``subscribe``/``assignment``, deserializers. ``enable_auto_commit`` (default
  True) is aiokafka's background task: it commits the *consumed* positions (the offset after
  every record ``getone``/``getmany`` returned) whenever the schedule's ``Tick`` fires, at
  any await of a client call, so before the record is processed; and at ``stop()``.
  ``auto_offset_reset`` (default ``latest``; ``none`` raises), ``isolation_level``
  (input topics hold no transactional records: both levels read the same).
* ``AIOKafkaProducer``: ``start``/``stop``, ``send`` (returns a future of the
  ``RecordMetadata``), ``send_and_wait``, ``flush``, ``enable_idempotence``, serializers,
  and transactions: ``transactional_id`` (``start()`` fences the previous producer with that
  id), ``begin_transaction``/``commit_transaction``/``abort_transaction``,
  ``async with producer.transaction():`` and ``send_offsets_to_transaction(offsets,
  group_id)``; the semantics are those of the ``confluent_kafka`` double's transactions.
  Records are sent by the background sender: when the schedule's ``Tick`` fires, when the
  application waits for a delivery (``await future``, ``send_and_wait``), at ``flush()`` and
  ``stop()``. A crash before that loses them.

A consumer with nothing to return lets the loop's other ready tasks run, then parks until
input arrives. A settled run ends it as SIGTERM would: a handler the application installed
with ``loop.add_signal_handler`` runs, else ``asyncio.run``'s SIGINT handling (the main task
is cancelled), else ``KeyboardInterrupt`` is raised from the waiting call.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import types
from collections import namedtuple
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from harness.errors import ConfigError
from harness.kafka._broker import Runtime, current
from harness.kafka._confluent_base import _CODES, ConsumerGroupMetadata, KafkaException, _Shutdown
from harness.kafka._confluent_base import TopicPartition as _CKTopicPartition
from harness.kafka._errors import NotModelled
from harness.kafka._fetch import BEGINNING, END, Fetched, Fetcher, commit_changed, deserialized
from harness.kafka._producer import Producer
from harness.kafka.lineage import RECORD_ID_HEADER
from harness.sim.simulator import InstanceCrashed

__all__ = ["AIOKafkaConsumer", "AIOKafkaProducer", "modules"]


def _not_a_crash(record: logging.LogRecord) -> bool:
    """asyncio logs the exception a task ended with when nobody retrieved it: a simulated
    crash of the instance is no news."""
    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, InstanceCrashed)


logging.getLogger("asyncio").addFilter(_not_a_crash)

TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])
OffsetAndMetadata = namedtuple("OffsetAndMetadata", ["offset", "metadata"])
RecordMetadata = namedtuple(
    "RecordMetadata",
    ["topic", "partition", "topic_partition", "offset", "timestamp", "timestamp_type",
     "log_start_offset"],
)  # fmt: skip


@dataclass
class ConsumerRecord:
    """aiokafka's consumed record."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: tuple[tuple[str, bytes], ...]


class KafkaError(RuntimeError):
    retriable = False


class ConsumerStoppedError(KafkaError):
    """Raised by a consumer's calls after ``stop()``."""


class IllegalStateError(KafkaError):
    pass


class IllegalOperation(KafkaError):
    pass


class CommitFailedError(KafkaError):
    pass


class ProducerFenced(KafkaError):
    """A newer producer with the same ``transactional_id`` started."""


class KafkaConnectionError(KafkaError):
    retriable = True


class KafkaTimeoutError(KafkaError):
    retriable = True


class OffsetOutOfRangeError(KafkaError):
    pass


class NoOffsetForPartitionError(KafkaError):
    pass


class UnsupportedVersionError(KafkaError):
    pass


class _BadArgument(TypeError, ConfigError):
    """An argument aiokafka does not accept: a ``TypeError`` for the application, a
    ``ConfigError`` for the harness (the run stops with the message)."""


_COMMON: Final = """bootstrap_servers client_id metadata_max_age_ms request_timeout_ms
retry_backoff_ms api_version security_protocol ssl_context connections_max_idle_ms
sasl_mechanism sasl_plain_username sasl_plain_password sasl_kerberos_service_name
sasl_kerberos_domain_name sasl_oauth_token_provider loop"""
_CONSUMER_KEYS: Final = frozenset(
    (
        _COMMON
        + """ group_id group_instance_id key_deserializer value_deserializer
        fetch_max_wait_ms fetch_max_bytes fetch_min_bytes max_partition_fetch_bytes
        auto_offset_reset enable_auto_commit auto_commit_interval_ms check_crcs
        partition_assignment_strategy max_poll_interval_ms rebalance_timeout_ms
        session_timeout_ms heartbeat_interval_ms consumer_timeout_ms max_poll_records
        exclude_internal_topics isolation_level"""
    ).split()
)
_PRODUCER_KEYS: Final = frozenset(
    (
        _COMMON
        + """ acks key_serializer value_serializer compression_type max_batch_size
        partitioner max_request_size linger_ms enable_idempotence transactional_id
        transaction_timeout_ms"""
    ).split()
)
_RESETS: Final = {"earliest": "earliest", "latest": "latest", "none": "error"}
_IDLE_YIELDS: Final = 100
"""Times a waiting call lets the loop's other ready work run before it parks (or, once the
run is shutting down, gives up)."""


def _check_keys(client: str, given: Iterable[str], known: frozenset[str]) -> None:
    for name in given:
        if name not in known:
            raise _BadArgument(f"{client}.__init__() got an unexpected keyword argument {name!r}")


def _ready_work(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop has callbacks ready to run (another task, a scheduled sender)."""
    return any(not handle.cancelled() for handle in getattr(loop, "_ready", ()))


def _signal(loop: asyncio.AbstractEventLoop) -> bool:
    """Deliver SIGTERM (else SIGINT) to a handler added with ``loop.add_signal_handler``."""
    handlers = getattr(loop, "_signal_handlers", None) or {}
    for name in ("SIGTERM", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is not None and sig in handlers and hasattr(loop, "_handle_signal"):
            loop._handle_signal(sig)
            return True
    return False


class _Waiting:
    """How a consumer call waits (the asyncio twin of ``IdleWait``): while nothing is there,
    let the loop's other ready work run, then park until input arrives; a call that may
    come back empty (``getmany``) does so once first, as its timeout elapsing would."""

    def __init__(self, rt: Runtime, stopped: Callable[[], bool]) -> None:
        self._rt = rt
        self._stopped = stopped
        self._idle = False

    def first(self, take: Callable[[], Any], may_be_empty: bool) -> Any:
        """The wait's first look, which needs no await: what the call returns at once, or
        :data:`_WAIT` (await :meth:`more`)."""
        got = take()
        if got:
            self._idle = False
            return got
        if self._stopped() or (may_be_empty and not self._idle):
            self._idle = True
            return got
        return _WAIT

    async def more(self, take: Callable[[], Any], may_be_empty: bool) -> Any:
        """The rest of the wait, after a :meth:`first` look that found nothing."""
        rt = self._rt
        loop = asyncio.get_running_loop()
        yields = 0
        while True:
            if _ready_work(loop) or (rt.stopping and yields < _IDLE_YIELDS):
                yields += 1
                await asyncio.sleep(0)
            elif rt.stopping:
                raise KeyboardInterrupt  # shut down and still waiting: a second SIGINT
            else:
                park_loop(rt, loop)
                yields = 0
            got = self.first(take, may_be_empty)
            if got is not _WAIT:
                return got

    async def __call__(self, take: Callable[[], Any], may_be_empty: bool) -> Any:
        got = self.first(take, may_be_empty)
        return await self.more(take, may_be_empty) if got is _WAIT else got


_WAIT: Final = object()
"""What :meth:`_Waiting.first` returns when the call has to wait."""


def park_loop(rt: Runtime, loop: asyncio.AbstractEventLoop) -> None:
    """Park the instance until input arrives (its loop has nothing else to do); a settled
    run's shutdown reaches the application as SIGTERM or SIGINT would."""
    rt.ctx.on_shutdown(_Shutdown)
    try:
        rt.park()
    except _Shutdown:
        rt.stopping = True
        if _signal(loop):
            return
        if rt.shutdown_handler is not None and rt.shutdown_handler():
            return  # asyncio.run's SIGINT handler cancelled the main task
        raise KeyboardInterrupt from None


def _tp(tp: Any) -> tuple[str, int]:
    return (tp.topic, tp.partition)


class Sender:
    """A producer's background sender: scheduled on the loop when a record is queued, it
    sends the queue (a fault point) when the application next lets the loop run, e.g. while
    it awaits a delivery. Run as a loop callback, whose exceptions the loop would only log:
    an error fails the waiting futures instead, and a crash also stops the loop."""

    def __init__(self, flush: Callable[[], Any], ready: Callable[[], bool]) -> None:
        self._flush = flush
        self._ready = ready
        self._due: asyncio.Handle | None = None
        self._pending: list[asyncio.Future[Any]] = []

    def track(self, future: asyncio.Future[Any], schedule: bool = True) -> None:
        """Wait for ``future``'s delivery; ``schedule=False``: :meth:`run_now` follows at
        once (the callback it would cancel is not made)."""
        self._pending.append(future)
        if schedule and self._due is None:
            self._due = future.get_loop().call_soon(self._run)

    def run_now(self) -> None:
        """Send now: the application waits for a delivery, and the sender is the callback it
        waits for (running it before the loop's other ready work is one order the network
        may give; it saves the loop two turns per record)."""
        if self._due is not None:
            self._due.cancel()
        self._run()

    def _run(self) -> None:
        self._due = None
        if not self._ready():
            return
        try:
            self._flush()
        except BaseException as exc:
            pending, self._pending = self._pending, []
            for future in pending:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                asyncio.get_running_loop().stop()
        self._pending = [f for f in self._pending if not f.done()]


class AIOKafkaConsumer:
    """An aiokafka consumer of the simulated cluster (see the module docstring)."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        _check_keys("AIOKafkaConsumer", configs, _CONSUMER_KEYS)
        self._rt: Runtime = current("aiokafka.AIOKafkaConsumer()")
        self._group: str | None = configs.get("group_id")
        self._auto_commit = bool(configs.get("enable_auto_commit", True)) and bool(self._group)
        reset = str(configs.get("auto_offset_reset", "latest"))
        if reset not in _RESETS:
            raise _BadArgument(
                f"auto_offset_reset should be one of {sorted(_RESETS)}, got {reset!r}"
            )
        level = configs.get("isolation_level", "read_uncommitted")
        if level not in ("read_uncommitted", "read_committed"):
            raise _BadArgument(f"Incorrect isolation level {level!r}")
        self._fetch = Fetcher(self._rt, self._group, _RESETS[reset], False)
        self._key_de: Callable[[bytes], Any] | None = configs.get("key_deserializer")
        self._value_de: Callable[[bytes], Any] | None = configs.get("value_deserializer")
        self._max_records: int | None = configs.get("max_poll_records")
        self._topics: tuple[str, ...] = tuple(topics)
        self._assigned: list[tuple[str, int]] | None = None
        self._listener: Any = None
        self._started = self._closed = False
        self._committed: dict[str, int] = {}
        self._wait = _Waiting(self._rt, lambda: self._closed)
        if self._auto_commit and configs.get("auto_commit_interval_ms", 5000):
            self._rt.ctx.on_timer(self._auto)

    # -- helpers -----------------------------------------------------------------------

    def _enter(self) -> Runtime:
        if self._closed:
            raise ConsumerStoppedError()
        if not self._started:
            raise IllegalStateError("Consumer is not started: call start() first")
        rt = self._rt
        rt.enter()
        return rt

    def _auto(self) -> None:
        """aiokafka's auto-commit task, when the schedule fires it."""
        if self._started and not self._closed:
            self._commit(self._fetch.positions(), automatic=True)

    def _commit(self, offsets: dict[str, int], *, automatic: bool = False) -> None:
        """Commit ``offsets``; a commit the group refuses (this member was fenced out of it)
        raises ``CommitFailedError``, or is only logged by aiokafka when automatic."""
        if not self._group:
            raise IllegalOperation("Requires group_id")
        refused = None if automatic else CommitFailedError
        commit_changed(self._fetch, offsets, self._committed, refused)

    def _cursor(self, tp: Any) -> Any:
        cursor = self._fetch.cursors.get(_tp(tp))
        if cursor is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return cursor

    def _apply_assignment(self) -> None:
        broker = self._rt.broker
        if self._assigned is not None:
            pairs = self._assigned
        else:
            pairs = [
                (t, p) for t in self._topics for p in range(broker.partitions_of(t, "subscribe"))
            ]
        self._fetch.assign(((t, p, -1000) for t, p in pairs), "subscribe")
        if self._assigned is None:
            self._fetch.join()
        else:
            self._fetch.leave()

    def _record(self, only: set[tuple[str, int]] | None) -> ConsumerRecord | None:
        paused = []
        if only is not None:
            for where, cursor in self._fetch.cursors.items():
                if where not in only and not cursor.paused:
                    cursor.paused = True
                    paused.append(cursor)
        try:
            got = self._fetch.next()
        finally:
            for cursor in paused:
                cursor.paused = False
        if got is None:
            return None
        if isinstance(got, Fetched):
            raise NoOffsetForPartitionError(TopicPartition(got.cursor.topic, got.cursor.partition))
        key, value = deserialized(got, self._key_de, self._value_de)
        return ConsumerRecord(
            got.topic, got.partition, got.offset, got.timestamp, 0, key, value, None,
            len(got.key or b""), len(got.value or b""),
            ((RECORD_ID_HEADER, got.record_id.encode()),),
        )  # fmt: skip

    def _only(self, partitions: tuple[Any, ...]) -> set[tuple[str, int]] | None:
        if not partitions:
            return None
        only = {_tp(tp) for tp in partitions}
        for key in only:
            if key not in self._fetch.cursors:
                raise IllegalStateError(
                    f"No current assignment for partition {TopicPartition(*key)}"
                )
        return only

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._rt.enter()
        if self._closed:
            raise ConsumerStoppedError()
        self._started = True
        if self._topics or self._assigned is not None:
            self._apply_assignment()
            if self._listener is not None and hasattr(self._listener, "on_partitions_assigned"):
                result = self._listener.on_partitions_assigned(self.assignment())
                if asyncio.iscoroutine(result):
                    await result

    async def stop(self) -> None:
        if self._closed or not self._started:
            self._closed = True
            return
        self._rt.enter()
        if self._auto_commit:
            self._commit(self._fetch.positions(), automatic=True)
        self._fetch.assign((), "stop")
        self._fetch.leave()
        self._closed = True

    async def __aenter__(self) -> AIOKafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- assignment (local: no call to the cluster) --------------------------------------

    def subscribe(self, topics: Any = (), pattern: str | None = None, listener: Any = None) -> None:
        if isinstance(topics, str):
            topics = (topics,)
        if bool(topics) == (pattern is not None):
            raise ValueError("You should provide either `topics` or `pattern`")
        if pattern is not None:
            call = "AIOKafkaConsumer.subscribe(pattern=...)"
            topics = self._rt.broker.matching(pattern, call, anchored=True)
        for topic in topics:
            self._rt.broker.partitions_of(topic, "subscribe")
        self._topics, self._assigned, self._listener = tuple(topics), None, listener
        if self._started:
            self._apply_assignment()

    def unsubscribe(self) -> None:
        self._topics = ()
        self._fetch.assign((), "unsubscribe")
        self._fetch.leave()

    def assign(self, partitions: Iterable[Any]) -> None:
        self._assigned = [_tp(tp) for tp in partitions]
        self._topics = ()
        if self._started:
            self._apply_assignment()

    def assignment(self) -> set[Any]:
        return {TopicPartition(c.topic, c.partition) for c in self._fetch.cursors.values()}

    def subscription(self) -> set[str]:
        return set(self._topics)

    def seek(self, partition: Any, offset: int) -> None:
        if type(offset) is not int or offset < 0:
            raise ValueError(f"Offset must be a positive integer, got {offset!r}")
        self._fetch.seek(self._cursor(partition), offset)

    def pause(self, *partitions: Any) -> None:
        for tp in partitions:
            self._cursor(tp).paused = True

    def resume(self, *partitions: Any) -> None:
        for tp in partitions:
            self._cursor(tp).paused = False

    def paused(self) -> set[Any]:
        return {
            TopicPartition(c.topic, c.partition) for c in self._fetch.cursors.values() if c.paused
        }

    def highwater(self, partition: Any) -> int:
        return self._rt.broker.watermarks(self._cursor(partition).name)[1]

    last_stable_offset = highwater

    # -- calls to the cluster: each a fault point ---------------------------------------

    async def seek_to_beginning(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions or self.assignment():
            self._fetch.seek(self._cursor(tp), BEGINNING)

    async def seek_to_end(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions or self.assignment():
            self._fetch.seek(self._cursor(tp), END)

    async def seek_to_committed(self, *partitions: Any) -> dict[Any, int | None]:
        rt = self._enter()
        result = {}
        for tp in partitions or self.assignment():
            cursor = self._cursor(tp)
            committed = rt.broker.committed(rt, self._group, cursor.name) if self._group else None
            self._fetch.seek(cursor, -1000 if committed is None else committed)
            result[TopicPartition(*_tp(tp))] = committed
        return result

    async def position(self, partition: Any) -> int:
        self._enter()
        cursor = self._cursor(partition)
        if cursor.position is None:
            self._fetch._resolve(cursor)
        return cursor.position if cursor.position is not None else -1

    async def committed(self, partition: Any) -> int | None:
        rt = self._enter()
        if not self._group:
            raise IllegalOperation("Requires group_id")
        name = rt.broker.name(partition.topic, partition.partition, "committed")
        return rt.broker.committed(rt, self._group, name)

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[Any, int]:
        rt = self._enter()
        broker = rt.broker
        return {
            tp: broker.watermarks(broker.name(tp.topic, tp.partition, "beginning_offsets"))[0]
            for tp in partitions
        }

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[Any, int]:
        rt = self._enter()
        broker = rt.broker
        return {
            tp: broker.watermarks(broker.name(tp.topic, tp.partition, "end_offsets"))[1]
            for tp in partitions
        }

    async def topics(self) -> set[str]:
        return set(self._enter().broker.topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._rt.broker.topics().get(topic)
        return None if count is None else set(range(count))

    async def commit(self, offsets: dict[Any, Any] | None = None) -> None:
        rt = self._enter()
        if not self._group:
            raise IllegalOperation("Requires group_id")
        if offsets is None:
            due = self._fetch.positions()
        else:
            due = {}
            for tp, meta in offsets.items():
                offset = meta[0] if isinstance(meta, tuple) else meta
                if type(offset) is not int or offset < 0:
                    raise ValueError(f"Offset must be a positive integer, got {meta!r}")
                due[rt.broker.name(tp.topic, tp.partition, "commit")] = offset
        self._commit(due)

    async def getone(self, *partitions: Any) -> ConsumerRecord:
        self._enter()
        self._fetch.rejoin()
        only = self._only(partitions)

        def one() -> list[ConsumerRecord]:
            record = self._record(only)
            return [] if record is None else [record]

        got = self._wait.first(one, False)  # a record is there: no coroutine to await
        if got is _WAIT:
            got = await self._wait.more(one, False)
        if not got:
            raise ConsumerStoppedError()
        return got[0]  # type: ignore[no-any-return]

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[ConsumerRecord]]:
        self._enter()
        self._fetch.rejoin()
        only = self._only(partitions)
        limit = max_records or self._max_records or 1_000_000

        def batch() -> dict[Any, list[ConsumerRecord]]:
            records: dict[Any, list[ConsumerRecord]] = {}
            count = 0
            while count < limit and (record := self._record(only)) is not None:
                records.setdefault(TopicPartition(record.topic, record.partition), []).append(
                    record
                )
                count += 1
            return records

        result: dict[Any, list[ConsumerRecord]] = self._wait.first(batch, True)
        if result is _WAIT:
            result = await self._wait.more(batch, True)
        return result

    def __aiter__(self) -> AIOKafkaConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    def __getattr__(self, name: str) -> Any:
        if name in ("offsets_for_times", "get_batch"):
            raise NotModelled(f"AIOKafkaConsumer.{name}()")
        raise AttributeError(f"'AIOKafkaConsumer' object has no attribute {name!r}")


class AIOKafkaProducer:
    """An aiokafka producer to the simulated cluster (see the module docstring); its
    delivery and transactions are the ``confluent_kafka`` producer double's."""

    def __init__(self, **configs: Any) -> None:
        _check_keys("AIOKafkaProducer", configs, _PRODUCER_KEYS)
        self._rt: Runtime = current("aiokafka.AIOKafkaProducer()")
        self._tid: str | None = configs.get("transactional_id") or None
        conf: dict[str, Any] = {
            "enable.idempotence": bool(configs.get("enable_idempotence", False))
        }
        if self._tid is not None:
            conf["transactional.id"] = self._tid
        self._inner = Producer(conf)
        self._key_ser: Callable[[Any], bytes] | None = configs.get("key_serializer")
        self._value_ser: Callable[[Any], bytes] | None = configs.get("value_serializer")
        self._started = self._closed = False
        self._sender = Sender(
            lambda: self._guard(self._inner.flush),
            lambda: not self._closed and bool(len(self._inner)),
        )

    def _guard(self, call: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise ProducerClosed()
        try:
            return call(*args)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if error is not None else None
            if code == _CODES["_FENCED"]:
                raise ProducerFenced(str(error)) from None
            if code in (_CODES["_STATE"], _CODES["_NOT_CONFIGURED"]):
                raise IllegalOperation(str(error)) from None
            raise

    async def start(self) -> None:
        self._rt.enter()
        self._started = True
        if self._tid is not None:
            self._guard(self._inner.init_transactions)

    async def stop(self) -> None:
        if self._closed:
            return
        self._guard(self._inner.flush)
        self._closed = True

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def flush(self) -> None:
        self._guard(self._inner.flush)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[Any]:
        return self._send(topic, value, key, partition, headers, True)

    def _send(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Iterable[tuple[str, bytes]] | None,
        schedule: bool,
    ) -> asyncio.Future[Any]:
        if not self._started:
            raise IllegalStateError("Producer is not started: call start() first")
        if self._value_ser is not None:
            value = self._value_ser(value)
        if self._key_ser is not None:
            key = self._key_ser(key)
        for name, data in (("value", value), ("key", key)):
            if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"{name} must be bytes, or use a {name}_serializer")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def delivered(err: Any, message: Any) -> None:
            if future.done() or future.get_loop().is_closed():
                return
            if err is not None:
                future.set_exception(KafkaError(str(err)))
                return
            tp = TopicPartition(message.topic(), message.partition())
            future.set_result(
                RecordMetadata(tp.topic, tp.partition, tp, message.offset(), -1, 0, 0)
            )

        self._guard(
            lambda: self._inner.produce(
                topic, value, key, partition if partition is not None else -1,
                on_delivery=delivered, headers=list(headers or ()),
            )
        )  # fmt: skip
        if self._tid is not None:
            # acknowledged by the broker at once, visible only when the transaction commits;
            # the offset is assigned then (-1 here)
            tp = TopicPartition(topic, partition or 0)
            future.set_result(RecordMetadata(topic, tp.partition, tp, -1, -1, 0, 0))
        else:
            self._sender.track(future, schedule)
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> Any:
        future = self._send(topic, value, key, partition, headers, False)
        if not future.done():
            self._sender.run_now()
        return await future

    def create_batch(self) -> Any:
        raise NotModelled("AIOKafkaProducer.create_batch()")

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def begin_transaction(self) -> None:
        self._guard(self._inner.begin_transaction)

    async def commit_transaction(self) -> None:
        self._guard(self._inner.commit_transaction)

    async def abort_transaction(self) -> None:
        self._guard(self._inner.abort_transaction)

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    async def send_offsets_to_transaction(self, offsets: dict[Any, Any], group_id: Any) -> None:
        positions = []
        for tp, meta in offsets.items():
            offset = meta[0] if isinstance(meta, tuple) else meta
            positions.append(_CKTopicPartition(tp.topic, tp.partition, int(offset)))
        if not isinstance(group_id, str):
            group_id = getattr(group_id, "group_id", str(group_id))
        self._guard(
            self._inner.send_offsets_to_transaction, positions, ConsumerGroupMetadata(group_id)
        )


class _Transaction:
    """What ``AIOKafkaProducer.transaction()`` returns: begin on entry, commit on a clean
    exit, abort on an error. A class, as aiokafka's own ``TransactionContext``: an async
    generator abandoned by a crashed instance would be finalized later by its closed loop
    (``aclose`` never awaited). A crash, or the discarding of a crashed instance's coroutine
    (``GeneratorExit``), runs nothing: a dead process does not abort its transaction, its
    successor's ``init_transactions`` does."""

    __slots__ = ("_producer",)

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> None:
        await self._producer.begin_transaction()

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        producer = self._producer
        if kind is None:
            await producer.commit_transaction()
        elif issubclass(kind, (GeneratorExit, InstanceCrashed)):
            return
        else:
            inner = producer._inner
            if not producer._closed and inner._fenced is None and inner._txn is not None:
                await producer.abort_transaction()


class ProducerClosed(KafkaError):
    """A call on a stopped producer."""


class ConsumerRebalanceListener:
    """aiokafka's rebalance listener base class (no rebalances happen in a run)."""

    def on_partitions_revoked(self, revoked: Any) -> Any:
        return None

    def on_partitions_assigned(self, assigned: Any) -> Any:
        return None


_ERRORS: Final = (
    KafkaError, ConsumerStoppedError, IllegalStateError, IllegalOperation, CommitFailedError,
    ProducerFenced, ProducerClosed, KafkaConnectionError, KafkaTimeoutError,
    OffsetOutOfRangeError, NoOffsetForPartitionError, UnsupportedVersionError,
)  # fmt: skip


def _module(name: str, doc: str, items: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    for attr, value in items.items():
        setattr(module, attr, value)
    module.__all__ = [k for k in items if not k.startswith("_")]  # type: ignore[attr-defined]
    return module


def modules() -> dict[str, types.ModuleType]:
    """The ``aiokafka`` package double and its submodules."""
    doc = "The harness's in-process double of {} (see harness.kafka.aio)."
    errors = _module(
        "aiokafka.errors", doc.format("aiokafka.errors"), {c.__name__: c for c in _ERRORS}
    )
    structs = _module(
        "aiokafka.structs",
        doc.format("aiokafka.structs"),
        {
            "TopicPartition": TopicPartition, "OffsetAndMetadata": OffsetAndMetadata,
            "ConsumerRecord": ConsumerRecord, "RecordMetadata": RecordMetadata,
        },
    )  # fmt: skip
    abc = _module(
        "aiokafka.abc",
        doc.format("aiokafka.abc"),
        {"ConsumerRebalanceListener": ConsumerRebalanceListener},
    )
    consumer = _module(
        "aiokafka.consumer", doc.format("aiokafka.consumer"), {"AIOKafkaConsumer": AIOKafkaConsumer}
    )
    producer = _module(
        "aiokafka.producer", doc.format("aiokafka.producer"), {"AIOKafkaProducer": AIOKafkaProducer}
    )
    top = _module(
        "aiokafka",
        doc.format("aiokafka"),
        {
            "AIOKafkaConsumer": AIOKafkaConsumer, "AIOKafkaProducer": AIOKafkaProducer,
            "ConsumerRebalanceListener": ConsumerRebalanceListener,
            "TopicPartition": TopicPartition, "OffsetAndMetadata": OffsetAndMetadata,
            "ConsumerRecord": ConsumerRecord, "__version__": "0.12.0",
            "errors": errors, "structs": structs, "abc": abc, "consumer": consumer,
            "producer": producer,
        },
    )  # fmt: skip
    top.__path__ = []
    return {m.__name__: m for m in (top, errors, structs, abc, consumer, producer)}
