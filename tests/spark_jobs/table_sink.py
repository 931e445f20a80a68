"""A job writing its stream to a table, as the Structured Streaming guide shows it:
``writeStream.toTable(...)`` with a checkpoint, exactly-once through the file sink's log.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object


def main():
    table = sys.argv[1] if len(sys.argv) > 1 else "events"
    spark = SparkSession.builder.appName("events-to-table").getOrCreate()
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
    query = parsed.writeStream.option(
        "checkpointLocation", "/tmp/checkpoints/events-to-table"
    ).toTable(table)
    query.awaitTermination()


if __name__ == "__main__":
    main()
