"""Events from Kafka to a Parquet file sink with a checkpoint (exactly-once for readers of
the sink's metadata log). ``--drop-key KEY`` plants a filter bug: that key's events vanish."""

import argparse

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, get_json_object

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="/data/events-parquet")
parser.add_argument("--checkpoint", default="/data/checkpoints/events-parquet")
parser.add_argument("--drop-key", default=None)
args = parser.parse_args()

spark = (
    SparkSession.builder.appName("events-parquet")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

raw = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", "localhost:9092")
    .option("subscribe", "events")
    .option("startingOffsets", "earliest")
    .load()
)
events = raw.select(
    get_json_object(col("value").cast("string"), "$.id").alias("id"),
    get_json_object(col("value").cast("string"), "$.key").alias("key"),
    col("offset"),
)
if args.drop_key:
    events = events.filter(col("key") != args.drop_key)

(
    events.writeStream.format("parquet")
    .option("path", args.out)
    .option("checkpointLocation", args.checkpoint)
    .start()
    .awaitTermination()
)
