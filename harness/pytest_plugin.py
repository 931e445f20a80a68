"""The pytest plugin: explore a processor from a test, with fixtures, a marker and options.

Registered through the ``pytest11`` entry point, so installing the package enables it. A test
asks for the ``harness_explore`` fixture and calls it like :func:`harness.explore`; the search
budget comes from a profile (``--harness-profile dev|ci|nightly``), the seed from
``--harness-seed``, and a ``@pytest.mark.harness(...)`` marker overrides both for one test. A
failing test shows the report of :class:`harness.CounterexampleFound` (verdict, anomalies with
witnesses, the shrunk schedule, the seed, the replay command) plus the pytest command that
replays it (``--harness-replay FILE``). ``--harness-report DIR`` also writes a JSON verdict and
the replay file per failing test.

Settings are resolved marker > command line > environment > ini file > profile default, and a
bad value's error says where it came from. Loading this module, and its hooks in a session
whose tests use no harness fixture or marker, import only the standard library, pytest,
``harness.errors`` and ``harness.search.profiles``: the engine (simulator, checker, runner,
Hypothesis), plyvel and pyspark are imported by the fixtures and the marker check that use
them (``tests/test_pytest_plugin.py`` holds this). Under pytest-xdist every worker writes to
its own directories (``tmp_path`` is already per worker; the Hypothesis example database is
``.hypothesis/harness/<worker>``); replay files are named by their content and report files
by the test's node id, so workers never write the same file. See ``docs/pytest.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shlex
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

import pytest

from harness._budget import DEFAULT_RUN_BUDGET, RunBudget
from harness._usage import did_you_mean
from harness.errors import ConfigError, HarnessError
from harness.search.profiles import DEFAULT_PROFILE, PROFILES, Profile

if TYPE_CHECKING:
    from harness._progress import Tick
    from harness.check import Guarantee
    from harness.engine import CounterexampleFound, Exploration, Failure, Replay
    from harness.faults.kinds import Fault
    from harness.faults.schedule import Schedule
    from harness.log.namespace import Namespace
    from harness.offsets.base import OffsetStore
    from harness.sim.simulator import Processor
    from harness.sim.topology import Topology
    from harness.sim.world import Backend, World

__all__ = [
    "HYPOTHESIS_PROFILES",
    "MARKER",
    "MARKER_HELP",
    "MARKER_SIGNATURE",
    "PROFILE_ENV",
    "PROFILE_HELP",
    "PROFILE_INI",
    "PROFILE_OPTION",
    "REPLAY_HELP",
    "REPLAY_OPTION",
    "REPORT_HELP",
    "REPORT_INI",
    "REPORT_OPTION",
    "SEED_ENV",
    "SEED_HELP",
    "SEED_INI",
    "SEED_OPTION",
    "Explorer",
    "HarnessSettings",
    "register_hypothesis_profiles",
]

# -- option names and help texts, shared by the command line, the ini file and the docs ---------

GROUP: Final = "harness"
GROUP_HELP: Final = "stream-harness: delivery guarantees under faults"

PROFILE_OPTION: Final = "--harness-profile"
PROFILE_INI: Final = "harness_profile"
PROFILE_ENV: Final = "HARNESS_PROFILE"
PROFILE_HELP: Final = (
    f"search budget of harness_explore: {', '.join(PROFILES)} "
    f"(default: ${PROFILE_ENV}, else the {PROFILE_INI} ini value, else {DEFAULT_PROFILE})"
)

SEED_OPTION: Final = "--harness-seed"
SEED_INI: Final = "harness_seed"
SEED_ENV: Final = "HARNESS_SEED"
SEED_HELP: Final = (
    f"seed of every exploration, an integer (default: ${SEED_ENV}, else the {SEED_INI} ini "
    "value, else one derived from each processor's name)"
)

REPLAY_OPTION: Final = "--harness-replay"
REPLAY_HELP: Final = (
    "replay this saved failing schedule instead of searching: each harness_explore call whose "
    "processor the file names runs that one schedule; the others are skipped"
)

REPORT_OPTION: Final = "--harness-report"
REPORT_INI: Final = "harness_report"
REPORT_HELP: Final = (
    "also write, per failing test, a JSON verdict and the replay file into this directory "
    "(created if needed)"
)

MARKER: Final = "harness"
_MARKER_KEYS: Final = (
    "profile",
    "max_examples",
    "max_steps",
    "backend",
    "faults",
    "seed",
    "run_calls",
    "run_seconds",
)
MARKER_SIGNATURE: Final = (
    "harness(*, profile=None, max_examples=None, max_steps=None, backend=None, faults=None, "
    "seed=None, run_calls=None, run_seconds=None)"
)
MARKER_HELP: Final = (
    f"{MARKER_SIGNATURE}: settings of harness_explore for this test; they win over "
    f"{PROFILE_OPTION} / {SEED_OPTION}, the environment and the ini file"
)

HYPOTHESIS_PROFILES: Final = {f"harness-{name}": name for name in PROFILES}
"""Hypothesis settings profiles registered by the plugin, by name -> harness profile."""

_WORKER_ENV: Final = "PYTEST_XDIST_WORKER"
_PYTEST_REPLAY_PROPERTY: Final = "harness_pytest_replay"
_COLLECTOR_NAME: Final = "harness-counterexamples"
_COVERAGE_PROPERTY: Final = "harness_coverage"
"""The user property carrying an exploration's fault coverage line (terminal summary)."""
_SOURCE_DEFAULT: Final = "default"


