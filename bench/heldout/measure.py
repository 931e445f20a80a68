"""Held-out detection: ``explore()`` with default arguments on three seeds per subject.

    PYTHONPATH=$PWD /work/venv/bin/python bench/heldout/measure.py [--seeds 3]

Prints, per subject, whether each seed's search found a bug (buggy) or passed (correct),
and the time to the first failing schedule; then the totals. Exit status is 0 always:
this is a measurement, not a gate (``bench/bench_detection.py --heldout`` is the gate).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import CounterexampleFound, explore
from harness.engine import default_seed
from harness.sim.simulator import processor_path
from heldout import HELDOUT

STRIDE = 7919


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    found_all, firsts, wrong = 0, [], []
    buggy = [s for s in HELDOUT.values() if not s.correct]
    for subject in HELDOUT.values():
        if args.only and subject.name not in args.only:
            continue
        base = default_seed(processor_path(subject.processor))
        cells = []
        for i in range(args.seeds):
            started = time.perf_counter()
            try:
                explore(
                    subject.processor,
                    guarantee=subject.guarantee,
                    topology=subject.topology,
                    seed=base + i * STRIDE,
                    failures_dir=None,
                )
            except CounterexampleFound as exc:
                kinds = ",".join(sorted(a.kind.value for a in exc.failure.verdict.anomalies))
                cells.append(f"FOUND {exc.failure.first_failure_seconds:.2f}s [{kinds}]")
                if not subject.correct:
                    firsts.append(exc.failure.first_failure_seconds)
                else:
                    wrong.append(subject.name)
            else:
                cells.append(f"held ({time.perf_counter() - started:.1f}s)")
                if not subject.correct:
                    wrong.append(subject.name)
        ok = (
            all(c.startswith("FOUND") for c in cells)
            if not subject.correct
            else all(c.startswith("held") for c in cells)
        )
        found_all += ok and not subject.correct
        kind = "correct" if subject.correct else "buggy"
        print(f"{subject.name:36} {kind:7} {' | '.join(cells)}", flush=True)
    median = statistics.median(firsts) if firsts else float("nan")
    worst = max(firsts) if firsts else float("nan")
    print(
        f"\n{found_all}/{len(buggy)} buggy found on every seed; "
        f"{len(firsts)}/{len(buggy) * args.seeds} searches found their bug; "
        f"time to first failure median {median:.2f} s, worst {worst:.2f} s; "
        f"wrong: {sorted(set(wrong)) or 'none'}"
    )


if __name__ == "__main__":
    main()
