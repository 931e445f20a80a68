"""Running unchanged client code under the simulator: :class:`KafkaApp`.

A ``KafkaApp`` is a processor (``app(ctx)``) made of the user's code, found by a script path
(``app.py``, run as ``__main__`` with its command-line arguments), a ``module:function`` name
or a function. For each processor instance (a fresh process: the first, the one after a
crash, a zombie's successor) the user's module is executed anew from its source, with the
harness's doubles in ``sys.modules`` in place of ``confluent_kafka`` and ``kafka``; the
doubles, ``sys.argv``, the output streams and the SIGINT/SIGTERM handlers are put back when
the last instance ends. Modules first imported during the run that hold a double are
forgotten afterwards, so nothing outside the run sees them.

The application's output (prints, logging to the console) is discarded unless
``show_output=True``. ``sys.exit(0)`` and ``KeyboardInterrupt`` end an instance normally;
another exit status is an error. When a script or function returns, the process has ended:
it is started again (as a supervisor or a cron job would) once new input arrives.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import os
import signal
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from harness._shown import describe_exception
from harness.effects import EffectSource, sources_of
from harness.errors import ConfigError, HarnessError
from harness.kafka._broker import Broker, Encoder, Runtime, Wiring, json_values
from harness.kafka.lineage import Lineage, describe_lineage
from harness.sim.context import Context
from harness.sim.simulator import InstanceCrashed
from harness.sim.topology import Topology, log_sink

__all__ = ["KafkaApp"]

_SIGNALS: Final = tuple(
    s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s
)


@dataclass(frozen=True, slots=True)
class _Target:
    file: str
    module: str
    """The name the code runs under (``__main__`` for a script)."""
    attribute: str | None
    """The function to call after executing the module (None: a script)."""


def _locate(target: object) -> _Target:
    if callable(target) and not isinstance(target, str):
        inner = getattr(target, "function", target)
        module = getattr(inner, "__module__", None)
        qualname = getattr(inner, "__qualname__", "")
        if not module or "<" in qualname:
            raise ConfigError(
                f"KafkaApp needs a function defined at module level, got {target!r:.80}"
            )
        return _locate(f"{module}:{qualname}")
    if not isinstance(target, str) or not target:
        raise ConfigError(
            f"KafkaApp target must be a path, 'module:function' or a function, got {target!r:.80}"
        )
    file, colon, function = target.rpartition(":")
    if colon and file.endswith(".py"):  # path/to/app.py:function
        path = Path(file)
        if not path.is_file():
            raise ConfigError(f"application file {file!r} not found; give a path to a .py file")
        return _Target(str(path.resolve()), f"_harness_app_{path.stem}", function)
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise ConfigError(f"application script {target!r} not found; give a path to a .py file")
        return _Target(str(path.resolve()), "__main__", None)
    module, _, attribute = target.partition(":")
    main = sys.modules.get(module)
    origin: str | None = getattr(main, "__file__", None) if main is not None else None
    if origin is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            raise ConfigError(f"cannot find module {module!r} of {target!r}: {exc}") from None
        origin = spec.origin if spec is not None else None
    if not origin or not origin.endswith(".py"):
        raise ConfigError(
            f"cannot find the source of module {module!r} of {target!r}; put it on PYTHONPATH "
            "or give the path of the .py file"
        )
    return _Target(origin, module, attribute or None)


def _label(given: object, target: _Target, argv: Sequence[str]) -> str:
    """The application as reports name it: ``app.py``, ``app.py:main``, ``pkg.mod:main`` or
    a function's ``module:name``, then ``-- ARGS`` when it has arguments."""
    import shlex

    where = given if isinstance(given, str) else f"{target.module}:{target.attribute}"
    return f"{where} -- {shlex.join(argv)}" if argv else where


def _check_topics(
    inputs: Sequence[str],
    outputs: Sequence[str],
    unchecked: Sequence[str],
    effects: Sequence[EffectSource],
) -> None:
    for topic in (*inputs, *outputs, *unchecked):
        if (
            not isinstance(topic, str)
            or not topic
            or not all(c.isalnum() or c in "._-" for c in topic)
        ):
            raise ConfigError(f"invalid topic name {topic!r}: use letters, digits and ._-")
    clash = set(inputs) & set((*outputs, *unchecked)) or set(outputs) & set(unchecked)
    if clash:
        raise ConfigError(f"topic {sorted(clash)[0]!r} is declared twice (input/output)")
    named = set(outputs) & {e.sink for e in effects}
    if named:
        raise ConfigError(
            f"output topic {sorted(named)[0]!r} has the name of an effect's sink; rename it"
        )


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in env.items()
    ):
        raise ConfigError(f"env must map variable names to strings, got {env!r:.120}")
    return dict(env)


