"""One settings value, one precedence, every door (issue 30, item 1).

:mod:`harness.settings` resolves every key once: argument > marker > command line >
environment > file > profile > default. These tests hold the precedence key by key, the
errors (a typed ``BadSetting`` naming the value, its source and the choices), the shared
spellings, and, end to end, that every door given the same settings runs the same search:
``explore()``, ``python -m harness run`` with flags, the same with ``HARNESS_*`` variables,
and ``harness_explore`` under a ``@pytest.mark.harness`` marker or ``--harness-*`` options,
all find the same shrunk schedule from the same seed after the same number of runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from harness.catalogue.toys import commit_before_processing
from harness.check import EXIT_CODES, Guarantee, Status, exit_code, guarantee_of
from harness.cli import EXIT_INVALID, EXIT_OK, EXIT_UNKNOWN, main
from harness.engine import CounterexampleFound, explore
from harness.errors import ConfigError
from harness.search.profiles import PROFILES
from harness.settings import (
    BACKENDS,
    GUARANTEES,
    KEYS,
    SOURCES,
    BadSetting,
    Layer,
    add_options,
    arguments,
    env_name,
    environment,
    flag_name,
    from_options,
    ini_name,
    resolve,
)
from harness.sim.budget import RunBudget
from harness.sim.world import BACKENDS as WORLD_BACKENDS

pytest_plugins = ["pytester"]

# -- the value and its precedence -----------------------------------------------------------


def test_the_settings_choices_are_the_engines_own() -> None:
    assert GUARANTEES == tuple(g.value for g in Guarantee)
    assert BACKENDS == tuple(WORLD_BACKENDS)
    assert dict(EXIT_CODES) == {Status.VALID: 0, Status.INVALID: 1, Status.UNKNOWN: 2}
    assert (EXIT_OK, EXIT_INVALID, EXIT_UNKNOWN) == tuple(EXIT_CODES.values())
    assert [exit_code(s) for s in ("valid", "invalid", "unknown", "bogus")] == [0, 1, 2, 2]


def test_each_key_has_one_name_spelt_mechanically_in_every_door() -> None:
    assert flag_name("max_examples") == "--max-examples"
    assert env_name("run_seconds") == "HARNESS_RUN_SECONDS"
    assert ini_name("report_dir") == "harness_report_dir"
    from harness.pytest_plugin import MARKER_SIGNATURE, option_name

    assert option_name("max_steps") == "--harness-max-steps"
    assert "max_examples=None" in MARKER_SIGNATURE and "run_calls=None" in MARKER_SIGNATURE


def test_nothing_given_is_the_default_profile_and_the_defaults() -> None:
    settings = resolve()
    assert settings.profile is PROFILES["ci"]
    assert (settings.max_examples, settings.max_steps) == (1000, 30)
    assert settings.run_budget == RunBudget()
    assert (settings.guarantee, settings.seed, settings.faults) == (None, None, None)
    assert (settings.backend, settings.report_dir, settings.json) == ("memory", None, False)
    assert settings.source("max_examples") == "profile" and settings.source("seed") == "default"


@pytest.mark.parametrize("winner", range(len(SOURCES) - 2))
def test_each_source_wins_over_every_source_below_it(winner: int) -> None:
    """For every key, the layer of each source is given a value of its own; the resolved
    value is the one of the highest source, whatever order the layers are passed in."""
    values: dict[str, list[Any]] = {
        "profile": ["dev", "nightly", "ci", "dev", "nightly"],
        "max_examples": [11, 12, 13, 14, 15],
        "seed": [1, 2, 3, 4, 5],
        "faults": [["crash"], ["tick"], ["zombie"], ["reorder"], ["restart"]],
        "run_calls": [101, 102, 103, 104, 105],
        "backend": ["leveldb", "memory", "leveldb", "memory", "leveldb"],
        "max_problems": [1, 2, 3, 4, 5],
    }
    layers = [
        Layer(source, {key: options[index] for key, options in values.items()})
        for index, source in enumerate(SOURCES[:5])
        if index >= winner
    ]
    settings = resolve(*reversed(layers))
    assert settings.profile is PROFILES[str(values["profile"][winner])]
    assert settings.max_examples == values["max_examples"][winner]
    assert settings.seed == values["seed"][winner]
    assert settings.faults == tuple(values["faults"][winner])
    assert settings.run_budget.calls == values["run_calls"][winner]
    assert settings.backend == values["backend"][winner]
    assert {settings.source(key) for key in values} == {SOURCES[winner]}


def test_a_profile_from_above_decides_only_the_numbers_no_source_gives() -> None:
    settings = resolve(Layer("marker", {"profile": "dev"}), Layer("environment", {"max_steps": 7}))
    assert settings.max_examples == PROFILES["dev"].max_examples  # from the profile
    assert settings.max_steps == 7  # a source below the marker, but above the profile


def test_text_sources_are_parsed_and_python_sources_are_not() -> None:
    env = {
        "HARNESS_MAX_EXAMPLES": " 40 ",
        "HARNESS_RUN_SECONDS": "2.5",
        "HARNESS_FAULTS": "tick, crash",
        "HARNESS_JSON": "yes",
        "HARNESS_GUARANTEE": "exactly-once",  # never read: the claim is not a machine's
        "HARNESS_SEED": "",  # empty: not set
    }
    settings = resolve(environment(env))
    assert settings.max_examples == 40 and settings.run_budget.seconds == 2.5
    assert settings.faults == ("crash", "tick") and settings.json is True
    assert settings.guarantee is None and settings.seed is None
    with pytest.raises(BadSetting, match=r"max_examples must be an integer >= 1, got '40'"):
        resolve(arguments(max_examples="40"))


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        (
            Layer("argument", {"guarantee": "exactly_once"}),
            r"^guarantee \(argument\): unknown guarantee, got 'exactly_once'; choose one of "
            r"at-least-once, exactly-once$",
        ),
        (
            environment({"HARNESS_BACKEND": "rocksdb"}),
            r"^HARNESS_BACKEND='rocksdb' \(environment\): unknown backend, got 'rocksdb'; "
            r"choose one of memory, leveldb$",
        ),
        (
            Layer("command line", {"profile": "turbo"}, {"profile": "--profile turbo"}, True),
            r"^--profile turbo: unknown profile, got 'turbo'; choose one of dev, ci, nightly$",
        ),
        (
            Layer("marker", {"faults": ["crash", "meteor"]}),
            r"unknown fault, got 'meteor'; choose from crash, duplicate, ",
        ),
        (Layer("file", {"run_seconds": "0"}, text=True), r"in \(0, 86400\], got '0'"),
        (Layer("argument", {"json": "maybe"}), r"json must be true or false, got 'maybe'"),
        (Layer("argument", {"seed": 1.5}), r"seed must be an integer, got 1.5"),
    ],
)
def test_a_bad_value_is_a_typed_error_naming_it_its_source_and_the_choices(
    layer: Layer, message: str
) -> None:
    with pytest.raises(BadSetting, match=message) as raised:
        resolve(layer)
    assert isinstance(raised.value, ConfigError)


def test_faults_given_as_text_that_names_none_is_refused_and_none_is_a_word() -> None:
    """`--faults "$UNSET"` must not turn every fault off: a gate would pass a buggy processor
    on schedules without a fault. No fault at all is asked for by name (or [] from Python)."""
    for empty in ("", " , "):
        layer = Layer("command line", {"faults": empty}, {"faults": f"--faults {empty!r}"}, True)
        with pytest.raises(BadSetting, match=r"names no fault.*'none' to inject none"):
            resolve(layer)
    assert resolve(Layer("command line", {"faults": "none"}, text=True)).faults == ()
    assert resolve(environment({"HARNESS_FAULTS": "None"})).faults == ()
    assert resolve(arguments(faults=[])).faults == ()


def test_an_unknown_key_names_every_setting() -> None:
    with pytest.raises(
        BadSetting, match=r"'examples' is not a setting, got 5; the settings are guara"
    ):
        Layer("marker", {"examples": 5})


def test_a_door_default_sits_below_every_source_and_stays_with_the_value() -> None:
    door = {"faults": ("crash",), "max_examples": 20}
    settings = resolve(environment({}), defaults=door)
    assert settings.faults == ("crash",) and settings.max_examples == 20
    assert settings.source("faults") == "door"
    again = resolve(Layer("argument", {"max_problems": 2}), settings.as_layer("marker"))
    assert again.faults == ("crash",) and again.max_examples == 20
    assert resolve(environment({"HARNESS_MAX_EXAMPLES": "3"}), defaults=door).max_examples == 3


def test_the_guarantee_is_required_by_every_door_that_judges() -> None:
    with pytest.raises(BadSetting, match=r"^--guarantee is required: .* choose one of at-least"):
        resolve().require_guarantee("--guarantee")
    assert guarantee_of("exactly-once") is Guarantee.EXACTLY_ONCE
    with pytest.raises(ConfigError, match=r"explore\(\.\.\., guarantee=\.\.\.\) is required"):
        explore(commit_before_processing, max_examples=1, failures_dir=None)


def test_the_command_line_options_are_one_declaration() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser, KEYS, aliases={"max_examples": ("--examples",)})
    args = parser.parse_args(["--examples", "9", "--faults", "crash", "--json"])
    settings = from_options(args)
    assert settings.max_examples == 9 and settings.faults == ("crash",) and settings.json
    assert "--examples" not in parser.format_help()  # the old spelling: read, not shown
    for key in KEYS:
        assert flag_name(key) in parser.format_help()


# -- every door, the same search ------------------------------------------------------------

SAME: dict[str, Any] = {
    "guarantee": "at-least-once",
    "profile": "dev",
    "max_examples": 24,
    "max_steps": 12,
    "seed": 7,
    "faults": ["crash", "restart"],
    "run_calls": 50_000,
    "run_seconds": 20.0,
    "backend": "memory",
    "max_problems": 1,
}
"""One set of settings, given to every door in its own spelling."""

MODULE = """
TRACE = []


