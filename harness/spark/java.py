"""Preflight for the Java runtime Spark needs, with an error that says what to install.

pyspark starts a JVM on first use; without a suitable one it fails late, with a Py4J traceback
or a ``JAVA_GATEWAY_EXITED`` error that names neither the Java it found nor the fix.
:func:`require_java` runs ``java -version`` first (the ``java`` of ``$JAVA_HOME`` when it is
set, as Spark's launcher does, else the one on ``PATH``) and raises :class:`JavaUnavailable`
naming what it found and what to install. Nothing here imports pyspark.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from harness.errors import MissingDependency

__all__ = ["MIN_JAVA", "JavaInfo", "JavaUnavailable", "java_info", "parse_java_version"]

MIN_JAVA: Final = 17
"""The oldest Java feature release that Spark 4 runs on."""

_INSTALL_HINT: Final = (
    "install a Java 17 or newer runtime (e.g. `apt-get install openjdk-17-jre-headless`, "
    "or a Temurin/Zulu JDK 17+) and point JAVA_HOME at it (or put its bin/ first on PATH)"
)
_VERSION: Final = re.compile(r'version\s+"([^"]+)"')
_TIMEOUT_S: Final = 30.0


class JavaUnavailable(MissingDependency):
    """No Java runtime, or one older than :data:`MIN_JAVA`, for Spark.

    ``java`` is the executable that was tried (None when none was found), ``java_home`` the
    ``JAVA_HOME`` in force (None when unset) and ``version`` the version it reported (None
    when it could not be run or parsed).
    """

    def __init__(
        self,
        message: str,
        *,
        java: str | None = None,
        java_home: str | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__(message)
        self.java = java
        self.java_home = java_home
        self.version = version


@final
@dataclass(frozen=True, slots=True)
class JavaInfo:
    """A usable Java runtime: the executable, the version text it reports and its feature
    release (``17`` for ``"17.0.15"``, ``8`` for ``"1.8.0_392"``)."""

    java: str
    version: str
    feature: int


def parse_java_version(text: str) -> tuple[str, int] | None:
    """The version string and feature release in ``java -version`` output, or None.

    Understands both schemes: ``1.8.0_392`` (feature 8) and ``17.0.15`` / ``21`` /
    ``22-ea`` (feature 17, 21, 22).
    """
    match = _VERSION.search(text)
    if match is None:
        return None
    version = match.group(1)
    numbers = re.match(r"(\d+)(?:\.(\d+))?", version)
    if numbers is None:
        return None
    major = int(numbers.group(1))
    if major == 1 and numbers.group(2) is not None:
        major = int(numbers.group(2))
    return version, major


def _where(java: str, java_home: str | None) -> str:
    if java_home:
        return f"JAVA_HOME={java_home} ({java})"
    return f"{java} (found on PATH; JAVA_HOME is not set)"


def java_info(*, minimum: int = MIN_JAVA, env: dict[str, str] | None = None) -> JavaInfo:
    """Find the Java runtime Spark would start and check it is at least ``minimum``.

    ``env`` defaults to ``os.environ``. Raises :class:`JavaUnavailable` when ``$JAVA_HOME``
    has no ``bin/java``, when no ``java`` is on ``PATH``, when it cannot be run or its
    version cannot be read, or when it is older than ``minimum``; the message names the
    executable, ``JAVA_HOME`` and the version found, and says what to install.
    """
    environ = dict(os.environ if env is None else env)
    java_home = environ.get("JAVA_HOME") or None
    if java_home is not None:
        java = str(Path(java_home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise JavaUnavailable(
                f"Spark needs Java {minimum}+, but JAVA_HOME={java_home} has no executable "
                f"bin/java; {_INSTALL_HINT}, or unset JAVA_HOME to use the java on PATH",
                java=None,
                java_home=java_home,
            )
    else:
        found = shutil.which("java", path=environ.get("PATH", os.defpath))
        if found is None:
            raise JavaUnavailable(
                f"Spark needs Java {minimum}+, but JAVA_HOME is not set and there is no java "
                f"on PATH; {_INSTALL_HINT}",
            )
        java = found
    try:
        result = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            env=environ,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise JavaUnavailable(
            f"Spark needs Java {minimum}+, but {_where(java, java_home)} cannot be run "
            f"({exc}); {_INSTALL_HINT}",
            java=java,
            java_home=java_home,
        ) from exc
    output = (result.stderr or "") + (result.stdout or "")
    parsed = parse_java_version(output)
    if result.returncode != 0 or parsed is None:
        shown = output.strip().splitlines()[0] if output.strip() else "no output"
        raise JavaUnavailable(
            f"Spark needs Java {minimum}+, but `{java} -version` "
            f"{'exited with ' + str(result.returncode) if result.returncode else 'printed'} "
            f"({shown!r}) and its version cannot be read; {_INSTALL_HINT}",
            java=java,
            java_home=java_home,
        )
    version, feature = parsed
    if feature < minimum:
        raise JavaUnavailable(
            f"Spark needs Java {minimum}+, but {_where(java, java_home)} is Java {version}; "
            f"{_INSTALL_HINT}",
            java=java,
            java_home=java_home,
            version=version,
        )
    return JavaInfo(java=java, version=version, feature=feature)
