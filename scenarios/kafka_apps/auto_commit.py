"""A consume-transform-produce loop with the client's default offset management.

``correct``: ``enable.auto.offset.store`` off; after the output is delivered (``flush()``)
the offset is stored with ``store_offsets()``, and the auto-commit timer commits only
stored offsets: at-least-once.

``commit_at_poll``: the defaults (auto-commit with the automatic offset store): ``poll()``
stores the offset before the message is processed, so an auto-commit between ``poll()`` and
``flush()`` followed by a crash loses the message (librdkafka#1122).

``store_before_produce``: stores the offset first, then produces: the same loss.
"""

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

INPUT, OUTPUT = "orders", "receipts"


def _run(conf: dict, *, store: str) -> None:
    consumer = Consumer(conf)
    producer = Producer({"bootstrap.servers": "localhost:9092"})
    consumer.subscribe([INPUT])
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            if store == "before":
                consumer.store_offsets(message=msg)
            producer.produce(OUTPUT, key=msg.key(), value=msg.value().upper())
            producer.flush()
            if store == "after":
                consumer.store_offsets(message=msg)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    _run(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
        },
        store="after",
    )


def commit_at_poll() -> None:
    _run(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "receipts",
            "auto.offset.reset": "earliest",
        },
        store="none",
    )


def store_before_produce() -> None:
    _run(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
        },
        store="before",
    )