def _run(ctx, first):
    TRACE.append("start")
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        TRACE.append(record.record_id)
        if first:
            ctx.offsets.put("in-0", record.next)
        out.emit(record)
        out.commit()
        if not first:
            ctx.offsets.put("in-0", record.next)


def forward(ctx):
    _run(ctx, first=False)


def commit_first(ctx):
    _run(ctx, first=True)
"""
"""Processors that write down what each run reads: two searches that drew the same
schedules leave the same trace. ``forward`` is correct (every schedule runs, the drawn ones
too); ``commit_first`` loses a record after a crash."""


def _flags(*skip: str) -> list[str]:
    words: list[str] = []
    for key, value in SAME.items():
        if key in skip:
            continue
        words += [flag_name(key), ",".join(value) if isinstance(value, list) else str(value)]
    return words


def _python(settings: dict[str, Any]) -> dict[str, Any]:
    """``SAME`` as ``explore()``'s keywords (the run budget is a ``RunBudget`` there)."""
    kwargs = {k: v for k, v in settings.items() if k not in ("run_calls", "run_seconds")}
    kwargs["budget"] = RunBudget(settings["run_calls"], settings["run_seconds"])
    return kwargs


def _same(envelope: dict[str, Any]) -> dict[str, Any]:
    """What makes two searches the same: outcome, seed, schedules run, coverage, verdict and
    shrunk schedule (the replay command names each door's own directory)."""
    keys = ("status", "seed", "examples", "coverage", "verdict", "schedule", "guarantee")
    return {key: envelope[key] for key in keys}


