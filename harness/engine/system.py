"""A system under test: what the engine's search drives, whatever runs the schedules.

The search (:mod:`harness.engine.explorer`) plans schedules, draws more, judges each run's
history with the checker, shrinks a failure, explains it and saves its replay file. What a
schedule *is* and how it runs belongs to the system: a :class:`SystemUnderTest` runs one
schedule and returns a :class:`SystemRun` (the history, and the faults that fired), plans the
systematic phase's schedules, runs the drawn phase through the engine's attempt callable,
makes a failing schedule smaller, runs it again to explain it, and says how its replay file
is made. Two systems implement it:

* :class:`Simulated` (here): a processor under the simulator (:mod:`harness.sim`), its
  plan :mod:`harness.search.systematic`, its drawn phase Hypothesis
  (:mod:`harness.search.drawn`), its shrinking :func:`harness.faults.simplify.simplify`;
  ``explore(processor, ...)`` searches one;
* ``SparkJobSystem`` (:mod:`harness.spark.streaming.jobsearch`, above the engine): an
  unchanged PySpark job under a :class:`~harness.faults.streams.StreamSchedule`; its plan a
  crash at every micro-batch point, its drawn phase a seeded generator, its shrinking a few
  greedy steps (each run costs seconds).

The engine never imports a system's module: the caller hands it the system
(:func:`harness.engine.explorer.explore_system`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

from harness.check import Guarantee, Verdict
from harness.engine.replay_file import Replay
from harness.engine.reruns import Rerun, rerun
from harness.faults.schedule import Schedule
from harness.faults.streams import StreamSchedule
from harness.history.events import History
from harness.search.coverage import Coverage
from harness.sim.budget import RunBudget
from harness.sim.simulator import Processor, processor_path, simulate
from harness.sim.topology import Topology
from harness.sim.world import Backend

if TYPE_CHECKING:
    import os

    from harness.faults.kinds import Fault

__all__ = ["ReplaySpec", "SystemRun", "Simulated", "SystemPlan", "SystemUnderTest"]

S = TypeVar("S", Schedule, StreamSchedule)
"""The schedule types the engine searches: the simulator's and a streaming job's."""
SystemAttempt: TypeAlias = Callable[[S, bool], tuple[History, Verdict, bool]]
"""The engine's attempt: run one schedule (the flag: a shrinking run), judge it, count it;
its history, verdict and whether it failed with a problem not known yet."""


@dataclass(frozen=True, slots=True)
class SystemRun:
    """What one run of a schedule returns: its history, and the faults that fired in it by
    coverage name (``after-write/raise``, ``task/retried``...; empty for the simulator, whose
    plan says what it covered)."""

    history: History
    fired: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SystemPlan(Generic[S]):
    """The systematic phase's schedules, in the order to run them. ``ran_out``: how a probe
    that ran out of time ended (the later runs then get a short budget); ``detail``: the
    system's own plan, for its :meth:`SystemUnderTest.coverage`."""

    schedules: tuple[S, ...]
    ran_out: str | None = None
    detail: object = None


class ReplaySpec(Protocol):
    """A failure's replay file before it is written: the simulator's :class:`Replay`, a
    streaming job's ``JobReplay``."""

    def keep(self, directory: str | os.PathLike[str]) -> tuple[Path | None, str | None]: ...

    def to_json(self) -> dict[str, Any]: ...


