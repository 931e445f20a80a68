"""The mutation matrix, fast profile: every correct scenario variant passes, every buggy one
is caught with its expected anomaly kind, on the memory and on the LevelDB backend.

The search runs on the memory backend (deterministic seeds): the ``dev`` profile for correct
variants, up to the ``ci`` budget for buggy ones (a search stops at its first failure). On
LevelDB (real plyvel on disk) each correct variant passes a smaller search of its own, and
each buggy variant's shrunk counterexample fails it there with the same anomaly kinds while
the scenario's correct variants pass that very schedule. ``python -m harness run --all
--profile nightly --backend both`` is the long profile (docs/scenarios.md).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalogue import Scenario, Subject
from harness.catalogue.seeds import SCENARIOS as CATALOGUE
from harness.catalogue.streams import STREAM_SUBJECTS
from harness.check import Status
from harness.cli.matrix import render_table, run_variant
from harness.engine import CounterexampleFound, explore, run_once
from harness.errors import ConfigError
from harness.faults import Fault
from harness.search.profiles import PROFILES

# the Kafka client scenarios (issue 14) run unchanged client code: tests/test_kafka.py
SCENARIOS = {n: s for n, s in CATALOGUE.items() if not n.startswith("kafka-client-")}

ROOT = Path(__file__).resolve().parent.parent
SEEDS = Path("/work/shared/seeds")

CELLS = [(s.name, v.name) for s in SCENARIOS.values() for v in s.variants]
CORRECT = [(s, v) for s, v in CELLS if SCENARIOS[s].variant(v).correct]
BUGGY = [(s, v) for s, v in CELLS if not SCENARIOS[s].variant(v).correct]
LEVELDB_EXAMPLES = 25


def test_every_seed_situation_is_a_scenario() -> None:
    names = set(SCENARIOS)
    assert names == {
        "dlog-reader-offsets",
        "dlog-exactly-once-transformer",
        "gearpump-persistent-count",
        "alpakka-multiple-messages",
        "alpakka-batches",
        "alpakka-non-sequential",
        "alpakka-group-by",
        "alpakka-conditional",
        "alpakka-excluding-messages",
        "kafka-streams-exactly-once",
    }
    for scenario in SCENARIOS.values():
        assert any(v.correct for v in scenario.variants), scenario.name
        assert any(not v.correct for v in scenario.variants), scenario.name
        module = sys.modules[scenario.variants[0].processor.__module__]
        assert module.__doc__ and scenario.seed in module.__doc__, scenario.name
        for variant in scenario.variants:
            assert variant.story, (scenario.name, variant.name)
    assert len(CORRECT) == 11 and len(BUGGY) == 13


@pytest.mark.parametrize(("scenario", "variant"), CORRECT)
def test_correct_variant_passes_the_dev_profile(scenario: str, variant: str) -> None:
    result = run_variant(SCENARIOS[scenario], SCENARIOS[scenario].variant(variant), budget="dev")
    assert result.statuses == (Status.VALID,), result.replay
    assert result.examples == PROFILES["dev"].max_examples
    assert result.ok


@pytest.mark.parametrize(("scenario", "variant"), CORRECT)
def test_correct_variant_passes_on_leveldb(scenario: str, variant: str) -> None:
    s = SCENARIOS[scenario]
    result = explore(
        s.variant(variant).processor,
        guarantee=s.guarantee,
        topology=s.topology,
        backend="leveldb",
        faults=s.variant(variant).scope,
        max_examples=LEVELDB_EXAMPLES,
        failures_dir=None,
    )
    assert result.examples == LEVELDB_EXAMPLES


@pytest.mark.parametrize(("scenario", "variant"), BUGGY)
def test_buggy_variant_is_caught_on_memory_and_leveldb(scenario: str, variant: str) -> None:
    # a search stops at its first failure, so the ci budget costs only what finding needs
    # (and keeps the verdict independent of the Hypothesis version's luck with dev's budget)
    s = SCENARIOS[scenario]
    v = s.variant(variant)
    with pytest.raises(CounterexampleFound) as caught:
        explore(
            v.processor,
            guarantee=s.guarantee,
            topology=s.topology,
            faults=v.needs,
            max_examples=PROFILES["ci"].max_examples,
            max_steps=PROFILES["ci"].max_steps,
            failures_dir=None,
        )
    failure = caught.value.failure
    kinds = {a.kind for a in failure.verdict.anomalies}
    assert failure.verdict.status is Status.INVALID
    assert kinds & v.expected, (kinds, v.expected)
    _, on_leveldb = run_once(
        v.processor, failure.schedule, s.guarantee, topology=s.topology, backend="leveldb"
    )
    assert on_leveldb.status is Status.INVALID
    assert {a.kind for a in on_leveldb.anomalies} == kinds
    assert on_leveldb == failure.verdict
    for twin in s.variants:
        if twin.correct:
            _, verdict = run_once(
                twin.processor, failure.schedule, s.guarantee, topology=s.topology
            )
            assert verdict.status is Status.VALID, (twin.name, verdict.summary())


def test_a_buggy_variant_that_is_not_caught_is_reported_not_ok() -> None:
    s = SCENARIOS["alpakka-batches"]
    v = s.variant("commit-formed-batch")
    # without crashes the bug cannot show: the matrix must say so rather than pass
    blind = dataclasses.replace(v, needs=frozenset({Fault.TICK}))
    result = run_variant(s, blind, budget="dev", seeds=1, narrowed=True)
    assert result.statuses == (Status.VALID,)
    assert not result.ok
    assert "NO" in render_table([result]).splitlines()[-1]


def test_a_correct_variant_that_fails_is_reported_not_ok() -> None:
    s = SCENARIOS["alpakka-batches"]
    buggy = s.variant("commit-formed-batch")
    mislabelled = Subject("claims-correct", buggy.processor, buggy.guarantee)
    result = run_variant(s, mislabelled, budget="dev", seeds=1)
    assert result.statuses == (Status.INVALID,)
    assert not result.ok


def test_scenario_rejects_bad_definitions() -> None:
    v = SCENARIOS["alpakka-batches"].variants[0]
    with pytest.raises(ConfigError, match="duplicate variant names"):
        Scenario("x", "x", "seed.txt", (v, v))
    with pytest.raises(ConfigError, match="has no variant 'nope'"):
        SCENARIOS["alpakka-batches"].variant("nope")


# The project's source documents (kept outside the repository, in ../shared/seeds/).
SEED_DOCUMENTS = {
    "alpakka-kafka-at-least-once-pitfalls.txt",
    "dlog-at-least-once-reader-offsets.txt",
    "dlog-core-library-api.txt",
    "gearpump-at-least-once-and-exactly-once.txt",
    "kafka-streams-exactly-once.txt",
}


def test_seed_files_are_cited() -> None:
    # every scenario cites a source document, or the Kafka clients' own documentation
    for scenario in SCENARIOS.values():
        assert scenario.seed in SEED_DOCUMENTS | {"kafka-client-documentation"}, scenario.seed
    if SEEDS.is_dir():  # where the documents are at hand, the list above is theirs
        assert {p.name for p in SEEDS.iterdir()} >= SEED_DOCUMENTS


def test_run_command_prints_the_matrix_and_exit_codes(tmp_path: Path) -> None:
    md = tmp_path / "matrix.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "alpakka-batches",
            "kafka-streams-exactly-once:without-fencing",
            "--profile",
            "dev",
            "--markdown",
            str(md),
            "--failures-dir",
            str(tmp_path / "failures"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == [
        "variant",
        "backend",
        "expected",
        "found",
        "detect",
        "s",
        "steps",
        "ok",
    ]
    assert "alpakka-batches (at-least-once)" in lines
    assert any(line.split()[:2] == ["commit-formed-batch", "memory"] for line in lines)
    assert lines[-1] == "2/2 buggy variants caught, 1/1 correct passed"
    assert "[3/3] kafka-streams-exactly-once without-fencing (memory): ok" in proc.stderr
    assert md.read_text().startswith("| scenario | variant |")
    assert len(list((tmp_path / "failures").glob("*.json"))) == 2

    listed = subprocess.run(
        [sys.executable, "-m", "harness", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(listed.stdout)["scenarios"]  # the envelope of every --json
    assert [s["scenario"] for s in data] == list(CATALOGUE)
    streams = json.loads(listed.stdout)["streams"]  # then the streaming variants, by target
    assert [s["target"] for s in streams] == [s.target for s in STREAM_SUBJECTS]
    assert {s["target"]: s["expected"] for s in streams}["variant:foreach-batch-append"] == {
        "exactly-once": ["duplicate"]
    }
    shown = subprocess.run(
        [sys.executable, "-m", "harness", "list"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert any(line.split() == ["variant:parquet", "holds", "exactly-once"] for line in shown)

    unknown = subprocess.run(
        [sys.executable, "-m", "harness", "run", "no-such-scenario"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: unknown scenario 'no-such-scenario'")
    assert "Traceback" not in unknown.stderr


def test_run_command_explores_a_user_processor(tmp_path: Path) -> None:
    (tmp_path / "myproc.py").write_text(
        "def commit_first(ctx):\n"
        "    out = ctx.output('out')\n"
        "    for record in ctx.read('in-0', ctx.offsets.get('in-0')):\n"
        "        ctx.offsets.put('in-0', record.next)\n"
        "        out.emit(record)\n"
        "        out.commit()\n"
    )
    base = [sys.executable, "-m", "harness", "run", "myproc:commit_first"]
    missing = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert missing.returncode == 2
    assert "--guarantee is required" in missing.stderr
    found = subprocess.run(
        [*base, "--guarantee", "at-least-once", "--profile", "dev", "--faults", "crash"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert found.returncode == 1, found.stderr
    assert found.stdout.startswith("at-least-once does NOT hold for myproc:commit_first")
    assert "replay: python -m harness replay .harness/failures/commit_first-" in found.stdout


def test_scenario_modules_use_only_the_public_api_and_have_no_main_guard() -> None:
    public = {"harness", "harness.sim", "harness.faults", "harness.catalogue", "harness.kafka"}
    for path in sorted((ROOT / "scenarios").glob("*.py")):
        tree = ast.parse(path.read_text())
        guards = [
            node
            for node in tree.body
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        assert guards == [], f"{path.name} has a __main__ guard"
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        } | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        internal = {m for m in imported if m.split(".")[0] == "harness" and m not in public}
        assert internal == set(), f"{path.name} imports {sorted(internal)}"


def test_scenarios_import_under_the_harness_namespace() -> None:
    import harness.scenarios.alpakka_batches as module

    assert module.SCENARIO is SCENARIOS["alpakka-batches"]
    import harness.scenarios

    # from a source checkout, the repository's scenarios/ folder; from a wheel, the package
    # the folder was installed as (never a top-level `scenarios` package)
    where = Path(module.__file__ or "").parent
    assert where in (ROOT / "scenarios", Path(harness.scenarios.__file__ or "").parent)
    assert where.name == "scenarios" and (where / "alpakka_batches.py").is_file()
    assert "scenarios" not in sys.modules
