"""Batches with explicit offset storage and auto-commit of the stored offsets (the pattern of
librdkafka's ``enable.auto.offset.store=false`` documentation).

``correct``: ``consume()`` a batch, produce it, ``flush()``, then ``store_offsets()`` for each
message; the auto-commit timer commits only what was stored.

``store_before_side_effect``: stores each message's offset as it is consumed, before the
batch's output is delivered.
"""

from confluent_kafka import Consumer, Producer

INPUT, OUTPUT = "orders", "receipts"


def _run(store_first: bool) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "enable.auto.offset.store": False,
        }
    )
    producer = Producer({"bootstrap.servers": "localhost:9092", "linger.ms": 100})
    consumer.subscribe([INPUT])
    try:
        while True:
            batch = [m for m in consumer.consume(num_messages=3, timeout=1.0) if not m.error()]
            if store_first:
                for msg in batch:
                    consumer.store_offsets(message=msg)
            for msg in batch:
                producer.produce(OUTPUT, msg.value(), msg.key())
            producer.flush()
            if not store_first:
                for msg in batch:
                    consumer.store_offsets(message=msg)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    _run(store_first=False)


def store_before_side_effect() -> None:
    _run(store_first=True)
