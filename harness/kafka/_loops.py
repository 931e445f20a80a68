"""asyncio event loops of processor instances that share one thread.

Every processor instance is a process of its own in the simulated world, but all run in one
thread (greenlets), and asyncio keeps its *running* loop and its *current* loop
(``get_event_loop()``) per thread. So, for an application that runs an event loop:

* a fault point leaves the running loop while control is elsewhere (:func:`switching`): a
  zombie and its successor each run a loop of their own, and a timer runs outside both;
* a crash stops the loop at once: asyncio's tasks would keep the crash as their result and
  the loop would run on, but a crashed process runs nothing more;
* each instance starts without a current loop and its loops are closed when it ends
  (:class:`LoopScope`), as a process's are when it exits: ``asyncio.get_event_loop()`` in a
  restarted instance gets a loop of its own, not its crashed predecessor's (with that one's
  tasks still in it), and a takeover's successor does not find its zombie's loop running.

* a loop with only timers pending moves its clock on at once (:class:`_NoWaitSelector`):
  the simulated world has no clock, and ``asyncio.sleep`` back-offs would cost real time;
* a new loop of the default policy (what ``asyncio.run`` and ``new_event_loop()`` make) is a
  new loop object with its own state, but its operating-system resources, the self-pipe
  socket pair and the epoll instance, are idle ones a closed loop gave back when there are
  (:func:`_new_loop`): making and closing them costs more than the rest of the loop, and an
  empty socket pair and an epoll instance watching nothing are as good as new ones;
* such a loop's ``run_until_complete`` of its own ``shutdown_asyncgens()`` or
  ``shutdown_default_executor()`` (what ``asyncio.run`` does twice as it ends) on a loop
  that has nothing left to run runs the coroutine straight, without a task and loop turns
  (:func:`_run_until_complete`): the coroutine returns at once there, and the only
  callbacks such a turn would run, what is left of an earlier ``run_until_complete``, are
  run first, in order, as the turn would.

Nothing here imports asyncio: an application that never imports it pays nothing.
"""

from __future__ import annotations

import selectors
import sys
import time
import types
from collections.abc import Callable
from typing import Any, Final

from harness.sim.simulator import InstanceCrashed

__all__ = ["LoopScope", "switching"]


class _NoWaitSelector:
    """A loop's selector that does not wait for timers: when only a timer is pending (no
    socket of the application's own is open), the time passes at once. Real I/O and
    threads waking the loop still wait for real."""

    def __init__(self, loop: Any, real: Any, idle: Callable[[Any], None] | None) -> None:
        self._loop = loop
        self._real = real
        self._idle = idle

    def select(self, timeout: float | None = None) -> Any:
        if timeout is not None and timeout <= 0:
            return self._real.select(timeout)
        ready = self._real.select(0)
        if ready or len(self._real.get_map()) > self._loop._internal_fds:
            return ready or self._real.select(timeout)
        if timeout is None:
            # nothing to run, no timer, no socket of its own: it waits for ever (its tasks
            # wait for one another, or for a signal); the process is idle, not the thread
            if self._idle is None:
                return self._real.select(timeout)
            self._idle(self._loop)
            return self._real.select(0)
        self._loop._harness_skew[0] += timeout
        return []

    # what the loop asks of its selector as it makes, watches and closes its self-pipe, said
    # here: through __getattr__ each would first fail the ordinary lookup (an AttributeError
    # made and dropped, several a loop)
    def get_map(self) -> Any:
        return self._real.get_map()

    def get_key(self, fileobj: Any) -> Any:
        return self._real.get_key(fileobj)

    def register(self, fileobj: Any, events: int, data: Any = None) -> Any:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> Any:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> Any:
        return self._real.modify(fileobj, events, data)

    def close(self) -> None:
        self._real.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _no_waiting(loop: Any, idle: Callable[[Any], None] | None) -> None:
    """Make ``asyncio.sleep`` and other timers of ``loop`` take no real time (the simulated
    world has no clock: time passes as the schedule's ``Tick``), and a wait for ever an
    ``idle(loop)`` call (the instance waits for input without blocking the thread)."""
    selector = getattr(loop, "_selector", None)
    if selector is None or not hasattr(loop, "_internal_fds") or hasattr(loop, "_harness_skew"):
        return
    skew = loop._harness_skew = [0.0]  # not the loop: a closed loop is no cycle
    loop._selector = _NoWaitSelector(loop, selector, idle)
    loop.time = lambda: time.monotonic() + skew[0]


def switching(
    call: Callable[..., None],
    loops: set[Any],
    *args: Any,
    idle: Callable[[Any], None] | None = None,
) -> None:
    """``call(*args)`` (which may hand control to the simulator) outside the instance's
    running loop, which is added to ``loops`` (``idle``: what its wait for ever does); a
    crash stops it."""
    events: Any = sys.modules.get("asyncio.events")
    loop = None if events is None else events._get_running_loop()
    if loop is None:
        call(*args)
        return
    if loop not in loops:
        loops.add(loop)
        _no_waiting(loop, idle)
    events._set_running_loop(None)
    try:
        call(*args)
    except InstanceCrashed:
        loop.stop()
        raise
    finally:
        events._set_running_loop(loop)


