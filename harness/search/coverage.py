"""What a search exercised: the fault coverage every result carries.

"held: 1000 schedules" says little; "held: 53/53 fault points, 263/263 single faults,
203/203 pairs, 1000 schedules (466 systematic, 534 drawn)" says what was tried. A
:class:`Coverage` is plain data: the systematic phase's fault points, its single faults per
kind (injected / planned) and pairs, how many schedules each phase ran and, for a system
whose runs name the faults that fired (a streaming job's), those by name. It renders as that
one line (:meth:`Coverage.summary`) and as JSON (:meth:`Coverage.to_json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from harness._shown import counted
from harness.faults.kinds import Fault

__all__ = ["Coverage"]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Fault coverage of one exploration (all zero: the systematic phase did not run)."""

    points: int = 0
    """Fault points the fault-free probes reached."""
    points_hit: int = 0
    """Of those, the points at least one injected single fault was placed at."""
    singles: Mapping[Fault, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))
    """Per fault kind: (single faults injected, single faults planned)."""
    pairs: tuple[int, int] = (0, 0)
    """(Pairs of faults run, pairs planned)."""
    systematic: int = 0
    """Schedules the systematic phase ran."""
    drawn: int = 0
    """Schedules Hypothesis drew (before any shrinking)."""
    reused: int = 0
    """Systematic schedules the earlier searches of one exploration (for other problems)
    ran: a later search resumes the plan after them, and the points, single faults and pairs
    above count them."""
    unplanned: Mapping[Fault, str] = field(default_factory=lambda: MappingProxyType({}))
    """The faults searched for that the systematic phase planned nowhere, each with why
    (no point of the processor's could take it: no timer for a tick, no choice for a
    reorder...)."""
    fired: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """The faults that fired in the search's runs, by name, for a system whose runs say so (a
    streaming job's ``after-write/raise``, ``task/retried``...; empty for the simulator,
    whose points and single faults above say what its plan covered)."""

    @property
    def schedules(self) -> int:
        return self.systematic + self.drawn

    @property
    def single_faults(self) -> tuple[int, int]:
        """(Single faults injected, planned), over every kind."""
        return (
            sum(run for run, _ in self.singles.values()),
            sum(planned for _, planned in self.singles.values()),
        )

    def summary(self) -> str:
        """One line: points, single faults, pairs, schedules by phase; when no fault was
        planned anywhere, the points and why each fault searched for applies at none."""
        if self.fired or (not self.points and self.systematic):
            reached = ", ".join(f"{k} x{v}" for k, v in sorted(self.fired.items())) or "none"
            return (
                f"{counted(self.schedules, 'schedule')} ({self.systematic} systematic, "
                f"{self.drawn} drawn), faults fired: {reached}"
            )
        if not self.points:
            return f"{self.drawn} schedules drawn (systematic phase off)"
        run, planned = self.single_faults
        schedules = (
            f"{counted(self.schedules, 'schedule')} ({self.systematic} systematic, "
            f"{self.drawn} drawn)"
        )
        if self.reused:
            schedules += f", after the earlier searches' {self.reused} systematic ones"
        if not planned and not self.pairs[1] and self.unplanned:
            # nothing to plan: say why rather than "0/59 fault points"
            why = "; ".join(f"{f.value}: {r}" for f, r in sorted(self.unplanned.items()))
            return (
                f"{self.points} fault points, none where a fault searched for applies ({why}); "
                f"{schedules}"
            )
        return (
            f"{self.points_hit}/{self.points} fault points, {run}/{planned} single faults, "
            f"{self.pairs[0]}/{self.pairs[1]} pairs, {schedules}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "points_hit": self.points_hit,
            "singles": {
                fault.value: {"injected": run, "planned": planned}
                for fault, (run, planned) in sorted(self.singles.items())
            },
            "pairs": {"run": self.pairs[0], "planned": self.pairs[1]},
            "systematic": self.systematic,
            "drawn": self.drawn,
            "reused": self.reused,
            "unplanned": {fault.value: why for fault, why in sorted(self.unplanned.items())},
            **({"fired": dict(sorted(self.fired.items()))} if self.fired else {}),
            "summary": self.summary(),
        }
