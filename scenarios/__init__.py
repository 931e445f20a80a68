"""The seed documents' situations as runnable scenarios: each a correct processor and named
buggy variants that the harness must tell apart (``python -m harness run --all``).

``SCENARIOS`` maps each scenario's name to its :class:`harness.matrix.Scenario`; every module
here tells its story in its docstring and cites its seed in ``shared/seeds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from harness.matrix import Scenario
from scenarios import (
    alpakka_batches,
    alpakka_conditional,
    alpakka_excluding_messages,
    alpakka_group_by,
    alpakka_multiple_messages,
    alpakka_non_sequential,
    dlog_exactly_once_transformer,
    dlog_reader_offsets,
    gearpump_persistent_count,
    kafka_clients,
    kafka_streams_exactly_once,
)

__all__ = ["SCENARIOS"]

SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        module.SCENARIO.name: module.SCENARIO
        for module in (
            dlog_reader_offsets,
            dlog_exactly_once_transformer,
            gearpump_persistent_count,
            alpakka_multiple_messages,
            alpakka_batches,
            alpakka_non_sequential,
            alpakka_group_by,
            alpakka_conditional,
            alpakka_excluding_messages,
            kafka_streams_exactly_once,
        )
    }
    # issue 14: Kafka client applications, unchanged (harness.kafka)
    | {scenario.name: scenario for scenario in kafka_clients.SCENARIOS}
)