_SPARE: Final = 4
"""How many idle self-pipes and epoll instances of closed loops are kept for new loops."""

_PIPES: list[tuple[Any, Any]] = []
_EPOLLS: list[Any] = []


def _make_self_pipe(loop: Any) -> None:
    """``BaseSelectorEventLoop._make_self_pipe`` (Python 3.10 to 3.13), on a spare pair."""
    try:
        ssock, csock = _PIPES.pop()
    except IndexError:
        import socket

        ssock, csock = socket.socketpair()
        ssock.setblocking(False)
        csock.setblocking(False)
    loop._ssock, loop._csock = ssock, csock
    loop._internal_fds += 1
    loop._add_reader(ssock.fileno(), loop._read_from_self)


def _close_self_pipe(loop: Any) -> None:
    """``BaseSelectorEventLoop._close_self_pipe``; the pair is kept when it is idle: no
    signal handler of the loop (its write end may be the signal wakeup fd), nothing unread."""
    for name in _BOUND:  # the loop is closing: no cycle through its own methods
        vars(loop).pop(name, None)
    ssock, csock = loop._ssock, loop._csock
    loop._remove_reader(ssock.fileno())
    loop._ssock = loop._csock = None
    loop._internal_fds -= 1
    if len(_PIPES) < _SPARE and not getattr(loop, "_signal_handlers", None) and _drained(ssock):
        _PIPES.append((ssock, csock))
    else:
        ssock.close()
        csock.close()


def _drained(sock: Any) -> bool:
    """Read what is left in a self-pipe (a wake-up nobody read); False if it is broken."""
    try:
        while sock.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False
    return False  # the other end is closed


if sys.platform == "linux":

    class _Epoll(selectors.EpollSelector):
        """asyncio's default selector on Linux, on a spare epoll instance when there is one;
        a closed one gives its epoll instance back when it watches nothing."""

        @staticmethod
        def _selector_cls() -> Any:
            try:
                return _EPOLLS.pop()
            except IndexError:
                import select

                return select.epoll()

        def close(self) -> None:
            me: Any = self  # the selector's private state
            epoll = me._selector
            if me._fd_to_key or len(_EPOLLS) >= _SPARE or epoll.closed:
                super().close()
                return
            selectors._BaseSelectorImpl.close(self)  # forget the keys, keep the instance
            _EPOLLS.append(epoll)

    def _selector() -> Any:
        """The selector a new loop gets (None: the default one)."""
        default: Any = selectors.DefaultSelector
        return _Epoll() if default is selectors.EpollSelector else None

else:

    def _selector() -> Any:
        return None


