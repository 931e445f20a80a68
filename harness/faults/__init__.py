"""The fault model: schedules as plain data."""

from harness.faults.schedule import (
    SCHEDULE_VERSION,
    STEP_TYPES,
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
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
    "SCHEDULE_VERSION",
    "STEP_TYPES",
    "Crash",
    "Duplicate",
    "LoseAck",
    "Produce",
    "Reorder",
    "Restart",
    "Run",
    "RunZombie",
    "Schedule",
    "Step",
    "Takeover",
    "Tick",
    "Truncate",
]