class _BadSetting(Exception):
    """A setting's value is wrong; the message names the value and where it came from."""


# -- settings -------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class HarnessSettings:
    """What ``harness_explore`` uses for one test, after marker, options, env and ini."""

    profile: Profile
    max_examples: int
    """Schedules drawn per exploration (the profile's, unless the marker says otherwise)."""
    max_steps: int
    seed: int | None
    """None: each processor's own default seed (derived from its name)."""
    backend: Backend | None
    """None: ``harness_explore`` uses the memory backend, the lower-level fixtures LevelDB."""
    faults: tuple[str, ...] | None
    """None: every fault."""
    run_budget: RunBudget = DEFAULT_RUN_BUDGET
    """What one simulated run may spend (the profile's, unless the marker says otherwise)."""


@dataclass(frozen=True, slots=True)
class _Run:
    """The session's settings, resolved once at configure time (per process)."""

    profile: Profile
    profile_source: str
    seed: int | None
    seed_source: str
    replay: Replay | None
    replay_path: Path | None
    report_dir: Path | None
    rootpath: Path
    """Failing schedules are saved below it (``runner.DEFAULT_FAILURES_DIR``)."""
    worker: str


_RUN: Final = pytest.StashKey[_Run]()
_SETTINGS: Final = pytest.StashKey[HarnessSettings]()


def _display(path: Path, base: Path) -> Path:
    """``path`` relative to ``base`` when it lies below it (shorter commands), else absolute."""
    try:
        return path.relative_to(base)
    except ValueError:
        return path


def _check_profile(value: object, where: str) -> Profile:
    if isinstance(value, str) and value in PROFILES:
        return PROFILES[value]
    raise _BadSetting(f"{where}: choose one of {', '.join(PROFILES)}")


