"""Transactional read-process-write, after confluent-kafka-python's ``eos-transactions.py``:
outputs and the consumer's position are committed in one transaction.

``correct``: a stable ``transactional.id``; per message: ``begin_transaction()``, produce,
``send_offsets_to_transaction(consumer.position(...))``, ``commit_transaction()``; on a
fatal error (the producer was fenced by its successor) the process exits.

``unstable_transactional_id``: a new ``transactional.id`` on every start (a uuid), so a
successor never fences a zombie (faust#323): the zombie commits outputs the successor also
produces.

``offsets_of_the_message``: sends ``msg.offset()`` (the message itself) instead of the
position after it: each restart reprocesses the last committed message.

``output_outside_transaction``: writes the output with a second, non-transactional producer
and uses the transaction for the offsets only: a crash between them duplicates the output.
"""

import sys
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

INPUT, OUTPUT = "orders", "receipts"


def _run(transactional_id: str, *, offsets: str = "position", outside: bool = False) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "eos-receipts",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": "localhost:9092", "transactional.id": transactional_id}
    )
    plain = Producer({"bootstrap.servers": "localhost:9092"}) if outside else None
    producer.init_transactions()
    consumer.subscribe([INPUT])
    try:
        while True:
            msg = consumer.poll(timeout=1.0)
            if msg is None or msg.error():
                continue
            producer.begin_transaction()
            if plain is not None:
                plain.produce(OUTPUT, msg.value(), msg.key())
                plain.flush()
            else:
                producer.produce(OUTPUT, msg.value(), msg.key())
            if offsets == "position":
                position = consumer.position(consumer.assignment())
            else:
                position = [TopicPartition(msg.topic(), msg.partition(), msg.offset())]
            producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata())
            producer.commit_transaction()
    except KafkaException as exc:
        if exc.args[0].fatal():
            sys.exit(f"fatal: {exc}")  # fenced: a newer instance owns the transactional.id
        raise
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def correct() -> None:
    _run("receipts-eos")


def unstable_transactional_id() -> None:
    _run(f"receipts-eos-{uuid.uuid4()}")


def offsets_of_the_message() -> None:
    _run("receipts-eos", offsets="message")


def output_outside_transaction() -> None:
    _run("receipts-eos", outside=True)
