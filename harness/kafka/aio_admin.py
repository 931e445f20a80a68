"""aiokafka's ``aiokafka.admin``: ``AIOKafkaAdminClient`` (``start``/``close``,
``create_topics``, ``delete_topics``, ``create_partitions``, ``list_topics``,
``describe_topics``, ``describe_cluster``, ``list_consumer_group_offsets``), ``NewTopic``,
``NewPartitions``, ``ConfigResource``, over the simulated cluster of
:mod:`harness.kafka.admin`. Each coroutine is one fault point. Unlike kafka-python's
client, a topic error is not raised: it is in the response's ``topic_errors`` as
``(topic, error_code, message)``, as aiokafka returns it. Config and group management,
ACLs and record deletion raise :class:`NotModelled`.
"""

from __future__ import annotations

import types
from typing import Any, Final

from harness.kafka._errors import NotModelled
from harness.kafka.aio import _BadArgument
from harness.kafka.kafka_python import KafkaConfigurationError
from harness.kafka.kafka_python_admin import KafkaAdminClient, admin_module

__all__ = ["AIOKafkaAdminClient", "modules"]

_CALLS: Final = frozenset(
    {"create_topics", "delete_topics", "create_partitions", "list_topics", "describe_topics",
     "describe_cluster", "list_consumer_group_offsets"}
)  # fmt: skip


class AIOKafkaAdminClient:
    """aiokafka's admin client (module docstring)."""

    def __init__(self, **configs: Any) -> None:
        configs.pop("loop", None)
        try:
            self._admin = KafkaAdminClient(**configs)
        except KafkaConfigurationError as exc:
            raise _BadArgument(f"AIOKafkaAdminClient.__init__(): {exc}") from None
        self._admin.raise_errors = False

    async def start(self) -> None:
        self._admin._enter()

    async def close(self) -> None:
        self._admin.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in _CALLS:
            raise NotModelled(f"AIOKafkaAdminClient.{name}()")
        method = getattr(self._admin, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


def modules() -> dict[str, types.ModuleType]:
    """``aiokafka.admin``."""
    return {"aiokafka.admin": admin_module("aiokafka.admin", AIOKafkaAdminClient)}
