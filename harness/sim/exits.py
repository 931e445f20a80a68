"""No way out of a run: a processor cannot end the process, nor switch off the run's watchdog.

A verdict is the only way a run ends. While :class:`Guard` is entered (the simulator enters
it around every run, the engine around the import of a processor's module), the calls that
would end or replace the process, or disarm the watchdog, are interposed in the modules
they live in (``os``, ``posix``, ``signal``, ``_signal``), in the thread that entered it:

- **leaving**: ``os._exit``, ``os.abort``, the ``os.exec*`` family, and a signal sent to
  the process itself (``os.kill`` of its own pid, group or every process, ``os.killpg`` of
  its group, ``signal.raise_signal``, ``signal.pthread_kill`` of one of its threads), any
  signal but ``SIGINT`` (which stays what a Ctrl-C delivers), 0 (a mere check) and those the
  watchdog owns (its handler stops the run, as when its time runs out), call the
  guard's ``leave`` with what was tried (``called os._exit(0)``); the simulator stops the
  run there, for good, and ends it UNKNOWN naming the instance. Where no processor greenlet
  can be left (the import of a module), :class:`ProcessExit` is raised instead;
- **the watchdog's signals and timers** are the run's: ``signal.alarm`` and
  ``signal.setitimer`` only pretend (they return 0: no timer was pending),
  ``signal.signal``/``signal.getsignal`` of a signal the watchdog owns (``SIGALRM``, and
  ``SIGINT`` while it tells a Ctrl-C apart) keep a handler the processor never gets called
  with, and ``signal.pthread_sigmask`` cannot block them. The simulator owns time: a
  processor's own timers would fire at wall-clock moments no schedule controls anyway.

Interposing the modules' attributes catches every call made through the module
(``os._exit(0)``, ``signal.alarm(0)``), including those of a library the processor uses. A
function bound before the guard was entered (``from os import _exit`` in a module imported
earlier) is the real one: :mod:`harness.sim.budget` keeps a watchdog thread that re-fires
the alarm while its handler is in place, and the command line runs under a supervising
parent that turns a death without a verdict into exit 2 (``harness.cli._supervise``).
Other threads keep the real functions: the harness cannot stop them, and a test runner's
own threads (pytest-xdist's) must still be able to exit.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, final

from harness._shown import shown

__all__ = [
    "Guard",
    "ProcessExit",
    "ctrl_c_raises",
    "real_getitimer",
    "real_getsignal",
    "real_setitimer",
    "real_signal",
]


class ProcessExit(BaseException):
    """Raised where code guarded outside a processor greenlet (a module being imported) tried
    to end the process; ``what`` says how (``called os._exit(0)``)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


_OS_MODULES: Final = tuple(m for m in (os, sys.modules.get("posix"), sys.modules.get("nt")) if m)
_C: Final[Any] = sys.modules.get("_signal", signal)
"""The C functions ``signal``'s Python wrappers call: the real ones, never interposed twice."""
_SIGNAL_MODULES: Final = tuple({id(m): m for m in (signal, _C)}.values())
_EXECS: Final = tuple(
    name
    for name in ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")
    if hasattr(os, name)
)
real_setitimer: Final[Callable[..., Any]] = getattr(_C, "setitimer", lambda *a: (0.0, 0.0))
real_getitimer: Final[Callable[..., Any]] = getattr(_C, "getitimer", lambda *a: (0.0, 0.0))


_C_SIGNAL: Final[Callable[..., Any]] = _C.signal
_C_GETSIGNAL: Final[Callable[..., Any]] = _C.getsignal


def _plain(value: Any) -> Any:
    """``value`` as the C functions take it: an enum member (``signal.SIG_DFL`` is
    ``Handlers.SIG_DFL``) as its int, anything else as it is (what ``signal``'s wrappers do)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _handler(value: Any) -> Any:
    """A handler the C functions returned, as ``signal.getsignal`` returns it (the default
    and ignore handlers as ``Handlers`` members). Only an int can be one: anything else is
    returned without asking the enum, whose refusal would format the value's repr (for
    ``asyncio.run``'s handler, a partial of its main task: tens of microseconds a call)."""
    if not isinstance(value, int):
        return value
    try:
        return signal.Handlers(value)
    except (TypeError, ValueError):
        return value


