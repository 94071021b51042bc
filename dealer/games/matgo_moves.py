"""Matgo's vocabulary (``matgo.md``): the seats, the moves, the phases of a turn and the records a
game hands out (its result, a layout stack, a seat's view). Plain frozen values, no rules: the
game that uses them is :class:`dealer.games.matgo_engine.MatgoGame`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Union

from dealer.games.matgo_cards import CODES

__all__ = [
    "SEATS", "SEAT_INDEX", "Seat", "other", "seat_index", "Play", "Choose", "Flip", "Decide", "Move", "Phase",
    "Event", "LayoutStack", "MatgoResult", "MatgoView", "PLAY_MOVES", "CHOOSE_MOVES", "FLIP_MOVES", "STOP", "GO",
]

Seat = Literal["F", "O"]
SEATS: tuple[Seat, Seat] = ("F", "O")
SEAT_INDEX = {"F": 0, "O": 1}


def other(seat: Seat) -> Seat:
    """The other seat."""
    if seat == "F":
        return "O"
    if seat == "O":
        return "F"
    raise ValueError(f"unknown seat {seat!r} (expected 'F' or 'O')")



def seat_index(seat: Any, what: str = "seat") -> int:
    """The index (0 or 1) of ``seat``; a ValueError naming ``what`` for anything else."""
    try:
        return SEAT_INDEX[seat]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be 'F' or 'O', got {seat!r}") from None


# --- moves ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CardMove:
    card: str


class Play(_CardMove):
    """Step A: play ``card`` from the hand of the seat to move."""

    __slots__ = ()


class Choose(_CardMove):
    """Choose which of the two layout cards of the month ``card`` is (step A or step B)."""

    __slots__ = ()


class Flip(_CardMove):
    """Step B: the stock card the dealer turned over and the scanner registered."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Decide:
    """Stop (``go=False``) or Go (``go=True``) at a decision point (§6)."""

    go: bool


Move = Union[Play, Choose, Flip, Decide]
Event = tuple[str, dict[str, Any]]

#: card index -> its move (prebuilt: playouts allocate no move objects)
PLAY_MOVES: tuple[Play, ...] = tuple(Play(c) for c in CODES)
CHOOSE_MOVES: tuple[Choose, ...] = tuple(Choose(c) for c in CODES)
FLIP_MOVES: tuple[Flip, ...] = tuple(Flip(c) for c in CODES)
STOP = Decide(False)
GO = Decide(True)


class Phase(StrEnum):
    PLAY = "PLAY"          # to_move must play a hand card
    CHOOSE_A = "CHOOSE_A"  # choose one of two layout cards for the hand card
    FLIP = "FLIP"          # waiting for the stock card (supplied by the caller)
    CHOOSE_B = "CHOOSE_B"  # choose one of two layout cards for the stock card
    DECIDE = "DECIDE"      # Stop / Go
    OVER = "OVER"



# --- results, layout, views -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatgoResult:
    """How the deal ended. ``kind``: STOP | CHONGTONG | THREE_PPUK | NAGARI | REDEAL."""

    kind: Literal["STOP", "CHONGTONG", "THREE_PPUK", "NAGARI", "REDEAL"]
    winner: Seat | None
    payment_points: int
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LayoutStack:
    """The layout cards of one month: loose (1 or 2 cards, ``origin="LOOSE"``, maker None) or a
    pile of three (``origin`` ``"INITIAL"`` with maker None, or ``"PPUK"`` with its maker)."""

    month: int
    cards: tuple[str, ...]
    origin: Literal["LOOSE", "INITIAL", "PPUK"]
    maker: Seat | None


@dataclass(frozen=True, slots=True)
class MatgoView:
    """What ``seat`` knows (never the opponent's hand). ``pending`` = face-up cards of the
    current turn not yet captured; ``options`` = the two cards of a pending choice;
    ``seen`` = every card this seat has seen; ``unseen`` = the rest (opponent hand + stock)."""

    seat: Seat
    hand: tuple[str, ...]
    opponent_hand_size: int
    layout: tuple[LayoutStack, ...]
    pending: tuple[str, ...]
    options: tuple[str, ...]
    captured: dict[Seat, tuple[str, ...]]
    seen: frozenset[str]
    unseen: tuple[str, ...]
    stock_left: int
    scores: dict[Seat, int]
    go_count: dict[Seat, int]
    score_at_last_go: dict[Seat, int]
    ppuks: dict[Seat, int]
    turn: int
    phase: Phase
    to_move: Seat
    first: Seat
    result: MatgoResult | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly plain data."""
        return {
            "seat": self.seat, "hand": list(self.hand), "opponent_hand_size": self.opponent_hand_size,
            "layout": [{"month": s.month, "cards": list(s.cards), "origin": s.origin, "maker": s.maker}
                       for s in self.layout],
            "pending": list(self.pending), "options": list(self.options),
            "captured": {k: list(v) for k, v in self.captured.items()},
            "seen": sorted(self.seen), "unseen": list(self.unseen), "stock_left": self.stock_left,
            "scores": dict(self.scores), "go_count": dict(self.go_count),
            "score_at_last_go": dict(self.score_at_last_go), "ppuks": dict(self.ppuks),
            "turn": self.turn, "phase": str(self.phase), "to_move": self.to_move, "first": self.first,
            "result": None if self.result is None else {
                "kind": self.result.kind, "winner": self.result.winner,
                "payment_points": self.result.payment_points, "details": self.result.details},
        }
