"""The Spark checker's parts that need pyarrow only (no Spark, no JVM).

The history generator writes the same history for the same arguments: the events of two
generated histories (every planted kind; one partition, one key, tiny blocks, an unordered
sink) are pinned by digest, so a refactor of the generator that moves, drops or reorders one
event fails here. Without pyarrow, the generator and the reader of stored runs name the pip
command."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from harness.check import AnomalyKind, Guarantee, check
from harness.errors import MissingDependency
from harness.history import read_history
from harness.spark.check.generate import Plan, generate_history
from harness.spark.source import discover_runs

EVERY_KIND = Plan(2, 2, 3, 3, 1, 1, 1, 1, 1)
"""Lost 2, duplicated 2, unexpected 3, miscounted 3, and one each reordered, skipped, ahead,
regressed and aborted (:class:`Plan`'s fields in order)."""


def events_digest(path: str) -> str:
    """sha256 of the header and every event row of the history at ``path``, as JSON."""
    history = read_history(path)
    rows = [event.to_row() for event in history]
    text = json.dumps([history.meta.to_json(), rows], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("arguments", "events", "digest"),
    [
        (
            {"records": 2000, "partitions": 3, "keys": 7, "plan": EVERY_KIND},
            10055,
            "6984e254bcbc0a921cb1b67cea7b1551ed96405d6ef64b91f52f73638c4c7c3b",
        ),
        (
            {
                "records": 600,
                "partitions": 1,
                "keys": 1,
                "block": 5,
                "ordered": False,
                "plan": Plan(skipped=1, aborted=2, lost=1),
            },
            3127,
            "0a3e63c305c698ec1ebb94f4ebc183ed3fb92c44d4c2603d625c93aa4fd0b32f",
        ),
    ],
)
# the digests changed twice, with the header's schema version (2 -> 3 -> 4, issue 31):
# the events are the same


def test_the_same_arguments_generate_the_same_history(
    tmp_path: Path, arguments: dict[str, Any], events: int, digest: str
) -> None:
    first = generate_history(tmp_path / "a.parquet", **arguments)
    second = generate_history(tmp_path / "b.parquet", **arguments)
    assert (first.events, second.events) == (events, events)
    assert events_digest(first.path) == events_digest(second.path) == digest


def test_without_pyarrow_the_generator_and_the_run_reader_name_the_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("pyarrow", "pyarrow.parquet", "pyarrow.fs", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependency, match=r"^generating histories needs the package "):
        generate_history(tmp_path / "h.parquet", records=64, partitions=2)
    with pytest.raises(MissingDependency) as info:
        discover_runs(tmp_path)
    assert str(info.value).startswith(
        "the Spark checker reads history headers with the package pyarrow, which cannot be "
        "imported ("
    )
    assert str(info.value).endswith("install it with: pip install 'stream-harness[spark]'")
    assert not (tmp_path / "h.parquet").exists()


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_rewound_reader_is_planted_as_nonmonotonic_polls_and_nothing_else(
    tmp_path: Path, partitions: int
) -> None:
    """The reader goes back to the planted record and reads the rest of its partition's
    block again, so each plant is exactly one backward read: tolerated under
    at-least-once, failing exactly-once, and no skip after it (issue 31)."""
    generated = generate_history(
        tmp_path / "h.parquet",
        records=3000,
        partitions=partitions,
        keys=5,
        plan=Plan(rewound=2, skipped=1),
    )
    history = read_history(generated.path)
    for guarantee in Guarantee:
        verdict = check(history, guarantee)
        failing = {a.kind.value: a.count for a in verdict.anomalies}
        tolerated = {a.kind.value: a.count for a in verdict.tolerated}
        assert (verdict.status, failing, tolerated) == generated.expected(guarantee)
    assert generated.occurrences[AnomalyKind.NONMONOTONIC_POLL] == 2
    assert generated.expected(Guarantee.AT_LEAST_ONCE)[2] == {"nonmonotonic-poll": 2}
