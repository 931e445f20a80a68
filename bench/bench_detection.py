"""Detection table: does ``explore`` find every buggy processor with its *default* faults?

For every buggy subject of the catalogue (the broken toys, the buggy scenario variants and
the pitfalls), ``--seeds`` searches (default 20) with the faults left at their defaults (the
subject's ``scope``: every fault unless its claim excludes some) and the ``--profile``
budget (default ``dev``); the table gives, per subject, in how many seeds the bug was found,
the median and worst time to the first failing schedule (before shrinking) and the median
length of the shrunk counterexample. Every correct subject is then searched with one seed
under ``--correct-profile`` (default ``dev``; ``nightly`` is the acceptance run) and must pass.

``--before`` measures the engine without the systematic phase (``systematic=False``: the
Hypothesis phase alone; with ``--guidance none``, the search as it was before either),
``--compare`` measures both in the same run and prints
both tables and the totals side by side. ``--guidance none target`` measures the drawn
phase unguided and targeted (``harness.search.guided``) in the same run, after each other
for each phase measured; ``--before --guidance none target`` is the comparison that decided
the default (with the systematic phase off, the drawn phase alone must find every bug).
Timing figures are noisy on a shared machine; the comparison is against a baseline measured
in the same run.

    python bench/bench_detection.py --compare              # before/after, dev budget, 20 seeds
    python bench/bench_detection.py --before --guidance none target --skip-correct
    python bench/bench_detection.py --skip-buggy --correct-profile nightly   # no false alarms

The held-out practice's subjects (``bench/heldout``, source ``heldout``) are included unless
``--no-heldout``; ``bench/heldout/RESULTS.md`` has their figures before and after issue 28.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness import CounterexampleFound, Status, explore
from harness.catalogue import Subject
from harness.catalogue.pitfalls import PITFALLS
from harness.catalogue.seeds import SCENARIOS
from harness.catalogue.toys import TOYS
from harness.engine import default_seed
from harness.search.guided import DEFAULT_GUIDANCE, Guidance, using
from harness.search.profiles import Profile, profile
from harness.sim.simulator import processor_path

SEED_STRIDE = 7919


def catalogue(*, heldout: bool = True) -> list[tuple[str, Subject]]:
    """(source, subject) for every toy, scenario variant and pitfall, and (``heldout``) the
    held-out practice's subjects (``bench/heldout``: written against the public API only,
    kept out of the search's tuning loop)."""
    found = [("toy", s) for s in TOYS.values()]
    found += [(f"scenario {sc.name}", v) for sc in SCENARIOS.values() for v in sc.variants]
    found += [("pitfall", s) for s in PITFALLS.values()]
    if heldout:
        from heldout import HELDOUT

        found += [("heldout", s) for s in HELDOUT.values()]
    return found


@dataclass(frozen=True)
class Row:
    source: str
    subject: Subject
    statuses: tuple[Status, ...]
    detect: tuple[float, ...]
    shrunk: tuple[int, ...]
    systematic: int
    """Searches whose first failure came from the systematic phase."""

    @property
    def found(self) -> int:
        return sum(s is not Status.VALID for s in self.statuses)


def search(
    source: str,
    subject: Subject,
    budget: Profile,
    seeds: int,
    *,
    before: bool,
    guidance: Guidance = DEFAULT_GUIDANCE,
) -> Row:
    statuses, detect, shrunk = [], [], []
    systematic = 0
    base = default_seed(processor_path(subject.processor))
    for i in range(seeds):
        try:
            with using(guidance):
                explore(
                    subject.processor,
                    guarantee=subject.guarantee,
                    topology=subject.topology,
                    faults=subject.scope,
                    max_examples=budget.max_examples,
                    max_steps=budget.max_steps,
                    seed=base + i * SEED_STRIDE,
                    failures_dir=None,
                    systematic=not before,
                )
        except CounterexampleFound as exc:
            failure = exc.failure
            statuses.append(failure.verdict.status)
            detect.append(failure.first_failure_seconds)
            shrunk.append(len(failure.schedule))
            systematic += failure.first_failure_example <= failure.coverage.systematic
        else:
            statuses.append(Status.VALID)
    return Row(source, subject, tuple(statuses), tuple(detect), tuple(shrunk), systematic)


def _cell(values: Sequence[float], how: str) -> str:
    if not values:
        return "-"
    value = statistics.median(values) if how == "median" else max(values)
    return f"{value:.3f}" if isinstance(value, float) else f"{value:g}"


def render(rows: Iterable[Row], seeds: int) -> str:
    header = ("subject", "source", "found", "median s", "worst s", "shrunk", "by phase 1", "needs")
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.subject.name,
                row.source,
                f"{row.found}/{seeds}",
                _cell(row.detect, "median"),
                _cell(row.detect, "max"),
                _cell([float(s) for s in row.shrunk], "median"),
                f"{row.systematic}/{seeds}",
                ",".join(sorted(f.value for f in row.subject.needs)) or "none",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(t.rstrip() for t in text)


