"""Matgo scoring (``matgo.md`` §5) and payment (§7), on captured piles.

Two layers: the public functions (:func:`score`, :func:`payment`, :func:`protection_units`)
take card codes and check them; the ``mask_*`` functions and :func:`fast_total` take the bit
masks of :mod:`dealer.games.matgo_cards` unchecked, for the engine and for search playouts.
:func:`fast_total` is the hot path: the same total as ``score(...).total`` without building a
:class:`Score`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dealer.core.cards import CardError
from dealer.games.matgo_cards import (
    ANIMALS,
    BLUE,
    BRIGHTS,
    CUP,
    DOUBLE_JUNK,
    GODORI,
    JUNK,
    PLAIN,
    RAIN,
    RED,
    RIBBONS,
    codes,
    strict_mask,
)

__all__ = ["Score", "Payment", "score", "payment", "protection_units", "fast_total", "mask_score",
           "mask_payment", "mask_multipliers", "mask_protection_units", "go_adjusted"]


@dataclass(frozen=True, slots=True)
class Score:
    """A combination score (§5). ``brights``/``animals``/``ribbons``/``junk`` are points
    (animals include Godori, ribbons the sets). ``cup_as`` is how ``09A`` was classified
    (§5.5), ``None`` when it is not among the cards. ``animal_count`` and ``junk_units``
    follow that classification."""

    brights: int
    animals: int
    ribbons: int
    junk: int
    total: int
    cup_as: Literal["animal", "junk"] | None
    junk_units: int
    animal_count: int
    bright_count: int
    ribbon_count: int
    godori: bool


@dataclass(frozen=True, slots=True)
class Payment:
    """Settlement of a Stop (§7): ``points`` = the stopper's combination score, ``go_adjusted``
    by §7.1, ``multipliers`` applied by §7.2 (``"bright"``, ``"animals"``, ``"junk"``),
    ``payment_points`` = go_adjusted × 2^len(multipliers)."""

    points: int
    go_adjusted: int
    multipliers: list[str]
    payment_points: int


def _cup_as_animal(a: int, u: int) -> bool:
    """§5.5: the cup counts as an animal (else as a double junk) when that scores at least as
    much; ``a`` = animals without the cup, ``u`` = junk units without it."""
    as_animal = (a - 3 if a >= 4 else 0) + (u - 9 if u >= 10 else 0)
    as_junk = (a - 4 if a >= 5 else 0) + (u - 7 if u >= 8 else 0)
    return as_animal >= as_junk


def fast_total(m: int) -> int:
    """Combination score total of a captured mask: ``score(...).total`` without building a
    :class:`Score`. The hot path of the engine and of search playouts, so written out in one
    function (no calls); :func:`mask_score` reads its parts from it."""
    n = (m & BRIGHTS).bit_count()
    if n == 5:
        t = 15
    elif n == 4:
        t = 4
    elif n == 3:
        t = 2 if m & RAIN else 3
    else:
        t = 0
    if m & GODORI == GODORI:
        t += 5
    r = (m & RIBBONS).bit_count()
    if r >= 5:
        t += r - 4
    if m & RED == RED:
        t += 3
    if m & BLUE == BLUE:
        t += 3
    if m & PLAIN == PLAIN:
        t += 3
    a = (m & ANIMALS).bit_count()
    u = (m & JUNK).bit_count() + 2 * (m & DOUBLE_JUNK).bit_count()
    if m & CUP:  # _cup_as_animal, written out
        as_animal = (a - 3 if a >= 4 else 0) + (u - 9 if u >= 10 else 0)
        as_junk = (a - 4 if a >= 5 else 0) + (u - 7 if u >= 8 else 0)
        return t + (as_animal if as_animal >= as_junk else as_junk)
    return t + (a - 4 if a >= 5 else 0) + (u - 9 if u >= 10 else 0)


def mask_score(m: int) -> Score:
    """The full :class:`Score` of a captured mask."""
    b = fast_total(m & BRIGHTS)  # the bright points alone
    rp = fast_total(m & RIBBONS)  # the ribbon points alone (count and sets)
    a = (m & ANIMALS).bit_count()
    u = (m & JUNK).bit_count() + 2 * (m & DOUBLE_JUNK).bit_count()
    god = m & GODORI == GODORI
    cup_as: Literal["animal", "junk"] | None = None
    if m & CUP:
        if _cup_as_animal(a, u):
            cup_as, a = "animal", a + 1
        else:
            cup_as, u = "junk", u + 2
    ap = (a - 4 if a >= 5 else 0) + (5 if god else 0)
    jp = u - 9 if u >= 10 else 0
    return Score(b, ap, rp, jp, b + ap + rp + jp, cup_as, u, a, (m & BRIGHTS).bit_count(),
                 (m & RIBBONS).bit_count(), god)


def score(captured: Sequence[str]) -> Score:
    """Combination score of a captured pile (§5), the cup classified by §5.5."""
    return mask_score(strict_mask(captured, "score"))


def mask_protection_units(m: int) -> int:
    """The loser's junk units for the junk multiplier: the cup always counts 2 (§7.2)."""
    return (m & JUNK).bit_count() + 2 * (m & DOUBLE_JUNK).bit_count() + (2 if m & CUP else 0)


def protection_units(loser_captured: Sequence[str]) -> int:
    """The loser's junk units as the junk multiplier counts them (§7.2: the cup counts 2)."""
    return mask_protection_units(strict_mask(loser_captured, "protection_units"))


def mask_multipliers(win: int, lose: int, s: Score | None = None) -> list[str]:
    """The multipliers of §7.2 the winner's pile ``win`` earns against the loser's ``lose``."""
    s = s or mask_score(win)
    out = []
    if s.brights > 0 and not lose & BRIGHTS:
        out.append("bright")
    if s.animal_count >= 7:
        out.append("animals")
    if s.junk > 0 and mask_protection_units(lose) < 5:
        out.append("junk")
    return out


def go_adjusted(points: int, go_count: int) -> int:
    """§7.1: +1 per Go for the first two, then doubled for each further Go."""
    if go_count <= 0:
        return points
    if go_count <= 2:
        return points + go_count
    return points << (go_count - 2)


def mask_payment(win: int, lose: int, go_count: int) -> Payment:
    """:func:`payment` on masks, unchecked."""
    s = mask_score(win)
    mult = mask_multipliers(win, lose, s)
    adj = go_adjusted(s.total, go_count)
    return Payment(s.total, adj, mult, adj << len(mult))


def payment(stopper_captured: Sequence[str], loser_captured: Sequence[str], go_count: int) -> Payment:
    """Payment points of a Stop (§7.1, §7.2)."""
    w = strict_mask(stopper_captured, "payment: stopper")
    lo = strict_mask(loser_captured, "payment: loser")
    if w & lo:
        raise CardError(f"payment: cards in both piles: {', '.join(codes(w & lo))}")
    if not isinstance(go_count, int) or isinstance(go_count, bool) or go_count < 0:
        raise ValueError(f"payment: go_count must be an int >= 0, got {go_count!r}")
    return mask_payment(w, lo, go_count)
