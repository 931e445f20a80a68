"""Synchronous manual commits (``enable.auto.commit=false``), the pattern of Confluent's
"at-least-once" consumer guide.

``correct``: produce, ``flush()`` (the output is delivered), then
``commit(message=msg, asynchronous=False)``.

``commit_before_processing``: commits the message first, then produces it: a crash in
between loses it.

``commit_before_delivery``: produces, commits, and flushes only every few messages: the
commit can land while the output still sits in the producer's queue, and a crash loses it.
"""

from confluent_kafka import Consumer, Producer

INPUT, OUTPUT = "orders", "receipts"
CONF = {
    "bootstrap.servers": "localhost:9092",
    "group.id": "receipts",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def _loop(handle) -> None:
    consumer = Consumer(CONF)
    producer = Producer({"bootstrap.servers": "localhost:9092"})
    consumer.subscribe([INPUT])
    try:
        count = 0
        while True:
            msg = consumer.poll(timeout=1.0)
            if msg is None or msg.error():
                continue
            count += 1
            handle(consumer, producer, msg, count)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    def handle(consumer, producer, msg, count):
        producer.produce(OUTPUT, msg.value(), msg.key())
        producer.flush()
        consumer.commit(message=msg, asynchronous=False)

    _loop(handle)


def commit_before_processing() -> None:
    def handle(consumer, producer, msg, count):
        consumer.commit(message=msg, asynchronous=False)
        producer.produce(OUTPUT, msg.value(), msg.key())
        producer.flush()

    _loop(handle)


def commit_before_delivery() -> None:
    def handle(consumer, producer, msg, count):
        producer.produce(OUTPUT, msg.value(), msg.key())
        consumer.commit(message=msg, asynchronous=False)
        if count % 3 == 0:
            producer.flush()

    _loop(handle)