def _parse_seed(value: str, where: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise _BadSetting(f"{where}: the seed must be an integer") from None


@dataclass(frozen=True, slots=True)
class _Given:
    """A value from the command line, the environment or the ini file, and where it was."""

    value: str
    source: str
    """``command line``, ``environment`` or the ini file's name (for the run's header)."""
    where: str
    """How an error names it: ``--harness-profile 'fast' (command line)``."""
    ini: bool = False


def _given(config: pytest.Config, option: str, env: str | None, ini: str) -> _Given | None:
    """The first of command line, environment and ini file that sets the value."""
    value = config.getoption(option)
    if value is not None:
        return _Given(str(value), "command line", f"{option} {str(value)!r} (command line)")
    if env is not None and os.environ.get(env):
        value = os.environ[env]
        return _Given(value, "environment", f"{env}={value!r} (environment)")
    raw = config.getini(ini)
    if isinstance(raw, str) and raw.strip():
        value = raw.strip()
        file = config.inipath.name if config.inipath is not None else "ini file"
        return _Given(value, file, f"{ini} = {value!r} ({file})", ini=True)
    return None


def _worker(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, Mapping) and "workerid" in workerinput:
        return str(workerinput["workerid"])
    return os.environ.get(_WORKER_ENV) or "main"


def _resolve_run(config: pytest.Config) -> _Run:
    invocation = config.invocation_params.dir
    given = _given(config, PROFILE_OPTION, PROFILE_ENV, PROFILE_INI)
    chosen = (
        PROFILES[DEFAULT_PROFILE] if given is None else _check_profile(given.value, given.where)
    )
    profile_source = _SOURCE_DEFAULT if given is None else given.source

    given = _given(config, SEED_OPTION, SEED_ENV, SEED_INI)
    seed = None if given is None else _parse_seed(given.value, given.where)
    seed_source = _SOURCE_DEFAULT if given is None else given.source

    replay: Replay | None = None
    replay_path: Path | None = None
    replay_option = config.getoption(REPLAY_OPTION)
    if replay_option is not None:
        replay_path = invocation / replay_option
        from harness.engine import Replay  # the engine, only when a replay is asked for

        try:
            replay = Replay.load(replay_path)
        except ConfigError as exc:
            raise _BadSetting(f"{REPLAY_OPTION} {replay_option!r} (command line): {exc}") from None

    report_dir: Path | None = None
    given = _given(config, REPORT_OPTION, None, REPORT_INI)
    if given is not None:
        # relative to where pytest started; an ini value, to the ini file's directory
        base = invocation
        if given.ini:
            base = config.inipath.parent if config.inipath is not None else config.rootpath
        report_dir = base / given.value
        if report_dir.exists() and not report_dir.is_dir():
            raise _BadSetting(f"{given.where}: {str(report_dir)!r} is not a directory")

    return _Run(
        profile=chosen,
        profile_source=profile_source,
        seed=seed,
        seed_source=seed_source,
        replay=replay,
        replay_path=replay_path,
        report_dir=report_dir,
        rootpath=config.rootpath,
        worker=_worker(config),
    )


def _marker_values(item: pytest.Item) -> dict[str, tuple[object, str]]:
    """The marker's keyword arguments, the closest marker winning, each with where it is."""
    values: dict[str, tuple[object, str]] = {}
    for mark in item.iter_markers(MARKER):
        if mark.args:
            raise _BadSetting(
                f"@pytest.mark.harness{mark.args!r} (marker on {item.nodeid}): the marker takes "
                f"keyword arguments only: {MARKER_SIGNATURE}"
            )
        unknown = sorted(set(mark.kwargs) - set(_MARKER_KEYS))
        if unknown:
            raise _BadSetting(
                f"@pytest.mark.harness({unknown[0]}=...) (marker on {item.nodeid}): unknown "
                f"argument {unknown[0]!r}; the marker is {MARKER_SIGNATURE}"
            )
        for key, value in mark.kwargs.items():
            if value is not None:
                where = f"@pytest.mark.harness({key}={value!r}) (marker on {item.nodeid})"
                values.setdefault(key, (value, where))
    return values


def _positive(value: object, where: str) -> int:
    if type(value) is not int or value < 1:
        raise _BadSetting(f"{where}: must be an int >= 1")
    return value


def _settings_for(item: pytest.Item) -> HarnessSettings:
    cached = item.stash.get(_SETTINGS, None)
    if cached is not None:
        return cached
    run = item.config.stash[_RUN]
    marked = _marker_values(item)
    chosen = run.profile
    if "profile" in marked:
        chosen = _check_profile(*marked["profile"])
    max_examples = chosen.max_examples
    if "max_examples" in marked:
        max_examples = _positive(*marked["max_examples"])
    max_steps = chosen.max_steps
    if "max_steps" in marked:
        max_steps = _positive(*marked["max_steps"])
    seed = run.seed
    if "seed" in marked:
        value, where = marked["seed"]
        if type(value) is not int:
            raise _BadSetting(f"{where}: the seed must be an int")
        seed = value
    backend: Backend | None = None
    if "backend" in marked:
        from harness.sim.world import BACKENDS

        value, where = marked["backend"]
        if value not in BACKENDS:
            raise _BadSetting(f"{where}: choose one of {', '.join(BACKENDS)}")
        backend = value
    faults: tuple[str, ...] | None = None
    if "faults" in marked:
        value, where = marked["faults"]
        faults = _check_faults(value, where)
    settings = HarnessSettings(
        chosen, max_examples, max_steps, seed, backend, faults, _run_budget(chosen, marked)
    )
    item.stash[_SETTINGS] = settings
    return settings


def _run_budget(chosen: Profile, marked: dict[str, tuple[object, str]]) -> RunBudget:
    calls, seconds = chosen.run_budget.calls, chosen.run_budget.seconds
    for key in ("run_calls", "run_seconds"):
        if key in marked:
            value, where = marked[key]
            try:
                RunBudget(**{key.removeprefix("run_"): value})  # type: ignore[arg-type]
            except ConfigError as exc:
                raise _BadSetting(f"{where}: {exc}") from None
            if key == "run_calls":
                calls = value  # type: ignore[assignment]
            else:
                seconds = value  # type: ignore[assignment]
    return RunBudget(calls=calls, seconds=seconds)


def _check_faults(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _BadSetting(f"{where}: faults must be a list of fault names, e.g. ['crash']")
    from harness.faults.kinds import Fault

    names: list[str] = []
    for fault in value:
        try:
            names.append(Fault(fault).value)
        except ValueError:
            names = sorted(f.value for f in Fault)
            raise _BadSetting(
                f"{where}: unknown fault {fault!r}{did_you_mean(str(fault), names)}; choose "
                f"from {names}"
            ) from None
    return tuple(names)


# -- hooks ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, GROUP_HELP)
    group.addoption(PROFILE_OPTION, metavar="NAME", default=None, help=PROFILE_HELP)
    group.addoption(SEED_OPTION, metavar="INT", default=None, help=SEED_HELP)
    group.addoption(REPLAY_OPTION, metavar="FILE", default=None, help=REPLAY_HELP)
    group.addoption(REPORT_OPTION, metavar="DIR", default=None, help=REPORT_HELP)
    parser.addini(PROFILE_INI, PROFILE_HELP, default="")
    parser.addini(SEED_INI, SEED_HELP, default="")
    parser.addini(REPORT_INI, REPORT_HELP, default="")


@pytest.hookimpl(tryfirst=True)  # before Hypothesis' own plugin loads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    try:
        config.stash[_RUN] = _resolve_run(config)
    except _BadSetting as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(_Counterexamples(), _COLLECTOR_NAME)
    wanted = config.getoption("hypothesis_profile", None)
    if "hypothesis" in sys.modules or (isinstance(wanted, str) and wanted in HYPOTHESIS_PROFILES):
        register_hypothesis_profiles(
            config.rootpath / ".hypothesis" / "harness", worker=config.stash[_RUN].worker
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    run = config.stash.get(_RUN, None)
    if run is None:
        return None
    if run.replay is not None and run.replay_path is not None:
        return (
            f"harness: replaying {_display(run.replay_path, config.invocation_params.dir)} "
            f"({run.replay.processor}, {len(run.replay.schedule)} steps)"
        )
    chosen = run.profile
    seed = "from each processor's name" if run.seed is None else f"{run.seed} ({run.seed_source})"
    return (
        f"harness: profile {chosen.name} ({run.profile_source}: {chosen.max_examples} schedules "
        f"of up to {chosen.max_steps} steps), seed {seed}"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Check a test's marker before its fixtures run, so a bad one fails with a clear message."""
    if item.get_closest_marker(MARKER) is None:
        return
    try:
        _settings_for(item)
    except _BadSetting as exc:
        pytest.fail(str(exc), pytrace=False)


@final
class _Counterexamples:
    """Collects the pytest replay commands of failing tests for the terminal summary; it runs
    in the xdist controller too, where workers' reports arrive with their user properties."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.coverage: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for name, value in report.user_properties:
                if name == _PYTEST_REPLAY_PROPERTY and report.failed:
                    self.commands.append(str(value))
                elif name == _COVERAGE_PROPERTY:
                    self.coverage.append(f"{report.nodeid}: {value}")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.coverage:
            terminalreporter.section("harness: fault coverage", sep="-")
            for line in self.coverage:
                terminalreporter.line(line)
        if self.commands:
            terminalreporter.section("harness: replay the counterexamples", sep="-")
            for command in self.commands:
                terminalreporter.line(command)


def pytest_unconfigure(config: pytest.Config) -> None:
    collector = config.pluginmanager.get_plugin(_COLLECTOR_NAME)
    if collector is not None:
        config.pluginmanager.unregister(collector)


# -- Hypothesis settings profiles -----------------------------------------------------------


def register_hypothesis_profiles(
    directory: str | os.PathLike[str] | None = None, *, worker: str | None = None
) -> None:
    """Register the Hypothesis settings profiles ``harness-dev``, ``harness-ci`` and
    ``harness-nightly`` for a suite's own ``@given`` tests (``harness_explore`` sets its own).

    Each has the harness profile's ``max_examples``, no deadline (simulated runs on LevelDB
    take as long as the disk does, so a deadline would measure the machine) and the
    ``too_slow`` and ``data_too_large`` health checks off (I/O-bound examples and long
    schedules are expected). ``harness-ci`` is derandomized with no example database,
    so a CI failure is the same on a laptop; ``harness-dev`` and ``harness-nightly`` keep
    failures in a per-worker database ``DIRECTORY/<worker>`` (default
    ``.hypothesis/harness``), which also reads the other workers' databases, so a failure found
    by one xdist worker is tried first by whichever worker runs that test next. The plugin
    calls this at configure time when Hypothesis is already imported or
    ``--hypothesis-profile harness-*`` is given; a conftest that loads one of the profiles
    itself calls it first. Registering does not load a profile.
    """
    from hypothesis import HealthCheck, settings
    from hypothesis.database import (
        DirectoryBasedExampleDatabase,
        ExampleDatabase,
        MultiplexedDatabase,
        ReadOnlyDatabase,
    )

    root = Path(".hypothesis", "harness") if directory is None else Path(directory)
    worker = worker or os.environ.get(_WORKER_ENV) or "main"
    others: list[ExampleDatabase] = []
    if root.is_dir():
        others = [
            ReadOnlyDatabase(DirectoryBasedExampleDatabase(path))
            for path in sorted(root.iterdir())
            if path.is_dir() and path.name != worker
        ]
    database = MultiplexedDatabase(DirectoryBasedExampleDatabase(root / worker), *others)
    for name, harness_name in HYPOTHESIS_PROFILES.items():
        chosen = PROFILES[harness_name]
        ci = harness_name == "ci"
        settings.register_profile(
            name,
            max_examples=chosen.max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            derandomize=ci,
            database=None if ci else database,
            print_blob=True,
        )


# -- the harness_explore fixture --------------------------------------------------------------


def _safe_name(nodeid: str) -> str:
    """A file name for ``nodeid``: readable, and unique through a short hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_.")[:100]
    digest = hashlib.sha256(nodeid.encode()).hexdigest()[:8]
    return f"{readable}-{digest}"


def _write_report(directory: Path, nodeid: str, failure: Failure, replay_json: Any) -> None:
    """Write ``<test>.json`` (verdict, replay, report), ``<test>.replay.json`` and the
    rendered report ``<test>.report.{txt,json,html}`` (docs/reports.md)."""
    from harness.report import gather, write_report

    directory.mkdir(parents=True, exist_ok=True)
    base = _safe_name(nodeid)
    replay_file = directory / f"{base}.replay.json"
    replay_file.write_text(json.dumps(replay_json, indent=2) + "\n", encoding="utf-8")
    document = {
        "harness_report": 1,
        "nodeid": nodeid,
        "processor": failure.processor,
        "guarantee": failure.guarantee.value,
        "backend": failure.backend,
        "status": failure.verdict.status.value,
        "verdict": failure.verdict.to_json(),
        "seed": failure.seed,
        "examples": failure.examples,
        "replay_file": str(replay_file),
        "replay_command": f"python -m harness replay {replay_file}",
        "replay": replay_json,
        "report": failure.report(),
    }
    path = directory / f"{base}.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    facts = gather(failure, title=nodeid, replay_command=document["replay_command"])
    write_report(directory, facts, name=f"{base}.report")


@final
class Explorer:
    """The value of the ``harness_explore`` fixture: call it like :func:`harness.explore`.

    ``explorer(processor, guarantee=...)`` returns the :class:`~harness.Exploration` when
    every schedule passed and raises :class:`~harness.CounterexampleFound` (an
    ``AssertionError``) with the report when one did not. Arguments given here win over the
    marker, which wins over the options; ``settings`` shows what applies.
    """

    def __init__(
        self,
        settings: HarnessSettings,
        *,
        nodeid: str,
        selector: str,
        run: _Run,
        invocation_dir: Path,
        user_properties: list[tuple[str, object]],
        config: pytest.Config | None = None,
    ) -> None:
        self.settings = settings
        self._config = config
        self._nodeid = nodeid
        self._selector = selector
        self._run = run
        self._invocation_dir = invocation_dir
        self._user_properties = user_properties

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"harness_explore(profile={s.profile.name!r}, max_examples={s.max_examples}, "
            f"max_steps={s.max_steps}, seed={s.seed!r})"
        )

    def __call__(
        self,
        processor: Processor,
        *,
        guarantee: Guarantee | str,
        topology: Topology | None = None,
        backend: Backend | None = None,
        faults: Iterable[Fault | str] | None = None,
        max_examples: int | None = None,
        max_steps: int | None = None,
        seed: int | None = None,
        max_problems: int | None = None,
    ) -> Exploration:
        __tracebackhide__ = True
        from harness.engine import CounterexampleFound, explore  # the engine, on first use
        from harness.search.problems import DEFAULT_MAX_PROBLEMS

        s = self.settings
        backend = backend or s.backend or "memory"
        if faults is None and s.faults is not None:
            faults = s.faults
        try:
            if self._run.replay is not None:
                return self._replay(processor, guarantee, topology, backend)
            with _TerminalProgress.for_test(self._config, self._nodeid):
                result = explore(
                    processor,
                    guarantee=guarantee,
                    topology=topology,
                    backend=backend,
                    max_examples=s.max_examples if max_examples is None else max_examples,
                    max_steps=s.max_steps if max_steps is None else max_steps,
                    faults=faults,
                    seed=s.seed if seed is None else seed,
                    failures_dir=self._failures_dir(),
                    budget=s.run_budget,
                    max_problems=DEFAULT_MAX_PROBLEMS if max_problems is None else max_problems,
                )
            self._user_properties.append((_COVERAGE_PROPERTY, result.summary()))
            return result
        except CounterexampleFound as found:
            coverage = found.failure.coverage.summary()
            self._user_properties.append((_COVERAGE_PROPERTY, f"failed after {coverage}"))
            self._found(found)
            raise found.with_traceback(None) from None
        except HarnessError as exc:  # a bad argument: the message says it, the stack does not
            raise exc.with_traceback(None) from None

    def _failures_dir(self) -> Path:
        """Relative (short commands) while the test runs where pytest started, else absolute."""
        from harness.engine.replay_file import DEFAULT_FAILURES_DIR

        failures_dir = self._run.rootpath / DEFAULT_FAILURES_DIR
        if Path.cwd() == self._invocation_dir:
            return _display(failures_dir, self._invocation_dir)
        return failures_dir

    def _found(self, found: CounterexampleFound) -> None:
        """Add the pytest replay command to the report; write the report files if asked."""
        failure = found.failure
        replay_file = failure.replay_file
        replay_json: Any = None
        if replay_file is not None:
            command = f"pytest {shlex.quote(self._selector)} {REPLAY_OPTION} {replay_file}"
            found.args = (f"{found.args[0]}\nreplay in pytest: {command}",)
            self._user_properties.append((_PYTEST_REPLAY_PROPERTY, command))
            self._user_properties.append(("harness_replay_file", str(replay_file)))
            replay_json = json.loads(
                (self._invocation_dir / replay_file).read_text(encoding="utf-8")
            )
        self._user_properties.append(("harness_seed", failure.seed))
        self._user_properties.append(("harness_verdict", failure.verdict.status.value))
        if self._run.report_dir is not None:
            _write_report(self._run.report_dir, self._nodeid, failure, replay_json)

    def _replay(
        self,
        processor: Processor,
        guarantee: Guarantee | str,
        topology: Topology | None,
        backend: Backend,
    ) -> Exploration:
        __tracebackhide__ = True
        from harness.check import Status
        from harness.engine import CounterexampleFound, Exploration, Failure, run_once
        from harness.sim.simulator import processor_path

        spec, path = self._run.replay, self._run.replay_path
        assert spec is not None and path is not None
        name = processor_path(processor)
        shown = _display(path, self._invocation_dir)
        if name != spec.processor:
            pytest.skip(f"{REPLAY_OPTION} {shown} replays {spec.processor}, not {name}")
        started = time.perf_counter()
        history, verdict = run_once(
            processor,
            spec.schedule,
            guarantee,
            topology=topology,
            backend=backend,
            budget=self.settings.run_budget,
        )
        seed = spec.seed if spec.seed is not None else 0
        if verdict.status is Status.VALID:
            return Exploration(name, verdict.guarantee, 1, seed)
        failure = Failure(
            processor=name,
            guarantee=verdict.guarantee,
            backend=backend,
            verdict=verdict,
            schedule=spec.schedule,
            history=history,
            seed=seed,
            examples=1,
            first_failure_example=1,
            first_failure_seconds=time.perf_counter() - started,
            replay_file=shown,
            replay_command=f"python -m harness replay {shown}",
        )
        found = CounterexampleFound(failure)
        found.args = (_replay_report(failure, shown),)
        raise found  # __call__ adds the pytest command and writes the report files


_PROGRESS_REFRESH: Final = 0.1
"""The progress text is redrawn at most this often (seconds)."""
_PROGRESS_MARGIN: Final = 2
"""Columns left free at the right: the text never reaches the terminal's last column, where
a terminal wraps or holds the cursor, so backspacing over it always lands where it began."""


def _progress_reporter(config: pytest.Config | None) -> pytest.TerminalReporter | None:
    """pytest's terminal reporter when live progress may be drawn on its line, else None.

    Only on a terminal, outside CI and ``TERM=dumb``, in the process that owns the terminal
    (not an xdist worker), below ``-qq``, with the test's output captured at the file
    descriptors (``-s`` or ``--capture=sys|tee-sys`` would let the test's own output land
    between the progress text and its erasure) and without live logging (``log_cli``, whose
    records pytest writes on the same line)."""
    if config is None or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return None
    reporter: pytest.TerminalReporter | None = config.pluginmanager.get_plugin("terminalreporter")
    if (
        reporter is None
        or not bool(reporter.isatty)
        or getattr(config, "workerinput", None) is not None  # an xdist worker
        or config.get_verbosity() < -1
        or config.pluginmanager.get_plugin("capturemanager") is None
        or config.getoption("capture", None) != "fd"
        or _live_logging(config)
    ):
        return None
    return reporter


def _live_logging(config: pytest.Config) -> bool:
    """Whether pytest writes log records to the terminal as they come (``log_cli``)."""
    if config.getoption("log_cli_level", None) is not None:
        return True
    try:
        return bool(config.getini("log_cli"))
    except ValueError:  # the logging plugin is off (-p no:logging)
        return False


def _progress_texts(name: str, tick: Tick, eta: str) -> list[str]:
    """What the progress says, longest first; the longest that fits is drawn."""
    stage = tick.stage.value
    count = f"{tick.schedules}/{tick.budget}" if stage == "search" else f"{tick.schedules}"
    failing = f"{tick.failures} failing"
    said = f"{stage} {count} schedules, {failing}{eta}"
    texts = [f"harness {name}: {said}"] if name else []
    shorter = (f"{count}, {failing}{eta}", f"{count}, {failing}", count)
    return [*texts, f"harness: {said}", *(f"harness: {stage} {text}" for text in shorter), count]


@final
class _TerminalProgress:
    """Live progress of a test's exploration, drawn on pytest's own current terminal line.

    The text goes after what pytest has written on that line (the file and the status letters
    so far; under ``-v`` the test's id), in the room left before the right margin, the longest
    form that fits (none if none does), and is taken back with backspaces and spaces before
    the exploration returns or raises: the cursor is then where pytest left it, the line holds
    only what pytest wrote, and pytest's next status letter or ``PASSED``/``FAILED`` lands
    where it would have. It is written with the reporter's ``write_raw``, so pytest's own
    account of the line (where its ``[ NN%]`` goes) is unchanged, and it never writes a
    carriage return or a newline. It appears once the exploration has run :attr:`delay`
    seconds, so quick tests show nothing. Should pytest's line change under it (a plugin
    writing through the reporter mid-test), it stops drawing and leaves that line alone.
    """

    delay: ClassVar[float] = 0.5
    """Seconds an exploration runs before its progress is first drawn."""

    def __init__(self, config: pytest.Config, reporter: pytest.TerminalReporter, nodeid: str):
        self._reporter = reporter
        self._writer = config.get_terminal_writer()
        self._capture: Any = config.pluginmanager.get_plugin("capturemanager")
        name = nodeid.rpartition("::")[2] or nodeid
        # the test's id is on the line already under -v; only printable ASCII, one column each
        self._name = "" if config.get_verbosity() > 0 else re.sub(r"[^ -~]", "?", name)
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._column: int | None = None
        """pytest's width of its line when the text was first drawn; None: not drawn yet."""
        self._width = 0
        """Columns the text on screen takes (the cursor is at its end)."""
        self._lost = False

    @staticmethod
    @contextmanager
    def for_test(config: pytest.Config | None, nodeid: str) -> Iterator[None]:
        """Draw the progress of the exploration run inside the block, when it may be drawn."""
        from harness._progress import watching

        reporter = _progress_reporter(config)
        if config is None or reporter is None:
            yield
            return
        progress = _TerminalProgress(config, reporter, nodeid)
        try:
            with watching(progress.tick):
                yield
        finally:
            progress.close()

    def _ours(self) -> bool:
        """Whether the line is still as pytest left it when the text was first drawn."""
        if self._column is not None and self._writer.width_of_current_line != self._column:
            self._lost = True
        return not self._lost

    def tick(self, tick: Tick) -> None:
        """Redraw the text, at most ten times a second, once the exploration is slow."""
        now = time.monotonic()
        elapsed = now - self._started
        if elapsed < self.delay or now - self._drawn_at < _PROGRESS_REFRESH or not self._ours():
            return
        self._drawn_at = now
        eta = ""
        if tick.stage.value == "search" and tick.schedules:
            left = max(tick.budget - tick.schedules, 0)
            eta = f", ETA {elapsed / tick.schedules * left:.0f} s"
        with self._capture.global_and_fixture_disabled():  # stdout: the terminal, not the test's
            column = self._writer.width_of_current_line if self._column is None else self._column
            # measured now: while the test's output is captured there is no terminal to measure
            room = self._writer.fullwidth - column - _PROGRESS_MARGIN - 1  # 1: a space before
            fitting = [t for t in _progress_texts(self._name, tick, eta) if len(t) <= room]
            if fitting or self._column is not None:
                self._column = column
                self._replace(f" {fitting[0]}" if fitting else "")

    def _replace(self, text: str) -> None:
        """Put ``text`` where the previous text was; spaces over what it does not cover."""
        spill = max(self._width - len(text), 0)
        shown = self._writer.markup(text, light=True) if text else ""
        self._reporter.write_raw("\b" * self._width + shown + " " * spill + "\b" * spill)
        self._reporter.flush()
        self._width = len(text)

    def close(self) -> None:
        """Take the text back: spaces over it, the cursor where pytest left it."""
        if self._width and self._ours():
            with self._capture.global_and_fixture_disabled():
                self._replace("")


def _replay_report(failure: Failure, path: Path) -> str:
    from harness.check import Status

    held = "does NOT hold" if failure.verdict.status is Status.INVALID else "could not be shown"
    schedule: Schedule = failure.schedule
    return "\n".join(
        [
            f"{failure.guarantee.value} {held} for {failure.processor} ({failure.backend} "
            f"backend): {failure.verdict.status.name}, replaying {path}",
            failure.verdict.summary(),
            f"schedule ({len(schedule)} steps):",
            schedule.describe(failure.history.meta.extra.get("stops")),
            f"replay: {failure.replay_command}",
        ]
    )


def _selector(item: pytest.Item, invocation_dir: Path) -> str:
    """The test's node id with its file relative to where pytest was started (the node id's
    is relative to the rootdir), so that the printed command runs from the same place."""
    _, colons, rest = item.nodeid.partition("::")
    return f"{_display(item.path, invocation_dir).as_posix()}{colons}{rest}"


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def harness_settings(request: pytest.FixtureRequest) -> HarnessSettings:
    """The settings this test's ``harness_explore`` uses (marker > options > env > ini)."""
    try:
        return _settings_for(request.node)
    except _BadSetting as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def harness_explore(request: pytest.FixtureRequest, harness_settings: HarnessSettings) -> Explorer:
    """``harness_explore(processor, guarantee=..., topology=None, backend=None, faults=None)``:
    explore the processor under drawn schedules; fail the test with the shrunk counterexample."""
    config = request.config
    return Explorer(
        harness_settings,
        nodeid=request.node.nodeid,
        selector=_selector(request.node, config.invocation_params.dir),
        run=config.stash[_RUN],
        invocation_dir=config.invocation_params.dir,
        user_properties=request.node.user_properties,
        config=config,
    )


@pytest.fixture
def harness_backend(harness_settings: HarnessSettings) -> Backend:
    """The backend of the lower-level fixtures: the marker's, else ``"leveldb"``.
    Parametrize it (``@pytest.mark.parametrize("harness_backend", ["memory", "leveldb"])``)
    to run a test on both."""
    return harness_settings.backend or "leveldb"


@pytest.fixture
def harness_topology() -> Topology:
    """The topology of ``harness_world``: ``Topology()`` unless a test module overrides it."""
    from harness.sim.topology import Topology

    return Topology()


@pytest.fixture
def harness_namespace(harness_backend: Backend, tmp_path: Path) -> Iterator[Namespace]:
    """A reference-log namespace of its own (LevelDB in ``tmp_path``), closed afterwards."""
    from harness.log.namespace import leveldb_uri, open_namespace

    if harness_backend == "memory":
        from harness.log.storage.memory import forget_memory_namespaces

        name = f"harness-{uuid.uuid4().hex}"
        try:
            with open_namespace(f"distributedlog-memory://{name}") as namespace:
                yield namespace
        finally:
            forget_memory_namespaces(name)
    else:
        with open_namespace(leveldb_uri(tmp_path / "namespace")) as namespace:
            yield namespace


@pytest.fixture
def harness_offset_store(harness_backend: Backend, tmp_path: Path) -> Iterator[OffsetStore]:
    """An empty offset store of its own (LevelDB in ``tmp_path``, unsynced), closed afterwards."""
    from harness.offsets import forget_memory_offset_storages, open_offset_store

    if harness_backend == "memory":
        name = f"harness-{uuid.uuid4().hex}"
        store = open_offset_store(f"memory://{name}")
        try:
            yield store
        finally:
            store.close()
            forget_memory_offset_storages(name)
    else:
        store = open_offset_store(tmp_path / "offsets")
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def harness_world(
    harness_topology: Topology, harness_backend: Backend, tmp_path: Path
) -> Iterator[World]:
    """A simulator :class:`~harness.sim.World` on ``harness_topology``, closed afterwards."""
    from harness.sim.world import World

    directory = tmp_path / "world" if harness_backend == "leveldb" else None
    world = World(harness_topology, harness_backend, directory=directory)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def harness_kafka(harness_explore: Explorer) -> Any:
    """Explore an unchanged Kafka client app: ``harness.kafka.pytest_support`` (lazy)."""
    from harness.kafka.pytest_support import KafkaExplorer

    return KafkaExplorer(harness_explore)


@pytest.fixture
def harness_spark_job(harness_spark: Any, tmp_path: Any) -> Any:
    """Explore an unchanged PySpark job on the test process's session:
    ``harness.spark.streaming.jobsearch.JobExplorer`` (lazy)."""
    from harness.spark.streaming.jobsearch import JobExplorer

    return JobExplorer(harness_spark, tmp_path)


@pytest.fixture(scope="session")
def harness_spark() -> Iterator[Any]:
    """One local SparkSession per test process, so one per xdist worker; skipped without
    pyspark or a Java runtime. Built by ``harness.spark.session.spark_session()``."""
    pytest.importorskip(
        "pyspark", reason="harness_spark needs pyspark: pip install 'stream-harness[spark]'"
    )
    java = importlib.import_module("harness.spark.java")
    try:
        java.java_info()
    except java.JavaUnavailable as exc:
        pytest.skip(f"harness_spark: {exc}")
    module = importlib.import_module("harness.spark.session")
    session = module.spark_session()
    try:
        yield session
    finally:
        module.stop_spark_session()
