"""Transactional consume-transform-produce over a transactional input topic, written as
confluent-kafka-python programs are: the input's offsets have gaps (commit markers, aborted
records), which the harness's doubles make when the app runs with ``transactional_input``.

``correct``: consumes a batch, produces one receipt per order in a transaction and sends
each partition's ``last message offset + 1`` with it (librdkafka's own rule), so a restart
resumes after the last record done, whatever lies between the records.

``contiguous_count``: the same, but computes the position to commit as ``first offset +
number of messages`` ("offsets are consecutive"): across a marker that is below the batch's
last record, so a restart reprocesses records already committed (duplicates).
"""

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

INPUT, OUTPUT = "orders", "receipts"


def _clients() -> tuple[Consumer, Producer]:
    consumer = Consumer(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "gapped-receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": "localhost:9092", "transactional.id": "gapped-receipts"}
    )
    producer.init_transactions()
    return consumer, producer


def _loop(consumer: Consumer, producer: Producer, *, contiguous: bool) -> None:
    try:
        while True:
            batch = [m for m in consumer.consume(num_messages=3, timeout=1.0) if not m.error()]
            if not batch:
                continue
            producer.begin_transaction()
            positions: dict[int, int] = {}
            firsts: dict[int, tuple[int, int]] = {}
            for msg in batch:
                producer.produce(OUTPUT, msg.value(), msg.key())
                positions[msg.partition()] = msg.offset() + 1
                first, count = firsts.get(msg.partition(), (msg.offset(), 0))
                firsts[msg.partition()] = (first, count + 1)
            if contiguous:  # "offsets are consecutive": first + count is the next one
                positions = {p: first + count for p, (first, count) in firsts.items()}
            offsets = [TopicPartition(INPUT, p, o) for p, o in sorted(positions.items())]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
            producer.commit_transaction()
    except KafkaException as exc:
        if exc.args[0].fatal():
            raise SystemExit(f"fatal: {exc}") from None
        raise
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    consumer, producer = _clients()
    consumer.subscribe([INPUT])
    _loop(consumer, producer, contiguous=False)


def contiguous_count() -> None:
    consumer, producer = _clients()
    consumer.subscribe([INPUT])
    _loop(consumer, producer, contiguous=True)
