"""Kafka client applications, written as the clients' documentation teaches (plain
``confluent_kafka`` / ``kafka`` code, no harness imports). They are run by
``scenarios/kafka_clients.py`` under the harness's client doubles; nothing imports them
directly, so the real client packages are never needed.
"""
