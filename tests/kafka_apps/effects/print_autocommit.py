#!/usr/bin/env python
"""An order printer as found in tutorials: auto-commit on (the default), the effect is a print.

Auto-commit stores the offset of what poll() returned before the print happens, so a crash
between the two loses the order: at-least-once does not hold.
"""

import json
import sys

from confluent_kafka import Consumer

conf = {
    "bootstrap.servers": "localhost:9092",
    "group.id": "order-printer",
    "auto.offset.reset": "earliest",
}

consumer = Consumer(conf)
consumer.subscribe([sys.argv[1] if len(sys.argv) > 1 else "orders"])
print("order printer started")
try:
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            print(f"consumer error: {msg.error()}", file=sys.stderr)
            continue
        order = json.loads(msg.value())
        print(f"shipped order {order['order_id']} to {order['customer']}")
finally:
    consumer.close()
