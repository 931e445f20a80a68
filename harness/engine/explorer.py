"""The search: a processor under every planned fault, then under schedules Hypothesis draws.

``explore(processor, guarantee=...)`` runs the systematic phase
(:mod:`harness.search.systematic`), then the drawn phase (:mod:`harness.search.drawn`),
simulating each schedule and checking each history. On the first failure the schedule is
shrunk (by Hypothesis, then :func:`harness.faults.simplify.simplify`) and
:class:`~harness.engine.results.CounterexampleFound` is raised, whose message is the report:
the verdict, the shrunk schedule (as steps and as JSON), the seed and a one-line replay
command. The failing schedule is saved as a *replay file*
(:mod:`harness.engine.replay_file`) so ``python -m harness replay FILE`` reproduces it
without Hypothesis.

The loop does not know what it searches: it drives a
:class:`~harness.engine.system.SystemUnderTest` (``explore`` the simulator's,
:class:`~harness.engine.system.Simulated`), and :func:`explore_system` runs it for any
system, such as an unchanged Spark job (``harness.spark.streaming.jobsearch``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Generic, NoReturn

from harness._output import writable
from harness._progress import Stage, Tick, notify
from harness._shown import shown
from harness.check import Guarantee, Status, Verdict, check, guarantee_of
from harness.engine.loading import SearchSkipped, loading_script
from harness.engine.replay_file import DEFAULT_FAILURES_DIR
from harness.engine.results import CounterexampleFound, Exploration, Failure
from harness.engine.system import S, Simulated, SystemPlan, SystemRun, SystemUnderTest
from harness.errors import ConfigError
from harness.history.events import History
from harness.search.coverage import Coverage
from harness.search.problems import Problems
from harness.sim.budget import DEFAULT_RUN_BUDGET, TIME_RAN_OUT, RunBudget, run_budget
from harness.sim.simulator import Processor, processor_path
from harness.sim.topology import Topology
from harness.sim.world import BACKENDS, Backend

if TYPE_CHECKING:
    from harness.faults.kinds import Fault
    from harness.faults.schedule import Schedule
    from harness.search.profiles import Profile
    from harness.settings import Settings

__all__ = ["default_seed", "explore", "explore_system"]


def default_seed(processor: str) -> int:
    """``$HARNESS_SEED``, else a seed derived from the processor's ``module:name``."""
    env = os.environ.get("HARNESS_SEED")
    if env:
        try:
            return int(env)
        except ValueError:
            raise ConfigError(f"HARNESS_SEED must be an integer, got {shown(env)}") from None
    return int.from_bytes(hashlib.sha256(processor.encode()).digest()[:4], "big")


