"""Orders appended to a CSV file whose path comes from the environment (ORDERS_CSV).

The file is opened once and written through Python's buffer; BUGGY_FLUSH=1 commits the
offset without flushing the file first, so a crash loses the buffered lines.
"""

import json
import os

from confluent_kafka import Consumer

path = os.environ.get("ORDERS_CSV", "/var/lib/orders/orders.csv")
flush_first = os.environ.get("BUGGY_FLUSH") != "1"
consumer = Consumer(
    {
        "bootstrap.servers": "kafka:9092",
        "group.id": "csv-writer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe(["orders"])
with open(path, "a", encoding="utf-8") as out:
    while True:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        order = json.loads(msg.value())
        out.write(f"{order['order_id']},{order['amount']}\n")
        if flush_first:
            out.flush()
        consumer.commit(msg, asynchronous=False)
