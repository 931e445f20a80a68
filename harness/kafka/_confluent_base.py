"""The values and errors of the ``confluent_kafka`` double, and the parking of idle calls."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from harness.errors import ConfigError
from harness.kafka._broker import InputRecord, Runtime
from harness.kafka._config import ClientConfig, ConfigProblem, parse_config
from harness.kafka.lineage import RECORD_ID_HEADER

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumerGroupMetadata",
    "KafkaError",
    "KafkaException",
    "Message",
    "TopicPartition",
    "libversion",
    "version",
]

OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
OFFSET_STORED: Final = -1000
OFFSET_INVALID: Final = -1001
TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2

_CODES: Final = {
    "_BAD_MSG": -199, "_BAD_COMPRESSION": -198, "_DESTROY": -197, "_FAIL": -196,
    "_TRANSPORT": -195, "_CRIT_SYS_RESOURCE": -194, "_RESOLVE": -193, "_MSG_TIMED_OUT": -192,
    "_PARTITION_EOF": -191, "_UNKNOWN_PARTITION": -190, "_FS": -189, "_UNKNOWN_TOPIC": -188,
    "_ALL_BROKERS_DOWN": -187, "_INVALID_ARG": -186, "_TIMED_OUT": -185, "_QUEUE_FULL": -184,
    "_ISR_INSUFF": -183, "_NODE_UPDATE": -182, "_SSL": -181, "_WAIT_COORD": -180,
    "_UNKNOWN_GROUP": -179, "_IN_PROGRESS": -178, "_PREV_IN_PROGRESS": -177,
    "_EXISTING_SUBSCRIPTION": -176, "_ASSIGN_PARTITIONS": -175, "_REVOKE_PARTITIONS": -174,
    "_CONFLICT": -173, "_STATE": -172, "_UNKNOWN_PROTOCOL": -171, "_NOT_IMPLEMENTED": -170,
    "_AUTHENTICATION": -169, "_NO_OFFSET": -168, "_OUTDATED": -167, "_TIMED_OUT_QUEUE": -166,
    "_UNSUPPORTED_FEATURE": -165, "_WAIT_CACHE": -164, "_INTR": -163,
    "_KEY_SERIALIZATION": -162, "_VALUE_SERIALIZATION": -161, "_KEY_DESERIALIZATION": -160,
    "_VALUE_DESERIALIZATION": -159, "_PARTIAL": -158, "_READ_ONLY": -157, "_NOENT": -156,
    "_UNDERFLOW": -155, "_INVALID_TYPE": -154, "_RETRY": -153, "_PURGE_QUEUE": -152,
    "_PURGE_INFLIGHT": -151, "_FATAL": -150, "_INCONSISTENT": -149,
    "_GAPLESS_GUARANTEE": -148, "_MAX_POLL_EXCEEDED": -147, "_UNKNOWN_BROKER": -146,
    "_NOT_CONFIGURED": -145, "_FENCED": -144, "_APPLICATION": -143, "_ASSIGNMENT_LOST": -142,
    "_NOOP": -141, "_AUTO_OFFSET_RESET": -140,
    "UNKNOWN": -1, "NO_ERROR": 0, "OFFSET_OUT_OF_RANGE": 1, "INVALID_MSG": 2,
    "UNKNOWN_TOPIC_OR_PART": 3, "LEADER_NOT_AVAILABLE": 5, "NOT_LEADER_FOR_PARTITION": 6,
    "REQUEST_TIMED_OUT": 7, "NOT_COORDINATOR": 16, "ILLEGAL_GENERATION": 22,
    "UNKNOWN_MEMBER_ID": 25, "REBALANCE_IN_PROGRESS": 27, "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46, "INVALID_PRODUCER_EPOCH": 47, "INVALID_TXN_STATE": 48,
    "CONCURRENT_TRANSACTIONS": 51, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53,
    "PRODUCER_FENCED": 90, "INVALID_TOPIC_EXCEPTION": 17, "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37, "INVALID_REPLICATION_FACTOR": 38, "INVALID_CONFIG": 40,
    "GROUP_ID_NOT_FOUND": 69,
}  # fmt: skip
_NAMES: Final = {code: name for name, code in _CODES.items()}


class KafkaError:
    """A client error: ``code()``, ``name()``, ``str()``, ``fatal()``, ``retriable()``,
    ``txn_requires_abort()``; the codes are class attributes (``KafkaError._PARTITION_EOF``)."""

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        self._code = int(error)
        self._reason = reason if reason is not None else _NAMES.get(self._code, "Unknown error")
        self._fatal, self._retriable, self._abort = fatal, retriable, txn_requires_abort

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return _NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> str:
        return self._reason

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        return isinstance(other, int) and self._code == other

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return self._reason

    def __repr__(self) -> builtins.str:
        return f'KafkaError{{code={self.name()},val={self._code},str="{self._reason}"}}'


for _name, _code in _CODES.items():
    setattr(KafkaError, _name, _code)


class KafkaException(Exception):
    """Raised by client calls; ``args[0]`` is the :class:`KafkaError`."""

    def __init__(self, *args: Any) -> None:
        if args and isinstance(args[0], int):
            args = (KafkaError(args[0], *args[1:]),)
        super().__init__(*args)

    def __str__(self) -> str:
        return repr(self.args[0]) if self.args else "KafkaException"


class _ConfigurationError(KafkaException, ConfigError):
    """A bad client configuration: a ``KafkaException`` for the application, a
    ``ConfigError`` for the harness (the run stops with librdkafka's message)."""


def _fail(code: int, reason: str, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, reason, **flags))


