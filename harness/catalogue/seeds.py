"""The seed scenarios by name: every module of ``harness.scenarios``, in the matrix's order.

``SCENARIOS`` maps each scenario's name to its :class:`~harness.catalogue.subject.Scenario`;
importing this module imports the scenario modules (the processors and their catalogue
entries, nothing heavier than the simulator).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from harness.catalogue.subject import Scenario

__all__ = ["SCENARIOS", "SCENARIO_MODULES"]

SCENARIO_MODULES: Final = (
    "dlog_reader_offsets",
    "dlog_exactly_once_transformer",
    "gearpump_persistent_count",
    "alpakka_multiple_messages",
    "alpakka_batches",
    "alpakka_non_sequential",
    "alpakka_group_by",
    "alpakka_conditional",
    "alpakka_excluding_messages",
    "kafka_streams_exactly_once",
    "kafka_clients",
)
"""The modules of ``harness.scenarios`` that define a ``SCENARIO`` (or several, as the tuple
``SCENARIOS``)."""


def _load() -> Mapping[str, Scenario]:
    found: dict[str, Scenario] = {}
    for name in SCENARIO_MODULES:
        module = importlib.import_module(f"harness.scenarios.{name}")
        for scenario in getattr(module, "SCENARIOS", None) or (module.SCENARIO,):
            assert isinstance(scenario, Scenario), name
            found[scenario.name] = scenario
    return MappingProxyType(found)


SCENARIOS: Final[Mapping[str, Scenario]] = _load()
