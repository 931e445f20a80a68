"""Package attributes imported on first use (PEP 562 ``__getattr__`` and ``__dir__``).

:func:`lazy_names` gives a package both functions for a table of the modules that define its
public names: a name is imported from its module on first access and kept in the package's
namespace (later lookups do not come back here); any other name raises ``AttributeError``.
:func:`named_object` finds what a ``module:qualname`` string names.
Importing this module imports nothing of the harness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names", "named_object"]


def named_object(name: str) -> Any:
    """The object ``module:qualname`` names (``a.b:C.method``); raises what importing and
    looking it up raise (``ImportError``, ``AttributeError``, ``ValueError`` for an empty
    module name), for the caller to say in its own words."""
    module, _, qualname = name.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def lazy_names(
    package: str, namespace: dict[str, Any], lazy: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose ``globals()`` are
    ``namespace``) for ``lazy``: module name -> the public names it defines."""
    where = {name: module for module, names in lazy.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__
