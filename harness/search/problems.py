"""Distinct problems: after a first counterexample, what counts as *another* one.

A problem is what a shrunk failing schedule shows: the set of anomaly kinds of its verdict
and the set of fault kinds its schedule still holds (its *root faults*: shrinking removed
every fault it does not need; a crash, a machine crash, a restart and a takeover count as
one root fault, as each ends a process). A later failing run is a new problem when no known
problem shows the same anomaly kinds, or when it needs another root fault than each that
does: it does not hold that problem's root faults (a failure that holds them and more is
another face of it: the extra faults are what shrinking kept to keep the failure new), and
with every fault outside them taken out of its schedule (or each replaced by the one call of
the process it may stand for: a ``Tick`` firing the sender that a ``flush()`` would fire), it
no longer fails that way (e.g. records an ``auto.offset.reset=latest`` consumer never reads,
which needs no fault, then a commit before the effect, which needs a crash). Otherwise it is
another face of a known one and the search goes on.
The engine (:func:`harness.engine.explorer` with ``max_problems``) keeps searching with that
test until it has ``max_problems`` problems or its budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from harness.check.verdict import Status, Verdict
from harness.faults.kinds import Fault
from harness.faults.schedule import (
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Restart,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)
from harness.faults.schedule import Run as RunCalls

__all__ = ["DEFAULT_MAX_PROBLEMS", "Problem", "Problems", "fault_of", "root_faults"]

DEFAULT_MAX_PROBLEMS: Final = 5
"""How many distinct problems the command line and the pytest plugin look for by default
(``explore`` itself stops at the first unless told otherwise)."""

Run = Callable[[Schedule], Verdict]


def fault_of(step: Step) -> Fault | None:
    """The fault kind a schedule step injects (None: ``Run`` or an acknowledged ``Produce``)."""
    if isinstance(step, Crash):
        return Fault.MACHINE_CRASH if step.machine else Fault.CRASH
    if isinstance(step, Produce):
        return None if step.ack else Fault.PRODUCER_CRASH
    kinds: dict[type, Fault] = {
        Restart: Fault.RESTART,
        Duplicate: Fault.DUPLICATE,
        LoseAck: Fault.LOSE_ACK,
        Reorder: Fault.REORDER,
        Tick: Fault.TICK,
        Takeover: Fault.ZOMBIE,
        RunZombie: Fault.ZOMBIE,
        Truncate: Fault.TRUNCATE,
        Resend: Fault.RESEND,
    }
    return kinds.get(type(step))


_PROCESS_LOSS: Final = frozenset({Fault.CRASH, Fault.MACHINE_CRASH, Fault.RESTART, Fault.ZOMBIE})
"""Faults that end a process's run (a crash, a machine's, a takeover by a new instance):
one root fault for telling problems apart, since each of them exposes what the others do."""


def family(fault: Fault) -> frozenset[Fault]:
    """The faults counted as the same root fault as ``fault``."""
    return _PROCESS_LOSS if fault in _PROCESS_LOSS else frozenset({fault})


def root_faults(schedule: Schedule) -> frozenset[Fault]:
    """The fault kinds ``schedule`` holds."""
    return frozenset(f for f in map(fault_of, schedule.steps) if f is not None)


def kinds_of(verdict: Verdict) -> frozenset[str]:
    return frozenset(anomaly.kind.value for anomaly in verdict.anomalies)


@dataclass(frozen=True, slots=True)
class Problem:
    status: Status
    kinds: frozenset[str]
    faults: frozenset[Fault]

    def describe(self) -> str:
        kinds = ", ".join(sorted(self.kinds)) or self.status.name
        faults = ", ".join(sorted(f.value for f in self.faults)) or "no fault"
        return f"{kinds} (needs {faults})"


@dataclass(slots=True)
class Problems:
    """The problems found so far, and the test a later failure passes to be new."""

    known: list[Problem] = field(default_factory=list)
    resume: int = 0
    """How many of the systematic phase's planned schedules the searches have run (each
    passed, or failed with a known problem): a later search starts after them."""

    def add(self, schedule: Schedule, verdict: Verdict) -> Problem:
        problem = Problem(verdict.status, kinds_of(verdict), root_faults(schedule))
        self.known.append(problem)
        return problem

    def is_new(self, schedule: Schedule, verdict: Verdict, run: Run) -> bool:
        """Whether the failing ``schedule`` (its ``verdict``) shows a problem not known yet:
        no known problem shows the same status and anomaly kinds, or each that does has other
        root faults (with every fault outside their families taken out of ``schedule``, or
        each replaced by one more call, it no longer fails that way). ``run`` checks a
        schedule (at most two more runs per known problem with those kinds)."""
        kinds = kinds_of(verdict)
        same = [p for p in self.known if p.status is verdict.status and p.kinds == kinds]
        held = frozenset().union(*map(family, root_faults(schedule)))
        for problem in sorted(same, key=lambda p: len(p.faults)):
            if problem.faults and problem.faults <= held:
                # it holds that problem's root faults, and more: the extra ones are what a
                # search for a *new* problem kept while shrinking (without them the calls
                # shift and the run may pass), not another cause
                return False
            allowed = frozenset().union(*map(family, problem.faults))
            if all(fault_of(s) in (None, *allowed) for s in schedule.steps):
                return False
            for without in _without(schedule, allowed):
                again = run(without)
                if again.status is verdict.status and kinds_of(again) == kinds:
                    return False
        return True


def _without(schedule: Schedule, allowed: frozenset[Fault]) -> Iterator[Schedule]:
    """``schedule`` with every fault outside ``allowed`` taken out; then with each of them
    replaced by one more call of the running process, for a fault that only stood for the
    progress that call makes (a ``Tick`` firing the sender that the next ``flush()`` would
    fire): without that call the known problem's crash falls elsewhere."""
    steps = schedule.steps
    yield Schedule(tuple(s for s in steps if fault_of(s) in (None, *allowed)), drain=schedule.drain)
    stood = (s if fault_of(s) in (None, *allowed) else RunCalls(1) for s in steps)
    yield Schedule(tuple(stood), drain=schedule.drain)
