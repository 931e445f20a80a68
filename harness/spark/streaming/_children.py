"""Child driver processes of the streaming runner: waiting for their report, killing them whole.

:class:`Reports` waits (a ``select`` with a deadline, no sleeps) for each line a child
driver or one of its Spark processes writes to a FIFO; :func:`kill_tree` sends ``SIGKILL`` to
the child, its JVM and every process they started (process groups and every descendant found
in ``/proc``, by id) and returns once none is alive, so nothing of a dead driver still holds a
log or the checkpoint. Linux only (``/proc``, FIFOs, process groups).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final, final

from harness.errors import HarnessError

__all__ = ["ChildSilent", "Reports", "kill_tree", "launch", "tail", "wait_exit"]


_CHILD_JVM_OPTIONS: Final = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def launch(module: str, spec: Path, scratch: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m module spec`` as a child driver in a session of its own, its output
    in ``log_path``, Spark's scratch files in ``scratch``."""
    env = dict(os.environ)
    env["HARNESS_SPARK_TMPDIR"] = str(scratch)
    env["PYTHONUNBUFFERED"] = "1"
    # a driver that lives for a few batches: the quick JIT tier and a small collector
    # start it in about two thirds of the time; semantics are untouched
    env["JAVA_TOOL_OPTIONS"] = " ".join(
        filter(None, [env.get("JAVA_TOOL_OPTIONS"), _CHILD_JVM_OPTIONS])
    )
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module, str(spec)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )


class ChildSilent(HarnessError):
    """A child driver reported nothing in time, or exited without reporting."""


@final
class Reports:
    """The lines a child driver (or its Spark processes) writes to the FIFO ``channel``,
    one at a time, in order."""

    def __init__(self, child: subprocess.Popen[bytes], channel: int, log: Path) -> None:
        self.child = child
        self.channel = channel
        self.log = log
        self._buffered = b""

    def next(self, timeout_s: float) -> str:
        """The next line; raises :class:`ChildSilent` after ``timeout_s`` without one, or
        when the child has exited without writing one."""
        deadline = time.monotonic() + timeout_s
        child = self.child
        while b"\n" not in self._buffered:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildSilent(
                    f"the child driver (pid {child.pid}) reported nothing in {timeout_s:.0f}s; "
                    f"its output is in {self.log}"
                )
            # a bounded wait on the FIFO, waking up to notice a child that died silently
            ready, _, _ = select.select([self.channel], [], [], min(remaining, 0.5))
            if ready:
                with contextlib.suppress(BlockingIOError):
                    self._buffered += os.read(self.channel, 4096)
            elif child.poll() is not None:
                raise ChildSilent(
                    f"the child driver (pid {child.pid}) exited with status "
                    f"{child.returncode} without reporting; its output is in {self.log}:\n"
                    f"{tail(self.log)}"
                )
        line, self._buffered = self._buffered.split(b"\n", 1)
        return line.decode("utf-8", "replace").strip()


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def wait_exit(child: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(child)
        raise ChildSilent(
            f"the child driver (pid {child.pid}) did not exit within {timeout_s:.0f}s after "
            f"finishing; its output is in {log}"
        ) from None


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, pgrp)`` of a process from ``/proc``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields_after_name = text[text.rfind(")") + 2 :].split()
    return fields_after_name[0], int(fields_after_name[1]), int(fields_after_name[2])


def _descendants(root: int) -> set[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def kill_tree(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child driver, its JVM and every process they started (by id), then wait
    until all are gone, so that nothing of the dead driver still holds a log or the
    checkpoint when the next run starts."""
    pids = _descendants(child.pid) | {child.pid}
    own_group = os.getpgrp()
    groups: set[int] = set()
    for pid in pids:
        stat = _proc_stat(pid)
        if stat is not None and stat[2] != own_group:
            groups.add(stat[2])
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 60.0
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise HarnessError(
                f"processes {sorted(p for p in pids if _alive(p))} of the killed driver are "
                "still alive 60s after SIGKILL"
            )
        # polling /proc: a killed process's exit cannot be waited for by a non-parent
        time.sleep(0.01)
