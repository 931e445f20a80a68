"""tox's inline plugin: make every pyenv-installed interpreter of the matrix visible to tox.

pyenv's shims (``python3.12`` on PATH) run only the versions pyenv has activated, so on a
machine whose Pythons are managed by pyenv, tox would find the active version and no other.
Before any environment is created, this extends ``PYENV_VERSION`` (passed to the envs by
tox.ini) with the newest installed 3.10, 3.11, 3.12 and 3.13, after the versions already
active, so ``tox`` finds them as written in README.md. A version that is not installed stays
missing, and ``skip_missing_interpreters = false`` in tox.ini makes that a failure, not a
skip. Without pyenv this does nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

from tox.plugin import impl

MATRIX = re.compile(r"3\.(10|11|12|13)\.\d+")


def pyenv_versions(active: list[str], installed: list[str]) -> list[str]:
    """``active`` followed by the newest installed version of each matrix minor not in it."""
    newest: dict[str, tuple[int, ...]] = {}
    for name in installed:
        if MATRIX.fullmatch(name):
            minor = name.rsplit(".", 1)[0]
            version = tuple(int(part) for part in name.split("."))
            newest[minor] = max(newest.get(minor, version), version)
    chosen = list(active)
    for version in sorted(newest.values()):
        name = ".".join(map(str, version))
        if name not in chosen:
            chosen.append(name)
    return chosen


def _pyenv(*args: str) -> list[str]:
    result = subprocess.run(["pyenv", *args], capture_output=True, text=True, check=False)
    return result.stdout.split() if result.returncode == 0 else []


@impl
def tox_add_core_config(core_conf: Any, state: Any) -> None:
    """Extend ``PYENV_VERSION`` before tox looks for any interpreter."""
    if shutil.which("pyenv") is None:
        return
    active = [v for v in os.environ.get("PYENV_VERSION", "").split(":") if v]
    if not active:
        active = [v for v in ":".join(_pyenv("version-name")).split(":") if v]
    chosen = pyenv_versions(active, _pyenv("versions", "--bare"))
    if chosen:
        os.environ["PYENV_VERSION"] = ":".join(chosen)
