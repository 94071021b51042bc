"""Argument types and the parser class of the ``dealer`` command.

Bad input on the command line is one line on stderr and exit status 2, never a traceback
and never a silently "corrected" value (``--rounds 0`` is refused, not played as one round).
The types here check a value where argparse reads it, so every subcommand says the same
thing the same way; :class:`DealerArgumentParser` prints argparse's own errors on one line.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

#: The help of ``--config`` wherever it appears.
CONFIG_HELP = ("the backend's TOML configuration (as for `dealer run`); relative paths in it are relative "
               "to the file's directory")


class DealerArgumentParser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line (``dealer demo: argument --rounds: ...``)
    and exit status 2. Subparsers are of this class too (argparse uses the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _number(text: str, kind: type[int] | type[float]) -> float | int:
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """A whole number in ``[low, high]`` (no upper bound when ``high`` is None)."""

    def parse(text: str) -> int:
        value = int(_number(text, int))
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in some messages
    return parse


def seconds(low: float = 0.0, high: float = 86_400.0, *, allow_low: bool = False,
            unit: str = "seconds") -> Callable[[str], float]:
    """A duration (in ``unit``), ``> low`` (``>= low`` with ``allow_low``) and ``<= high``."""

    def parse(text: str) -> float:
        value = float(_number(text, float))
        if value < low or (value == low and not allow_low) or value > high:
            rel = ">=" if allow_low else ">"
            raise argparse.ArgumentTypeError(f"must be {rel} {low:g} and at most {high:g} {unit}, got {text}")
        return value

    parse.__name__ = unit
    return parse


def fraction(text: str) -> float:
    """A rate from 0 to 1."""
    value = float(_number(text, float))
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {text}")
    return value


fraction.__name__ = "rate"


def broker_url(text: str) -> str:
    """``mqtt://host:port`` or ``mqtts://host:port``, checked before anything connects."""
    from drivers.mqtt import parse_broker_url

    try:
        parse_broker_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


broker_url.__name__ = "broker URL"


def walk(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command tree, with its ``prog``, the root first."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield from walk(sub)


def options_without_help(parser: argparse.ArgumentParser) -> list[str]:
    """``prog option`` for every argument and subcommand of the tree without a help text
    (``--help`` itself and arguments hidden with ``argparse.SUPPRESS`` excepted)."""
    missing = []
    for prog, p in walk(parser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{prog} {choice.dest} (subcommand)" for choice in action._choices_actions
                            if not (choice.help or "").strip()]
                continue
            if isinstance(action, argparse._HelpAction):
                continue
            if action.help is argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    return missing


def fail(prog: str, message: str) -> int:
    """Print ``prog: message`` on one line and return exit status 2."""
    print(f"{prog}: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


__all__ = ["CONFIG_HELP", "DealerArgumentParser", "broker_url", "fail", "fraction", "int_range",
           "options_without_help", "seconds", "walk"]
