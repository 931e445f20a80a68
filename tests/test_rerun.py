"""Processors that misbehave are explained: a nondeterministic processor is flagged flaky (never
VALID), a deterministic one is not, and an exception the processor raises is shown with the
processor's own file and line and called a processor error."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness import CounterexampleFound, explore, replay
from harness.catalogue.toys import TOYS
from harness.check import Guarantee, Status, check
from harness.engine import Failure, Replay, run_once
from harness.engine.reruns import explain, first_divergence, rerun
from harness.faults import Produce, Run, Schedule
from harness.report import Checked, gather, render_html, render_text
from harness.sim.context import Context
from harness.sim.topology import Topology

P = "in-0"
HERE = str(Path(__file__).resolve())

# state that survives from one run to the next, as wall-clock time or a random generator's does
_ticks = {"n": 0}
# how many instances a processor has started, in this interpreter
_starts = {"n": 0}


def commits_when_the_clock_says(ctx: Context) -> None:
    """Nondeterministic: stores its offset only when the "clock" says so (a real processor
    would compare time.time() with its last commit); correct at-least-once either way."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        _ticks["n"] += 1
        if _ticks["n"] == 1:
            ctx.offsets.put(P, record.next)


def _commit_first_or_last(ctx: Context, buggy: bool) -> None:
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        if buggy:
            ctx.offsets.put(P, record.next)
        out.emit(record)
        out.commit()
        if not buggy:
            ctx.offsets.put(P, record.next)


def coin_flipper(ctx: Context) -> None:
    """Nondeterministic: each instance flips a coin (a pseudo-random one, seeded by how many
    instances ran before it, so that the test itself is repeatable) to store its offset
    before emitting (loses a record at a crash) or after (correct)."""
    _starts["n"] += 1
    _commit_first_or_last(ctx, random.Random(_starts["n"]).random() < 0.5)


