"""Every run ends: a per-run budget of simulated calls and wall-clock seconds, and the watchdog
that enforces the seconds even on a processor that never calls into the world.

The **call budget** is checked at every fault point (every call a processor instance or one of
its timers makes into the world), so it is deterministic: the same schedule stops at the same
call. The **wall-clock budget** is enforced by :class:`Watchdog`. In the main thread it arms a
``SIGALRM`` timer; when it fires while a processor greenlet runs user code (a busy loop, a
``time.sleep``, a loop that swallows every ``BaseException``), the handler switches from that
greenlet back to the simulator and the greenlet is never resumed: no exception is raised into
it, so nothing it catches can keep it running. When it fires inside the harness's own code the
processor is stopped at its next call into the world instead, so no world operation is cut in
half. Elsewhere (not the main thread, or no ``SIGALRM``) a timer thread raises the same flag,
which only stops a processor at its next call. Neither can interrupt one long call into C code.

The watchdog also tells a real Ctrl-C from a ``KeyboardInterrupt`` a processor raises: while
it owns ``SIGINT`` (the main thread, with Python's default handler in place), a real Ctrl-C
switches out of the processor the same way and the simulator raises ``KeyboardInterrupt``
itself, so a processor cannot swallow it, and a ``KeyboardInterrupt`` that comes out of a
processor is the processor's own. So it is where ``SIGINT`` is ignored (a background job, as
a CI runner may start the tests): no Ctrl-C raises anything there.
"""

from __future__ import annotations

import os
import signal
import sysconfig
import threading
import time
from types import FrameType, TracebackType
from typing import Any, Final, final

import greenlet

from harness._budget import (
    DEFAULT_RUN_BUDGET,
    SHRINK_SECONDS,
    TIME_RAN_OUT,
    RunBudget,
    run_budget,
)
from harness.sim.exits import (
    ctrl_c_raises,
    real_getitimer,
    real_getsignal,
    real_setitimer,
    real_signal,
)

__all__ = [
    "DEFAULT_RUN_BUDGET",
    "SHRINK_SECONDS",
    "TIME_RAN_OUT",
    "RunBudget",
    "Watchdog",
    "run_budget",
]


_RETRY: Final = 0.01
"""Seconds until the watchdog looks again after it fired inside the harness's own code."""
_DEFERRALS: Final = 100
"""How often it defers to harness code before it stops the processor where it is anyway."""
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL: Final = tuple(
    os.path.join(_HERE, name) for name in ("sim", "log", "offsets", "history", "_leveldb.py")
)
_SITE: Final = f"{os.sep}site-packages{os.sep}"
_STDLIB: Final = tuple(
    {os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}
)


def _inside_harness(frame: FrameType | None, boundary: object) -> bool:
    """Whether ``frame`` runs the harness's own world code (directly, or through the standard
    library); the processor's entry frame (``boundary`` code) is not."""
    while frame is not None and frame.f_code is not boundary:
        name = frame.f_code.co_filename
        if name.startswith(_INTERNAL):
            return True
        # a virtualenv's platstdlib is the venv's lib/pythonX.Y, which holds site-packages:
        # an installed package's frame is not the standard library's
        if not name.startswith(_STDLIB) or _SITE in name:
            return False
        frame = frame.f_back
    return False


