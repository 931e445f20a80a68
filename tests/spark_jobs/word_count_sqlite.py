"""A running word count upserted into SQLite by foreachBatch (the shape of Spark's
structured_kafka_wordcount.py, with a real table instead of the console).

``--mode absolute`` (default): the stateful count (update mode) is written by key with the
batch id, so a replayed batch writes the same counts again. ``--mode increment``: each batch's
own counts are added to the table's, so a replayed batch is counted twice.
"""

import sqlite3
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, explode, split


def main(database="/var/lib/wordcount/counts.db", mode="absolute"):
    spark = SparkSession.builder.appName("StructuredKafkaWordCount").getOrCreate()
    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "localhost:9092")
        .option("subscribe", "words")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING)")
    )
    words = lines.select(explode(split(col("value"), " ")).alias("word"))

    def upsert(batch_df, batch_id):
        con = sqlite3.connect(database)
        with con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS counts "
                "(word TEXT PRIMARY KEY, n INTEGER, batch INTEGER)"
            )
            for row in batch_df.collect():
                if mode == "increment":
                    con.execute(
                        "INSERT INTO counts VALUES (?, ?, ?) ON CONFLICT(word) DO UPDATE "
                        "SET n = n + excluded.n, batch = excluded.batch",
                        (row["word"], row["count"], batch_id),
                    )
                else:
                    con.execute(
                        "INSERT INTO counts VALUES (?, ?, ?) ON CONFLICT(word) DO UPDATE "
                        "SET n = excluded.n, batch = excluded.batch "
                        "WHERE excluded.batch >= counts.batch",
                        (row["word"], row["count"], batch_id),
                    )
        con.close()

    if mode == "increment":
        counts = words
        writer = counts.writeStream.foreachBatch(
            lambda df, batch_id: upsert(df.groupBy("word").count(), batch_id)
        )
    else:
        counts = words.groupBy("word").count()
        writer = counts.writeStream.outputMode("update").foreachBatch(upsert)
    writer.option("checkpointLocation", "/var/lib/wordcount/checkpoint").start().awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:])
