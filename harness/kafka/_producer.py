"""The ``confluent_kafka.Producer`` double (semantics: :mod:`harness.kafka.confluent`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from harness.history.events import EventKind
from harness.kafka._broker import Output, Runtime, current
from harness.kafka._confluent_base import (
    _CODES,
    ConsumerGroupMetadata,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
    _bytes,
    _config,
    _fail,
    _headers,
)
from harness.kafka._errors import NotModelled
from harness.kafka.lineage import Produced

__all__ = ["Producer"]

_UNMODELLED: Final = frozenset({"set_sasl_credentials", "purge"})
_READY, _IN_TXN, _NOT_INIT = "Ready", "InTransaction", "Init"


class Producer:
    """A producer to the simulated cluster; see :mod:`harness.kafka.confluent`."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("logger", None)
        self._rt: Runtime = current("confluent_kafka.Producer()")
        self._cfg = _config(conf, kwargs, "Producer")
        self._queue: list[tuple[Output, Callable[..., Any] | None]] = []
        self._reports: list[tuple[Output, Callable[..., Any] | None, KafkaError | None]] = []
        self._state = _NOT_INIT
        self._fenced: KafkaError | None = None
        self._txn: int | None = None
        self._txn_outputs: list[tuple[Output, Callable[..., Any] | None]] = []
        self._txn_offsets: dict[str, dict[str, int]] = {}
        self._rt.ctx.on_timer(self._background)

    # -- delivery ----------------------------------------------------------------------

    def _background(self) -> None:
        """librdkafka's background thread when the schedule fires it: the queue is sent."""
        if self._fenced is None:
            self._send()

    def _send(self) -> None:
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        rt = self._rt
        rt.broker.append(
            rt, [o for o, _ in queue], retry=True, idempotent=self._cfg.enable_idempotence
        )
        self._reports.extend((o, cb, None) for o, cb in queue)

    def _serve(self) -> int:
        reports, self._reports = self._reports, []
        for out, callback, err in reports:
            if callback is None or (err is None and self._cfg.delivery_report_only_error):
                continue
            produced = out.produced
            message = Message(
                produced.topic,
                out.partition,
                out.offset if err is None else None,
                produced.key,
                produced.value,
                list(produced.headers) or None,
                err,
            )
            callback(err, message)
        return len(reports)

    def _check_fenced(self) -> None:
        if self._fenced is not None:
            raise KafkaException(self._fenced)

    # -- the API -----------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: object = None,
        key: object = None,
        partition: int = -1,
        on_delivery: Callable[..., Any] | None = None,
        callback: Callable[..., Any] | None = None,
        timestamp: int = 0,
        headers: object = None,
    ) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        if self._cfg.transactional_id is not None and self._state != _IN_TXN:
            raise _fail(
                _CODES["_STATE"],
                f"Operation not valid in state {self._state}: a transactional producer "
                "produces only inside a transaction",
            )
        produced = Produced(topic, _bytes(key, "key"), _bytes(value, "value"), _headers(headers))
        out = rt.broker.output(rt, produced, max(partition, 0), self._txn, "produce")
        report = on_delivery or callback or self._cfg.on_delivery
        if self._txn is not None:
            self._txn_outputs.append((out, report))  # type: ignore[arg-type]
        else:
            self._queue.append((out, report))  # type: ignore[arg-type]

    def poll(self, timeout: float | None = None) -> int:
        self._rt.enter()
        self._send()
        return self._serve()

    def flush(self, timeout: float | None = None) -> int:
        self._rt.enter()
        self._send()
        self._serve()
        return 0

    def __len__(self) -> int:
        return len(self._queue) + len(self._reports) + len(self._txn_outputs)

    def __bool__(self) -> bool:
        return True

    def init_transactions(self, timeout: float | None = None) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        tid = self._cfg.transactional_id
        if tid is None:
            raise _fail(
                _CODES["_NOT_CONFIGURED"],
                "The Transactional API requires transactional.id to be configured",
            )
        broker = rt.broker
        broker.txn_epoch[tid] = broker.txn_epoch.get(tid, 0) + 1
        previous = broker.txn_owner.get(tid)
        if previous is not None and previous is not self:
            previous._fence(tid)
        broker.txn_owner[tid] = self
        self._state = _READY

    def _fence(self, tid: str) -> None:
        """A newer producer with our transactional.id initialised: we are a zombie."""
        self._fenced = KafkaError(
            _CODES["_FENCED"],
            f"Producer fenced by newer instance: transactional.id {tid!r} has a newer epoch",
            fatal=True,
        )
        self._abort_open()

    def _abort_open(self) -> None:
        rt = self._rt
        if self._txn is not None:
            rt.world.record(EventKind.TXN_ABORT, process=rt.process, txn=self._txn)
            if rt.inst.txn == self._txn:
                rt.inst.txn = None
        self._txn = None
        self._txn_outputs = []
        self._txn_offsets = {}
        if self._state == _IN_TXN:
            self._state = _READY

    def begin_transaction(self) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        if self._state != _READY:
            raise _fail(_CODES["_STATE"], f"Operation not valid in state {self._state}")
        if rt.inst.txn is not None:
            raise NotModelled("begin_transaction", "two open transactions in one process")
        world = rt.world
        self._txn = world.next_txn
        world.next_txn += 1
        rt.inst.txn = self._txn
        world.record(EventKind.TXN_BEGIN, process=rt.process, txn=self._txn)
        self._state = _IN_TXN

    def send_offsets_to_transaction(
        self,
        positions: list[TopicPartition],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        if self._state != _IN_TXN:
            raise _fail(_CODES["_STATE"], f"Operation not valid in state {self._state}")
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise _fail(_CODES["_INVALID_ARG"], "group_metadata must be ConsumerGroupMetadata")
        offsets = self._txn_offsets.setdefault(group_metadata.group_id, {})
        for tp in positions:
            if tp.offset >= 0:
                name = rt.broker.name(tp.topic, tp.partition, "send_offsets_to_transaction")
                offsets[name] = tp.offset

    def commit_transaction(self, timeout: float | None = None) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        if self._state != _IN_TXN or self._txn is None:
            raise _fail(_CODES["_STATE"], f"Operation not valid in state {self._state}")
        outputs = self._txn_outputs
        rt.broker.transaction_write(rt, [o for o, _ in outputs], self._txn_offsets, self._txn)
        self._reports.extend((o, cb, None) for o, cb in outputs)
        if rt.inst.txn == self._txn:
            rt.inst.txn = None
        self._txn = None
        self._txn_outputs = []
        self._txn_offsets = {}
        self._state = _READY
        self._serve()

    def abort_transaction(self, timeout: float | None = None) -> None:
        rt = self._rt
        rt.enter()
        self._check_fenced()
        if self._state != _IN_TXN:
            raise _fail(_CODES["_STATE"], f"Operation not valid in state {self._state}")
        purged = KafkaError(_CODES["_PURGE_QUEUE"], "Purged in queue")
        self._reports.extend((o, cb, purged) for o, cb in self._txn_outputs)
        self._abort_open()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """The cluster's topics (``confluent_kafka.admin.ClusterMetadata``)."""
        from harness.kafka.admin import cluster_metadata

        self._rt.enter()
        return cluster_metadata(self._rt, topic)

    def __getattr__(self, name: str) -> Any:
        if name in _UNMODELLED:
            raise NotModelled(f"Producer.{name}()")
        raise AttributeError(f"'Producer' object has no attribute {name!r}")
