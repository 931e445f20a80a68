"""Hypothesis strategies for schedules."""

from harness.strategies.schedules import ALL_FAULTS, Fault, schedules, steps

__all__ = ["ALL_FAULTS", "Fault", "schedules", "steps"]