def _config(conf: object, kwargs: Mapping[str, object], client: str) -> ClientConfig:
    try:
        return parse_config(conf, kwargs, client)
    except ConfigProblem as exc:
        raise _ConfigurationError(KafkaError(_CODES["_INVALID_ARG"], str(exc))) from None


def libversion() -> tuple[str, int]:
    return ("2.6.0", 0x020600FF)


def version() -> tuple[str, int]:
    return ("2.6.0", 0x02060000)


class TopicPartition:
    """A topic partition with an offset (``OFFSET_INVALID`` when unset)."""

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return (self.topic, self.partition) == (other.topic, other.partition)

    def __lt__(self, other: TopicPartition) -> bool:
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},leader_epoch={self.leader_epoch},error={self.error}}}"
        )

    __str__ = __repr__


class Message:
    """A consumed message (or an event such as ``_PARTITION_EOF``: see ``error()``)."""

    def __init__(
        self,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, -1),
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers
        self._error, self._timestamp = error, timestamp

    @classmethod
    def _of(cls, record: InputRecord) -> Message:
        return cls(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value,
            [(RECORD_ID_HEADER, record.record_id.encode())],
            None,
            (TIMESTAMP_CREATE_TIME, record.timestamp),
        )

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def latency(self) -> float | None:
        return None

    def leader_epoch(self) -> int | None:
        return None

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None:
        self._headers = headers

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"<Message {self._topic} [{self._partition}] @ {self._offset}>"


class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs: here, the group id only."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id

    def __repr__(self) -> str:
        return f"ConsumerGroupMetadata({self.group_id!r})"


class _Shutdown(BaseException):
    """Raised where a parked client waits when a settled run shuts the application down."""


def park(rt: Runtime) -> None:
    """Wait for input; on shutdown call the application's signal handler (then return) or
    raise ``KeyboardInterrupt``, as SIGINT would."""
    rt.ctx.on_shutdown(_Shutdown)
    try:
        rt.park()
    except _Shutdown:
        rt.stopping = True
        if rt.shutdown_handler is not None and rt.shutdown_handler():
            return
        raise KeyboardInterrupt from None


_T = TypeVar("_T")


class IdleWait:
    """How a consumer's ``poll`` waits, for both clients: when nothing is there, one idle
    (empty) return, then park until there is something; a client that is stopping never
    parks."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._idle = False

    def __call__(self, take: Callable[[], _T]) -> _T:
        while True:
            got = take()
            if got:
                self._idle = False
                return got
            if self._rt.stopping or not self._idle:
                self._idle = True
                return got
            park(self._rt)


def _bytes(value: object, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be str or bytes, not {type(value).__name__}")


def _headers(headers: object) -> tuple[tuple[str, bytes | None], ...]:
    if headers is None:
        return ()
    items: Any = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), _bytes(v, "header value")) for k, v in items)
