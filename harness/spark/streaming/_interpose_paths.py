"""Where a job's own paths go under the harness: the schedule's copies (no pyspark)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

__all__ = ["redirect", "table_path"]


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


def table_path(name: str) -> str:
    """Where a streaming query's table ``name`` goes under the harness: the relative
    warehouse path Spark gives a managed table (``spark-warehouse/<table>``, a database's
    ``spark-warehouse/<db>.db/<table>``), redirected like the job's own relative paths."""
    parts = [p.strip("`") for p in str(name).split(".") if p.strip("`")]
    if not parts or len(parts) > 3 or any("/" in p or p in (".", "..") for p in parts):
        raise ConfigError(
            f"toTable({name!r:.80}): give a table name such as 'events' or 'db.events'"
        )
    *database, table = parts[-2:]
    return "/".join(["spark-warehouse", *(f"{d}.db" for d in database), table])
