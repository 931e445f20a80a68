"""The pytest plugin, exercised the way users meet it: through pytest runs in a scratch project.

Runs that load a Hypothesis profile, need xdist or check what got imported go through a
subprocess; the others run in-process (faster), since they change no global state.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pytest

from harness.pytest_plugin import MARKER_SIGNATURE, REPLAY_OPTION
from harness.search.profiles import PROFILES

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pytest_quickstart"
# The fix docs/pytest.md tells the reader to make: store the offset after the output commit.
BUG = """\
        ctx.offsets.put("in-0", record.next)  # remember: this record is done
        out.emit(record)
        out.commit()  # the output is durable only now
"""
FIX = """\
        out.emit(record)
        out.commit()  # the output is durable only now
        ctx.offsets.put("in-0", record.next)  # remember: this record is done
"""

PROCESSORS = """
    from harness.catalogue.toys import marker_in_output as writes_markers  # fails: 'unexpected'
    from harness.catalogue.toys import process_then_commit as correct
"""


def lit(text: str) -> str:
    """``text`` as an fnmatch pattern matching exactly itself."""
    return glob.escape(text)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HARNESS_PROFILE", "HARNESS_SEED", "PYTEST_ADDOPTS", "HYPOTHESIS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def quickstart(pytester: pytest.Pytester) -> None:
    for name in ("processor.py", "test_processor.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)


# -- loading --------------------------------------------------------------------------------


ENGINE: Final = (
    "harness.sim",
    "harness.check",
    "harness.engine",
    "harness.strategies",
    "harness.faults",
    "harness.history",
    "harness.log",
    "harness.offsets",
    "harness.report",
    "hypothesis",
    "plyvel",
    "pyspark",
    "py4j",
    "pyarrow",
)
"""What loading the plugin, or a session that does not use it, must not import."""


def _engine(modules: Iterable[str]) -> list[str]:
    return sorted(m for m in modules if any(m == e or m.startswith(e + ".") for e in ENGINE))


def test_loading_the_plugin_imports_no_engine_module() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import harness.pytest_plugin"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
    assert "harness.pytest_plugin" in imported  # the check reads the right output
    assert _engine(imported) == []


def test_a_pytest_run_with_the_plugin_imports_no_engine_module_until_used(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain=f"""
        import sys

        def test_nothing_heavy_loaded():
            engine = {ENGINE!r}
            loaded = [m for m in sys.modules for e in engine if (m + ".").startswith(e + ".")]
            assert loaded == []
        """,
        test_used="""
        import sys

        def forward(ctx):
            out = ctx.output("out")
            for record in ctx.read("in-0", ctx.offsets.get("in-0")):
                out.emit(record)
                out.commit()
                ctx.offsets.put("in-0", record.next)

        def test_the_fixture_loads_the_engine_when_called(harness_explore):
            assert "harness.engine" not in sys.modules
            harness_explore(forward, guarantee="at-least-once", max_examples=3)
            assert "harness.engine" in sys.modules
        """,
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--strict-markers", "test_plain.py", "test_used.py"
    )
    result.assert_outcomes(passed=2)


# -- options, ini, marker -------------------------------------------------------------------


def test_options_and_ini_values_are_documented_in_one_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "stream-harness: delivery guarantees under faults:",
            "  --harness-profile=NAME*",
            "  --harness-max-examples=N*",
            "  --harness-max-steps=N*",
            "  --harness-seed=INT*",
            "  --harness-faults=A,B*",
            "  --harness-run-calls=N*",
            "  --harness-run-seconds=S*",
            "  --harness-backend=NAME*",
            "  --harness-report-dir*, --harness-report=DIR*",  # 3.13: the metavar once
            "  --harness-max-problems=N*",
            "  --harness-replay=FILE*",
        ]
    )
    for key in ("profile", "seed", "max_examples", "run_calls", "report_dir", "report"):
        result.stdout.fnmatch_lines([f"  harness_{key} (string):*"])


def test_the_marker_is_registered_with_its_signature(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([f"@pytest.mark.{lit(MARKER_SIGNATURE)}: settings of *"])
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.harness(profile="dev", faults=["crash"])
        def test_marked():
            pass
        """
    )
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


