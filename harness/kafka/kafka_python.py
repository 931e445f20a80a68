"""The ``kafka`` (kafka-python) double: ``KafkaConsumer`` and ``KafkaProducer``.

* ``KafkaConsumer``: iteration, ``poll``, ``commit`` (synchronous), ``commit_async`` (lands
  before the application's next call unless a crash comes first), ``seek`` and friends,
  ``close(autocommit=True)``. ``enable_auto_commit`` (default True) commits the consumed
  positions (the offset after every record already returned) from inside ``poll()`` /
  iteration once ``auto_commit_interval_ms`` elapsed, i.e. after the schedule's ``Tick``,
  and at ``close()``: records returned earlier have been processed by then, in a
  single-threaded loop. ``consumer_timeout_ms`` (default infinite): iteration ends once when
  idle; otherwise an idle loop parks as the ``confluent_kafka`` double's does.
* ``KafkaProducer``: ``send`` returns a future (``get()`` waits for the delivery), records
  are sent when the schedule's ``Tick`` fires the sender thread, at ``flush()``/``close()``
  or when a future is waited on; ``enable_idempotence`` as in librdkafka.
* An unknown configuration key raises ``KafkaConfigurationError`` (kafka-python's
  "Unrecognized configs"). ``transactional_id`` is not modelled.
"""

from __future__ import annotations

import math
import types
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import Any, Final

from harness.errors import ConfigError
from harness.kafka._broker import Output, Runtime, current
from harness.kafka._confluent_base import IdleWait
from harness.kafka._errors import NotModelled
from harness.kafka._fetch import BEGINNING, END, Fetched, Fetcher, commit_changed, deserialized
from harness.kafka.lineage import RECORD_ID_HEADER, Produced

__all__ = ["KafkaConsumer", "KafkaProducer", "modules"]

TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])
OffsetAndMetadata = namedtuple("OffsetAndMetadata", ["offset", "metadata", "leader_epoch"])
OffsetAndMetadata.__new__.__defaults__ = (None, -1)
ConsumerRecord = namedtuple(
    "ConsumerRecord",
    [
        "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type",
        "key", "value", "headers", "checksum", "serialized_key_size",
        "serialized_value_size", "serialized_header_size",
    ],
)  # fmt: skip
RecordMetadata = namedtuple(
    "RecordMetadata", ["topic", "partition", "topic_partition", "offset", "timestamp"]
)


class KafkaError(RuntimeError):
    retriable = False
    invalid_metadata = False


class KafkaConfigurationError(KafkaError, ConfigError):
    pass


class IllegalStateError(KafkaError):
    pass


class CommitFailedError(KafkaError):
    pass


class KafkaTimeoutError(KafkaError):
    pass


class NoOffsetForPartitionError(KafkaError):
    pass


_COMMON: Final = """bootstrap_servers client_id request_timeout_ms retry_backoff_ms
reconnect_backoff_ms reconnect_backoff_max_ms max_in_flight_requests_per_connection
receive_buffer_bytes send_buffer_bytes socket_options sock_chunk_bytes
sock_chunk_buffer_count security_protocol ssl_context ssl_check_hostname ssl_cafile
ssl_certfile ssl_keyfile ssl_crlfile ssl_password ssl_ciphers api_version
api_version_auto_timeout_ms connections_max_idle_ms metric_reporters metrics_enabled
metrics_num_samples metrics_sample_window_ms metric_group_prefix selector sasl_mechanism
sasl_plain_username sasl_plain_password sasl_kerberos_name sasl_kerberos_service_name
sasl_kerberos_domain_name sasl_oauth_token_provider socks5_proxy kafka_client
allow_auto_create_topics metadata_max_age_ms"""
_CONSUMER_KEYS: Final = frozenset(
    (
        _COMMON
        + """ group_id group_instance_id key_deserializer value_deserializer
        fetch_max_wait_ms fetch_min_bytes fetch_max_bytes max_partition_fetch_bytes
        auto_offset_reset enable_auto_commit auto_commit_interval_ms
        default_offset_commit_callback check_crcs isolation_level
        partition_assignment_strategy max_poll_records max_poll_interval_ms
        session_timeout_ms heartbeat_interval_ms consumer_timeout_ms legacy_iterator
        exclude_internal_topics"""
    ).split()
)
_PRODUCER_KEYS: Final = frozenset(
    (
        _COMMON
        + """ key_serializer value_serializer enable_idempotence delivery_timeout_ms acks
        compression_type retries batch_size linger_ms partitioner buffer_memory
        connections_max_idle_ms max_block_ms max_request_size transactional_id
        transaction_timeout_ms"""
    ).split()
)