def commits_on_a_coin_flip(ctx: Context) -> None:
    """Nondeterministic: stores its offset after a record when a (pseudo-random, seeded by
    the ticks so far) coin says so; correct at-least-once either way."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        _ticks["n"] += 1
        if random.Random(_ticks["n"]).random() < 0.5:
            ctx.offsets.put(P, record.next)


def raises_on_a_key(ctx: Context) -> None:
    """A processor with a bug of its own: it raises on every record."""
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        parse(record.key)
        out.emit(record)


def parse(key: str | None) -> int:
    return int(f"not a number: {key}")  # the line the report must point at


def raises_in_its_timer(ctx: Context) -> None:
    """A processor whose periodic timer raises."""

    def flush() -> None:
        raise RuntimeError("timer broke")

    ctx.on_timer(flush)
    out = ctx.output("out")
    for record in ctx.read(P, ctx.offsets.get(P)):
        out.emit(record)
        out.commit()
        ctx.offsets.put(P, record.next)


def _line_of(text: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _failure(processor: object, **kwargs: object) -> Failure:
    with pytest.raises(CounterexampleFound) as found:
        explore(processor, failures_dir=None, **kwargs)  # type: ignore[arg-type]
    return found.value.failure


# -- flaky -------------------------------------------------------------------------------------


def test_a_deterministic_failure_is_not_flagged() -> None:
    toy = TOYS["commit_before_processing"]
    failure = _failure(toy.processor, guarantee=toy.guarantee, faults=toy.needs)
    assert failure.verdict.status is Status.INVALID
    assert not any("flaky" in reason for reason in failure.verdict.reasons)
    assert failure.processor_errors == ()
    history, verdict = run_once(toy.processor, failure.schedule, toy.guarantee)
    seen = rerun(toy.processor, failure.schedule, history, verdict)
    assert seen.divergence is None and not seen.flaky
    assert seen.verdict == verdict and seen.history == history


def test_a_deterministic_pass_stays_valid() -> None:
    toy = TOYS["process_then_commit"]
    schedule = Schedule((Produce(0, 3), Run(5)))
    history, verdict = run_once(toy.processor, schedule, toy.guarantee)
    assert verdict.status is Status.VALID
    seen = rerun(toy.processor, schedule, history, verdict, runs=3)
    assert seen.verdict is verdict and not seen.flaky


def test_a_processor_that_reads_a_clock_is_flaky_at_its_first_differing_event() -> None:
    _ticks["n"] = 0
    schedule = Schedule((Produce(0, 2), Run(10)))
    history, verdict = run_once(commits_when_the_clock_says, schedule, "at-least-once")
    assert verdict.status is Status.VALID  # each run on its own looks fine
    seen = rerun(commits_when_the_clock_says, schedule, history, verdict)
    commit = next(e.index for e in history.events if e.kind.value == "commit")
    assert seen.divergence is not None and seen.divergence.event == commit
    assert seen.divergence.run == 1
    assert seen.verdict.status is Status.UNKNOWN  # a flaky result is never VALID
    (reason,) = seen.verdict.reasons
    assert reason.startswith(
        f"flaky: the same schedule gave different histories at event {commit} "
        f"(first run: #{commit} p1 commit in-0 offset 1; run 2: #{commit} p1 "
    )
    assert seen.flaky


def test_first_divergence_finds_the_first_differing_or_missing_event() -> None:
    toy = TOYS["process_then_commit"]
    short, _ = run_once(toy.processor, Schedule((Produce(0, 1), Run(5))), toy.guarantee)
    longer, _ = run_once(toy.processor, Schedule((Produce(0, 2), Run(5))), toy.guarantee)
    assert first_divergence(short, short) is None
    index = first_divergence(short, longer)
    assert index is not None and short.events[:index] == longer.events[:index]
    assert short.events[index] != longer.events[index]


def test_an_exploration_of_a_nondeterministic_processor_never_reads_valid() -> None:
    _starts["n"] = 0
    failure = _failure(coin_flipper, guarantee="at-least-once", faults=["crash"], seed=3)
    assert failure.verdict.status is not Status.VALID
    flaky = [r for r in failure.verdict.reasons if r.startswith("flaky: ")]
    assert len(flaky) == 1
    assert "the same schedule gave different histories at event" in flaky[0]
    assert "flaky: the same schedule" in failure.report()
    # the anomalies reported are those of a history that did fail
    assert check(failure.history, Guarantee.AT_LEAST_ONCE).anomalies == failure.verdict.anomalies


def test_a_schedule_that_failed_in_the_search_and_passes_now_is_flaky_not_valid() -> None:
    # what explore() says when the shrunk schedule failed during shrinking and passes on
    # every run since: the processor changed its mind, so "VALID" would be a lie
    toy = TOYS["process_then_commit"]
    schedule = Schedule((Produce(0, 2), Run(10)))
    history, verdict = run_once(toy.processor, schedule, toy.guarantee)
    seen = rerun(toy.processor, schedule, history, verdict, failed=True, runs=2)
    assert seen.verdict.status is Status.UNKNOWN and seen.verdict.anomalies == ()
    assert seen.verdict.reasons == (
        "flaky: the same schedule failed during the search but passed when run again (the "
        "histories of 8 more runs agreed with the passing one); the processor is "
        "nondeterministic: its verdict cannot be trusted",
    )


def test_a_replay_of_a_nondeterministic_processor_says_flaky_every_time(tmp_path: Path) -> None:
    _ticks["n"] = 0
    schedule = Schedule((Produce(0, 3), Run(10)))
    spec = Replay(
        f"{__name__}:commits_on_a_coin_flip",
        Guarantee.AT_LEAST_ONCE,
        Topology(),
        "memory",
        schedule,
        processor_file=HERE,
    )
    path = spec.save(tmp_path)
    verdicts = [replay(path)[1] for _ in range(3)]
    assert all(v.status is Status.UNKNOWN for v in verdicts)
    assert all(v.reasons[0].startswith("flaky: the same schedule gave") for v in verdicts)
    assert json.loads(path.read_text())["harness_replay"] == 1


def test_explain_keeps_anomalies_and_puts_the_flakiness_first() -> None:
    toy = TOYS["commit_before_processing"]
    failure = _failure(toy.processor, guarantee=toy.guarantee, faults=toy.needs)
    explained = explain(failure.verdict, (), "flaky: x")
    assert explained.status is Status.INVALID
    assert explained.anomalies == failure.verdict.anomalies
    assert explained.reasons == ("flaky: x", *failure.verdict.reasons)
    assert explain(failure.verdict, ()) is failure.verdict


# -- processor errors --------------------------------------------------------------------------


def test_a_processor_error_shows_the_users_file_and_line_first() -> None:
    failure = _failure(raises_on_a_key, guarantee="at-least-once")
    assert failure.verdict.status is Status.UNKNOWN
    (error,) = failure.processor_errors
    assert error.error == "ValueError: invalid literal for int() with base 10: 'not a number: k0'"
    assert [(f.file, f.function) for f in error.frames] == [
        (HERE, "raises_on_a_key"),
        (HERE, "parse"),
    ]
    assert error.frames[-1].line == _line_of("the line the report must point at")
    assert error.events and all(
        failure.history.events[i].kind.value == "error" for i in error.events
    )
    where = f"{HERE}:{error.frames[-1].line} in parse"
    assert failure.verdict.reasons[0] == f"processor error: {error.error} (at {where})"
    lines = failure.report().splitlines()
    assert lines[1].startswith("processor error (raised ")
    assert lines[2] == "  Traceback (the processor's frames, most recent call last):"
    assert lines[5] == f'    File "{HERE}", line {error.frames[-1].line}, in parse'
    assert lines[7] == f"  {error.error}"


def test_an_error_raised_in_a_timer_callback_points_at_the_callback() -> None:
    failure = _failure(raises_in_its_timer, guarantee="at-least-once", faults=["crash"])
    assert failure.processor_errors, failure.report()
    (error,) = failure.processor_errors
    assert error.error == "RuntimeError: timer broke"
    assert error.frames[-1].function == "flush"
    assert error.frames[-1].line == _line_of('raise RuntimeError("timer broke")')


def test_reports_show_the_processor_error_before_the_anomalies() -> None:
    failure = _failure(raises_on_a_key, guarantee="at-least-once")
    text = render_text(gather(failure)).splitlines()
    assert text[2].startswith("processor error (raised ")
    assert f'File "{HERE}", line {failure.processor_errors[0].frames[-1].line}, in parse' in (
        "\n".join(text[3:8])
    )
    subject = Checked(failure.verdict, failure.history, processor_errors=failure.processor_errors)
    page = render_html(subject)
    assert page.index('id="processor-errors"') < page.index('id="anomalies"')
    assert "invalid literal for int()" in page


def _polls_forever(ctx: Context) -> None:
    while True:  # each run stops at whichever call the clock catches it
        ctx.offsets.get("in-0")


def test_runs_stopped_by_the_clock_at_different_calls_are_not_called_flaky() -> None:
    from harness.sim.budget import RunBudget

    budget = RunBudget(seconds=0.05)
    schedule = Schedule([Produce(count=1), Run(10**6)])
    history, verdict = run_once(_polls_forever, schedule, Guarantee.AT_LEAST_ONCE, budget=budget)
    seen = rerun(_polls_forever, schedule, history, verdict, budget=budget)
    assert seen.verdict.status is Status.UNKNOWN
    assert not seen.flaky
    assert not any("nondeterministic" in reason for reason in seen.verdict.reasons)
    assert "the time budget ran out" in seen.verdict.summary()


def test_a_search_failure_by_time_that_passes_again_blames_the_budget() -> None:
    schedule = Schedule([Produce(count=1), Run(5)])
    processor = TOYS["process_then_commit"].processor
    history, verdict = run_once(processor, schedule, Guarantee.AT_LEAST_ONCE)
    seen = rerun(processor, schedule, history, verdict, runs=1, failed=True, timed_out=True)
    assert seen.verdict.status is Status.UNKNOWN
    assert seen.verdict.reasons[0].startswith("slow: the same schedule ran out of time")
    assert not seen.flaky and "nondeterministic" not in seen.verdict.summary()


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def _raises_unprintable(ctx: Context) -> None:
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        raise _Unprintable(record)


def test_an_exception_whose_str_raises_is_not_called_flaky() -> None:
    schedule = Schedule([Produce(count=1), Run(5)])
    history, verdict = run_once(_raises_unprintable, schedule, Guarantee.AT_LEAST_ONCE)
    seen = rerun(_raises_unprintable, schedule, history, verdict)
    assert verdict.status is not Status.VALID
    assert not seen.flaky, seen.verdict.reasons
    assert seen.processor_errors[0].error == "_Unprintable: <its __str__ raised RuntimeError>"
