"""Every run ends, and no run passes by accident (issue 18, items 3 and 4).

A processor that raises a BaseException that is not an Exception (``sys.exit``, its own
``KeyboardInterrupt``, ``GeneratorExit``, ``GreenletExit``) makes the run UNKNOWN, never VALID;
a real Ctrl-C still interrupts. A run that spends its call or time budget ends UNKNOWN with a
reason naming the instance, its last fault point and the budget: a processor that spins,
sleeps or swallows every BaseException cannot hang the harness. The time-budget tests use a
budget of a few hundredths of a second, so no test waits longer than that.
"""

from __future__ import annotations

import _signal
import contextlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import greenlet
import pytest

from harness.catalogue.toys import process_then_commit
from harness.check import Guarantee, Status
from harness.check.wording import NO_DRAIN_REASON
from harness.engine import CounterexampleFound, Replay, explore, replay, run_once
from harness.errors import ConfigError
from harness.faults import Crash, Produce, Run, Schedule, Tick
from harness.history import EventKind, History
from harness.sim import Context, RunBudget, Topology, budget, simulate
from harness.sim.budget import _inside_harness as inside_harness
from harness.sim.simulator import _body

P = "in-0"
ALO = Guarantee.AT_LEAST_ONCE
TINY = RunBudget(seconds=0.05)
BOUNDARY = _body.__code__


def _end(history: History) -> str:
    end = history.events[-1]
    assert end.kind is EventKind.END
    return end.detail or ""


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler, as in a plain ``python -m harness`` run."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# -- item 3: a BaseException from a processor is never VALID -----------------------------------


def exits(ctx: Context) -> None:
    ctx.offsets.get(P)
    sys.exit(0)


def interrupts_itself(ctx: Context) -> None:
    ctx.offsets.get(P)
    raise KeyboardInterrupt


def raises_generator_exit(ctx: Context) -> None:
    ctx.offsets.get(P)
    raise GeneratorExit


def raises_greenlet_exit(ctx: Context) -> None:
    ctx.offsets.get(P)
    raise greenlet.GreenletExit


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize(
    ("processor", "name"),
    [
        (exits, "SystemExit: 0"),
        (interrupts_itself, "KeyboardInterrupt"),
        (raises_generator_exit, "GeneratorExit"),
        (raises_greenlet_exit, "GreenletExit"),
    ],
)
def test_a_base_exception_from_a_processor_makes_the_run_unknown(
    processor: object, name: str
) -> None:
    schedule = Schedule([Produce(count=1), Run(5), Produce(count=1)])
    history, verdict = run_once(processor, schedule, ALO)  # type: ignore[arg-type]
    assert verdict.status is Status.UNKNOWN
    assert _end(history) == (
        f"incomplete: instance 1 raised {name}, a BaseException that is not an Exception: a "
        "processor must not exit the interpreter or raise KeyboardInterrupt, GeneratorExit or "
        "GreenletExit, and a run it cuts short cannot be judged"
    )
    errors = [e.detail for e in history.events if e.kind is EventKind.ERROR]
    assert errors == [name]
    # stopped at once: neither the next step nor the drain ran
    assert [e.kind for e in history.events].count(EventKind.APPEND) == 1
    assert [e.kind for e in history.events].count(EventKind.DRAIN) == 0


def test_a_processor_that_exits_later_in_the_drain_is_not_valid() -> None:
    calls: list[int] = []

    def exits_on_restart(ctx: Context) -> None:
        calls.append(ctx.instance)
        if ctx.instance > 1:
            raise SystemExit(0)
        process_then_commit(ctx)

    _, verdict = run_once(exits_on_restart, Schedule([Produce(count=2), Run(2), Crash()]), ALO)
    assert verdict.status is Status.UNKNOWN
    assert calls == [1, 2]


