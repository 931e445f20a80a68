"""Asynchronous commits: ``commit(asynchronous=True)`` returns at once and the commit lands
later, when the client's background thread gets to it.

``correct``: produce, ``flush()``, then ``commit(asynchronous=True)``: a commit lost in a
crash only makes the restart read the message again (at-least-once allows it).

``commit_racing_the_output``: commits asynchronously as soon as the message is polled,
counting on the commit landing after the output is delivered; it can land first, and a crash
then loses the message.
"""

from confluent_kafka import Consumer, KafkaException, Producer

INPUT, OUTPUT = "orders", "receipts"


def _run(early: bool) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": "localhost:9092"})
    consumer.subscribe([INPUT])
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if early:
                consumer.commit(message=msg, asynchronous=True)
            producer.produce(OUTPUT, value=msg.value(), key=msg.key())
            producer.flush()
            if not early:
                consumer.commit(asynchronous=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    _run(early=False)


def commit_racing_the_output() -> None:
    _run(early=True)
