"""aiokafka's README consumer turned relay: read, forward with send_and_wait, then commit.

Written as aiokafka's examples are: ``asyncio.run(main())``, ``async for msg in consumer``,
manual commits. ``--commit-first`` commits before forwarding (a lost-record bug);
``--auto-commit`` leaves committing to aiokafka's background task (the same bug, by default
configuration).
"""

import argparse
import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def relay(args: argparse.Namespace) -> None:
    consumer = AIOKafkaConsumer(
        args.input,
        bootstrap_servers=args.brokers,
        group_id="relay",
        auto_offset_reset="earliest",
        enable_auto_commit=args.auto_commit,
    )
    producer = AIOKafkaProducer(bootstrap_servers=args.brokers)
    await consumer.start()
    await producer.start()
    try:
        async for msg in consumer:
            if args.commit_first and not args.auto_commit:
                await consumer.commit()
            await producer.send_and_wait(args.output, msg.value, key=msg.key)
            if not args.commit_first and not args.auto_commit:
                await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", default="localhost:9092")
    parser.add_argument("--input", default="orders")
    parser.add_argument("--output", default="receipts")
    parser.add_argument("--commit-first", action="store_true")
    parser.add_argument("--auto-commit", action="store_true")
    asyncio.run(relay(parser.parse_args()))
