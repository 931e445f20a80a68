"""What one simulated run may spend: :class:`RunBudget`, a plain value.

Light on purpose (only :mod:`harness.errors`): the search profiles and the pytest plugin hold
budgets before any engine module loads. The simulator enforces them
(:mod:`harness.sim.budget`, which re-exports these names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, final

from harness.errors import ConfigError

__all__ = ["DEFAULT_RUN_BUDGET", "RunBudget"]


@final
@dataclass(frozen=True, slots=True)
class RunBudget:
    """How much one simulated run may spend before it ends as UNKNOWN (over budget)."""

    calls: int = 1_000_000
    """Calls into the world by every instance and timer, schedule and drain together."""
    seconds: float = 60.0
    """Wall-clock seconds for the simulation (producing input, running, draining)."""

    def __post_init__(self) -> None:
        if type(self.calls) is not int or self.calls < 1:
            raise ConfigError(
                f"run budget calls must be an int >= 1, got {self.calls!r}; e.g. 1000000"
            )
        seconds = self.seconds
        if (
            type(seconds) not in (int, float)
            or not math.isfinite(seconds)
            or not 0 < seconds <= 86_400
        ):
            raise ConfigError(
                f"run budget seconds must be a number in (0, 86400], got {seconds!r}; e.g. 60"
            )

    def describe(self) -> str:
        return f"{self.calls} calls, {self.seconds:g} s"


DEFAULT_RUN_BUDGET: Final = RunBudget()
