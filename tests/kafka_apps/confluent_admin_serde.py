"""Confluent's examples put together, as a service would: the admin client creates the
topics it needs (tolerating ``TOPIC_ALREADY_EXISTS``) and checks the cluster, then a
``DeserializingConsumer`` with string deserializers feeds a ``SerializingProducer``;
offsets are committed after the delivery (``--commit-first``: before it, a lost-record bug).
"""

import argparse
import json

from confluent_kafka import DeserializingConsumer, KafkaError, KafkaException, SerializingProducer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.serialization import StringDeserializer, StringSerializer


def ensure_topics(brokers: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": brokers})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=3) for t in topics]
    )
    for topic, future in futures.items():
        try:
            future.result()
            print(f"Topic {topic} created")
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    metadata = admin.list_topics(timeout=10)
    missing = [t for t in topics if t not in metadata.topics]
    if missing:
        raise SystemExit(f"topics missing: {missing}")


def main(args: argparse.Namespace) -> None:
    ensure_topics(args.brokers, [args.input, args.output, "audit-log"])
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": "enricher",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": StringDeserializer("utf_8"),
        }
    )
    producer = SerializingProducer(
        {
            "bootstrap.servers": args.brokers,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": StringSerializer("utf_8"),
        }
    )
    consumer.subscribe([args.input])
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            order = json.loads(msg.value())
            order["enriched"] = True
            if args.commit_first:
                consumer.commit(message=msg, asynchronous=False)
            producer.produce(args.output, key=msg.key(), value=json.dumps(order))
            producer.flush()
            if not args.commit_first:
                consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", dest="brokers", default="localhost:9092")
    parser.add_argument("-i", dest="input", default="orders")
    parser.add_argument("-o", dest="output", default="receipts")
    parser.add_argument("--commit-first", action="store_true")
    main(parser.parse_args())
