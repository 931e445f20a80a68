"""The deterministic simulator: a world of logs and stores, processor instances, schedules."""

from harness.sim.budget import DEFAULT_RUN_BUDGET, RunBudget
from harness.sim.context import Context, Offsets, OutputLog, Source, Table
from harness.sim.records import Delivery, OutputRecord
from harness.sim.simulator import InstanceCrashed, Processor, Simulator, simulate
from harness.sim.topology import Topology, entity_sink, log_sink, table_sink
from harness.sim.transaction import Transaction
from harness.sim.world import Backend, World

__all__ = [
    "DEFAULT_RUN_BUDGET",
    "Backend",
    "Context",
    "Delivery",
    "InstanceCrashed",
    "Offsets",
    "OutputLog",
    "OutputRecord",
    "Processor",
    "RunBudget",
    "Simulator",
    "Source",
    "Table",
    "Topology",
    "Transaction",
    "World",
    "entity_sink",
    "log_sink",
    "simulate",
    "table_sink",
]
