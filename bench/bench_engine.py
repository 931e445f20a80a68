"""Engine speed: schedules per second against bare Hypothesis, and time to first failure.

    python bench/bench_engine.py [--examples 300] [--leveldb-examples 30] [--seeds 20]
                                 [--only rate|detect]

Issue "engine". Two parts:

* ``rate``: the correct toy ``process_then_commit`` (at-least-once) run under ``--examples``
  Hypothesis-drawn schedules of exactly 50 steps (all faults enabled), each simulated and
  checked with ``run_once``, on the memory backend, inside one ``@given`` test
  (``phases=[Phase.generate]``, no database, no deadline, health checks off, fixed seed).
  The baseline, measured in the same run with the same settings and seed: bare Hypothesis
  drawing as many 50-element ``st.lists`` of the same step strategy (``steps(...)``) and doing
  nothing else. Prints schedules/s for both, the ratio (target >= 0.5) and the mean number of
  history events per schedule; calls are counted, so a short run would show. The same rate on
  the LevelDB backend (real files, much slower; ``--leveldb-examples``) is printed too, with
  no target.
  ``explore`` itself is timed too (same toy, ``max_examples=--examples``, ``max_steps=50``):
  its systematic phase (probes, plan, short schedules) counted with its drawn schedules;
  its schedules/s against the same bare baseline must also be >= 0.5.
* ``detect``: for every broken toy in ``harness.catalogue.toys.TOYS`` (non-empty ``expected``), for
  each of ``--seeds`` seeds, ``explore(..., max_examples=1000, failures_dir=None)``; the time
  to first failure is ``Failure.first_failure_seconds`` (until the first failing example,
  before shrinking). Prints per toy the median and max over seeds (a seed that finds nothing
  counts as never), the median number of the first failing schedule (when the harness's
  ``Failure`` has ``first_failure_example``), the median shrunk schedule length, in how many
  seeds it was found and in how many the anomaly was one of the expected kinds, and the wall
  time of all seeds including shrinking. Target: median <= 1 s for each toy.

Both parts run warm: a few examples are run first, untimed, to pay one-off costs. The
explorations run one after another on one core, so timings are those of a single search.

Prints figures and a summary of the targets; never asserts on timings and always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import hypothesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import strategies as st

from harness import CounterexampleFound, Schedule, Status, explore, run_once
from harness.catalogue import Subject
from harness.catalogue.toys import TOYS
from harness.strategies.schedules import schedules, steps

if TYPE_CHECKING:
    from harness.sim.world import Backend

STEPS = 50
RATE_TOY = "process_then_commit"
RATE_TARGET = 0.5
DETECT_TARGET_SECONDS = 1.0
DETECT_MAX_EXAMPLES = 1000
RATE_SEED = 20240601
WARM_UP_EXAMPLES = 5


def _settings(n: int) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        print_blob=False,
    )


# -- rate ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rate:
    """One timed ``@given`` run: how many examples ran, in how long, and what they gave."""

    label: str
    requested: int
    calls: int
    seconds: float
    events: int = 0
    not_valid: tuple[str, ...] = ()
    """A description of each verdict that was not VALID (none expected: the toy is correct)."""

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else math.inf

    @property
    def mean_events(self) -> float:
        return self.events / self.calls if self.calls else 0.0


def _timed_given(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure_engine(n: int, backend: Backend) -> Rate:
    """``n`` 50-step schedules of the correct toy, each simulated and checked."""
    toy = TOYS[RATE_TOY]
    counts = {"calls": 0, "events": 0}
    not_valid: list[str] = []
    strategy = schedules(toy.topology, faults=None, min_steps=STEPS, max_steps=STEPS)

    @_settings(n)
    @hypothesis.seed(RATE_SEED)
    @given(strategy)
    def run(schedule: Schedule) -> None:
        history, verdict = run_once(
            toy.processor, schedule, toy.guarantee, topology=toy.topology, backend=backend
        )
        counts["calls"] += 1
        counts["events"] += len(history)
        if verdict.status is not Status.VALID:
            kinds = ",".join(anomaly.kind.value for anomaly in verdict.anomalies)
            not_valid.append(f"{verdict.status.name}({kinds or '; '.join(verdict.reasons)})")

    seconds = _timed_given(run)
    return Rate(
        f"harness ({backend})",
        n,
        counts["calls"],
        seconds,
        counts["events"],
        tuple(not_valid),
    )


def measure_bare(n: int) -> Rate:
    """Bare Hypothesis: ``n`` 50-element lists of the same step strategy, nothing else."""
    toy = TOYS[RATE_TOY]
    counts = {"calls": 0}
    strategy = st.lists(steps(toy.topology, None), min_size=STEPS, max_size=STEPS)

    @_settings(n)
    @hypothesis.seed(RATE_SEED)
    @given(strategy)
    def run(drawn: list[object]) -> None:
        counts["calls"] += 1

    seconds = _timed_given(run)
    return Rate("bare Hypothesis", n, counts["calls"], seconds)


def measure_explore(n: int) -> Rate:
    """``explore`` itself, the systematic phase counted: its probes and planning, then its
    short schedules, then Hypothesis' ``max_steps=50`` ones, ``n`` schedules in all."""
    toy = TOYS[RATE_TOY]
    start = time.perf_counter()
    result = explore(
        toy.processor,
        guarantee=toy.guarantee,
        topology=toy.topology,
        max_examples=n,
        max_steps=STEPS,
        seed=RATE_SEED,
        failures_dir=None,
    )
    seconds = time.perf_counter() - start
    label = f"explore ({result.coverage.systematic} sys.)"
    return Rate(label, n, result.examples, seconds)


