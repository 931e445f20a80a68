"""``python -m harness run``: the scenario matrix, or the user's own processor, explored.

With ``--all`` or ``SCENARIO[:VARIANT]`` names: explore every variant and print the matrix
(exit 1 if a buggy variant is not caught or a correct one fails). With ``MODULE:FUNCTION``
and ``--guarantee``: explore that processor (exit 0 VALID, 1 INVALID, 2 UNKNOWN).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from harness._shown import shown
from harness._usage import did_you_mean
from harness.cli._common import (
    EXIT_INVALID,
    EXIT_OK,
    add_settings,
    exit_code,
    load_scenarios,
    print_output,
    settings_from,
    write_reports,
)
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.catalogue.subject import Scenario
    from harness.cli.matrix import VariantResult
    from harness.search.profiles import Profile
    from harness.settings import Settings
    from harness.sim.topology import Topology

__all__ = ["DESCRIPTION", "add_arguments", "main"]

DESCRIPTION: Final = (
    "With --all or SCENARIO[:VARIANT] names: explore every variant and print the "
    "matrix (exit 1 if a buggy variant is not caught or a correct one fails). With "
    "MODULE:FUNCTION and --guarantee: explore your processor (exit 0 VALID, 1 INVALID, "
    "2 UNKNOWN)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run``'s targets and options."""
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="a scenario name, SCENARIO:VARIANT, or your processor as MODULE:FUNCTION",
    )
    parser.add_argument("--all", action="store_true", help="every scenario and variant")
    add_settings(
        parser,
        ("guarantee", "profile", "max_examples", "max_steps", "seed", "faults"),
        help={"guarantee": "for MODULE:FUNCTION (a scenario names its own)"},
        aliases={"max_examples": ("--examples",)},
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="searches per buggy variant (the profile's)"
    )
    add_settings(
        parser,
        ("backend", "run_calls", "run_seconds"),
        help={"backend": "both: each scenario on both (the matrix only)"},
        extra_choices={"backend": ("both",)},
    )
    parser.add_argument(
        "--topology",
        default=None,
        help="your processor's topology as JSON, e.g. '{\"partitions\": 2}' (default: 1 "
        "partition, 3 keys, one log sink 'out')",
    )
    add_settings(parser, ("json",), help={"json": "for the matrix, instead of a table"})
    parser.add_argument(
        "--markdown", type=Path, default=None, help="also write the matrix as a Markdown table"
    )
    parser.add_argument(
        "--failures-dir",
        default=".harness/failures",
        help="where failing schedules are saved for replay (default .harness/failures)",
    )
    add_settings(
        parser, ("max_problems", "report_dir"), help={"max_problems": "your processor only"}
    )


def _scenarios(args: argparse.Namespace) -> list[Scenario] | None:
    """The scenarios to run, or None when the targets name a user processor."""
    scenarios = load_scenarios()
    if args.all:
        if args.targets:
            raise ConfigError("give either --all or target names, not both")
        return list(scenarios.values())
    if not args.targets:
        raise ConfigError(
            "nothing to run: give --all, scenario names (see `python -m harness list`) or "
            "your processor as MODULE:FUNCTION with --guarantee"
        )
    chosen: list[Scenario] = []
    for target in args.targets:
        name, _, variant = target.partition(":")
        if name not in scenarios:
            if ":" in target and len(args.targets) == 1:
                return None  # MODULE:FUNCTION
            raise ConfigError(_unknown_scenario(target, list(scenarios)))
        scenario = scenarios[name]
        if variant:
            scenario = dataclasses.replace(scenario, variants=(scenario.variant(variant),))
        chosen.append(scenario)
    return chosen


def _unknown_scenario(target: str, names: list[str]) -> str:
    """What to say of a target that names no scenario: the scenario meant, or, for what
    looks like a dotted path to a function, the ``MODULE:FUNCTION`` form a processor takes."""
    name = target.partition(":")[0]
    module, dot, function = target.rpartition(".")
    if function == "py" and module and ":" not in target:  # a file: batcher.py
        module, function = module.replace("/", ".").removeprefix("."), "FUNCTION"
    if dot and module and function.isidentifier() and ":" not in target:
        return (
            f"unknown scenario {shown(target)}: to run your processor, give it as "
            f"MODULE:FUNCTION with --guarantee, e.g. {shown(f'{module}:{function}')}; the "
            "scenarios are listed by `python -m harness list`"
        )
    return (
        f"unknown scenario {shown(name)}{did_you_mean(name, names)}; the scenarios are "
        f"{', '.join(names)} (or give your processor as MODULE:FUNCTION with --guarantee)"
    )


def main(args: argparse.Namespace) -> int:
    """Run the matrix or the user's processor; returns the exit code."""
    from harness._output import writable

    both = args.backend == "both"
    settings = settings_from(args, skip=("backend",) if both else ())
    # the outputs are checked before the work: one line, not a traceback after the search
    writable(args.failures_dir, "--failures-dir", directory=True)
    if args.markdown is not None:
        writable(args.markdown, "--markdown")
    if settings.report_dir is not None:
        writable(settings.report_dir, "--report-dir", directory=True)
    scenarios = _scenarios(args)
    if scenarios is None:
        if both:
            raise ConfigError("--backend both runs scenarios; run your processor on one backend")
        return _run_processor(args, settings)
    budget = dataclasses.replace(
        settings.profile,
        max_examples=settings.max_examples,
        max_steps=settings.max_steps,
        run_budget=settings.run_budget,
    )
    backends: tuple[Any, ...] = ("memory", "leveldb") if both else (settings.backend,)
    return _run_matrix(args, budget, scenarios, backends, settings.json)