def explore(
    processor: Processor,
    *,
    guarantee: Guarantee | str | None = None,
    topology: Topology | None = None,
    backend: Backend | None = None,
    max_examples: int | None = None,
    max_steps: int | None = None,
    faults: Iterable[Fault | str] | None = None,
    seed: int | None = None,
    failures_dir: str | os.PathLike[str] | None = DEFAULT_FAILURES_DIR,
    systematic: bool = True,
    budget: RunBudget | None = None,
    max_problems: int | None = None,
    profile: str | Profile | None = None,
    settings: Settings | None = None,
) -> Exploration:
    """Run ``processor`` under up to ``max_examples`` schedules; raise on a failure.

    The systematic phase first (``systematic=False``: off; at most three quarters of the
    budget), then the drawn phase, from ``seed`` (default ``$HARNESS_SEED``, else derived
    from the processor's name). Settings: a keyword, else ``settings`` (a door's), else
    ``HARNESS_<KEY>``, else ``profile``'s (:func:`harness.settings.for_call`). On a failure
    (INVALID, or UNKNOWN, which fails closed) the schedule is shrunk, its replay file written
    to ``failures_dir`` (None: not written) and :class:`CounterexampleFound` raised; either
    way the result carries the coverage. ``budget`` bounds every run (default 1,000,000
    calls and 60 s; over it a run is UNKNOWN, and once one ran out of time each shrinking run
    gets 1 s). ``max_problems`` > 1 searches on after a failure for other problems
    (:mod:`harness.search.problems`), each shrunk and saved; ``failures`` then has them all.
    """
    from harness.faults.kinds import fault_set
    from harness.settings import for_call

    if loading_script():  # a script loaded for a replay: its own search does not run
        raise SearchSkipped
    chosen = for_call(
        settings,
        guarantee=guarantee,
        profile=profile,
        backend=backend,
        max_examples=max_examples,
        max_steps=max_steps,
        faults=faults,
        seed=seed,
        run_budget=run_budget(budget) if budget is not None else None,
        max_problems=max_problems,
    )
    claimed = guarantee_of(chosen.require_guarantee("explore(..., guarantee=...)"))
    topology, backend = topology or Topology(), BACKENDS[BACKENDS.index(chosen.backend)]
    if type(systematic) is not bool:
        raise ConfigError(f"systematic must be True or False, got {shown(systematic)}")
    name = processor_path(processor)
    seed = default_seed(name) if chosen.seed is None else chosen.seed
    start, failures_dir = _anchored(failures_dir)

    system = Simulated(processor, topology, backend)

    def search(problems: Problems, before: int) -> _Search[Schedule]:
        found = _Search(
            system,
            claimed,
            fault_set(chosen.faults),
            seed + len(problems.known),  # a search after a failure draws other schedules
            failures_dir,
            limit=chosen.run_budget,
            total=chosen.max_examples,
            problems=problems,
            start=start,
            before=before,
        )
        found.systematic(chosen.max_examples * 3 // 4 if systematic else 0)
        found.drawn(chosen.max_examples - found.ran, chosen.max_steps)
        return found

    done = _every_problem(search, chosen.max_problems)
    return Exploration(name, claimed, done.ran, seed, done.coverage())


def explore_system(
    system: SystemUnderTest[S],
    guarantee: Guarantee | str,
    *,
    max_examples: int,
    planned: int | None = None,
    seed: int = 0,
    failures_dir: str | os.PathLike[str] | None = DEFAULT_FAILURES_DIR,
    max_steps: int = 0,
    budget: RunBudget = DEFAULT_RUN_BUDGET,
    max_problems: int = 1,
) -> Exploration:
    """The search :func:`explore` runs, for any :class:`SystemUnderTest`: up to ``planned``
    of its planned schedules (default three quarters of ``max_examples``; 0: none), then its
    drawn phase for the rest, every run's history judged by the checker; a failure shrunk by
    the system, explained, saved to ``failures_dir`` and raised as
    :class:`CounterexampleFound`, whose ``failure.schedule`` is the system's schedule type.
    ``max_problems`` > 1 searches on after a failure for other problems, as :func:`explore`
    does (each further search resumes the plan after the schedules run and draws from
    ``seed`` plus the problems known, within ``max_examples`` of its own); ``failures`` then
    has them all. ``max_steps`` is handed to the system's drawn phase (its own default when
    0)."""
    claimed = guarantee_of(guarantee)
    if type(max_problems) is not int or max_problems < 1:
        raise ConfigError(f"max_problems must be an integer >= 1, got {shown(max_problems)}")
    start, where = _anchored(failures_dir)
    share = max_examples * 3 // 4 if planned is None else min(planned, max_examples)

    def search(problems: Problems, before: int) -> _Search[S]:
        found = _Search(
            system,
            claimed,
            frozenset(),
            seed + len(problems.known),  # a search after a failure draws other schedules
            where,
            limit=budget,
            total=max_examples,
            problems=problems,
            start=start,
            before=before,
        )
        found.systematic(share)
        found.drawn(max_examples - found.ran, max_steps)
        return found

    done = _every_problem(search, max_problems)
    return Exploration(system.name, claimed, done.ran, seed, done.coverage())


def _every_problem(search: Callable[[Problems, int], _Search[S]], max_problems: int) -> _Search[S]:
    """Search again after each failure, for problems not found yet, up to ``max_problems``;
    raise them all, or return the passing search."""
    problems = Problems()
    found: list[Failure] = []
    while True:
        try:
            done = search(problems, sum(failure.examples for failure in found))
        except CounterexampleFound as failed:
            found.append(failed.failure)
            problems.add(failed.failure.schedule, failed.failure.verdict)
            if len(found) < max_problems and not _ran_out(failed.failure.verdict):
                continue
            found = problems.order(found)  # a new face first: a second bug comes second
            raise CounterexampleFound(found[0], found[1:]) from None
        if found:
            found = problems.order(found)
            raise CounterexampleFound(found[0], found[1:])
        return done


def _ran_out(verdict: Verdict) -> bool:
    """Whether a failure is a run out of time: a processor that hangs would spend the whole
    run budget again in every further search, so none is started."""
    return any(TIME_RAN_OUT in reason for reason in verdict.reasons)


class _Search(Generic[S]):
    """One exploration's state: the phases run in turn, and the failure path they share."""

    def __init__(
        self,
        system: SystemUnderTest[S],
        guarantee: Guarantee,
        faults: frozenset[Fault],
        seed: int,
        failures_dir: str | os.PathLike[str] | None,
        *,
        limit: RunBudget,
        total: int,
        problems: Problems | None = None,
        start: str | None = None,
        before: int = 0,
    ) -> None:
        self.start = start
        """The working directory the search began in: a replay file's path is shown from it."""
        self.before = before
        """Schedules the earlier searches of this exploration ran (progress counts on)."""
        self.system: SystemUnderTest[S] = system
        self.name, self.guarantee = system.name, guarantee
        self.faults, self.seed, self.failures_dir = faults, seed, failures_dir
        self.plan: SystemPlan[S] | None = None
        self.ran = 0
        self.planned_ran = 0
        self.drawn_ran = 0
        self.failures = 0
        self.fired: dict[str, int] = {}
        """The faults that fired in the search's runs (not the shrinking ones), by name."""
        self.last: tuple[S, SystemRun] | None = None
        """The last schedule run and what it returned (a failure's final run reuses it)."""
        self.total = total
        """The schedules the whole search may run (for progress)."""
        self.limit = limit
        """What each run may spend (shorter for shrinking a run that ran out of time)."""
        self.started = time.perf_counter()
        self.first = (0, 0.0)
        """Which schedule failed first, and when (for the report)."""
        self.problems = problems or Problems()
        """The problems found by earlier searches: a failure showing one of them is not one."""

    def run(self, schedule: S) -> tuple[History, Verdict]:
        ran = self.system.run(schedule, self.limit)
        self.last = (schedule, ran)
        return ran.history, check(ran.history, self.guarantee)

    def is_new(self, schedule: S, verdict: Verdict) -> bool:
        """Whether a failing run is not a problem an earlier search found."""
        return not self.problems.known or self.problems.is_new(
            schedule, verdict, lambda again: self.run(again)[1]
        )

    def searched(self, schedule: S, history: History, verdict: Verdict, shrinking: bool) -> bool:
        """Count one search run, report progress; True if it failed with a problem not known
        yet (the first failure sets the budget of the shrinking runs that follow)."""
        if not shrinking and self.last is not None:
            for name in self.last[1].fired:
                self.fired[name] = self.fired.get(name, 0) + 1
        failed = verdict.status is not Status.VALID and self.is_new(schedule, verdict)
        if failed and not shrinking and self.failures == 0:
            self.limit = self.limit.for_shrinking(history.events[-1].detail)
        self.failures += failed
        stage = Stage.SHRINK if shrinking or failed else Stage.SEARCH
        found = len(self.problems.known) + (self.failures > 0)
        notify(Tick(stage, self.before + self.ran, found, self.before + self.total))
        return failed

    def coverage(self) -> Coverage:
        if self.plan is None:
            return Coverage(drawn=self.drawn_ran)
        earlier = self.problems.resume - self.planned_ran  # run by the earlier searches
        return self.system.coverage(
            self.plan, self.planned_ran + earlier, self.drawn_ran, earlier, dict(self.fired)
        )

    def systematic(self, limit: int) -> None:
        """Run the systematic phase's first ``limit`` schedules (0: skip the phase)."""
        if limit <= 0:
            return
        self.plan = self.system.plan(self.faults, self.limit)
        # a processor that hangs without faults hangs under them: a second a run is enough
        self.limit = self.limit.for_shrinking(self.plan.ran_out)
        for index, planned in enumerate(self.plan.schedules[:limit]):
            if index < self.problems.resume:  # an earlier search ran it: passed or known
                continue
            self.problems.resume = index + 1
            self.ran += 1
            self.planned_ran += 1
            history, verdict = self.run(planned)
            if self.searched(planned, history, verdict, shrinking=False):
                self.fail(planned, verdict, self.ran, time.perf_counter() - self.started)

    def attempt(self, schedule: S, shrinking: bool) -> tuple[History, Verdict, bool]:
        """Run one drawn schedule (the drawn phase's :data:`~harness.search.drawn.Attempt`)."""
        self.ran += 1
        self.drawn_ran += not shrinking
        history, verdict = self.run(schedule)
        failed = self.searched(schedule, history, verdict, shrinking)
        if failed and not shrinking:
            self.first = (self.ran, time.perf_counter() - self.started)
        return history, verdict, failed

    def drawn(self, budget: int, max_steps: int) -> None:
        """Let the system draw up to ``budget`` schedules (and shrink a failing one)."""
        if budget <= 0:
            return
        found = self.system.drawn(
            self.attempt, self.faults, budget=budget, max_steps=max_steps, seed=self.seed
        )
        if found is not None:
            schedule, verdict = found
            self.fail(schedule, verdict, self.first[0], self.first[1])

    def shrunk(self, schedule: S, verdict: Verdict) -> tuple[S, History, Verdict]:
        """``schedule`` made smaller by the system while it fails the same way, with the
        history and verdict of a run of it (the search's or the shrinking's, else a new one)."""
        kinds = _failing_kinds(verdict)
        tried: dict[str, tuple[History, Verdict]] = {}
        if self.last is not None and self.last[0] == schedule:
            tried[schedule.dumps()] = (self.last[1].history, verdict)

        def still_fails(candidate: S) -> bool:
            _, again = tried[candidate.dumps()] = self.run(candidate)
            return (
                again.status is verdict.status
                and _failing_kinds(again) == kinds
                and self.is_new(candidate, again)
            )

        schedule = self.system.simplify(schedule, still_fails)
        if schedule.dumps() in tried:  # a run costs seconds on some systems: not again
            return (schedule, *tried[schedule.dumps()])
        history, verdict = self.run(schedule)
        return schedule, history, verdict

    def fail(self, schedule: S, verdict: Verdict, first: int, seconds: float) -> NoReturn:
        """Shrink ``schedule`` further, save the replay file and raise the failure."""
        timed_out = any(TIME_RAN_OUT in reason for reason in verdict.reasons)
        schedule, history, verdict = self.shrunk(schedule, verdict)
        seen = self.system.rerun(schedule, history, verdict, budget=self.limit, timed_out=timed_out)
        history, verdict = seen.history, seen.verdict  # a flaky processor's failure says so
        covered = self.coverage()
        spec = self.system.replay(self.guarantee, schedule, self.seed, verdict)
        replay_file, note = None, None
        if self.failures_dir is not None:
            replay_file, note = spec.keep(self.failures_dir)
        if replay_file is not None and note is None and self.start is not None:
            relative = os.path.relpath(replay_file, self.start)
            if not relative.startswith(os.pardir):
                replay_file = Path(relative)
        if replay_file is not None:
            command = f"python -m harness replay {replay_file}"
        else:
            inline = json.dumps(spec.to_json(), separators=(",", ":"))
            command = f"python -m harness replay {shlex.quote(inline)}"
        raise CounterexampleFound(
            Failure(
                processor=self.name,
                guarantee=self.guarantee,
                backend=self.system.backend,
                verdict=verdict,
                schedule=schedule,
                history=history,
                seed=self.seed,
                examples=self.ran,
                first_failure_example=first,
                first_failure_seconds=seconds,
                replay_file=replay_file,
                replay_command=command,
                coverage=covered,
                processor_errors=seen.processor_errors,
                replay_note=note,
            )
        )


def _anchored(failures_dir: str | os.PathLike[str] | None) -> tuple[str, Path | None]:
    """The working directory, and ``failures_dir`` checked (before the search: a
    counterexample needs a place to go) and made absolute: a processor that changes the
    working directory must not send the replay file where the report's path does not lead."""
    start = os.getcwd()
    if failures_dir is None:
        return start, None
    return start, Path(
        os.path.abspath(writable(failures_dir, "the failures directory", directory=True))
    )


def _failing_kinds(verdict: Verdict) -> frozenset[str]:
    return frozenset(anomaly.kind.value for anomaly in verdict.anomalies)
