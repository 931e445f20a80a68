"""The command line's last line of defence: a parent process that sees the command's death.

:mod:`harness.sim.exits` turns every way out made through the ``os`` and ``signal`` modules
into an UNKNOWN run. What it cannot interpose still ends the process: a function bound
before the run (``from os import _exit`` in a module imported earlier), a C extension that
calls ``exit()``, a ``SIGKILL`` from another thread. Run as a program (``python -m harness``,
``stream-harness``), the command line therefore forks first: the child runs the command and,
as its last act, writes its pid and exit code into a pipe; the parent waits for it (for the
child itself, not the pipe's end: a process the code under test forked may hold the pipe open
long after). A child that
ended without writing one died before its verdict: the parent prints one ``error:`` line
saying how (its exit status or signal) and exits 2, UNKNOWN, whatever status the child
ended with. A code the child wrote is the parent's exit code.

The parent ignores ``SIGINT`` (a Ctrl-C reaches the child, in the same process group, which
answers it with exit 130) and passes ``SIGTERM`` and ``SIGHUP`` on to the child. Where
``os.fork`` does not exist, or with ``HARNESS_SUPERVISE=0``, the command runs unsupervised.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Final

from harness.cli._common import EXIT_INTERRUPTED, EXIT_UNKNOWN

__all__ = ["supervised"]

_FORWARDED: Final = ("SIGTERM", "SIGHUP")


def supervised(command: Callable[[], int]) -> int:
    """``command()``'s exit code, run in a child process whose death is observed."""
    if not hasattr(os, "fork") or os.environ.get("HARNESS_SUPERVISE") == "0":
        return command()
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        code = EXIT_UNKNOWN
        try:
            code = command()
        finally:
            os.write(write, f"{os.getpid()} {code}\n".encode())
            os.close(write)
        return code
    os.close(write)
    return _watch(child, read)


def _watch(child: int, read: int) -> int:
    """Wait for ``child``; its written exit code, else 2 (or 130 if SIGINT ended it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in _FORWARDED:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda signum, frame: os.kill(child, signum))
    # wait for the child, not for the pipe's end: a process the code under test forked keeps
    # the pipe open (and may write to it) long after the child gave its verdict
    _, status = os.waitpid(child, 0)
    os.set_blocking(read, False)
    said = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read, 4096):
            said += chunk
    os.close(read)
    for line in said.splitlines():
        pid, _, code = line.decode("ascii", "replace").partition(" ")
        if pid == str(child) and code.lstrip("-").isdigit():
            return int(code)
    ended = os.waitstatus_to_exitcode(status)
    if ended in (-signal.SIGINT, EXIT_INTERRUPTED):
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    how = f"killed by {signal.Signals(-ended).name}" if ended < 0 else f"exit status {ended}"
    print(
        f"error: the process ended before a verdict ({how}): something in it (the code under "
        "test?) ended the interpreter behind the harness's back (os._exit bound before the "
        "run, a C extension's exit(), a signal); nothing was judged: UNKNOWN",
        file=sys.stderr,
    )
    return EXIT_UNKNOWN