def _run_matrix(
    args: argparse.Namespace,
    budget: Profile,
    scenarios: list[Scenario],
    backends: tuple[Any, ...],
    json_output: bool,
) -> int:
    from harness._output import write_atomic
    from harness._progress import watching
    from harness.cli.matrix import render_table, run_matrix
    from harness.report.live import LiveProgress, emit

    cells = sum(len(s.variants) for s in scenarios) * len(backends)
    live = LiveProgress("matrix", cells, json_output=json_output, units="cells")
    missed: list[str] = []

    def progress(result: VariantResult, done: int, total: int) -> None:
        mark = "ok " if result.ok else "NOT AS EXPECTED"
        line = (
            f"[{done}/{total}] {result.scenario} {result.variant} ({result.backend}): {mark} "
            f"{result.seconds:.1f} s"
        )
        live.log(line)
        if not result.ok:
            missed.append(f"{result.scenario}:{result.variant}")
        live.step(f"matrix, {len(missed)} not as expected", completed=done, detail="")

    live.log(
        f"profile {budget.name}: {budget.max_examples} schedules of up to {budget.max_steps} "
        f"steps per search, {args.seeds or budget.detect_seeds} search(es) per variant"
    )
    with live, watching(live.tick):
        results = run_matrix(
            scenarios,
            backends=backends,
            budget=budget,
            seeds=args.seeds,
            failures_dir=args.failures_dir,
            progress=progress,
        )
    if args.markdown is not None:
        write_atomic(args.markdown, render_table(results, markdown=True) + "\n", "--markdown")
    bad = [r for r in results if not r.ok]
    totals = {
        "caught": sum(1 for r in results if not r.correct and r.ok),
        "buggy": sum(1 for r in results if not r.correct),
        "passed": sum(1 for r in results if r.correct and r.ok),
        "correct": sum(1 for r in results if r.correct),
    }
    summary = (
        f"{totals['caught']}/{totals['buggy']} buggy variants caught, "
        f"{totals['passed']}/{totals['correct']} correct passed"
    )
    if bad:
        names = ", ".join(f"{r.scenario}:{r.variant} ({r.backend})" for r in bad)
        summary += f"; NOT AS EXPECTED: {names}"
    if json_output:
        status = "invalid" if bad else "valid"
        print_output("matrix", status, summary, cells=[r.to_json() for r in results], totals=totals)
    else:
        emit(render_table(results))
        emit("\n" + summary)
    return EXIT_INVALID if bad else EXIT_OK


def _run_processor(args: argparse.Namespace, settings: Settings) -> int:
    from harness.engine import CounterexampleFound, explore, load_processor
    from harness.engine.results import COMMAND_LINE_REPEAT
    from harness.report.live import emit, searching

    if len(args.targets) != 1:
        raise ConfigError("give exactly one processor as MODULE:FUNCTION")
    settings.require_guarantee("--guarantee")  # the claim your processor makes
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # run from a project: its modules are importable
    processor = load_processor(args.targets[0])
    topology = _topology(args.topology)
    name = args.targets[0].rpartition(":")[2]  # the function: the line stays short
    try:
        with searching(name, settings.max_examples, json_output=settings.json):
            result = explore(
                processor, topology=topology, failures_dir=args.failures_dir, settings=settings
            )
    except CounterexampleFound as exc:
        write_reports(settings.report_dir, exc.failures, name)
        if settings.json:
            _print_failure(exc)
        else:
            emit(exc.report(repeat=COMMAND_LINE_REPEAT))
        return exit_code(exc.failure.verdict)
    message = result.summary()
    if settings.json:
        print_output(
            "run",
            "valid",
            message,
            guarantee=result.guarantee.value,
            processor=result.processor,
            backend=settings.backend,
            seed=result.seed,
            examples=result.examples,
            verdict=None,
            schedule=None,
            replay_command=None,
            coverage=result.coverage.to_json(),
        )
    else:
        emit(message)
    return EXIT_OK


def _topology(text: str | None) -> Topology:
    from harness.sim.topology import Topology

    if text is None:
        return Topology()
    from harness._json import parse_json

    fix = """give an object such as '{"partitions": 2}'"""
    data = parse_json(text, what="--topology", fix=fix)
    if not isinstance(data, dict):
        raise ConfigError(f"--topology must be a JSON object: {fix}, got {shown(text)}")
    try:
        return Topology.from_json(data, partial=True)
    except ConfigError as exc:
        raise ConfigError(f"--topology: {exc}") from None


def _print_failure(exc: Any) -> None:
    failure = exc.failure
    print_output(
        "run",
        failure.verdict.status,
        str(exc).splitlines()[0],
        guarantee=failure.guarantee.value,
        processor=failure.processor,
        backend=failure.backend,
        seed=failure.seed,
        examples=failure.examples,
        verdict=failure.verdict.to_json(),
        schedule=failure.schedule.to_json(),
        replay_command=failure.replay_command,
        coverage=failure.coverage.to_json(),
    )
