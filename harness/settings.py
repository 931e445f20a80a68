"""One settings value for every front door, resolved once with one precedence.

:class:`Settings` holds what decides a search and how its result is reported: the guarantee
claimed, the profile, ``max_examples``, ``max_steps``, the seed, the faults, the run budget
(``run_calls``, ``run_seconds``), the backend, the report directory, JSON output and
``max_problems``. :func:`resolve` builds it from :class:`Layer` values, always in this order,
the first that sets a key winning (docs/settings.md):

1. **argument**: a keyword of ``explore()`` or ``harness_explore(...)``;
2. **marker**: ``@pytest.mark.harness(...)`` on the test;
3. **command line**: a flag of ``python -m harness ...`` or a ``--harness-*`` pytest option;
4. **environment**: ``HARNESS_<KEY>`` (``HARNESS_MAX_EXAMPLES=50``);
5. **file**: the ``harness_<key>`` pytest ini options (``pytest.ini``, ``pyproject.toml``'s
   ``[tool.pytest.ini_options]``, ``tox.ini``, ``setup.cfg``);
6. **profile**: the chosen profile's ``max_examples``, ``max_steps`` and run budget;
7. **default**: :data:`DEFAULTS` (a door may replace a default for itself, and says so).

Every key has one name, spelt mechanically in each door: the Python keyword and marker
argument ``max_examples``, the flag ``--max-examples``, the pytest option
``--harness-max-examples``, the variable ``HARNESS_MAX_EXAMPLES``, the ini key
``harness_max_examples``. A bad value raises :class:`BadSetting` (a ``ConfigError``) naming
the value, where it came from and the valid choices.

Light on purpose, below every engine module (the layer test's "settings" layer): the pytest
plugin resolves settings before any engine module loads. Fault names are checked against
:class:`harness.faults.Fault` only when faults are given.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, final

from harness._budget import RunBudget
from harness._shown import shown
from harness._usage import did_you_mean
from harness.errors import ConfigError
from harness.search.profiles import DEFAULT_PROFILE, PROFILES, Profile

__all__ = [
    "BACKENDS",
    "DEFAULTS",
    "DEFAULT_MAX_PROBLEMS",
    "ENV_KEYS",
    "GUARANTEES",
    "KEYS",
    "SOURCES",
    "CALL_DEFAULTS",
    "BadSetting",
    "Layer",
    "Settings",
    "add_options",
    "arguments",
    "environment",
    "env_name",
    "flag_name",
    "for_call",
    "from_options",
    "ini_name",
    "resolve",
]

GUARANTEES: Final = ("at-least-once", "exactly-once")
"""The guarantees a processor may claim (``harness.check.Guarantee``'s values)."""
BACKENDS: Final = ("memory", "leveldb")
"""Where a simulated run keeps its logs and offsets (``harness.sim.world.BACKENDS``)."""
DEFAULT_MAX_PROBLEMS: Final = 5
"""Distinct problems a door looks for before it reports (``explore()``'s own default is 1)."""

SOURCES: Final = ("argument", "marker", "command line", "environment", "file", "profile", "default")
"""Where a value may come from, the first winning."""

KEYS: Final = (
    "guarantee",
    "profile",
    "max_examples",
    "max_steps",
    "seed",
    "faults",
    "run_calls",
    "run_seconds",
    "backend",
    "report_dir",
    "json",
    "max_problems",
)
"""Every setting, by its one name."""

_FROM_PROFILE: Final = ("max_examples", "max_steps", "run_calls", "run_seconds")

DEFAULTS: Final[Mapping[str, object]] = {
    "guarantee": None,
    "profile": DEFAULT_PROFILE,
    "seed": None,
    "faults": None,
    "backend": "memory",
    "report_dir": None,
    "json": False,
    "max_problems": DEFAULT_MAX_PROBLEMS,
}
"""The built-in defaults of the keys no profile sets (None: the guarantee is never assumed;
no seed is one derived from the processor's name; no faults is every fault)."""


def flag_name(key: str) -> str:
    """``max_examples`` -> ``--max-examples`` (the CLI's flag)."""
    return "--" + key.replace("_", "-")


def env_name(key: str) -> str:
    """``max_examples`` -> ``HARNESS_MAX_EXAMPLES``."""
    return "HARNESS_" + key.upper()


def ini_name(key: str) -> str:
    """``max_examples`` -> ``harness_max_examples`` (the pytest ini option)."""
    return "harness_" + key


class BadSetting(ConfigError):
    """A setting's value is not one it may take; the message names the value, where it came
    from and the valid choices (``key``, ``value``, ``where`` and ``choices`` hold them)."""

    def __init__(self, key: str, value: object, where: str, problem: str, choices: str) -> None:
        got = "" if value is None else f", got {shown(value)}"  # None: nothing was given
        super().__init__(f"{where}: {problem}{got}; {choices}")
        self.key, self.value, self.where, self.choices = key, value, where, choices


@final
@dataclass(frozen=True, slots=True)
class Layer:
    """Values from one source, with how an error names each one."""

    source: str
    """One of :data:`SOURCES`."""
    values: Mapping[str, object]
    where: Mapping[str, str] = field(default_factory=dict)
    """How an error names a key's value (``--max-examples (command line)``); default:
    ``KEY (SOURCE)``."""
    text: bool = False
    """Values are text to parse (the environment, a file, a command line)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"a settings layer's source must be one of {SOURCES}")
        unknown = sorted(set(self.values) - set(KEYS))
        if unknown:
            raise BadSetting(
                unknown[0],
                self.values[unknown[0]],
                self.named(unknown[0]),
                f"{unknown[0]!r} is not a setting",
                f"the settings are {', '.join(KEYS)}",
            )

    def named(self, key: str) -> str:
        return self.where.get(key) or f"{key} ({self.source})"


def arguments(**values: object) -> Layer:
    """The keywords given to a Python call, those that are not None."""
    budget = values.pop("run_budget", None)
    if budget is not None:
        if not isinstance(budget, RunBudget):
            raise BadSetting(
                "run_budget",
                budget,
                "budget (argument)",
                "a run budget must be a RunBudget",
                "pass e.g. RunBudget(calls=100000, seconds=30)",
            )
        values.setdefault("run_calls", budget.calls)
        values.setdefault("run_seconds", budget.seconds)
    return Layer("argument", {k: v for k, v in values.items() if v is not None})


ENV_KEYS: Final = tuple(key for key in KEYS if key != "guarantee")
"""The keys the environment (and an ini file) may set: all but the guarantee, which is the
claim of one processor or one command, never a machine's or a project's default."""


def environment(env: Mapping[str, str] | None = None) -> Layer:
    """The ``HARNESS_<KEY>`` variables (of :data:`ENV_KEYS`) that are set and not empty."""
    env = os.environ if env is None else env
    found = {key: env[env_name(key)] for key in ENV_KEYS if env.get(env_name(key), "").strip()}
    where = {key: f"{env_name(key)}={shown(value)} (environment)" for key, value in found.items()}
    return Layer("environment", found, where, text=True)


@final
@dataclass(frozen=True, slots=True)
class Settings:
    """What a door runs with, resolved once (:func:`resolve`)."""

    guarantee: str | None
    """One of :data:`GUARANTEES`; None only until a door requires it."""
    profile: Profile
    max_examples: int
    """Schedules run per search (systematic and drawn together)."""
    max_steps: int
    """The longest drawn schedule."""
    seed: int | None
    """None: a seed derived from the processor's name."""
    faults: tuple[str, ...] | None
    """Fault names (sorted), None: every fault (a door may narrow its default)."""
    run_budget: RunBudget
    backend: str
    report_dir: Path | None
    json: bool
    max_problems: int
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where each key's value came from: one of :data:`SOURCES`, or ``door`` for a door's
    own default (:func:`resolve`'s ``defaults``)."""

    def source(self, key: str) -> str:
        """Where ``key``'s value came from (``default`` when nothing set it)."""
        return self.sources.get(key, "default")

    def given(self) -> dict[str, object]:
        """Every key not implied by the profile, with its value (None left out): what a
        layer built from these settings carries, so that a profile chosen above it still
        decides the numbers it implies while every other value stays as resolved (a door's
        defaults included)."""
        values = self.values()
        return {k: values[k] for k in KEYS if self.source(k) != "profile" and values[k] is not None}

    def values(self) -> dict[str, object]:
        """Every key's value, the run budget as ``run_calls`` and ``run_seconds``."""
        return {
            "guarantee": self.guarantee,
            "profile": self.profile.name,
            "max_examples": self.max_examples,
            "max_steps": self.max_steps,
            "seed": self.seed,
            "faults": self.faults,
            "run_calls": self.run_budget.calls,
            "run_seconds": self.run_budget.seconds,
            "backend": self.backend,
            "report_dir": self.report_dir,
            "json": self.json,
            "max_problems": self.max_problems,
        }

    def as_layer(self, source: str = "argument") -> Layer:
        """These settings' given keys as a layer (to resolve again with more on top)."""
        return Layer(source, self.given())

    def require_guarantee(self, what: str) -> str:
        """The guarantee, or a :class:`BadSetting` saying ``what`` (``--guarantee``) is
        required: the claim that is checked is never assumed, in any door."""
        if self.guarantee is None:
            error = BadSetting("guarantee", None, what, "", "")
            error.args = (
                f"{what} is required: the guarantee claimed, which the check judges, is never "
                f"assumed; choose one of {', '.join(GUARANTEES)}",
            )
            raise error
        return self.guarantee


CALL_DEFAULTS: Final[Mapping[str, object]] = {"max_problems": 1}
"""``explore()``'s own default, called directly: it raises at the first problem."""


def for_call(settings: Settings | None, **given: object) -> Settings:
    """The settings of a Python call (``explore()``): its keywords (``given``, None for not
    given; ``run_budget`` a ``RunBudget``) over ``settings`` (what a door resolved, which
    read the environment already) or, without them, over the environment; then the profile
    (the keyword's, else ``settings``') and :data:`CALL_DEFAULTS`."""
    call = arguments(**given)
    if settings is None:
        return resolve(call, environment(), defaults=CALL_DEFAULTS)
    if "profile" not in call.values:
        call = Layer("argument", {"profile": settings.profile, **call.values})
    return resolve(call, settings.as_layer("marker"), defaults=CALL_DEFAULTS)


def resolve(*layers: Layer, defaults: Mapping[str, object] | None = None) -> Settings:
    """The settings the ``layers`` give, in :data:`SOURCES` order whatever order they are
    passed in (two layers of one source: the first passed wins); ``defaults`` are one door's
    own defaults, in place of :data:`DEFAULTS` or the profile's numbers (the door documents
    them)."""
    ordered = sorted(layers, key=lambda layer: SOURCES.index(layer.source))
    chosen: dict[str, object] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        for layer in ordered:
            if key in layer.values:
                chosen[key] = _check(key, layer.values[key], layer.named(key), layer.text)
                sources[key] = layer.source
                break
    picked = chosen.get("profile", DEFAULTS["profile"])
    profile = picked if isinstance(picked, Profile) else PROFILES[str(picked)]
    implied = {
        "max_examples": profile.max_examples,
        "max_steps": profile.max_steps,
        "run_calls": profile.run_budget.calls,
        "run_seconds": profile.run_budget.seconds,
    }
    door = defaults or {}
    for key in KEYS:
        if key in chosen:
            continue
        if key in door:  # a door's own default, below every source that gives the key
            chosen[key], sources[key] = _check(key, door[key], f"{key} (door)", False), "door"
        elif key in _FROM_PROFILE:
            chosen[key], sources[key] = implied[key], "profile"
        else:
            chosen[key], sources[key] = DEFAULTS[key], "default"
    faults = chosen["faults"]
    return Settings(
        guarantee=chosen["guarantee"],  # type: ignore[arg-type]
        profile=profile,
        max_examples=chosen["max_examples"],  # type: ignore[arg-type]
        max_steps=chosen["max_steps"],  # type: ignore[arg-type]
        seed=chosen["seed"],  # type: ignore[arg-type]
        faults=None if faults is None else tuple(faults),  # type: ignore[arg-type]
        run_budget=RunBudget(chosen["run_calls"], chosen["run_seconds"]),  # type: ignore[arg-type]
        backend=chosen["backend"],  # type: ignore[arg-type]
        report_dir=chosen["report_dir"],  # type: ignore[arg-type]
        json=chosen["json"],  # type: ignore[arg-type]
        max_problems=chosen["max_problems"],  # type: ignore[arg-type]
        sources=sources,
    )


# -- the command line's spelling of every key ---------------------------------------------------

_HELP: Final[Mapping[str, str]] = {
    "guarantee": f"the guarantee claimed and checked: {' or '.join(GUARANTEES)} (required; "
    "never assumed)",
    "profile": f"search budget: {', '.join(PROFILES)} (default: $HARNESS_PROFILE, else ci)",
    "max_examples": "schedules per search, systematic and drawn together (default: the profile's)",
    "max_steps": "the longest drawn schedule (default: the profile's)",
    "seed": "the search seed (default: $HARNESS_SEED, else one derived from the name)",
    "faults": "comma-separated faults to inject, or none (default: every fault)",
    "run_calls": "calls into the world one run may make before it ends UNKNOWN (default: the "
    "profile's, 1000000)",
    "run_seconds": "wall-clock seconds one run may take before it ends UNKNOWN (default: the "
    "profile's, 60)",
    "backend": f"where logs and offsets live: {', '.join(BACKENDS)} (default memory; leveldb "
    "is real plyvel on disk)",
    "report_dir": "also write each failure's report (text, JSON, HTML) into this directory",
    "json": "print the result as JSON (the envelope of docs/reports.md)",
    "max_problems": f"distinct problems to look for (default {DEFAULT_MAX_PROBLEMS}; 1: stop "
    "at the first failure)",
}
"""One help text per setting, the same in every command (a command may add to one)."""

_TYPES: Final[Mapping[str, Any]] = {
    "max_examples": int,
    "max_steps": int,
    "seed": int,
    "run_calls": int,
    "run_seconds": float,
    "max_problems": int,
}


def add_options(
    parser: argparse.ArgumentParser,
    keys: Iterable[str],
    *,
    help: Mapping[str, str] | None = None,
    aliases: Mapping[str, Iterable[str]] | None = None,
    extra_choices: Mapping[str, Iterable[str]] | None = None,
) -> None:
    """Declare the options of the settings ``keys`` on ``parser``, each as
    :func:`harness.settings.flag_name` spells it, default None (not given: the next source
    decides). ``help`` adds a command's note to a key's text; ``aliases`` are old spellings
    still read but hidden from ``--help``; ``extra_choices`` a command's own extra values
    (``run --backend both``)."""
    for key in keys:
        if key not in KEYS:
            raise ValueError(f"no setting {key!r}")
        text = _HELP[key] + (f"; {help[key]}" if help and key in help else "")
        options: dict[str, Any] = {"dest": key, "default": None, "help": text}
        if key == "json":
            options.update(action="store_true", default=None)
        elif key in _TYPES:
            options.update(type=_TYPES[key], metavar="N" if key != "run_seconds" else "S")
        else:
            choices = {"guarantee": GUARANTEES, "backend": BACKENDS, "profile": tuple(PROFILES)}
            if key in choices:
                options["choices"] = (*choices[key], *((extra_choices or {}).get(key, ())))
        parser.add_argument(flag_name(key), **options)
        for alias in (aliases or {}).get(key, ()):
            hidden = {**options, "help": argparse.SUPPRESS}
            parser.add_argument(alias, **hidden)


def from_options(
    args: argparse.Namespace,
    *,
    defaults: Mapping[str, object] | None = None,
    skip: Iterable[str] = (),
) -> Settings:
    """The settings of a command: its options (those given) over the environment, over the
    profile, over the defaults (a command's own ``defaults`` replace some)."""
    given = {
        key: getattr(args, key)
        for key in KEYS
        if key not in skip and getattr(args, key, None) is not None
    }
    where = {key: f"{flag_name(key)} {value} (command line)" for key, value in given.items()}
    return resolve(Layer("command line", given, where), environment(), defaults=defaults)


# -- each key's check: the value it must be, from Python or from text --------------------------


def _check(key: str, value: object, where: str, text: bool) -> object:
    if text and isinstance(value, str):
        value = value.strip()
    return _CHECKS[key](key, value, where, text)


def _choice(key: str, value: object, where: str, choices: Iterable[str]) -> str:
    options = tuple(choices)
    if isinstance(value, str) and value in options:
        return options[options.index(value)]  # a str enum member as its plain value
    raise BadSetting(key, value, where, f"unknown {key}", f"choose one of {', '.join(options)}")


def _guarantee(key: str, value: object, where: str, text: bool) -> str:
    return _choice(key, value, where, GUARANTEES)


def _backend(key: str, value: object, where: str, text: bool) -> str:
    return _choice(key, value, where, BACKENDS)


def _profile(key: str, value: object, where: str, text: bool) -> Profile:
    if isinstance(value, Profile):
        return value
    return PROFILES[_choice(key, value, where, PROFILES)]


def _int(key: str, value: object, where: str, text: bool, low: int | None) -> int:
    if text and isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value)
    if type(value) is int and (low is None or value >= low):
        return value
    need = "an integer" if low is None else f"an integer >= {low}"
    raise BadSetting(key, value, where, f"{key} must be {need}", "give e.g. 100")


def _positive(key: str, value: object, where: str, text: bool) -> int:
    return _int(key, value, where, text, 1)


def _seed(key: str, value: object, where: str, text: bool) -> int:
    return _int(key, value, where, text, None)


def _seconds(key: str, value: object, where: str, text: bool) -> float:
    number: object = value
    if text and isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value)
    if isinstance(number, int | float) and type(number) is not bool:
        seconds = float(number)
        if math.isfinite(seconds) and 0 < seconds <= 86_400:
            return seconds
    raise BadSetting(
        key, value, where, f"{key} must be a number of seconds in (0, 86400]", "give e.g. 60"
    )


