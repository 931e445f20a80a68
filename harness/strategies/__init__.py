"""Hypothesis strategies for schedules."""

from harness.strategies.schedules import ALL_FAULTS, Fault, schedules, steps
from harness.strategies.streams import stream_schedules

__all__ = ["ALL_FAULTS", "Fault", "schedules", "steps", "stream_schedules"]
