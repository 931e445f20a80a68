"""Unchanged Kafka client code under the fault simulator.

:class:`KafkaApp` turns a script (``app.py`` with its arguments), a ``module:function`` or a
function written against ``confluent_kafka``, ``kafka`` (kafka-python) or ``aiokafka`` (asyncio
code runs its event loop inside the processor instance) into a processor for
:func:`harness.explore`: for each processor instance the code is imported afresh with the
harness's in-process doubles of those client packages in their place (the real packages are
never imported), every client call is a fault point, and what the application produces is
attributed to the input records it came from (:mod:`harness.kafka.lineage`). What is modelled,
and how, is in ``docs/kafka.md``; a call whose semantics are not modelled raises
:class:`NotModelled`, never approximates.

Importing :mod:`harness` does not import this package.
"""

from harness.kafka._broker import json_values, text_values
from harness.kafka._errors import NotModelled, OutsideRun
from harness.kafka.app import KafkaApp
from harness.kafka.lineage import RECORD_ID_HEADER, Effect, Produced, default_lineage

__all__ = [
    "RECORD_ID_HEADER",
    "Effect",
    "KafkaApp",
    "NotModelled",
    "OutsideRun",
    "Produced",
    "default_lineage",
    "json_values",
    "text_values",
]
