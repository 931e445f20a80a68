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
processor is the processor's own.
"""

from __future__ import annotations

import math
import os
import signal
import sysconfig
import threading
import time
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, Final, final

import greenlet

from harness.errors import ConfigError

__all__ = [
    "DEFAULT_RUN_BUDGET",
    "SHRINK_SECONDS",
    "TIME_RAN_OUT",
    "RunBudget",
    "Watchdog",
    "run_budget",
]


@final
@dataclass(frozen=True, slots=True)
class RunBudget:
    """How much one simulated run may spend before it ends as UNKNOWN (over budget)."""

    calls: int = 1_000_000
    """Calls into the world by every instance and timer, schedule and drain together."""
    seconds: float = 60.0
    """Wall-clock seconds for the simulation (producing input, running, draining)."""

    def __post_init__(self) -> None:
        if type(self.calls) is not int or self.calls < 1:
            raise ConfigError(
                f"run budget calls must be an int >= 1, got {self.calls!r}; e.g. 1000000"
            )
        seconds = self.seconds
        if (
            type(seconds) not in (int, float)
            or not math.isfinite(seconds)
            or not 0 < seconds <= 86_400
        ):
            raise ConfigError(
                f"run budget seconds must be a number in (0, 86400], got {seconds!r}; e.g. 60"
            )

    def describe(self) -> str:
        return f"{self.calls} calls, {self.seconds:g} s"

    def for_shrinking(self, end_detail: str | None) -> RunBudget:
        """The budget for the runs that shrink a failure whose run ended ``end_detail``: at
        most :data:`SHRINK_SECONDS` each when that run ran out of time, since a processor that
        hangs would otherwise spend the whole budget on every shrinking attempt."""
        if end_detail is None or TIME_RAN_OUT not in end_detail:
            return self
        return RunBudget(calls=self.calls, seconds=min(self.seconds, SHRINK_SECONDS))


DEFAULT_RUN_BUDGET: Final = RunBudget()
TIME_RAN_OUT: Final = "the time budget ran out"
"""The words every over-time ``end`` detail contains."""
SHRINK_SECONDS: Final = 1.0


def run_budget(value: object) -> RunBudget:
    """``value`` as a run budget: None is the default one; anything else must be one."""
    if value is None:
        return DEFAULT_RUN_BUDGET
    if not isinstance(value, RunBudget):
        raise ConfigError(
            f"budget must be a RunBudget, got {type(value).__name__}: {value!r}; pass "
            "e.g. RunBudget(calls=100000, seconds=30)"
        )
    return value


_RETRY: Final = 0.01
"""Seconds until the watchdog looks again after it fired inside the harness's own code."""
_DEFERRALS: Final = 100
"""How often it defers to harness code before it stops the processor where it is anyway."""
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL: Final = tuple(
    os.path.join(_HERE, name) for name in ("sim", "log", "offsets", "history", "_leveldb.py")
)
_STDLIB: Final = tuple(
    {os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}
)


def _inside_harness(frame: FrameType | None, boundary: object) -> bool:
    """Whether ``frame`` runs the harness's own world code (directly, or through the standard
    library); the processor's entry frame (``boundary`` code) is not."""
    while frame is not None and frame.f_code is not boundary:
        name = frame.f_code.co_filename
        if not name.startswith(_STDLIB):
            return name.startswith(_INTERNAL)
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
            old_handler = signal.signal(signal.SIGALRM, self._alarm)
            old_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self._saved = [old_handler, old_timer]
        else:
            self._thread = threading.Timer(self.seconds, self._expire)
            self._thread.daemon = True
            self._thread.start()
        if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._interrupt)
            self.owns_sigint = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.owns_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if self._thread is not None:
            self._thread.cancel()
        if self._saved:
            old_handler, (delay, interval) = self._saved
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            if delay > 0:  # someone else's timer was pending: give it back what is left
                left = delay - (time.monotonic() - self._started)
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)

    def _expire(self) -> None:
        self.expired = True

    def _alarm(self, signum: int, frame: FrameType | None) -> None:
        self.expired = True
        if greenlet.getcurrent() is self.main:
            return  # the simulator's own loop reads the flag
        if self._deferrals < _DEFERRALS and _inside_harness(frame, self._boundary):
            self._deferrals += 1
            signal.setitimer(signal.ITIMER_REAL, _RETRY)
            return
        self.stopped = True
        self.main.switch()  # leave the processor where it is, for good

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        if greenlet.getcurrent() is self.main:
            raise KeyboardInterrupt
        self.main.switch()
