"""Seven-Card Stud hand evaluation (`seven-card-stud.md` §3.2, §3.3, §5, §6.3).

* :func:`evaluate` ranks 5-7 cards with phevaluator (a maintained perfect-hash
  evaluator): the ranking is the library's; our code only converts the codes,
  finds the best five and words the dealer's announcement.
* :func:`showing_key` / :func:`first_to_act` pick the high hand from the up cards
  and :func:`low_card` the bring-in (our code: partial hands, where straights and
  flushes do not count and suits only break low-card ties).
* :func:`odd_chip_key` orders tied winners for an indivisible unit (§6.3).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from phevaluator import evaluate_cards

from dealer.core.cards import Card, CardError, parse_card
from dealer.games._common import parse_distinct

ROYAL_FLUSH = "ROYAL_FLUSH"
STRAIGHT_FLUSH = "STRAIGHT_FLUSH"
FOUR_OF_A_KIND = "FOUR_OF_A_KIND"
FULL_HOUSE = "FULL_HOUSE"
FLUSH = "FLUSH"
STRAIGHT = "STRAIGHT"
THREE_OF_A_KIND = "THREE_OF_A_KIND"
TWO_PAIR = "TWO_PAIR"
ONE_PAIR = "ONE_PAIR"
HIGH_CARD = "HIGH_CARD"

#: phevaluator ranks run from 1 (royal flush) to 7462 (7-5-4-3-2 offsuit); each
#: category is a contiguous block ending at these ranks (§5.1 order, best first).
_CATEGORY_LAST_RANK: tuple[tuple[int, str], ...] = (
    (1, ROYAL_FLUSH), (10, STRAIGHT_FLUSH), (166, FOUR_OF_A_KIND), (322, FULL_HOUSE), (1599, FLUSH),
    (1609, STRAIGHT), (2467, THREE_OF_A_KIND), (3325, TWO_PAIR), (6185, ONE_PAIR), (7462, HIGH_CARD),
)
_LAST_RANKS = tuple(last for last, _ in _CATEGORY_LAST_RANK)
WORST_RANK = 7462

#: §1: Spade > Heart > Diamond > Club, used only for the low card and the odd chip.
SUIT_ORDER: dict[str, int] = {"C": 0, "D": 1, "H": 2, "S": 3}
_SUIT_NAME = {"S": "spades", "H": "hearts", "D": "diamonds", "C": "clubs"}
_RANK_WORD = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
              10: "ten", 11: "jack", 12: "queen", 13: "king", 14: "ace"}
_WHEEL = {14, 5, 4, 3, 2}


@dataclass(frozen=True, order=True)
class StudHand:
    """A ranked stud hand; ordering and equality use ``rank_key`` only, so equal hands
    tie whatever their suits (§5.2: suits never break a tie)."""

    rank_key: tuple[int, ...]
    category: str = field(compare=False)
    best_five: tuple[str, ...] = field(compare=False)
    name: str = field(compare=False)
    cards: tuple[str, ...] = field(compare=False)


def _word(rank: int) -> str:
    return _RANK_WORD[rank]


def _plural(rank: int) -> str:
    word = _word(rank)
    return word + ("es" if word.endswith("x") else "s")


def _parse(codes: Sequence[str], least: int, most: int, what: str) -> tuple[Card, ...]:
    """Between ``least`` and ``most`` distinct valid codes (strings are refused by parse_distinct)."""
    if not isinstance(codes, str) and not least <= len(codes) <= most:
        span = f"{least}" if least == most else f"{least} to {most}"
        raise ValueError(f"{what} needs {span} cards, got {len(codes)}: {list(codes)}")
    return parse_distinct(codes, len(codes))


def _card_order(card: Card) -> tuple[int, int]:
    return card.rank, SUIT_ORDER[card.suit]


def _ph_rank(cards: Sequence[Card]) -> int:
    """phevaluator's rank (1 = best); its codes are ours with a lower-case suit (``TD`` -> ``Td``)."""
    rank: int = evaluate_cards(*(c.code[0] + c.suit.lower() for c in cards))  # phevaluator ships no types
    return rank


def _announced(five: Sequence[Card], category: str) -> list[Card]:
    """The five in announcement order: biggest group first, then rank; ace low in a 5-high straight."""
    counts = Counter(c.rank for c in five)
    wheel = category in (STRAIGHT_FLUSH, STRAIGHT) and set(counts) == _WHEEL

    def value(c: Card) -> int:
        return 1 if wheel and c.rank == 14 else c.rank

    return sorted(five, key=lambda c: (counts[c.rank], value(c), SUIT_ORDER[c.suit]), reverse=True)


def _hand_name(category: str, five: Sequence[Card]) -> str:
    r = [c.rank for c in five]
    top = 5 if category in (STRAIGHT_FLUSH, STRAIGHT) and set(r) == _WHEEL else r[0]
    return {
        ROYAL_FLUSH: "royal flush",
        STRAIGHT_FLUSH: f"straight flush, {_word(top)} high",
        FOUR_OF_A_KIND: f"four of a kind, {_plural(r[0])}",
        FULL_HOUSE: f"full house, {_plural(r[0])} full of {_plural(r[3])}",
        FLUSH: f"flush, {_word(r[0])} high",
        STRAIGHT: f"straight, {_word(top)} high",
        THREE_OF_A_KIND: f"three of a kind, {_plural(r[0])}",
        TWO_PAIR: f"two pair, {_plural(r[0])} and {_plural(r[2])}",
        ONE_PAIR: f"pair of {_plural(r[0])}",
        HIGH_CARD: f"high card, {_word(r[0])}",
    }[category]