SHOW_SETTINGS = """
    import pytest

    def test_default(harness_settings):
        s = harness_settings
        print(f"SETTINGS {s.profile.name} {s.max_examples} {s.max_steps} {s.seed}")

    @pytest.mark.harness(profile="nightly", seed=4)
    def test_marked(harness_settings):
        s = harness_settings
        print(f"SETTINGS {s.profile.name} {s.max_examples} {s.max_steps} {s.seed}")
"""


@pytest.mark.parametrize(
    ("ini", "env", "cli", "expected"),
    [
        ({}, {}, [], "ci None"),
        ({"harness_profile": "dev", "harness_seed": "1"}, {}, [], "dev 1"),
        (
            {"harness_profile": "dev", "harness_seed": "1"},
            {"HARNESS_PROFILE": "nightly", "HARNESS_SEED": "2"},
            [],
            "nightly 2",
        ),
        (
            {"harness_profile": "nightly", "harness_seed": "1"},
            {"HARNESS_PROFILE": "nightly", "HARNESS_SEED": "2"},
            ["--harness-profile", "dev", "--harness-seed", "3"],
            "dev 3",
        ),
    ],
    ids=["defaults", "ini", "env-over-ini", "cli-over-env"],
)
def test_settings_come_from_command_line_then_environment_then_ini(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ini: dict[str, str],
    env: dict[str, str],
    cli: list[str],
    expected: str,
) -> None:
    pytester.makeini("[pytest]\n" + "".join(f"{k} = {v}\n" for k, v in ini.items()))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest("-s", "-p", "no:cacheprovider", *cli)
    result.assert_outcomes(passed=2)
    name, seed = expected.split()
    budget = f"{PROFILES[name].max_examples} {PROFILES[name].max_steps}"
    nightly = f"{PROFILES['nightly'].max_examples} {PROFILES['nightly'].max_steps}"
    # the marker wins over all of them
    result.stdout.fnmatch_lines(
        [f"*SETTINGS {name} {budget} {seed}", f"*SETTINGS nightly {nightly} 4"]
    )


