"""foreachBatch writing each micro-batch to a Parquet directory, as tutorials show:
``fb_parquet.py append`` appends (``mode("append")``: a replayed batch adds its files again),
``fb_parquet.py by-batch`` overwrites the batch's own directory (``batch_id=<id>``)."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, from_json

mode = sys.argv[1] if len(sys.argv) > 1 else "append"
OUT = "/data/lake/events"

spark = SparkSession.builder.appName("events-to-parquet").getOrCreate()
schema = "id STRING, key STRING, value INT"
events = (
    spark.readStream.format("kafka")
    .options(**{"kafka.bootstrap.servers": "kafka:9092", "subscribe": "events"})
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", 2)
    .load()
    .select(from_json(col("value").cast("string"), schema).alias("e"))
    .select("e.*")
)


def write(batch_df, batch_id):
    if mode == "append":
        batch_df.write.mode("append").parquet(OUT)
    else:
        batch_df.write.mode("overwrite").parquet(f"{OUT}/batch_id={batch_id}")


(
    events.writeStream.foreachBatch(write)
    .option("checkpointLocation", "/data/checkpoints/events-to-parquet")
    .start()
    .awaitTermination()
)
