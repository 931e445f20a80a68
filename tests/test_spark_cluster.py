"""The Spark checker on a real standalone cluster: a master and two workers started from the
installed pyspark on 127.0.0.1 (ephemeral ports), the checker submitted to them with
``spark-submit harness/spark/job.py``, the verdict compared with the local checker's, the
cluster stopped."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("pyspark", reason="the Spark checker needs pyspark")

import harness.spark.job
from harness.check import Guarantee, check
from harness.history import read_history
from harness.spark.check.generate import Plan, generate_history

pytestmark = pytest.mark.slow

_DEADLINE_S = 180.0


def free_port() -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def master_state(ui_port: int) -> dict[str, Any] | None:
    """The master's JSON status page, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as page:
            return dict(json.loads(page.read().decode("utf-8")))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def alive_workers(state: dict[str, Any] | None) -> int:
    if state is None:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def wait_until(ready: Any, watched: list[subprocess.Popen[bytes]], what: str) -> None:
    """Poll ``ready()`` until it is true; the pause between polls is a wait on the cluster's
    processes, so a process that dies ends the wait at once."""
    deadline = time.monotonic() + _DEADLINE_S
    while not ready():
        for process in watched:
            if process.poll() is not None:
                raise AssertionError(f"{what}: {process.args!r} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not ready after {_DEADLINE_S:.0f} s")
        with contextlib.suppress(subprocess.TimeoutExpired):
            watched[0].wait(timeout=0.25)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, dict[str, str]]]:
    """``(master URL, master web UI port, environment for spark-submit)`` of a running
    standalone cluster with two one-core workers; stopped afterwards."""
    folder = tmp_path_factory.mktemp("cluster")
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(folder / "local"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    port, ui_port = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        log = open(folder / "master.log", "wb")  # noqa: SIM115  (closed below)
        logs.append(log)
        processes.append(
            subprocess.Popen(
                [
                    spark_bin("spark-class"),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        wait_until(lambda: master_state(ui_port) is not None, processes, "the master")
        for number in range(2):
            log = open(folder / f"worker{number}.log", "wb")  # noqa: SIM115
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [
                        spark_bin("spark-class"),
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--work-dir",
                        str(folder / f"work{number}"),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        wait_until(lambda: alive_workers(master_state(ui_port)) == 2, processes, "two workers")
        yield url, ui_port, env
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in logs:
            log.close()


def test_the_checker_submitted_to_a_standalone_cluster_gets_the_local_verdicts(
    cluster: tuple[str, int, dict[str, str]], tmp_path: Path
) -> None:
    url, ui_port, env = cluster
    runs = tmp_path / "runs"
    clean = generate_history(
        runs / "run_id=clean" / "history.parquet", records=2000, run_id="clean"
    )
    broken = generate_history(
        runs / "run_id=broken" / "history.parquet",
        records=4000,
        plan=Plan(lost=1, duplicated=1, skipped=1, regressed=1),
        run_id="broken",
    )
    out = tmp_path / "verdict.json"
    result = subprocess.run(
        [
            spark_bin("spark-submit"),
            "--master",
            url,
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--total-executor-cores",
            "2",
            "--executor-memory",
            "1g",
            harness.spark.job.__file__,
            str(runs),
            "--guarantee",
            "exactly-once",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-4000:]
    assert result.stdout.startswith("INVALID under exactly-once (2 runs)\n")
    verdicts = json.loads(out.read_text(encoding="utf-8"))
    assert verdicts["status"] == "invalid"
    for generated in (clean, broken):
        expected = check(read_history(generated.path), Guarantee.EXACTLY_ONCE)
        assert verdicts["runs"][generated.run_id] == expected.to_json()
    assert verdicts["runs"]["clean"]["status"] == "valid"
    # the work ran on the cluster's executors, not in a local driver
    state = master_state(ui_port)
    assert state is not None
    finished = [
        app for app in state.get("completedapps", []) if app.get("name") == "stream-harness"
    ]
    assert finished, state
    assert alive_workers(state) == 2