def test_the_marker_closest_to_the_test_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.harness(profile="dev", max_steps=7, backend="memory")

        @pytest.mark.harness(max_examples=5, faults=["crash", "tick"])
        def test_marked(harness_settings, harness_backend):
            s = harness_settings
            assert (s.profile.name, s.max_examples, s.max_steps) == ("dev", 5, 7)
            assert s.faults == ("crash", "tick") and harness_backend == "memory"
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("where", "args", "message"),
    [
        (
            "cli",
            ["--harness-profile", "fast"],
            "ERROR: --harness-profile 'fast' (command line): unknown profile, got 'fast'; "
            "choose one of dev, ci, nightly",
        ),
        (
            "env",
            [],
            "ERROR: HARNESS_PROFILE='fast' (environment): unknown profile, got 'fast'; choose "
            "one of dev, ci, nightly",
        ),
        (
            "ini",
            [],
            "ERROR: harness_profile = 'fast' (tox.ini): unknown profile, got 'fast'; choose one "
            "of dev, ci, nightly",
        ),
        (
            "cli",
            ["--harness-seed", "lucky"],
            "ERROR: --harness-seed 'lucky' (command line): seed must be an integer, got 'lucky'*",
        ),
        (
            "cli",
            [REPLAY_OPTION, "missing.json"],
            "ERROR: --harness-replay 'missing.json' (command line): cannot read replay file "
            "*missing.json*",
        ),
    ],
    ids=["cli-profile", "env-profile", "ini-profile", "cli-seed", "replay-file"],
)
def test_a_bad_value_is_a_usage_error_naming_its_source(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    args: list[str],
    message: str,
) -> None:
    if where == "env":
        monkeypatch.setenv("HARNESS_PROFILE", "fast")
    if where == "ini":
        pytester.makeini("[pytest]\nharness_profile = fast\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_bad_marker_fails_its_test_with_where_it_is(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marks="""
        import pytest

        @pytest.mark.harness(profile="fast")
        def test_profile(harness_explore):
            pass

        @pytest.mark.harness(examples=5)
        def test_unknown():
            pass

        @pytest.mark.harness("dev")
        def test_positional():
            pass

        @pytest.mark.harness(faults=["meteor"])
        def test_fault():
            pass

        @pytest.mark.harness(max_examples=0)
        def test_budget():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.harness(profile='fast') (marker on test_marks.py::test_profile): "
            "unknown profile, got 'fast'; choose one of dev, ci, nightly",
            "*@pytest.mark.harness(examples=...) (marker on test_marks.py::test_unknown): "
            f"unknown argument 'examples'; the marker is {lit(MARKER_SIGNATURE)}",
            "*@pytest.mark.harness('dev',) (marker on test_marks.py::test_positional): the "
            "marker takes keyword arguments only*",
            "*@pytest.mark.harness(faults=[[]'meteor'[]]) (marker on test_marks.py::test_fault)"
            ": unknown fault, got 'meteor'; choose from*",
            "*@pytest.mark.harness(max_examples=0) (marker on test_marks.py::test_budget): "
            "max_examples must be an integer >= 1, got 0*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


# -- the quickstart: fail, read the counterexample, fix, pass ---------------------------------


def test_the_quickstart_fails_with_a_readable_counterexample_then_passes_when_fixed(
    pytester: pytest.Pytester,
) -> None:
    quickstart(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    test = "test_processor.py::test_forward_delivers_at_least_once"
    result.stdout.fnmatch_lines(
        [
            "harness: profile ci (default: * schedules of up to * steps), seed from each "
            "processor's name",
            "*",
            "    def test_forward_delivers_at_least_once(harness_explore):",
            '>       harness_explore(forward, guarantee="at-least-once")',
            "E       harness.CounterexampleFound: at-least-once does NOT hold for "
            "processor:forward (memory backend): INVALID",
            "E       INVALID under at-least-once",
            lit(
                "E         lost x1: records [r0] events [2, 4]: record 'r0' part 0 was "
                "acknowledged at event 2 but no log sink shows it"
            ),
            lit(
                "E         offset-ahead x1: records [r0] events [5]: process 1 committed offset "
                "1 of partition 'in-0', past lost record 'r0' at offset 0"
            ),
            "E       shrunk schedule (3 steps; first failure at schedule * after * s, * "
            "schedules run in all):",
            "E         0. Produce(partition=0, count=1, ack=True)",
            "E         1. Run(calls=3)  # instance 1 stopped before call 4 (output.emit)",
            "E         2. Crash(machine=False, keep=0)",
            "E            drain",
            'E       schedule JSON: {"version":1,"drain":true,"steps":*}',
            "E       seed: *  (--harness-seed * repeats this search)",
            "E       replay: python -m harness replay .harness/failures/forward-*.json",
            f"E       replay in pytest: pytest {test} --harness-replay "
            ".harness/failures/forward-*.json",
            "",
            "test_processor.py:9: CounterexampleFound",
            "*- harness: replay the counterexamples -*",
            f"pytest {test} --harness-replay .harness/failures/forward-*.json",
        ]
    )
    output = result.stdout.str()
    failure = output[output.index(" FAILURES ") : output.index(" short test summary info ")]
    # the traceback stops at the test: no frames of the harness, Hypothesis or the plugin
    for internal in (
        "harness/engine",
        "explorer.py",
        "pytest_plugin.py",
        "site-packages",
        "Traceback",
    ):
        assert internal not in failure
    assert len(failure.splitlines()) < 32  # the report, its replay and report commands
    [replay_file] = (pytester.path / ".harness" / "failures").glob("forward-*.json")

    # the replay alone reproduces the failure, without a search
    again = pytester.runpytest("-p", "no:cacheprovider", test, REPLAY_OPTION, str(replay_file))
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(
        [
            "harness: replaying .harness/failures/forward-*.json (processor:forward, 3 steps)",
            "E       harness.CounterexampleFound: at-least-once does NOT hold for "
            "processor:forward (memory backend): INVALID, replaying "
            ".harness/failures/forward-*.json",
            "E       schedule (3 steps):",
        ]
    )

    processor = pytester.path / "processor.py"
    source = processor.read_text(encoding="utf-8")
    assert source.count(BUG) == 1
    processor.write_text(source.replace(BUG, FIX), encoding="utf-8")
    fixed_replay = pytester.runpytest(
        "-p", "no:cacheprovider", test, REPLAY_OPTION, str(replay_file)
    )
    fixed_replay.assert_outcomes(passed=1)
    # (the dev profile, to keep this suite quick; the example uses the default, ci)
    pytester.runpytest("-p", "no:cacheprovider", "--harness-profile", "dev").assert_outcomes(
        passed=1
    )


# -- replay and report files ----------------------------------------------------------------


def test_replay_skips_the_tests_of_other_processors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_two=PROCESSORS
        + """
    import pytest

    @pytest.mark.harness(max_examples=5)
    def test_markers(harness_explore):
        harness_explore(writes_markers, guarantee="at-least-once", faults=[])

    @pytest.mark.harness(max_examples=5)
    def test_correct(harness_explore):
        harness_explore(correct, guarantee="at-least-once")
    """
    )
    first = pytester.runpytest("-p", "no:cacheprovider")
    first.assert_outcomes(failed=1, passed=1)
    [replay_file] = (pytester.path / ".harness" / "failures").glob("*.json")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", REPLAY_OPTION, str(replay_file))
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED * --harness-replay * replays harness.catalogue.toys:marker_in_output, not "
            "harness.catalogue.toys:process_then_commit"
        ]
    )


