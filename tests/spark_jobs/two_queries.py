"""Two queries of one job, as real jobs start them: the events to the console for a look,
and upper-cased to a Kafka topic, then ``spark.streams.awaitAnyTermination()``.

The harness runs one streaming query per job: the second ``start()`` is refused in one line
that names both queries and what is supported.
"""

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, upper

spark = SparkSession.builder.appName("TwoQueries").getOrCreate()

events = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", "broker:9092")
    .option("subscribe", "events")
    .option("startingOffsets", "earliest")
    .load()
)

console = (
    events.selectExpr("CAST(value AS STRING) AS value")
    .writeStream.format("console")
    .option("checkpointLocation", "/tmp/checkpoints/two-queries-console")
    .start()
)
upper_cased = (
    events.select(col("key"), upper(col("value").cast("string")).alias("value"))
    .writeStream.format("kafka")
    .option("kafka.bootstrap.servers", "broker:9092")
    .option("topic", "upper")
    .option("checkpointLocation", "/tmp/checkpoints/two-queries-upper")
    .queryName("upper")
    .start()
)
spark.streams.awaitAnyTermination()
