"""Helpers every game module shares: strict card lists and exact pay tables."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dealer.core.cards import Card, CardError, parse_card
from dealer.core.money import MoneyError, to_money


@dataclass(frozen=True, order=True)
class RankedHand:
    """A ranked hand: ordering compares ``(cat, key)`` only. Each game subclasses it, and
    dataclass ordering refuses to compare hands of two different games."""

    category: str = field(compare=False)
    cat: int
    key: tuple[int, ...]

    @property
    def rank_key(self) -> list[int]:
        """``[cat, *key]``: the full comparison key as a JSON-safe list."""
        return [self.cat, *self.key]


def parse_distinct(codes: Sequence[str], count: int) -> tuple[Card, ...]:
    """Parse exactly ``count`` distinct card codes (a duplicate means a bad scan or a bad test)."""
    if isinstance(codes, str):
        raise CardError(f"expected a sequence of {count} card codes, got the single string {codes!r}")
    if len(codes) != count:
        raise ValueError(f"expected exactly {count} cards, got {len(codes)}: {list(codes)}")
    cards = tuple(parse_card(code) for code in codes)
    duplicates = sorted(code for code, n in Counter(c.code for c in cards).items() if n > 1)
    if duplicates:
        raise CardError(f"duplicate card(s) {', '.join(duplicates)} in {list(codes)}")
    return cards


def exact_ratio(value: Any, what: str) -> Decimal:
    """A pay ratio as an exact, non-negative Decimal; floats are refused (§4 of decks.md)."""
    try:
        ratio = to_money(value)
    except MoneyError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if ratio < 0:
        raise ValueError(f"{what}: ratio {ratio} must be >= 0")
    return ratio


def pay_table(raw: Any, known: Sequence[str], what: str) -> dict[str, Decimal]:
    """A pay table must name exactly the known categories, each with an exact ratio."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{what} must be a mapping of category -> ratio, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(known))
    missing = [k for k in known if k not in raw]
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(f"unknown categories {unknown}")
        if missing:
            problems.append(f"missing categories {missing}")
        raise ValueError(f"{what}: {' and '.join(problems)} (expected exactly {list(known)})")
    return {k: exact_ratio(raw[k], f"{what}[{k!r}]") for k in known}


def check_distinct_positions(game: str, cards: Mapping[str, str], expected: Sequence[str]) -> None:
    """Every expected position holds a valid card, and no card sits at two positions."""
    seen: dict[str, str] = {}
    for position in expected:
        code = parse_card(cards[position]).code
        if code in seen:
            raise CardError(f"{game} resolve: card {code} is at both {seen[code]} and {position}")
        seen[code] = position


def hand_codes(game: str, cards: Mapping[str, str], hands: Mapping[str, Sequence[str]],
               extra_note: str) -> dict[str, tuple[str, ...]]:
    """Each hand's codes in position order, for ``resolve``: every position of ``hands``
    present, nothing extra (``extra_note`` says why there is nothing more), no duplicates."""
    expected = [p for positions in hands.values() for p in positions]
    missing = [p for p in expected if p not in cards]
    if missing:
        raise ValueError(f"{game} resolve: missing position(s) {missing} (need {expected})")
    extra = sorted(set(cards) - set(expected))
    if extra:
        raise ValueError(f"{game} resolve: unexpected position(s) {extra} ({extra_note})")
    check_distinct_positions(game, cards, expected)
    return {name: tuple(cards[p] for p in positions) for name, positions in hands.items()}
