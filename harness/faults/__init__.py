"""The fault model: schedules as plain data, and the fault kinds a search injects."""

from harness.faults.kinds import ALL_FAULTS, Fault, fault_set
from harness.faults.schedule import (
    SCHEDULE_VERSION,
    STEP_TYPES,
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Restart,
    Run,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)

__all__ = [
    "ALL_FAULTS",
    "SCHEDULE_VERSION",
    "STEP_TYPES",
    "Crash",
    "Duplicate",
    "Fault",
    "LoseAck",
    "Produce",
    "Reorder",
    "Resend",
    "Restart",
    "Run",
    "RunZombie",
    "Schedule",
    "Step",
    "Takeover",
    "Tick",
    "Truncate",
    "fault_set",
]
