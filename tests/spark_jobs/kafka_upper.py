"""Kafka to Kafka, as Spark's Kafka integration guide writes it: upper-case each value.

Spark's Kafka sink is at-least-once: a batch replayed after a crash writes its messages again.
"""

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, upper

spark = SparkSession.builder.appName("KafkaUpper").getOrCreate()

lines = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", "broker:9092")
    .option("subscribePattern", "ev.*")
    .option("startingOffsets", "earliest")
    .option("failOnDataLoss", "false")
    .load()
)

out = lines.select(col("key"), upper(col("value").cast("string")).alias("value"))

query = (
    out.writeStream.format("kafka")
    .option("kafka.bootstrap.servers", "broker:9092")
    .option("topic", "upper")
    .option("checkpointLocation", "/tmp/checkpoints/kafka-upper")
    .outputMode("append")
    .trigger(processingTime="5 seconds")
    .start()
)
query.awaitTermination()
