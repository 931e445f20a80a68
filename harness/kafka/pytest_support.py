"""The ``harness_kafka`` pytest fixture: explore an unchanged Kafka client application.

.. code-block:: python

    def test_my_consumer(harness_kafka):
        harness_kafka(
            "myapp/consumer.py",                 # or "myapp.consumer:main", or a function
            guarantee="at-least-once",
            inputs=["orders"],
            outputs=["receipts"],
            argv=["--brokers", "localhost:9092"],  # a script's arguments
        )

``outputs`` may be empty when ``effects`` (:mod:`harness.effects`) are checked instead;
``encode``, ``env``, ``backlog_owed`` and ``transactional_input`` are
:class:`~harness.kafka.KafkaApp`'s;
``max_problems`` (default 5) is how many distinct problems to look for.

It builds a :class:`~harness.kafka.KafkaApp` and calls the ``harness_explore`` fixture with
it, so the ``harness`` marker, the ``--harness-*`` options, report files and
``--harness-replay`` apply unchanged. The failure report says how outputs were attributed.
Loaded only when a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, final

from harness.effects import EffectSource
from harness.engine import CounterexampleFound, Exploration
from harness.faults import ALL_FAULTS, Fault
from harness.kafka._broker import Encoder, json_values
from harness.kafka.app import KafkaApp
from harness.kafka.lineage import Lineage

__all__ = ["KAFKA_FAULTS", "KafkaExplorer"]

KAFKA_FAULTS = tuple(sorted(f.value for f in ALL_FAULTS - {Fault.DUPLICATE}))
"""Every fault but duplicate delivery (Kafka does not redeliver within a session)."""


@final
class KafkaExplorer:
    """The value of the ``harness_kafka`` fixture (see the module docstring)."""

    def __init__(self, explore: Callable[..., Exploration]) -> None:
        self._explore = explore

    def _faults(self, faults: Sequence[str] | None) -> Sequence[str] | None:
        """The call's faults, else the test's (a marker, an option, the environment, the
        ini file: ``harness_explore``'s settings), else :data:`KAFKA_FAULTS`."""
        if faults is not None:
            return faults
        settings = getattr(self._explore, "settings", None)
        if settings is not None and settings.source("faults") != "default":
            return None  # harness_explore applies the faults its settings give
        return KAFKA_FAULTS

    def __call__(
        self,
        target: str | Callable[..., Any],
        *,
        guarantee: str | None = None,
        inputs: Sequence[str],
        outputs: Sequence[str] = (),
        unchecked: Sequence[str] = (),
        partitions: int = 1,
        argv: Sequence[str] = (),
        lineage: Lineage | None = None,
        group: str | None = None,
        faults: Sequence[str] | None = None,
        max_examples: int | None = None,
        seed: int | None = None,
        effects: Iterable[EffectSource] = (),
        encode: Encoder | None = None,
        env: Mapping[str, str] | None = None,
        backlog_owed: bool = True,
        max_problems: int | None = None,
        transactional_input: bool = False,
    ) -> Exploration:
        __tracebackhide__ = True
        app = KafkaApp(
            target,
            inputs=inputs,
            outputs=outputs,
            unchecked=unchecked,
            partitions=partitions,
            argv=argv,
            lineage=lineage,
            group=group,
            effects=effects,
            encode=json_values if encode is None else encode,
            env=env,
            backlog_owed=backlog_owed,
            transactional_input=transactional_input,
        )
        try:
            return self._explore(
                app,
                guarantee=guarantee,
                topology=app.topology,
                faults=self._faults(faults),
                max_examples=max_examples,
                seed=seed,
                max_problems=max_problems,
            )
        except CounterexampleFound as found:
            lines = [f"lineage: {app.lineage}"] if outputs else []
            lines += [f"effects: {app.effects}"] if app.effects else []
            lines += dict.fromkeys(h for f in found.failures for h in app.hints(f))
            found.args = ("\n".join([found.args[0], *lines]),)
            raise found.with_traceback(None) from None
