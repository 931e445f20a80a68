"""A foreachBatch job idempotent by the event's own id: each row is upserted by its key.

A batch replayed after a crash, a retried task and an event the upstream sent twice all
write the same row again, so the table holds each event once.
"""

import sqlite3
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object


def main():
    database = sys.argv[1] if len(sys.argv) > 1 else "/tmp/events.db"
    spark = SparkSession.builder.appName("events-upsert").getOrCreate()
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "localhost:9092")
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = events.select(
        get_json_object(col("value").cast("string"), "$.id").alias("id"),
        col("key").cast("string").alias("key"),
    )

    def upsert(batch_df, batch_id):
        rows = [(r["id"], r["key"]) for r in batch_df.collect()]
        with sqlite3.connect(database) as con:
            con.execute("CREATE TABLE IF NOT EXISTS events (id TEXT PRIMARY KEY, key TEXT)")
            con.executemany(
                "INSERT INTO events VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET key = excluded.key",
                rows,
            )

    (
        parsed.writeStream.foreachBatch(upsert)
        .option("checkpointLocation", "/tmp/checkpoints/events-upsert")
        .start()
        .awaitTermination()
    )


if __name__ == "__main__":
    main()
