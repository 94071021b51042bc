"""Three-card hands of a 52-card deck, counted without enumerating the pairs.

* **Hand pairs** (every ordered pair of disjoint three-card hands, 22,100 x 18,424 =
  407,170,400 pairs). Every three-card hand gets a dense integer value that encodes the
  game's total order ``(cat, key)``. For one hand H, the number of hands disjoint from H
  with a value below x follows by inclusion-exclusion: all hands below x (a sorted array
  and ``bisect``), minus the hands holding each of H's three cards (a sorted array per card,
  C(51,2) = 1,275 hands each), plus the hands holding each two of H's cards (a sorted array
  per pair, 50 hands each), minus H itself. See :class:`DisjointCounter`.
* **Six Card Bonus** (best five of six cards, C(52,6) = 20,358,520 sets). Sets are counted
  by *class*: a rank multiset (each rank at most four times) and a suit pattern. With at
  most four distinct ranks no flush or straight is possible and the category follows from
  the ranks alone. With five distinct ranks (2+1+1+1+1), 12 of the 6 x 4^4 suit assignments
  put the five ranks in one suit; with six distinct ranks, 4 assignments are all one suit
  and 72 have exactly five in one suit (12 for each left-out rank). Every other assignment
  has no flush. See :func:`six_card_classes`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from math import comb, prod
from typing import Any

from dealer.core.cards import RANK_VALUE, STANDARD_52

HANDS3 = comb(52, 3)  # 22,100 three-card hands
DISJOINT3 = comb(49, 3)  # 18,424 hands disjoint from a given hand
SIX_CARD_SETS = comb(52, 6)  # 20,358,520

#: How many hands between two calls of a ``progress`` callback.
PROGRESS_STEP = 1000


# --- Three-card hands and the disjoint-hand counter ----------------------------------------

#: All 22,100 three-card hands as sorted card-index triples (indices into STANDARD_52).
HAND_CARDS: tuple[tuple[int, int, int], ...] = tuple(combinations(range(52), 3))


def hand_codes(hand: Sequence[int]) -> tuple[str, ...]:
    return tuple(STANDARD_52[i] for i in hand)


def dense_values(hands: Sequence[Any]) -> list[int]:
    """Ranked hands (ordered objects) -> dense integer values with the same total order."""
    order = {h: i for i, h in enumerate(sorted(set(hands)))}
    return [order[h] for h in hands]


class DisjointCounter:
    """Counts three-card hands disjoint from a given hand with a value below a bound.

    ``values[i]`` is the (dense, totally ordered) value of ``HAND_CARDS[i]``.
    :meth:`below` is inclusion-exclusion over the three cards of the given hand:
    all - (holding card 1, 2 or 3) + (holding two of them) - (the hand itself).
    """

    def __init__(self, values: Sequence[int]) -> None:
        if len(values) != HANDS3:
            raise ValueError(f"need {HANDS3} hand values, got {len(values)}")
        self.values = list(values)
        per_card: list[list[int]] = [[] for _ in range(52)]
        per_pair: dict[tuple[int, int], list[int]] = {}
        for (a, b, c), v in zip(HAND_CARDS, self.values):
            per_card[a].append(v)
            per_card[b].append(v)
            per_card[c].append(v)
            for pair in ((a, b), (a, c), (b, c)):
                per_pair.setdefault(pair, []).append(v)
        self.all = sorted(self.values)
        self.per_card = [sorted(lst) for lst in per_card]
        self.per_pair = {k: sorted(lst) for k, lst in per_pair.items()}

    def below(self, index: int, bound: int) -> int:
        """Hands disjoint from ``HAND_CARDS[index]`` whose value is < ``bound``."""
        a, b, c = HAND_CARDS[index]
        pc, pp = self.per_card, self.per_pair
        n = (
            bisect_left(self.all, bound)
            - bisect_left(pc[a], bound) - bisect_left(pc[b], bound) - bisect_left(pc[c], bound)
            + bisect_left(pp[a, b], bound) + bisect_left(pp[a, c], bound) + bisect_left(pp[b, c], bound)
        )
        return n - (self.values[index] < bound)

    def less_equal(self, index: int) -> tuple[int, int]:
        """(disjoint hands ranked below this hand, disjoint hands ranked equal to it)."""
        v = self.values[index]
        less = self.below(index, v)
        return less, self.below(index, v + 1) - less


def category_counts(categories: Sequence[str]) -> dict[str, int]:
    return dict(Counter(categories))


# --- Six Card Bonus classes -----------------------------------------------------------------

_RANKS = tuple(range(2, 15))
_ROYAL = frozenset({10, 11, 12, 13, 14})


def _straights(wheel_allowed: bool) -> tuple[frozenset[int], ...]:
    runs = [frozenset(range(top - 4, top + 1)) for top in range(6, 15)]
    if wheel_allowed:
        runs.append(frozenset({14, 2, 3, 4, 5}))
    return tuple(runs)


@dataclass(frozen=True)
class SixCardClass:
    """A rank multiset with a suit pattern, the number of 6-card sets in it and their category.

    ``counts`` maps rank (2..14) -> multiplicity. ``pattern`` is ``any`` (category from
    ranks alone), ``suited6`` (all six cards one suit), ``suited5`` (the five distinct
    ranks one suit, 2+1+1+1+1), ``suited5-R`` (six distinct ranks, all but rank R one
    suit) or ``offsuit`` (no five cards share a suit).
    """

    counts: tuple[tuple[int, int], ...]
    pattern: str
    sets: int
    category: str | None

    def example(self) -> tuple[str, ...]:
        """One concrete 6-card hand of this class (chosen to come as close to a flush as the
        pattern allows, so that a wrong class would show in a check)."""
        code = {r: c for c, r in RANK_VALUE.items()}
        ranks = [r for r, n in self.counts for _ in range(n)]
        distinct = [r for r, _ in self.counts]
        cards: list[str] = []
        if self.pattern == "any":
            used: Counter[int] = Counter()
            for r in ranks:
                cards.append(code[r] + "SHDC"[used[r]])
                used[r] += 1
        elif self.pattern == "suited6":
            cards = [code[r] + "S" for r in ranks]
        elif self.pattern.startswith("suited5-"):
            out = int(self.pattern.split("-")[1])
            cards = [code[r] + ("H" if r == out else "S") for r in ranks]
        elif self.pattern == "suited5":  # 2+1+1+1+1: every rank in spades, the pair's second card in hearts
            pair = next(r for r, n in self.counts if n == 2)
            cards = [code[r] + "S" for r in distinct] + [code[pair] + "H"]
        elif self.pattern == "offsuit":
            if len(distinct) == 6:  # four spades and two hearts
                cards = [code[r] + ("S" if i < 4 else "H") for i, r in enumerate(distinct)]
            else:  # 2+1+1+1+1: the four single ranks in spades, the pair in hearts and diamonds
                pair = next(r for r, n in self.counts if n == 2)
                cards = [code[r] + "S" for r in distinct if r != pair] + [code[pair] + "H", code[pair] + "D"]
        else:  # pragma: no cover - constructed only here
            raise ValueError(self.pattern)
        return tuple(cards)


def _rank_multisets(size: int = 6, ranks: Sequence[int] = _RANKS) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every multiset of ``size`` ranks with each rank at most 4 times, as ((rank, count), ...)."""

    def rec(i: int, left: int, acc: list[tuple[int, int]]) -> Iterator[tuple[tuple[int, int], ...]]:
        if left == 0:
            yield tuple(acc)
            return
        if i == len(ranks):
            return
        for n in range(min(4, left), -1, -1):
            if n:
                acc.append((ranks[i], n))
            yield from rec(i + 1, left - n, acc)
            if n:
                acc.pop()

    yield from rec(0, size, [])