def _configs(given: dict[str, Any], known: frozenset[str]) -> None:
    extra = set(given) - known
    if extra:
        raise KafkaConfigurationError(f"Unrecognized configs: {extra}")


def _true(value: object) -> bool:
    return bool(value)


class KafkaConsumer:
    """A kafka-python consumer of the simulated cluster (see the module docstring)."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        _configs(configs, _CONSUMER_KEYS)
        self._rt: Runtime = current("kafka.KafkaConsumer()")
        self._group: str | None = configs.get("group_id")
        self._auto_commit = _true(configs.get("enable_auto_commit", True)) and bool(self._group)
        interval = configs.get("auto_commit_interval_ms", 5000)
        reset = str(configs.get("auto_offset_reset", "latest"))
        reset = {"smallest": "earliest", "largest": "latest", "none": "error"}.get(reset, reset)
        if reset not in ("earliest", "latest", "error"):
            raise KafkaConfigurationError(f"Unrecognized auto_offset_reset {reset!r}")
        self._fetch = Fetcher(self._rt, self._group, reset, False)
        self._key_de: Callable[[bytes], Any] | None = configs.get("key_deserializer")
        self._value_de: Callable[[bytes], Any] | None = configs.get("value_deserializer")
        self._timeout = configs.get("consumer_timeout_ms", math.inf)
        self._max_records = int(configs.get("max_poll_records", 500))
        self._subscription: tuple[str, ...] = ()
        self._closed = False
        self._wait = IdleWait(self._rt)
        self._commit_due = False
        self._committed: dict[str, int] = {}
        if self._auto_commit and interval:
            self._rt.ctx.on_timer(self._interval_elapsed)
        if topics:
            self.subscribe(topics)

    def _interval_elapsed(self) -> None:
        self._commit_due = True

    def _enter(self) -> Runtime:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        rt = self._rt
        rt.enter()
        return rt

    def _tp(self, tp: Any) -> tuple[str, int]:
        return (tp.topic, tp.partition)

    def _maybe_auto_commit(self) -> None:
        if self._commit_due and self._auto_commit:
            self._commit_due = False
            self._commit(self._fetch.positions(), automatic=True)

    def _commit(self, offsets: dict[str, int], *, automatic: bool = False) -> None:
        """Commit ``offsets``; a commit the group refuses (this member was fenced out of it)
        raises ``CommitFailedError``, or is only logged by kafka-python when automatic."""
        if not self._group:
            raise KafkaError("Requires group_id")
        refused = None if automatic else CommitFailedError
        commit_changed(self._fetch, offsets, self._committed, refused)

    def _offsets(self, offsets: dict[Any, Any] | None) -> dict[str, int]:
        if offsets is None:
            return self._fetch.positions()
        broker = self._rt.broker
        result = {}
        for tp, meta in offsets.items():
            offset = meta.offset if hasattr(meta, "offset") else int(meta)
            result[broker.name(tp.topic, tp.partition, "commit")] = offset
        return result

    def _record(self) -> Any | None:
        got = self._fetch.next()
        if got is None:
            return None
        if isinstance(got, Fetched):
            raise NoOffsetForPartitionError(TopicPartition(got.cursor.topic, got.cursor.partition))
        key, value = deserialized(got, self._key_de, self._value_de)
        headers = [(RECORD_ID_HEADER, got.record_id.encode())]
        return ConsumerRecord(
            got.topic, got.partition, -1, got.offset, got.timestamp, 0, key, value, headers,
            None, len(got.key or b""), len(got.value or b""), -1,
        )  # fmt: skip

    # -- the API -----------------------------------------------------------------------

    def subscribe(self, topics: Any = (), pattern: str | None = None, listener: Any = None) -> None:
        self._enter()
        broker = self._rt.broker
        if isinstance(topics, str):
            topics = (topics,)
        if bool(topics) == (pattern is not None):
            raise IllegalStateError("You must choose only one way to configure your consumer")
        if pattern is not None:
            topics = broker.matching(pattern, "KafkaConsumer.subscribe(pattern=...)", anchored=True)
        self._subscription = tuple(topics)
        assignment = [
            (t, p, -1000)
            for t in self._subscription
            for p in range(broker.partitions_of(t, "subscribe"))
        ]
        self._fetch.assign(assignment, "subscribe")
        self._fetch.join()
        if listener is not None and hasattr(listener, "on_partitions_assigned"):
            listener.on_partitions_assigned(self.assignment())

    def assign(self, partitions: list[Any]) -> None:
        self._enter()
        self._fetch.assign(((tp.topic, tp.partition, -1000) for tp in partitions), "assign")

    def assignment(self) -> set[Any]:
        return {TopicPartition(c.topic, c.partition) for c in self._fetch.cursors.values()}

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        self._enter()
        self._fetch.rejoin()
        self._maybe_auto_commit()

        def one() -> list[Any]:
            record = self._record()
            return [] if record is None else [record]

        while True:
            got = self._wait(one)
            if got:
                return got[0]
            if self._timeout != math.inf or self._rt.stopping:
                raise StopIteration

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[Any, list[Any]]:
        self._enter()
        self._fetch.rejoin()
        self._maybe_auto_commit()
        limit = max_records or self._max_records

        def batch() -> dict[Any, list[Any]]:
            records: dict[Any, list[Any]] = {}
            count = 0
            while count < limit and (record := self._record()) is not None:
                records.setdefault(TopicPartition(record.topic, record.partition), []).append(
                    record
                )
                count += 1
            return records

        result: dict[Any, list[Any]] = self._wait(batch)
        return result

    def commit(self, offsets: dict[Any, Any] | None = None) -> None:
        self._enter()
        self._commit(self._offsets(offsets))

    def commit_async(self, offsets: dict[Any, Any] | None = None, callback: Any = None) -> Any:
        self._enter()
        due = self._offsets(offsets)

        def land() -> None:
            try:
                self._commit(due)
            except CommitFailedError as exc:  # to the callback; kafka-python's default logs it
                if callback is not None:
                    callback(offsets, exc)
                return
            if callback is not None:
                callback(offsets, None)

        self._rt.background.append(land)
        return _Future(self._rt, land)

    def committed(self, partition: Any, metadata: bool = False) -> Any:
        rt = self._enter()
        if not self._group:
            raise KafkaError("Requires group_id")
        off = rt.broker.committed(
            rt, self._group, rt.broker.name(partition.topic, partition.partition, "committed")
        )
        if metadata:
            return None if off is None else OffsetAndMetadata(off, "", -1)
        return off

    def position(self, partition: Any) -> int | None:
        self._enter()
        cursor = self._fetch.cursors.get(self._tp(partition))
        if cursor is None:
            raise IllegalStateError(f"Partition is not assigned: {partition}")
        return cursor.position

    def _cursor(self, partition: Any) -> Any:
        cursor = self._fetch.cursors.get(self._tp(partition))
        if cursor is None:
            raise IllegalStateError(f"No current assignment for partition {partition}")
        return cursor

    def seek(self, partition: Any, offset: int) -> None:
        self._enter()
        if type(offset) is not int or offset < 0:
            raise AssertionError("offset must be >= 0")
        self._fetch.seek(self._cursor(partition), offset)

    def seek_to_beginning(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions or self.assignment():
            self._fetch.seek(self._cursor(tp), BEGINNING)

    def seek_to_end(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions or self.assignment():
            self._fetch.seek(self._cursor(tp), END)

    def pause(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions:
            self._cursor(tp).paused = True

    def resume(self, *partitions: Any) -> None:
        self._enter()
        for tp in partitions:
            self._cursor(tp).paused = False

    def beginning_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        rt = self._enter()
        return {
            tp: rt.broker.watermarks(rt.broker.name(tp.topic, tp.partition, "beginning_offsets"))[0]
            for tp in partitions
        }

    def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        rt = self._enter()
        return {
            tp: rt.broker.watermarks(rt.broker.name(tp.topic, tp.partition, "end_offsets"))[1]
            for tp in partitions
        }

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        if self._closed:
            return
        self._enter()
        if autocommit and self._auto_commit:
            self._commit(self._fetch.positions(), automatic=True)
        self._fetch.assign((), "close")
        self._fetch.leave()
        self._closed = True

    def topics(self) -> set[str]:
        """The cluster's topics (a fault point: a metadata request)."""
        return set(self._enter().broker.topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._rt.broker.topics().get(topic)
        return None if count is None else set(range(count))

    def __getattr__(self, name: str) -> Any:
        if name in (
            "offsets_for_times",
            "metrics",
            "unsubscribe",
        ):
            raise NotModelled(f"KafkaConsumer.{name}()")
        raise AttributeError(f"'KafkaConsumer' object has no attribute {name!r}")


class _Future:
    """kafka-python's future: ``get()`` waits for the work; callbacks run when it is done."""

    def __init__(self, rt: Runtime, work: Callable[[], Any]) -> None:
        self._rt, self._work = rt, work
        self.value: Any = None
        self.exception: BaseException | None = None
        self.is_done = False
        self._callbacks: list[Callable[[Any], Any]] = []

    def _done(self, value: Any) -> None:
        self.value, self.is_done = value, True
        for callback in self._callbacks:
            callback(value)

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _Future:
        if self.is_done:
            fn(*args, self.value, **kwargs)
        else:
            self._callbacks.append(lambda v: fn(*args, v, **kwargs))
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _Future:
        return self

    def get(self, timeout: float | None = None) -> Any:
        if not self.is_done:
            self._rt.enter()
            self._work()
        return self.value


class KafkaProducer:
    """A kafka-python producer to the simulated cluster (see the module docstring)."""

    def __init__(self, **configs: Any) -> None:
        _configs(configs, _PRODUCER_KEYS)
        if configs.get("transactional_id"):
            raise NotModelled("KafkaProducer(transactional_id=...)", "use confluent_kafka")
        self._rt: Runtime = current("kafka.KafkaProducer()")
        self._idempotent = _true(configs.get("enable_idempotence", False))
        self._key_ser: Callable[[Any], bytes] | None = configs.get("key_serializer")
        self._value_ser: Callable[[Any], bytes] | None = configs.get("value_serializer")
        self._queue: list[tuple[Output, _Future]] = []
        self._closed = False
        self._rt.ctx.on_timer(self._send)

    def _send(self) -> None:
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        rt = self._rt
        rt.broker.append(rt, [o for o, _ in queue], retry=True, idempotent=self._idempotent)
        for out, future in queue:
            topic = out.produced.topic
            tp = TopicPartition(topic, out.partition)
            future._done(RecordMetadata(topic, out.partition, tp, out.offset, -1))

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> _Future:
        rt = self._rt
        rt.enter()
        if self._closed:
            raise KafkaError("KafkaProducer already closed!")
        if self._value_ser is not None and value is not None:
            value = self._value_ser(value)
        if self._key_ser is not None and key is not None:
            key = self._key_ser(key)
        for name, data in (("value", value), ("key", key)):
            if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
                raise AssertionError(f"{name} must be bytes, or use a {name}_serializer")
        produced = Produced(
            topic,
            None if key is None else bytes(key),
            None if value is None else bytes(value),
            tuple((str(k), v) for k, v in headers or ()),
        )
        out = rt.broker.output(rt, produced, partition or 0, None, "send")
        future = _Future(rt, self._send)
        self._queue.append((out, future))
        return future

    def flush(self, timeout: float | None = None) -> None:
        self._rt.enter()
        self._send()

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._rt.enter()
        self._send()
        self._closed = True

    def __getattr__(self, name: str) -> Any:
        if name in ("partitions_for", "metrics", "init_transactions", "begin_transaction"):
            raise NotModelled(f"KafkaProducer.{name}()")
        raise AttributeError(f"'KafkaProducer' object has no attribute {name!r}")


def modules() -> dict[str, types.ModuleType]:
    """The ``kafka`` package double and its submodules."""
    errors = types.ModuleType("kafka.errors")
    for cls in (KafkaError, KafkaConfigurationError, IllegalStateError, CommitFailedError,
                KafkaTimeoutError, NoOffsetForPartitionError):  # fmt: skip
        setattr(errors, cls.__name__, cls)
    structs = types.ModuleType("kafka.structs")
    structs.TopicPartition = TopicPartition  # type: ignore[attr-defined]
    structs.OffsetAndMetadata = OffsetAndMetadata  # type: ignore[attr-defined]
    consumer = types.ModuleType("kafka.consumer")
    consumer.KafkaConsumer = KafkaConsumer  # type: ignore[attr-defined]
    producer = types.ModuleType("kafka.producer")
    producer.KafkaProducer = KafkaProducer  # type: ignore[attr-defined]
    kafka = types.ModuleType("kafka", "The harness's in-process double of kafka-python.")
    kafka.__path__ = []
    for name, value in (
        ("KafkaConsumer", KafkaConsumer), ("KafkaProducer", KafkaProducer),
        ("TopicPartition", TopicPartition), ("OffsetAndMetadata", OffsetAndMetadata),
        ("errors", errors), ("structs", structs), ("consumer", consumer),
        ("producer", producer), ("__version__", "2.0.2"),
    ):  # fmt: skip
        setattr(kafka, name, value)
    return {
        "kafka": kafka,
        "kafka.errors": errors,
        "kafka.structs": structs,
        "kafka.consumer": consumer,
        "kafka.producer": producer,
    }
