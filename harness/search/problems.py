"""Distinct problems: after a first counterexample, what counts as *another* one.

A problem is what a shrunk failing schedule shows: its *face* (:func:`face_of`: the verdict's
status, its first anomaly kind, and for a loss whether the lost records were ever read) and
the set of fault kinds its schedule still holds (its *root faults*: shrinking removed every
fault it does not need; a crash, a machine crash, a restart and a takeover count as one root
fault, as each ends a process). The anomalies that come with the first one are its faces,
not other bugs: a record an ``auto.offset.reset=latest`` consumer never read is ``lost``, and
when a later record is read and committed also a ``skip`` and an ``offset-ahead``; a record
read and then dropped (a commit before its effect, then a crash) is another mechanism of
loss. A later failing run is a new problem when no known problem shows its face, or when it
needs another root fault than each that does: it does not hold that problem's root faults (a
failure that holds them and more is another face of it: the extra faults are what shrinking
kept to keep the failure new), and with every fault outside them taken out of its schedule
(or each replaced by the one call of the process it may stand for: a ``Tick`` firing the
sender that a ``flush()`` would fire), it no longer fails that way (e.g. records an
``auto.offset.reset=latest`` consumer never reads, which needs no fault, then a commit before
the effect, which needs a crash). Otherwise it is another face of a known one and the search
goes on. :meth:`Problems.order` lists the problems of a new face first.
The engine (:func:`harness.engine.explore` with ``max_problems``) keeps searching with that
test until it has ``max_problems`` problems or its budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from harness.check.verdict import AnomalyKind, Status, Verdict
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
from harness.faults.streams import StreamSchedule, StreamStep

__all__ = ["DEFAULT_MAX_PROBLEMS", "Problem", "Problems", "fault_of", "root_faults"]

DEFAULT_MAX_PROBLEMS: Final = 5
"""How many distinct problems the command line and the pytest plugin look for by default
(``explore`` itself stops at the first unless told otherwise)."""

Run = Callable[[Schedule], Verdict]
T = TypeVar("T")
A = TypeVar("A", Schedule, StreamSchedule)


def fault_of(step: Step | StreamStep) -> Fault | None:
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


def root_faults(schedule: Schedule | StreamSchedule) -> frozenset[Fault]:
    """The fault kinds ``schedule`` holds."""
    return frozenset(f for f in map(fault_of, schedule.steps) if f is not None)


def kinds_of(verdict: Verdict) -> frozenset[str]:
    return frozenset(anomaly.kind.value for anomaly in verdict.anomalies)


def face_of(verdict: Verdict) -> tuple[Status, str | None, str | None]:
    """What a failure shows, whatever face it wears: its status, its first anomaly kind (the
    kinds are in declaration order, ``lost`` first: the ``skip`` and ``offset-ahead`` beside a
    loss are its consequences, not another bug) and, for a loss, whether the lost records were
    ever read. A record skipped unread (an offset reset to the end, an offset committed past
    it) and one read and then dropped (a commit before its effect, then a crash) are two
    mechanisms; the witness of a loss holds the record's read event when there was one."""
    if not verdict.anomalies:
        return verdict.status, None, None
    first = verdict.anomalies[0]
    trait = None
    if first.kind is AnomalyKind.LOST:
        read = any(len(witness.events) > 1 for witness in first.witnesses)
        trait = "read" if read else "never read"
    return verdict.status, first.kind.value, trait


@dataclass(frozen=True, slots=True)
class Problem:
    status: Status
    kinds: frozenset[str]
    faults: frozenset[Fault]
    face: tuple[Status, str | None, str | None] = (Status.INVALID, None, None)
    """:func:`face_of` its verdict."""

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

    def add(self, schedule: Schedule | StreamSchedule, verdict: Verdict) -> Problem:
        problem = Problem(
            verdict.status, kinds_of(verdict), root_faults(schedule), face_of(verdict)
        )
        self.known.append(problem)
        return problem

    def is_new(self, schedule: A, verdict: Verdict, run: Callable[[A], Verdict]) -> bool:
        """Whether the failing ``schedule`` (its ``verdict``) shows a problem not known yet:
        no known problem shows the same face (:func:`face_of`: status, first anomaly kind,
        and for a loss whether the records were read), or each that does has other root
        faults (with every fault outside their families taken out of ``schedule``, or each
        replaced by one more call, it no longer fails that way). ``run`` checks a schedule
        (at most two more runs per known problem of that face)."""
        face = face_of(verdict)
        same = [p for p in self.known if p.face == face]
        if not isinstance(schedule, Schedule):  # a streaming job's: no simulator faults to
            return not same  # take out, so its face alone tells
        held: frozenset[Fault] = frozenset().union(*map(family, root_faults(schedule)))
        for problem in sorted(same, key=lambda p: len(p.faults)):
            if problem.faults and problem.faults <= held:
                # it holds that problem's root faults, and more: the extra ones are what a
                # search for a *new* problem kept while shrinking (without them the calls
                # shift and the run may pass), not another cause
                return False
            allowed: frozenset[Fault] = frozenset().union(*map(family, problem.faults))
            if all(fault_of(s) in (None, *allowed) for s in schedule.steps):
                return False
            for without in _without(schedule, allowed):
                again = run(without)
                if face_of(again) == face:
                    return False
        return True

    def order(self, found: Sequence[T]) -> list[T]:
        """``found`` (one failure per known problem, in the same order) with the problems of
        a face not shown before first: a second bug comes right after the first, before the
        same bug reached through another root fault (a crash before the first commit that
        resets to the end, after the records written before the first start)."""
        faces = [p.face for p in self.known]
        fresh = [i for i, face in enumerate(faces) if face not in faces[:i]]
        again = [i for i in range(len(found)) if i not in fresh]
        return [found[i] for i in (*fresh, *again) if i < len(found)]


def _without(schedule: Schedule, allowed: frozenset[Fault]) -> Iterator[Schedule]:
    """``schedule`` with every fault outside ``allowed`` taken out; then with each of them
    replaced by one more call of the running process, for a fault that only stood for the
    progress that call makes (a ``Tick`` firing the sender that the next ``flush()`` would
    fire): without that call the known problem's crash falls elsewhere."""
    steps = schedule.steps
    yield Schedule(tuple(s for s in steps if fault_of(s) in (None, *allowed)), drain=schedule.drain)
    stood = (s if fault_of(s) in (None, *allowed) else RunCalls(1) for s in steps)
    yield Schedule(tuple(stood), drain=schedule.drain)
