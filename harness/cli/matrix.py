"""The mutation matrix: how well the harness tells the catalogue's correct and buggy subjects
apart.

A :class:`~harness.catalogue.subject.Scenario` (``harness.scenarios``) groups catalogue
subjects: each either correct (it must pass every schedule of the profile) or carrying a named
bug (the harness must find a schedule that breaks it, with one of the expected anomaly kinds).
:func:`run_matrix` explores every variant on every backend asked for, with the default faults
(the variant's ``scope``: the search is not told what the bug needs), and returns one
:class:`VariantResult` per cell; :func:`render_table` prints them as the table ``python -m
harness run --all`` shows. ``narrowed=True`` explores a buggy variant under only the faults it
``needs``: the secondary figure, how fast a search told the answer finds it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.catalogue.subject import Scenario, Subject
from harness.check import AnomalyKind, Guarantee, Status
from harness.engine import CounterexampleFound, default_seed, explore
from harness.errors import ConfigError
from harness.faults.kinds import Fault
from harness.search.profiles import Profile, profile
from harness.sim.simulator import processor_path
from harness.sim.world import BACKENDS, Backend

__all__ = [
    "VariantResult",
    "render_table",
    "run_matrix",
    "run_variant",
]


@dataclass(frozen=True, slots=True)
class VariantResult:
    """What exploring one variant on one backend found, over one or more seeds."""

    scenario: str
    variant: str
    backend: Backend
    correct: bool
    guarantee: Guarantee
    expected: frozenset[AnomalyKind]
    needs: frozenset[Fault]
    """The faults the bug is known to need (not told to the search unless ``narrowed``)."""
    statuses: tuple[Status, ...]
    """The outcome per seed: VALID when the search found nothing."""
    found: frozenset[AnomalyKind]
    """Anomaly kinds of the (shrunk) counterexamples, over all seeds."""
    detect_seconds: tuple[float, ...]
    """Per seed that failed: seconds to the first failing schedule (before shrinking)."""
    shrunk_steps: tuple[int, ...]
    """Per seed that failed: the shrunk schedule's length."""
    examples: int
    """Schedules simulated in all."""
    seconds: float
    replay: str | None = None
    """A replay command of the first counterexample (buggy variants)."""

    @property
    def ok(self) -> bool:
        """Correct variants passed every seed; buggy ones failed every seed with an
        expected anomaly kind."""
        if self.correct:
            return all(s is Status.VALID for s in self.statuses)
        return all(s is Status.INVALID for s in self.statuses) and bool(self.found & self.expected)

    @property
    def median_detect(self) -> float | None:
        return statistics.median(self.detect_seconds) if self.detect_seconds else None

    @property
    def median_shrunk(self) -> float | None:
        return statistics.median(self.shrunk_steps) if self.shrunk_steps else None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "variant": self.variant,
            "backend": self.backend,
            "correct": self.correct,
            "guarantee": self.guarantee.value,
            "expected": sorted(k.value for k in self.expected),
            "needs": sorted(f.value for f in self.needs),
            "statuses": [s.value for s in self.statuses],
            "found": sorted(k.value for k in self.found),
            "detect_seconds": [round(s, 4) for s in self.detect_seconds],
            "shrunk_steps": list(self.shrunk_steps),
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "replay": self.replay,
        }


SEED_STRIDE: Final = 7919
"""Seeds of repeated searches: the processor's default seed plus multiples of this."""


def run_variant(
    scenario: Scenario,
    variant: Subject,
    *,
    backend: Backend = "memory",
    budget: Profile | str | None = None,
    seeds: int | None = None,
    base_seed: int | None = None,
    failures_dir: str | None = None,
    narrowed: bool = False,
) -> VariantResult:
    """Explore one variant on one backend with ``seeds`` different seeds (default: the
    profile's); every search of a buggy variant should fail, every one of a correct one pass.

    The search uses the variant's ``scope`` (default faults), or with ``narrowed`` a buggy
    variant's ``needs``."""
    budget = profile(budget)
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    count = budget.detect_seeds if seeds is None else seeds
    if type(count) is not int or count < 1:
        raise ConfigError(f"seeds must be an int >= 1, got {count!r}")
    faults = variant.needs if narrowed and not variant.correct else variant.scope
    statuses: list[Status] = []
    found: set[AnomalyKind] = set()
    detect: list[float] = []
    shrunk: list[int] = []
    examples = 0
    replay: str | None = None
    started = time.perf_counter()
    if base_seed is None:
        base_seed = default_seed(processor_path(variant.processor))
    for i in range(count):
        seed = base_seed + i * SEED_STRIDE
        try:
            result = explore(
                variant.processor,
                guarantee=scenario.guarantee,
                topology=scenario.topology,
                backend=backend,
                max_examples=budget.max_examples,
                max_steps=budget.max_steps,
                faults=faults,
                seed=seed,
                failures_dir=failures_dir,
            )
        except CounterexampleFound as exc:
            failure = exc.failure
            statuses.append(failure.verdict.status)
            found.update(a.kind for a in failure.verdict.anomalies)
            detect.append(failure.first_failure_seconds)
            shrunk.append(len(failure.schedule))
            examples += failure.examples
            replay = replay or failure.replay_command
        else:
            statuses.append(Status.VALID)
            examples += result.examples
    return VariantResult(
        scenario=scenario.name,
        variant=variant.name,
        backend=backend,
        correct=variant.correct,
        guarantee=scenario.guarantee,
        expected=variant.expected,
        needs=variant.needs,
        statuses=tuple(statuses),
        found=frozenset(found),
        detect_seconds=tuple(detect),
        shrunk_steps=tuple(shrunk),
        examples=examples,
        seconds=time.perf_counter() - started,
        replay=replay,
    )


