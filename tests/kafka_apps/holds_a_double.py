"""A module an application imports during a run: it holds the run's ``confluent_kafka``
double, so the harness forgets it when the run ends (tests/test_kafka_groups.py)."""

import confluent_kafka

HELD = confluent_kafka.Consumer
