"""Soak: every correct processor under many drawn schedules must be VALID, every time.

    python bench/bench_soak.py [--schedules 100000] [--leveldb-share 0.1] [--seeds 4]
                               [--first-seed 0] [--max-steps 30] [--only NAME ...]

Issue 18 (item 1). The subjects are every correct processor the project ships: the correct toys
of ``harness.catalogue.toys.TOYS`` and the correct variants of every scenario in
``harness.catalogue.seeds.SCENARIOS`` and the pitfalls' fixed twins of
``harness.catalogue.pitfalls.PITFALLS`` (``--heldout`` adds ``bench/heldout``'s), each with its
own topology, guarantee and scope (the faults it claims to survive: all of them for most; the
toy ``atomic_counter`` is correct only without zombies, the Kafka Streams scenario has no
duplicate delivery). ``--schedules`` are split evenly over subjects x seeds, ``--leveldb-share``
of them on the LevelDB backend (real plyvel files, about twenty times slower) and the rest on
memory. Each (subject, backend, seed) cell draws its schedules with Hypothesis
(``phases=[Phase.generate]``, that seed, no database, no deadline, health checks off, up to
``--max-steps`` steps), simulates each with ``run_once`` and counts verdicts; nothing is
shrunk.

Prints one line per cell (schedules run, VALID, not VALID, seconds), the first non-VALID
schedule of a cell as JSON with its verdict, and a total line with schedules per second. Exits
1 if any schedule was not VALID (a false alarm, or a harness error), else 0. Timings on a
loaded machine are noisy; the verdict counts are not.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import hypothesis
from hypothesis import HealthCheck, Phase, given

from harness import Schedule, Status, run_once
from harness.catalogue import Subject
from harness.catalogue.pitfalls import PITFALLS
from harness.catalogue.seeds import SCENARIOS
from harness.catalogue.toys import TOYS
from harness.sim.world import Backend
from harness.strategies.schedules import schedules


@dataclass(slots=True)
class Cell:
    runs: int = 0
    valid: int = 0
    first_bad: str = ""


def subjects(*, heldout: bool = False) -> list[Subject]:
    """Every correct processor of the catalogue (toys, scenario variants and the pitfalls'
    fixed twins), each with the world it runs in and the faults it claims to be correct
    under (its ``scope``); with ``heldout``, the held-out practice's twins too
    (``bench/heldout``)."""
    found = [toy for toy in TOYS.values() if toy.correct]
    for scenario in SCENARIOS.values():
        found.extend(variant for variant in scenario.variants if variant.correct)
    found.extend(twin for twin in PITFALLS.values() if twin.correct)
    if heldout:
        from heldout import HELDOUT

        found.extend(twin for twin in HELDOUT.values() if twin.correct)
    return found


def soak(subject: Subject, backend: Backend, seed: int, count: int, max_steps: int) -> Cell:
    """Run ``count`` drawn schedules of ``subject``; count the VALID ones."""
    cell = Cell()

    @hypothesis.settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=hypothesis.Verbosity.quiet,
    )
    @hypothesis.seed(seed)
    @given(schedules(subject.topology, subject.scope, max_steps=max_steps))
    def run(schedule: Schedule) -> None:
        cell.runs += 1
        try:
            _, verdict = run_once(
                subject.processor,
                schedule,
                subject.guarantee,
                topology=subject.topology,
                backend=backend,
            )
        except Exception as exc:  # a harness error is a failure of the soak too
            bad = f"{type(exc).__name__}: {exc}"
        else:
            if verdict.status is Status.VALID:
                cell.valid += 1
                return
            bad = verdict.summary()
        if not cell.first_bad:
            cell.first_bad = f"{bad}\n    schedule: {schedule.dumps()}"

    run()
    return cell


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--leveldb-share", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from this one")
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--only", nargs="*", default=None, help="subject names to soak")
    parser.add_argument("--heldout", action="store_true", help="the held-out twins too")
    args = parser.parse_args(argv)
    chosen = [s for s in subjects(heldout=args.heldout) if not args.only or s.name in args.only]
    cells = len(chosen) * args.seeds
    plan: list[tuple[Backend, int]] = [
        ("memory", round(args.schedules * (1 - args.leveldb_share) / cells)),
        ("leveldb", round(args.schedules * args.leveldb_share / cells)),
    ]
    print(
        f"soak: {len(chosen)} correct processors x {args.seeds} seeds; per cell "
        + ", ".join(f"{n} schedules on {b}" for b, n in plan)
        + f"; up to {args.max_steps} steps",
        flush=True,
    )
    total = valid = 0
    started = time.perf_counter()
    for backend, per_cell in plan:
        if per_cell < 1:
            continue
        for subject in chosen:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                t0 = time.perf_counter()
                cell = soak(subject, backend, seed, per_cell, args.max_steps)
                total += cell.runs
                valid += cell.valid
                print(
                    f"  {backend:7} seed {seed} {subject.name:55} {cell.runs:6} run "
                    f"{cell.valid:6} VALID {cell.runs - cell.valid:3} not "
                    f"({time.perf_counter() - t0:6.1f} s)",
                    flush=True,
                )
                if cell.first_bad:
                    print("    first not VALID: " + cell.first_bad, flush=True)
    seconds = time.perf_counter() - started
    print(
        f"total: {total} schedules, {valid} VALID, {total - valid} not VALID, "
        f"{seconds:.0f} s ({total / seconds:.0f} schedules/s)"
    )
    return 0 if total == valid else 1


if __name__ == "__main__":
    sys.exit(main())
