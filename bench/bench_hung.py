"""A processor that hangs, explored at default settings: how long until the UNKNOWN report.

The processor makes one call into the world, then spins forever. ``explore`` must stop each
run at the run budget (``--seconds``, default the default budget's 60 s), notice that the
fault-free probe already ran out of time, and give every later run (probes, the search,
shrinking, the reruns that tell a flaky processor apart) a second at most. The figure is the
wall time against the run budget itself (the baseline measured in the same run: one run to
the budget is the least any search can spend to see the hang); before stop 26, every probe
ran to the full budget and a hung processor took about six budgets.

    python bench/bench_hung.py               # default settings (60 s budget): about 1.3 min
    python bench/bench_hung.py --seconds 5   # quicker
"""

from __future__ import annotations

import argparse
import time

from harness import CounterexampleFound, RunBudget, explore
from harness.sim import Context, simulator


def hangs(ctx: Context) -> None:
    ctx.offsets.get("in-0")
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=RunBudget().seconds)
    args = parser.parse_args()
    runs: list[float] = []
    original = simulator.Simulator.__init__

    def counted(self: simulator.Simulator, *a: object, **k: object) -> None:
        original(self, *a, **k)  # type: ignore[arg-type]
        runs.append(self.budget.seconds)

    simulator.Simulator.__init__ = counted  # type: ignore[method-assign]
    started = time.perf_counter()
    try:
        explore(hangs, guarantee="at-least-once", budget=RunBudget(seconds=args.seconds))
    except CounterexampleFound as found:
        reason = found.failure.verdict.reasons[0]
    else:
        raise SystemExit("the hung processor passed: that is a bug")
    wall = time.perf_counter() - started
    full = sum(1 for seconds in runs if seconds == args.seconds)
    print(f"run budget: {args.seconds:g} s; runs: {len(runs)} ({full} with the full budget)")
    print(f"explore wall time: {wall:.1f} s = {wall / args.seconds:.2f} x the run budget")
    print(f"reason: {reason[:160]}")


if __name__ == "__main__":
    main()
