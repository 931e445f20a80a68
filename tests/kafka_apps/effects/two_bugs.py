"""A printer with two independent bugs: auto.offset.reset=latest (it skips what was written
before it first joined) and auto-commit before the print (a crash loses the order)."""

import json

from confluent_kafka import Consumer

consumer = Consumer({"bootstrap.servers": "localhost:9092", "group.id": "printer"})
consumer.subscribe(["orders"])
while True:
    msg = consumer.poll(1.0)
    if msg is None or msg.error():
        continue
    print("handled", json.loads(msg.value())["order_id"])