class _Doors:
    """Runs one processor of :data:`MODULE` through every door, keeping each door's trace
    and what it returned."""

    def __init__(
        self,
        pytester: pytest.Pytester,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.pytester, self.capsys, self.monkeypatch = pytester, capsys, monkeypatch
        pytester.makepyfile(doorproc=MODULE)
        monkeypatch.syspath_prepend(str(pytester.path))
        monkeypatch.chdir(pytester.path)
        for key in KEYS:  # nothing from the machine running the tests
            monkeypatch.delenv(env_name(key), raising=False)
        import doorproc  # type: ignore[import-not-found]

        self.module: Any = doorproc

    def traced(self, run: Any) -> tuple[Any, list[str]]:
        self.module.TRACE.clear()
        value = run()
        return value, list(self.module.TRACE)

    def python(self, name: str) -> tuple[Any, list[str]]:
        def run() -> Any:
            try:
                return explore(getattr(self.module, name), failures_dir="py", **_python(SAME))
            except CounterexampleFound as found:
                return found.failure

        return self.traced(run)

    def cli(self, name: str, words: list[str]) -> tuple[Any, list[str]]:
        def run() -> Any:
            code = main(["run", f"doorproc:{name}", "--json", "--failures-dir", "cli", *words])
            envelope = json.loads(self.capsys.readouterr().out)
            assert code == exit_code(envelope["status"])
            return envelope

        return self.traced(run)

    def environment(self, name: str) -> tuple[Any, list[str]]:
        for key, value in SAME.items():
            if key != "guarantee":  # the claim is the command's own, never the machine's
                text = ",".join(value) if isinstance(value, list) else str(value)
                self.monkeypatch.setenv(env_name(key), text)
        try:
            return self.cli(name, ["--guarantee", SAME["guarantee"]])
        finally:
            for key in KEYS:
                self.monkeypatch.delenv(env_name(key), raising=False)

    def pytest(self, name: str) -> list[tuple[Any, list[str]]]:
        """The marker, and the ``--harness-*`` options with the guarantee in the call; each
        test writes its trace and its result (or its failure's report file) down."""
        marker = ", ".join(f"{key}={value!r}" for key, value in SAME.items())
        self.pytester.makepyfile(
            test_doors=f"""
            import json
            import pytest
            import doorproc

            def _explore(harness_explore, name, **kwargs):
                doorproc.TRACE.clear()
                try:
                    result = harness_explore(getattr(doorproc, {name!r}), **kwargs)
                    found = dict(status="valid", seed=result.seed, examples=result.examples,
                                 coverage=result.coverage.to_json())
                finally:
                    with open(name + ".trace", "w") as file:
                        json.dump(doorproc.TRACE, file)
                with open(name + ".json", "w") as file:
                    json.dump(found, file)

            @pytest.mark.harness({marker})
            def test_marker(harness_explore):
                _explore(harness_explore, "marker")

            def test_options(harness_explore):
                _explore(harness_explore, "options", guarantee={SAME["guarantee"]!r})
            """
        )
        options = [
            word.replace("--", "--harness-", 1) if word.startswith("--") else word
            for word in _flags()[2:]  # all but --guarantee
        ]
        self.pytester.runpytest(
            "-p", "no:cacheprovider", "--harness-report-dir", "reports", *options
        )
        doors = []
        for test in ("marker", "options"):
            trace = json.loads((self.pytester.path / f"{test}.trace").read_text())
            result = self.pytester.path / f"{test}.json"
            if result.exists():
                doors.append((json.loads(result.read_text()), trace))
                continue
            (report,) = (self.pytester.path / "reports").glob(f"*test_{test}-*[0-9a-f].json")
            doc = json.loads(report.read_text(encoding="utf-8"))
            doc["schedule"] = doc["replay"]["schedule"]
            doors.append((doc, trace))
        return doors


@pytest.fixture
def doors(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> _Doors:
    return _Doors(pytester, capsys, monkeypatch)


def test_every_door_given_the_same_settings_draws_the_same_schedules(doors: _Doors) -> None:
    """A correct processor: every door runs the same 24 schedules (18 planned, 6 drawn by
    Hypothesis from seed 7), reads the same records in the same runs and prints the same
    JSON envelope."""
    result, python = doors.python("forward")
    flagged, by_flags = doors.cli("forward", _flags())
    from_env, by_env = doors.environment("forward")
    (marker, by_marker), (options, by_options) = doors.pytest("forward")
    assert result.examples == SAME["max_examples"] and result.coverage.drawn > 0
    assert python == by_flags == by_env == by_marker == by_options
    assert python.count("start") > SAME["max_examples"]  # restarts and drains were traced
    assert flagged == from_env, "the same JSON envelope from flags and from the environment"
    assert flagged["status"] == "valid" and flagged["seed"] == SAME["seed"]
    expected = {
        "status": "valid",
        "seed": result.seed,
        "examples": result.examples,
        "coverage": result.coverage.to_json(),
    }
    assert {k: flagged[k] for k in expected} == expected == marker == options


def test_every_door_given_the_same_settings_finds_the_same_counterexample(
    doors: _Doors,
) -> None:
    failure, python = doors.python("commit_first")
    flagged, by_flags = doors.cli("commit_first", _flags())
    from_env, by_env = doors.environment("commit_first")
    (marker, by_marker), (options, by_options) = doors.pytest("commit_first")
    assert python == by_flags == by_env == by_marker == by_options
    assert _same(flagged) == _same(from_env)
    assert flagged["status"] == "invalid" and exit_code(flagged["status"]) == EXIT_INVALID
    expected = {
        "status": "invalid",
        "seed": failure.seed,
        "examples": failure.examples,
        "verdict": failure.verdict.to_json(),
        "schedule": failure.schedule.to_json(),
    }
    for found in (flagged, marker, options):
        assert {k: found[k] for k in expected} == expected


KAFKA_APP = Path(__file__).resolve().parent / "kafka_apps" / "effects" / "two_bugs.py"
ORDERS = '{"order_id": {n}, "customer": "{key}", "amount": {value}}'
SHIPPED = r"handled (\d+)"


def test_the_kafka_command_and_the_kafka_fixture_run_the_same_search(
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Kafka doors: ``python -m harness kafka APP --json`` with the settings as flags, and
    ``harness_kafka(APP, ...)`` under the marker, find the same first counterexample after
    the same runs from the same seed."""
    from harness.kafka.command import main as kafka

    monkeypatch.chdir(pytester.path)
    for key in KEYS:
        monkeypatch.delenv(env_name(key), raising=False)
    app = [str(KAFKA_APP), "--input", "orders", "--effect", "stdout", "--by", f"pattern={SHIPPED}"]
    # both doors' own default faults (every fault but duplicate); both of the app's bugs
    # the second bug (a skip after a crash on a backlog) comes among the planned schedules
    # of a budget of 100, not of 96 (each client call is a fault point of its own name,
    # kafka.poll, kafka.commit..., so the systematic phase has more points to cover first)
    more = {"max_problems": 2, "max_examples": 100}
    flags = [*_flags("backend", "faults", *more), "--max-problems", "2", "--max-examples", "100"]
    code = kafka([*app, "--value-template", ORDERS, "--json", *flags])
    envelope = json.loads(capsys.readouterr().out)
    assert code == exit_code(envelope["status"]) == EXIT_INVALID
    assert envelope["seed"] == SAME["seed"] and len(envelope["problems"]) == 2
    marker = ", ".join(
        f"{k}={v!r}" for k, v in {**SAME, **more}.items() if k not in ("backend", "faults")
    )
    pytester.makepyfile(
        test_kafka_door=f"""
        import pytest
        from harness.effects import stdout_lines
        from harness.kafka.payloads import template

        @pytest.mark.harness({marker})
        def test_app(harness_kafka):
            harness_kafka({str(KAFKA_APP)!r}, inputs=["orders"], encode=template({ORDERS!r}),
                          effects=[stdout_lines(pattern={SHIPPED!r})])
        """
    )
    pytester.runpytest("-p", "no:cacheprovider", "--harness-report-dir", "reports")
    (report,) = (pytester.path / "reports").glob("*test_app-*[0-9a-f].json")
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert (doc["status"], doc["seed"], doc["examples"], doc["verdict"]) == (
        envelope["status"],
        envelope["seed"],
        envelope["examples"],
        envelope["verdict"],
    )
    assert doc["replay"]["schedule"] == envelope["schedule"]


def test_the_old_spellings_are_still_read_and_door_defaults_still_yield() -> None:
    from harness.cli.spark_job import SPARK_JOB_DEFAULTS
    from harness.cli.spark_job import add_arguments as spark_job_arguments
    from harness.kafka.command import add_arguments as kafka_arguments

    parser = argparse.ArgumentParser()
    spark_job_arguments(parser)
    base = ["job.py", "--input", "t"]
    defaults = from_options(parser.parse_args(base), defaults=SPARK_JOB_DEFAULTS)
    assert (defaults.max_examples, defaults.seed, defaults.guarantee) == (20, 0, None)
    old = from_options(parser.parse_args([*base, "--max-schedules", "5"]))
    new = from_options(parser.parse_args([*base, "--max-examples", "5", "--json"]))
    assert old.max_examples == new.max_examples == 5 and new.json
    parser = argparse.ArgumentParser()
    kafka_arguments(parser)
    args = parser.parse_args(["app.py", "--input", "t", "--run-seconds", "3", "--max-steps", "4"])
    settings = from_options(args)
    assert (settings.run_budget.seconds, settings.max_steps) == (3.0, 4)
    parser = argparse.ArgumentParser()
    from harness.cli.run import add_arguments as run_arguments

    run_arguments(parser)
    assert from_options(parser.parse_args(["--examples", "7"])).max_examples == 7


def test_the_pytest_doors_take_every_key_in_the_one_precedence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ini file < environment < --harness-* option < marker < the call, key by key."""
    for key in KEYS:
        monkeypatch.delenv(env_name(key), raising=False)
    pytester.makeini(
        """
        [pytest]
        harness_max_examples = 3
        harness_max_steps = 4
        harness_run_calls = 500
        harness_faults = crash, tick
        harness_backend = leveldb
        """
    )
    monkeypatch.setenv("HARNESS_MAX_STEPS", "5")
    monkeypatch.setenv("HARNESS_RUN_CALLS", "600")
    pytester.makepyfile(
        """
        import pytest

        def test_session(harness_settings):
            s = harness_settings
            assert (s.max_examples, s.max_steps, s.run_budget.calls) == (3, 5, 700)
            assert s.faults == ("crash", "tick") and s.backend == "leveldb"
            assert [s.source(k) for k in ("max_examples", "max_steps", "run_calls")] == [
                "file", "environment", "command line"]
            assert s.source("profile") == "default" and s.max_problems == 5

        @pytest.mark.harness(run_calls=800, profile="dev", guarantee="exactly-once")
        def test_marked(harness_settings, harness_backend):
            s = harness_settings
            assert (s.run_budget.calls, s.profile.name, s.guarantee) == (800, "dev", "exactly-once")
            assert s.max_examples == 3 and harness_backend == "leveldb"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--harness-run-calls", "700")
    result.assert_outcomes(passed=2)
