"""Every door that writes a replay file (the API's ``explore``, ``python -m harness run``,
``python -m harness kafka``, the pytest fixtures ``harness_explore`` and ``harness_kafka``,
and an unchanged Spark job's and a built-in streaming variant's doors): each file it writes
replays (``python -m harness replay FILE``) and renders (``report FILE``) from the command
line, with the same verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.catalogue.toys import commit_before_processing

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "kafka_apps" / "effects"
TEMPLATE = '{"order_id": {n}, "customer": "{key}", "amount": {value}}'
KAFKA = [
    str(APPS / "two_bugs.py"),
    "--guarantee",
    "at-least-once",
    "--input",
    "orders",
    "--effect",
    "stdout",
    "--by",
    r"pattern=handled (\d+)",
    "--value-template",
    TEMPLATE,
]


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _replays_and_renders(directory: Path, cwd: Path, *, expect: str = "lost") -> int:
    files = sorted(directory.rglob("*.json"))
    assert files, f"no replay file under {directory}"
    for file in files:
        replayed = _harness("replay", str(file), cwd=cwd)
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        assert expect in replayed.stdout
        rendered = _harness("report", str(file), "--out", str(cwd / "report"), cwd=cwd)
        assert rendered.returncode == 1, rendered.stdout + rendered.stderr
        assert expect in rendered.stdout
        assert json.loads((cwd / "report" / "report.json").read_text())["verdict"]
    return len(files)


def test_the_api_door(tmp_path: Path) -> None:
    with pytest.raises(harness.CounterexampleFound):
        harness.explore(
            commit_before_processing,
            guarantee="at-least-once",
            faults=["crash"],
            max_examples=30,
            failures_dir=tmp_path / "failures",
        )
    assert _replays_and_renders(tmp_path / "failures", tmp_path) == 1


def test_the_run_door(tmp_path: Path) -> None:
    found = _harness(
        "run",
        "harness.catalogue.toys:commit_before_processing",
        "--guarantee",
        "at-least-once",
        "--faults",
        "crash",
        "--examples",
        "30",
        "--failures-dir",
        "failures",
        cwd=tmp_path,
    )
    assert found.returncode == 1, found.stderr
    assert _replays_and_renders(tmp_path / "failures", tmp_path) >= 1


def test_the_kafka_door_reports_both_bugs_and_each_file_replays(tmp_path: Path) -> None:
    found = _harness("kafka", *KAFKA, "--failures-dir", "failures", "--json", cwd=tmp_path)
    assert found.returncode == 1, found.stderr
    output = json.loads(found.stdout)
    assert output["command"] == "kafka" and output["status"] == "invalid"
    problems = output["problems"]
    steps = [[step["op"] for step in p["schedule"]["steps"]] for p in problems]
    kinds = [{a["kind"] for a in p["verdict"]["anomalies"]} for p in problems]
    # the latest reset: records written before the first start are never read (no fault)
    assert steps[0] == ["produce"] and kinds[0] == {"lost"}
    # the commit before the print: a crash between them loses an order it read (the lost
    # record's witness holds its read event); the second problem, before any other face
    assert {"lost", "offset-ahead"} <= kinds[1] and "crash" in steps[1], problems
    lost = next(a for a in problems[1]["verdict"]["anomalies"] if a["kind"] == "lost")
    assert any(len(w["events"]) > 1 for w in lost["witnesses"]), problems
    assert _replays_and_renders(tmp_path / "failures", tmp_path) == len(problems)
    with_kafka = _harness("kafka", *KAFKA, "--replay", problems[1]["replay_file"], cwd=tmp_path)
    assert with_kafka.returncode == 1 and "orders[0]" in with_kafka.stdout


def test_the_pytest_doors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_doors=f"""
        from harness.catalogue.toys import commit_before_processing
        from harness.effects import stdout_lines
        from harness.kafka.payloads import template

        def test_explore(harness_explore):
            harness_explore(commit_before_processing, guarantee="at-least-once",
                            faults=["crash"], max_examples=30)

        def test_kafka(harness_kafka):
            harness_kafka({str(APPS / "print_autocommit.py")!r}, guarantee="at-least-once",
                          inputs=["orders"], encode=template({TEMPLATE!r}),
                          effects=[stdout_lines(pattern=r"shipped order (\\d+)")],
                          max_problems=1)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*effects: stdout*"])
    assert _replays_and_renders(pytester.path / ".harness" / "failures", pytester.path) >= 2


