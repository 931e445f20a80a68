"""Where a job's own paths go under the harness: the schedule's copies (no pyspark)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["redirect"]


def redirect(root: str, path: Any) -> Any:
    """``path`` as the schedule's copy: a relative path under ``root/cwd``, an absolute one
    under ``root/fs``; a URI of another file system, or a path already under ``root``, as is."""
    if isinstance(path, (list, tuple)):
        return type(path)(redirect(root, p) for p in path)
    if not isinstance(path, (str, os.PathLike)):
        return path
    text = os.fspath(path)
    if "://" in text and not text.startswith("file:"):
        return text
    if text.startswith("file:"):
        text = "/" + text[len("file:") :].lstrip("/")
    given = Path(os.path.expanduser(text))
    base = Path(root)
    if given.is_absolute():
        if given == base or base in given.parents:
            return str(given)
        return str(base / "fs" / given.relative_to(given.anchor))
    return str(base / "cwd" / given)
