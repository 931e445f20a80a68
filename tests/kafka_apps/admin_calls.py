"""Admin and serialization calls whose answers tests/test_kafka_apis.py checks: the script
writes what it observed, as JSON, to the file named by its first argument."""

import asyncio
import json
import sys

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as ANewTopic
from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConsumerGroupTopicPartitions,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from confluent_kafka.serialization import (
    DoubleDeserializer,
    DoubleSerializer,
    IntegerSerializer,
    SerializationError,
    StringSerializer,
)
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import TopicAlreadyExistsError


def outcome(future):
    try:
        future.result()
        return "ok"
    except KafkaException as e:
        return e.args[0].name()


seen = {}
admin = AdminClient({"bootstrap.servers": "b:9092"})
created = admin.create_topics(
    [NewTopic("orders", 1, 1), NewTopic("dlq", 3, 3), NewTopic("bad name!", 1, 1)]
)
seen["create"] = {t: outcome(f) for t, f in created.items()}
seen["topics"] = {t: len(m.partitions) for t, m in admin.list_topics().topics.items()}
grown = admin.create_partitions([NewPartitions("dlq", 5)])
shrunk = admin.create_partitions([NewPartitions("dlq", 2)])
seen["partitions"] = [outcome(grown["dlq"]), outcome(shrunk["dlq"])]
described = admin.describe_topics(TopicCollection(["dlq", "nope"]))
seen["describe"] = [len(described["dlq"].result().partitions), outcome(described["nope"])]
configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
seen["cleanup.policy"] = next(iter(configs.values())).result()["cleanup.policy"].value
seen["delete"] = outcome(admin.delete_topics(["dlq"])["dlq"])
seen["after_delete"] = sorted(admin.list_topics().topics)
request = [ConsumerGroupTopicPartitions("g", [TopicPartition("orders", 0, 0)])]
admin.alter_consumer_group_offsets(request)["g"].result()
listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result()
seen["group_offsets"] = [(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions]
consumer = Consumer({"group.id": "g"})
seen["consumer_list_topics"] = sorted(consumer.list_topics("orders").topics)
missing = consumer.list_topics("nope").topics["nope"].error
seen["missing_topic"] = missing.name()
seen["int"] = list(IntegerSerializer()(7))
seen["double"] = DoubleDeserializer()(DoubleSerializer()(2.5))
try:
    StringSerializer()(42)
    seen["string_error"] = None
except SerializationError:
    seen["string_error"] = "SerializationError"
kadmin = KafkaAdminClient(bootstrap_servers="b:9092")
try:
    kadmin.create_topics([KNewTopic("receipts", 1, 1)])
    seen["kafka_python_exists"] = None
except TopicAlreadyExistsError:
    seen["kafka_python_exists"] = "TopicAlreadyExistsError"
kadmin.create_topics([KNewTopic("audit", 2, 1)])
seen["kafka_python_topics"] = sorted(kadmin.list_topics())
seen["kafka_python_describe"] = [len(d["partitions"]) for d in kadmin.describe_topics(["audit"])]
kconsumer = KafkaConsumer(bootstrap_servers="b:9092")
seen["kafka_python_consumer"] = [
    sorted(kconsumer.topics()),
    sorted(kconsumer.partitions_for_topic("audit")),
]


async def aiokafka_admin():
    client = AIOKafkaAdminClient(bootstrap_servers="b:9092")
    await client.start()
    try:
        response = await client.create_topics([ANewTopic("orders", 1, 1), ANewTopic("fresh", 2, 1)])
        return response.topic_errors, await client.list_topics()
    finally:
        await client.close()


seen["aiokafka_create"], seen["aiokafka_topics"] = asyncio.run(aiokafka_admin())
with open(sys.argv[1], "w") as out:
    json.dump(seen, out)
