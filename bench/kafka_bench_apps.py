"""The consumers bench/bench_kafka.py runs under the client doubles that are not in
``scenarios/``: aiokafka's manual-commit relay, written as aiokafka's README writes it."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def _relay() -> None:
    consumer = AIOKafkaConsumer(
        "orders",
        bootstrap_servers="localhost:9092",
        group_id="receipts",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers="localhost:9092")
    await consumer.start()
    await producer.start()
    try:
        async for msg in consumer:
            await producer.send_and_wait("receipts", msg.value, key=msg.key)
            await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


def aiokafka_consumer() -> None:
    """``getone`` (``async for``), ``send_and_wait``, then ``commit()``: at-least-once."""
    asyncio.run(_relay())