def _print_rate(rate: Rate) -> None:
    short = "" if rate.calls == rate.requested else f"  (ONLY {rate.calls} of {rate.requested})"
    events = f"  {rate.mean_events:7.1f} events/schedule" if rate.events else ""
    print(
        f"  {rate.label:24} {rate.per_second:>10,.1f} schedules/s  "
        f"{rate.calls:>5} examples in {rate.seconds:6.2f} s{events}{short}"
    )
    if rate.not_valid:
        seen = Counter(rate.not_valid)
        kinds = ", ".join(f"{kind} x{count}" for kind, count in sorted(seen.items()))
        print(
            f"  {'':24} {len(rate.not_valid)} of {rate.calls} verdicts not VALID for a correct "
            f"toy: {kinds}"
        )


def section_rate(examples: int, leveldb_examples: int) -> tuple[float, bool]:
    print(
        f"== rate: {RATE_TOY} under {STEPS}-step schedules (all faults), simulate + check, "
        f"seed {RATE_SEED}"
    )
    # Warm up imports, caches and Hypothesis' own first-call costs, on both sides alike.
    measure_engine(WARM_UP_EXAMPLES, "memory")
    measure_bare(WARM_UP_EXAMPLES)
    bare = measure_bare(examples)
    ours = measure_engine(examples, "memory")
    whole = measure_explore(examples)
    ratio = ours.per_second / bare.per_second
    _print_rate(ours)
    _print_rate(whole)
    _print_rate(bare)
    met = ratio >= RATE_TARGET
    print(f"  {'ratio (memory / bare)':24} {ratio:>10.2f}   (target >= {RATE_TARGET})")
    with_phase = whole.per_second / bare.per_second
    met = met and with_phase >= RATE_TARGET
    print(f"  {'ratio (explore / bare)':24} {with_phase:>10.2f}   (target >= {RATE_TARGET})")
    if leveldb_examples > 0:
        level = measure_engine(leveldb_examples, "leveldb")
        _print_rate(level)
        print(
            f"  {'ratio (leveldb / bare)':24} {level.per_second / bare.per_second:>10.3f}   "
            f"(no target; memory / leveldb = {ours.per_second / level.per_second:.1f}x)"
        )
    return ratio, met


# -- detect ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Detection:
    """The explorations of one broken toy over the seeds."""

    toy: Subject
    seeds: int
    first_failure: tuple[float, ...]  # per seed; inf when not found
    shrunk_steps: tuple[int, ...]  # per found seed
    first_example: tuple[int, ...]  # per found seed, if the harness reports it
    right_anomaly: int
    missed: tuple[int, ...]
    wall_seconds: float

    @property
    def found(self) -> int:
        return self.seeds - len(self.missed)

    @property
    def median(self) -> float:
        return statistics.median(self.first_failure)

    @property
    def worst(self) -> float:
        return max(self.first_failure)


def detect(toy: Subject, seeds: Sequence[int]) -> Detection:
    first: list[float] = []
    shrunk: list[int] = []
    examples: list[int] = []
    missed: list[int] = []
    right = 0
    start = time.perf_counter()
    for seed in seeds:
        try:
            explore(
                toy.processor,
                guarantee=toy.guarantee,
                topology=toy.topology,
                faults=toy.needs,
                seed=seed,
                max_examples=DETECT_MAX_EXAMPLES,
                failures_dir=None,
            )
        except CounterexampleFound as exc:
            failure = exc.failure
            first.append(failure.first_failure_seconds)
            shrunk.append(len(failure.schedule))
            # Newer harnesses also say which drawn schedule failed first; older ones do not.
            example = getattr(failure, "first_failure_example", None)
            if isinstance(example, int):
                examples.append(example)
            kinds = {anomaly.kind for anomaly in failure.verdict.anomalies}
            right += bool(kinds & toy.expected)
        else:
            first.append(math.inf)
            missed.append(seed)
    wall = time.perf_counter() - start
    return Detection(
        toy, len(seeds), tuple(first), tuple(shrunk), tuple(examples), right, tuple(missed), wall
    )


