"""The run budget through the front doors: the profile, the pytest marker, the CLI options."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.search.profiles import PROFILES
from harness.sim import DEFAULT_RUN_BUDGET, Topology

pytest_plugins = ["pytester"]

SPINNING = """
    def spins(ctx):
        ctx.offsets.get("in-0")
        while True:
            pass
"""


def test_every_profile_has_a_run_budget() -> None:
    assert {name: p.run_budget for name, p in PROFILES.items()} == dict.fromkeys(
        PROFILES, DEFAULT_RUN_BUDGET
    )


def test_the_marker_sets_the_run_budget_and_a_spinning_processor_fails_its_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_spin=textwrap.dedent(SPINNING)
        + textwrap.dedent(
            """
            import pytest

            @pytest.mark.harness(run_seconds=0.05, run_calls=1000, max_examples=2)
            def test_spinning(harness_explore, harness_settings):
                budget = harness_settings.run_budget
                assert (budget.calls, budget.seconds) == (1000, 0.05)
                harness_explore(spins, guarantee="at-least-once")
            """
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*UNKNOWN*",
            "*over the run budget (1000 calls, 0.05 s): the time budget ran out*",
        ]
    )


def test_a_bad_run_budget_in_the_marker_fails_its_test_with_where_it_is(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.harness(run_calls=0)
        def test_budget(harness_explore):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # at setup, as every bad marker value
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.harness(run_calls=0) (marker on test_a_bad_run_budget*.py::"
            "test_budget): run_calls must be an integer >= 1, got 0; give e.g. 100"
        ]
    )


def _harness(
    tmp_path: Path, *args: str, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(command or [sys.executable, "-m", "harness"]), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_cli_run_ends_a_spinning_processor_at_run_seconds(tmp_path: Path) -> None:
    (tmp_path / "spinning.py").write_text(textwrap.dedent(SPINNING), encoding="utf-8")
    result = _harness(
        tmp_path,
        *("run", "spinning:spins", "--guarantee", "at-least-once", "--examples", "2"),
        *("--run-seconds", "0.05", "--failures-dir", "f"),
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "over the run budget (1000000 calls, 0.05 s)" in result.stdout


def test_the_cli_replay_refuses_a_schedule_the_budget_cannot_read(tmp_path: Path) -> None:
    spec = {
        "harness_replay": 1,
        "processor": "harness.catalogue.toys:process_then_commit",
        "guarantee": "at-least-once",
        "backend": "memory",
        "topology": Topology().to_json(),
        "schedule": {"version": 1, "steps": [{"op": "produce", "count": 100000}]},
    }
    path = tmp_path / "big.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    result = _harness(tmp_path, "replay", str(path), "--run-calls", "1000")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == (
        "error: the schedule produces 100000 input records, more than the run budget of 1000 "
        "calls can read (each record takes at least one call); raise the budget's calls or "
        "produce fewer records"
    )


def test_a_real_ctrl_c_ends_the_cli_with_130_and_no_traceback(
    tmp_path: Path, harness_command: list[str]
) -> None:
    (tmp_path / "interrupted.py").write_text(
        textwrap.dedent(
            """
            import signal

            def processor(ctx):
                ctx.offsets.get("in-0")
                try:
                    signal.raise_signal(signal.SIGINT)  # what a Ctrl-C delivers
                except BaseException:
                    pass
                while True:
                    pass
            """
        ),
        encoding="utf-8",
    )
    result = _harness(
        tmp_path,
        *("run", "interrupted:processor", "--guarantee", "at-least-once", "--examples", "2"),
        command=harness_command,
    )
    assert (result.returncode, result.stderr, result.stdout) == (130, "interrupted\n", "")