def test_report_dir_gets_the_verdict_and_the_replay_file_per_failing_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_reported=PROCESSORS
        + """
    import pytest

    @pytest.mark.harness(max_examples=5, faults=[])
    @pytest.mark.parametrize("case", ["a/b", "a b"])
    def test_markers(harness_explore, case):
        harness_explore(writes_markers, guarantee="at-least-once")

    @pytest.mark.harness(max_examples=5)
    def test_correct(harness_explore):
        harness_explore(correct, guarantee="at-least-once")
    """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--harness-report", "out/reports")
    result.assert_outcomes(failed=2, passed=1)
    reports = pytester.path / "out" / "reports"
    assert (
        len(list(reports.iterdir())) == 10
    )  # per test: .json, .replay.json, .report.{txt,json,html}
    for case in ("a/b", "a b"):
        nodeid = f"test_reported.py::test_markers[{case}]"
        # a readable name from the node id, made unique by a hash of it
        [report_file] = [
            path
            for path in reports.glob("test_reported.py_test_markers_a_b-*[0-9a-f].json")
            if json.loads(path.read_text(encoding="utf-8"))["nodeid"] == nodeid
        ]
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert (report["status"], report["backend"], report["seed"]) == (
            "invalid",
            "memory",
            report["replay"]["seed"],
        )
        assert [a["kind"] for a in report["verdict"]["anomalies"]] == ["unexpected"]
        replay_file = report_file.with_name(report_file.stem + ".replay.json")
        html = report_file.with_name(report_file.stem + ".report.html")
        assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
        assert report["replay_file"] == str(replay_file)
        replay = json.loads(replay_file.read_text(encoding="utf-8"))
        assert replay == report["replay"]
        assert replay["processor"] == "harness.catalogue.toys:marker_in_output"
        assert report["report"].startswith(
            "at-least-once does NOT hold for harness.catalogue.toys:"
        )


# -- xdist ----------------------------------------------------------------------------------


def test_under_xdist_workers_report_everything_and_keep_apart(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_spread=PROCESSORS
        + """
    import os
    import pytest

    pytestmark = pytest.mark.harness(max_examples=5, faults=[])

    @pytest.mark.parametrize("n", range(3))
    def test_markers(harness_explore, n):
        harness_explore(writes_markers, guarantee="at-least-once")

    @pytest.mark.parametrize("n", range(3))
    def test_world(harness_world, harness_namespace, tmp_path, n):
        worker = os.environ["PYTEST_XDIST_WORKER"]
        assert worker in str(tmp_path)
        harness_namespace.create_log("mine")
        assert harness_namespace.get_logs() == ["mine"]
    """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--harness-report", "reports"
    )
    result.assert_outcomes(failed=3, passed=3)
    command = "pytest 'test_spread.py::test_markers[[]{}[]]' --harness-replay .harness/*.json"
    result.stdout.fnmatch_lines(["*- harness: replay the counterexamples -*"])
    for n in range(3):
        result.stdout.fnmatch_lines([command.format(n)])
    assert len(list((pytester.path / "reports").glob("*.replay.json"))) == 3


