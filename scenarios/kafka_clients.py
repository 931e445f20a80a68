"""Kafka client applications, unchanged, under the simulator (issue 14).

Each scenario is one of the patterns the ``confluent_kafka`` / ``kafka-python``
documentation teaches, written as plain client code in ``scenarios/kafka_apps/`` and run by
:class:`harness.kafka.KafkaApp` with the harness's client doubles in place of the real
packages: a correct variant and the classic buggy ones (auto-commit at ``poll()`` before
processing, librdkafka#1122; an asynchronous commit racing the output; ``store_offsets``
before the side effect; an unstable ``transactional.id``, faust#323; offsets sent to the
transaction from the wrong position; output produced outside the transaction; a commit
before the producer's delivery). Input topic ``orders``, checked output topic
``receipts``; the default lineage attributes outputs (pass-through values).

Kafka never delivers a record twice within one consumer session, so the duplicate-delivery
fault is not part of these scenarios (the doubles ignore it).
"""

from __future__ import annotations

from harness import AnomalyKind, Fault, Guarantee, Scenario, Subject
from harness.faults import ALL_FAULTS
from harness.kafka import KafkaApp

__all__ = ["SCENARIOS"]

_FAULTS = ALL_FAULTS - {Fault.DUPLICATE}
_LOST = frozenset({AnomalyKind.LOST, AnomalyKind.OFFSET_AHEAD})
_DUPLICATE = frozenset({AnomalyKind.DUPLICATE})
# as in the other scenarios, a buggy variant is explored with the faults its bug needs (a
# bug that needs two faults in a narrow window is diluted by the others: docs/kafka.md)
_CRASH = frozenset({Fault.CRASH})
_CRASH_TICK = frozenset({Fault.CRASH, Fault.TICK})
_ZOMBIE = frozenset({Fault.ZOMBIE})


def _app(module: str, function: str) -> KafkaApp:
    return KafkaApp(
        f"harness.scenarios.kafka_apps.{module}:{function}",
        inputs=["orders"],
        outputs=["receipts"],
        name=f"{module}_{function}",
    )


auto_commit_correct = _app("auto_commit", "correct")
auto_commit_commit_at_poll = _app("auto_commit", "commit_at_poll")
auto_commit_store_before_produce = _app("auto_commit", "store_before_produce")
manual_commit_correct = _app("manual_commit", "correct")
manual_commit_commit_before_processing = _app("manual_commit", "commit_before_processing")
manual_commit_commit_before_delivery = _app("manual_commit", "commit_before_delivery")
async_commit_correct = _app("async_commit", "correct")
async_commit_commit_racing_the_output = _app("async_commit", "commit_racing_the_output")
store_offsets_correct = _app("store_offsets", "correct")
store_offsets_store_before_side_effect = _app("store_offsets", "store_before_side_effect")
transactional_correct = _app("transactional", "correct")
transactional_unstable_transactional_id = _app("transactional", "unstable_transactional_id")
transactional_offsets_of_the_message = _app("transactional", "offsets_of_the_message")
transactional_output_outside_transaction = _app("transactional", "output_outside_transaction")
kafka_python_correct = _app("kafka_python", "correct")
kafka_python_commit_before_send = _app("kafka_python", "commit_before_send")
kafka_python_auto_commit_fire_and_forget = _app("kafka_python", "auto_commit_fire_and_forget")


def _scenario(
    name: str,
    title: str,
    guarantee: Guarantee,
    variants: tuple[tuple[str, KafkaApp, frozenset[AnomalyKind], frozenset[Fault]], ...],
) -> Scenario:
    """A scenario of variants ``(name, app, expected anomalies, faults its bug needs)``; the
    first is the correct one, the twin of the others."""
    twin = variants[0][0]
    return Scenario(
        name=name,
        title=title,
        seed="kafka-client-documentation",
        variants=tuple(
            Subject(
                variant,
                app,
                guarantee,
                auto_commit_correct.topology,
                expected=expected,
                needs=needs,
                scope=_FAULTS,
                twin=twin if expected else None,
            )
            for variant, app, expected, needs in variants
        ),
    )


_NONE: frozenset[AnomalyKind] = frozenset()


ALO, EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
SCENARIOS = (
    _scenario(
        "kafka-client-auto-commit",
        "confluent_kafka auto-commit consumer (librdkafka#1122)",
        ALO,
        (
            ("correct", auto_commit_correct, _NONE, frozenset()),
            ("commit-at-poll", auto_commit_commit_at_poll, _LOST, _CRASH_TICK),
            ("store-before-produce", auto_commit_store_before_produce, _LOST, _CRASH_TICK),
        ),
    ),
    _scenario(
        "kafka-client-manual-commit",
        "confluent_kafka synchronous commit() after processing",
        ALO,
        (
            ("correct", manual_commit_correct, _NONE, frozenset()),
            ("commit-before-processing", manual_commit_commit_before_processing, _LOST, _CRASH),
            ("commit-before-delivery", manual_commit_commit_before_delivery, _LOST, _CRASH),
        ),
    ),
    _scenario(
        "kafka-client-async-commit",
        "confluent_kafka commit(asynchronous=True)",
        ALO,
        (
            ("correct", async_commit_correct, _NONE, frozenset()),
            ("commit-racing-the-output", async_commit_commit_racing_the_output, _LOST, _CRASH),
        ),
    ),
    _scenario(
        "kafka-client-store-offsets",
        "confluent_kafka store_offsets() after processing, auto-commit of stored offsets",
        ALO,
        (
            ("correct", store_offsets_correct, _NONE, frozenset()),
            (
                "store-before-side-effect",
                store_offsets_store_before_side_effect,
                _LOST,
                _CRASH_TICK,
            ),
        ),
    ),
    _scenario(
        "kafka-client-transactional",
        "confluent_kafka transactional read-process-write",
        EO,
        (
            ("correct", transactional_correct, _NONE, frozenset()),
            (
                "unstable-transactional-id",
                transactional_unstable_transactional_id,
                _DUPLICATE,
                _ZOMBIE,
            ),
            ("offsets-of-the-message", transactional_offsets_of_the_message, _DUPLICATE, _CRASH),
            (
                "output-outside-transaction",
                transactional_output_outside_transaction,
                _DUPLICATE,
                _CRASH,
            ),
        ),
    ),
    _scenario(
        "kafka-client-kafka-python",
        "kafka-python consumer loop",
        ALO,
        (
            ("correct", kafka_python_correct, _NONE, frozenset()),
            ("commit-before-send", kafka_python_commit_before_send, _LOST, _CRASH),
            (
                "auto-commit-fire-and-forget",
                kafka_python_auto_commit_fire_and_forget,
                _LOST,
                _CRASH_TICK,
            ),
        ),
    ),
)
