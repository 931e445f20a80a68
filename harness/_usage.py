"""Usage errors with a hint: "did you mean", for every front door and every named choice.

One helper (:func:`did_you_mean`, :mod:`difflib`) names the closest of the valid choices to a
mistyped word: a flag, a command, a scenario, a sink kind, a fault, a Kafka property.
:class:`UsageParser` is the :mod:`argparse` parser every command line uses: no abbreviations
(``--al`` is not ``--all``), an unknown ``--option`` answered with the option meant, a bad
choice with the choice meant, and the error raised as a :class:`UsageError` (a
:class:`~harness.errors.ConfigError`) rather than printed and exited, so that each door shows
it one way: its usage and one ``error:`` line on stderr and, under ``--json``, an error object
on stdout. Imports only the standard library and :mod:`harness.errors`.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
from collections.abc import Iterable, Sequence
from typing import Any, Final, NoReturn

from harness._shown import shown
from harness.errors import ConfigError

__all__ = ["UsageError", "UsageParser", "close_matches", "did_you_mean", "wants_json"]

_CUTOFF: Final = 0.6
"""How alike a word and a choice must be (difflib's ratio) to be suggested."""
_OPTION_CUTOFF: Final = 0.8
"""The same for an option: ``--db`` is an application's, not a mistyped ``--by``."""


def close_matches(
    word: str, choices: Iterable[str], n: int = 1, cutoff: float = _CUTOFF
) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``word`` (none when nothing is alike); a choice
    that differs only in case or in ``_`` for ``-`` comes first."""
    options = [str(choice) for choice in choices]
    folded = word.lower().replace("_", "-")
    same = [o for o in options if o.lower().replace("_", "-") == folded and o != word]
    close = difflib.get_close_matches(word, options, n=n, cutoff=cutoff)
    return list(dict.fromkeys(same + close))[:n]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'tick'?)"`` for a mistyped ``word``, or ``""`` when no choice is
    close: the end of an error message that names ``word``."""
    close = close_matches(word, choices)
    return f" (did you mean {shown(close[0])}?)" if close else ""


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among a command line's own words (before a ``--``)."""
    words = list(argv)
    return "--json" in words[: words.index("--")] if "--" in words else "--json" in words


class UsageError(ConfigError):
    """A command line the parser refuses; ``usage`` is the command's usage text, ``prog``
    its name and ``suggestions`` what the user probably meant."""

    def __init__(
        self, message: str, *, prog: str, usage: str, suggestions: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.prog = prog
        self.usage = usage
        self.suggestions = tuple(suggestions)


class UsageParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` without abbreviations, whose errors name what was
    meant and are raised (:class:`UsageError`), never printed and exited. Its sub-parsers
    (``add_subparsers``) are of its class; an unknown option after a command is answered by
    that command's parser, with its usage and options.

    ``passes_on`` (e.g. ``"python -m harness kafka APP --input ..."``) is for a command that
    passes the words after ``--`` on to a program: words it does not know, and that are no
    mistyped option, are shown where they belong."""

    def __init__(self, *args: Any, passes_on: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.passes_on = passes_on
        self._words: list[str] = []
        self._suggestions: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._words = [] if args is None else list(args)
        return super().parse_known_args(self._words, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> argparse.Namespace:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            _innermost(self, parsed).refuse(extra)
        return parsed

    def refuse(self, words: Sequence[str]) -> NoReturn:
        """The error for ``words``, which no argument takes."""
        self._words = [*self._words, *words]
        message = f"unrecognized arguments: {' '.join(words)}"
        if self.passes_on is not None and not self.option_hints(words):
            message += (
                f"; the program's own arguments go after '--': {self.passes_on} -- "
                f"{shlex.join(words)}"
            )
        self.error(message)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            close = close_matches(str(value), [str(c) for c in action.choices])
            self._suggestions.extend(close)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            choices = ", ".join(repr(c) for c in action.choices)
            raise argparse.ArgumentError(
                action, f"invalid choice: {shown(value)}{hint}; choose from {choices}"
            )

    def option_hints(self, words: Iterable[str]) -> str:
        """``"; --gaurantee: did you mean --guarantee?"`` for each unknown ``--option`` among
        ``words`` that is close to one of this parser's (for a parser of commands, one that is
        not: where a command's options go)."""
        options = [o for o in self._option_string_actions if o.startswith("--")]
        hints = []
        commands = _commands(self)
        for word in words:
            if commands and not word.startswith("-"):
                break  # the words after a command are that command's
            name = word.split("=", 1)[0]
            if name.startswith("-") and name not in self._option_string_actions:
                close = close_matches(name, options, cutoff=_OPTION_CUTOFF)
                if close:
                    self._suggestions.append(close[0])
                    hints.append(f"{name}: did you mean {close[0]}?")
                elif commands:  # an option of a command, given before the command's name
                    hints.append(
                        f"a command's options go after its name: {self.prog} COMMAND {name}"
                    )
        return "".join(f"; {hint}" for hint in dict.fromkeys(hints))

    def error(self, message: str) -> NoReturn:
        """Raise the error as a :class:`UsageError`, with the hints that apply."""
        message += self.option_hints(self._words)
        suggestions, self._suggestions = list(dict.fromkeys(self._suggestions)), []
        raise UsageError(
            message, prog=self.prog, usage=self.format_usage(), suggestions=suggestions
        )


def _commands(parser: argparse.ArgumentParser) -> bool:
    """Whether ``parser`` takes a command (has sub-parsers)."""
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _innermost(parser: UsageParser, parsed: argparse.Namespace) -> UsageParser:
    """The (sub-)parser of the command ``parsed`` selected: the one that declares the
    options a mistyped one was meant to be."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and action.dest:
            chosen = action.choices.get(str(getattr(parsed, action.dest, "")))
            if isinstance(chosen, UsageParser):
                return _innermost(chosen, parsed)
    return parser
