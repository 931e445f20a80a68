"""A SparkSession that is safe in tests and on a laptop: one per process, quiet, local-only.

:func:`spark_session` checks Java first (:func:`harness.spark.java.java_info`), then builds
(or returns the already running) session with:

* the web UI and the console progress bar off, Spark's own logging at ``WARN``/``ERROR``;
* the driver bound to ``127.0.0.1`` on ephemeral ports (``spark.driver.port``,
  ``spark.blockManager.port`` 0, ``spark.port.maxRetries`` 64), so parallel test workers
  never fight over a port;
* few shuffle partitions (4 by default: the histories of a test are small; raise it for big
  ones);
* room for :data:`CODEGEN_CACHE_ENTRIES` generated classes, so that a second check in the
  session reuses the first's compiled code;
* on a local master with a pip-installed pyspark, a ``SPARK_HOME`` (in the scratch space) under
  which Spark's Python processes import the installed, byte-compiled pyspark rather than
  compiling ``pyspark.zip`` from source in every process (:func:`_use_compiled_pyspark`);
* its scratch space (``spark.local.dir``, the SQL warehouse, the checkpoint directory and the
  JVM's ``java.io.tmpdir``) in a fresh directory per process under
  ``$HARNESS_SPARK_TMPDIR`` (default: the system temp dir), named after the pytest-xdist
  worker (``$PYTEST_XDIST_WORKER``), removed when the process exits.

A JVM takes seconds to start, so the session is kept for the life of the process and every
caller gets the same one; :func:`stop_spark_session` stops it. pyspark is imported only when
a function is called.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from harness.errors import ConfigError, MissingDependency
from harness.spark.java import java_info

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "SPARK_INSTALL",
    "require_pyspark",
    "running_session",
    "scratch_dir",
    "spark_session",
    "stop_spark_session",
]

DEFAULT_MASTER: Final = "local[2]"
CODEGEN_CACHE_ENTRIES: Final = 1000
"""Generated classes Spark keeps for reuse (``spark.sql.codegen.cache.maxEntries``, 100 by
default, settable only when the session starts). A Spark check of a history with anomalies
compiles about 125 classes; with a cache of 100 the next check compiles them all again and
the JIT starts over, so every check in a session paid a first check's cost (measured in
docs/spark.md)."""
SPARK_INSTALL: Final = "pip install 'stream-harness[spark]'"
_TMP_ENV: Final = "HARNESS_SPARK_TMPDIR"
_LOG4J: Final = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.scheduler.name = org.apache.spark.scheduler.TaskSetManager
logger.scheduler.level = error
"""

_state: dict[str, object] = {}


def require_pyspark() -> None:
    """Raise :class:`MissingDependency` naming the pip command when pyspark cannot be
    imported."""
    try:
        importlib.import_module("pyspark.sql")
    except ImportError as exc:
        raise MissingDependency(
            f"the Spark checker needs pyspark, which cannot be imported ({exc}); install it "
            f"with: {SPARK_INSTALL}"
        ) from exc


def scratch_dir() -> Path:
    """This process's scratch directory for Spark (created on first call, removed at exit)."""
    existing = _state.get("scratch")
    if isinstance(existing, Path) and existing.is_dir():
        return existing
    root = Path(os.environ.get(_TMP_ENV) or tempfile.gettempdir())
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the Spark scratch root {str(root)!r} ({exc.strerror}); set "
            f"{_TMP_ENV} to a writable directory"
        ) from None
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
    path = Path(tempfile.mkdtemp(prefix=f"harness-spark-{worker}-", dir=root))
    _state["scratch"] = path
    atexit.register(shutil.rmtree, path, True)
    return path