_NO_FAULTS: Final = "none"
"""The word that asks for no fault at all where faults are given as text (``--faults none``,
``HARNESS_FAULTS=none``); from Python, ``faults=[]``."""


def _faults(key: str, value: object, where: str, text: bool) -> tuple[str, ...]:
    from harness.faults.kinds import Fault  # the fault vocabulary, only when faults are given

    if isinstance(value, str) and value.strip().lower() == _NO_FAULTS:
        return ()
    names = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
    if isinstance(value, str) and not "".join(value.split(",")).strip():
        # text that names no fault (`--faults "$UNSET"`) would search without any: a gate
        # that passes by accident; no faults is said with a word
        raise BadSetting(
            key,
            value,
            where,
            "names no fault",
            f"give fault names (e.g. crash,tick), {_NO_FAULTS!r} to inject none, or leave it "
            "out for every fault",
        )
    if not isinstance(names, Iterable) or isinstance(names, bytes | Mapping):
        raise BadSetting(
            key, value, where, "faults must be fault names", "give e.g. ['crash'] or crash,tick"
        )
    chosen: set[str] = set()
    for name in names:
        if name == "":
            continue
        try:
            chosen.add(Fault(name).value)
        except ValueError:
            known = sorted(f.value for f in Fault)
            raise BadSetting(
                key,
                name,
                where,
                "unknown fault",
                f"choose from {', '.join(known)}{did_you_mean(str(name), known)}",
            ) from None
    return tuple(sorted(chosen))


def _path(key: str, value: object, where: str, text: bool) -> Path:
    if isinstance(value, str | os.PathLike) and os.fspath(value):
        return Path(value)
    raise BadSetting(key, value, where, f"{key} must be a directory path", "give e.g. reports/")


_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


def _bool(key: str, value: object, where: str, text: bool) -> bool:
    if type(value) is bool:
        return value
    if text and isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise BadSetting(
        key, value, where, f"{key} must be true or false", f"give {'/'.join(_TRUE + _FALSE)}"
    )


_CHECKS: Final = {
    "guarantee": _guarantee,
    "profile": _profile,
    "max_examples": _positive,
    "max_steps": _positive,
    "seed": _seed,
    "faults": _faults,
    "run_calls": _positive,
    "run_seconds": _seconds,
    "backend": _backend,
    "report_dir": _path,
    "json": _bool,
    "max_problems": _positive,
}