class _Session:
    """What the run changes in the interpreter, put back when the last instance ends."""

    active: ClassVar[int] = 0
    saved: ClassVar[dict[str, Any]] = {}

    @classmethod
    def enter(
        cls,
        argv: Sequence[str] | None,
        quiet: bool,
        env: Mapping[str, str] | None = None,
        paths: bool = False,
    ) -> None:
        if cls.active == 0:
            from harness.kafka._effects import Capture
            from harness.kafka._modules import double_modules

            doubles = double_modules()
            saved: dict[str, Any] = {
                "modules": {n: sys.modules.get(n) for n in doubles},
                "last": next(reversed(sys.modules), None),
                "argv": sys.argv,
                "streams": (sys.stdout, sys.stderr),
                "signals": {s: signal.getsignal(s) for s in _SIGNALS},
                "doubles": doubles,
                "env": {name: os.environ.get(name) for name in env or {}},
                "paths": paths,
            }
            cls.saved = saved
            sys.modules.update(doubles)
            if argv is not None:
                sys.argv = list(argv)
            os.environ.update(env or {})
            _EnvironReads.start()
            kept = io.StringIO() if quiet else None
            sys.stdout = Capture("stdout", kept or saved["streams"][0])
            sys.stderr = Capture("stderr", kept or saved["streams"][1])
            if paths:
                from harness.effects import interpose
                from harness.kafka._effects import lookup

                interpose.install(lookup)
        cls.active += 1

    @classmethod
    def leave(cls) -> None:
        cls.active -= 1
        if cls.active:
            return
        saved = cls.saved
        for name, module in saved["modules"].items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        doubles = set(map(id, saved["doubles"].values()))
        for name in _imported_since(saved["last"]):
            module = sys.modules.get(name)
            if module is not None and any(id(v) in doubles for v in vars(module).values()):
                del sys.modules[name]
        sys.argv = saved["argv"]
        sys.stdout, sys.stderr = saved["streams"]
        _EnvironReads.stop()
        for name, value in saved["env"].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if saved["paths"]:
            from harness.effects import interpose

            interpose.remove()
        for sig, handler in saved["signals"].items():
            if signal.getsignal(sig) is handler:  # asyncio.run puts its SIGINT handler back
                continue
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(sig, handler)
        cls.saved = {}


def _release(exc: BaseException) -> None:
    """The instance ended with ``exc``: let go of what the frames it went through hold. An
    ``asyncio`` task keeps the exception it ended with, and those frames hold the task (the
    exception's traceback, ``asyncio.run``'s frame): a cycle the garbage collector would
    have to find, instance after instance; the instance's code is done with them."""
    tb = exc.__traceback__
    while tb is not None:
        with contextlib.suppress(RuntimeError):  # a frame still running (this one's caller)
            tb.tb_frame.clear()
        tb = tb.tb_next


def _imported_since(last: str | None) -> list[str]:
    """The names ``sys.modules`` gained since ``last`` was its newest entry: a dict keeps
    insertion order, so they follow it (a module removed and imported again is among them).
    Walking back to ``last`` costs what was imported, not every module of the interpreter,
    once a run (``last`` gone: every name, as without the marker)."""
    names = []
    for name in reversed(sys.modules):
        if name == last:
            break
        names.append(name)
    return names


class _EnvironReads(os._Environ):  # type: ignore[type-arg]
    """``os.environ`` while an application runs: the names it reads are noted (a replay
    file keeps their values, so the replay sees the environment the run saw)."""

    names: ClassVar[set[str]] = set()
    _plain: ClassVar[type | None] = None

    def __getitem__(self, key: str) -> str:
        _EnvironReads.names.add(key)
        return super().__getitem__(key)  # type: ignore[no-any-return]

    @classmethod
    def start(cls) -> None:
        if type(os.environ) is os._Environ:  # not when something replaced it: no notes
            cls._plain = type(os.environ)
            os.environ.__class__ = cls

    @classmethod
    def stop(cls) -> None:
        if type(os.environ) is cls and cls._plain is not None:
            os.environ.__class__ = cls._plain


def _signal_handler(saved: dict[Any, Any]) -> Callable[[], bool]:
    def call() -> bool:
        for sig in reversed(_SIGNALS):  # SIGTERM first: what a supervisor sends
            handler = signal.getsignal(sig)
            if callable(handler) and handler is not saved.get(sig):
                handler(sig, None)
                return True
        return False

    return call


