"""What one simulated run may spend: :class:`RunBudget`, a plain value.

Light on purpose (only :mod:`harness.errors` and :mod:`harness._shown`): the search profiles
and the pytest plugin hold budgets before any engine module loads. The simulator enforces them
(:mod:`harness.sim.budget`, which re-exports these names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final, final

from harness._shown import shown
from harness.errors import ConfigError

__all__ = ["DEFAULT_RUN_BUDGET", "SHRINK_SECONDS", "TIME_RAN_OUT", "RunBudget", "run_budget"]


@final
@dataclass(frozen=True, slots=True)
class RunBudget:
    """How much one simulated run may spend before it ends as UNKNOWN (over budget)."""

    calls: int = 1_000_000
    """Calls into the world by every instance and timer, schedule and drain together."""
    seconds: float = 60.0
    """Wall-clock seconds for the simulation (producing input, running, draining)."""
    cut_from: float | None = field(default=None, compare=False)
    """The seconds the user gave, when :meth:`for_shrinking` cut them (messages quote them)."""

    def __post_init__(self) -> None:
        if type(self.calls) is not int or self.calls < 1:
            raise ConfigError(
                f"run budget calls must be an int >= 1, got {shown(self.calls)}; e.g. 1000000"
            )
        seconds = self.seconds
        if (
            type(seconds) not in (int, float)
            or not math.isfinite(seconds)
            or not 0 < seconds <= 86_400
        ):
            raise ConfigError(
                f"run budget seconds must be a number in (0, 86400], got {shown(seconds)}; e.g. 60"
            )

    def describe(self) -> str:
        """``1000000 calls, 60 s``; after a cut, the seconds that bound this run first, then
        the ones the user gave: ``1000000 calls, 1 s a run while shrinking (the search's runs
        had 60 s, and one ran out)``."""
        if self.cut_from is None:
            return f"{self.calls} calls, {self.seconds:g} s"
        return (
            f"{self.calls} calls, {self.seconds:g} s a run while shrinking (the search's runs "
            f"had {self.cut_from:g} s, and one ran out)"
        )

    def for_shrinking(self, end_detail: str | None) -> RunBudget:
        """The budget for the runs that shrink a failure whose run ended ``end_detail``: at
        most :data:`SHRINK_SECONDS` each when that run ran out of time, since a processor that
        hangs would otherwise spend the whole budget on every shrinking attempt."""
        if end_detail is None or TIME_RAN_OUT not in end_detail or self.cut_from is not None:
            return self
        if self.seconds <= SHRINK_SECONDS:
            return self
        return RunBudget(self.calls, SHRINK_SECONDS, cut_from=self.seconds)


DEFAULT_RUN_BUDGET: Final = RunBudget()
TIME_RAN_OUT: Final = "the time budget ran out"
"""The words every over-time ``end`` detail contains."""
SHRINK_SECONDS: Final = 1.0


def run_budget(value: object) -> RunBudget:
    """``value`` as a run budget: None is the default one; anything else must be one."""
    if value is None:
        return DEFAULT_RUN_BUDGET
    if not isinstance(value, RunBudget):
        raise ConfigError(
            f"budget must be a RunBudget, got {type(value).__name__}: {shown(value)}; pass "
            "e.g. RunBudget(calls=100000, seconds=30)"
        )
    return value