def totals(rows: Sequence[Row], seeds: int) -> str:
    every = sum(r.found == seeds for r in rows)
    detect = [d for r in rows for d in r.detect]
    shrunk = [s for r in rows for s in r.shrunk]
    worst = max(detect) if detect else float("nan")
    median = statistics.median(detect) if detect else float("nan")
    mean_shrunk = statistics.mean(shrunk) if shrunk else float("nan")
    return (
        f"{every}/{len(rows)} buggy subjects found by {seeds}/{seeds} seeds; "
        f"{sum(r.found for r in rows)}/{len(rows) * seeds} searches found their bug; "
        f"median time to first failure {median:.3f} s, worst {worst:.3f} s; "
        f"shrunk steps mean {mean_shrunk:.2f}"
    )


def buggy(
    subjects: Sequence[tuple[str, Subject]],
    budget: Profile,
    seeds: int,
    *,
    before: bool,
    guidance: Guidance = DEFAULT_GUIDANCE,
) -> list[Row]:
    rows = []
    for source, subject in subjects:
        row = search(source, subject, budget, seeds, before=before, guidance=guidance)
        rows.append(row)
        phase = "before" if before else "after"
        print(
            f"  {phase}, {guidance.value}: {subject.name} {row.found}/{seeds}",
            file=sys.stderr,
            flush=True,
        )
    return rows


def correct(subjects: Sequence[tuple[str, Subject]], budget: Profile) -> list[str]:
    """Search every correct subject once; the names of those that failed (false alarms)."""
    alarms = []
    for source, subject in subjects:
        started = time.perf_counter()
        row = search(source, subject, budget, 1, before=False)
        verdict = "FALSE ALARM" if row.found else "passes"
        seconds = time.perf_counter() - started
        print(f"{subject.name:40s} {verdict} ({seconds:.1f} s)", flush=True)
        if row.found:
            alarms.append(subject.name)
    return alarms


def detection(
    bugs: Sequence[tuple[str, Subject]], budget: Profile, args: argparse.Namespace
) -> None:
    """The detection table of each configuration (phases x guidance), then their totals."""
    print(
        f"== detection with default faults: {len(bugs)} buggy subjects x {args.seeds} seeds, "
        f"profile {budget.name} ({budget.max_examples} schedules of up to {budget.max_steps} "
        "steps)"
    )
    phases = [True, False] if args.compare else [args.before]
    summary = []
    for before in phases:
        for guidance in args.guidance:
            rows = buggy(bugs, budget, args.seeds, before=before, guidance=guidance)
            title = "before (Hypothesis alone" if before else "after (systematic, then Hypothesis"
            title += f", guidance {guidance.value})"
            print(f"\n-- {title}")
            print(render(rows, args.seeds))
            print(totals(rows, args.seeds))
            summary.append(f"{title}: {totals(rows, args.seeds)}")
    if len(summary) > 1:
        print("\n== totals\n" + "\n".join(summary))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--profile", default="dev")
    parser.add_argument("--correct-profile", default="dev")
    parser.add_argument("--before", action="store_true", help="without the systematic phase")
    parser.add_argument("--compare", action="store_true", help="before and after")
    parser.add_argument("--only", nargs="*", help="subject names")
    parser.add_argument("--skip-correct", action="store_true")
    parser.add_argument("--skip-buggy", action="store_true", help="only the false-alarm run")
    parser.add_argument(
        "--no-heldout", action="store_true", help="without the held-out subjects (bench/heldout)"
    )
    parser.add_argument(
        "--guidance",
        nargs="+",
        type=Guidance,
        default=[DEFAULT_GUIDANCE],
        help="the drawn phase's guidance; several: compared in the same run "
        f"({', '.join(g.value for g in Guidance)}; default {DEFAULT_GUIDANCE.value})",
    )
    args = parser.parse_args(argv)
    budget = profile(args.profile)
    subjects = [
        (src, s)
        for src, s in catalogue(heldout=not args.no_heldout)
        if not args.only or s.name in args.only
    ]
    bugs = [(src, s) for src, s in subjects if not s.correct]
    if not args.skip_buggy:
        detection(bugs, budget, args)
    alarms: list[str] = []
    if not args.skip_correct:
        fine = [(src, s) for src, s in subjects if s.correct]
        print(f"\n== correct subjects, one search each, profile {args.correct_profile}")
        alarms = correct(fine, profile(args.correct_profile))
        print(f"false alarms: {len(alarms)}/{len(fine)} {alarms or ''}")
    return 1 if alarms else 0


if __name__ == "__main__":
    raise SystemExit(main())