def evaluate(cards: Sequence[str]) -> StudHand:
    """Best five-card hand of 5, 6 or 7 distinct cards (§5.2: always all of them, seed 14(2))."""
    parsed = _parse(cards, 5, 7, "a stud hand")
    rank = _ph_rank(parsed)
    category = _CATEGORY_LAST_RANK[bisect_left(_LAST_RANKS, rank)][1]
    # Deterministic best five: the first subset (high cards and high suits first) that reaches the rank.
    ordered = sorted(parsed, key=_card_order, reverse=True)
    best = next(five for five in combinations(ordered, 5) if _ph_rank(five) == rank)
    five = _announced(best, category)
    return StudHand(
        rank_key=(WORST_RANK + 1 - rank,),
        category=category,
        best_five=tuple(c.code for c in five),
        name=_hand_name(category, five),
        cards=tuple(c.code for c in parsed),
    )


# --- Up cards: bring-in and high hand (§3.2, §3.3) ---------------------------------------

_SHOWING_NAMES = ("high card", "pair", "two pair", "three of a kind", "four of a kind")


def showing_key(up_cards: Sequence[str]) -> tuple[int, ...]:
    """§3.3 partial-hand key ``(category, group ranks...)``: quads 4, trips 3, two pair 2,
    pair 1, high card 0, then the ranks by group size and rank. No straights or flushes, no suits.
    Up to 5 cards, so a §3.6 community card can be included on 7th street."""
    counts = Counter(c.rank for c in _parse(up_cards, 1, 5, "a showing hand"))
    groups = sorted(((n, rank) for rank, n in counts.items()), reverse=True)
    sizes = [n for n, _ in groups]
    category = {4: 4, 3: 3}.get(sizes[0], 2 if sizes[:2] == [2, 2] else 1 if sizes[0] == 2 else 0)
    return (category, *(rank for _, rank in groups))


def showing_name(up_cards: Sequence[str]) -> str:
    """The dealer's designation of a showing hand: "king high", "pair of sixes", ..."""
    category, first, *rest = showing_key(up_cards)
    if category == 0:
        return f"{_word(first)} high"
    if category == 1:
        return f"pair of {_plural(first)}"
    if category == 2:
        return f"two pair, {_plural(first)} and {_plural(rest[0])}"
    return f"{_SHOWING_NAMES[category]}, {_plural(first)}"


def first_to_act(showing: Sequence[tuple[int, Sequence[str]]]) -> int:
    """Seat with the best showing hand; ties go to the seat dealt first, i.e. earlier in ``showing``
    (which must be in dealing order). Cards may repeat across seats: a §3.6 community card does."""
    if not showing:
        raise ValueError("first_to_act needs at least one active seat")
    return max(showing, key=lambda seat_up: showing_key(seat_up[1]))[0]  # max keeps the first of equals


def low_card(up: Sequence[tuple[int, str]]) -> int:
    """Seat holding the lowest up card (§3.2): rank with A high, ties Club < Diamond < Heart < Spade."""
    if not up:
        raise ValueError("low_card needs at least one up card")
    cards = parse_distinct([code for _, code in up], len(up))
    return min(zip((seat for seat, _ in up), cards), key=lambda seat_card: _card_order(seat_card[1]))[0]


def card_name(code: str) -> str:
    """``2H`` -> "two of hearts", for the announcement "Two of hearts, low"."""
    card = parse_card(code)
    return f"{_word(card.rank)} of {_SUIT_NAME[card.suit]}"


# --- Showdown (§6.3) -----------------------------------------------------------------------


def odd_chip_key(best_five: Sequence[str]) -> tuple[int, int]:
    """(rank, suit order) of the highest-ranked card of a best five; a higher key gets the odd
    chip first. In a 5-high straight the ace plays low, so the five is its highest card."""
    cards = _parse(best_five, 5, 5, "a best five")
    wheel = {c.rank for c in cards} == _WHEEL
    return max((1 if wheel and c.rank == 14 else c.rank, SUIT_ORDER[c.suit]) for c in cards)


def hand_report(cards: list[str], vs: list[list[str]]) -> dict[str, Any]:
    """JSON-safe report for ``dealer hand stud AS AH KD QC 9S 4D 2C --vs AD AC KH QD 9H 3S 2S``.

    Hand 0 is ``cards``, hands 1.. are the ``vs`` hands. The outcome is ``winner`` (an index)
    or, for a tie, ``split`` (the tied indices) with ``odd_chip_order`` (§6.3).
    """
    if isinstance(vs, str) or not vs:
        raise ValueError("stud needs at least one --vs hand")
    hands = [evaluate(hand) for hand in [cards, *vs]]
    counts = Counter(code for hand in hands for code in hand.cards)
    shared = sorted(code for code, n in counts.items() if n > 1)
    if shared:
        raise CardError(f"card(s) {', '.join(shared)} in more than one hand")
    best = max(hands)
    tied = [i for i, hand in enumerate(hands) if hand == best]
    return {
        "game": "stud",
        "hands": [
            {"cards": list(h.cards), "best_five": list(h.best_five), "category": h.category, "name": h.name,
             "rank_key": list(h.rank_key)}
            for h in hands
        ],
        "winner": tied[0] if len(tied) == 1 else None,
        "split": tied if len(tied) > 1 else None,
        "odd_chip_order": (sorted(tied, key=lambda i: odd_chip_key(hands[i].best_five), reverse=True)
                           if len(tied) > 1 else None),
    }
