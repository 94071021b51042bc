"""Card codes from the rulebook (`decks.md`): parsing, formatting and the decks.

A card is carried through the system as its code string (``"AS"``, ``"TD"``,
``"01G"``, ``"11JD"``); :func:`parse_card` turns a code into a :class:`Card`
with its numeric rank for the evaluators, and rejects anything else with a
:class:`CardError` that says exactly what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

RANK_CHARS = "AKQJT98765432"
SUIT_CHARS = "SHDC"
RANK_VALUE: dict[str, int] = {c: 14 - i for i, c in enumerate(RANK_CHARS)}
RANK_DISPLAY: dict[str, str] = {c: ("10" if c == "T" else c) for c in RANK_CHARS}
SUIT_SYMBOL = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}


class CardError(ValueError):
    """A card code that is not a card of the deck in question."""


@dataclass(frozen=True, slots=True)
class Card:
    """A standard 52-card deck card: ``rank`` is 2..14 (ace high), ``suit`` one of S H D C."""

    code: str
    rank: int
    suit: str

    def __str__(self) -> str:
        return self.code

    @property
    def display(self) -> str:
        return f"{RANK_DISPLAY[self.code[0]]}{SUIT_SYMBOL[self.suit]}"


def parse_card(code: str) -> Card:
    """Parse a 52-card code such as ``AS`` or ``TD``; raise :class:`CardError` otherwise."""
    if not isinstance(code, str):
        raise CardError(f"card code must be a string, got {type(code).__name__}")
    if len(code) != 2:
        hint = " (ten is 'T', never '10')" if code.startswith("10") else ""
        raise CardError(f"card code {code!r} must be exactly 2 characters: rank then suit{hint}")
    rank, suit = code[0], code[1]
    if rank not in RANK_VALUE:
        raise CardError(f"card code {code!r}: unknown rank {rank!r} (expected one of {RANK_CHARS})")
    if suit not in SUIT_CHARS:
        raise CardError(f"card code {code!r}: unknown suit {suit!r} (expected one of {SUIT_CHARS})")
    return Card(code, RANK_VALUE[rank], suit)


def parse_cards(codes: Iterable[str]) -> tuple[Card, ...]:
    return tuple(parse_card(c) for c in codes)


def format_card(card: Card) -> str:
    return card.code


#: The 52 codes in canonical card-ID order (AS, AH, AD, AC, KS, ... 2C), `decks.md` §1.1.
STANDARD_52: tuple[str, ...] = tuple(r + s for r in RANK_CHARS for s in SUIT_CHARS)
CARD_ID: dict[str, int] = {code: i for i, code in enumerate(STANDARD_52)}

# --- Hwatu (`decks.md` §2) -------------------------------------------------------------

_HWATU_SPECIAL = {
    1: ("G", "R"), 2: ("A", "R"), 3: ("G", "R"), 4: ("A", "R"), 5: ("A", "R"),
    6: ("A", "R"), 7: ("A", "R"), 8: ("G", "A"), 9: ("A", "R"), 10: ("A", "R"),
    11: ("G",), 12: ("G", "A", "R"),
}
_HWATU_JUNK = {m: ("J1", "J2") for m in range(1, 11)} | {11: ("J1", "J2", "JD"), 12: ("JD",)}

#: The 48 Hwatu codes in ASCII (card-ID) order, `decks.md` §2.2 and §2.4.
HWATU_48: tuple[str, ...] = tuple(
    sorted(
        [f"{m:02d}{t}" for m, ts in _HWATU_SPECIAL.items() for t in ts]
        + [f"{m:02d}{j}" for m, js in _HWATU_JUNK.items() for j in js]
    )
)
#: The 20-card Seotda deck, `decks.md` §2.3.
SEOTDA_20: tuple[str, ...] = tuple(
    f"{m:02d}{t}" for m in range(1, 11) for t in _HWATU_SPECIAL[m]
)


@dataclass(frozen=True, slots=True)
class HwatuCard:
    """A Hwatu card: ``month`` 1..12, ``kind`` G/A/R/J, ``junk`` '1', '2', 'D' or ''."""

    code: str
    month: int
    kind: str
    junk: str

    def __str__(self) -> str:
        return self.code


_HWATU_SET = frozenset(HWATU_48)


def parse_hwatu(code: str) -> HwatuCard:
    """Parse a Hwatu code such as ``01G`` or ``11JD``; raise :class:`CardError` otherwise."""
    if not isinstance(code, str):
        raise CardError(f"card code must be a string, got {type(code).__name__}")
    if code not in _HWATU_SET:
        raise CardError(f"{code!r} is not one of the 48 Hwatu card codes")
    return HwatuCard(code, int(code[:2]), code[2], code[3:])


assert len(STANDARD_52) == 52 and len(HWATU_48) == 48 and len(SEOTDA_20) == 20
