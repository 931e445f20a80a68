"""The ``confluent_kafka`` double: ``Consumer``, ``Producer``, ``Message``, ``TopicPartition``,
``KafkaError``, ``KafkaException`` and the ``OFFSET_*`` constants, over the simulated cluster.

Semantics follow librdkafka's documentation (``CONFIGURATION.md``, ``rdkafka.h``):

* ``enable.auto.offset.store`` (default true): ``poll()`` stores the offset after the message
  it returns; ``store_offsets()`` stores explicitly (and is refused while the automatic store
  is on).
* ``enable.auto.commit`` (default true): the stored offsets are committed by a background
  timer every ``auto.commit.interval.ms``; the schedule's ``Tick`` is that timer firing, at
  any fault point. ``close()`` commits them too. So auto-commit with the automatic store
  commits a message's offset as soon as ``poll()`` returned it: before it is processed.
* ``commit()`` commits the stored offsets, ``commit(message=m)`` ``m.offset() + 1``,
  ``commit(offsets=[...])`` what it is given (the next offset to read). The default is
  ``asynchronous=True``: the request is queued and lands when the background timer fires or
  at the consumer's next call, whichever comes first; a crash before that loses it.
* ``auto.offset.reset`` earliest/latest/error applies when the group has no committed offset
  or the position is out of range (retention truncated it).
* ``enable.partition.eof`` delivers one ``_PARTITION_EOF`` error message each time a
  partition's end is reached. ``isolation.level``: input topics hold no transactional
  records unless the app runs with ``transactional_input`` (then both levels step over
  the markers and aborted records that take offsets: read_uncommitted is not modelled
  apart), so both levels read the same.
* Producer: ``produce()`` queues; the queue is sent when the background timer fires,
  at ``poll()``/``flush()``; delivery callbacks are served by ``poll()``/``flush()``. A lost
  acknowledgement (``LoseAck``) makes the client resend: without ``enable.idempotence`` the
  broker appends the batch twice.
* Transactions: ``init_transactions()`` bumps the epoch of its ``transactional.id`` and fences
  the previous producer with that id (its next transactional call raises a fatal
  ``_FENCED`` error; its open transaction is aborted). Outputs of a transaction are visible
  (to the read_committed observer the checker is) only when it commits, atomically with the
  offsets given to ``send_offsets_to_transaction()``. The consumer group's generation is not
  checked (Kafka before KIP-447): only ``transactional.id`` fences a zombie.

Every call that talks to the cluster is a fault point. A ``poll()`` with nothing to return
returns ``None`` once, then *parks* until input arrives: a ``while True: poll()`` loop waits
instead of spinning, and when a settled run ends it is shut down with ``KeyboardInterrupt``
raised from that ``poll()`` (or the application's own SIGINT/SIGTERM handler is called and
``poll()`` returns ``None``), so its ``finally: consumer.close()`` runs.
"""

from harness.kafka._confluent_base import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    ConsumerGroupMetadata,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
    libversion,
    version,
)
from harness.kafka._consumer import Consumer
from harness.kafka._producer import Producer

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "Consumer",
    "ConsumerGroupMetadata",
    "KafkaError",
    "KafkaException",
    "Message",
    "Producer",
    "TopicPartition",
    "libversion",
    "version",
]
