"""The Kafka topics of an unchanged job's run, in the reference log: names and message frames.

Topic partition ``p`` of topic ``t`` is the log ``kafka.t.p``; a message is a log record
whose payload is a frame of its key and value (:func:`encode_message`), whose txid is its
timestamp in milliseconds. Shared by the harness (producing inputs, reading output topics)
and the Kafka data source (:mod:`harness.spark.streaming.kafka_source`). No pyspark.
"""

from __future__ import annotations

import struct
from typing import Final

from harness.log.dlsn import DLSN
from harness.log.namespace import open_namespace

__all__ = ["decode_message", "encode_message", "kafka_log", "read_topic"]

_FRAME: Final = struct.Struct(">ii")
_LOG_PREFIX: Final = "kafka."


def kafka_log(topic: str, partition: int) -> str:
    """The log holding ``topic``'s partition ``partition``."""
    return f"{_LOG_PREFIX}{topic}.{partition}"


def _topic_partition(log: str) -> tuple[str, int]:
    topic, _, partition = log[len(_LOG_PREFIX) :].rpartition(".")
    return topic, int(partition)


def encode_message(key: bytes | None, value: bytes | None) -> bytes:
    """A Kafka message as a log record's payload: two lengths (-1: null), key, value."""
    return (
        _FRAME.pack(-1 if key is None else len(key), -1 if value is None else len(value))
        + (key or b"")
        + (value or b"")
    )


def decode_message(payload: bytes) -> tuple[bytes | None, bytes | None]:
    key_length, value_length = _FRAME.unpack_from(payload)
    at = _FRAME.size
    key = None if key_length < 0 else bytes(payload[at : at + key_length])
    at += max(key_length, 0)
    value = None if value_length < 0 else bytes(payload[at : at + value_length])
    return key, value


def read_topic(uri: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every message of ``topic`` (partition 0) in order: what a consumer reads."""
    log = kafka_log(topic, 0)
    with open_namespace(uri) as namespace:
        if not namespace.log_exists(log):
            return []
        with namespace.open_log(log) as manager:
            reader = manager.open_reader(DLSN.INITIAL)
            try:
                found = []
                while (record := reader.read_next(non_blocking=True)) is not None:
                    found.append(decode_message(record.payload))
                return found
            finally:
                reader.close()
