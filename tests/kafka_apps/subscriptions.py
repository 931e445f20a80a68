"""Consumers for tests/test_kafka_hints.py: regex subscriptions of each client, and a
consumer that reads a field of its own payload shape."""

import asyncio
import json
import sys

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer
from kafka import KafkaConsumer

CONF = {"bootstrap.servers": "b:9092", "group.id": "g", "auto.offset.reset": "earliest"}


def _pattern() -> str:
    return sys.argv[1]  # the tests always give it


def confluent_regex() -> None:
    consumer = Consumer(CONF)
    consumer.subscribe([_pattern()])
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        print("handled", msg.value().decode(), flush=True)


def kafka_python_regex() -> None:
    consumer = KafkaConsumer(group_id="g", auto_offset_reset="earliest")
    consumer.subscribe(pattern=_pattern().lstrip("^"))
    for message in consumer:
        print("handled", message.value.decode(), flush=True)


def aiokafka_regex() -> None:
    async def main() -> None:
        consumer = AIOKafkaConsumer(group_id="g", auto_offset_reset="earliest")
        consumer.subscribe(pattern=_pattern().lstrip("^"))
        await consumer.start()
        try:
            async for message in consumer:
                print("handled", message.value.decode(), flush=True)
        finally:
            await consumer.stop()

    asyncio.run(main())


def order_ids() -> None:
    """Reads its own payload's ``order_id``: a KeyError on the default payload."""
    consumer = Consumer(CONF)
    consumer.subscribe(["orders"])
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        print("handled", json.loads(msg.value())["order_id"], flush=True)
