"""Shared test setup: a deterministic Hypothesis profile (``HYPOTHESIS_PROFILE=explore`` to
hunt instead), and a namespace fixture run once on each storage backend (memory, LevelDB)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from harness.log import LogConfig, Namespace, leveldb_uri, open_namespace
from harness.log.storage.memory import forget_memory_namespaces

# The suite is deterministic: Hypothesis derives its examples from each test's name, so
# a failure in CI is the same failure on a laptop. HYPOTHESIS_PROFILE=explore draws new
# random examples instead (and keeps them in the example database) to hunt for bugs.
settings.register_profile(
    "default",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", deadline=None, max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_CTRL_C_DELIVERED = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('harness', run_name='__main__', alter_sys=True)"
)


@pytest.fixture
def harness_command() -> list[str]:
    """``python -m harness`` as a terminal starts it, with Python's own ``SIGINT`` handler:
    a test of what a real Ctrl-C does must not depend on how the tests were started (a shell
    without job control starts a background job, as some CI runners start the tests, with
    ``SIGINT`` ignored, which every child inherits and Python then leaves alone)."""
    return [sys.executable, "-c", _CTRL_C_DELIVERED]


@pytest.fixture(params=["memory", "leveldb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def namespace_uri(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "memory":
        name = f"test-{uuid.uuid4().hex}"
        yield f"distributedlog-memory://{name}"
        forget_memory_namespaces(name)
    else:
        yield leveldb_uri(tmp_path / "namespace")


@pytest.fixture
def namespace(namespace_uri: str) -> Iterator[Namespace]:
    """A fresh namespace with small segments, on each backend."""
    with open_namespace(namespace_uri, config=LogConfig(segment_max_records=4)) as ns:
        yield ns
