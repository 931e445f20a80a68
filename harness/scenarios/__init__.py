"""The seed scenarios under the harness namespace: ``harness.scenarios.<module>``.

The scenario modules live in the repository's top-level ``scenarios/`` folder (part of the
project's layout). A wheel installs that folder as this very package (``pyproject.toml`` maps
``harness.scenarios`` to it, replacing this file); in a source checkout this file extends the
package's path to the folder, so the same imports work from both. It never reaches beyond a
source checkout (one with ``pyproject.toml`` next to ``harness/``), so an unrelated
``scenarios`` folder is never picked up.
"""

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent.parent
_FOLDER = _ROOT / "scenarios"
if (_ROOT / "pyproject.toml").is_file() and _FOLDER.is_dir():
    __path__.append(str(_FOLDER))