def real_signal(signum: Any, handler: Any) -> Any:
    """``signal.signal`` without the guard's interposition."""
    return _handler(_C_SIGNAL(_plain(signum), _plain(handler)))


def real_getsignal(signum: Any) -> Any:
    """``signal.getsignal`` without the guard's interposition."""
    return _handler(_C_GETSIGNAL(_plain(signum)))


def ctrl_c_raises() -> bool:
    """Whether a real Ctrl-C can raise ``KeyboardInterrupt`` in this process now: only while
    ``SIGINT`` has a handler (Python's default one or another; ``None``, one set outside
    Python, may too), not while it is ignored (a background job of a shell without job
    control, ``nohup``, many CI runners) or left to its default action (the process ends
    without an exception). Where it cannot, a ``KeyboardInterrupt`` is the code's own."""
    handler = real_getsignal(signal.SIGINT)
    return handler is None or callable(handler)


def _signal_name(signum: object) -> str:
    try:
        return signal.Signals(signum).name  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return f"signal {shown(signum)}"


_guards: dict[int, list[Guard]] = {}
"""The guards entered in each thread, innermost last (the functions are interposed while any
thread has one)."""
_lock = threading.Lock()


@final
class Guard:
    """Interposes the ways out (and the watchdog's signals) while entered; see the module.

    ``leave(what)`` is called in the guarded thread when the code tried to leave; if it
    returns (no processor greenlet to abandon), :class:`ProcessExit` is raised where the code
    tried. ``owned`` are the signals the watchdog owns for the run.
    """

    def __init__(self, leave: Callable[[str], object], owned: frozenset[int] = frozenset()) -> None:
        self.leave = leave
        self.owned = owned
        self.thread = threading.get_ident()
        self.handlers: dict[int, Any] = {}
        """The handlers the processor believes it installed for the owned signals."""
        self.tried: str | None = None
        """What the guarded code tried first (``called os._exit(0)``), if it tried."""
        self.stray: str | None = None
        """What a thread outside every guard tried while this one was entered (a thread the
        processor started that called ``os._exit``): the run cannot be trusted either."""

    def __enter__(self) -> Guard:
        self.thread = threading.get_ident()
        self.handlers = {signum: real_getsignal(signum) for signum in self.owned}
        with _lock:
            if not _guards:
                _install()
            _guards.setdefault(self.thread, []).append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _lock:
            stack = _guards[self.thread]
            stack.remove(self)
            if not stack:
                del _guards[self.thread]
                if not _guards:
                    _uninstall()

    def left(self, what: str) -> None:
        """The guarded code tried to leave: tell ``leave``, then raise if it returned."""
        if self.tried is None:
            self.tried = what
        self.leave(what)
        raise ProcessExit(what)


def _guard() -> Guard | None:
    """The guard of the calling thread, if one is entered there."""
    stack = _guards.get(threading.get_ident())
    return stack[-1] if stack else None


# -- the interposed functions -------------------------------------------------------------------


def _stray(what: str) -> None:
    """A thread outside every guard tries to leave while a run is guarded in another thread
    (a thread the processor started): every guarded run is told (it ends UNKNOWN, whoever
    started the thread), and the thread ends (``SystemExit``, which ends a thread quietly)
    instead of the process. Outside any run it returns, and the real function runs."""
    with _lock:
        guards = [guard for stack in _guards.values() for guard in stack]
    if not guards:
        return
    for guard in guards:
        if guard.stray is None:
            guard.stray = what
    raise SystemExit(f"a thread the processor started {what}")  # ends the thread, quietly


def _os_exit(code: int) -> None:
    guard = _guard()
    what = f"called os._exit({shown(code)})"
    if guard is None:
        _stray(what)
        _real(os, "_exit")(code)
    else:
        guard.left(what)


def _abort() -> None:
    guard = _guard()
    if guard is None:
        _stray("called os.abort()")
        _real(os, "abort")()
    else:
        guard.left("called os.abort()")


def _exec(name: str) -> Callable[..., Any]:
    def exec_(*args: Any) -> Any:
        guard = _guard()
        what = f"called os.{name}({shown(args[0]) if args else ''}, ...)"
        if guard is None:
            _stray(what)
            return _real(os, name)(*args)
        guard.left(what)
        return None

    exec_.__name__ = exec_.__qualname__ = name
    return exec_


