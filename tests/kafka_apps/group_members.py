"""Consumers that commit after their output, for the group generation check
(tests/test_kafka_groups.py): a ``subscribe()`` member of each client, and an ``assign()``
consumer, which is no member (its commits are a standalone consumer's)."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

CONF = {
    "bootstrap.servers": "b:9092",
    "group.id": "g",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def _confluent(consumer: Consumer) -> None:
    producer = Producer({"bootstrap.servers": "b:9092"})
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        producer.produce("receipts", msg.value())
        producer.flush()
        consumer.commit(message=msg, asynchronous=False)


def confluent_subscribe() -> None:
    consumer = Consumer(CONF)
    consumer.subscribe(["orders"])
    _confluent(consumer)


def confluent_assign() -> None:
    consumer = Consumer(CONF)
    consumer.assign([TopicPartition("orders", 0)])
    _confluent(consumer)


def confluent_subscribe_async_commits() -> None:
    """Asynchronous commits: a refused one reaches ``on_commit`` with its error."""
    errors = []
    consumer = Consumer({**CONF, "on_commit": lambda err, tps: errors.append(err)})
    consumer.subscribe(["orders"])
    producer = Producer({"bootstrap.servers": "b:9092"})
    while True:
        msg = consumer.poll(1.0)
        if errors and errors[-1] is not None:
            raise KafkaException(errors[-1])
        if msg is None or msg.error():
            continue
        producer.produce("receipts", msg.value())
        producer.flush()
        consumer.commit(message=msg)


def kafka_python_subscribe() -> None:
    consumer = KafkaConsumer(
        "orders", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    producer = KafkaProducer()
    for message in consumer:
        producer.send("receipts", message.value).get()
        consumer.commit()


def aiokafka_subscribe() -> None:
    async def main() -> None:
        consumer = AIOKafkaConsumer(
            "orders", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
        )
        producer = AIOKafkaProducer()
        await consumer.start()
        await producer.start()
        try:
            async for message in consumer:
                await producer.send_and_wait("receipts", message.value)
                await consumer.commit()
        finally:
            await producer.stop()
            await consumer.stop()

    asyncio.run(main())


def two_members() -> None:
    """Two subscribers of one group in one process: the first one's commit after the second
    joined is refused (``ILLEGAL_GENERATION``) until its next poll rejoins the group."""
    first, second = Consumer(CONF), Consumer(CONF)
    first.subscribe(["orders"])
    msg = None
    while msg is None or msg.error():
        msg = first.poll(1.0)
    second.subscribe(["orders"])
    second.poll(0)  # joins: a new generation
    try:
        first.commit(message=msg, asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].name() != "ILLEGAL_GENERATION":
            raise
    else:
        raise AssertionError("a commit of an old generation was accepted")
    first.poll(0)  # rejoins the current generation
    first.commit(message=msg, asynchronous=False)
    producer = Producer({"bootstrap.servers": "b:9092"})
    producer.produce("receipts", msg.value())
    producer.flush()


def imports_a_module_holding_a_double() -> None:
    """Imports a module during the run that keeps a double (forgotten afterwards)."""
    import importlib

    importlib.import_module("tests.kafka_apps.holds_a_double")
    confluent_subscribe()
