"""A foreachBatch job made idempotent by the batch id: a replayed batch replaces its rows.

Each batch's rows go to SQLite in one transaction that first deletes whatever an earlier
attempt of the same batch id wrote.
"""

import sqlite3
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object


def write_batch_to(database):
    def write_batch(batch_df, batch_id):
        rows = [(batch_id, r["id"], r["key"]) for r in batch_df.collect()]
        con = sqlite3.connect(database)
        with con:
            con.execute("CREATE TABLE IF NOT EXISTS events (batch INTEGER, id TEXT, key TEXT)")
            con.execute("DELETE FROM events WHERE batch = ?", (batch_id,))
            con.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        con.close()

    return write_batch


def main():
    database = sys.argv[1] if len(sys.argv) > 1 else "/tmp/events.db"
    spark = SparkSession.builder.appName("events-idempotent").getOrCreate()
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
    (
        parsed.writeStream.foreachBatch(write_batch_to(database))
        .option("checkpointLocation", "/tmp/checkpoints/events-idempotent")
        .start()
        .awaitTermination()
    )


if __name__ == "__main__":
    main()
