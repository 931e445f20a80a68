"""The four built-in streaming variants through the engine's door: :func:`explore_variant`.

A :class:`VariantSystem` is a built-in :class:`~harness.spark.streaming.runner.Variant` of a
streaming query (the dlog source, the runner's own query) as the engine's system under test
(:mod:`harness.engine.system`): each run is :func:`~harness.spark.streaming.runner.run_stream`,
its plan the unchanged job's (:func:`~harness.spark.streaming.jobsearch.planned_schedules`)
narrowed to what the runner takes (crashes before and after the write, no task failures
nor resends), its drawn phase, shrinking and coverage the job's
(:class:`~harness.spark.streaming.jobsearch.StreamSystem`). :func:`explore_variant` searches
one with :func:`harness.engine.explorer.explore_system` and returns or raises what
``explore`` does (:class:`~harness.engine.results.Exploration`,
:class:`~harness.engine.results.CounterexampleFound`); a counterexample's replay file is a
spark-job replay file naming the variant and its config, which ``python -m harness replay``
and ``report`` run again (:func:`replay_variant`). No pyspark on import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, final

from harness.check.verdict import Guarantee, Verdict
from harness.engine.system import SystemRun
from harness.errors import ConfigError
from harness.faults.streams import CrashHow, CrashPoint, StreamSchedule
from harness.spark.streaming.jobsearch import (
    JobFailure,
    JobReplay,
    StreamSystem,
    planned_schedules,
)
from harness.spark.streaming.runner import StreamConfig, StreamResult, Variant, run_stream

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from harness.engine.results import Exploration

__all__ = ["VARIANT_POINTS", "VariantSystem", "explore_variant", "replay_variant"]

VARIANT_POINTS: Final = (CrashPoint.AFTER_WRITE, CrashPoint.BEFORE_WRITE)
"""The crash points the built-in variants take (after-commit is for unchanged jobs)."""


@final
class VariantSystem(StreamSystem):
    """A built-in variant as the engine's system under test (module docstring); named
    ``variant:<name>``."""

    draws: Mapping[str, Any] = MappingProxyType({"points": VARIANT_POINTS, "tasks": False})

    def __init__(
        self,
        variant: Variant,
        *,
        workdir: str | Path,
        config: StreamConfig | None = None,
        spark: SparkSession | None = None,
        sigkill: bool = True,
        plan: Sequence[StreamSchedule] | None = None,
        shrink_runs: int = 8,
        on_run: Callable[[int, StreamResult], None] | None = None,
    ) -> None:
        if not isinstance(variant, Variant):
            raise ConfigError(
                f"variant must be one of {[v.value for v in Variant]}, got {variant!r:.80}"
            )
        config = config or StreamConfig()
        if plan is None:
            hows = (CrashHow.RAISE, CrashHow.SIGKILL) if sigkill else (CrashHow.RAISE,)
            plan = planned_schedules(
                logs=len(config.logs), hows=hows, points=VARIANT_POINTS, tasks=False
            )
        super().__init__(
            plan,
            logs=len(config.logs),
            workdir=workdir,
            spark=spark,
            sigkill=sigkill,
            shrink_runs=shrink_runs,
            on_run=on_run,
        )
        self.variant, self.config = variant, config

    @property
    def name(self) -> str:
        return f"variant:{self.variant.value}"

    def play(
        self, schedule: StreamSchedule, where: Path, run_id: str
    ) -> tuple[StreamResult, SystemRun]:
        result = run_stream(
            self.variant,
            schedule,
            workdir=where,
            config=self.config,
            spark=self.spark,
            run_id=run_id,
        )
        fired = tuple(f"{c.point.value}/{c.how.value}" for c in result.crashes)
        return result, SystemRun(result.history, fired)

    def replay(
        self, guarantee: Guarantee, schedule: StreamSchedule, seed: int, verdict: Verdict
    ) -> JobReplay:
        summary = verdict.summary().splitlines()[0]
        config = dataclasses.asdict(self.config)
        config["logs"] = list(self.config.logs)
        spec = {"variant": self.variant.value, "config": config}
        return JobReplay(self.name, guarantee, schedule, summary, None, seed, variant=spec)


def explore_variant(
    variant: Variant | str,
    guarantee: Guarantee | str | None = None,
    *,
    workdir: str | Path,
    max_examples: int = 12,
    seed: int = 0,
    sigkill: bool = True,
    config: StreamConfig | None = None,
    plan: Sequence[StreamSchedule] | None = None,
    failures_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    max_problems: int = 1,
) -> Exploration:
    """Search a built-in variant with the engine (default ``guarantee``: the one the variant
    claims, :attr:`Variant.guarantee`): its planned schedules first, then drawn ones, up to
    ``max_examples``; the engine's :class:`~harness.engine.results.Exploration` when it
    holds, else :class:`~harness.engine.results.CounterexampleFound` with up to
    ``max_problems`` problems (their replay files in ``failures_dir``, when given). The
    ``spark-job variant:NAME`` door calls this (the catalogue's
    :data:`~harness.catalogue.streams.STREAM_SUBJECTS`)."""
    from harness.engine.explorer import explore_system

    try:
        chosen = Variant(variant)
    except ValueError:
        raise ConfigError(
            f"variant must be one of {[v.value for v in Variant]}, got {variant!r:.80}"
        ) from None
    system = VariantSystem(chosen, workdir=workdir, config=config, spark=spark, sigkill=sigkill)
    if plan is not None:
        system.planned = tuple(plan)
    return explore_system(
        system,
        chosen.guarantee if guarantee is None else guarantee,
        max_examples=max_examples,
        planned=max_examples,
        seed=seed,
        failures_dir=failures_dir,
        max_problems=max_problems,
    )


def replay_variant(
    replay: JobReplay,
    *,
    workdir: str | Path,
    spark: SparkSession | None = None,
    replay_command: str | None = None,
) -> JobFailure:
    """Run a built-in variant's saved schedule again (the file names the variant and its
    config) and judge it."""
    from harness.check.local import check

    spec = replay.variant or {}
    try:
        variant = Variant(spec.get("variant"))
        config = StreamConfig(**{**spec.get("config", {}), "logs": tuple(spec["config"]["logs"])})
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"the replay file's variant is not one this harness runs: {exc}"
        ) from None
    result = run_stream(
        variant, replay.schedule, workdir=workdir, config=config, spark=spark, run_id="replay"
    )
    return JobFailure(
        verdict=check(result.history, replay.guarantee),
        history=result.history,
        schedule=replay.schedule,
        processor=replay.app,
        replay_command=replay_command,
        seed=replay.seed,
    )