class SystemUnderTest(Protocol[S]):
    """What the engine's search drives (module docstring). ``S`` is its schedule type."""

    @property
    def name(self) -> str:
        """How results, reports and replay files name it (``module:name``, the job's app)."""
        ...

    @property
    def backend(self) -> str:
        """Where its runs happen (``memory``, ``leveldb``, ``spark``), for the reports."""
        ...

    def run(self, schedule: S, budget: RunBudget) -> SystemRun:
        """Run one schedule (within ``budget`` where the system can bound a run)."""
        ...

    def plan(self, faults: frozenset[Fault], budget: RunBudget) -> SystemPlan[S]:
        """The systematic phase: every planned schedule, in order."""
        ...

    def drawn(
        self,
        attempt: SystemAttempt[S],
        faults: frozenset[Fault],
        *,
        budget: int,
        max_steps: int,
        seed: int,
    ) -> tuple[S, Verdict] | None:
        """Draw up to ``budget`` schedules from ``seed``, each run through ``attempt``; the
        first failing one (made smaller by the drawn phase itself, if it shrinks) and its
        verdict, or None."""
        ...

    def simplify(self, schedule: S, still_fails: Callable[[S], bool]) -> S:
        """A smaller schedule for which ``still_fails`` holds (``schedule`` itself at worst)."""
        ...

    def rerun(
        self, schedule: S, history: History, verdict: Verdict, *, budget: RunBudget, timed_out: bool
    ) -> Rerun:
        """The failing run explained: run again to tell a flaky system from a deterministic
        one, where that is affordable (else the history and verdict as they are)."""
        ...

    def replay(self, guarantee: Guarantee, schedule: S, seed: int, verdict: Verdict) -> ReplaySpec:
        """The replay file of a failure (``python -m harness replay FILE`` runs it again)."""
        ...

    def coverage(
        self, plan: SystemPlan[S], planned: int, drawn: int, reused: int, fired: Mapping[str, int]
    ) -> Coverage:
        """What a search with ``plan`` exercised: ``planned`` of its schedules run (``reused``
        of them by earlier searches), ``drawn`` drawn, the faults ``fired`` by name."""
        ...


@dataclass(frozen=True, slots=True)
class Simulated:
    """A processor under the simulator: the system ``explore(processor, ...)`` searches."""

    processor: Processor
    topology: Topology
    backend: Backend = "memory"

    @property
    def name(self) -> str:
        return processor_path(self.processor)

    def run(self, schedule: Schedule, budget: RunBudget) -> SystemRun:
        history = simulate(
            self.processor, schedule, topology=self.topology, backend=self.backend, budget=budget
        )
        return SystemRun(history)

    def plan(self, faults: frozenset[Fault], budget: RunBudget) -> SystemPlan[Schedule]:
        from harness.search.systematic import plan

        # the fault points are the same on every backend: probe and plan on the fast one
        found = plan(self.processor, self.topology, faults, budget=budget)
        schedules = tuple(planned.schedule for planned in found.schedules)
        return SystemPlan(schedules, found.ran_out, found)

    def drawn(
        self,
        attempt: SystemAttempt[Schedule],
        faults: frozenset[Fault],
        *,
        budget: int,
        max_steps: int,
        seed: int,
    ) -> tuple[Schedule, Verdict] | None:
        from harness.search.drawn import drawn_phase

        return drawn_phase(
            attempt, self.topology, faults, budget=budget, max_steps=max_steps, seed=seed
        )

    def simplify(self, schedule: Schedule, still_fails: Callable[[Schedule], bool]) -> Schedule:
        from harness.faults.simplify import simplify

        return simplify(schedule, still_fails)

    def rerun(
        self,
        schedule: Schedule,
        history: History,
        verdict: Verdict,
        *,
        budget: RunBudget,
        timed_out: bool,
    ) -> Rerun:
        return rerun(
            self.processor,
            schedule,
            history,
            verdict,
            topology=self.topology,
            backend=self.backend,
            budget=budget,
            failed=True,
            timed_out=timed_out,
        )

    def replay(
        self, guarantee: Guarantee, schedule: Schedule, seed: int, verdict: Verdict
    ) -> Replay:
        return Replay(
            self.name,
            guarantee,
            self.topology,
            self.backend,
            schedule,
            _source_file(self.processor),
            seed,
            _factory(self.processor),
        )

    def coverage(
        self,
        plan: SystemPlan[Schedule],
        planned: int,
        drawn: int,
        reused: int,
        fired: Mapping[str, int],
    ) -> Coverage:
        from harness.search.systematic import Plan, coverage

        assert isinstance(plan.detail, Plan)
        return coverage(plan.detail, planned, drawn, reused=reused)


def _factory(processor: Processor) -> Mapping[str, Any] | None:
    """The processor's own recipe for a replay file (``replay_spec()``), if it has one."""
    replay_spec = getattr(processor, "replay_spec", None)
    return replay_spec() if callable(replay_spec) else None


def _source_file(processor: Processor) -> str | None:
    try:
        file = inspect.getsourcefile(processor)
    except TypeError:
        return None
    return None if file is None else str(Path(file).resolve())
