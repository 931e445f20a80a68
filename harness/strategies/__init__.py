"""Hypothesis strategies for schedules (``Fault`` and ``ALL_FAULTS`` are re-exported from
:mod:`harness.faults`, where the fault vocabulary lives)."""

from harness.strategies.schedules import schedules, steps
from harness.strategies.streams import stream_schedules

__all__ = ["schedules", "steps", "stream_schedules"]
