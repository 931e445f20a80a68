"""An aiokafka consumer that sleeps as services do: a back-off when idle, a pause after each
record. The first argument names a file where it writes how far its loop's clock moved
during a 30 s sleep, and how far real time did."""

import asyncio
import json
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def main(report):
    consumer = AIOKafkaConsumer(
        "orders", group_id="sleepy", enable_auto_commit=False, auto_offset_reset="earliest"
    )
    producer = AIOKafkaProducer()
    await consumer.start()
    await producer.start()
    loop = asyncio.get_running_loop()
    started = (loop.time(), time.monotonic())
    await asyncio.sleep(30)
    with open(report, "w") as out:
        json.dump([loop.time() - started[0], time.monotonic() - started[1]], out)
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1000)
            if not batch:
                await asyncio.sleep(5)
                continue
            for msgs in batch.values():
                for msg in msgs:
                    await producer.send_and_wait("receipts", msg.value)
                    await asyncio.sleep(0.5)
            await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


asyncio.run(main(sys.argv[1]))