def test_the_hypothesis_profiles_keep_a_database_per_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from hypothesis import given, settings, strategies as st
        from harness.search.profiles import PROFILES

        def test_profile_loaded():
            current = settings.default
            # get_current_profile_name is newer than the oldest supported Hypothesis
            name = getattr(settings, "get_current_profile_name", None)
            assert (name() if name else settings._current_profile) == "harness-dev"
            assert (current.max_examples, current.deadline) == (PROFILES["dev"].max_examples, None)
            assert not current.derandomize

        @given(st.integers())
        def test_fails(x):
            assert x < 10
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "each", "--hypothesis-profile=harness-dev"
    )
    result.assert_outcomes(passed=2, failed=2)
    databases = pytester.path / ".hypothesis" / "harness"
    assert sorted(path.name for path in databases.iterdir()) == ["gw0", "gw1"]


def test_the_ci_hypothesis_profile_is_deterministic_without_a_database(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        from hypothesis import HealthCheck, settings
        from harness.search.profiles import PROFILES

        def test_profile_loaded():
            current = settings.default
            expected = (PROFILES["ci"].max_examples, None, None)
            assert (current.max_examples, current.deadline, current.database) == expected
            assert current.derandomize
            assert set(current.suppress_health_check) == {
                HealthCheck.too_slow, HealthCheck.data_too_large
            }
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "--hypothesis-profile=harness-ci"
    )
    result.assert_outcomes(passed=1)


# -- lower-level fixtures -------------------------------------------------------------------


def test_the_lower_level_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from harness import DLSN, LevelDBOffsetStore, LogRecord, MemoryOffsetStore, Topology
        from harness.sim import World

        @pytest.fixture
        def harness_topology():
            return Topology(partitions=2)

        @pytest.mark.parametrize("harness_backend", ["memory", "leveldb"])
        def test_namespace(harness_namespace, harness_backend):
            harness_namespace.create_log("orders")
            log = harness_namespace.open_log("orders")
            with log.open_writer() as writer:
                writer.write(LogRecord(1, b"x"))
                writer.commit()
            assert harness_namespace.uri.startswith(f"distributedlog-{harness_backend}://")

        def test_offset_store_is_leveldb_by_default(harness_offset_store, tmp_path):
            assert isinstance(harness_offset_store, LevelDBOffsetStore)
            harness_offset_store.put("r", DLSN(1, 0, 0))
            assert harness_offset_store.get("r") == DLSN(1, 0, 0)
            assert (tmp_path / "offsets").is_dir()

        @pytest.mark.harness(backend="memory")
        def test_marker_picks_the_backend(harness_offset_store, harness_world):
            assert isinstance(harness_offset_store, MemoryOffsetStore)
            assert isinstance(harness_world, World) and harness_world.backend == "memory"

        def test_world(harness_world, tmp_path):
            assert harness_world.partitions == ("in-0", "in-1")
            assert (tmp_path / "world").is_dir()
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=5)


def test_harness_spark_skips_without_pyspark(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['pyspark'] = None\n")
    pytester.makepyfile("def test_spark(harness_spark):\n    raise AssertionError\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED * harness_spark needs pyspark: pip install 'stream-harness[[]spark[]]'"]
    )


def test_the_documented_example_matches_the_example_directory() -> None:
    docs = (EXAMPLE.parent.parent / "docs" / "pytest.md").read_text(encoding="utf-8")
    for name in ("processor.py", "test_processor.py"):
        assert (EXAMPLE / name).read_text(encoding="utf-8") in docs, name
    assert FIX in docs
