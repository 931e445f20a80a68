"""A printer with two independent bugs: the default auto.offset.reset (latest) skips what was
written before it first joined, and it commits each order before printing it, so a crash in
between loses the order."""

import json

from confluent_kafka import Consumer

consumer = Consumer(
    {"bootstrap.servers": "localhost:9092", "group.id": "printer", "enable.auto.commit": False}
)
consumer.subscribe(["orders"])
while True:
    msg = consumer.poll(1.0)
    if msg is None or msg.error():
        continue
    consumer.commit(message=msg, asynchronous=False)
    print("handled", json.loads(msg.value())["order_id"])
