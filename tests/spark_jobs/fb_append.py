"""A tutorial-style foreachBatch job: each micro-batch's events appended to SQLite.

Not idempotent: a batch replayed after a crash between its write and the checkpoint's
commit is inserted twice.
"""

import sqlite3
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object


def main() -> None:
    database = sys.argv[1] if len(sys.argv) > 1 else "/tmp/events.db"
    spark = SparkSession.builder.appName("events-to-sqlite").getOrCreate()
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

    def write_batch(batch_df, batch_id):
        rows = [(r["id"], r["key"]) for r in batch_df.collect()]
        con = sqlite3.connect(database)
        con.execute("CREATE TABLE IF NOT EXISTS events (id TEXT, key TEXT)")
        con.executemany("INSERT INTO events VALUES (?, ?)", rows)
        con.commit()
        con.close()

    query = (
        parsed.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", "/tmp/checkpoints/events-to-sqlite")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