def run_matrix(
    scenarios: Iterable[Scenario],
    *,
    backends: Sequence[Backend] = ("memory",),
    budget: Profile | str | None = None,
    seeds: int | None = None,
    failures_dir: str | None = None,
    progress: Callable[[VariantResult, int, int], None] | None = None,
) -> list[VariantResult]:
    """Every variant of every scenario on every backend; ``progress(result, done, total)``
    is called after each cell."""
    cells = [(s, v, b) for s in scenarios for v in s.variants for b in backends]
    results = []
    for done, (scenario, variant, backend) in enumerate(cells, 1):
        result = run_variant(
            scenario,
            variant,
            backend=backend,
            budget=budget,
            seeds=seeds,
            failures_dir=failures_dir,
        )
        results.append(result)
        if progress is not None:
            progress(result, done, len(cells))
    return results


_HEADER: Final = (
    "scenario",
    "variant",
    "backend",
    "expected",
    "verdict",
    "anomaly found",
    "median detect s",
    "shrunk steps",
    "ok",
    "bug needs",
)


def _row(result: VariantResult) -> tuple[str, ...]:
    statuses = sorted({s.value.upper() for s in result.statuses})
    if result.correct:
        expected = "VALID"
    else:
        expected = "INVALID: " + " | ".join(sorted(k.value for k in result.expected))
    detect = result.median_detect
    shrunk = result.median_shrunk
    return (
        result.scenario,
        result.variant,
        result.backend,
        expected,
        "/".join(statuses),
        ", ".join(sorted(k.value for k in result.found)) or "-",
        "-" if detect is None else f"{detect:.3f}",
        "-" if shrunk is None else f"{shrunk:g}",
        "yes" if result.ok else "NO",
        ", ".join(sorted(f.value for f in result.needs)) or "-",
    )


def render_table(results: Sequence[VariantResult], *, markdown: bool = False) -> str:
    """The matrix as an aligned text table that fits 100 columns, a line per scenario above
    its variants (or a Markdown table with a column per figure)."""
    rows = [_HEADER, *(_row(r) for r in results)]
    if markdown:
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        # a cell's own "|" (several expected anomaly kinds) is escaped, as Markdown needs
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows[1:]]
        return "\n".join(lines)
    return _text_table(results, rows[1:])


_TEXT_HEADER: Final = ("variant", "backend", "expected", "found", "detect s", "steps", "ok")


def _found(expected: str, found: str, verdict: str) -> str:
    """The text table's "found" cell: the verdict when nothing was found, "same" when the
    anomalies found are exactly the ones expected (the line stays within 100 columns)."""
    if found == "-":
        return verdict
    return "same" if found in (expected, expected.replace(" | ", ", ")) else found


def _text_table(results: Sequence[VariantResult], rows: Sequence[tuple[str, ...]]) -> str:
    """Scenario lines, and under each its variants: expected and found anomalies ("same" when
    they agree; the verdict when none was found), the median seconds to detect, the shrunk
    steps, ok (what each bug needs is in the Markdown table, which has the room)."""
    cells = [
        (
            "  " + variant,
            backend,
            expected.removeprefix("INVALID: ").replace(" | ", "|"),
            _found(expected.removeprefix("INVALID: "), found, verdict).replace(", ", ","),
            detect,
            steps,
            ok,
        )
        for (_, variant, backend, expected, verdict, found, detect, steps, ok, _) in rows
    ]
    widths = [max(len(row[i]) for row in [_TEXT_HEADER, *cells]) for i in range(7)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()

    lines = [line(_TEXT_HEADER), line(["-" * w for w in widths])]
    scenario = None
    for result, row in zip(results, cells, strict=True):
        if result.scenario != scenario:
            scenario = result.scenario
            lines.append(f"{scenario} ({result.guarantee.value})")
        lines.append(line(row))
    return "\n".join(lines)
