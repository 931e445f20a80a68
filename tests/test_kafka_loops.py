"""The event loops of processor instances (harness.kafka._loops): a new loop of the default
policy is a new loop, on the idle self-pipe and epoll instance of a closed one when there
are; what a real process could observe of them (a wake-up from another thread, a signal
handler, a wake-up nobody read) is as for loops of their own."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import Any

import pytest

from harness.kafka import _loops
from harness.kafka._loops import LoopScope

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the loops recycle on Linux")


@pytest.fixture
def scope() -> Any:
    """One live instance's loop scope (the policy makes recycling loops meanwhile)."""
    scope = LoopScope()
    scope.enter(first=True)
    try:
        yield scope
    finally:
        scope.leave(alone=True)


def _resources(loop: Any) -> tuple[Any, Any]:
    return loop._ssock, loop._selector._selector


def test_a_new_loop_reuses_the_idle_resources_of_a_closed_one(scope: LoopScope) -> None:
    first = asyncio.new_event_loop()
    assert type(first) is type(asyncio.get_event_loop_policy())._loop_factory  # type: ignore[attr-defined]
    ssock, epoll = _resources(first)
    first.close()
    second = asyncio.new_event_loop()
    try:
        assert second is not first and not second.is_closed()
        assert _resources(second) == (ssock, epoll)
        assert second.run_until_complete(asyncio.sleep(0, "ran")) == "ran"
    finally:
        second.close()


def test_a_recycled_self_pipe_is_drained_and_still_wakes_its_loop(scope: LoopScope) -> None:
    first = asyncio.new_event_loop()
    first.call_soon_threadsafe(lambda: None)  # a wake-up byte nobody reads
    ssock, _ = _resources(first)
    first.close()
    second = asyncio.new_event_loop()
    try:
        assert second._ssock is ssock  # type: ignore[attr-defined]
        with pytest.raises(BlockingIOError):
            ssock.recv(1)  # nothing left over for the new loop

        async def woken_from_a_thread() -> str:
            future = second.create_future()
            threading.Thread(
                target=second.call_soon_threadsafe, args=(future.set_result, "woken")
            ).start()
            return await future  # type: ignore[no-any-return]

        assert second.run_until_complete(woken_from_a_thread()) == "woken"
    finally:
        second.close()


def test_a_loop_that_handled_signals_closes_its_own_pipe(scope: LoopScope) -> None:
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    got: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        loop.add_signal_handler(signal.SIGUSR1, got.append, "signalled")

        async def signalled() -> None:
            os.kill(os.getpid(), signal.SIGUSR1)
            while not got:
                await asyncio.sleep(0)

        loop.run_until_complete(signalled())
        assert got == ["signalled"]
        ssock, _ = _resources(loop)
    finally:
        loop.close()
    assert ssock.fileno() == -1  # its write end was the signal wakeup fd: not given out again
    assert all(pair[0] is not ssock for pair in _loops._PIPES)
    assert signal.set_wakeup_fd(before) == before


def test_a_selector_still_watching_a_socket_is_closed_for_good(scope: LoopScope) -> None:
    import socket

    loop = asyncio.new_event_loop()
    ours, theirs = socket.socketpair()
    try:
        loop.add_reader(ours.fileno(), lambda: None)  # left registered
        _, epoll = _resources(loop)
        loop.close()
        assert epoll.closed and epoll not in _loops._EPOLLS
    finally:
        ours.close()
        theirs.close()


def test_the_policy_makes_its_own_loops_again_after_the_run() -> None:
    policy = asyncio.get_event_loop_policy()
    scope = LoopScope()
    scope.enter(first=True)
    assert isinstance(vars(policy).get("_loop_factory"), _loops._Factory)
    scope.leave(alone=True)
    assert "_loop_factory" not in vars(policy)
    loop = asyncio.new_event_loop()
    try:
        assert "_make_self_pipe" not in vars(loop)  # a plain loop outside a run
    finally:
        loop.close()


def _counting_tasks(loop: Any, made: list[str]) -> None:
    def factory(loop: Any, coro: Any, **kwargs: Any) -> Any:
        made.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)


def test_asyncio_run_ends_a_loop_with_nothing_left_without_more_tasks(scope: LoopScope) -> None:
    """``asyncio.run``'s shutdown of async generators and of the default executor, with
    none to shut down, runs without a task of its own; the loop is closed as after a
    plain run, and the leftover callback of a main task that raised retrieves its error."""
    made: list[str] = []
    seen: list[Any] = []

    async def main() -> str:
        loop = asyncio.get_running_loop()
        _counting_tasks(loop, made)
        seen.append(loop)
        return "done"

    assert asyncio.run(main()) == "done"
    (loop,) = seen
    assert made == [] and loop.is_closed()  # main's task was made before the factory
    assert loop._asyncgens_shutdown_called and loop._executor_shutdown_called

    async def interrupted() -> None:
        _counting_tasks(asyncio.get_running_loop(), made)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(interrupted())
    assert made == []


