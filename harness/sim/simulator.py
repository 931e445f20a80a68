"""The simulator: executes a schedule against a processor and records the history.

Single-threaded and deterministic: each processor instance runs in a greenlet, and control
passes between the simulator and an instance only at calls into the world. The schedule alone
decides what happens next, so the same processor, topology, backend and schedule always give
the same history, event for event.

Every run ends (:mod:`harness.sim.budget`): a run that spends its budget of calls or seconds
stops where it is and ends ``incomplete: over the run budget ...`` (an UNKNOWN verdict) naming
the instance and its last fault point. A processor that raises a ``BaseException`` that is not
an ``Exception`` (``SystemExit``, its own ``KeyboardInterrupt``, ``GeneratorExit``,
``GreenletExit``) ends the run the same way: exiting the interpreter is not a crash to
simulate, and a run cut short is never judged VALID. A real Ctrl-C still interrupts.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import greenlet

from harness._shown import describe_exception
from harness.errors import ConfigError
from harness.faults.schedule import (
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Restart,
    Run,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)
from harness.history.events import EventKind, History
from harness.log.reader import LogReader
from harness.log.writer import LogWriter
from harness.sim.budget import TIME_RAN_OUT, RunBudget, Watchdog, run_budget
from harness.sim.context import Context
from harness.sim.exits import Guard, ProcessExit
from harness.sim.topology import Topology
from harness.sim.world import Backend, World

__all__ = ["DRAIN_CALL_LIMIT", "Instance", "InstanceCrashed", "Processor", "Simulator", "simulate"]

Processor = Callable[[Context], Any]

DRAIN_CALL_LIMIT = 100_000
"""Calls the drain allows before it declares the run incomplete (a processor that never
settles, e.g. one that loops without reading)."""
DRAIN_RESTART_LIMIT = 5
"""Times the drain restarts a processor that died of an error before giving up."""
_BLOCKED, _PAUSED, _DONE = "blocked", "paused", "done"
_REFUSALS: Final = 100
"""Calls a dead instance may still attempt (each raises InstanceCrashed, as a ``finally``
block's would) before it is taken for one that swallows its crash and is left for good."""
_ABANDONED: list[greenlet.greenlet] = []
"""Greenlets stopped for good (over budget, interrupted, or swallowing their crash). They stay
referenced so that garbage collection never resumes them: greenlet kills a collected greenlet
by raising GreenletExit in it, which such code could swallow and spin on."""


class InstanceCrashed(BaseException):
    """Raised inside a crashed instance (a BaseException, so ``except Exception`` in user
    code does not swallow the crash)."""


class _Exited(BaseException):
    """A processor raised GreenletExit, which greenlet would take for a normal return."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(original)
        self.original = original


def _body(inst: Instance, fn: Callable[[], Any]) -> None:
    """The entry of every processor greenlet (an instance's body or one of its timers); the
    watchdog takes its frame for the boundary between the harness and the processor."""
    try:
        fn()
    except greenlet.GreenletExit as exc:
        if inst.dead:
            raise
        raise _Exited(exc) from None


def _describe(exc: BaseException) -> str:
    """``Type: message`` of what a processor raised (:func:`describe_exception`), seen
    through the wrapper a BaseException travels in."""
    return describe_exception(exc.original if isinstance(exc, _Exited) else exc)


class Instance:
    """One incarnation of the processor."""

    __slots__ = (
        "budget",
        "dead",
        "duplicates",
        "fenced",
        "greenlet",
        "lost_acks",
        "machine",
        "number",
        "pending",
        "picks",
        "readers",
        "refusals",
        "released",
        "shutdown",
        "state",
        "stopping",
        "timer_greenlets",
        "timers",
        "txn",
        "writers",
    )

    def __init__(self, number: int, machine: int) -> None:
        self.number = number
        self.machine = machine
        """The machine it runs on (see :mod:`harness.sim.unsynced`)."""
        self.budget = 0
        self.pending = ""
        """The call it is paused before, its budget spent (``offsets.commit``), else ``""``."""
        self.dead = False
        self.refusals = 0
        self.released = False
        self.fenced = False
        self.state = _PAUSED
        self.duplicates = 0
        self.lost_acks = 0
        self.picks: deque[int] = deque()
        self.timers: list[Callable[[], Any]] = []
        self.timer_greenlets: list[greenlet.greenlet] = []
        self.readers: list[LogReader] = []
        self.writers: list[LogWriter] = []
        self.greenlet: greenlet.greenlet | None = None
        self.txn: int | None = None
        """The id of this instance's open transaction, if any."""
        self.shutdown: type[BaseException] | None = None
        """Raised where the instance waits when a settled run shuts it down (``None``: it is
        released like a crashed one); see :meth:`Context.on_shutdown`."""
        self.stopping = False


class Simulator:
    """Runs one schedule. Use :func:`simulate` unless you need the world afterwards."""

    def __init__(
        self,
        processor: Processor,
        topology: Topology,
        *,
        backend: Backend = "memory",
        directory: str | os.PathLike[str] | None = None,
        budget: RunBudget | None = None,
    ) -> None:
        self.budget = budget = run_budget(budget)
        self.processor = processor
        self.world = World(topology, backend, directory)
        self.active: Instance | None = None
        self.zombies: list[Instance] = []
        self.instances = 0
        self.machine = 1
        """The machine the next instance starts on (a takeover moves to a new one)."""
        self.machines = 1
        self.calls = 0
        self._main: greenlet.greenlet = greenlet.getcurrent()
        self.watch = Watchdog(budget.seconds, self._main, _body.__code__)
        self.halted: str | None = None
        """Why the run stopped early (over budget, a processor's BaseException), if it did."""
        self._last_instance = 0
        self._last_point = ""
        """The last fault point reached (its call is number ``calls``): by which instance,
        what it was."""
        self.last_error = ""
        self.stops: dict[int, str] = {}
        """Where each run step that spent its calls stopped, by step index: ``instance 1
        stopped before call 9 (offsets.commit)`` (the history's ``extra["stops"]``)."""
        self._step_index = 0

    # -- called from instances (through Context) ---------------------------------------------

    def enter(self, inst: Instance, point: str) -> None:
        """A fault point: the instance is about to call into the world (``point`` names the
        call, for reports)."""
        if inst.dead:
            self._refuse(inst)
        if greenlet.getcurrent() is inst.greenlet:
            while inst.budget <= 0:  # a Run(0) resumes it with nothing to spend: pause again
                inst.state = _PAUSED
                inst.pending = point
                self._main.switch()
                inst.pending = ""
                if inst.dead:
                    self._refuse(inst)
            inst.budget -= 1
        if self.calls >= self.budget.calls:
            self._halt(inst, point, "the call budget ran out at this call")
        if self.watch.expired:
            self._halt(inst, point, f"{TIME_RAN_OUT}; the instance stopped at this call")
        self.calls += 1
        self._last_instance = inst.number
        self._last_point = point

    def last_point(self) -> str:
        """The last fault point reached, for reports: ``instance 2, call 17 (offsets.get)``."""
        if not self._last_point:
            return "none (no instance called into the world)"
        return f"instance {self._last_instance}, call {self.calls} ({self._last_point})"

    def _refuse(self, inst: Instance) -> None:
        """A dead instance called into the world: crash it again, or, if it keeps
        swallowing its crash, leave it where it is for good."""
        inst.refusals += 1
        if inst.refusals > _REFUSALS:
            self._main.switch()
        raise InstanceCrashed

    def _halt(self, inst: Instance, point: str, what: str) -> None:
        """Stop the run at ``inst``'s call ``point``: the instance is never resumed."""
        if self.halted is None:
            here = f"instance {inst.number}, call {self.calls + 1} ({point}), not made"
            self.halted = self._over(what, here)
        self._main.switch()
        raise InstanceCrashed  # (nothing resumes a halted run's instances)

    def _over(self, what: str, point: str | None = None) -> str:
        return (
            f"incomplete: over the run budget ({self.budget.describe()}): {what}; last fault "
            f"point: {point or self.last_point()}"
        )

    def block(self, inst: Instance) -> None:
        """The instance waits for input: hand control back until the next run step."""
        if greenlet.getcurrent() is not inst.greenlet or inst.stopping:
            # a timer callback that would block: it is abandoned (periodic work never waits);
            # so is an instance that would wait again while it shuts down
            raise InstanceCrashed
        inst.state = _BLOCKED
        self._main.switch()
        if inst.dead:
            self._refuse(inst)

    def choose(self, inst: Instance, options: int) -> int:
        """A nondeterministic choice among ``options``: the schedule's next pick, else 0."""
        return inst.picks.popleft() % options if inst.picks else 0

    def take_lost_ack(self, inst: Instance) -> bool:
        if inst.lost_acks:
            inst.lost_acks -= 1
            return True
        return False

    # -- instance lifecycle ----------------------------------------------------------------

    def _start(self) -> Instance:
        self.instances += 1
        inst = Instance(self.instances, self.machine)
        ctx = Context(self, inst)
        inst.greenlet = greenlet.greenlet(
            partial(_body, inst, partial(self.processor, ctx)), parent=self._main
        )
        self.world.record(EventKind.START, process=inst.number)
        self.active = inst
        return inst

    def _resume(self, inst: Instance, budget: int) -> None:
        """Let ``inst`` make up to ``budget`` calls (or until it blocks or ends)."""
        if inst.dead or inst.state == _DONE or self.halted is not None:
            return
        g = inst.greenlet
        assert g is not None
        inst.budget = budget
        inst.state = _PAUSED
        if self._switch(inst, g) and g.dead:
            inst.state = _DONE

    def _switch(self, inst: Instance, g: greenlet.greenlet) -> bool:
        """Run ``g`` (the instance's body or one of its timers) until it hands control back;
        False if the instance is dead afterwards."""
        try:
            g.switch()
        except InstanceCrashed:
            pass
        except ConfigError:
            # a misuse of the harness API (a bad partition or sink name...) is the user's
            # mistake, not a crash to simulate: stop and say so
            self._release(inst)
            raise
        except Exception as exc:  # the processor died of an error
            self._died(inst, exc)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and self.watch.ctrl_c_unseen:
                self.halted = "interrupted"  # it may be a real Ctrl-C: do not judge, stop
                self._release(inst)
                raise
            self._died(inst, exc)
            if self.halted is None:
                self.halted = (
                    f"incomplete: instance {inst.number} raised {_describe(exc)}, a "
                    "BaseException that is not an Exception: a processor must not exit the "
                    "interpreter or raise KeyboardInterrupt, GeneratorExit or GreenletExit, "
                    "and a run it cuts short cannot be judged"
                )
        self._stopped(inst, g)
        return not inst.dead

    def _stopped(self, inst: Instance, g: greenlet.greenlet) -> None:
        """After control came back from ``g``: did the watchdog stop it, or a Ctrl-C?"""
        if self.watch.interrupted:
            self.halted = "interrupted"
            self._release(inst)
            raise KeyboardInterrupt
        if self.watch.expired and self.halted is None:
            self.halted = self._over(
                f"{TIME_RAN_OUT} while instance {inst.number} ran its own code "
                "(a busy loop, a sleep or I/O outside ctx?)"
                if self.watch.stopped
                else TIME_RAN_OUT
            )
        if self.halted is not None and not g.dead:
            self._release(inst)

    def _died(self, inst: Instance, exc: BaseException) -> None:
        self.last_error = _describe(exc)
        self._release(inst)
        self.world.record(EventKind.ERROR, process=inst.number, detail=self.last_error)
        self._forget(inst)

    def _forget(self, inst: Instance) -> None:
        if self.active is inst:
            self.active = None
        if inst in self.zombies:
            self.zombies.remove(inst)

    def _release(self, inst: Instance) -> None:
        """What the operating system does for a dead process: its locks and handles go."""
        if inst.released:
            return
        inst.released = inst.dead = True
        if inst.txn is not None:  # the coordinator aborts a dead producer's transaction
            self.world.record(EventKind.TXN_ABORT, process=inst.number, txn=inst.txn)
            inst.txn = None
        for writer in inst.writers:
            writer.abort()
        for reader in inst.readers:
            reader.close()
        inst.writers.clear()
        inst.readers.clear()
        for g in [inst.greenlet, *inst.timer_greenlets]:
            if g is not None and g:  # started and not finished: unwind it now, not at GC
                if self.halted is None:
                    self._unwind(g)
                if not g.dead:  # stopped for good, or it swallowed its crash
                    _ABANDONED.append(g)

    def _unwind(self, g: greenlet.greenlet) -> None:
        try:
            g.throw(InstanceCrashed)
        except KeyboardInterrupt:
            if self.watch.ctrl_c_unseen:
                raise
        except BaseException:  # its cleanup code raised: a dead process's has no effect
            pass
        if self.watch.interrupted:
            self.halted = "interrupted"
            raise KeyboardInterrupt
        if self.watch.expired and self.halted is None and not g.dead:
            self.halted = self._over(
                f"{TIME_RAN_OUT} while a crashed instance ran its cleanup code "
                "(does it swallow its crash?)"
            )

    def _shutdown(self, inst: Instance) -> None:
        """End a settled run the way a shutdown would: raise ``inst.shutdown`` where the
        instance waits, and let it finish (its ``finally`` blocks, a client's ``close()``)
        without faults. An instance that waits again, or runs out of calls, is abandoned."""
        g = inst.greenlet
        if inst.shutdown is None or inst.state != _BLOCKED or inst.dead or g is None:
            return
        inst.stopping = True
        inst.budget = DRAIN_CALL_LIMIT
        try:
            g.throw(inst.shutdown)
        except InstanceCrashed:
            pass
        except ConfigError:
            self._release(inst)
            raise
        except Exception as exc:
            self._died(inst, exc)
        except inst.shutdown:
            pass
        self._stopped(inst, g)
        if g.dead:
            inst.state = _DONE

    def _crash(self, inst: Instance, machine: bool, keep: int) -> None:
        self._release(inst)
        self.world.record(
            EventKind.CRASH, process=inst.number, detail="machine" if machine else "process"
        )
        self._forget(inst)
        if machine:
            self.world.machine_crash(inst.machine, keep)

    def _tick(self, inst: Instance) -> None:
        for callback in list(inst.timers):
            if inst.dead or self.halted is not None:
                return
            g = greenlet.greenlet(partial(_body, inst, callback), parent=self._main)
            inst.timer_greenlets.append(g)
            if not self._switch(inst, g):
                return
            if g.dead:
                inst.timer_greenlets.remove(g)

    # -- the schedule ----------------------------------------------------------------------

    def _step(self, step: Step) -> None:
        world = self.world
        active = self.active
        if isinstance(step, Produce):
            world.produce(
                world.partition_at(step.partition), step.count, step.ack, stop=self._stopping
            )
        elif isinstance(step, Resend):
            world.resend(world.partition_at(step.partition), step.count)
        elif isinstance(step, Run):
            # with nothing running, running means starting a fresh instance first
            self._resume(active := active or self._start(), step.calls)
            self._note_stop(active)
        elif isinstance(step, Crash):
            if active is not None:
                self._crash(active, step.machine, step.keep)
        elif isinstance(step, Restart):
            if active is None:
                self._start()
        elif isinstance(step, Duplicate):
            if active is not None:
                active.duplicates += 1
        elif isinstance(step, LoseAck):
            if active is not None:
                active.lost_acks += 1
        elif isinstance(step, Reorder):
            if active is not None:
                active.picks.append(step.pick)
        elif isinstance(step, Tick):
            if active is not None:
                self._tick(active)
        elif isinstance(step, Takeover):
            if active is not None:
                active.fenced = True
                for writer in active.writers:
                    writer.abort()  # the new owner fences the old writer's log segments
                active.writers.clear()
                world.record(EventKind.ZOMBIE, process=active.number)
                self.zombies.append(active)
                self.active = None
                self.machines += 1  # the new owner runs elsewhere; the zombie keeps its machine
                self.machine = self.machines
            self._start()
        elif isinstance(step, RunZombie):
            live = [z for z in self.zombies if z.state != _DONE]
            if live:
                self._resume(live[0], step.calls)
                self._note_stop(live[0])
        elif isinstance(step, Truncate):
            world.truncate(world.partition_at(step.partition), step.upto)
        else:  # pragma: no cover - Schedule rejects anything else
            raise AssertionError(step)

    def _note_stop(self, inst: Instance) -> None:
        """After a run step: the call ``inst`` stopped before, its calls spent (what a crash
        or any other fault the next steps arm lands before), for :attr:`stops`."""
        if inst.pending and not inst.dead and self.halted is None:
            self.stops[self._step_index] = (
                f"instance {inst.number} stopped before call {self.calls + 1} ({inst.pending})"
            )

    def _progress(self) -> tuple[int, ...]:
        """A fingerprint of everything the drain waits to settle."""
        world = self.world
        counts = [0, 0]
        for event in world.record.events[self._drain_start :]:
            if event.kind in (EventKind.READ, EventKind.EMIT, EventKind.PUT):
                counts[0] += 1
            elif event.kind is EventKind.START:
                counts[1] += 1
        stored = tuple(-1 if v is None else v for v in world.stored.values())
        return (*counts, *stored)

    def _drain(self) -> str:
        world = self.world
        world.record(EventKind.DRAIN)
        world.forget_unsynced()  # no machine crash and no retention from here on
        self._drain_start = len(world.record.events)
        for zombie in list(self.zombies):
            self._crash(zombie, False, 0)
        if self.active is not None:  # faults armed by the schedule do not reach the drain
            self.active.duplicates = self.active.lost_acks = 0
            self.active.picks.clear()
        restarts = 0
        before = self._progress()
        start_calls = self.calls
        while True:
            if self._stopping():
                return self.halted or ""
            if self.active is None:
                if restarts > DRAIN_RESTART_LIMIT:
                    deaths = sum(
                        1
                        for event in world.record.events[self._drain_start :]
                        if event.kind is EventKind.ERROR
                    )
                    return (
                        f"incomplete: the processor died {deaths} times during the drain; "
                        f"last error: {self.last_error}"
                    )
                restarts += 1
                self._start()
            active = self.active
            assert active is not None
            self._resume(active, DRAIN_CALL_LIMIT)
            if self.active is active:
                self._tick(active)
                if self.active is active:
                    self._resume(active, DRAIN_CALL_LIMIT)
            if self.calls - start_calls > DRAIN_CALL_LIMIT:
                return f"incomplete: the drain did not settle within {DRAIN_CALL_LIMIT} calls"
            after = self._progress()
            if after == before and self.active is not None:
                return "complete"
            before = after

    def _left(self, what: str) -> None:
        """The processor tried to end the process (:mod:`harness.sim.exits`): stop the run
        where it is, for good, and say who tried what."""
        here = greenlet.getcurrent()
        if self.halted is None:
            owners = [i for i in [*self.zombies, self.active] if i is not None]
            inst = next((i for i in owners if here in (i.greenlet, *i.timer_greenlets)), None)
            who = "the processor" if inst is None else f"instance {inst.number}"
            self.halted = (
                f"incomplete: {who} {what}: a processor must not end the process (os._exit, "
                "os.abort, exec, a signal to itself), and a run it cuts short cannot be judged"
            )
        if here is not self._main:
            self._main.switch()  # leave the processor where it is, never to resume it

    def _stopping(self) -> bool:
        """Whether the run must stop now (the simulator's own loops ask between steps)."""
        if self.halted is None and self.watch.expired:
            self.halted = self._over(TIME_RAN_OUT)
        return self.halted is not None

    def run(self, schedule: Schedule) -> None:
        """Execute the schedule (and the drain), then record the sinks' final contents."""
        self._refuse_up_front(schedule)
        self._main = self.watch.main = greenlet.getcurrent()
        self._drain_start = 0
        with self.watch, Guard(self._left, self.watch.owned) as guard:
            try:
                outcome = self._play(schedule)
            except ProcessExit:  # tried where no processor greenlet could be left
                outcome = self.halted or "interrupted"
            except BaseException as exc:
                if not isinstance(exc, Exception) and self.halted is None:
                    self.halted = "interrupted"  # leave the instances where they are
                raise
            finally:
                for inst in [*self.zombies, *([self.active] if self.active else [])]:
                    self._release(inst)
                self.zombies.clear()
                self.active = None
        if guard.stray is not None and self.halted is None:
            self.halted = outcome = (
                f"incomplete: a thread the processor started {guard.stray}: a processor must "
                "not end the process, and a run it cuts short cannot be judged"
            )
        self.world.observe()
        self.world.record(EventKind.END, detail=outcome)

    def _play(self, schedule: Schedule) -> str:
        self._start()
        for self._step_index, step in enumerate(schedule.steps):
            if self._stopping():
                return self.halted or ""
            self._step(step)
        if self._stopping():
            return self.halted or ""
        outcome = self._drain() if schedule.drain else "incomplete: the schedule has no drain"
        if outcome == "complete" and self.halted is None and self.active is not None:
            self._shutdown(self.active)  # a loop that never returns ends as on a shutdown
        return self.halted or outcome

    def _refuse_up_front(self, schedule: Schedule) -> None:
        resends = self.world.topology.upstream_resends
        records = sum(
            step.count
            for step in schedule.steps
            if isinstance(step, Produce) or (resends and isinstance(step, Resend))
        )
        if records > self.budget.calls:
            raise ConfigError(
                f"the schedule produces {records} input records, more than the run budget of "
                f"{self.budget.calls} calls can read (each record takes at least one call); "
                "raise the budget's calls or produce fewer records"
            )

    def close(self) -> None:
        for inst in [*self.zombies, *([self.active] if self.active else [])]:
            if not inst.dead:
                self._release(inst)
        self.world.close()


def run_id_of(processor: Processor, topology: Topology, backend: str, schedule: Schedule) -> str:
    text = f"{processor_path(processor)}|{topology.to_json()}|{backend}|{schedule.dumps()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def processor_path(processor: Processor) -> str:
    """``module:qualname``, or the processor's own ``harness_name`` (a door's application
    names itself as its user wrote it: ``app.py -- --db x``)."""
    named = getattr(processor, "harness_name", None)
    if isinstance(named, str) and named:
        return named
    module = getattr(processor, "__module__", None) or "?"
    name = getattr(processor, "__qualname__", None) or type(processor).__qualname__
    return f"{module}:{name}"


def simulate(
    processor: Processor,
    schedule: Schedule,
    *,
    topology: Topology | None = None,
    backend: Backend = "memory",
    directory: str | os.PathLike[str] | None = None,
    budget: RunBudget | None = None,
) -> History:
    """Run ``processor`` under ``schedule`` and return the recorded history (``budget``:
    what one run may spend, default :data:`~harness.sim.budget.DEFAULT_RUN_BUDGET`)."""
    topology = topology or Topology()
    sim = Simulator(processor, topology, backend=backend, directory=directory, budget=budget)
    try:
        sim.run(schedule)
        return sim.world.history(
            run_id_of(processor, topology, backend, schedule),
            {
                "processor": processor_path(processor),
                "backend": backend,
                "topology": topology.to_json(),
                "schedule": schedule.to_json(),
                **({"stops": {str(i): stop for i, stop in sim.stops.items()}} if sim.stops else {}),
            },
        )
    finally:
        sim.close()
