"""kafka-python as its admin examples use it: create the output topic (it may exist),
then consume, forward with ``send().get()`` and commit."""

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

admin = KafkaAdminClient(bootstrap_servers="localhost:9092", client_id="setup")
try:  # noqa: SIM105 - as the examples write it
    admin.create_topics(
        new_topics=[NewTopic(name="receipts", num_partitions=1, replication_factor=1)],
        validate_only=False,
    )
except TopicAlreadyExistsError:
    pass
assert "orders" in admin.list_topics()
admin.close()

consumer = KafkaConsumer(
    "orders",
    bootstrap_servers="localhost:9092",
    group_id="forwarder",
    enable_auto_commit=False,
    auto_offset_reset="earliest",
)
producer = KafkaProducer(bootstrap_servers="localhost:9092")
try:
    for msg in consumer:
        producer.send("receipts", msg.value).get(timeout=10)
        consumer.commit()
finally:
    consumer.close()
