"""A running word count printed to the console, in the shape of Spark's
structured_kafka_wordcount.py example: ``console_wordcount.py <servers> <topics> [checkpoint]``.

Without a checkpoint (as the example runs) a restarted query starts over from
``startingOffsets`` (default ``latest``), so the counts lose what came before and while it was
down; with one, the complete-mode table is right after every restart.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import explode, split

if __name__ == "__main__":
    servers, topics = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.appName("ConsoleWordCount").getOrCreate()
    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topics)
        .load()
        .selectExpr("CAST(value AS STRING)")
    )
    words = lines.select(explode(split(lines.value, " ")).alias("word"))
    counts = words.groupBy("word").count()
    writer = counts.writeStream.outputMode("complete").format("console")
    if len(sys.argv) > 3:
        writer = writer.option("checkpointLocation", sys.argv[3])
    writer.start().awaitTermination()
