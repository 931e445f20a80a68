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
    GUARANTEES,
    add_run_budget,
    exit_code,
    load_scenarios,
    parse_faults,
    print_output,
    run_budget,
)
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.catalogue.subject import Scenario
    from harness.cli.matrix import VariantResult
    from harness.search.profiles import Profile
    from harness.sim.budget import RunBudget
    from harness.sim.world import Backend

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
    parser.add_argument(
        "--profile",
        default=None,
        help="search budget: dev, ci or nightly (default: $HARNESS_PROFILE, else ci)",
    )
    parser.add_argument("--seed", type=int, default=None, help="the search seed")
    parser.add_argument("--examples", type=int, default=None, help="schedules per search")
    parser.add_argument(
        "--seeds", type=int, default=None, help="searches per buggy variant (the profile's)"
    )
    parser.add_argument(
        "--backend",
        choices=("memory", "leveldb", "both"),
        default="memory",
        help="where logs and offsets live (default memory; leveldb is real plyvel on disk)",
    )
    parser.add_argument(
        "--guarantee",
        choices=GUARANTEES,
        default=None,
        help="the guarantee your processor claims (required for MODULE:FUNCTION)",
    )
    parser.add_argument(
        "--topology",
        default=None,
        help="your processor's topology as JSON, e.g. '{\"partitions\": 2}' (default: 1 "
        "partition, 3 keys, one log sink 'out')",
    )
    parser.add_argument("--faults", default=None, help="comma-separated faults (default: all)")
    add_run_budget(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--markdown", type=Path, default=None, help="also write the matrix as a Markdown table"
    )
    parser.add_argument(
        "--failures-dir",
        default=".harness/failures",
        help="where failing schedules are saved for replay (default .harness/failures)",
    )
    parser.add_argument(
        "--max-problems",
        type=int,
        default=None,
        help="for a processor of yours: distinct problems to look for (default 5; 1: stop at "
        "the first failure)",
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
    from harness.search.profiles import profile

    budget = profile(args.profile)
    # the outputs are checked before the work: one line, not a traceback after the search
    writable(args.failures_dir, "--failures-dir", directory=True)
    if args.markdown is not None:
        writable(args.markdown, "--markdown")
    if args.examples is not None:
        if args.examples < 1:
            raise ConfigError(f"--examples must be >= 1, got {args.examples}")
        budget = dataclasses.replace(budget, max_examples=args.examples)
    scenarios = _scenarios(args)
    if scenarios is None:
        return _run_processor(
            args, budget.max_examples, budget.max_steps, run_budget(args, budget.run_budget)
        )
    return _run_matrix(args, budget, scenarios)


def _run_matrix(args: argparse.Namespace, budget: Profile, scenarios: list[Scenario]) -> int:
    from harness._output import write_atomic
    from harness._progress import watching
    from harness.cli.matrix import render_table, run_matrix
    from harness.report.live import LiveProgress, emit

    backends: tuple[Any, ...] = ("memory", "leveldb") if args.backend == "both" else (args.backend,)
    cells = sum(len(s.variants) for s in scenarios) * len(backends)
    live = LiveProgress("matrix", cells, json_output=args.json, units="cells")
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
    if args.json:
        status = "invalid" if bad else "valid"
        print_output("matrix", status, summary, cells=[r.to_json() for r in results], totals=totals)
    else:
        emit(render_table(results))
        emit("\n" + summary)
    return EXIT_INVALID if bad else EXIT_OK


def _run_processor(
    args: argparse.Namespace, max_examples: int, max_steps: int, budget: RunBudget
) -> int:
    from harness._progress import watching
    from harness.engine import CounterexampleFound, explore, load_processor
    from harness.report.live import LiveProgress, emit
    from harness.search.problems import DEFAULT_MAX_PROBLEMS
    from harness.sim.topology import Topology

    if len(args.targets) != 1:
        raise ConfigError("give exactly one processor as MODULE:FUNCTION")
    if args.guarantee is None:
        raise ConfigError(
            f"--guarantee is required to run your processor {shown(args.targets[0])}: "
            "at-least-once or exactly-once"
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # run from a project: its modules are importable
    processor = load_processor(args.targets[0])
    topology = Topology()
    if args.topology is not None:
        from harness._json import parse_json

        fix = """give an object such as '{"partitions": 2}'"""
        data = parse_json(args.topology, what="--topology", fix=fix)
        if not isinstance(data, dict):
            raise ConfigError(
                f"--topology must be a JSON object: {fix}, got {shown(args.topology)}"
            )
        try:
            topology = Topology.from_json(data, partial=True)
        except ConfigError as exc:
            raise ConfigError(f"--topology: {exc}") from None
    backend: Backend = "leveldb" if args.backend == "leveldb" else "memory"
    name = args.targets[0].rpartition(":")[2]  # the function: the line stays short
    live = LiveProgress(f"explore {name}", max_examples, json_output=args.json)
    try:
        with live, watching(live.tick):
            result = explore(
                processor,
                guarantee=args.guarantee,
                topology=topology,
                backend=backend,
                max_examples=max_examples,
                max_steps=max_steps,
                faults=parse_faults(args.faults),
                seed=args.seed,
                failures_dir=args.failures_dir,
                budget=budget,
                max_problems=args.max_problems or DEFAULT_MAX_PROBLEMS,
            )
    except CounterexampleFound as exc:
        if args.json:
            _print_failure(exc)
        else:
            emit(str(exc))
        return exit_code(exc.failure.verdict)
    message = result.summary()
    if args.json:
        print_output(
            "run",
            "valid",
            message,
            guarantee=result.guarantee.value,
            processor=result.processor,
            backend=backend,
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