def test_asyncio_run_still_shuts_down_what_is_left(scope: LoopScope) -> None:
    """An async generator left suspended is closed (its ``finally`` runs) and the default
    executor is shut down, in tasks of their own, as asyncio does."""
    made: list[str] = []
    events: list[str] = []

    async def numbers() -> Any:
        try:
            yield 1
            yield 2
        finally:
            events.append("generator closed")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        _counting_tasks(loop, made)
        generator = numbers()
        assert await generator.__anext__() == 1
        events.append(await loop.run_in_executor(None, str, "executor ran"))
        main.generator = generator  # type: ignore[attr-defined]  # kept: not finalized

    asyncio.run(main())
    assert events == ["executor ran", "generator closed"]
    assert sorted(made) == [
        "BaseEventLoop.shutdown_asyncgens",
        "BaseEventLoop.shutdown_default_executor",
        "async_generator_athrow",  # the generator's aclose()
    ]


def test_a_closed_loop_is_freed_without_the_garbage_collector(scope: LoopScope) -> None:
    import gc
    import weakref

    refs: list[Any] = []

    async def main() -> None:
        refs.append(weakref.ref(asyncio.get_running_loop()))

    gc.collect()
    gc.disable()
    try:
        asyncio.run(main())
        assert refs[0]() is None
    finally:
        gc.enable()


def test_an_instance_ended_by_keyboard_interrupt_lets_go_of_its_loop(scope: LoopScope) -> None:
    """The main task keeps the KeyboardInterrupt it ended with, whose frames keep the task:
    once the instance is done with it (``_release``), its loop is freed at once."""
    import gc
    import weakref

    from harness.kafka.app import _release

    refs: list[Any] = []

    async def main() -> None:
        refs.append(weakref.ref(asyncio.get_running_loop()))
        raise KeyboardInterrupt

    gc.collect()
    gc.disable()
    try:
        try:
            asyncio.run(main())
        except KeyboardInterrupt as exc:
            assert refs[0]() is not None  # the task and its frames hold it
            _release(exc)
        assert refs[0]() is None
    finally:
        gc.enable()


_PENDING_TASK_APP = """
import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def flusher(producer, flushed):
    try:
        await asyncio.Event().wait()  # left pending when main ends
    finally:
        await producer.flush()  # a Kafka call while asyncio.run cancels it
        flushed.append(True)


async def main():
    consumer = AIOKafkaConsumer(
        "orders", group_id="g", enable_auto_commit=False, auto_offset_reset="earliest"
    )
    producer = AIOKafkaProducer()
    await consumer.start()
    await producer.start()
    flushed = []
    asyncio.get_running_loop().create_task(flusher(producer, flushed))
    try:
        async for msg in consumer:
            await producer.send_and_wait("receipts", msg.value)
            await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


asyncio.run(main())
"""


def test_an_app_leaving_a_pending_task_gets_the_same_history_either_way(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task left pending when the main one ends is cancelled by ``asyncio.run`` and makes
    a Kafka call as it goes: the loop then has work left, and the history and verdict are
    those of asyncio's own shutdown, schedule after schedule."""
    import harness
    from harness import Crash, Produce, Run, Schedule
    from harness.kafka import KafkaApp

    script = tmp_path / "pending.py"
    script.write_text(_PENDING_TASK_APP)
    app = KafkaApp(str(script), inputs=["orders"], outputs=["receipts"])
    schedules = [
        Schedule([Produce(count=2), Run(calls=30)]),
        Schedule([Produce(count=3), Run(calls=4), Crash(), Run(calls=30)]),
        Schedule([Produce(count=1), Run(calls=2), Crash(), Produce(count=2), Run(calls=40)]),
    ]

    def histories() -> list[tuple[Any, Any]]:
        got = []
        for schedule in schedules:
            history, verdict = harness.run_once(
                app, schedule, "at-least-once", topology=app.topology
            )
            got.append((history.events, verdict.status))
        return got

    quick = histories()
    assert quick == histories()  # deterministic
    monkeypatch.setattr(_loops, "_SHUTDOWNS", [()])  # asyncio's own shutdown, always
    assert histories() == quick
    assert all(status.name == "VALID" for _, status in quick)
