"""Admin clients over the simulated cluster: ``confluent_kafka.admin.AdminClient`` and
kafka-python's ``kafka.admin.KafkaAdminClient``.

The cluster's topics are the run's: the input topics (``--partitions`` each), the output and
unchecked topics (one partition each), and the topics an admin client created during the
run. So creating a topic the run declares fails with ``TOPIC_ALREADY_EXISTS``, as it does on
a cluster where it exists (an application must handle that on every restart anyway);
creating another topic succeeds and lists it, but producing to it still needs
``--output``/``--unchecked-topic``. Deleting a run's topic or adding partitions to it would
change what is checked: :class:`NotModelled`. Replication is not modelled: any replication
factor is accepted. Each admin call is one fault point; its futures are resolved when it
returns (``result()`` never waits).

``AdminClient``: ``create_topics``, ``delete_topics``, ``create_partitions`` and
``describe_topics``/``describe_configs`` return ``{key: concurrent.futures.Future}``;
``list_topics`` a ``ClusterMetadata``; ``describe_cluster`` a future;
``list_consumer_group_offsets`` / ``alter_consumer_group_offsets`` read and commit a group's
offsets (the checked group's are the history's ``fetch``/``commit`` events). The other calls
(ACLs, config changes, group membership) raise :class:`NotModelled`.
"""

from __future__ import annotations

import concurrent.futures
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final

from harness.kafka._broker import Runtime, current
from harness.kafka._confluent_base import (
    _CODES,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    TopicPartition,
    _config,
)
from harness.kafka._errors import NotModelled

__all__ = [
    "AdminClient",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupTopicPartitions",
    "NewPartitions",
    "NewTopic",
    "Node",
    "PartitionMetadata",
    "ResourceType",
    "TopicCollection",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartitionInfo",
    "cluster_metadata",
]

CLUSTER_ID: Final = "harness-simulated-cluster"
BROKER: Final = (1, "harness-broker", 9092)
_TOPIC_DEFAULTS: Final = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
}


# -- the cluster's topics, for both admin clients ---------------------------------------


