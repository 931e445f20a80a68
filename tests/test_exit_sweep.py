"""Every way out a processor can take ends in a non-zero verdict on every door.

The sweep: ``os._exit`` (0 and 3), ``sys.exit`` at import and at run time, its own
``KeyboardInterrupt`` and ``GeneratorExit``, signals it sends itself (SIGTERM, SIGQUIT,
SIGINT), an ``os.abort``, and each trick that switches off the watchdog's timer, through the
Python API, ``python -m harness run`` and ``replay``, the pytest plugin (the test fails, the
session goes on and the next test runs) and ``python -m harness kafka``. Bounded: each run
gets a fraction of a second, each child process a timeout, so a way out that worked would
fail this test, never hang it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import (
    CounterexampleFound,
    Guarantee,
    Produce,
    Run,
    RunBudget,
    Schedule,
    Topology,
    explore,
)
from harness.engine import Replay, load_processor
from harness.errors import ConfigError

pytest_plugins = ["pytester"]

RUN = {  # what the processor does after its first call into the world
    "os._exit(0)": "os._exit(0)",
    "os._exit(3)": "os._exit(3)",
    "sys.exit(0) at run": "sys.exit(0)",
    "sys.exit(3) at run": "sys.exit(3)",
    "its own KeyboardInterrupt": "raise KeyboardInterrupt",
    "GeneratorExit": "raise GeneratorExit",
    "SIGTERM to itself": "os.kill(os.getpid(), signal.SIGTERM)",
    "SIGQUIT to itself": "signal.raise_signal(signal.SIGQUIT)",
    "os.abort()": "os.abort()",
    "alarm(0), then spins": "signal.alarm(0)\n    while True: pass",
    "setitimer(0), then spins": "signal.setitimer(signal.ITIMER_REAL, 0)\n    while True: pass",
    "SIGALRM ignored, then spins": (
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while True: pass"
    ),
}
IMPORT = {  # what the processor's module does when imported
    "sys.exit(0) at import": "sys.exit(0)",
    "sys.exit(3) at import": "sys.exit(3)",
    "os._exit(0) at import": "os._exit(0)",
    "KeyboardInterrupt at import": "raise KeyboardInterrupt",
}
SPINS = {way for way in RUN if "spins" in way}
"""The timer tricks: the Kafka door and ``report`` have no run budget option, and at the
default budget (60 s) they take a minute each; the other doors show the watchdog holds."""


SIGINT = "signal.raise_signal(signal.SIGINT)"
"""What a Ctrl-C delivers: a real interruption (exit 130), never a pass."""


def _module(at_run: str = "pass", at_import: str = "") -> str:
    return (
        "import os, signal, sys\n"
        f"{at_import}\n"
        "def processor(ctx):\n"
        "    ctx.offsets.get('in-0')\n"
        f"    {at_run}\n"
    )


def _write(tmp: Path, name: str, source: str) -> str:
    (tmp / f"{name}.py").write_text(source, "utf-8")
    return f"{name}:processor"


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), *sys.path])}


@pytest.mark.parametrize("way", RUN)
def test_the_python_api_ends_unknown(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    target = _write(tmp_path, f"api_{abs(hash(way))}", _module(RUN[way]))
    assert _explored(target) == "UNKNOWN"


def _explored(target: str) -> str:
    """The status of the counterexample ``explore`` finds for the processor ``target``."""
    with pytest.raises(CounterexampleFound) as found:
        explore(
            load_processor(target),
            guarantee="at-least-once",
            max_examples=3,
            budget=RunBudget(seconds=0.3),
            failures_dir=None,
        )
    return found.value.failure.verdict.status.name


@pytest.mark.parametrize(
    "disposition", [signal.SIG_IGN, signal.SIG_DFL], ids=["ignored", "default"]
)
def test_a_processors_keyboard_interrupt_is_its_own_where_no_ctrl_c_raises_one(
    disposition: signal.Handlers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With SIGINT ignored (how a shell without job control starts a background job, and so
    how some CI runners start the tests) or left to its default action, no real Ctrl-C can
    raise ``KeyboardInterrupt``: one out of a processor, or out of its module's import, is
    the processor's own, judged (UNKNOWN, or a ConfigError naming the module), never let
    through to end the test session."""
    monkeypatch.syspath_prepend(str(tmp_path))
    run = _write(tmp_path, "own_ctrl_c_at_run", _module(RUN["its own KeyboardInterrupt"]))
    imported = _write(
        tmp_path, "own_ctrl_c_at_import", _module(at_import=IMPORT["KeyboardInterrupt at import"])
    )
    previous = signal.signal(signal.SIGINT, disposition)
    try:
        assert _explored(run) == "UNKNOWN"
        with pytest.raises(ConfigError, match="own_ctrl_c_at_import"):
            load_processor(imported)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("way", IMPORT)