def _current() -> SparkSession | None:
    session = _state.get("session")
    if session is None:
        return None
    from pyspark.sql import SparkSession

    assert isinstance(session, SparkSession)
    # a session stopped by someone else (a fixture, a test) is not reused
    context = session.sparkContext
    if context._jsc is None:
        _state.pop("session", None)
        return None
    return session


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "stream-harness",
    shuffle_partitions: int = 4,
    driver_memory: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The process's SparkSession, started on ``master`` (default ``local[2]``) if none runs.

    ``shuffle_partitions`` sets ``spark.sql.shuffle.partitions``; ``driver_memory`` (e.g.
    ``"8g"``) the driver JVM's heap, which only takes effect when this call starts the JVM;
    ``conf`` adds or overrides Spark settings. A running session is returned as it is when
    ``master`` is None or equal to its master; asking for another master raises
    :class:`ConfigError` (stop it first with :func:`stop_spark_session`). Raises
    :class:`MissingDependency` without pyspark and
    :class:`~harness.spark.java.JavaUnavailable` without Java 17+.
    """
    if master is not None and (not isinstance(master, str) or not master.strip()):
        raise ConfigError(
            f"master must be a Spark master URL such as 'local[2]' or 'spark://HOST:7077', "
            f"got {master!r}"
        )
    if isinstance(shuffle_partitions, bool) or not isinstance(shuffle_partitions, int):
        raise ConfigError(f"shuffle_partitions must be an int >= 1, got {shuffle_partitions!r}")
    if shuffle_partitions < 1:
        raise ConfigError(f"shuffle_partitions must be an int >= 1, got {shuffle_partitions!r}")
    require_pyspark()
    running = _current()
    if running is not None:
        current_master = running.sparkContext.master
        if master is not None and master != current_master:
            raise ConfigError(
                f"a SparkSession on master {current_master!r} is already running in this "
                f"process; stop it (harness.spark.session.stop_spark_session()) before asking "
                f"for master {master!r}"
            )
        return running
    return _start(master, app_name, shuffle_partitions, driver_memory, conf)


def _start(
    master: str | None,
    app_name: str,
    shuffle_partitions: int,
    driver_memory: str | None,
    conf: Mapping[str, str] | None,
) -> SparkSession:
    """Start the process's session (none runs): the settings of the module docstring, the
    environment Spark's launcher reads, then the builder."""
    # under spark-submit the JVM runs already, with the master and settings it was given
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    java = None if submitted else java_info()
    from pyspark.sql import SparkSession

    scratch = scratch_dir()
    settings = _settings(scratch, shuffle_partitions)
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if not submitted and (master or DEFAULT_MASTER).startswith("local"):
        _use_compiled_pyspark(scratch)
    # spark-submit (which pyspark runs to start the JVM) picks the java of JAVA_HOME first
    if java is not None and not os.environ.get("JAVA_HOME"):
        os.environ["JAVA_HOME"] = str(Path(os.path.realpath(java.java)).parent.parent)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(master or DEFAULT_MASTER)
    if not (master or DEFAULT_MASTER).startswith("local") or submitted:
        # executors elsewhere have neither this machine's log4j file nor its scratch dir
        settings.pop("spark.executor.extraJavaOptions")
        settings.pop("spark.local.dir")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(str(scratch / "checkpoints"))
    _state["session"] = session
    return session


def _settings(scratch: Path, shuffle_partitions: int) -> dict[str, str]:
    """The Spark settings of a local, quiet session whose scratch space is ``scratch`` (the
    log4j file and the scratch folders are made here)."""
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_LOG4J, encoding="utf-8")
    for name in ("local", "warehouse", "checkpoints", "jvm-tmp"):
        (scratch / name).mkdir(exist_ok=True)
    java_options = (
        f"-Dlog4j2.configurationFile={log4j.as_uri()} -Djava.io.tmpdir={scratch / 'jvm-tmp'}"
    )
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.port": "0",
        "spark.blockManager.port": "0",
        "spark.port.maxRetries": "64",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.local.dir": str(scratch / "local"),
        "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        "spark.sql.streaming.checkpointLocation": str(scratch / "checkpoints"),
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        "spark.executorEnv.PYTHONHASHSEED": "0",
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
    }


def _use_compiled_pyspark(scratch: Path) -> None:
    """Point ``SPARK_HOME`` at a home for a pip-installed pyspark whose Python processes
    import the installed, byte-compiled pyspark and py4j.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (sources, no bytecode) first on the
    ``PYTHONPATH`` of every Python process it starts, so each one compiles pyspark from
    source: about three times the CPU of importing the installed package (a second of CPU
    per process instead of a third), enough on a loaded machine for a streaming query's
    Python source runner to miss Spark's fixed 10 s connect-back deadline. The home (in
    the scratch dir) links everything of the installed pyspark but ``python/``. Nothing
    changes when ``SPARK_HOME`` names another Spark (its zip is its own code), on Windows,
    or when pyspark has no zip.
    """
    if os.name != "posix":
        return
    package = Path(importlib.import_module("pyspark").__file__ or "").resolve().parent
    current = os.environ.get("SPARK_HOME")
    if current is not None and Path(current).resolve() != package:
        return
    if not (package / "python" / "lib" / "pyspark.zip").is_file():
        return
    home = scratch / "spark-home"
    if not home.is_dir():
        home.mkdir()
        for entry in package.iterdir():
            if entry.name != "python":
                (home / entry.name).symlink_to(entry)
    os.environ["SPARK_HOME"] = str(home)


def running_session() -> SparkSession | None:
    """The process's session if one runs (whatever its master), else None."""
    return _current()


def stop_spark_session() -> None:
    """Stop the process's session if one runs (the next :func:`spark_session` starts anew)."""
    session = _state.pop("session", None)
    if session is not None:
        with contextlib.suppress(Exception):
            session.stop()  # type: ignore[attr-defined]