def _create(rt: Runtime, name: object, partitions: int, replication: int) -> tuple[str, str] | None:
    """Create a topic; ``(error name, reason)`` when the broker refuses."""
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "._-" for c in name):
        return ("INVALID_TOPIC_EXCEPTION", f"Topic name {name!r} is illegal")
    if partitions == -1:
        partitions = 1
    if type(partitions) is not int or partitions < 1:
        return (
            "INVALID_PARTITIONS",
            f"Number of partitions must be larger than 0, got {partitions!r}",
        )
    if type(replication) is not int or replication == 0 or replication < -1:
        return (
            "INVALID_REPLICATION_FACTOR",
            f"Replication factor must be larger than 0, got {replication!r}",
        )
    broker = rt.broker
    if name in broker.topics():
        return ("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
    broker.created[name] = partitions
    return None


def _delete(rt: Runtime, name: str, call: str) -> tuple[str, str] | None:
    broker = rt.broker
    if name in broker.created:
        del broker.created[name]
        return None
    if name in broker.topics():
        raise NotModelled(f"{call}({name!r})", "deleting a topic the run reads or checks")
    return ("UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition")


def _add_partitions(rt: Runtime, name: str, total: int, call: str) -> tuple[str, str] | None:
    broker = rt.broker
    if name not in broker.topics():
        return ("UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition")
    if name not in broker.created:
        raise NotModelled(
            f"{call}({name!r})", "adding partitions to a topic the run reads or checks"
        )
    if type(total) is not int or total <= broker.created[name]:
        return (
            "INVALID_PARTITIONS",
            f"Topic currently has {broker.created[name]} partitions, which is higher than or "
            f"equal to the requested {total}.",
        )
    broker.created[name] = total
    return None


def _group_offsets(
    rt: Runtime, group: str, pairs: Iterable[tuple[str, int]] | None
) -> dict[tuple[str, int], int | None]:
    """The group's committed offsets of ``pairs`` (None: every input partition)."""
    broker = rt.broker
    if pairs is None:
        pairs = [(t, p) for t in broker.wiring.inputs for p in range(broker.wiring.partitions)]
    return {
        (t, p): broker.committed(rt, group, broker.name(t, p, "list_consumer_group_offsets"))
        for t, p in pairs
    }


def _alter_group_offsets(rt: Runtime, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    broker = rt.broker
    named = {broker.name(t, p, "alter_consumer_group_offsets"): o for (t, p), o in offsets.items()}
    broker.commit_offsets(rt, group, named, "alter_consumer_group_offsets")


# -- confluent_kafka.admin ----------------------------------------------------------------


class NewTopic:
    """A topic to create: ``NewTopic(topic, num_partitions=-1, replication_factor=-1,
    replica_assignment=None, config=None)``."""

    def __init__(
        self,
        topic: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: list[list[int]] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.num_partitions = len(replica_assignment) if replica_assignment else num_partitions
        self.replication_factor = replication_factor
        self.replica_assignment = replica_assignment
        self.config = dict(config or {})

    def __repr__(self) -> str:
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"


class NewPartitions:
    """``NewPartitions(topic, new_total_count, replica_assignment=None)``."""

    def __init__(self, topic: str, new_total_count: int, replica_assignment: Any = None) -> None:
        self.topic = topic
        self.new_total_count = new_total_count
        self.replica_assignment = replica_assignment

    def __repr__(self) -> str:
        return f"NewPartitions(topic={self.topic},new_total_count={self.new_total_count})"


class ResourceType(enum.Enum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


class ConfigSource(enum.Enum):
    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigResource:
    """``ConfigResource(restype, name, set_config=None, described_configs=None, error=None)``."""

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: Mapping[str, str] | None = None,
        described_configs: Any = None,
        error: Any = None,
    ) -> None:
        if isinstance(restype, str):
            restype = ResourceType[restype.upper()]
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype = restype
        self.name = name
        self.set_config_dict = dict(set_config or {})
        self.configs = described_configs
        self.error = error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return (self.restype, self.name) == (other.restype, other.name)

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __repr__(self) -> str:
        return f"ConfigResource({self.restype},{self.name})"


class ConfigEntry:
    """One configuration value of a described resource."""

    def __init__(
        self, name: str, value: str | None, source: ConfigSource, is_default: bool
    ) -> None:
        self.name, self.value, self.source = name, value, source
        self.is_default = is_default
        self.is_read_only = self.is_sensitive = self.is_synonym = False
        self.synonyms: dict[str, ConfigEntry] = {}

    def __repr__(self) -> str:
        return f'ConfigEntry({self.name}="{self.value}")'

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class BrokerMetadata:
    def __init__(self) -> None:
        self.id, self.host, self.port = BROKER

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"


class PartitionMetadata:
    def __init__(self, partition: int) -> None:
        self.id = partition
        self.leader = BROKER[0]
        self.replicas = [BROKER[0]]
        self.isrs = [BROKER[0]]
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        return f"PartitionMetadata({self.id})"


class TopicMetadata:
    def __init__(self, topic: str, partitions: int, error: KafkaError | None = None) -> None:
        self.topic = topic
        self.partitions = {p: PartitionMetadata(p) for p in range(partitions)}
        self.error = error

    def __repr__(self) -> str:
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"


class ClusterMetadata:
    """What ``list_topics()`` returns."""

    def __init__(self, topics: dict[str, TopicMetadata]) -> None:
        self.cluster_id = CLUSTER_ID
        self.controller_id = BROKER[0]
        self.brokers = {BROKER[0]: BrokerMetadata()}
        self.topics = topics
        self.orig_broker_id = BROKER[0]
        self.orig_broker_name = f"{BROKER[1]}:{BROKER[2]}/{BROKER[0]}"

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"


def cluster_metadata(rt: Runtime, topic: str | None) -> ClusterMetadata:
    """``list_topics(topic)`` of any confluent_kafka client (its caller is the fault point)."""
    topics = rt.broker.topics()
    if topic is None:
        return ClusterMetadata({t: TopicMetadata(t, n) for t, n in topics.items()})
    if topic in topics:
        return ClusterMetadata({topic: TopicMetadata(topic, topics[topic])})
    error = KafkaError(_CODES["UNKNOWN_TOPIC_OR_PART"], "Broker: Unknown topic or partition")
    return ClusterMetadata({topic: TopicMetadata(topic, 0, error)})


class Node:
    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.id, self.id_string, self.host, self.port, self.rack = id, str(id), host, port, rack

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.host}:{self.port})"


class TopicCollection:
    def __init__(self, topic_names: Iterable[str]) -> None:
        self.topic_names = list(topic_names)


class TopicPartitionInfo:
    def __init__(self, id: int) -> None:
        node = Node(*BROKER)
        self.id, self.leader, self.replicas, self.isr = id, node, [node], [node]


class TopicDescription:
    def __init__(self, name: str, partitions: int) -> None:
        self.name = name
        self.topic_id = None
        self.is_internal = False
        self.partitions = [TopicPartitionInfo(p) for p in range(partitions)]
        self.authorized_operations = None

    def __repr__(self) -> str:
        return f"TopicDescription({self.name}, {len(self.partitions)} partitions)"


class DescribeClusterResult:
    def __init__(self) -> None:
        self.controller = Node(*BROKER)
        self.nodes = [self.controller]
        self.cluster_id = CLUSTER_ID
        self.authorized_operations = None


class ConsumerGroupTopicPartitions:
    def __init__(self, group_id: str, topic_partitions: list[TopicPartition] | None = None) -> None:
        self.group_id = group_id
        self.topic_partitions = topic_partitions

    def __repr__(self) -> str:
        return f"ConsumerGroupTopicPartitions({self.group_id}, {self.topic_partitions})"


def _future(
    value: Any = None, error: tuple[str, str] | None = None
) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(_CODES[error[0]], error[1])))
    return future


