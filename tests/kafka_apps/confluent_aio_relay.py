"""confluent_kafka.aio as its asyncio examples use it: ``await consumer.poll()``, ``await
producer.produce()`` returning a delivery future, then a commit of the message.
``--no-wait`` commits without awaiting the delivery (a lost-record bug)."""

import asyncio
import sys

from confluent_kafka.aio import AIOConsumer, AIOProducer


async def main(wait_for_delivery: bool) -> None:
    consumer = AIOConsumer(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "aio-relay",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = AIOProducer({"bootstrap.servers": "localhost:9092"})
    await consumer.subscribe(["orders"])
    try:
        while True:
            msg = await consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            delivery = await producer.produce("receipts", msg.value(), msg.key())
            if wait_for_delivery:
                await delivery
            await consumer.commit(message=msg, asynchronous=False)
    finally:
        await producer.close()
        await consumer.close()


if __name__ == "__main__":
    asyncio.run(main("--no-wait" not in sys.argv))
