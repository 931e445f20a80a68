"""The ``confluent_kafka.Consumer`` double (semantics: :mod:`harness.kafka.confluent`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from harness.kafka._broker import Runtime, current
from harness.kafka._confluent_base import (
    _CODES,
    OFFSET_INVALID,
    ConsumerGroupMetadata,
    IdleWait,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
    _config,
    _fail,
)
from harness.kafka._errors import NotModelled
from harness.kafka._fetch import Event, Fetched, Fetcher, Refused

__all__ = ["Consumer"]

_Callback = Callable[..., Any] | None
_REFUSALS: Final = {
    Refused.UNKNOWN_MEMBER_ID: "Commit failed: Broker: Unknown member",
    Refused.ILLEGAL_GENERATION: "Commit failed: Broker: Specified group generation id is not valid",
}
"""librdkafka's text for a commit the group coordinator refuses."""
_UNMODELLED = frozenset(
    {"offsets_for_times", "set_sasl_credentials", "io_event_enable",
     "seek_partitions", "rebalance_protocol", "list_groups"}
)  # fmt: skip


class Consumer:
    """A consumer of the simulated cluster; see :mod:`harness.kafka.confluent`."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("logger", None)
        self._rt: Runtime = current("confluent_kafka.Consumer()")
        self._cfg = _config(conf, kwargs, "Consumer")
        self._closed = False
        cfg = self._cfg
        self._fetch = Fetcher(
            self._rt, cfg.group_id, cfg.auto_offset_reset, cfg.enable_partition_eof
        )
        self._subscription: list[str] | None = None
        self._on_assign: _Callback = None
        self._on_revoke: _Callback = None
        self._assign_due = False
        self._stored: dict[str, int] = {}
        self._committed: dict[str, int] = {}
        self._async: list[tuple[dict[str, int], bool]] = []
        self._callbacks: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        self._wait_for = IdleWait(self._rt)
        cfg = self._cfg
        if cfg.enable_auto_commit and cfg.auto_commit_interval_ms > 0 and cfg.group_id:
            self._rt.ctx.on_timer(self._background)

    # -- helpers -----------------------------------------------------------------------

    def _enter(self, call: str) -> Runtime:
        if self._closed:
            raise RuntimeError("Consumer closed")
        rt = self._rt
        rt.enter()
        return rt

    def _group(self, call: str) -> str:
        if not self._cfg.group_id:
            raise _fail(_CODES["_UNKNOWN_GROUP"], f"{call}: Local: Unknown group (no group.id)")
        return self._cfg.group_id

    def _tp(self, name: str) -> TopicPartition:
        cursor = next(c for c in self._fetch.cursors.values() if c.name == name)
        return TopicPartition(cursor.topic, cursor.partition)

    def _background(self) -> None:
        """The librdkafka background thread when the schedule fires it: pending
        asynchronous commits land, then the auto-commit of the stored offsets."""
        if self._closed:
            return
        self._land_async()
        if self._cfg.enable_auto_commit and self._cfg.group_id:
            self._commit_stored(automatic=True)

    def _land_async(self) -> None:
        while self._async:
            offsets, _ = self._async.pop(0)
            self._apply(offsets, queue_callback=True)

    def _apply(self, offsets: dict[str, int], *, queue_callback: bool) -> None:
        """Commit ``offsets``; a commit the group coordinator refuses (a member fenced out
        of its group) raises when synchronous, else reaches ``on_commit`` as its error."""
        group = self._group("commit")
        refused = self._fetch.refused()
        error = None
        if refused is None:
            self._rt.broker.commit_offsets(self._rt, group, offsets, "commit")
            self._committed.update(offsets)
        else:
            error = KafkaError(_CODES[refused.value], _REFUSALS[refused])
            if not queue_callback:
                raise KafkaException(error)
        if queue_callback and self._cfg.on_commit is not None:
            tps = []
            for name, off in offsets.items():
                tp = self._tp(name) if self._owns(name) else TopicPartition("?", -1)
                tp.offset = off
                tps.append(tp)
            self._callbacks.append((error, tps))

    def _owns(self, name: str) -> bool:
        return self._fetch.owns(name)

    def _commit_stored(self, *, automatic: bool) -> dict[str, int]:
        due = {
            n: o for n, o in self._stored.items() if self._owns(n) and self._committed.get(n) != o
        }
        if due:
            self._apply(due, queue_callback=automatic)
        return due

    def _serve(self) -> None:
        """What a poll serves: landed async commits, their callbacks, the assignment."""
        self._land_async()
        callbacks, self._callbacks = self._callbacks, []
        on_commit = self._cfg.on_commit
        for err, tps in callbacks:
            if callable(on_commit):
                on_commit(err, tps)
        if self._assign_due:
            self._assign_due = False
            tps = [
                TopicPartition(t, p)
                for t in self._subscription or ()
                for p in range(self._rt.broker.partitions_of(t, "subscribe"))
            ]
            self._fetch.join()
            self._set_assignment(tps)
            if self._on_assign is not None:
                self._on_assign(self, tps)
        else:
            self._fetch.rejoin()

    def _set_assignment(self, tps: Iterable[TopicPartition], call: str = "assign") -> None:
        self._fetch.assign(((tp.topic, tp.partition, tp.offset) for tp in tps), call)

    def _next(self) -> Message | None:
        got = self._fetch.next()
        if got is None:
            return None
        if isinstance(got, Fetched):
            cursor = got.cursor
            if got.event is Event.EOF:
                error = KafkaError(
                    _CODES["_PARTITION_EOF"],
                    f"Fetch from broker 1 reached end of partition at offset {got.position}",
                )
            else:
                error = KafkaError(
                    _CODES["_AUTO_OFFSET_RESET"],
                    "no valid offset to start from and auto.offset.reset=error",
                )
            position = OFFSET_INVALID if got.position is None else got.position
            return Message(cursor.topic, cursor.partition, position, error=error)
        if self._cfg.enable_auto_offset_store:
            self._stored[self._rt.broker.names[(got.topic, got.partition)]] = got.offset + 1
        return Message._of(got)

    def _one(self) -> list[Message]:
        message = self._next()
        return [] if message is None else [message]

    def _batch(self, size: int) -> list[Message]:
        messages: list[Message] = []
        while len(messages) < size and (m := self._next()) is not None:
            messages.append(m)
        return messages

    # -- the API -----------------------------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: _Callback = None,
        on_revoke: _Callback = None,
        on_lost: _Callback = None,
    ) -> None:
        self._enter("subscribe")
        self._group("subscribe")
        broker = self._rt.broker
        resolved: list[str] = []
        for topic in topics:
            if topic.startswith("^"):  # librdkafka's regex subscription, matched once
                resolved += broker.matching(topic, f"subscribe([{topic!r}])", anchored=False)
            else:
                broker.partitions_of(topic, "subscribe")
                resolved.append(topic)
        self._subscription = list(dict.fromkeys(resolved))
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._assign_due = True

    def unsubscribe(self) -> None:
        self._enter("unsubscribe")
        self._revoke()
        self._fetch.leave()
        self._subscription = None

    def _revoke(self, call: str = "unsubscribe") -> None:
        if self._on_revoke is not None and self._cursors:
            self._on_revoke(self, self.assignment())
        if self._cfg.enable_auto_commit and self._cfg.group_id:
            self._commit_stored(automatic=True)
        self._set_assignment((), call)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._enter("assign")
        self._set_assignment(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._enter("incremental_assign")
        self._set_assignment([*self.assignment(), *partitions])

    def unassign(self) -> None:
        self._enter("unassign")
        self._set_assignment(())

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._enter("incremental_unassign")
        drop = {(tp.topic, tp.partition) for tp in partitions}
        self._set_assignment(
            [tp for tp in self.assignment() if (tp.topic, tp.partition) not in drop]
        )

    def assignment(self) -> list[TopicPartition]:
        if self._closed:
            raise RuntimeError("Consumer closed")
        return [TopicPartition(c.topic, c.partition) for c in self._fetch.cursors.values()]

    def poll(self, timeout: float | None = None) -> Message | None:
        self._enter("poll")
        self._serve()
        got = self._wait_for(self._one)
        return got[0] if got else None

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        self._enter("consume")
        if type(num_messages) is not int or not 1 <= num_messages <= 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        self._serve()
        return self._wait_for(lambda: self._batch(num_messages))

    def _offsets_of(
        self, message: Message | None, offsets: list[TopicPartition] | None
    ) -> dict[str, int]:
        broker = self._rt.broker
        if message is not None:
            if message.error() is not None or message.offset() is None:
                raise _fail(_CODES["_INVALID_ARG"], "Cannot commit offsets for errored message")
            topic, partition = message.topic(), message.partition()
            assert topic is not None and partition is not None
            return {broker.name(topic, partition, "commit"): message.offset() + 1}  # type: ignore[operator]
        assert offsets is not None
        return {
            broker.name(tp.topic, tp.partition, "commit"): tp.offset
            for tp in offsets
            if tp.offset >= 0
        }

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
        **kwargs: Any,
    ) -> list[TopicPartition] | None:
        if "async" in kwargs:
            asynchronous = bool(kwargs.pop("async"))
        if kwargs:
            raise TypeError(f"commit() got unexpected keyword arguments {sorted(kwargs)}")
        self._enter("commit")
        self._group("commit")
        self._land_async()
        if message is None and offsets is None:
            due = {n: o for n, o in self._stored.items() if self._owns(n)}
            due = {n: o for n, o in due.items() if self._committed.get(n) != o}
            if not due:
                raise _fail(_CODES["_NO_OFFSET"], "Commit failed: Local: No offset stored")
        else:
            due = self._offsets_of(message, offsets)
        if asynchronous:
            # sent now; it lands before the application's next call, unless a crash
            # comes first (or the background timer fires)
            self._async.append((due, True))
            self._rt.background.append(self._land_async)
            return None
        self._apply(due, queue_callback=False)
        result = []
        for name, off in due.items():
            tp = self._tp(name) if self._owns(name) else self._tp_of_name(name)
            tp.offset = off
            result.append(tp)
        return result

    def _tp_of_name(self, name: str) -> TopicPartition:
        for (topic, partition), n in self._rt.broker.names.items():
            if n == name:
                return TopicPartition(topic, partition)
        raise AssertionError(name)  # pragma: no cover

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        self._enter("store_offsets")
        if self._cfg.enable_auto_offset_store:
            raise _fail(
                _CODES["_INVALID_ARG"],
                "store_offsets() is not allowed when enable.auto.offset.store=true",
            )
        if message is None and offsets is None:
            raise TypeError("expected message or offsets")
        due = self._offsets_of(message, offsets)
        stored = {n: o for n, o in due.items() if self._owns(n)}
        if due and not stored:
            raise _fail(_CODES["_STATE"], "Local: Erroneous state (partition not assigned)")
        self._stored.update(stored)

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        rt = self._enter("committed")
        group = self._group("committed")
        result = []
        for tp in partitions:
            name = rt.broker.name(tp.topic, tp.partition, "committed")
            off = rt.broker.committed(rt, group, name)
            result.append(
                TopicPartition(tp.topic, tp.partition, OFFSET_INVALID if off is None else off)
            )
        return result

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        self._enter("position")
        result = []
        for tp in partitions:
            cursor = self._fetch.cursors.get((tp.topic, tp.partition))
            pos = None if cursor is None else cursor.position
            result.append(
                TopicPartition(tp.topic, tp.partition, OFFSET_INVALID if pos is None else pos)
            )
        return result

    def seek(self, partition: TopicPartition) -> None:
        self._enter("seek")
        cursor = self._fetch.cursors.get((partition.topic, partition.partition))
        if cursor is None:
            raise _fail(_CODES["_STATE"], "Erroneous state: partition not assigned")
        self._fetch.seek(cursor, partition.offset)

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._enter("pause")
        for tp in partitions:
            if (cursor := self._fetch.cursors.get((tp.topic, tp.partition))) is not None:
                cursor.paused = True

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._enter("resume")
        for tp in partitions:
            if (cursor := self._fetch.cursors.get((tp.topic, tp.partition))) is not None:
                cursor.paused = False

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        rt = self._enter("get_watermark_offsets")
        return rt.broker.watermarks(
            rt.broker.name(partition.topic, partition.partition, "get_watermark_offsets")
        )

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self._group("consumer_group_metadata"))

    def memberid(self) -> str:
        return f"rdkafka-{self._rt.process}"

    def close(self) -> None:
        if self._closed:
            return
        self._enter("close")
        self._serve()
        self._revoke("close")
        self._fetch.leave()
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """The cluster's topics (``confluent_kafka.admin.ClusterMetadata``)."""
        from harness.kafka.admin import cluster_metadata

        self._rt.enter()
        return cluster_metadata(self._rt, topic)

    def __getattr__(self, name: str) -> Any:
        if name in _UNMODELLED:
            raise NotModelled(f"Consumer.{name}()")
        raise AttributeError(f"'Consumer' object has no attribute {name!r}")
