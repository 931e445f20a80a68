"""Orders into a SQLite table (kafka-python), the database path from the command line.

--commit-first commits the Kafka offset before the row's transaction commits (the bug);
without it the row is committed first, then the offset (at-least-once; an INSERT OR IGNORE on
the primary key makes the redelivered order harmless).
"""

import argparse
import json
import sqlite3

from kafka import KafkaConsumer

parser = argparse.ArgumentParser()
parser.add_argument("--db", default="orders.db")
parser.add_argument("--commit-first", action="store_true")
args = parser.parse_args()

db = sqlite3.connect(args.db)
db.execute("CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, amount INTEGER)")
db.commit()

consumer = KafkaConsumer(
    "orders",
    bootstrap_servers="localhost:9092",
    group_id="order-db",
    enable_auto_commit=False,
    auto_offset_reset="earliest",
)
for message in consumer:
    order = json.loads(message.value)
    db.execute(
        "INSERT OR IGNORE INTO orders (order_id, amount) VALUES (?, ?)",
        (order["order_id"], order["amount"]),
    )
    if args.commit_first:
        consumer.commit()
        db.commit()
    else:
        db.commit()
        consumer.commit()
