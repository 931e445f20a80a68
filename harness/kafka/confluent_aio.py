"""``confluent_kafka.aio``: ``AIOConsumer`` and ``AIOProducer``, the asyncio face of the
``confluent_kafka`` doubles (as the real ones wrap the synchronous clients).

Every coroutine is the synchronous double's call, so its semantics and fault points are
those of :mod:`harness.kafka.confluent`. ``AIOConsumer.poll``/``consume`` let the loop's
other ready tasks run before they park; ``AIOProducer.produce`` returns a future of the
delivered ``Message``, resolved when the producer's queue is sent: when the schedule's
``Tick`` fires and the application next polls or flushes, when it awaits a delivery (the
buffer's sender runs), at ``flush()`` and ``close()``. Inside a transaction the future is
resolved at once (the broker has the record; it is visible when the transaction commits)
and its message has no offset. ``AsyncSerializingProducer``/``AsyncDeserializingConsumer``
are not modelled.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any

from harness.kafka._confluent_base import KafkaException, Message
from harness.kafka._consumer import Consumer
from harness.kafka._producer import Producer
from harness.kafka.aio import Sender, _Waiting

__all__ = ["AIOConsumer", "AIOProducer"]


def _delegate(client: object, name: str) -> Callable[..., Any]:
    method = getattr(client, name)

    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return call


def _on_loop(aio_client: object, callback: Callable[..., Any]) -> Callable[..., Any]:
    """A rebalance callback as the real client calls it: with the asyncio client, and a
    coroutine it returns runs on the loop."""

    def call(_client: object, *args: Any) -> None:
        result = callback(aio_client, *args)
        if asyncio.iscoroutine(result):
            asyncio.get_running_loop().create_task(result)

    return call


class AIOConsumer:
    """``confluent_kafka.aio.AIOConsumer(consumer_conf, max_workers=2, executor=None)``."""

    def __init__(
        self, consumer_conf: Mapping[str, Any], max_workers: int = 2, executor: Any = None
    ) -> None:
        self._consumer = Consumer(consumer_conf)
        self._wait = _Waiting(self._consumer._rt, lambda: self._consumer._closed)

    async def __aenter__(self) -> AIOConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def poll(self, timeout: float | None = None) -> Message | None:
        consumer = self._consumer
        consumer._enter("poll")
        consumer._serve()
        got = await self._wait(consumer._one, True)
        return got[0] if got else None

    async def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        consumer = self._consumer
        consumer._enter("consume")
        consumer._serve()
        result: list[Message] = await self._wait(lambda: consumer._batch(num_messages), True)
        return result

    async def subscribe(self, topics: list[str], **kwargs: Any) -> None:
        for name in ("on_assign", "on_revoke", "on_lost"):
            if kwargs.get(name) is not None:
                kwargs[name] = _on_loop(self, kwargs[name])
        self._consumer.subscribe(topics, **kwargs)

    async def close(self) -> None:
        self._consumer.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _delegate(self._consumer, name)


class AIOProducer:
    """``confluent_kafka.aio.AIOProducer(producer_conf, max_workers=4, executor=None,
    batch_size=1000, buffer_timeout=5.0)``."""

    def __init__(
        self,
        producer_conf: Mapping[str, Any],
        max_workers: int = 4,
        executor: Any = None,
        batch_size: int = 1000,
        buffer_timeout: float = 5.0,
    ) -> None:
        self._producer = Producer(producer_conf)
        self._closed = False
        self._sender = Sender(
            self._producer.flush, lambda: not self._closed and bool(len(self._producer))
        )

    async def __aenter__(self) -> AIOProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def produce(
        self, topic: str, value: Any = None, key: Any = None, *args: Any, **kwargs: Any
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        user_callback = kwargs.pop("on_delivery", None)

        def delivered(err: Any, msg: Message) -> None:
            if not future.done() and not loop.is_closed():
                if err is not None:
                    future.set_exception(KafkaException(err))
                else:
                    future.set_result(msg)
            if user_callback is not None:
                user_callback(err, msg)

        producer = self._producer
        kwargs["on_delivery"] = delivered
        producer.produce(topic, value, key, *args, **kwargs)
        if producer._txn is not None:
            out = producer._txn_outputs[-1][0]
            future.set_result(
                Message(topic, out.partition, None, out.produced.key, out.produced.value)
            )
        else:
            self._sender.track(future)
        return future

    async def flush(self, *args: Any, **kwargs: Any) -> int:
        return self._producer.flush(*args, **kwargs)

    async def poll(self, timeout: float = 0, *args: Any, **kwargs: Any) -> int:
        return self._producer.poll(timeout)

    async def close(self) -> None:
        if not self._closed:
            self._producer.flush()
            self._closed = True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _delegate(self._producer, name)
