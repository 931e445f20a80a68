"""No way out of a run but a verdict: a processor that tries to end the process, or to switch
off the watchdog, ends its run UNKNOWN (harness.sim.exits, harness.sim.budget)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import Guarantee, Produce, Run, Schedule, Status
from harness.catalogue.toys import process_then_commit
from harness.engine import load_processor, run_once
from harness.errors import ConfigError
from harness.sim import Context
from harness.sim.exits import Guard, ProcessExit

ALO = Guarantee.AT_LEAST_ONCE
P = "in-0"
SCHEDULE = Schedule([Produce(count=2), Run(5)])
REAL = {name: getattr(os, name) for name in ("_exit", "abort", "kill", "killpg", "execv")}


def _end(processor: Callable[[Context], object]) -> tuple[Status, str]:
    history, verdict = run_once(processor, SCHEDULE, ALO)
    return verdict.status, history.events[-1].detail or ""


def _leaving(leave: Callable[[], object]) -> Callable[[Context], None]:
    def processor(ctx: Context) -> None:
        ctx.offsets.get(P)
        with contextlib.suppress(BaseException):
            leave()
        process_then_commit(ctx)  # were it resumed, it would run VALID to the end

    return processor


LEAVES: dict[str, tuple[Callable[[], object], str]] = {
    "os._exit(0)": (lambda: os._exit(0), "called os._exit(0)"),
    "os._exit(3)": (lambda: os._exit(3), "called os._exit(3)"),
    "posix._exit": (lambda: __import__("posix")._exit(0), "called os._exit(0)"),
    "os.abort": (lambda: os.abort(), "called os.abort()"),
    "SIGTERM by os.kill": (
        lambda: os.kill(os.getpid(), signal.SIGTERM),
        "sent itself SIGTERM (os.kill)",
    ),
    "SIGKILL by os.kill(0)": (lambda: os.kill(0, signal.SIGKILL), "sent itself SIGKILL"),
    "SIGTERM by os.killpg": (
        lambda: os.killpg(os.getpgrp(), signal.SIGTERM),
        "sent itself SIGTERM (os.killpg)",
    ),
    "SIGQUIT by raise_signal": (
        lambda: signal.raise_signal(signal.SIGQUIT),
        "sent itself SIGQUIT (signal.raise_signal)",
    ),
    "SIGTERM by pthread_kill": (
        lambda: signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM),
        "sent itself SIGTERM (signal.pthread_kill)",
    ),
    "os.execv": (lambda: os.execv(sys.executable, [sys.executable]), "called os.execv("),
}


@pytest.mark.parametrize("name", LEAVES)
def test_a_processor_that_tries_to_end_the_process_ends_its_run_unknown(name: str) -> None:
    leave, said = LEAVES[name]
    status, end = _end(_leaving(leave))
    assert status is Status.UNKNOWN
    assert end.startswith("incomplete: instance 1 ")
    assert said in end and "a processor must not end the process" in end
    # the functions are the real ones again after the run
    assert {name: getattr(os, name) for name in REAL} == REAL


def test_a_processor_that_leaves_from_its_timer_is_named() -> None:
    def processor(ctx: Context) -> None:
        ctx.on_timer(lambda: os._exit(0))
        process_then_commit(ctx)

    schedule = Schedule([Produce(count=1), Run(3), __import__("harness").Tick()])
    history, verdict = run_once(processor, schedule, ALO)
    assert verdict.status is Status.UNKNOWN
    assert "instance 1 called os._exit(0)" in (history.events[-1].detail or "")


@pytest.mark.parametrize("leave", ["os._exit", "os.abort"])
def test_a_thread_the_processor_starts_cannot_end_the_process_either(leave: str) -> None:
    """A thread outside the guard that leaves while a run is guarded ends itself, not the
    process, and the run it came from ends UNKNOWN (a pytest session once ended 0 here)."""
    ended: list[str] = []

    def leaver() -> None:
        try:
            os._exit(0) if leave == "os._exit" else os.abort()
        except SystemExit as exc:  # what ends the thread (pytest would report it uncaught)
            ended.append(str(exc))

    def processor(ctx: Context) -> None:
        thread = threading.Thread(target=leaver)
        thread.start()
        thread.join()
        process_then_commit(ctx)

    history, verdict = run_once(processor, SCHEDULE, ALO)
    assert verdict.status is Status.UNKNOWN
    end = history.events[-1].detail or ""
    assert end.startswith("incomplete: a thread the processor started called " + leave), end
    assert ended and "a thread the processor started" in ended[0]
    assert {name: getattr(os, name) for name in REAL} == REAL
    # the next run, without such a thread, is judged as usual
    assert run_once(process_then_commit, SCHEDULE, ALO)[1].status is Status.VALID


def test_another_thread_keeps_the_real_functions() -> None:
    seen: list[object] = []

    def handler(signum: int, frame: object) -> None:
        raise AssertionError("never called")

    def processor(ctx: Context) -> None:
        signal.signal(signal.SIGALRM, handler)
        thread = threading.Thread(target=lambda: seen.append(signal.getsignal(signal.SIGALRM)))
        thread.start()
        thread.join()
        seen.append(signal.getsignal(signal.SIGALRM))
        process_then_commit(ctx)

    _, verdict = run_once(processor, SCHEDULE, ALO)
    assert verdict.status is Status.VALID
    assert getattr(seen[0], "__name__", None) == "_alarm"  # the watchdog's, for real
    assert seen[1] is handler  # what the processor believes it installed


def test_a_processor_may_install_the_default_and_ignore_handlers_by_their_enum_names() -> None:
    """``signal.SIG_DFL`` is an enum member, which the C function refuses: the guard converts
    it as ``signal.signal`` does (asyncio's loop.close() restores handlers this way)."""
    seen: list[object] = []

    def processor(ctx: Context) -> None:
        for signum in (signal.SIGTERM, signal.SIGALRM):
            signal.signal(signum, signal.SIG_IGN)
            seen.append(signal.signal(signum, signal.SIG_DFL))
            seen.append(signal.getsignal(signum))
        process_then_commit(ctx)

    before = signal.getsignal(signal.SIGTERM)
    _, verdict = run_once(processor, SCHEDULE, ALO)
    assert verdict.status is Status.VALID, verdict.summary()
    assert seen == [signal.SIG_IGN, signal.SIG_DFL] * 2
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_handler_of_its_own_comes_back_as_it_is_and_is_never_formatted() -> None:
    """A callable handler is no ``Handlers`` member: the guard hands it back as it is,
    without the enum's refusal formatting its repr (asyncio.run's handler is a partial of
    its main task, whose repr is dear); the default and ignore handlers stay members."""
    formatted: list[str] = []

    class Handler:
        def __call__(self, signum: int, frame: object) -> None:
            pass

        def __repr__(self) -> str:
            formatted.append("repr")
            return "Handler()"

    handler = Handler()
    seen: list[object] = []

    def processor(ctx: Context) -> None:
        signal.signal(signal.SIGTERM, handler)
        seen.append(signal.getsignal(signal.SIGTERM))
        seen.append(signal.signal(signal.SIGTERM, signal.SIG_DFL))
        seen.append(signal.getsignal(signal.SIGTERM))
        process_then_commit(ctx)

    before = signal.getsignal(signal.SIGTERM)
    try:
        _, verdict = run_once(processor, SCHEDULE, ALO)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert verdict.status is Status.VALID, verdict.summary()
    assert seen == [handler, handler, signal.SIG_DFL]
    assert type(seen[2]) is signal.Handlers
    assert formatted == []


def test_outside_a_processor_greenlet_a_way_out_raises_process_exit() -> None:
    with pytest.raises(ProcessExit, match=r"called os\._exit\(5\)"), Guard(lambda what: None):
        os._exit(5)
    assert os._exit is REAL["_exit"]


IMPORT_TIME = {
    "sys.exit(0)": ("import sys\nsys.exit(0)", "SystemExit: 0"),
    "sys.exit(3)": ("import sys\nsys.exit(3)", "SystemExit: 3"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    "GeneratorExit": ("raise GeneratorExit('bye')", "GeneratorExit: bye"),
    "os._exit(0)": ("import os\nos._exit(0)", "it tried to end the process: it called os._exit(0)"),
    "SIGTERM": (
        "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)",
        "it tried to end the process: it sent itself SIGTERM (os.kill)",
    ),
}


@pytest.mark.parametrize("name", IMPORT_TIME)
def test_a_module_that_leaves_while_imported_is_a_config_error_naming_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, said = IMPORT_TIME[name]
    module = f"leaves_{abs(hash(name))}"
    (tmp_path / f"{module}.py").write_text(source + "\ndef p(ctx):\n    pass\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        load_processor(f"{module}:p")
    assert f"importing the processor's module {module!r} failed: {said}" in str(raised.value)
    assert os._exit is REAL["_exit"]


def test_a_processor_file_that_leaves_while_loaded_is_a_config_error(tmp_path: Path) -> None:
    file = tmp_path / "script.py"
    file.write_text("import os\nos._exit(0)\ndef p(ctx):\n    pass\n", "utf-8")
    with pytest.raises(ConfigError, match=r"called os\._exit"):
        load_processor("__main__:p", str(file))


DISARMING = {
    "signal.alarm(0)": "signal.alarm(0)",
    "setitimer(ITIMER_REAL, 0)": "signal.setitimer(signal.ITIMER_REAL, 0)",
    "SIGALRM ignored": "signal.signal(signal.SIGALRM, signal.SIG_IGN)",
    "SIGALRM to SIG_DFL then alarm(0)": (
        "signal.signal(signal.SIGALRM, lambda *a: None); signal.alarm(0)"
    ),
    "SIGALRM blocked": "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})",
    "bound setitimer (bypasses the guard)": "SETITIMER(signal.ITIMER_REAL, 0)",
    "bound C setitimer, then a sleep": "_signal.setitimer(signal.ITIMER_REAL, 0); time.sleep(600)",
}
DISARMS = """
import signal, sys, time, _signal
from signal import setitimer as SETITIMER
_C_SETITIMER = _signal.setitimer  # bound before any run: the guard cannot interpose it
_signal.setitimer = _C_SETITIMER
from harness import Produce, Run, Schedule, RunBudget, run_once

def processor(ctx):
    ctx.offsets.get("in-0")
    {trick}
    while True:
        pass

if sys.argv[1:] == ["bound"]:
    _signal = type("C", (), {{"setitimer": staticmethod(_C_SETITIMER)}})
history, verdict = run_once(
    processor, Schedule([Produce(count=1), Run(5)]), "at-least-once",
    budget=RunBudget(seconds=0.2),
)
print(verdict.status.name, history.events[-1].detail)
"""


@pytest.mark.parametrize("name", DISARMING)
def test_a_processor_cannot_switch_the_watchdog_off(name: str, tmp_path: Path) -> None:
    script = tmp_path / "disarms.py"
    script.write_text(textwrap.dedent(DISARMS).format(trick=DISARMING[name]), "utf-8")
    # in a child process with a timeout: were the watchdog switched off, this test would
    # fail, not hang
    done = subprocess.run(
        [sys.executable, str(script), "bound"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("UNKNOWN incomplete: over the run budget (1000000 calls, 0.2 s)")
    assert "the time budget ran out" in done.stdout


def test_inside_a_run_the_processor_sees_no_pending_timer_and_its_own_handler() -> None:
    seen: list[object] = []

    def handler(signum: int, frame: object) -> None:
        raise AssertionError("never called")

    def processor(ctx: Context) -> None:
        seen.append(signal.signal(signal.SIGALRM, handler))
        seen.append(signal.getsignal(signal.SIGALRM))
        seen.append(signal.alarm(0))
        seen.append(signal.setitimer(signal.ITIMER_REAL, 0))
        process_then_commit(ctx)

    before = signal.getsignal(signal.SIGALRM)
    _, verdict = run_once(processor, SCHEDULE, ALO)
    assert verdict.status is Status.VALID
    assert seen[1:] == [handler, 0, (0.0, 0.0)]
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _hangs(ctx: Context) -> None:
    ctx.offsets.get(P)
    while True:
        pass


def test_a_processor_that_hangs_spends_the_budget_once_not_once_a_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness._budget
    from harness import CounterexampleFound, RunBudget, explore
    from harness.sim import simulator

    monkeypatch.setattr(harness._budget, "SHRINK_SECONDS", 0.02)  # the cut, kept small
    budgets: list[float] = []
    original = simulator.Simulator.__init__

    def spy(self: simulator.Simulator, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        budgets.append(self.budget.seconds)

    monkeypatch.setattr(simulator.Simulator, "__init__", spy)
    with pytest.raises(CounterexampleFound) as found:
        explore(_hangs, guarantee=ALO, max_examples=20, budget=RunBudget(seconds=0.3))
    # the first fault-free probe ran out of the user's 0.3 s; every run after it got the cut
    assert budgets[0] == 0.3 and set(budgets[1:]) == {0.02}, budgets
    failure = found.value.failure
    assert failure.verdict.status is Status.UNKNOWN
    # the reason quotes the user's budget, and says what the runs after the first one got
    assert (
        "over the run budget (1000000 calls, 0.02 s a run while shrinking (the search's runs "
        "had 0.3 s, and one ran out))" in failure.verdict.summary()
    )
    assert "flaky" not in str(found.value)


def test_runs_in_two_threads_each_keep_their_guard() -> None:
    import harness.sim.exits as exits

    inside = threading.Event()
    release = threading.Event()
    seen: list[object] = []

    def waits(ctx: Context) -> None:
        inside.set()
        release.wait(10)
        seen.append(os._exit is REAL["_exit"])  # still interposed: this run is not over
        process_then_commit(ctx)

    thread = threading.Thread(target=lambda: run_once(waits, SCHEDULE, ALO))
    thread.start()
    inside.wait(10)
    status, end = _end(_leaving(lambda: os._exit(0)))  # a whole run here meanwhile
    release.set()
    thread.join(10)
    assert status is Status.UNKNOWN and "called os._exit(0)" in end
    assert seen == [False]
    assert os._exit is REAL["_exit"] and not exits._guards