class AppStartupError(ConfigError):
    """The application failed before its first Kafka call when the run first started it: it
    cannot start at all (an import that raises, a missing module, bad arguments), so no
    schedule is tried."""

    def __init__(self, app: KafkaApp, exc: BaseException) -> None:
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)
        mine = [f for f in frames if f.filename == app._target.file]
        where = f" at {Path(mine[-1].filename).name}:{mine[-1].lineno}" if mine else ""
        super().__init__(
            f"{app!r} failed to start, before its first Kafka call: "
            f"{describe_exception(exc)}{where}; fix it so that it starts (run it with python "
            "to see the traceback)"
        )


class KafkaApp:
    """A processor running unchanged Kafka client code (see the module docstring).

    ``target``: a script path, ``"module:function"`` or a module-level function;
    ``inputs``/``outputs``: the topics the application reads and the ones whose content is
    checked; ``unchecked``: topics it may also produce to; ``effects``: effects outside
    Kafka that are checked too (:func:`~harness.effects.stdout_lines`,
    :func:`~harness.effects.file_lines`, :func:`~harness.effects.sqlite_rows`; at least one
    output topic or effect); ``argv``: the script's (or function's ``sys.argv``) arguments;
    ``env``: environment variables set while it runs; ``lineage``: how outputs are
    attributed to inputs (None: the default of :mod:`harness.kafka.lineage`); ``group``: the
    consumer group whose offsets are checked (None: the first one used); ``encode``: how input
    records look to the application (:func:`~harness.kafka.json_values` by default,
    :func:`~harness.kafka.text_values`, a :mod:`harness.kafka.payloads` template, sample file
    or strategy, or any ``f(record_id, key, value) -> (key bytes, value bytes)``);
    ``backlog_owed=False``: records written before the application first starts are not
    held against an ``auto.offset.reset=latest`` consumer (its first reset of a partition
    starts at the beginning, as if it had been running before them);
    ``transactional_input=True``: the input topics are written by a transactional
    producer, so their offsets have gaps as Kafka's do (each batch's commit marker, and
    the aborted records and abort marker of a producer that crashed, take offsets; a
    read_committed consumer steps over them, a read_uncommitted one reads aborted records).
    """

    def __init__(
        self,
        target: str | Callable[..., Any],
        *,
        inputs: Sequence[str],
        outputs: Sequence[str] = (),
        unchecked: Sequence[str] = (),
        partitions: int = 1,
        argv: Sequence[str] = (),
        lineage: Lineage | None = None,
        group: str | None = None,
        encode: Encoder = json_values,
        show_output: bool = False,
        name: str | None = None,
        effects: Iterable[EffectSource] = (),
        env: Mapping[str, str] | None = None,
        backlog_owed: bool = True,
        transactional_input: bool = False,
    ) -> None:
        self._target = _locate(target)
        inputs, outputs, unchecked = tuple(inputs), tuple(outputs), tuple(unchecked)
        chosen = sources_of(effects)
        if not inputs or not (outputs or chosen):
            raise ConfigError(
                f"a Kafka application needs at least one input topic and one checked output "
                f"topic or effect, got inputs={list(inputs)} outputs={list(outputs)} "
                f"effects={[e.sink for e in chosen]}"
            )
        _check_topics(inputs, outputs, unchecked, chosen)
        for flag, value in (
            ("backlog_owed", backlog_owed),
            ("transactional_input", transactional_input),
        ):
            if type(value) is not bool:
                raise ConfigError(f"{flag} must be True or False, got {value!r}")
        self.env = _environment(env)
        self.wiring = Wiring(
            inputs, outputs, unchecked, partitions, group, lineage, encode, chosen, backlog_owed
        )
        self.topology = Topology(
            partitions=len(inputs) * partitions,
            sinks={t: log_sink() for t in (*outputs, *(e.sink for e in chosen))},
            offset_sync=True,  # committed offsets live on the brokers: a machine crash keeps them
            names=tuple(f"{t}[{p}]" for t in inputs for p in range(partitions)),
            transactional_input=transactional_input,
        )
        self.app_args = tuple(argv)
        scripted = self._target.attribute is None or bool(argv)
        self.argv = (self._target.file, *argv) if scripted else None
        self.show_output = show_output
        self._code: types.CodeType | None = None
        caller = inspect.currentframe()
        frame = caller.f_back if caller is not None else None
        self.__module__ = frame.f_globals.get("__name__", "__main__") if frame else "__main__"
        self.__qualname__ = name or (self._target.attribute or Path(self._target.file).stem)
        self.__name__ = self.__qualname__
        self.harness_name = _label(target, self._target, self.app_args)
        """What reports call the application: the target as given, and its arguments."""
        self.notes: set[str] = set()
        """What its runs noticed that explains a failure (see :meth:`hints`)."""

    def hints(self, failure: object) -> list[str]:
        """``hint: ...`` lines for a failure of this application (a ``harness.Failure``;
        :mod:`harness.kafka.hints`): a subscription that matched no topic, a processor error
        on the default payload's shape."""
        from harness.kafka.hints import render

        errors = getattr(failure, "processor_errors", ())
        return render(self.notes, errors, self.wiring.encode)

    @property
    def lineage(self) -> str:
        """How this app's outputs are attributed to inputs, for reports."""
        return describe_lineage(self.wiring.lineage)

    @property
    def effects(self) -> str:
        """The effects outside Kafka that are checked, for reports ('' when none)."""
        return "; ".join(f"{e.sink}: {e.describe()}" for e in self.wiring.effects)

    def replay_spec(self) -> dict[str, Any] | None:
        """How the engine makes this application again for a replay file (None: it cannot,
        a lineage or encoder function is not importable)."""
        from harness.kafka._spec import FACTORY, to_spec

        spec = to_spec(self, _EnvironReads.names)
        return None if spec is None else {"factory": FACTORY, "args": spec}

    def __repr__(self) -> str:
        target = self._target
        where = target.file if target.attribute is None else f"{target.module}:{target.attribute}"
        return f"KafkaApp({where!r})"

    def _compiled(self) -> types.CodeType:
        if self._code is None:
            source = Path(self._target.file).read_bytes()
            self._code = compile(source, self._target.file, "exec")
        return self._code

    def __call__(self, ctx: Context) -> None:
        broker = Broker.of(ctx._sim.world, self.wiring)
        broker.notes = self.notes
        rt = Runtime(ctx, broker)
        effects = broker.effects
        _Session.enter(
            self.argv, not self.show_output, self.env, effects is not None and effects.has_paths
        )
        rt.shutdown_handler = _signal_handler(_Session.saved.get("signals", {}))
        rt.register()
        try:
            first = rt.inst.number == 1
            for _ in self._runs(rt):
                self._run_once(rt, first)
                first = False
        finally:
            if effects is not None:
                effects.end(rt.inst, crashed=rt.inst.dead)
            rt.unregister()
            _Session.leave()

    def _runs(self, rt: Runtime) -> Iterator[None]:
        """Run the application; each time it returns, wait for new input and run it again."""
        world = rt.world
        while not rt.stopping:
            seen = sum(len(d) for d in world.dlsns.values())
            yield
            while not rt.stopping and sum(len(d) for d in world.dlsns.values()) == seen:
                rt.enter()
                from harness.kafka._confluent_base import park

                try:
                    park(rt)
                except KeyboardInterrupt:
                    return

    def _run_once(self, rt: Runtime, first: bool) -> None:
        """Run the application once; on the run's first start, a failure before its first
        Kafka call is an :class:`AppStartupError`, not a processor error."""
        calls = rt.sim.calls
        try:
            self._execute()
        except HarnessError:
            raise
        except Exception as exc:
            if first and rt.sim.calls == calls and not rt.inst.dead:
                raise AppStartupError(self, exc) from None
            raise

    def _execute(self) -> None:
        target = self._target
        module = types.ModuleType(target.module)
        module.__file__ = target.file
        if target.module != "__main__":
            module.__package__ = target.module.rpartition(".")[0]
        previous = sys.modules.get(target.module) if target.module != "__main__" else None
        if target.module != "__main__":
            sys.modules[target.module] = module
        try:
            exec(self._compiled(), module.__dict__)
            if target.attribute is not None:
                function: Any = module
                for part in target.attribute.split("."):
                    function = getattr(function, part)
                function = getattr(function, "function", function)
                function()
        except KeyboardInterrupt as exc:
            _release(exc)
        except InstanceCrashed as exc:
            _release(exc)
            raise
        except SystemExit as exc:
            if exc.code not in (None, 0):
                said = getattr(sys.stderr, "getvalue", str)()
                last = said.strip().splitlines()[-1:] or [""]
                raise RuntimeError(
                    f"the application exited with status {exc.code!r}"
                    + (f" ({last[0][:200]})" if last[0] else "")
                ) from None
        finally:
            if target.module != "__main__":
                if previous is None:
                    sys.modules.pop(target.module, None)
                else:
                    sys.modules[target.module] = previous
