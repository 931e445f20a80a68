"""A foreachBatch job that saves round trips: rows are buffered in the driver's memory and
written to SQLite once enough have gathered, and whatever is left when the query ends.

The checkpoint commits a batch as soon as the function returns, so rows still in the buffer
are acknowledged to Spark but written nowhere: a driver that dies after the commit loses them.
"""

import sqlite3
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object

DATABASE = sys.argv[1] if len(sys.argv) > 1 else "/srv/events.db"
FLUSH_EVERY = 4
buffer = []


def flush():
    con = sqlite3.connect(DATABASE)
    with con:
        con.execute("CREATE TABLE IF NOT EXISTS events (id TEXT, key TEXT)")
        con.executemany("INSERT INTO events VALUES (?, ?)", buffer)
    con.close()
    buffer.clear()


def write_batch(batch_df, batch_id):
    buffer.extend((r["id"], r["key"]) for r in batch_df.collect())
    if len(buffer) >= FLUSH_EVERY:
        flush()


spark = SparkSession.builder.appName("buffered-events").getOrCreate()
events = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", "localhost:9092")
    .option("subscribe", "events")
    .option("startingOffsets", "earliest")
    .load()
    .select(
        get_json_object(col("value").cast("string"), "$.id").alias("id"),
        col("key").cast("string").alias("key"),
    )
)
query = (
    events.writeStream.foreachBatch(write_batch)
    .option("checkpointLocation", "/srv/checkpoints/buffered-events")
    .start()
)
query.awaitTermination()
flush()