class _Factory:
    """The default policy's ``_loop_factory`` while instances run: :func:`_new_loop`."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self) -> Any:
        return _new_loop(self.cls)


_BOUND: Final = ("_make_self_pipe", "_close_self_pipe", "run_until_complete")
"""The methods :func:`_new_loop` binds to the loop (dropped when it closes, so that a closed
loop is freed as soon as nothing refers to it, not at the next garbage collection)."""


def _new_loop(cls: Any) -> Any:
    """A new ``cls()`` (the policy's loop class) whose self-pipe and selector are spare ones
    when there are (they are given back when it closes), and whose shutdown is quick when
    nothing is left to do (:func:`_run_until_complete`)."""
    loop = cls.__new__(cls)
    loop._make_self_pipe = types.MethodType(_make_self_pipe, loop)
    loop._close_self_pipe = types.MethodType(_close_self_pipe, loop)
    loop.run_until_complete = types.MethodType(_run_until_complete, loop)
    cls.__init__(loop, _selector())
    return loop


def _shutdowns(base: Any) -> tuple[Any, ...]:
    """The code of the loop's shutdown coroutines that return at once when there is nothing
    to shut down (no async generator, no default executor), and ``asyncio``'s own
    ``run_until_complete`` callback (empty if this Python's asyncio differs)."""
    loop_cls = base.BaseEventLoop
    try:
        return (
            loop_cls.shutdown_asyncgens.__code__,
            loop_cls.shutdown_default_executor.__code__,
            base._run_until_complete_cb,
        )
    except AttributeError:
        return ()


_SHUTDOWNS: list[tuple[Any, ...]] = []


def _quiet(loop: Any, done_cb: Any) -> bool:
    """Whether a turn of ``loop`` could run nothing but leftover ``done_cb`` callbacks: no
    timer, no async generator, no default executor, no signal handler, no file descriptor of
    the application's, not running, not closed, and no other loop running in the thread."""
    events: Any = sys.modules["asyncio.events"]
    selector = loop._selector
    return (
        not loop._scheduled
        and not loop._asyncgens
        and loop._default_executor is None
        and not getattr(loop, "_signal_handlers", None)
        and not loop._closed
        and not loop.is_running()
        and events._get_running_loop() is None
        and selector is not None
        and len(selector.get_map()) <= loop._internal_fds
        and all(h._callback is done_cb and not h._cancelled for h in loop._ready)
    )


def _run_until_complete(loop: Any, future: Any) -> Any:
    """``run_until_complete``; of the loop's own shutdown coroutine when :func:`_quiet`, the
    leftover callbacks and then the coroutine run here: it returns without awaiting (nothing
    to shut down), as it would in the task the loop would make for it."""
    if not _SHUTDOWNS:
        _SHUTDOWNS.append(_shutdowns(sys.modules["asyncio.base_events"]))
    codes = _SHUTDOWNS[0]
    cls = type(loop)
    coroutine = type(future) is types.CoroutineType  # not a task (asyncio.run's main one)
    frame: Any = future.cr_frame if coroutine else None
    if (
        not codes
        or frame is None
        or frame.f_code not in codes[:2]
        or frame.f_locals.get("self") is not loop  # this loop's own shutdown
        or not _quiet(loop, codes[2])
    ):
        return cls.run_until_complete(loop, future)
    # let go of the coroutine's frame: once it has run, its f_back is this frame (3.12+),
    # and a cycle through the two would keep the loop until the collector runs
    del frame
    ready = loop._ready
    while ready:
        ready.popleft()._run()
    try:
        future.send(None)
    except StopIteration as returned:
        return returned.value
    future.close()  # cannot happen: it had nothing to wait for
    raise RuntimeError(f"{future!r} awaited on a loop with nothing to shut down")


def _recycle(policy: Any, on: bool) -> None:
    """Let ``policy`` (the default one) make its loops with :func:`_new_loop` (``on``), or
    stop it; a policy of another kind (uvloop's, a proactor's) is left alone."""
    mine = isinstance(vars(policy).get("_loop_factory"), _Factory)
    if not on:
        if mine:
            del policy._loop_factory
        return
    base: Any = sys.modules.get("asyncio.selector_events")
    cls = getattr(type(policy), "_loop_factory", None)
    if mine or base is None or not isinstance(cls, type):
        return
    if issubclass(cls, base.BaseSelectorEventLoop) and "_loop_factory" not in vars(policy):
        policy._loop_factory = _Factory(cls)


def _policy() -> Any:
    """The thread's event loop policy, if asyncio is imported."""
    events: Any = sys.modules.get("asyncio.events")
    return None if events is None else events.get_event_loop_policy()


def _local() -> Any:
    """The default policy's per-thread state (``_loop``, ``_set_called``), if asyncio is
    imported and the policy has one."""
    return getattr(_policy(), "_local", None)


_OUTER: list[tuple[Any, bool]] = []
"""The thread's current-loop state before the first live instance started (restored when the
last one ends)."""

_WAKEUP: list[int] = []
"""The signal wakeup fd before the first live instance started: a loop that handles signals
points it at its own socket, and a crashed instance's loop is never closed by asyncio, so the
fd would outlive the socket (every later signal then reports a bad file descriptor)."""


def _wakeup_fd(fd: int | None = None) -> int | None:
    """The process's signal wakeup fd, set to ``fd`` if given (the main thread only: in
    another thread asyncio handles no signals, and there is nothing to restore)."""
    import signal

    try:
        old = signal.set_wakeup_fd(-1 if fd is None else fd)
        if fd is None:
            signal.set_wakeup_fd(old)
    except ValueError:
        return None
    return old


class LoopScope:
    """An instance's loops, from its start to its end."""

    __slots__ = ("loops",)

    def __init__(self) -> None:
        self.loops: set[Any] = set()
        """The loops the instance ran (seen at its fault points)."""

    def enter(self, first: bool) -> None:
        """The instance starts (``first``: no other is alive) without a current loop."""
        if first:
            fd = _wakeup_fd()
            _WAKEUP[:] = [] if fd is None else [fd]
        policy = _policy()
        if policy is not None:
            _recycle(policy, True)
        local = getattr(policy, "_local", None)
        if local is None:
            return
        if first:
            _OUTER[:] = [(getattr(local, "_loop", None), getattr(local, "_set_called", False))]
        local._loop, local._set_called = None, False

    def leave(self, alone: bool) -> None:
        """The instance ended; ``alone``: no other instance is alive (a current loop that is
        not the thread's own is then this instance's, even if it never ran)."""
        local = _local()
        current = None if local is None else getattr(local, "_loop", None)
        outer = _OUTER[0] if _OUTER else (None, False)
        if alone and current is not None and current is not outer[0]:
            self.loops.add(current)  # made by get_event_loop(), maybe never run
        for loop in self.loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()
        if alone and _WAKEUP:
            _wakeup_fd(_WAKEUP.pop())
        if alone:
            policy = _policy()
            if policy is not None:
                _recycle(policy, False)
        if local is not None and alone:
            local._loop, local._set_called = outer
            _OUTER.clear()
        elif local is not None and current in self.loops:
            local._loop, local._set_called = None, False  # a live instance makes its own
        self.loops.clear()
