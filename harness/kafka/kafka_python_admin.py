"""kafka-python's ``kafka.admin``: ``KafkaAdminClient``, ``NewTopic``, ``NewPartitions``,
``ConfigResource`` over the simulated cluster (the topics are those of
:mod:`harness.kafka.admin`).

As kafka-python does, a request is sent for every topic at once and the first topic error is
raised afterwards (``TopicAlreadyExistsError``, ``UnknownTopicOrPartitionError``,
``InvalidPartitionsError``, ...): the topics without an error were created. Each call is one
fault point. ACLs, configuration changes and group membership calls raise
:class:`NotModelled`.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Iterable, Mapping
from typing import Any, Final

from harness.kafka import admin
from harness.kafka._broker import Runtime, current
from harness.kafka._confluent_base import _CODES
from harness.kafka._errors import NotModelled
from harness.kafka.kafka_python import (
    _COMMON,
    KafkaConfigurationError,
    KafkaError,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["KafkaAdminClient", "NewPartitions", "NewTopic", "admin_module", "modules"]


class TopicAlreadyExistsError(KafkaError):
    errno = 36


class UnknownTopicOrPartitionError(KafkaError):
    errno = 3


class InvalidPartitionsError(KafkaError):
    errno = 37


class InvalidReplicationFactorError(KafkaError):
    errno = 38


class InvalidTopicError(KafkaError):
    errno = 17


_ERRORS: Final = {
    "TOPIC_ALREADY_EXISTS": TopicAlreadyExistsError,
    "UNKNOWN_TOPIC_OR_PART": UnknownTopicOrPartitionError,
    "INVALID_PARTITIONS": InvalidPartitionsError,
    "INVALID_REPLICATION_FACTOR": InvalidReplicationFactorError,
    "INVALID_TOPIC_EXCEPTION": InvalidTopicError,
}
_KEYS: Final = frozenset(_COMMON.split())


class NewTopic:
    def __init__(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignments: Mapping[int, list[int]] | None = None,
        topic_configs: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = dict(replica_assignments or {})
        self.topic_configs = dict(topic_configs or {})


class NewPartitions:
    def __init__(self, total_count: int, new_assignments: Any = None) -> None:
        self.total_count = total_count
        self.new_assignments = new_assignments


class ConfigResourceType(enum.IntEnum):
    BROKER = 4
    TOPIC = 2


class ConfigResource:
    def __init__(
        self, resource_type: Any, name: str, configs: Mapping[str, str] | None = None
    ) -> None:
        if isinstance(resource_type, str):
            resource_type = ConfigResourceType[resource_type.upper()]
        self.resource_type = resource_type
        self.name = name
        self.configs = configs


class _Response:
    """What a request returns: ``topic_errors`` as ``(topic, error_code, message)``."""

    def __init__(self, results: Iterable[tuple[str, tuple[str, str] | None]]) -> None:
        self.topic_errors = [
            (t, 0, None) if e is None else (t, _CODES[e[0]], e[1]) for t, e in results
        ]
        self.topic_error_codes = [(t, code) for t, code, _ in self.topic_errors]

    def __repr__(self) -> str:
        return f"Response(topic_errors={self.topic_errors})"


_UNMODELLED: Final = frozenset(
    {"alter_configs", "create_acls", "describe_acls", "delete_acls", "list_consumer_groups",
     "describe_consumer_groups", "delete_consumer_groups", "delete_records",
     "perform_leader_election", "alter_partition_reassignments"}
)  # fmt: skip


class KafkaAdminClient:
    """kafka-python's admin client over the simulated cluster (module docstring)."""

    def __init__(self, **configs: Any) -> None:
        extra = set(configs) - _KEYS
        if extra:
            raise KafkaConfigurationError(f"Unrecognized configs: {extra}")
        self._rt: Runtime = current("kafka.KafkaAdminClient()")
        self._closed = False
        self.raise_errors = True
        """kafka-python raises the first topic error; aiokafka's admin client returns them."""

    def _respond(self, results: list[tuple[str, tuple[str, str] | None]]) -> _Response:
        errors = [e for _, e in results if e is not None]
        if errors and self.raise_errors:
            name, reason = errors[0]
            raise _ERRORS[name](reason)
        return _Response(results)

    def _enter(self) -> Runtime:
        if self._closed:
            raise KafkaError("KafkaAdminClient already closed")
        rt = self._rt
        rt.enter()
        return rt

    def create_topics(
        self, new_topics: list[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> _Response:
        rt = self._enter()
        results = []
        for new in new_topics:
            if validate_only:
                exists = ("TOPIC_ALREADY_EXISTS", f"Topic '{new.name}' already exists.")
                error = exists if new.name in rt.broker.topics() else None
            else:
                error = admin._create(rt, new.name, new.num_partitions, new.replication_factor)
            results.append((new.name, error))
        return self._respond(results)

    def delete_topics(self, topics: list[str], timeout_ms: int | None = None) -> _Response:
        rt = self._enter()
        return self._respond([(t, admin._delete(rt, t, "delete_topics")) for t in topics])

    def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> _Response:
        rt = self._enter()
        return self._respond(
            [
                (t, admin._add_partitions(rt, t, new.total_count, "create_partitions"))
                for t, new in topic_partitions.items()
            ]
        )

    def list_topics(self) -> list[str]:
        return list(self._enter().broker.topics())

    def describe_topics(self, topics: list[str] | None = None) -> list[dict[str, Any]]:
        known = self._enter().broker.topics()
        names = list(known) if topics is None else topics
        result = []
        for name in names:
            partitions = [
                {
                    "error_code": 0,
                    "partition": p,
                    "leader": 1,
                    "replicas": [1],
                    "isr": [1],
                    "offline_replicas": [],
                }
                for p in range(known.get(name, 0))
            ]
            result.append(
                {
                    "error_code": 0 if name in known else 3,
                    "topic": name,
                    "is_internal": False,
                    "partitions": partitions,
                }
            )
        return result

    def describe_cluster(self) -> dict[str, Any]:
        self._enter()
        node_id, host, port = admin.BROKER
        return {
            "throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "brokers": [{"node_id": node_id, "host": host, "port": port, "rack": None}],
            "cluster_id": admin.CLUSTER_ID, "controller_id": node_id,
        }  # fmt: skip

    def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: list[Any] | None = None,
    ) -> dict[Any, Any]:
        rt = self._enter()
        pairs = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]
        offsets = admin._group_offsets(rt, group_id, pairs)
        return {
            TopicPartition(t, p): OffsetAndMetadata(-1 if o is None else o, "", -1)
            for (t, p), o in offsets.items()
            if o is not None or partitions is not None
        }

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[Any, Any]) -> None:
        rt = self._enter()
        admin._alter_group_offsets(
            rt,
            group_id,
            {(tp.topic, tp.partition): getattr(m, "offset", m) for tp, m in offsets.items()},
        )

    def close(self) -> None:
        self._closed = True

    def __getattr__(self, name: str) -> Any:
        if name in _UNMODELLED:
            raise NotModelled(f"KafkaAdminClient.{name}()")
        raise AttributeError(f"'KafkaAdminClient' object has no attribute {name!r}")


def admin_module(name: str, client: type) -> types.ModuleType:
    """An admin module double (``kafka.admin``, ``aiokafka.admin``) around ``client``."""
    module = types.ModuleType(name, f"The harness's in-process double of {name}.")
    names: dict[str, Any] = {
        client.__name__: client, "NewTopic": NewTopic, "NewPartitions": NewPartitions,
        "ConfigResource": ConfigResource, "ConfigResourceType": ConfigResourceType,
    }  # fmt: skip
    for attr, value in names.items():
        setattr(module, attr, value)
    module.__all__ = list(names)  # type: ignore[attr-defined]
    return module


def modules() -> dict[str, types.ModuleType]:
    """``kafka.admin`` (its errors are added to ``kafka.errors`` by the caller)."""
    return {"kafka.admin": admin_module("kafka.admin", KafkaAdminClient)}


ERRORS: Final = tuple(_ERRORS.values())