def test_the_cli_does_not_exit_0_for_a_processor_calling_sys_exit(tmp_path: Path) -> None:
    (tmp_path / "exiting.py").write_text(
        textwrap.dedent(
            """
            import sys

            def processor(ctx):
                ctx.offsets.get("in-0")
                sys.exit(0)
            """
        ),
        encoding="utf-8",
    )
    result = subprocess.run(
        [
            *(sys.executable, "-m", "harness", "run", "exiting:processor"),
            *("--guarantee", "at-least-once", "--examples", "2", "--failures-dir", "f"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "raised SystemExit: 0" in result.stdout


@pytest.mark.usefixtures("default_sigint")
def test_a_real_ctrl_c_interrupts_even_a_processor_that_swallows_it() -> None:
    def swallows(ctx: Context) -> None:
        ctx.offsets.get(P)
        with contextlib.suppress(BaseException):
            signal.raise_signal(signal.SIGINT)  # what a Ctrl-C delivers
        while True:
            ctx.offsets.get(P)

    with pytest.raises(KeyboardInterrupt):
        simulate(swallows, Schedule([Run(5)]))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- item 4: every run ends ----------------------------------------------------------------------


def spins(ctx: Context) -> None:
    ctx.offsets.get(P)
    while True:
        pass


def sleeps(ctx: Context) -> None:
    ctx.offsets.get(P)
    time.sleep(3600)


def swallows_everything(ctx: Context) -> None:
    ctx.offsets.get(P)
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


@pytest.mark.parametrize("processor", [spins, sleeps, swallows_everything])
def test_a_processor_that_never_calls_ctx_again_is_stopped_by_the_time_budget(
    processor: object,
) -> None:
    alarm = signal.getsignal(signal.SIGALRM)
    history, verdict = run_once(processor, Schedule([Produce(count=1)]), ALO, budget=TINY)  # type: ignore[arg-type]
    assert verdict.status is Status.UNKNOWN
    # (where exactly the 0.05 s ran out depends on the machine; that it ran out does not)
    assert _end(history).startswith(
        "incomplete: over the run budget (1000000 calls, 0.05 s): the time budget ran out"
    )
    assert "; last fault point: " in _end(history)
    # on a loaded machine the 0.05 s can run out before the schedule ends and the drain
    # starts: the run then also has no drain phase, and the verdict says so second
    drained = any(event.kind is EventKind.DRAIN for event in history.events)
    expected = (_end(history),) if drained else (_end(history), NO_DRAIN_REASON)
    assert verdict.reasons == expected
    assert signal.getsignal(signal.SIGALRM) is alarm  # the watchdog put everything back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_watchdog_names_the_instance_and_its_last_fault_point() -> None:
    def alarmed(ctx: Context) -> None:
        ctx.offsets.get(P)
        signal.raise_signal(signal.SIGALRM)  # the watchdog's alarm, on cue
        while True:
            pass

    history, verdict = run_once(alarmed, Schedule([Produce(count=1), Run(5)]), ALO)
    assert verdict.status is Status.UNKNOWN
    assert _end(history) == (
        "incomplete: over the run budget (1000000 calls, 60 s): the time budget ran out "
        "while instance 1 ran its own code (a busy loop, a sleep or I/O outside ctx?); last "
        "fault point: instance 1, call 1 (offsets.get)"
    )


def test_a_timer_that_calls_ctx_forever_is_stopped_by_the_call_budget() -> None:
    def chatty(ctx: Context) -> None:
        def forever() -> None:
            while True:
                ctx.offsets.get(P)

        ctx.on_timer(forever)
        for _ in ctx.read(P, ctx.offsets.get(P)):
            pass

    schedule = Schedule([Produce(count=1), Run(3), Tick()])
    budget = RunBudget(calls=500)
    history, verdict = run_once(chatty, schedule, ALO, budget=budget)
    assert verdict.status is Status.UNKNOWN
    assert _end(history) == (
        "incomplete: over the run budget (500 calls, 60 s): the call budget ran out at this "
        "call; last fault point: instance 1, call 501 (offsets.get), not made"
    )
    again, _ = run_once(chatty, schedule, ALO, budget=budget)
    assert again.events == history.events  # the call budget is deterministic


def test_a_processor_that_swallows_its_crash_and_calls_again_is_left_behind() -> None:
    def stubborn(ctx: Context) -> None:
        out = ctx.output()
        for record in ctx.read(P, ctx.offsets.get(P)):
            while True:
                try:
                    out.emit(record)
                    out.commit()
                    ctx.offsets.put(P, record.next)
                    break
                except BaseException:
                    continue

    schedule = Schedule([Produce(count=2), Run(3), Crash()])
    history, verdict = run_once(stubborn, schedule, ALO)
    assert verdict.status is Status.VALID, verdict.summary()
    assert _end(history) == "complete"


def test_a_huge_produce_ends_within_the_time_budget() -> None:
    started = time.monotonic()
    history, verdict = run_once(
        process_then_commit,
        Schedule([Produce(count=100_000)]),
        ALO,
        budget=RunBudget(seconds=0.2),
    )
    assert verdict.status is Status.UNKNOWN
    assert _end(history).startswith("incomplete: over the run budget (1000000 calls, 0.2 s)")
    assert time.monotonic() - started < 60  # not a timing assertion: "it ended", generously


def test_a_schedule_that_produces_more_than_the_budget_can_read_is_refused_up_front() -> None:
    spec = Replay(
        processor="harness.catalogue.toys:process_then_commit",
        guarantee=ALO,
        topology=Topology(),
        backend="memory",
        schedule=Schedule([Produce(count=100_000)]),
    )
    with pytest.raises(ConfigError) as raised:
        replay(spec, budget=RunBudget(calls=50_000))
    assert str(raised.value) == (
        "the schedule produces 100000 input records, more than the run budget of 50000 calls "
        "can read (each record takes at least one call); raise the budget's calls or produce "
        "fewer records"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"calls": 0}, "run budget calls must be an int >= 1, got 0; e.g. 1000000"),
        ({"calls": 1.5}, "run budget calls must be an int >= 1, got 1.5; e.g. 1000000"),
        ({"seconds": 0}, "run budget seconds must be a number in (0, 86400], got 0; e.g. 60"),
        (
            {"seconds": float("nan")},
            "run budget seconds must be a number in (0, 86400], got nan; e.g. 60",
        ),
        ({"seconds": "1"}, "run budget seconds must be a number in (0, 86400], got '1'; e.g. 60"),
    ],
)
def test_a_bad_budget_is_a_config_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        RunBudget(**kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_the_watchdog_tells_the_harness_code_from_the_processors() -> None:
    seen: list[tuple[bool, bool]] = []
    linked: list[bool] = []

    def processor(ctx: Context) -> None:
        def work(record: object) -> object:
            here = sys._getframe()
            # its own frame is the processor's; its caller is the harness's map_async
            seen.append((inside_harness(here, BOUNDARY), inside_harness(here.f_back, BOUNDARY)))
            linked.append(here.f_back is not None)
            return record

        for _ in ctx.map_async(work, ctx.read(P), parallelism=1, ordered=True):
            return

    simulate(processor, Schedule([Produce(count=1), Run(5)]))
    # greenlet 3.0 on Python 3.10 (the oldest supported) does not link a greenlet's first
    # frame to the code that started it: there the caller cannot be seen, and the watchdog
    # takes the frame for the processor's (it then stops the run there, which ends UNKNOWN)
    assert seen == [(False, linked[0])]
    if sys.version_info >= (3, 11):
        assert linked == [True]


def test_shrinking_a_run_that_ran_out_of_time_gets_a_second_at_most() -> None:
    budget = RunBudget(calls=10, seconds=60)
    timed_out = "incomplete: over the run budget (10 calls, 60 s): the time budget ran out; ..."
    assert budget.for_shrinking(timed_out) == RunBudget(calls=10, seconds=1.0)
    assert budget.for_shrinking("complete") is budget
    assert budget.for_shrinking(None) is budget
    assert RunBudget(seconds=0.5).for_shrinking(timed_out).seconds == 0.5


def test_explore_of_a_spinning_processor_ends_with_an_unknown_report() -> None:
    with pytest.raises(CounterexampleFound) as found:
        explore(spins, guarantee=ALO, max_examples=5, budget=TINY, failures_dir=None)
    failure = found.value.failure
    assert failure.verdict.status is Status.UNKNOWN
    assert "over the run budget (1000000 calls, 0.05 s)" in str(found.value)


# -- the backstop thread: woken by a deadline only when it comes first --------------------------

_C_SETITIMER = _signal.setitimer  # bound before any run: the run's guard cannot interpose it


def test_the_backstop_fires_in_a_run_after_one_with_a_later_deadline() -> None:
    """A run with a long budget leaves the backstop thread waiting for a late deadline; the
    next run's earlier one must wake it, or a processor that disarmed its timer behind the
    guard's back would run on."""
    run_once(process_then_commit, Schedule([Produce(count=1), Run(5)]), ALO)  # 60 s budget

    def disarms(ctx: Context) -> None:
        ctx.offsets.get(P)
        _C_SETITIMER(signal.ITIMER_REAL, 0)  # the watchdog's timer, off
        while True:
            pass

    history, verdict = run_once(disarms, Schedule([Produce(count=1), Run(5)]), ALO, budget=TINY)
    assert verdict.status is Status.UNKNOWN
    assert "the time budget ran out" in _end(history)


def test_a_later_deadline_does_not_wake_the_backstop_thread() -> None:
    """Each run's deadline comes after the one the thread already waits for: waking it every
    run would let it take the GIL at the run's first blocking call. (The test plays the
    thread: it says when the thread wakes next.)"""
    backstop = budget._Backstop()
    backstop._thread = threading.current_thread()  # no thread of its own
    woken: list[int] = []
    backstop._cond.notify = lambda n=1: woken.append(n)  # type: ignore[method-assign]
    dog = budget.Watchdog(60.0, greenlet.getcurrent(), BOUNDARY)
    now = time.monotonic()
    backstop.watch(dog, now + 60)  # the thread is not waiting yet
    assert len(woken) == 1
    backstop._wake = now + 60 + budget._GRACE  # it waits for that deadline
    backstop.forget(dog)
    backstop.watch(dog, now + 61)  # the next run's, later
    assert len(woken) == 1
    backstop.watch(dog, now + 1)  # earlier than the one it waits for
    assert len(woken) == 2
