"""An asyncio service: it makes sure its output topic exists (``AIOKafkaAdminClient``,
tolerating ``TOPIC_ALREADY_EXISTS``), then a reader task puts records on a queue, a worker
task forwards each one and commits its offset, ``loop.add_signal_handler`` stops both on
SIGTERM and the clients are stopped in ``finally``. ``--ack-early`` makes the reader commit
as it queues (the work may be lost in a crash).
"""

import asyncio
import signal
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

TOPIC_ALREADY_EXISTS = 36


async def ensure_output_topic():
    admin = AIOKafkaAdminClient(bootstrap_servers="localhost:9092")
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic("receipts", 1, 1)])
        for topic, code, message in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise SystemExit(f"cannot create {topic}: {message}")
    finally:
        await admin.close()


async def reader(consumer, queue, ack_early):
    async for msg in consumer:
        if ack_early:
            await consumer.commit({TopicPartition(msg.topic, msg.partition): msg.offset + 1})
        await queue.put(msg)


async def worker(consumer, producer, queue, ack_early):
    while True:
        msg = await queue.get()
        await producer.send_and_wait("receipts", msg.value)
        if not ack_early:
            await consumer.commit({TopicPartition(msg.topic, msg.partition): msg.offset + 1})
        queue.task_done()


async def main():
    ack_early = "--ack-early" in sys.argv
    await ensure_output_topic()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    consumer = AIOKafkaConsumer(
        "orders", group_id="workers", enable_auto_commit=False, auto_offset_reset="earliest"
    )
    producer = AIOKafkaProducer(enable_idempotence=True)
    await consumer.start()
    await producer.start()
    queue = asyncio.Queue(maxsize=2)
    tasks = [
        asyncio.create_task(reader(consumer, queue, ack_early)),
        asyncio.create_task(worker(consumer, producer, queue, ack_early)),
    ]
    try:
        await stop.wait()
        await queue.join()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await producer.stop()
        await consumer.stop()


asyncio.run(main())
