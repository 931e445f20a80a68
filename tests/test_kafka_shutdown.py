"""The simulator's shutdown hook (``Context.on_shutdown``), which the Kafka doubles use to end
a ``while True: poll()`` loop the way SIGINT would."""

from __future__ import annotations

from harness import Produce, Run, Schedule, simulate
from harness.history.events import EventKind
from harness.sim import Context


class _Stop(BaseException):
    pass


def _forever(ctx: Context, *, shutdown: bool) -> None:
    if shutdown:
        ctx.on_shutdown(_Stop)
    out = ctx.output()
    last = None
    try:
        for record in ctx.read("in-0", ctx.offsets.get("in-0")):
            out.emit(record)
            out.commit()
            last = record
    finally:
        if last is not None:  # the offset is stored only on a clean shutdown
            ctx.offsets.put("in-0", last.next)


def graceful(ctx: Context) -> None:
    _forever(ctx, shutdown=True)


def released(ctx: Context) -> None:
    _forever(ctx, shutdown=False)


SCHEDULE = Schedule([Produce(count=2), Run(calls=20)])


def test_a_parked_instance_is_shut_down_and_its_finally_block_writes() -> None:
    history = simulate(graceful, SCHEDULE)
    commits = [e for e in history.events if e.kind is EventKind.COMMIT]
    assert [(c.partition, c.offset) for c in commits] == [("in-0", 2)]
    assert history.events[-1].detail == "complete"
    drain = next(e.index for e in history.events if e.kind is EventKind.DRAIN)
    assert commits[0].index > drain


def test_without_the_hook_a_parked_instance_is_released_and_writes_nothing() -> None:
    history = simulate(released, SCHEDULE)
    assert not [e for e in history.events if e.kind is EventKind.COMMIT]
    assert history.events[-1].detail == "complete"


def test_an_unsettled_run_is_not_shut_down() -> None:
    history = simulate(graceful, Schedule([Produce(count=2), Run(calls=20)], drain=False))
    assert not [e for e in history.events if e.kind is EventKind.COMMIT]