def _suited_category(suited: frozenset[int], straights: Sequence[frozenset[int]]) -> str:
    """Five or six ranks all of one suit: royal flush, straight flush or flush."""
    if _ROYAL <= suited:
        return "royal_flush"
    return "straight_flush" if any(s <= suited for s in straights) else "flush"


def six_card_classes(wheel_allowed: bool = True) -> list[SixCardClass]:
    """Every class of 6-card sets with its set count and best-five-of-six category (§3.4).
    Built once per process for each wheel rule (``dealer run`` reports every table)."""
    return list(_six_card_classes(bool(wheel_allowed)))


@cache
def _six_card_classes(wheel_allowed: bool) -> tuple[SixCardClass, ...]:
    straights = _straights(wheel_allowed)
    out: list[SixCardClass] = []
    for counts in _rank_multisets():
        shape = sorted((n for _, n in counts), reverse=True)
        ranks = frozenset(r for r, _ in counts)
        total = prod(comb(4, n) for _, n in counts)
        has_straight = any(s <= ranks for s in straights)
        if len(counts) <= 4:
            if shape[0] == 4:
                cat: str | None = "four_of_a_kind"
            elif shape[0] == 3 and shape[1] >= 2:
                cat = "full_house"  # 3+3 and 3+2+1
            elif shape[0] == 3:
                cat = "three_of_a_kind"  # 3+1+1+1
            else:
                cat = None  # 2+2+2, 2+2+1+1: two pair
            out.append(SixCardClass(counts, "any", total, cat))
        elif len(counts) == 5:  # 2+1+1+1+1: 6 * 4^4 = 1536 suit assignments
            out.append(SixCardClass(counts, "suited5", 12, _suited_category(ranks, straights)))
            out.append(SixCardClass(counts, "offsuit", total - 12, "straight" if has_straight else None))
        else:  # six distinct ranks: 4^6 = 4096 suit assignments
            out.append(SixCardClass(counts, "suited6", 4, _suited_category(ranks, straights)))
            for r in sorted(ranks):
                out.append(SixCardClass(counts, f"suited5-{r}", 12, _suited_category(ranks - {r}, straights)))
            out.append(SixCardClass(counts, "offsuit", total - 4 - 72, "straight" if has_straight else None))
    return tuple(out)


def six_card_category_counts(wheel_allowed: bool = True) -> dict[str | None, int]:
    counts: Counter[str | None] = Counter()
    for cls in six_card_classes(wheel_allowed):
        counts[cls.category] += cls.sets
    return dict(counts)
