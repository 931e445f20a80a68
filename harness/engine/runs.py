"""One schedule run and judged: :func:`run_once`, and :func:`replay` of a saved one.

``run_once`` simulates one schedule and checks its history; ``replay`` does so for a replay
file (no Hypothesis involved), then runs it again (:mod:`harness.engine.reruns`) to tell a
flaky processor from a deterministic one. Another system's replay file (an unchanged Spark
job's: :class:`~harness.engine.replay_file.SystemReplay`) is run by that system, once.
"""

from __future__ import annotations

import os

from harness.check import Guarantee, Verdict, check, guarantee_of
from harness.engine.loading import load_processor, make_processor
from harness.engine.replay_file import Replay, SystemReplay, load_replay
from harness.engine.reruns import rerun
from harness.faults.schedule import Schedule
from harness.history.events import History
from harness.sim.budget import RunBudget
from harness.sim.simulator import Processor, simulate
from harness.sim.topology import Topology
from harness.sim.world import Backend

__all__ = ["replay", "run_once"]


def run_once(
    processor: Processor,
    schedule: Schedule,
    guarantee: Guarantee | str,
    *,
    topology: Topology | None = None,
    backend: Backend = "memory",
    budget: RunBudget | None = None,
) -> tuple[History, Verdict]:
    """Simulate one schedule and check its history. ``budget`` bounds the run (default
    :data:`harness.sim.budget.DEFAULT_RUN_BUDGET`); a run over it is UNKNOWN."""
    guarantee = guarantee_of(guarantee)
    history = simulate(processor, schedule, topology=topology, backend=backend, budget=budget)
    return history, check(history, guarantee)


def replay(
    source: Replay | SystemReplay | str | os.PathLike[str], *, budget: RunBudget | None = None
) -> tuple[History, Verdict]:
    """Run a saved schedule again (no Hypothesis involved) and check it. Any door's replay
    file: a processor's or a Kafka application's (simulated, then run again to tell a flaky
    processor from a deterministic one), or an unchanged Spark job's or a built-in streaming
    variant's (run once on this process's Spark session, started if none runs, in a new
    temporary directory it keeps; ``budget`` then bounds each of the job's query runs in
    seconds)."""
    spec = load_replay(source) if isinstance(source, str | os.PathLike) else source
    if not isinstance(spec, Replay):
        return spec.run_again(budget=budget)
    if spec.factory is not None:
        processor = make_processor(spec.factory)
    else:
        processor = load_processor(spec.processor, spec.processor_file)
    topology, backend = spec.topology, spec.backend
    history, verdict = run_once(
        processor,
        spec.schedule,
        spec.guarantee,
        topology=topology,
        backend=backend,
        budget=budget,
    )
    seen = rerun(
        processor,
        spec.schedule,
        history,
        verdict,
        topology=topology,
        backend=backend,
        budget=budget,
    )
    return seen.history, seen.verdict