def test_kafka_usage_errors_name_the_flag_meant_and_the_missing_separator(
    tmp_path: Path,
) -> None:
    typo = _harness("kafka", *KAFKA[:4], "--inptu", "orders", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean --input?" in typo.stderr
    app_args = _harness("kafka", *KAFKA, "--db", "orders.db", cwd=tmp_path)
    assert app_args.returncode == 2
    assert "go after '--'" in app_args.stderr and "-- --db orders.db" in app_args.stderr


def test_a_script_that_raises_on_import_is_one_startup_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text(
        "import json\nfrom confluent_kafka import Consumer\n"
        "SETTINGS = json.load(open('/nonexistent/settings.json'))\n",
        encoding="utf-8",
    )
    found = _harness(
        "kafka",
        str(script),
        "--guarantee",
        "at-least-once",
        "--input",
        "orders",
        "--effect",
        "stdout",
        cwd=tmp_path,
    )
    assert found.returncode == 2
    assert found.stderr.count("\n") == 1, found.stderr  # one line, no retries, no traceback
    assert "failed to start" in found.stderr and "broken.py:3" in found.stderr
    assert not (tmp_path / ".harness").exists()  # no replay file for an empty schedule


def test_a_kafka_replay_keeps_the_environment_the_app_read(tmp_path: Path) -> None:
    command = [
        "kafka",
        str(APPS / "file_writer.py"),
        "--guarantee",
        "at-least-once",
        "--input",
        "orders",
        "--effect",
        "file:orders.csv",
        "--by",
        r"pattern=^(\d+),",
        "--value-template",
        TEMPLATE,
        "--max-problems",
        "1",
        "--failures-dir",
        "failures",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ORDERS_CSV": "orders.csv", "BUGGY_FLUSH": "1"}
    found = subprocess.run(
        [sys.executable, "-m", "harness", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert found.returncode == 1, found.stdout + found.stderr
    assert not (tmp_path / "orders.csv").exists()
    [file] = (tmp_path / "failures").glob("*.json")
    assert json.loads(file.read_text())["factory"]["args"]["env"]["BUGGY_FLUSH"] == "1"
    # replayed without those variables in the environment: the file brings them back
    assert _replays_and_renders(tmp_path / "failures", tmp_path) == 1


def test_the_spark_job_doors_files_replay_and_render_like_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each door of an unchanged Spark job (``explore_spark_job``, ``python -m harness
    spark-job``, the ``harness_spark_job`` fixture's explorer) and of a built-in streaming
    variant (``explore_variant``) saves a replay file that ``replay FILE`` and ``report FILE``
    run again, with the same verdict and schedule. No JVM here: each run is the stand-in's
    of tests/test_engine_systems.py (a stream schedule played on the simulator by a toy that
    writes again after every restart); tests/test_spark_job.py does it with Spark."""
    import tempfile

    from test_engine_systems import JOB, _played, _variant_played

    from harness.catalogue.toys import rewind_on_restart
    from harness.cli import main
    from harness.spark.streaming import job, jobsearch, variantsearch

    monkeypatch.setattr(jobsearch, "run_job", _played(rewind_on_restart, []))
    monkeypatch.setattr(variantsearch, "run_stream", _variant_played(rewind_on_restart))
    monkeypatch.setattr(job, "quiet_session", lambda: None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the replays' worlds
    doors = tmp_path / "doors"
    with pytest.raises(harness.CounterexampleFound):
        jobsearch.explore_spark_job(
            JOB, "exactly-once", workdir=tmp_path / "api", failures_dir=doors / "api"
        )
    command = [*("spark-job", JOB.app, "--guarantee", "exactly-once", "--input", "events")]
    command += [*("--output", "out", "--failures-dir", str(doors / "cli"), "--json")]
    assert main(command) == 1
    with pytest.raises(harness.CounterexampleFound):
        jobsearch.JobExplorer(None, doors / "fixture")(
            JOB.app, guarantee="exactly-once", inputs=("events",), outputs=("out",)
        )
    with pytest.raises(harness.CounterexampleFound):
        variantsearch.explore_variant(
            "foreach-batch-append",
            "exactly-once",
            workdir=tmp_path / "v",
            failures_dir=doors / "variant",
        )
    capsys.readouterr()
    files = sorted(doors.rglob("*.json"))
    assert [file.parent.name for file in files] == ["api", "cli", "failures", "variant"]
    for number, file in enumerate(files):
        saved = json.loads(file.read_text(encoding="utf-8"))
        assert main(["replay", str(file), "--json"]) == 1
        replayed = json.loads(capsys.readouterr().out)
        assert replayed["schedule"] == saved["schedule"] and replayed["backend"] == "spark"
        assert {a["kind"] for a in replayed["verdict"]["anomalies"]} == {"duplicate"}
        out = tmp_path / f"report-{number}"
        assert main(["report", str(file), "--out", str(out)]) == 1
        assert "duplicate" in capsys.readouterr().out
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
        assert report["schedule"] == saved["schedule"]
        assert report["replay_command"] == f"python -m harness replay {file}"
        assert "duplicate" in (out / "report.html").read_text(encoding="utf-8")
        # the Python API runs it too, and a file written before files named their reader
        _, verdict = harness.replay(file)
        assert verdict.to_json() == replayed["verdict"]  # the command's verdict
        assert saved.pop("system") == "harness.spark.streaming.jobsearch:JobReplay.read"
        older = tmp_path / f"older-{number}.json"
        older.write_text(json.dumps(saved), encoding="utf-8")
        assert harness.replay(older)[1].anomalies == verdict.anomalies


def test_pytest_harness_replay_runs_a_spark_job_s_file_in_the_test_that_explores_the_job(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing ``harness_spark_job`` test prints ``replay in pytest: pytest TEST
    --harness-replay FILE``; that command runs the file's schedule once, against the test's
    job, and fails the test with the replay's verdict (or passes it once the job holds); a
    test of another subject is skipped, as for a processor's file. No JVM: the session is
    None and each run is the stand-in's of tests/test_engine_systems.py."""
    tests = Path(__file__).resolve().parent
    pytester.makeconftest(
        f"""
        import json, os, sys
        from pathlib import Path
        import pytest
        sys.path.insert(0, {str(tests)!r})
        from test_engine_systems import _played
        from harness.catalogue.toys import dedup_transformer, rewind_on_restart
        from harness.spark.streaming import jobsearch

        @pytest.fixture
        def harness_spark():
            return None

        @pytest.fixture(autouse=True)
        def stand_in(monkeypatch):
            toy = dedup_transformer if os.environ.get("TOY") == "dedup" else rewind_on_restart
            runs = []
            monkeypatch.setattr(jobsearch, "run_job", _played(toy, runs))
            yield
            with open("runs.jsonl", "a") as file:
                file.write(json.dumps(runs) + "\\n")
        """
    )
    pytester.makepyfile(
        test_job="""
        from harness.catalogue.toys import commit_before_processing

        def test_job(harness_spark_job):
            harness_spark_job("jobs/stand_in.py", guarantee="exactly-once",
                              inputs=("events",), outputs=("out",))

        def test_processor(harness_explore):
            harness_explore(commit_before_processing, guarantee="at-least-once",
                            faults=["crash"], max_examples=5)
        """
    )
    searched = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_job.py::test_job")
    searched.assert_outcomes(failed=1)
    (saved,) = (pytester.path / ".harness" / "failures").glob("spark-job-stand_in-*.json")
    rel = saved.relative_to(pytester.path)
    searched.stdout.fnmatch_lines(
        [f"*replay in pytest: pytest test_job.py::test_job --harness-replay {rel}"]
    )

    runs = pytester.path / "runs.jsonl"
    runs.unlink()
    replayed = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", "--harness-replay", rel
    )
    replayed.assert_outcomes(failed=1, skipped=1)
    replayed.stdout.fnmatch_lines(
        [
            f"harness: replaying {rel} (*/jobs/stand_in.py, 3 steps)",
            "*exactly-once does NOT hold for */jobs/stand_in.py (spark backend): INVALID, "
            f"replaying {rel}",
            "*duplicate*",
            f"*replay: python -m harness replay {rel}",
        ]
    )
    assert "/jobs/stand_in.py, not" in replayed.stdout.str()  # test_processor's skip
    ran = [json.loads(line) for line in runs.read_text().splitlines()]
    assert sorted(ran) == [[], ["test_job0/replay"]]  # one run, the file's schedule: no search

    runs.unlink()
    monkeypatch.setenv("TOY", "dedup")  # the job, fixed
    fixed = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--harness-replay", rel, "test_job.py::test_job"
    )
    fixed.assert_outcomes(passed=1)
    assert json.loads(runs.read_text()) == ["test_job0/replay"]