_UNMODELLED: Final = frozenset(
    {"alter_configs", "incremental_alter_configs", "create_acls", "describe_acls",
     "delete_acls", "list_consumer_groups", "describe_consumer_groups",
     "delete_consumer_groups", "describe_user_scram_credentials",
     "alter_user_scram_credentials", "list_offsets", "delete_records",
     "elect_leaders", "set_sasl_credentials"}
)  # fmt: skip


class AdminClient:
    """``confluent_kafka.admin.AdminClient`` over the simulated cluster (module docstring)."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("logger", None)
        self._rt: Runtime = current("confluent_kafka.admin.AdminClient()")
        _config(conf, kwargs, "AdminClient")

    def _enter(self) -> Runtime:
        rt = self._rt
        rt.enter()
        return rt

    def create_topics(
        self, new_topics: list[NewTopic], **kwargs: Any
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        validate = bool(kwargs.get("validate_only", False))
        result = {}
        for new in new_topics:
            if not isinstance(new, NewTopic):
                raise TypeError("Expected list of NewTopic objects")
            if validate:
                error = (
                    None
                    if new.topic not in rt.broker.topics()
                    else ("TOPIC_ALREADY_EXISTS", f"Topic '{new.topic}' already exists.")
                )
            else:
                error = _create(rt, new.topic, new.num_partitions, new.replication_factor)
            result[new.topic] = _future(None, error)
        return result

    def delete_topics(
        self, topics: list[str], **kwargs: Any
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        return {t: _future(None, _delete(rt, t, "AdminClient.delete_topics")) for t in topics}

    def create_partitions(
        self, new_partitions: list[NewPartitions], **kwargs: Any
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        return {
            n.topic: _future(
                None,
                _add_partitions(rt, n.topic, n.new_total_count, "AdminClient.create_partitions"),
            )
            for n in new_partitions
        }

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return cluster_metadata(self._enter(), topic)

    def describe_topics(
        self, topics: TopicCollection, **kwargs: Any
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        known = rt.broker.topics()
        names = topics.topic_names if isinstance(topics, TopicCollection) else list(topics)
        return {
            t: _future(TopicDescription(t, known[t]))
            if t in known
            else _future(None, ("UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition"))
            for t in names
        }

    def describe_cluster(self, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self._enter()
        return _future(DescribeClusterResult())

    def describe_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, concurrent.futures.Future[Any]]:
        rt = self._enter()
        known = rt.broker.topics()
        result = {}
        for resource in resources:
            if resource.restype is ResourceType.TOPIC and resource.name not in known:
                result[resource] = _future(
                    None, ("UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition")
                )
            elif resource.restype in (ResourceType.TOPIC, ResourceType.BROKER):
                entries = {
                    k: ConfigEntry(k, v, ConfigSource.DEFAULT_CONFIG, True)
                    for k, v in _TOPIC_DEFAULTS.items()
                }
                result[resource] = _future(entries)
            else:
                raise NotModelled(f"AdminClient.describe_configs({resource!r})")
        return result

    def list_consumer_group_offsets(
        self, list_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        result = {}
        for request in list_consumer_group_offsets_request:
            pairs = (
                None
                if not request.topic_partitions
                else [(tp.topic, tp.partition) for tp in request.topic_partitions]
            )
            offsets = _group_offsets(rt, request.group_id, pairs)
            tps = [
                TopicPartition(t, p, OFFSET_INVALID if o is None else o)
                for (t, p), o in offsets.items()
            ]
            result[request.group_id] = _future(ConsumerGroupTopicPartitions(request.group_id, tps))
        return result

    def alter_consumer_group_offsets(
        self,
        alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        **kwargs: Any,
    ) -> dict[str, concurrent.futures.Future[Any]]:
        rt = self._enter()
        result = {}
        for request in alter_consumer_group_offsets_request:
            tps = list(request.topic_partitions or ())
            _alter_group_offsets(
                rt, request.group_id, {(tp.topic, tp.partition): tp.offset for tp in tps}
            )
            result[request.group_id] = _future(ConsumerGroupTopicPartitions(request.group_id, tps))
        return result

    def poll(self, timeout: float | None = None) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        if name in _UNMODELLED:
            raise NotModelled(f"AdminClient.{name}()")
        raise AttributeError(f"'AdminClient' object has no attribute {name!r}")
