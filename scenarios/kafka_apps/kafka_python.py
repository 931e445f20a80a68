"""A kafka-python consumer, as its README teaches (``for message in consumer``).

``correct``: ``enable_auto_commit=False``; each record's output is sent and waited for
(``future.get()``), then ``consumer.commit()``.

``commit_before_send``: commits, then sends the output: a crash in between loses it.

``auto_commit_fire_and_forget``: auto-commit with ``producer.send()`` never waited for: the
next iteration's auto-commit can pass a record whose output still sits in the producer's
buffer, and a crash loses it.
"""

from kafka import KafkaConsumer, KafkaProducer

INPUT, OUTPUT = "orders", "receipts"


def _consumer(**extra) -> KafkaConsumer:
    return KafkaConsumer(
        INPUT,
        bootstrap_servers="localhost:9092",
        group_id="receipts",
        auto_offset_reset="earliest",
        **extra,
    )


def correct() -> None:
    consumer = _consumer(enable_auto_commit=False)
    producer = KafkaProducer(bootstrap_servers="localhost:9092")
    for message in consumer:
        producer.send(OUTPUT, key=message.key, value=message.value).get(timeout=10)
        consumer.commit()


def commit_before_send() -> None:
    consumer = _consumer(enable_auto_commit=False)
    producer = KafkaProducer(bootstrap_servers="localhost:9092")
    for message in consumer:
        consumer.commit()
        producer.send(OUTPUT, key=message.key, value=message.value).get(timeout=10)


def auto_commit_fire_and_forget() -> None:
    consumer = _consumer(enable_auto_commit=True, auto_commit_interval_ms=1000)
    producer = KafkaProducer(bootstrap_servers="localhost:9092", linger_ms=50)
    for message in consumer:
        producer.send(OUTPUT, key=message.key, value=message.value)
