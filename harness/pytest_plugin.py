"""The pytest plugin: explore a processor from a test, with fixtures, a marker and options.

Registered through the ``pytest11`` entry point, so installing the package enables it. A test
asks for the ``harness_explore`` fixture and calls it like :func:`harness.explore`; the search
budget comes from a profile (``--harness-profile dev|ci|nightly``), the seed from
``--harness-seed``, and a ``@pytest.mark.harness(...)`` marker overrides both for one test. A
failing test shows the report of :class:`harness.CounterexampleFound` (verdict, anomalies with
witnesses, the shrunk schedule, the seed, the replay command) plus the pytest command that
replays it (``--harness-replay FILE``). ``--harness-report-dir DIR`` also writes a JSON verdict
and the replay file per failing test.

Settings are resolved by :mod:`harness.settings`, the one precedence of every door: the call's
arguments > marker > ``--harness-*`` options > ``HARNESS_*`` variables > ``harness_*`` ini keys >
profile > default (docs/settings.md), and a bad value's error says where it came from.
Loading this module, and its hooks in a session whose tests use no harness fixture or marker,
import only the standard library, pytest, ``harness.errors``, ``harness.settings`` and what it
builds on (``harness.search.profiles``, ``harness._budget``, ``harness._shown``): the engine
(simulator, checker, runner, Hypothesis), plyvel and pyspark are imported by the fixtures and
the marker check that use them (``tests/test_pytest_plugin.py`` holds this). Under
pytest-xdist every worker writes to its own directories (``tmp_path`` is already per worker;
the Hypothesis example database is ``.hypothesis/harness/<worker>``); replay files are named
by their content and report files by the test's node id, so workers never write the same
file. See ``docs/pytest.md``.
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
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

import pytest

from harness._shown import shown
from harness.errors import ConfigError, HarnessError
from harness.search.profiles import DEFAULT_PROFILE, PROFILES
from harness.settings import (
    BACKENDS,
    DEFAULT_MAX_PROBLEMS,
    ENV_KEYS,
    KEYS,
    BadSetting,
    Layer,
    Settings,
    env_name,
    environment,
    ini_name,
    resolve,
)

if TYPE_CHECKING:
    from harness._progress import Tick
    from harness.check import Guarantee
    from harness.engine import CounterexampleFound, Exploration, Failure, Replay
    from harness.engine.replay_file import SystemReplay
    from harness.faults.kinds import Fault
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

SESSION_KEYS: Final = tuple(k for k in ENV_KEYS if k != "json")
"""The settings a pytest run takes from ``--harness-<key>`` options and ``harness_<key>`` ini
options (the guarantee is a test's own; JSON is no pytest output)."""
MARKER_KEYS: Final = tuple(k for k in KEYS if k not in ("json", "report_dir"))
"""The settings ``@pytest.mark.harness(...)`` takes."""


def option_name(key: str) -> str:
    """``max_examples`` -> ``--harness-max-examples``."""
    return "--harness-" + key.replace("_", "-")


_PYTEST_REPEAT: Final = option_name("seed") + " {seed}"
"""How a failure's report spells the seed that repeats its search, in a test."""
PROFILE_OPTION: Final = option_name("profile")
PROFILE_INI: Final = ini_name("profile")
PROFILE_ENV: Final = env_name("profile")
PROFILE_HELP: Final = (
    f"search budget of harness_explore: {', '.join(PROFILES)} "
    f"(default: ${PROFILE_ENV}, else the {PROFILE_INI} ini value, else {DEFAULT_PROFILE})"
)

SEED_OPTION: Final = option_name("seed")
SEED_INI: Final = ini_name("seed")
SEED_ENV: Final = env_name("seed")
SEED_HELP: Final = (
    f"seed of every exploration, an integer (default: ${SEED_ENV}, else the {SEED_INI} ini "
    "value, else one derived from each processor's name)"
)

REPLAY_OPTION: Final = "--harness-replay"
REPLAY_HELP: Final = (
    "replay this saved failing schedule instead of searching: each harness_explore call whose "
    "processor the file names runs that one schedule; the others are skipped"
)

REPORT_OPTION: Final = option_name("report_dir")
REPORT_INI: Final = ini_name("report_dir")
REPORT_ALIAS: Final = "--harness-report"
"""The old spelling of :data:`REPORT_OPTION` (and ``harness_report`` of the ini key), still
read: docs and CI files of earlier releases use it."""
REPORT_HELP: Final = (
    "also write, per failing test, a JSON verdict and the replay file into this directory "
    "(created if needed)"
)

_OPTION_HELP: Final = {
    "profile": PROFILE_HELP,
    "seed": SEED_HELP,
    "report_dir": REPORT_HELP,
    "max_examples": "schedules per exploration (default: the profile's)",
    "max_steps": "the longest drawn schedule (default: the profile's)",
    "faults": "comma-separated faults to inject (default: every fault)",
    "run_calls": "calls into the world one run may make before it ends UNKNOWN",
    "run_seconds": "wall-clock seconds one run may take before it ends UNKNOWN",
    "backend": f"backend of harness_explore: {', '.join(BACKENDS)} (default memory)",
    "max_problems": f"distinct problems to look for (default {DEFAULT_MAX_PROBLEMS})",
}

MARKER: Final = "harness"
MARKER_SIGNATURE: Final = f"harness(*, {', '.join(f'{key}=None' for key in MARKER_KEYS)})"
MARKER_HELP: Final = (
    f"{MARKER_SIGNATURE}: settings of harness_explore for this test; they win over the "
    "--harness-* options, the environment and the ini file (docs/settings.md)"
)

HYPOTHESIS_PROFILES: Final = {f"harness-{name}": name for name in PROFILES}
"""Hypothesis settings profiles registered by the plugin, by name -> harness profile."""

_WORKER_ENV: Final = "PYTEST_XDIST_WORKER"
_PYTEST_REPLAY_PROPERTY: Final = "harness_pytest_replay"
_COLLECTOR_NAME: Final = "harness-counterexamples"
_COVERAGE_PROPERTY: Final = "harness_coverage"
"""The user property carrying an exploration's fault coverage line (terminal summary)."""


class _BadSetting(Exception):
    """A setting's value is wrong; the message names the value and where it came from."""


# -- settings -------------------------------------------------------------------------------

HarnessSettings = Settings
"""What ``harness_explore`` uses for one test: :class:`harness.settings.Settings` (the name
the plugin's docs used first)."""


@dataclass(frozen=True, slots=True)
class _Run:
    """The session's settings, resolved once at configure time (per process)."""

    layers: tuple[Layer, ...]
    """The command line, the environment and the ini file, each test's marker goes above."""
    settings: Settings
    """The session's settings without any marker (the run's header)."""
    replay: Replay | SystemReplay | None
    """``--harness-replay``'s file: a processor's (``harness_explore`` runs it) or another
    system's (an unchanged Spark job's: ``harness_spark_job`` runs it)."""
    replay_path: Path | None
    rootpath: Path
    """Failing schedules are saved below it (``runner.DEFAULT_FAILURES_DIR``)."""
    worker: str

    @property
    def report_dir(self) -> Path | None:
        return self.settings.report_dir


_RUN: Final = pytest.StashKey[_Run]()
_SETTINGS: Final = pytest.StashKey[Settings]()


def _display(path: Path, base: Path) -> Path:
    """``path`` relative to ``base`` when it lies below it (shorter commands), else absolute."""
    try:
        return path.relative_to(base)
    except ValueError:
        return path


def _worker(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, Mapping) and "workerid" in workerinput:
        return str(workerinput["workerid"])
    return os.environ.get(_WORKER_ENV) or "main"


def _ini(config: pytest.Config, key: str) -> str | None:
    names = (ini_name(key), "harness_report") if key == "report_dir" else (ini_name(key),)
    for name in names:
        raw = config.getini(name)
        if isinstance(raw, str) and raw.strip():
            return raw.strip()
    return None


def _session_layers(config: pytest.Config) -> tuple[Layer, ...]:
    """The command line's ``--harness-*`` options, the environment's ``HARNESS_*`` variables
    and the ini file's ``harness_*`` keys, each value named as an error shows it; a report
    directory is made absolute (relative to where pytest started, an ini file's to its
    directory)."""
    invocation = config.invocation_params.dir
    file = config.inipath.name if config.inipath is not None else "ini file"
    ini_base = config.inipath.parent if config.inipath is not None else config.rootpath
    options: dict[str, object] = {}
    ini: dict[str, object] = {}
    for key in SESSION_KEYS:
        value = config.getoption(option_name(key))
        if value is not None:
            options[key] = invocation / value if key == "report_dir" else value
        raw = _ini(config, key)
        if raw is not None:
            ini[key] = ini_base / raw if key == "report_dir" else raw
    env = environment()
    env_values = dict(env.values)
    if "report_dir" in env_values:
        env_values["report_dir"] = invocation / str(env_values["report_dir"])
    env_values.pop("json", None)
    return (
        Layer(
            "command line",
            options,
            {k: f"{option_name(k)} {shown(str(v))} (command line)" for k, v in options.items()},
            text=True,
        ),
        Layer("environment", env_values, env.where, text=True),
        Layer(
            "file",
            ini,
            {k: f"{ini_name(k)} = {_ini(config, k)!r} ({file})" for k in ini},
            text=True,
        ),
    )


def _resolve_run(config: pytest.Config) -> _Run:
    invocation = config.invocation_params.dir
    try:
        layers = _session_layers(config)
        settings = resolve(*layers)
    except BadSetting as exc:
        raise _BadSetting(str(exc)) from None
    report_dir = settings.report_dir
    if report_dir is not None and report_dir.exists() and not report_dir.is_dir():
        where = {layer.source: layer for layer in layers}[settings.source("report_dir")]
        raise _BadSetting(f"{where.named('report_dir')}: {str(report_dir)!r} is not a directory")

    replay: Replay | SystemReplay | None = None
    replay_path: Path | None = None
    replay_option = config.getoption(REPLAY_OPTION)
    if replay_option is not None:
        replay_path = invocation / replay_option
        # the engine, only when a replay is asked for
        from harness.engine.replay_file import load_replay

        try:
            replay = load_replay(replay_path)
        except ConfigError as exc:
            raise _BadSetting(f"{REPLAY_OPTION} {replay_option!r} (command line): {exc}") from None

    return _Run(
        layers=layers,
        settings=settings,
        replay=replay,
        replay_path=replay_path,
        rootpath=config.rootpath,
        worker=_worker(config),
    )


def _marker_layer(item: pytest.Item) -> Layer:
    """The marker's keyword arguments, the closest marker winning, each with where it is."""
    values: dict[str, object] = {}
    where: dict[str, str] = {}
    for mark in item.iter_markers(MARKER):
        if mark.args:
            raise _BadSetting(
                f"@pytest.mark.harness{mark.args!r} (marker on {item.nodeid}): the marker takes "
                f"keyword arguments only: {MARKER_SIGNATURE}"
            )
        unknown = sorted(set(mark.kwargs) - set(MARKER_KEYS))
        if unknown:
            raise _BadSetting(
                f"@pytest.mark.harness({unknown[0]}=...) (marker on {item.nodeid}): unknown "
                f"argument {unknown[0]!r}; the marker is {MARKER_SIGNATURE}"
            )
        for key, value in mark.kwargs.items():
            if value is not None and key not in values:
                values[key] = value
                where[key] = f"@pytest.mark.harness({key}={shown(value)}) (marker on {item.nodeid})"
    return Layer("marker", values, where)


def _settings_for(item: pytest.Item) -> Settings:
    cached = item.stash.get(_SETTINGS, None)
    if cached is not None:
        return cached
    run = item.config.stash[_RUN]
    try:
        settings = resolve(_marker_layer(item), *run.layers)
    except BadSetting as exc:
        raise _BadSetting(str(exc)) from None
    item.stash[_SETTINGS] = settings
    return settings


# -- hooks ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, GROUP_HELP)
    for key in SESSION_KEYS:
        names = (option_name(key), REPORT_ALIAS) if key == "report_dir" else (option_name(key),)
        metavar = {
            "profile": "NAME",
            "report_dir": "DIR",
            "faults": "A,B",
            "backend": "NAME",
            "seed": "INT",
            "run_seconds": "S",
        }
        group.addoption(
            *names,
            dest=option_name(key),
            metavar=metavar.get(key, "N"),
            default=None,
            help=_OPTION_HELP[key],
        )
        parser.addini(ini_name(key), _OPTION_HELP[key], default="")
    parser.addini("harness_report", f"the old name of {REPORT_INI}", default="")
    group.addoption(REPLAY_OPTION, metavar="FILE", default=None, help=REPLAY_HELP)


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
    chosen = run.settings
    file = config.inipath.name if config.inipath is not None else "ini file"

    def source(key: str) -> str:
        return file if chosen.source(key) == "file" else chosen.source(key)

    seed = (
        "from each processor's name" if chosen.seed is None else f"{chosen.seed} ({source('seed')})"
    )
    return (
        f"harness: profile {chosen.profile.name} ({source('profile')}: "
        f"{chosen.max_examples} schedules of up to {chosen.max_steps} steps), seed {seed}"
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
        settings: Settings,
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
        guarantee: Guarantee | str | None = None,
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

        s = self.settings
        try:
            if self._run.replay is not None:
                chosen = guarantee or s.require_guarantee(
                    "a guarantee (harness_explore(guarantee=...) or the marker's)"
                )
                on: Backend = "leveldb" if s.backend == "leveldb" else "memory"
                return self._replay(processor, chosen, topology, backend or on)
            with _TerminalProgress.for_test(self._config, self._nodeid):
                result = explore(
                    processor,
                    guarantee=guarantee,
                    topology=topology,
                    backend=backend,
                    max_examples=max_examples,
                    max_steps=max_steps,
                    faults=faults,
                    seed=seed,
                    failures_dir=self._failures_dir(),
                    max_problems=max_problems,
                    settings=s,
                )
            self._user_properties.append((_COVERAGE_PROPERTY, result.summary()))
            return result
        except CounterexampleFound as found:
            coverage = found.failure.coverage.summary()
            self._user_properties.append((_COVERAGE_PROPERTY, f"failed after {coverage}"))
            if self._run.replay is None:  # a search's report: the seed in pytest's words
                found.args = (found.report(repeat=_PYTEST_REPEAT),)
            self._found(found)
            raise found.with_traceback(None) from None
        except HarnessError as exc:  # a bad argument: the message says it, the stack does not
            raise exc.with_traceback(None) from None

    def searching(self) -> AbstractContextManager[None]:
        """The progress this test's exploration draws while the block runs (another door's
        search, such as ``harness_spark_job``'s, shows it the same way)."""
        return _TerminalProgress.for_test(self._config, self._nodeid)

    def failures_dir(self) -> Path:
        """Where this test's replay files go (``.harness/failures`` under the rootdir)."""
        return self._failures_dir()

    def found(self, found: CounterexampleFound, summary: str) -> None:
        """Record another door's counterexample as this fixture records its own: the test's
        properties (coverage ``summary``, seed, verdict, replay file) and, with a report
        directory, the report files."""
        self._user_properties.append((_COVERAGE_PROPERTY, f"failed after {summary}"))
        found.args = (found.report(repeat=_PYTEST_REPEAT),)
        self._found(found)

    def system_replay(self, name: str) -> SystemReplay | None:
        """The other system's replay file ``--harness-replay`` gives, for the door that runs
        ``name`` (a Spark job's app): None when no file is replayed; the test is skipped when
        the file replays something else, as :meth:`__call__` skips a processor's."""
        from harness.engine import Replay

        spec, path = self._run.replay, self._run.replay_path
        if spec is None or path is None:
            return None
        if isinstance(spec, Replay) or spec.processor != name:
            shown = _display(path, self._invocation_dir)
            pytest.skip(f"{REPLAY_OPTION} {shown} replays {spec.processor}, not {name}")
        return spec

    def replay_failed(self, failure: Failure) -> CounterexampleFound:
        """The error that fails the test when another door's replay of ``--harness-replay``'s
        file failed, reported as this fixture reports its own replay (the file, the commands
        that run it again, the test's properties, the report files if asked)."""
        from harness.engine import CounterexampleFound

        path = self._run.replay_path
        assert path is not None
        shown = _display(path, self._invocation_dir)
        failure = replace(
            failure, replay_file=shown, replay_command=f"python -m harness replay {shown}"
        )
        found = CounterexampleFound(failure)
        found.args = (_replay_report(failure, shown),)
        self._user_properties.append((_COVERAGE_PROPERTY, "failed on replaying its file"))
        self._found(found)
        return found

    def _failures_dir(self) -> Path:
        """Relative (short commands) while the test runs where pytest started, else absolute."""
        from harness.engine.replay_file import DEFAULT_FAILURES_DIR

        failures_dir = self._run.rootpath / DEFAULT_FAILURES_DIR
        if Path.cwd() == self._invocation_dir:
            return _display(failures_dir, self._invocation_dir)
        return failures_dir

    def _found(self, found: CounterexampleFound) -> None:
        """Add the pytest replay command to the report (every door's file is one
        ``--harness-replay`` reads); write the report files if asked."""
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
        from harness.engine import CounterexampleFound, Exploration, Failure, Replay, run_once
        from harness.sim.simulator import processor_path

        spec, path = self._run.replay, self._run.replay_path
        assert spec is not None and path is not None
        name = processor_path(processor)
        shown = _display(path, self._invocation_dir)
        if not isinstance(spec, Replay) or name != spec.processor:
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
    where it would have. It goes through the reporter's own writer (as ``write_raw`` does), so
    pytest's account of the line (where its ``[ NN%]`` goes) is unchanged; it never writes a
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
        self._write_raw("\b" * self._width + shown + " " * spill + "\b" * spill)
        self._width = len(text)

    def _write_raw(self, text: str) -> None:
        """``text`` to the terminal as it is, outside pytest's account of the line (its
        width stays what pytest wrote): the writer's ``write_raw`` (pytest >= 8.1), else the
        file it writes to (pytest 8.0, whose ``write`` would count the text in)."""
        raw = getattr(self._writer, "write_raw", None)
        if raw is not None:
            raw(text, flush=True)
            return
        self._writer._file.write(text)
        self._writer.flush()

    def close(self) -> None:
        """Take the text back: spaces over it, the cursor where pytest left it."""
        if self._width and self._ours():
            with self._capture.global_and_fixture_disabled():
                self._replace("")


def _replay_report(failure: Failure, path: Path) -> str:
    from harness.check import Status

    held = "does NOT hold" if failure.verdict.status is Status.INVALID else "could not be shown"
    schedule = failure.schedule
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
def harness_settings(request: pytest.FixtureRequest) -> Settings:
    """The settings this test's ``harness_explore`` uses (marker > options > env > ini)."""
    try:
        return _settings_for(request.node)
    except _BadSetting as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def harness_explore(request: pytest.FixtureRequest, harness_settings: Settings) -> Explorer:
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
def harness_backend(harness_settings: Settings) -> Backend:
    """The backend of the lower-level fixtures: the one the settings give (marker, option,
    environment, ini file), else ``"leveldb"``. Parametrize it
    (``@pytest.mark.parametrize("harness_backend", ["memory", "leveldb"])``) to run a test
    on both."""
    if harness_settings.source("backend") == "default":
        return "leveldb"
    return "leveldb" if harness_settings.backend == "leveldb" else "memory"


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
def harness_spark_job(harness_spark: Any, harness_explore: Explorer, tmp_path: Any) -> Any:
    """Explore an unchanged PySpark job on the test process's session, through
    ``harness_explore``'s front (settings, progress, replay files, report files):
    ``harness.spark.streaming.jobsearch.JobExplorer`` (lazy)."""
    from harness.spark.streaming.jobsearch import JobExplorer

    return JobExplorer(harness_spark, tmp_path, harness_explore)


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
