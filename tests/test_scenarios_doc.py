"""docs/scenarios.md's matrix table is the one ``python -m harness run --all --markdown``
writes: same header, same cells (every scenario variant, in catalogue order), and in each row
the columns the catalogue decides (scenario, variant, backend, expected, bug needs) are what
:func:`harness.cli.matrix.render_table` renders for that variant today. The measured
columns (verdict, anomaly found, detect seconds, shrunk steps, ok) take a ci search to
reproduce; of them the test checks what must hold whatever the timing: every row is ``ok``,
its verdict is the expected one, and a buggy row found one of its expected anomaly kinds.
"""

from __future__ import annotations

from pathlib import Path

from harness.catalogue.seeds import SCENARIOS
from harness.check import Status
from harness.cli.matrix import VariantResult, render_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"
SECTION = "## The matrix"
CATALOGUE_COLUMNS = ("scenario", "variant", "backend", "expected", "bug needs")


def _split(line: str, width: int) -> list[str]:
    """A row's ``width`` cells (a cell's own ``|``, joining several expected anomaly kinds,
    is escaped as ``\\|``)."""
    cells = [cell.strip().replace("\\|", "|") for cell in line.strip().strip("|").split(" | ")]
    assert len(cells) == width, line
    return cells


def _doc_table() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text, f"{DOC.name} has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    end = next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))
    table = lines[:end]
    assert len(table) > 2, "the matrix section has no table"
    header = [cell.strip() for cell in table[0].strip().strip("|").split(" | ")]
    return [header, *(_split(line, len(header)) for line in table[2:])]


def _unmeasured() -> list[list[str]]:
    """The table render_table writes for every variant before any search ran."""
    results = [
        VariantResult(
            scenario=scenario.name,
            variant=variant.name,
            backend="memory",
            correct=variant.correct,
            guarantee=scenario.guarantee,
            expected=variant.expected,
            needs=variant.needs,
            statuses=(),
            found=frozenset(),
            detect_seconds=(),
            shrunk_steps=(),
            examples=0,
            seconds=0.0,
        )
        for scenario in SCENARIOS.values()
        for variant in scenario.variants
    ]
    lines = render_table(results, markdown=True).splitlines()
    header = [cell.strip() for cell in lines[0].strip().strip("|").split(" | ")]
    return [header, *(_split(line, len(header)) for line in lines[2:])]


def test_the_doc_matrix_has_the_generated_header_and_cells() -> None:
    doc, generated = _doc_table(), _unmeasured()
    assert doc[0] == generated[0], "regenerate: python -m harness run --all --markdown FILE"
    keep = [generated[0].index(c) for c in CATALOGUE_COLUMNS]
    assert [[row[i] for i in keep] for row in doc[1:]] == [
        [row[i] for i in keep] for row in generated[1:]
    ]


def test_every_doc_matrix_row_is_as_expected() -> None:
    doc = _doc_table()
    column = {name: i for i, name in enumerate(doc[0])}
    for row in doc[1:]:
        cell = {name: row[i] for name, i in column.items()}
        assert cell["ok"] == "yes", row
        if cell["expected"] == "VALID":
            assert cell["verdict"] == Status.VALID.value.upper(), row
            assert cell["anomaly found"] == "-", row
        else:
            expected = set(cell["expected"].removeprefix("INVALID: ").split(" | "))
            assert cell["verdict"] == Status.INVALID.value.upper(), row
            assert expected & set(cell["anomaly found"].split(", ")), row
            assert float(cell["median detect s"]) >= 0 and int(cell["shrunk steps"]) >= 1, row