def test_the_python_api_refuses_a_module_that_leaves_when_imported(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"imp_{abs(hash(way))}"
    target = _write(tmp_path, name, _module(at_import=IMPORT[way]))
    with pytest.raises(ConfigError, match=name):
        load_processor(target)


def _cli(
    tmp: Path, *args: str, timeout: float = 120, command: list[str] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(command or [sys.executable, "-m", "harness"]), *args],
        cwd=tmp,
        env={**_env(tmp), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("way", [*RUN, *IMPORT, "SIGINT to itself"])
def test_the_cli_run_replay_and_report_never_exit_0(
    way: str, tmp_path: Path, harness_command: list[str]
) -> None:
    source = (
        _module(at_import=IMPORT[way])
        if way in IMPORT
        else _module(SIGINT if way == "SIGINT to itself" else RUN[way])
    )
    target = _write(tmp_path, "leaving", source)
    budget = ("--run-seconds", "0.3")
    cli = functools.partial(_cli, tmp_path, command=harness_command)  # a Ctrl-C gets through
    run = cli("run", target, "--guarantee", "at-least-once", "--examples", "3", *budget)
    spec = Replay(target, Guarantee.AT_LEAST_ONCE, Topology(), "memory", _schedule())
    replay_file = tmp_path / "replay.json"
    replay_file.write_text(json.dumps(spec.to_json()), "utf-8")
    again = cli("replay", str(replay_file), *budget)
    # report has no run budget option: the timer tricks would each take the default minute
    shown = [] if way in SPINS else [cli("report", str(replay_file))]
    expected = 130 if way == "SIGINT to itself" else 2
    for done in (run, again, *shown):
        assert done.returncode == expected, (done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
    if way in IMPORT:
        assert run.stderr.startswith("error: importing the processor's module 'leaving'")
    elif expected == 2:
        assert "UNKNOWN" in run.stdout and "UNKNOWN" in again.stdout


def _schedule() -> Schedule:
    return Schedule([Produce(count=1), Run(5)])


@pytest.mark.slow
def test_the_pytest_plugin_fails_each_test_and_runs_the_next(pytester: pytest.Pytester) -> None:
    tests = [
        textwrap.dedent(
            f"""
            @pytest.mark.harness(run_seconds=0.3, max_examples=3)
            def test_{number}(harness_explore):
                harness_explore(way_{number}, guarantee="at-least-once")
            """
        )
        for number in range(len(RUN))
    ]
    processors = [
        f"def way_{number}(ctx):\n    ctx.offsets.get('in-0')\n    {code}\n"
        for number, code in enumerate(RUN.values())
    ]
    pytester.makepyfile(
        test_ways="import os, signal, sys\nimport pytest\n\n"
        + "\n".join(processors)
        + "\n".join(tests)
        + "\n\ndef test_after_them_all():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=len(RUN), passed=1)
    result.stdout.fnmatch_lines(["*UNKNOWN*"])


@pytest.mark.slow
@pytest.mark.parametrize("way", [*(way for way in RUN if way not in SPINS), *IMPORT])
def test_the_kafka_door_never_exits_0(way: str, tmp_path: Path) -> None:
    code = IMPORT.get(way, "")
    body = RUN.get(way, "pass").replace("\n    ", "\n        ")
    app = tmp_path / "app.py"
    app.write_text(
        "import os, signal, sys\n"
        "from confluent_kafka import Consumer\n"
        f"{code}\n"
        "def main():\n"
        "    consumer = Consumer({'bootstrap.servers': 'b:9092', 'group.id': 'g'})\n"
        "    consumer.subscribe(['orders'])\n"
        "    consumer.poll(1.0)\n"
        f"    {body}\n",
        "utf-8",
    )
    done = _cli(
        tmp_path,
        *("kafka", f"{app}:main", "--guarantee", "at-least-once"),
        *("--input", "orders", "--output", "receipts"),
        *("--max-examples", "3", "--failures-dir", str(tmp_path / "f")),
        timeout=600,
    )
    # a script that ends with sys.exit(0) or on a KeyboardInterrupt has ended, as scripts
    # do (docs/kafka.md): the records it left unprocessed are then lost (1); every other
    # way out is UNKNOWN (2)
    assert done.returncode in (1, 2), (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    if "sys.exit(0)" not in way and "KeyboardInterrupt" not in way:
        assert done.returncode == 2, done.stdout[-2000:]
    assert "Traceback" not in done.stderr


BEHIND_THE_BACK = {
    "libc's _exit(0), through ctypes": ("ctypes.CDLL(None)._exit(0)", "exit status 0"),
    "libc's kill(SIGKILL), through ctypes": (
        "ctypes.CDLL(None).kill(os.getpid(), 9)",
        "killed by SIGKILL",
    ),
}


@pytest.mark.parametrize("way", BEHIND_THE_BACK)
def test_the_cli_sees_a_death_no_interposition_can_catch(way: str, tmp_path: Path) -> None:
    code, said = BEHIND_THE_BACK[way]
    target = _write(tmp_path, "behind", "import ctypes\n" + _module(code))
    args = ("run", target, "--guarantee", "at-least-once", "--examples", "2")
    done = _cli(tmp_path, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"error: the process ended before a verdict ({said})")
    assert done.stderr.count("\n") == 1
    # unsupervised, the same death passes for whatever status it left
    unsupervised = _cli(tmp_path, *args, HARNESS_SUPERVISE="0")
    assert unsupervised.returncode in (0, -9)


def test_the_cli_ends_with_its_verdict_when_the_processor_left_a_child_behind(
    tmp_path: Path,
) -> None:
    # the processor forks a child that lingers (holding the supervisor's pipe) well past the
    # verdict; the command must still end with the verdict, not wait for that child
    pid_file = tmp_path / "child.pid"
    source = (
        "import ctypes, os, time\n"
        "from harness.catalogue.toys import process_then_commit\n"
        "forked = []\n"
        "def processor(ctx):\n"
        "    if not forked:\n"
        "        forked.append(os.fork())\n"
        "        if forked[0] == 0:\n"
        f"            open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "            time.sleep(60)\n"
        "            ctypes.CDLL(None)._exit(0)\n"
        "    process_then_commit(ctx)\n"
    )
    target = _write(tmp_path, "forking", source)
    try:
        # into files: the lingering child holds them open too, so a pipe would never end
        with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
            done = subprocess.run(
                [sys.executable, "-m", "harness", "run", target, "--guarantee", "at-least-once"],
                cwd=tmp_path,
                env=_env(tmp_path),
                stdout=out,
                stderr=err,
                timeout=30,
                check=False,
            )
        said = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
        assert done.returncode == 0, said
        assert "held for forking:processor" in said[0]
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), 9)
