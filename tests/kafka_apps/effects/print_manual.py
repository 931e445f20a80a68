#!/usr/bin/env python
"""The same printer done right: auto-commit off, commit after the print."""

import json
import sys

from confluent_kafka import Consumer

consumer = Consumer(
    {
        "bootstrap.servers": "localhost:9092",
        "group.id": "order-printer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
)
consumer.subscribe([sys.argv[1] if len(sys.argv) > 1 else "orders"])
try:
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        order = json.loads(msg.value())
        print(f"shipped order {order['order_id']} to {order['customer']}", flush=True)
        consumer.commit(message=msg, asynchronous=False)
finally:
    consumer.close()
