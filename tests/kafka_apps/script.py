"""A script as third-party examples are written: argparse, a main(), signal-free shutdown."""

import argparse

from confluent_kafka import Consumer, KafkaError, Producer


def main(args: argparse.Namespace) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
        }
    )
    producer = Producer({"bootstrap.servers": args.brokers})
    consumer.subscribe([args.input])
    try:
        while True:
            msg = consumer.poll(timeout=1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise SystemExit(str(msg.error()))
            print(f"{msg.topic()} [{msg.partition()}] @ {msg.offset()}")
            producer.produce(args.output, key=msg.key(), value=msg.value())
            producer.flush()
            consumer.store_offsets(msg)
    except KeyboardInterrupt:
        print("aborted by user")
    finally:
        consumer.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", dest="brokers", required=True)
    parser.add_argument("-g", dest="group", default="example")
    parser.add_argument("-t", dest="input", required=True)
    parser.add_argument("-o", dest="output", required=True)
    main(parser.parse_args())
