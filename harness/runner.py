"""The entry point: run a processor under schedules drawn by Hypothesis, or replay one.

``explore(processor, guarantee=...)`` draws schedules, simulates each, checks each history and,
on the first failure, lets Hypothesis shrink the schedule; it then raises
:class:`CounterexampleFound` whose message is the report: the verdict, the shrunk schedule (as
steps and as JSON), the seed and a one-line replay command. The failing schedule is saved as a
*replay file* so ``python -m harness replay FILE`` reproduces the failure without Hypothesis.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from harness._json import parse_json
from harness._output import writable, write_atomic
from harness._progress import Stage, Tick, notify
from harness._shown import describe_exception, shown
from harness.check import Guarantee, Status, Verdict, check, guarantee_of
from harness.errors import ConfigError, HarnessError
from harness.faults.schedule import Schedule
from harness.faults.simplify import simplify
from harness.history.events import History
from harness.report.subject import ProcessorError
from harness.rerun import rerun
from harness.search.coverage import Coverage
from harness.search.problems import Problems
from harness.search.systematic import Plan, coverage, plan
from harness.sim.budget import TIME_RAN_OUT, RunBudget, run_budget
from harness.sim.exits import Guard, ProcessExit
from harness.sim.simulator import Processor, processor_path, simulate
from harness.sim.topology import Topology
from harness.sim.world import BACKENDS, Backend

if TYPE_CHECKING:
    from harness.faults.kinds import Fault
    from harness.search.profiles import Profile
    from harness.settings import Settings

__all__ = [
    "REPLAY_VERSION",
    "CounterexampleFound",
    "Exploration",
    "Failure",
    "Replay",
    "default_seed",
    "explore",
    "load_processor",
    "make_processor",
    "replay",
    "run_once",
]

REPLAY_VERSION: Final = 1
DEFAULT_FAILURES_DIR: Final = Path(".harness") / "failures"
FALLBACK_FAILURES_DIR: Final = Path(tempfile.gettempdir()) / "harness-failures"
"""Where a replay file goes when the failures directory cannot be written."""


@dataclass(frozen=True, slots=True)
class Replay:
    """Everything needed to run one schedule again: the content of a replay file."""

    processor: str
    guarantee: Guarantee
    topology: Topology
    backend: Backend
    schedule: Schedule
    processor_file: str | None = None
    seed: int | None = None
    factory: Mapping[str, Any] | None = None
    """How to make the processor again when it is not importable by name (a door's
    application: ``{"factory": "module:function", "args": {...}}``, see
    :func:`make_processor`); written only when set."""

    def to_json(self) -> dict[str, Any]:
        data = {
            "harness_replay": REPLAY_VERSION,
            "processor": self.processor,
            "processor_file": self.processor_file,
            "guarantee": self.guarantee.value,
            "backend": self.backend,
            "seed": self.seed,
            "topology": self.topology.to_json(),
            "schedule": self.schedule.to_json(),
        }
        if self.factory is not None:
            data["factory"] = dict(self.factory)
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "replay file") -> Replay:
        if not isinstance(data, Mapping) or "harness_replay" not in data:
            raise ConfigError(
                f"{where} is not a replay file (no 'harness_replay' key); pass the file a "
                "failing run saved under .harness/failures/"
            )
        version = data["harness_replay"]
        if type(version) is not int or version != REPLAY_VERSION:
            raise ConfigError(
                f"{where} has replay version {shown(version)}; this harness reads "
                f"version {REPLAY_VERSION}"
            )
        try:
            guarantee = Guarantee(data["guarantee"])
        except (KeyError, ValueError, TypeError):
            raise ConfigError(
                f"{where}: guarantee must be one of {[g.value for g in Guarantee]}, got "
                f"{shown(data.get('guarantee'))}"
            ) from None
        backend = data.get("backend", "memory")
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ConfigError(f"{where}: backend must be one of {BACKENDS}, got {shown(backend)}")
        processor = data.get("processor")
        if not isinstance(processor, str) or ":" not in processor:
            raise ConfigError(f"{where}: processor must be 'module:name', got {shown(processor)}")
        file, seed = data.get("processor_file"), data.get("seed")
        if file is not None and not isinstance(file, str):
            raise ConfigError(f"{where}: processor_file must be a path or null, got {shown(file)}")
        if seed is not None and type(seed) is not int:
            raise ConfigError(f"{where}: seed must be an integer or null, got {shown(seed)}")
        factory = data.get("factory")
        if factory is not None and (
            not isinstance(factory, Mapping)
            or not isinstance(factory.get("factory"), str)
            or not isinstance(factory.get("args"), Mapping)
        ):
            raise ConfigError(
                f"{where}: factory must be an object with 'factory' ('module:function') and "
                f"'args', got {shown(factory)}"
            )
        return cls(
            processor=processor,
            guarantee=guarantee,
            topology=Topology.from_json(data.get("topology") or {}),
            backend=backend,
            schedule=Schedule.from_json(data.get("schedule")),
            processor_file=file,
            seed=seed,
            factory=factory,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Replay:
        """Read a replay file; a string that starts with ``{`` is the replay JSON itself."""
        fix = "pass a replay file a failing run saved under .harness/failures/"
        if isinstance(path, str) and path.lstrip().startswith("{"):
            inline = parse_json(path, what="the replay JSON", fix=fix)
            return cls.from_json(inline, "the replay JSON")
        where = f"replay file {shown(os.fspath(path))}"
        try:
            text = Path(path).read_bytes()
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ConfigError(f"cannot read {where}: {reason}; {fix}") from None
        return cls.from_json(parse_json(text, what=where, fix=fix), where)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the replay file into ``directory`` (created if missing), whole or not at all
        (a ``ConfigError`` says why not)."""
        directory = writable(directory, "the failures directory", directory=True)
        text = json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"
        name = hashlib.sha256(text.encode()).hexdigest()[:12]
        stem = self.processor.rpartition(":")[2][:100]
        return write_atomic(directory / f"{stem}-{name}.json", text, "the replay file")

    def keep(self, directory: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
        """Save the replay file in ``directory``, else in :data:`FALLBACK_FAILURES_DIR`: a
        counterexample is never lost to a bad directory. Returns the file (None if neither
        could be written) and a note saying where it went instead, if it did."""
        try:
            return self.save(directory), None
        except ConfigError as exc:
            why = str(exc)
        try:
            path = self.save(FALLBACK_FAILURES_DIR)
        except ConfigError as again:
            return None, f"{why}; nor in {FALLBACK_FAILURES_DIR} ({again}): see the replay JSON"
        return path, f"{why}; saved in {FALLBACK_FAILURES_DIR} instead"


def load_processor(path: str, file: str | None = None) -> Processor:
    """Import ``module:qualname``; fall back to loading ``file`` if the module is not found."""
    if not isinstance(path, str):
        raise ConfigError(f"a processor is named 'module:function', got {shown(path)}")
    module_name, _, qualname = path.partition(":")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise ConfigError(
            f"processor {shown(path)} is defined inside a function, so it cannot be imported for a "
            "replay; define it at module level"
        )
    module: Any
    try:
        if module_name == "__main__":
            # a script's processor: its module is whatever script runs the replay, so it
            # can only be found through the file it was defined in
            raise ImportError("a processor defined in a script run as __main__")
        module = _guarded(module_name, lambda: importlib.import_module(module_name))
    except ImportError as exc:
        if not isinstance(file, str) or not file.endswith(".py") or not _is_file(file):
            raise ConfigError(
                f"cannot import processor module {shown(module_name)} ({shown(str(exc))}); run "
                "the replay from the directory the test ran in, or put the module on PYTHONPATH"
                + ("" if file is None else f"; its processor_file {shown(file)} is no .py file")
            ) from None
        module = _load_file(module_name, file)
    obj: Any = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"module {shown(module_name)} has no processor {shown(qualname)}; check the name"
            ) from None
    if not callable(obj):
        raise ConfigError(f"processor {shown(path)} is {shown(obj)}, not callable")
    return obj  # type: ignore[no-any-return]


def make_processor(factory: Mapping[str, Any]) -> Processor:
    """The processor a replay file's ``factory`` describes: ``factory["factory"]`` (a
    ``module:function``) called with ``factory["args"]``."""
    name = factory["factory"]
    module_name, _, function_name = str(name).partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load the replay file's factory {shown(name)}: {exc}") from None
    processor: Processor = function(factory["args"])
    return processor


def _is_file(file: str) -> bool:
    try:
        return Path(file).is_file()
    except (OSError, ValueError):  # too long a name, a NUL
        return False


def _load_file(module_name: str, file: str) -> Any:
    """Execute the processor's source file as a module of its own."""
    loaded_name = "_harness_replayed_" + Path(file).stem
    spec = importlib.util.spec_from_file_location(loaded_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"processor_file {shown(file)} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[loaded_name] = module
    loader = spec.loader
    try:
        _guarded(file, lambda: loader.exec_module(module))
    except BaseException:
        del sys.modules[loaded_name]
        raise
    return module


def _guarded(source: str, load: Callable[[], Any]) -> Any:
    """``load()`` (the import of a processor's module) with no way out: whatever it raises
    but an ``ImportError`` (``SystemExit``, its own ``KeyboardInterrupt``...) or tries
    (``os._exit``, a signal to itself: :mod:`harness.sim.exits`) is a ``ConfigError`` naming
    the module. A real Ctrl-C meanwhile still interrupts."""
    interrupted: list[int] = []

    def on_sigint(signum: int, frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    owns = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if owns:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        with Guard(lambda what: None, frozenset({signal.SIGINT}) if owns else frozenset()):
            return load()
    except ImportError:
        raise
    except ProcessExit as exc:
        raise _import_failed(source, f"it tried to end the process: it {exc.what}") from None
    except BaseException as exc:  # the user's module failed while it was imported
        if isinstance(exc, KeyboardInterrupt) and (interrupted or not owns):
            raise  # a real Ctrl-C (or one that cannot be told from it)
        raise _import_failed(source, describe_exception(exc)) from None
    finally:
        if owns:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _import_failed(source: str, what: str) -> ConfigError:
    return ConfigError(
        f"importing the processor's module {shown(source)} failed: {what}; fix that module "
        "(run it with python to see the traceback)"
    )


def run_once(
    processor: Processor,
    schedule: Schedule,
    guarantee: Guarantee | str,
    *,
    topology: Topology | None = None,
    backend: Backend = "memory",
    budget: RunBudget | None = None,
) -> tuple[History, Verdict]:
    """Simulate one schedule and check its history. ``budget`` bounds the run (default
    :data:`harness.sim.budget.DEFAULT_RUN_BUDGET`); a run over it is UNKNOWN."""
    guarantee = _guarantee(guarantee)
    history = simulate(processor, schedule, topology=topology, backend=backend, budget=budget)
    return history, check(history, guarantee)


def replay(
    source: Replay | str | os.PathLike[str], *, budget: RunBudget | None = None
) -> tuple[History, Verdict]:
    """Run a saved schedule again (no Hypothesis involved) and check it."""
    spec = source if isinstance(source, Replay) else Replay.load(source)
    if spec.factory is not None:
        processor = make_processor(spec.factory)
    else:
        processor = load_processor(spec.processor, spec.processor_file)
    topology, backend = spec.topology, spec.backend
    history, verdict = run_once(
        processor,
        spec.schedule,
        spec.guarantee,
        topology=topology,
        backend=backend,
        budget=budget,
    )
    seen = rerun(
        processor,
        spec.schedule,
        history,
        verdict,
        topology=topology,
        backend=backend,
        budget=budget,
    )
    return seen.history, seen.verdict


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failing exploration found, shrunk."""

    processor: str
    guarantee: Guarantee
    backend: Backend
    verdict: Verdict
    schedule: Schedule
    history: History
    seed: int
    examples: int
    """Schedules simulated in all (search and shrinking)."""
    first_failure_example: int
    """Which drawn schedule failed first (1-based)."""
    first_failure_seconds: float
    replay_file: Path | None
    replay_command: str
    coverage: Coverage = field(default_factory=Coverage)
    """What the search had exercised when it failed."""
    processor_errors: tuple[ProcessorError, ...] = ()
    """Exceptions the processor raised in this run, with its own frames of their tracebacks."""
    replay_note: str | None = None
    """Why the replay file is not in the failures directory, and where it is instead."""

    def report(self) -> str:
        """The text shown when an exploration fails."""
        held = "does NOT hold" if self.verdict.status is Status.INVALID else "could not be shown"
        lines = [
            f"{self.guarantee.value} {held} for {self.processor} ({self.backend} backend): "
            f"{self.verdict.status.name}",
            *(line for error in self.processor_errors for line in error.lines()),
            self.verdict.summary(),
            f"shrunk schedule ({len(self.schedule)} steps; first failure at schedule "
            f"{self.first_failure_example} after {self.first_failure_seconds:.2f} s, "
            f"{self.examples} schedules run in all):",
            self.schedule.describe(),
            f"schedule JSON: {self.schedule.dumps()}",
            f"coverage: {self.coverage.summary()}",
            f"seed: {self.seed}  (explore(..., seed={self.seed}) repeats this search)",
            f"replay: {self.replay_command}",
            *([f"replay file: {self.replay_note}"] if self.replay_note else []),
        ]
        return "\n".join(lines)


class CounterexampleFound(HarnessError, AssertionError):
    """``explore`` found a schedule under which the guarantee does not hold (or cannot be
    judged); ``failure`` has the details and ``str()`` is the report. ``failures`` is every
    distinct problem found (``failure`` first; more with ``max_problems``)."""

    def __init__(self, failure: Failure, others: Iterable[Failure] = ()) -> None:
        self.failure = failure
        self.failures = (failure, *others)
        if len(self.failures) == 1:
            super().__init__(failure.report())
            return
        count = len(self.failures)
        parts = [
            f"problem {number} of {count}:\n{one.report()}"
            for number, one in enumerate(self.failures, 1)
        ]
        super().__init__(f"{count} distinct problems found\n\n" + "\n\n".join(parts))


@dataclass(frozen=True, slots=True)
class Exploration:
    """A passing exploration: how many schedules were run, from which seed, and the fault
    coverage they achieved."""

    processor: str
    guarantee: Guarantee
    examples: int
    seed: int
    coverage: Coverage = field(default_factory=Coverage)

    def summary(self) -> str:
        """``at-least-once held for m:p: 53/53 fault points, ..., 300 schedules (...)``."""
        return (
            f"{self.guarantee.value} held for {self.processor}: {self.coverage.summary()}, "
            f"seed {self.seed}"
        )


class _Failed(Exception):
    pass


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

    First the systematic phase (``systematic=False`` turns it off): every single fault at
    every fault point of small workloads, then bounded pairs, deterministic and seedless
    (:mod:`harness.search.systematic`); it takes at most three quarters of the budget. Then
    Hypothesis draws the rest, from ``seed`` (default: ``$HARNESS_SEED``, else derived from
    the processor's name), guided towards (fault, fault point) pairs not reached yet
    (:mod:`harness.search.guided`). Settings: a keyword, else ``settings`` (a door's), else
    ``HARNESS_<KEY>``, else ``profile``'s (``for_call``). On a failure (INVALID, or UNKNOWN, which
    fails closed) the schedule is shrunk, the replay file is written to ``failures_dir``
    (None: not written) and :class:`CounterexampleFound` is raised. Either way the result
    carries the fault coverage the search achieved. ``budget`` bounds every run
    (:class:`~harness.sim.budget.RunBudget`, default 1,000,000 calls and 60 s); a run over it
    ends UNKNOWN, and when it ran out of time the runs that shrink it get at most
    ``SHRINK_SECONDS`` (1 s) each. ``max_problems`` > 1 keeps searching after a failure, with
    the same budget each time, for failures that are another problem (another anomaly kind,
    or the same kind for another root fault: :mod:`harness.search.problems`), each shrunk and
    saved on its own; :class:`CounterexampleFound` then carries them all in ``failures``.
    """
    from harness.faults.kinds import fault_set
    from harness.settings import for_call

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
    guarantee = _guarantee(chosen.require_guarantee("explore(..., guarantee=...)"))
    topology, backend = topology or Topology(), BACKENDS[BACKENDS.index(chosen.backend)]
    if type(systematic) is not bool:
        raise ConfigError(f"systematic must be True or False, got {shown(systematic)}")
    name = processor_path(processor)
    seed = default_seed(name) if chosen.seed is None else chosen.seed
    start, failures_dir = _anchored(failures_dir)

    def search(problems: Problems) -> _Search:
        found = _Search(
            processor,
            name,
            guarantee,
            topology,
            backend,
            fault_set(chosen.faults),
            seed + len(problems.known),  # a search after a failure draws other schedules
            failures_dir,
            limit=chosen.run_budget,
            total=chosen.max_examples,
            problems=problems,
            start=start,
        )
        found.systematic(chosen.max_examples * 3 // 4 if systematic else 0)
        found.drawn(chosen.max_examples - found.ran, chosen.max_steps)
        return found

    done = _every_problem(search, chosen.max_problems)
    return Exploration(name, guarantee, done.ran, seed, done.coverage())


def _every_problem(search: Callable[[Problems], _Search], max_problems: int) -> _Search:
    """Search again after each failure, for problems not found yet, up to ``max_problems``;
    raise them all, or return the passing search."""
    problems = Problems()
    found: list[Failure] = []
    while True:
        try:
            done = search(problems)
        except CounterexampleFound as failed:
            found.append(failed.failure)
            problems.add(failed.failure.schedule, failed.failure.verdict)
            if len(found) < max_problems and not _ran_out(failed.failure.verdict):
                continue
            raise CounterexampleFound(found[0], found[1:]) from None
        if found:
            raise CounterexampleFound(found[0], found[1:])
        return done


def _ran_out(verdict: Verdict) -> bool:
    """Whether a failure is a run out of time: a processor that hangs would spend the whole
    run budget again in every further search, so none is started."""
    return any(TIME_RAN_OUT in reason for reason in verdict.reasons)


class _Search:
    """One exploration's state: the phases run in turn, and the failure path they share."""

    def __init__(
        self,
        processor: Processor,
        name: str,
        guarantee: Guarantee,
        topology: Topology,
        backend: Backend,
        faults: frozenset[Fault],
        seed: int,
        failures_dir: str | os.PathLike[str] | None,
        *,
        limit: RunBudget,
        total: int,
        problems: Problems | None = None,
        start: str | None = None,
    ) -> None:
        self.start = start
        """The working directory the search began in: a replay file's path is shown from it."""
        self.processor, self.name, self.guarantee = processor, name, guarantee
        self.topology, self.backend, self.faults = topology, backend, faults
        self.seed, self.failures_dir = seed, failures_dir
        self.plan: Plan | None = None
        self.ran = 0
        self.planned_ran = 0
        self.drawn_ran = 0
        self.failures = 0
        self.total = total
        """The schedules the whole search may run (for progress)."""
        self.limit = limit
        """What each run may spend (shorter for shrinking a run that ran out of time)."""
        self.started = time.perf_counter()
        self.problems = problems or Problems()
        """The problems found by earlier searches: a failure showing one of them is not one."""

    def run(self, schedule: Schedule) -> tuple[History, Verdict]:
        return run_once(
            self.processor,
            schedule,
            self.guarantee,
            topology=self.topology,
            backend=self.backend,
            budget=self.limit,
        )

    def is_new(self, schedule: Schedule, verdict: Verdict) -> bool:
        """Whether a failing run is not a problem an earlier search found."""
        return not self.problems.known or self.problems.is_new(
            schedule, verdict, lambda again: self.run(again)[1]
        )

    def searched(
        self, schedule: Schedule, history: History, verdict: Verdict, shrinking: bool
    ) -> bool:
        """Count one search run, report progress; True if it failed with a problem not known
        yet (the first failure sets the budget of the shrinking runs that follow)."""
        failed = verdict.status is not Status.VALID and self.is_new(schedule, verdict)
        if failed and not shrinking and self.failures == 0:
            self.limit = self.limit.for_shrinking(history.events[-1].detail)
        self.failures += failed
        stage = Stage.SHRINK if shrinking or failed else Stage.SEARCH
        notify(Tick(stage, self.ran, self.failures, self.total))
        return failed

    def coverage(self) -> Coverage:
        if self.plan is None:
            return Coverage(drawn=self.drawn_ran)
        return coverage(self.plan, self.planned_ran, self.drawn_ran)

    def systematic(self, limit: int) -> None:
        """Run the systematic phase's first ``limit`` schedules (0: skip the phase)."""
        if limit <= 0:
            return
        # the fault points are the same on every backend: probe and plan on the fast one
        self.plan = plan(self.processor, self.topology, self.faults, budget=self.limit)
        # a processor that hangs without faults hangs under them: a second a run is enough
        self.limit = self.limit.for_shrinking(self.plan.ran_out)
        for index, planned in enumerate(self.plan.schedules[:limit]):
            if index < self.problems.resume:  # an earlier search ran it: passed or known
                continue
            self.problems.resume = index + 1
            self.ran += 1
            self.planned_ran += 1
            history, verdict = self.run(planned.schedule)
            if self.searched(planned.schedule, history, verdict, shrinking=False):
                self.fail(planned.schedule, verdict, self.ran, time.perf_counter() - self.started)

    def drawn(self, budget: int, max_steps: int) -> None:
        """Let Hypothesis draw up to ``budget`` schedules (and shrink a failing one)."""
        if budget <= 0:
            return
        import hypothesis
        from hypothesis import HealthCheck, Phase, Verbosity

        from harness.search.guided import Guidance, Novelty, current
        from harness.strategies.schedules import schedules

        targeted = current() is Guidance.TARGET
        novelty = Novelty()
        found: dict[str, Any] = {"first": None, "last": None}

        @hypothesis.settings(
            max_examples=budget,
            deadline=None,
            database=None,
            derandomize=False,
            print_blob=False,
            verbosity=Verbosity.quiet,
            phases=(Phase.generate, Phase.target, Phase.shrink)
            if targeted
            else (Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        )
        @hypothesis.seed(self.seed)
        @hypothesis.given(schedules(self.topology, self.faults, max_steps=max_steps))
        def run(schedule: Schedule) -> None:
            self.ran += 1
            if found["first"] is None:
                self.drawn_ran += 1
            history, verdict = self.run(schedule)
            if targeted and found["first"] is None:
                hypothesis.target(novelty.score(history), label="novel fault points")
            if self.searched(schedule, history, verdict, shrinking=found["first"] is not None):
                if found["first"] is None:
                    found["first"] = (self.ran, time.perf_counter() - self.started)
                found["last"] = (schedule, verdict)
                raise _Failed

        try:
            run()
        except (_Failed, hypothesis.errors.Flaky):
            if found["last"] is None:  # a Flaky before any recorded failure is not ours
                raise
            schedule, verdict = found["last"]
            self.fail(schedule, verdict, *found["first"])

    def fail(self, schedule: Schedule, verdict: Verdict, first: int, seconds: float) -> NoReturn:
        """Shrink ``schedule`` further, save the replay file and raise the failure."""
        kinds = _failing_kinds(verdict)
        timed_out = any(TIME_RAN_OUT in reason for reason in verdict.reasons)

        def still_fails(candidate: Schedule) -> bool:
            _, again = self.run(candidate)
            return (
                again.status is verdict.status
                and _failing_kinds(again) == kinds
                and self.is_new(candidate, again)
            )

        schedule = simplify(schedule, still_fails)
        history, verdict = self.run(schedule)
        seen = rerun(
            self.processor,
            schedule,
            history,
            verdict,
            topology=self.topology,
            backend=self.backend,
            budget=self.limit,
            failed=True,
            timed_out=timed_out,
        )
        history, verdict = seen.history, seen.verdict  # a flaky processor's failure says so
        covered = self.coverage()
        spec = Replay(
            self.name,
            self.guarantee,
            self.topology,
            self.backend,
            schedule,
            _source_file(self.processor),
            self.seed,
            _factory(self.processor),
        )
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
                backend=self.backend,
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


def _guarantee(guarantee: object) -> Guarantee:
    return guarantee_of(guarantee)


def _failing_kinds(verdict: Verdict) -> frozenset[str]:
    return frozenset(anomaly.kind.value for anomaly in verdict.anomalies)


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
