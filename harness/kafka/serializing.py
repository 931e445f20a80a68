"""``confluent_kafka.serialization`` and the serializing clients: ``SerializingProducer``
and ``DeserializingConsumer`` (the ``Producer``/``Consumer`` doubles with serializers
applied as the real client applies them), the string, integer and double
(de)serializers, ``SerializationContext``, ``MessageField``, and the errors of
``confluent_kafka.error``.

Schema Registry serializers (``confluent_kafka.schema_registry``, ``confluent_kafka.avro``)
are not modelled: importing them raises :class:`NotModelled`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from harness.kafka._confluent_base import _CODES, KafkaError, KafkaException, Message
from harness.kafka._consumer import Consumer
from harness.kafka._producer import Producer

__all__ = [
    "ConsumeError",
    "Deserializer",
    "DeserializingConsumer",
    "DoubleDeserializer",
    "DoubleSerializer",
    "IntegerDeserializer",
    "IntegerSerializer",
    "KeyDeserializationError",
    "KeySerializationError",
    "MessageField",
    "ProduceError",
    "SerializationContext",
    "SerializationError",
    "Serializer",
    "SerializingProducer",
    "StringDeserializer",
    "StringSerializer",
    "ValueDeserializationError",
    "ValueSerializationError",
]


class SerializationError(KafkaException):
    """A (de)serializer failed."""


class _KafkaClientError(KafkaException):
    def __init__(
        self,
        kafka_error: KafkaError,
        exception: BaseException | None = None,
        kafka_message: Message | None = None,
    ) -> None:
        super().__init__(kafka_error)
        self.exception = exception
        self.kafka_message = kafka_message

    @property
    def code(self) -> int:
        return self.args[0].code()  # type: ignore[no-any-return]

    @property
    def name(self) -> str:
        return self.args[0].name()  # type: ignore[no-any-return]


class ConsumeError(_KafkaClientError):
    """``DeserializingConsumer.poll()`` got an error message (or could not deserialize)."""


class ProduceError(_KafkaClientError):
    """``SerializingProducer.produce()`` could not serialize."""


class KeyDeserializationError(ConsumeError, SerializationError):
    def __init__(
        self, exception: BaseException | None = None, kafka_message: Message | None = None
    ) -> None:
        error = KafkaError(_CODES["_KEY_DESERIALIZATION"], str(exception))
        super().__init__(error, exception=exception, kafka_message=kafka_message)


class ValueDeserializationError(ConsumeError, SerializationError):
    def __init__(
        self, exception: BaseException | None = None, kafka_message: Message | None = None
    ) -> None:
        error = KafkaError(_CODES["_VALUE_DESERIALIZATION"], str(exception))
        super().__init__(error, exception=exception, kafka_message=kafka_message)


class KeySerializationError(ProduceError, SerializationError):
    def __init__(
        self, exception: BaseException | None = None, kafka_message: Message | None = None
    ) -> None:
        error = KafkaError(_CODES["_KEY_SERIALIZATION"], str(exception))
        super().__init__(error, exception=exception, kafka_message=kafka_message)


class ValueSerializationError(ProduceError, SerializationError):
    def __init__(
        self, exception: BaseException | None = None, kafka_message: Message | None = None
    ) -> None:
        error = KafkaError(_CODES["_VALUE_SERIALIZATION"], str(exception))
        super().__init__(error, exception=exception, kafka_message=kafka_message)


class MessageField:
    NONE = "none"
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    def __init__(self, topic: str, field: str, headers: Any = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers


class Serializer:
    """Base class: ``serializer(obj, ctx)`` returns bytes (or None)."""

    __slots__ = ["__weakref__"]

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        raise NotImplementedError


class Deserializer:
    """Base class: ``deserializer(value, ctx)`` returns the object (or None)."""

    __slots__ = ["__weakref__"]

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> Any:
        raise NotImplementedError


class StringSerializer(Serializer):
    __slots__ = ["codec"]

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise SerializationError(f"Unsupported serializable object {obj!r:.80}")
        try:
            return obj.encode(self.codec)
        except Exception as exc:
            raise SerializationError(str(exc)) from None


class StringDeserializer(Deserializer):
    __slots__ = ["codec"]

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if value is None:
            return None
        try:
            return value.decode(self.codec)
        except Exception as exc:
            raise SerializationError(str(exc)) from None


class _Packed(Serializer):
    __slots__: list[str] = []
    _format = ">i"

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        try:
            return struct.pack(self._format, obj)
        except struct.error as exc:
            raise SerializationError(str(exc)) from None


class _Unpacked(Deserializer):
    __slots__: list[str] = []
    _format = ">i"

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if value is None:
            return None
        try:
            return struct.unpack(self._format, value)[0]
        except struct.error as exc:
            raise SerializationError(str(exc)) from None


class IntegerSerializer(_Packed):
    """A 32-bit big-endian signed integer (Java's ``IntegerSerializer``)."""

    __slots__: list[str] = []


class IntegerDeserializer(_Unpacked):
    __slots__: list[str] = []


class DoubleSerializer(_Packed):
    """An IEEE 754 big-endian double (Java's ``DoubleSerializer``)."""

    __slots__: list[str] = []
    _format = ">d"


class DoubleDeserializer(_Unpacked):
    __slots__: list[str] = []
    _format = ">d"


_Ser = Callable[[Any, SerializationContext], Any] | None


def _split(
    conf: Mapping[str, Any] | None, names: tuple[str, str]
) -> tuple[dict[str, Any], _Ser, _Ser]:
    conf = dict(conf or {})
    key, value = (conf.pop(n, None) for n in names)
    return conf, key, value


class SerializingProducer(Producer):
    """A ``Producer`` whose ``key.serializer``/``value.serializer`` encode the key and value
    (``serializer(obj, SerializationContext(topic, field, headers))``)."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        producer_conf, self._key_serializer, self._value_serializer = _split(
            conf, ("key.serializer", "value.serializer")
        )
        super().__init__(producer_conf)

    def produce(  # type: ignore[override]
        self,
        topic: str,
        key: Any = None,
        value: Any = None,
        partition: int = -1,
        on_delivery: Callable[..., Any] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        ctx = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key = self._key_serializer(key, ctx)
            except Exception as exc:
                raise KeySerializationError(exc) from None
        ctx.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value = self._value_serializer(value, ctx)
            except Exception as exc:
                raise ValueSerializationError(exc) from None
        super().produce(
            topic,
            value,
            key,
            partition,
            on_delivery=on_delivery,
            timestamp=timestamp,
            headers=headers,
        )


class DeserializingConsumer(Consumer):
    """A ``Consumer`` whose ``poll()`` decodes with ``key.deserializer``/
    ``value.deserializer`` and raises ``ConsumeError`` for an error message."""

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        consumer_conf, self._key_deserializer, self._value_deserializer = _split(
            conf, ("key.deserializer", "value.deserializer")
        )
        super().__init__(consumer_conf)

    def poll(self, timeout: float | None = -1) -> Message | None:
        msg = super().poll(timeout)
        if msg is None:
            return None
        if msg.error() is not None:
            raise ConsumeError(msg.error(), kafka_message=msg)  # type: ignore[arg-type]
        ctx = SerializationContext(msg.topic() or "", MessageField.VALUE, msg.headers())
        value = msg.value()
        if self._value_deserializer is not None:
            try:
                value = self._value_deserializer(value, ctx)
            except Exception as exc:
                raise ValueDeserializationError(exception=exc, kafka_message=msg) from None
        key = msg.key()
        ctx.field = MessageField.KEY
        if self._key_deserializer is not None:
            try:
                key = self._key_deserializer(key, ctx)
            except Exception as exc:
                raise KeyDeserializationError(exception=exc, kafka_message=msg) from None
        msg.set_key(key)
        msg.set_value(value)
        return msg

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        raise NotImplementedError
