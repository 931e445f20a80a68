"""Processors found again by name: ``module:qualname``, a script's file, or a door's factory.

:func:`load_processor` imports the processor's module (or executes its source file when the
module cannot be imported, as for a script run as ``__main__``) with no way out: an import that
raises, exits or signals itself is a ``ConfigError`` naming the module. :func:`make_processor`
calls the factory a replay file names for an application a door wrapped.
"""

from __future__ import annotations

import importlib
import importlib.util
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness._shown import describe_exception, shown
from harness.errors import ConfigError
from harness.sim.exits import Guard, ProcessExit, ctrl_c_raises
from harness.sim.simulator import Processor

__all__ = ["load_processor", "make_processor"]


def load_processor(path: str, file: str | None = None) -> Processor:
    """Import ``module:qualname``; fall back to loading ``file`` if the module is not found."""
    if not isinstance(path, str):
        raise ConfigError(f"a processor is named 'module:function', got {shown(path)}")
    module_name, _, qualname = path.partition(":")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise ConfigError(
            f"processor {shown(path)} is defined inside a function, so it cannot be imported for a "
            "replay; define it at module level"
        )
    module: Any
    try:
        if module_name == "__main__":
            # a script's processor: its module is whatever script runs the replay, so it
            # can only be found through the file it was defined in
            raise ImportError("a processor defined in a script run as __main__")
        module = _guarded(module_name, lambda: importlib.import_module(module_name))
    except ImportError as exc:
        if not isinstance(file, str) or not file.endswith(".py") or not _is_file(file):
            raise ConfigError(
                f"cannot import processor module {shown(module_name)} ({shown(str(exc))}); run "
                "the replay from the directory the test ran in, or put the module on PYTHONPATH"
                + ("" if file is None else f"; its processor_file {shown(file)} is no .py file")
            ) from None
        module = _load_file(module_name, file)
    obj: Any = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            skipped = getattr(module, "__harness_search_skipped__", False)
            raise ConfigError(
                f"module {shown(module_name)} has no processor {shown(qualname)}; check the name"
                + (
                    "; a replay runs the script only up to its own explore() call: define "
                    "the processor above it, or call explore() under if __name__ == '__main__'"
                    if skipped
                    else ""
                )
            ) from None
    if not callable(obj):
        raise ConfigError(f"processor {shown(path)} is {shown(obj)}, not callable")
    return obj  # type: ignore[no-any-return]


def make_processor(factory: Mapping[str, Any]) -> Processor:
    """The processor a replay file's ``factory`` describes: ``factory["factory"]`` (a
    ``module:function``) called with ``factory["args"]``."""
    name = factory["factory"]
    module_name, _, function_name = str(name).partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load the replay file's factory {shown(name)}: {exc}") from None
    processor: Processor = function(factory["args"])
    return processor


def _is_file(file: str) -> bool:
    try:
        return Path(file).is_file()
    except (OSError, ValueError):  # too long a name, a NUL
        return False


class SearchSkipped(BaseException):
    """Raised by ``explore`` called while a script is loaded for a replay: the script's own
    search ends its execution there (what it defined so far is kept)."""


_LOADING_SCRIPTS: list[int] = []
"""The threads loading a script for a replay (:func:`_load_file`), one entry a script."""


def loading_script() -> bool:
    """Whether this thread is executing a script loaded for a replay (``explore`` then
    raises :class:`SearchSkipped` instead of searching)."""
    return threading.get_ident() in _LOADING_SCRIPTS


def _load_file(module_name: str, file: str) -> Any:
    """Execute the processor's source file as a module of its own: never as ``__main__``,
    and a search it starts at module level (``explore(...)`` outside an ``if __name__``
    guard) ends its execution there instead of running (the replay runs one schedule, it
    does not search again nor write another failure file)."""
    loaded_name = "_harness_replayed_" + Path(file).stem
    spec = importlib.util.spec_from_file_location(loaded_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"processor_file {shown(file)} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[loaded_name] = module
    loader = spec.loader

    def execute() -> None:
        _LOADING_SCRIPTS.append(threading.get_ident())
        try:
            loader.exec_module(module)
        except SearchSkipped:
            setattr(module, "__harness_search_skipped__", True)  # noqa: B010
        finally:
            _LOADING_SCRIPTS.remove(threading.get_ident())

    try:
        _guarded(file, execute)
    except BaseException:
        del sys.modules[loaded_name]
        raise
    return module


def _guarded(source: str, load: Callable[[], Any]) -> Any:
    """``load()`` (the import of a processor's module) with no way out: whatever it raises
    but an ``ImportError`` (``SystemExit``, its own ``KeyboardInterrupt``...) or tries
    (``os._exit``, a signal to itself: :mod:`harness.sim.exits`) is a ``ConfigError`` naming
    the module. A real Ctrl-C meanwhile still interrupts."""
    interrupted: list[int] = []

    def on_sigint(signum: int, frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    owns = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    # where no Ctrl-C raises anything (SIGINT ignored: a background job), none is mistaken
    unseen = not owns and ctrl_c_raises()
    if owns:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        with Guard(lambda what: None, frozenset({signal.SIGINT}) if owns else frozenset()):
            return load()
    except ImportError:
        raise
    except ProcessExit as exc:
        raise _import_failed(source, f"it tried to end the process: it {exc.what}") from None
    except BaseException as exc:  # the user's module failed while it was imported
        if isinstance(exc, KeyboardInterrupt) and (interrupted or unseen):
            raise  # a real Ctrl-C (or one that cannot be told from it)
        raise _import_failed(source, describe_exception(exc)) from None
    finally:
        if owns:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _import_failed(source: str, what: str) -> ConfigError:
    return ConfigError(
        f"importing the processor's module {shown(source)} failed: {what}; fix that module "
        "(run it with python to see the traceback)"
    )
