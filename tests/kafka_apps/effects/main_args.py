"""A consumer whose entry point is a function reading its options from sys.argv."""

import argparse

from confluent_kafka import Consumer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topic", required=True)
    parser.add_argument("--prefix", default="done")
    args = parser.parse_args()
    consumer = Consumer(
        {
            "bootstrap.servers": "k:9092",
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([args.topic])
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        print(args.prefix, msg.value().decode())
        consumer.commit(msg, asynchronous=False)
