"""Small client programs for tests/test_kafka.py (plain client code, run under the doubles)."""

import base64
import json

from confluent_kafka import Consumer, Producer

CONF = {"bootstrap.servers": "b:9092", "group.id": "g", "auto.offset.reset": "earliest"}


def misspelt() -> None:
    Consumer({**CONF, "enable.auto.comit": False})


def bad_value() -> None:
    Consumer({**CONF, "auto.offset.reset": "oldest"})


def offsets_for_times() -> None:
    Consumer(CONF).offsets_for_times([])


def close_commits() -> None:
    """Auto-commit with an explicit store: the only commit happens at close() on shutdown."""
    consumer = Consumer({**CONF, "auto.commit.interval.ms": 0, "enable.auto.offset.store": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            producer.produce("receipts", msg.value())
            producer.flush()
            consumer.store_offsets(msg)
    finally:
        consumer.close()


def _transform(encode) -> None:
    consumer = Consumer({**CONF, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        producer.produce("receipts", encode(msg.value()))
        producer.flush()
        consumer.commit(msg, asynchronous=False)


def base64_values() -> None:
    _transform(base64.b64encode)


def upper_values() -> None:
    _transform(bytes.upper)


def counts_only() -> None:
    _transform(lambda value: json.dumps({"value": json.loads(value)["value"]}).encode())


def not_idempotent() -> None:
    _transform(lambda value: value)


def eof_then_exit() -> None:
    """Reads to the end of the partition, then exits (a batch job)."""
    consumer = Consumer({**CONF, "enable.partition.eof": True, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            break
        producer.produce("receipts", msg.value())
        producer.flush()
        consumer.commit(msg, asynchronous=False)
    consumer.close()


def kafka_python_misspelt() -> None:
    from kafka import KafkaConsumer

    KafkaConsumer("orders", group_id="g", enable_auto_comit=False)


def copy_headers() -> None:
    """Forward each message with its headers (whatever its value looks like)."""
    consumer = Consumer({**CONF, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        producer.produce("receipts", b"receipt", headers=msg.headers())
        producer.flush()
        consumer.commit(msg, asynchronous=False)


def seek_back_once() -> None:
    """Processes a message, then, as an application retrying a failed batch does, seeks
    back to offset 0 once and reads it again; a message already produced is not produced
    again (its offset is remembered), so the re-read leaves no duplicate."""
    from confluent_kafka import TopicPartition

    consumer = Consumer({**CONF, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    done: set[int] = set()
    rewound = False
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        if msg.offset() not in done:
            producer.produce("receipts", msg.value())
            producer.flush()
            done.add(msg.offset())
        consumer.commit(msg, asynchronous=False)
        if not rewound:
            rewound = True
            consumer.seek(TopicPartition("orders", msg.partition(), 0))


def _resubscribing(commit_first: bool) -> None:
    """Processes a message, then leaves the group and joins it again once (a rebalance:
    its partition revoked, then assigned back), resuming from the committed offset. With
    ``commit_first`` it commits each message before the rebalance; without, the message it
    processed last is read, and produced, again."""
    consumer = Consumer({**CONF, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": "b:9092"})
    consumer.subscribe(["orders"])
    rejoined = False
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        producer.produce("receipts", msg.value())
        producer.flush()
        if commit_first or rejoined:
            consumer.commit(msg, asynchronous=False)
        if not rejoined:
            rejoined = True
            consumer.unsubscribe()
            consumer.subscribe(["orders"])


def resubscribe_committed() -> None:
    _resubscribing(commit_first=True)


def resubscribe_uncommitted() -> None:
    _resubscribing(commit_first=False)
