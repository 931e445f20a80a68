"""aiokafka's older README style: a module-level ``loop = asyncio.get_event_loop()`` passed to
the clients, and ``loop.run_until_complete(consume())``."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

loop = asyncio.get_event_loop()


async def consume():
    consumer = AIOKafkaConsumer(
        "orders",
        loop=loop,
        bootstrap_servers="localhost:9092",
        group_id="my-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(loop=loop, bootstrap_servers="localhost:9092")
    await consumer.start()
    await producer.start()
    try:
        async for msg in consumer:
            await producer.send_and_wait("receipts", msg.value)
            await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


loop.run_until_complete(consume())
