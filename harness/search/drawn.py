"""The drawn phase: Hypothesis draws schedules, steered towards fault points not reached yet
(:mod:`harness.search.guided`), and shrinks the first failing one.

The phase does not know how a schedule is run or judged: the engine hands it an
:data:`Attempt`, which runs one schedule, counts it and says whether it failed with a problem
not known yet. The phase returns the smallest failing schedule Hypothesis shrank to, with its
verdict, or None when every drawn schedule passed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.check.verdict import Verdict
from harness.faults.kinds import Fault
from harness.faults.schedule import Schedule
from harness.history.events import History
from harness.sim.topology import Topology

__all__ = ["Attempt", "drawn_phase"]

Attempt = Callable[[Schedule, bool], tuple[History, Verdict, bool]]
"""Run one schedule (the flag: whether it is a shrinking run) and return its history, its
verdict and whether it failed with a problem not known yet."""


class _Failed(Exception):
    pass


def drawn_phase(
    attempt: Attempt,
    topology: Topology,
    faults: frozenset[Fault],
    *,
    budget: int,
    max_steps: int,
    seed: int,
) -> tuple[Schedule, Verdict] | None:
    """Let Hypothesis draw up to ``budget`` schedules from ``seed`` and shrink a failing one."""
    if budget <= 0:
        return None
    import hypothesis
    from hypothesis import HealthCheck, Phase, Verbosity

    from harness.search.guided import Guidance, Novelty, current
    from harness.strategies.schedules import schedules

    targeted = current() is Guidance.TARGET
    novelty = Novelty()
    found: dict[str, Any] = {"failed": False, "last": None}

    @hypothesis.settings(
        max_examples=budget,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.generate, Phase.target, Phase.shrink)
        if targeted
        else (Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @hypothesis.seed(seed)
    @hypothesis.given(schedules(topology, faults, max_steps=max_steps))
    def run(schedule: Schedule) -> None:
        history, verdict, failed = attempt(schedule, found["failed"])
        if targeted and not found["failed"]:
            hypothesis.target(novelty.score(history), label="novel fault points")
        if failed:
            found["failed"] = True
            found["last"] = (schedule, verdict)
            raise _Failed

    try:
        run()
    except (_Failed, hypothesis.errors.Flaky):
        if found["last"] is None:  # a Flaky before any recorded failure is not ours
            raise
    last: tuple[Schedule, Verdict] | None = found["last"]
    return last