@final
class Watchdog:
    """Ends a run at its wall-clock deadline; tells a real Ctrl-C from a processor's.

    ``expired`` and ``interrupted`` are the flags the simulator reads; ``owns_sigint`` says
    whether a ``KeyboardInterrupt`` out of a processor can be the user's (False) or is the
    processor's own (True). Use it as a context manager around the run.
    """

    def __init__(self, seconds: float, main: greenlet.greenlet, boundary: object) -> None:
        self.seconds = seconds
        self.expired = False
        self.stopped = False
        """Whether it switched out of a processor that was running its own code."""
        self.interrupted = False
        self.owns_sigint = False
        self.ctrl_c_unseen = False
        """Whether a ``KeyboardInterrupt`` out of a processor may be a real Ctrl-C the
        watchdog cannot see: ``SIGINT`` has a handler that is not the watchdog's (a test
        runner's, another thread's run). Never while it owns ``SIGINT`` (a real one sets
        ``interrupted``), nor while no Ctrl-C raises anything (``SIGINT`` ignored, as in a
        background job: :func:`~harness.sim.exits.ctrl_c_raises`)."""
        self.main = main
        self._boundary = boundary
        self._deferrals = 0
        self._saved: list[Any] = []
        self._thread: threading.Timer | None = None
        self._started = 0.0

    def __enter__(self) -> Watchdog:
        self._started = time.monotonic()
        in_main = threading.current_thread() is threading.main_thread()
        if in_main and hasattr(signal, "setitimer"):
            old_handler = real_signal(signal.SIGALRM, self._alarm)
            old_timer = real_setitimer(signal.ITIMER_REAL, self.seconds)
            self._saved = [old_handler, old_timer]
            _BACKSTOP.watch(self, self._started + self.seconds)
        else:
            self._thread = threading.Timer(self.seconds, self._expire)
            self._thread.daemon = True
            self._thread.start()
        if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            real_signal(signal.SIGINT, self._interrupt)
            self.owns_sigint = True
        self.ctrl_c_unseen = not self.owns_sigint and ctrl_c_raises()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _BACKSTOP.forget(self)  # before the handler goes: no alarm may reach the old one
        if self.owns_sigint:
            real_signal(signal.SIGINT, signal.default_int_handler)
        if self._thread is not None:
            self._thread.cancel()
        if self._saved:
            old_handler, (delay, interval) = self._saved
            real_setitimer(signal.ITIMER_REAL, 0)
            real_signal(signal.SIGALRM, old_handler)
            if delay > 0:  # someone else's timer was pending: give it back what is left
                left = delay - (time.monotonic() - self._started)
                real_setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)

    @property
    def owned(self) -> frozenset[int]:
        """The signals this watchdog owns while entered (a processor may not touch them)."""
        owned = {signal.SIGALRM} if self._saved else set()
        return frozenset(owned | ({signal.SIGINT} if self.owns_sigint else set()))

    def _expire(self) -> None:
        self.expired = True

    def _alarm(self, signum: int, frame: FrameType | None) -> None:
        self.expired = True
        if greenlet.getcurrent() is self.main:
            return  # the simulator's own loop reads the flag
        if self._deferrals < _DEFERRALS and _inside_harness(frame, self._boundary):
            self._deferrals += 1
            real_setitimer(signal.ITIMER_REAL, _RETRY)
            return
        self.stopped = True
        self.main.switch()  # leave the processor where it is, for good

    def fire(self) -> bool:
        """Whether the backstop should fire this watchdog's alarm now: its handler is in
        place but its timer was disarmed (by code bound to ``signal.setitimer`` before the
        run's guard, which :mod:`harness.sim.exits` could not interpose)."""
        if real_getsignal(signal.SIGALRM) != self._alarm:
            return False  # not ours (any more): an alarm would reach someone else's handler
        return bool(real_getitimer(signal.ITIMER_REAL)[0] == 0)

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        if greenlet.getcurrent() is self.main:
            raise KeyboardInterrupt
        self.main.switch()


_GRACE: Final = 0.05
"""Seconds past a deadline before the backstop fires an alarm the timer should have fired."""


@final
class _Backstop:
    """One daemon thread for the process: past a main-thread watchdog's deadline, while the
    run goes on with its timer disarmed, it sends ``SIGALRM`` to the main thread every
    :data:`_GRACE` seconds, so the run stops even if the processor switched the timer off
    behind :mod:`harness.sim.exits`'s back. A new deadline wakes it only when it comes
    before the thread's next wake-up: waking it at every run would make it take the GIL at
    the run's first blocking call, which on a loaded machine costs the run a wait for the OS
    to schedule the thread (the runs of an asyncio application make such calls at once)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._deadlines: dict[Watchdog, float] = {}
        self._thread: threading.Thread | None = None
        self._wake = 0.0
        """When the thread wakes next (0: it is not waiting); read and set under the lock."""

    def watch(self, dog: Watchdog, deadline: float) -> None:
        with self._cond:
            due = self._deadlines[dog] = deadline + _GRACE
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="harness-watchdog", daemon=True
                )
                self._thread.start()
            if due < self._wake or not self._wake:
                self._cond.notify()

    def forget(self, dog: Watchdog) -> None:
        with self._cond:
            self._deadlines.pop(dog, None)

    def _loop(self) -> None:
        main = threading.main_thread().ident
        with self._cond:
            while True:
                now = time.monotonic()
                for dog, due in list(self._deadlines.items()):
                    if due <= now:
                        self._deadlines[dog] = now + _GRACE
                        if main is not None and dog.fire():  # under the lock: see forget
                            signal.pthread_kill(main, signal.SIGALRM)
                wait = max(min(self._deadlines.values(), default=now + 3600) - now, 0.001)
                self._wake = now + wait
                self._cond.wait(wait)
                self._wake = 0.0


_BACKSTOP: Final = _Backstop()
