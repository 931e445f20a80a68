"""Every correct processor is VALID under drawn schedules (issue 18.1): a small soak in CI.

It runs ``bench/bench_soak.py``'s cells: every correct toy and every correct scenario variant,
with its own faults, on memory and LevelDB. ``HARNESS_SOAK_SCHEDULES`` sets the schedules
per processor and backend (default 20 on memory, a fifth of that on LevelDB); the full soak of
issue 18 is ``python bench/bench_soak.py`` (100,000 schedules).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_soak.py"
PER_SUBJECT = int(os.environ.get("HARNESS_SOAK_SCHEDULES") or 20)


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SOAK = _bench()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "leveldb"])
@pytest.mark.parametrize("subject", SOAK.subjects(), ids=lambda s: s.name)
def test_a_correct_processor_is_valid_under_every_drawn_schedule(
    subject: object, backend: str
) -> None:
    count = PER_SUBJECT if backend == "memory" else max(1, PER_SUBJECT // 5)
    cell = SOAK.soak(subject, backend, seed=7, count=count, max_steps=30)
    assert cell.runs >= 1
    assert cell.valid == cell.runs, cell.first_bad
