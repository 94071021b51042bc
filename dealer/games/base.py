"""The small interface every game implements, so the round machine stays game-agnostic.

A game is built from its validated options (house options and pay tables, a
pydantic model) and answers four questions: which cards exist (``deck``), in
which order they are dealt (``deal_plan``), whether a bet is allowed
(``check_bet``), and how a completed deal resolves every bet type (``resolve``).
Adding a game is one module with a subclass of :class:`Game` plus a registry line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class Face(StrEnum):
    UP = "UP"
    DOWN = "DOWN"


@dataclass(frozen=True, slots=True)
class Position:
    """One step of a deal plan (`decks.md` §3): ``A1``, ``P3.2``, ``BURN1`` ..."""

    name: str
    face: Face = Face.UP
    burn: bool = False


class Outcome(StrEnum):
    WIN = "WIN"
    LOSE = "LOSE"
    PUSH = "PUSH"  # the stake is returned, nothing won or lost


@dataclass(frozen=True, slots=True)
class BetResolution:
    """How one bet type resolves: ``ratio`` is X in "X:1" and is only meaningful for WIN."""

    outcome: Outcome
    ratio: Decimal = Decimal(0)
    category: str | None = None  # the hand category that decided a side bet, if any


@dataclass(frozen=True, slots=True)
class HandInfo:
    cards: tuple[str, ...]
    category: str


@dataclass(frozen=True, slots=True)
class GameOutcome:
    """Everything settlement and the dealer station need to know about a completed deal."""

    hands: dict[str, HandInfo]
    winner: str | None  # e.g. "A", "B", "TIE"
    bets: dict[str, BetResolution]
    details: dict[str, Any] = field(default_factory=dict)  # game-specific, JSON-safe


class GameOptions(BaseModel):
    """Base for per-game house options and pay tables: strict, unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Game(ABC):
    """One game's rules. Pure: no IO, no clock."""

    name: ClassVar[str]
    Options: ClassVar[type[GameOptions]]
    #: Every bet type a player may place, in the order they are reported.
    bet_types: ClassVar[tuple[str, ...]]

    def __init__(self, options: GameOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None) -> "Game":
        return cls(cls.Options.model_validate(dict(raw or {})))

    @property
    @abstractmethod
    def deck(self) -> frozenset[str]:
        """The card codes that belong to this game's deck; anything else is a foreign card."""

    @abstractmethod
    def deal_plan(self) -> tuple[Position, ...]:
        """The positions in the order the dealer deals them (burns included)."""

    def check_bet(self, bet_type: str, held: frozenset[str]) -> str | None:
        """Reason a player holding bets of types ``held`` may not add ``bet_type``, or None."""
        if bet_type not in self.bet_types:
            return f"unknown bet type {bet_type!r} for {self.name} (expected one of {', '.join(self.bet_types)})"
        return None

    @abstractmethod
    def resolve(self, cards: Mapping[str, str]) -> GameOutcome:
        """Resolve a completed deal: ``cards`` maps every non-burn position name to its code."""
