"""Output paths: checked before the work runs, written whole or not at all.

:func:`writable` tells, before a command spends minutes on a search, whether a path can be
written, without creating or writing anything: a NUL or a character the file system cannot
encode, a name longer than the file system allows, an ancestor that is a file, a directory
where a file is wanted (or the reverse), a device, pipe or socket (the rename would replace
the node: ``/dev/null`` itself, when run as root), no permission. :func:`writing` and
:func:`write_atomic` write a file through a temporary sibling renamed into place, so a failure
leaves no partial file behind; through a symbolic link, the file it names is replaced and the
link kept. Each raises :class:`~harness.errors.ConfigError` with one line
naming the path (shortened, :func:`~harness._shown.shown`) and what to do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from harness._shown import shown
from harness.errors import ConfigError

__all__ = ["NAME_MAX", "writable", "write_atomic", "writing"]

NAME_MAX: Final = 255
"""The longest file name (one path component, in bytes) the usual file systems take."""


def _refused(what: str, path: object, why: str) -> ConfigError:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)  # 'out.json', not PosixPath('out.json')
    return ConfigError(f"cannot write {what} {shown(path)}: {why}; give another path")


def _encoded(path: object, what: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise _refused(what, path, f"a path is a str, not {type(path).__name__}")
    try:
        raw = os.fsencode(path)
    except (UnicodeEncodeError, TypeError):
        raise _refused(what, path, "it holds characters the file system cannot encode") from None
    if b"\0" in raw:
        raise _refused(what, path, "it holds a NUL character")
    if not raw:
        raise _refused(what, path, "it is empty")
    long = next((p for p in raw.split(os.fsencode(os.sep)) if len(p) > NAME_MAX), None)
    if long is not None:
        raise _refused(what, path, f"a name in it is {len(long):,} bytes long (at most {NAME_MAX})")
    return Path(os.fsdecode(raw))


def writable(path: str | os.PathLike[str], what: str, *, directory: bool = False) -> Path:
    """``path`` as a ``Path`` if a file (``directory=True``: a directory, created later if
    missing) can be written there; else a ``ConfigError`` saying why. Nothing is created."""
    out = _encoded(path, what)
    try:
        if out.is_dir() and not directory:
            raise _refused(what, path, "it is a directory; give a file name")
        if out.exists() and not out.is_dir() and directory:
            raise _refused(what, path, "it is a file, not a directory")
        if out.exists() and not out.is_dir() and not out.is_file():
            # the rename into place would replace the node itself (as root, /dev/null)
            raise _refused(what, path, "it is not a regular file (a device, pipe or socket)")
        if out.exists() and not os.access(out, os.W_OK):
            raise _refused(what, path, "permission denied")
        nearest = out if directory else out.parent
        while not nearest.exists() and nearest != nearest.parent:
            nearest = nearest.parent
        if not nearest.is_dir():
            raise _refused(what, path, f"{shown(str(nearest))} is a file, not a directory")
        if not os.access(nearest, os.W_OK | os.X_OK):
            raise _refused(what, path, f"permission denied in {shown(str(nearest))}")
    except OSError as exc:  # a loop of links, a name too long for the whole path...
        raise _refused(what, path, exc.strerror or type(exc).__name__) from None
    return out


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], what: str) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` (same suffix) to write; when the block ends
    without error it is renamed to ``path`` (parents created), else removed."""
    out = writable(path, what)
    if out.is_symlink():  # replace the file it names, not the link
        out = Path(os.path.realpath(out))
    tmp = out.parent / f".{secrets.token_hex(4)}.tmp{out.suffix}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, out)
    except OSError as exc:
        raise _refused(what, path, exc.strerror or type(exc).__name__) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, what: str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or not at all; returns the path."""
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    with writing(path, what) as tmp:
        tmp.write_bytes(raw)
    return Path(path)