def _to_self(guard: Guard | None, signum: object, what: str) -> None:
    """A signal the guarded code sends to its own process: leaving, unless it is 0 (a mere
    check), SIGINT (a Ctrl-C) or one the watchdog owns (its handler stops the run)."""
    if guard is not None and signum not in (0, signal.SIGINT, *guard.owned):
        guard.left(f"sent itself {_signal_name(signum)} ({what})")


def _kill(pid: int, signum: int) -> None:
    guard = _guard()
    if pid in (0, -1, os.getpid(), -os.getpgrp()):
        _to_self(guard, signum, "os.kill")
    _real(os, "kill")(pid, signum)


def _killpg(pgid: int, signum: int) -> None:
    guard = _guard()
    if pgid in (0, os.getpgrp()):
        _to_self(guard, signum, "os.killpg")
    _real(os, "killpg")(pgid, signum)


def _raise_signal(signum: int) -> None:
    _to_self(_guard(), signum, "signal.raise_signal")
    _real(_C, "raise_signal")(signum)


def _pthread_kill(thread_id: int, signum: int) -> None:
    if any(thread.ident == thread_id for thread in threading.enumerate()):
        _to_self(_guard(), signum, "signal.pthread_kill")
    _real(_C, "pthread_kill")(thread_id, signum)


def _alarm(seconds: int) -> int:
    if _guard() is None:
        return int(_real(_C, "alarm")(seconds))
    return 0  # the run's alarm is not the processor's to set or cancel


def _setitimer(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
    if _guard() is None:
        return real_setitimer(which, seconds, interval)  # type: ignore[no-any-return]
    return (0.0, 0.0)


def _getitimer(which: int) -> tuple[float, float]:
    if _guard() is None:
        return real_getitimer(which)  # type: ignore[no-any-return]
    return (0.0, 0.0)


def _signal(signum: int, handler: Any) -> Any:
    guard = _guard()
    if guard is None or signum not in guard.owned:
        return real_signal(signum, handler)
    if not (callable(handler) or handler in (signal.SIG_DFL, signal.SIG_IGN)):
        return real_signal(signum, handler)  # the real TypeError
    previous, guard.handlers[signum] = guard.handlers[signum], handler
    return previous


def _getsignal(signum: int) -> Any:
    guard = _guard()
    if guard is None or signum not in guard.owned:
        return real_getsignal(signum)
    return guard.handlers[signum]


def _pthread_sigmask(how: int, mask: Any) -> Any:
    guard = _guard()
    if guard is not None and how != signal.SIG_UNBLOCK:
        mask = {s for s in mask if s not in guard.owned}
    return _real(_C, "pthread_sigmask")(how, mask)


_OS_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "_exit": _os_exit,
    "abort": _abort,
    "kill": _kill,
    "killpg": _killpg,
    **{name: _exec(name) for name in _EXECS},
}
_SIGNAL_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "raise_signal": _raise_signal,
    "pthread_kill": _pthread_kill,
    "alarm": _alarm,
    "setitimer": _setitimer,
    "getitimer": _getitimer,
    "signal": _signal,
    "getsignal": _getsignal,
    "pthread_sigmask": _pthread_sigmask,
}


def _pairs() -> Iterator[tuple[Any, str, Callable[..., Any]]]:
    for module in _OS_MODULES:
        for name, function in _OS_FUNCTIONS.items():
            if hasattr(module, name):
                yield module, name, function
    for module in _SIGNAL_MODULES:
        for name, function in _SIGNAL_FUNCTIONS.items():
            if hasattr(module, name):
                yield module, name, function


_PATCHES: Final = tuple(
    (module, name, function, getattr(module, name)) for module, name, function in _pairs()
)
"""Each interposed function: its module, its name, the interposer and the real one."""
_REAL: Final[dict[tuple[int, str], Any]] = {
    (id(module), name): real for module, name, _, real in _PATCHES
}


def _real(module: Any, name: str) -> Any:
    return _REAL[(id(module), name)]


def _install() -> None:
    for module, name, function, _ in _PATCHES:
        setattr(module, name, function)


def _uninstall() -> None:
    for module, name, _, real in _PATCHES:
        setattr(module, name, real)
