"""A failure reads at a glance: witnesses say how many of how many they show, a run step
that a fault follows names the call it stopped before, a cut run budget says which seconds
bound the run, and the replay of a script's processor does not run the script's search."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness._budget import TIME_RAN_OUT, RunBudget
from harness.catalogue.toys import commit_before_processing
from harness.check import AnomalyKind, Guarantee, Status, Verdict
from harness.check.verdict import Anomaly, Witness
from harness.engine import run_once
from harness.faults import Crash, Produce, Run, Schedule
from harness.report import gather, render_text

ROOT = Path(__file__).resolve().parent.parent


def test_an_anomaly_line_says_how_many_witnesses_it_shows() -> None:
    witness = Witness(record_ids=("r0",), events=(1,), detail="gone")
    three = Anomaly(AnomalyKind.LOST, 3, (witness,))
    assert three.summary().startswith("lost x3 (showing 1 of 3): records [r0]")
    assert Anomaly(AnomalyKind.LOST, 1, (witness,)).summary().startswith("lost x1: records")
    verdict = Verdict(Status.INVALID, Guarantee.AT_LEAST_ONCE, (three,))
    assert "  lost x3 (showing 1 of 3)" in render_text(gather(verdict)).splitlines()


def test_a_run_step_names_the_call_the_crash_after_it_lands_before() -> None:
    schedule = Schedule((Produce(0, 1), Run(3), Crash()))
    history, verdict = run_once(commit_before_processing, schedule, "at-least-once")
    assert verdict.status is Status.INVALID
    stop = "instance 1 stopped before call 4 (output.emit)"
    assert history.meta.extra["stops"] == {"1": stop}
    lines = schedule.describe(history.meta.extra["stops"]).splitlines()
    assert lines[1] == f"  1. Run(calls=3)  # {stop}"
    assert lines[2] == "  2. Crash(machine=False, keep=0)"
    report = render_text(gather(verdict, history, schedule=schedule))
    assert f"Run(calls=3)  # {stop}" in report
    # a run step whose instance waits for input (nothing left to read) stops at no call
    idle, _ = run_once(commit_before_processing, Schedule((Run(50),)), "at-least-once")
    assert "stops" not in idle.meta.extra


def test_a_cut_budget_names_the_seconds_that_bound_the_run_first() -> None:
    cut = RunBudget(seconds=2).for_shrinking(f"incomplete: {TIME_RAN_OUT}")
    assert cut.describe() == (
        "1000000 calls, 1 s a run while shrinking (the search's runs had 2 s, and one ran out)"
    )
    assert RunBudget(seconds=2).describe() == "1000000 calls, 2 s"


SCRIPT = """\
    import harness
    from harness.catalogue.toys import P


    def buggy(ctx):
        out = ctx.output("out")
        for record in ctx.read(P, ctx.offsets.get(P)):
            ctx.offsets.put(P, record.next)
            out.emit(record)
            out.commit()


    print("the script ran")
    harness.explore(buggy, guarantee="at-least-once", max_examples=20, seed=1)
    print("after the search")
"""


def _python(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_replay_of_a_script_processor_does_not_run_the_scripts_search(
    tmp_path: Path,
) -> None:
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    searched = _python("script.py", cwd=tmp_path)
    assert searched.returncode == 1 and "CounterexampleFound" in searched.stderr
    (saved,) = (tmp_path / ".harness" / "failures").iterdir()
    replayed = _python("-m", "harness", "replay", str(saved), cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stderr
    assert "at-least-once for __main__:buggy (memory backend): INVALID" in replayed.stdout
    assert "the script ran" in replayed.stdout  # its module-level code ran, up to explore()
    assert "after the search" not in replayed.stdout
    assert list((tmp_path / ".harness" / "failures").iterdir()) == [saved]  # no second file
