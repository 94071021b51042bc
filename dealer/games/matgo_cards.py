"""Hwatu card tables for Matgo (``matgo.md`` §1): one place for what every Matgo module knows
about the 48 cards.

Every card is an index 0..47 into :data:`CODES` (``HWATU_48``, code order, ``decks.md`` §2.4)
and every set of cards is an ``int`` bit mask (bit ``i`` = card ``CODES[i]``), so the engine,
the scorer and the house AI count cards with ``bit_count`` and copy positions by copying ints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dealer.core.cards import HWATU_48, CardError, parse_hwatu

__all__ = [
    "CODES", "INDEX", "MONTH", "ALL", "MONTH_MASK", "SAME_MONTH", "BRIGHTS", "RAIN", "CUP", "ANIMALS",
    "GODORI", "RIBBONS", "RED", "BLUE", "PLAIN", "JUNK", "DOUBLE_JUNK", "VALUE", "card_value", "mask",
    "strict_mask", "codes", "low", "bits", "byte_tables", "expand",
]

T = TypeVar("T")

CODES: tuple[str, ...] = HWATU_48
#: card code -> index
INDEX: dict[str, int] = {c: i for i, c in enumerate(CODES)}
#: card index -> month 1..12
MONTH: tuple[int, ...] = tuple(int(c[:2]) for c in CODES)
#: every card
ALL = (1 << len(CODES)) - 1


def _mask_of(pred: Callable[[str], bool]) -> int:
    m = 0
    for i, c in enumerate(CODES):
        if pred(c):
            m |= 1 << i
    return m


def mask(cards: Sequence[str]) -> int:
    """The mask of known-good card codes (no checks: see :func:`strict_mask` for input)."""
    m = 0
    for c in cards:
        m |= 1 << INDEX[c]
    return m


def _month_mask(month: int) -> int:
    """The mask of ``month``'s four cards."""
    return _mask_of(lambda c: int(c[:2]) == month)


#: month 1..12 -> the mask of its four cards (index 0 unused)
MONTH_MASK: tuple[int, ...] = (0,) + tuple(_month_mask(m) for m in range(1, 13))
#: card index -> the mask of its month's four cards
SAME_MONTH: tuple[int, ...] = tuple(MONTH_MASK[mo] for mo in MONTH)
BRIGHTS = _mask_of(lambda c: c[2] == "G")
RAIN = 1 << INDEX["12G"]  # the rain bright: three brights with it score 2, not 3 (§5.1)
CUP = 1 << INDEX["09A"]  # the cup: an animal or a double junk, whichever scores more (§5.5)
ANIMALS = _mask_of(lambda c: c[2] == "A") & ~CUP  # animals without the cup
GODORI = mask(["02A", "04A", "08A"])
RIBBONS = _mask_of(lambda c: c[2] == "R")
RED = mask(["01R", "02R", "03R"])
BLUE = mask(["06R", "09R", "10R"])
PLAIN = mask(["04R", "05R", "07R"])
DOUBLE_JUNK = _mask_of(lambda c: c.endswith("JD"))
JUNK = _mask_of(lambda c: c[2] == "J") & ~DOUBLE_JUNK  # single junk
#: value order for auto-play and tie-breaks (§1, §8): G 4 > A 3 > R 2 > double junk 1 > junk 0.
VALUE: tuple[int, ...] = tuple(
    4 if c[2] == "G" else 3 if c[2] == "A" else 2 if c[2] == "R" else 1 if c.endswith("JD") else 0
    for c in CODES
)


def card_value(code: str) -> int:
    """Auto-play value of a card (§1): G 4, A 3, R 2, double junk 1, junk 0."""
    return VALUE[INDEX[parse_hwatu(code).code]]


def strict_mask(cards: Sequence[str], what: str) -> int:
    """The mask of caller-supplied codes: a clear :class:`CardError` for a single string, a
    code that is not a Hwatu card, or a card given twice."""
    if isinstance(cards, str):
        raise CardError(f"{what}: expected a sequence of card codes, got the single string {cards!r}")
    m = 0
    for c in cards:
        i = INDEX.get(c) if isinstance(c, str) else None
        if i is None:
            parse_hwatu(c)  # raises CardError with the reason
            raise CardError(f"{what}: {c!r} is not a Hwatu card")  # pragma: no cover
        if m >> i & 1:
            raise CardError(f"{what}: duplicate card {c}")
        m |= 1 << i
    return m


ByteTables = tuple[tuple[tuple[Any, ...], ...], ...]


def byte_tables(items: Sequence[T]) -> ByteTables:
    """For each of the 6 bytes of a 48-bit mask: byte value -> the items of its set bits."""
    return tuple(
        tuple(tuple(items[8 * k + i] for i in range(8) if v >> i & 1) for v in range(256))
        for k in range(6)
    )


def expand(m: int, tables: ByteTables) -> list[Any]:
    """Items of the set bits of ``m``, in bit (= code) order (``tables`` from :func:`byte_tables`)."""
    t0, t1, t2, t3, t4, t5 = tables
    return [*t0[m & 255], *t1[m >> 8 & 255], *t2[m >> 16 & 255], *t3[m >> 24 & 255],
            *t4[m >> 32 & 255], *t5[m >> 40 & 255]]


_CODE_TABLES = byte_tables(CODES)


def codes(m: int) -> list[str]:
    """Codes of a mask, in code order."""
    return expand(m, _CODE_TABLES)


def low(m: int) -> int:
    """Index of the lowest card of a non-empty mask."""
    return (m & -m).bit_length() - 1


def bits(m: int) -> list[int]:
    """Indices of the cards of a mask, lowest first."""
    out = []
    while m:
        b = m & -m
        out.append(b.bit_length() - 1)
        m ^= b
    return out