def _seconds(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.3f}"


def section_detect(seeds: int) -> list[tuple[str, float, bool]]:
    broken = [toy for toy in TOYS.values() if toy.expected]
    print(
        f"== detect: {len(broken)} broken toys x {seeds} seeds, explore(max_examples="
        f"{DETECT_MAX_EXAMPLES}); first failure = before shrinking"
    )
    # Warm up: the first exploration of the process pays one-off costs.
    with contextlib.suppress(CounterexampleFound):
        explore(
            TOYS[RATE_TOY].processor,
            guarantee=TOYS[RATE_TOY].guarantee,
            max_examples=WARM_UP_EXAMPLES,
            seed=0,
            failures_dir=None,
        )
    header = (
        f"  {'toy':30} {'median 1st s':>12} {'max 1st s':>10} {'med. 1st ex':>11} "
        f"{'med. shrunk':>11} "
        f"{'found':>7} {'right kind':>10} {'total s':>8}"
    )
    print(header)
    results: list[tuple[str, float, bool]] = []
    for toy in broken:
        row = detect(toy, range(seeds))
        shrunk = statistics.median(row.shrunk_steps) if row.shrunk_steps else math.nan
        example = f"{statistics.median(row.first_example):g}" if row.first_example else "-"
        print(
            f"  {toy.name:30} {_seconds(row.median):>12} {_seconds(row.worst):>10} "
            f"{example:>11} {shrunk:>11g} {f'{row.found}/{seeds}':>7} "
            f"{f'{row.right_anomaly}/{seeds}':>10} {row.wall_seconds:>8.1f}"
        )
        if row.missed:
            print(
                f"  {'':30} not found within {DETECT_MAX_EXAMPLES} examples: seeds "
                f"{', '.join(map(str, row.missed))}"
            )
        results.append((toy.name, row.median, row.median <= DETECT_TARGET_SECONDS))
    print(
        "  median/max 1st s over all seeds (a seed that finds nothing counts as never); "
        "med. 1st ex: median\n  number of the first failing schedule; med. shrunk: steps "
        "after shrinking; total s: all seeds, with shrinking"
    )
    return results


# -- main ------------------------------------------------------------------------------------


def _verdict(met: bool) -> str:
    return "target met" if met else "TARGET MISSED"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--examples", type=int, default=300, help="schedules for the memory rate (300)"
    )
    parser.add_argument(
        "--leveldb-examples",
        type=int,
        default=30,
        help="schedules for the LevelDB rate (30; 0 skips it)",
    )
    parser.add_argument("--seeds", type=int, default=20, help="seeds per broken toy (20)")
    parser.add_argument("--only", choices=("rate", "detect"), help="run one part only")
    args = parser.parse_args(argv)
    if args.examples < 1:
        parser.error(f"--examples must be at least 1, got {args.examples}")
    if args.leveldb_examples < 0:
        parser.error(f"--leveldb-examples must be at least 0, got {args.leveldb_examples}")
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")

    print(f"engine benchmark: python {sys.version.split()[0]}, hypothesis {hypothesis.__version__}")
    started = time.perf_counter()
    summary: list[tuple[str, bool]] = []
    if args.only in (None, "rate"):
        ratio, met = section_rate(args.examples, args.leveldb_examples)
        summary.append((f"rate: memory / bare Hypothesis = {ratio:.2f} (>= {RATE_TARGET})", met))
    if args.only in (None, "detect"):
        if args.only is None:
            print()
        for name, median, met in section_detect(args.seeds):
            summary.append(
                (
                    f"detect {name}: median first failure {_seconds(median)} s "
                    f"(<= {DETECT_TARGET_SECONDS:g} s)",
                    met,
                )
            )
    print()
    print("== summary")
    for text, met in summary:
        print(f"  {text:74} {_verdict(met)}")
    missed = sum(not met for _, met in summary)
    print(
        f"  {len(summary) - missed}/{len(summary)} targets met; total "
        f"{time.perf_counter() - started:.1f} s (timings never fail anything)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
