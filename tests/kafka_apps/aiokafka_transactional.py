"""aiokafka's transactional consume-process-produce example: ``getmany`` a batch, send the
results and the batch's next offsets in one transaction (``async with
producer.transaction()``, ``send_offsets_to_transaction``). ``--random-id`` gives every
process a fresh ``transactional_id``, so a zombie is never fenced (a duplicate under
exactly-once).
"""

import argparse
import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

GROUP = "tx-relay"


async def main(args: argparse.Namespace) -> None:
    consumer = AIOKafkaConsumer(
        args.input,
        bootstrap_servers=args.brokers,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    tid = f"tx-relay-{uuid.uuid4()}" if args.random_id else "tx-relay-0"
    producer = AIOKafkaProducer(bootstrap_servers=args.brokers, transactional_id=tid)
    await consumer.start()
    await producer.start()
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1000)
            if not batch:
                continue
            async with producer.transaction():
                offsets = {}
                for tp, msgs in batch.items():
                    for msg in msgs:
                        await producer.send(args.output, value=msg.value.upper(), key=msg.key)
                    offsets[tp] = msgs[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, GROUP)
    finally:
        await producer.stop()
        await consumer.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", default="localhost:9092")
    parser.add_argument("--input", default="orders")
    parser.add_argument("--output", default="receipts")
    parser.add_argument("--random-id", action="store_true")
    asyncio.run(main(parser.parse_args()))
