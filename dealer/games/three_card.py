"""Three-card hands, ranked by one evaluator for every game that deals them.

Teen Patti (`teen-patti-2020.md` §3) and Sevenluck (`sevenluck-poker.md` §3) deal the same
hands and name the same categories. They differ only in the order of the categories (Teen
Patti puts three of a kind above a straight flush and three aces in a category of their own)
and in A-2-3 (Teen Patti: the second-best sequence; Sevenluck: the lowest, the ace playing
low). A :class:`ThreeCardRanking` states exactly those differences; :meth:`~ThreeCardRanking.evaluate`
does the rest, the same way for both. :data:`TEEN_PATTI` and :data:`SEVENLUCK` are the two
games' rankings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from dealer.games._common import RankedHand, parse_distinct

TRAIL_OF_ACES = "trail_of_aces"
#: Every category a ranking may order; all but :data:`TRAIL_OF_ACES` are required.
CATEGORIES = frozenset({TRAIL_OF_ACES, "three_of_a_kind", "straight_flush", "straight", "flush", "pair", "high_card"})

_A23 = frozenset({14, 2, 3})
#: The other eleven sequences, lowest first: 4-3-2 .. A-K-Q (ace high). A table rather than
#: "consecutive ranks" arithmetic, so that K-A-2 and other wrap-arounds are simply absent.
_RUNS = tuple(frozenset({top, top - 1, top - 2}) for top in range(4, 15))

H = TypeVar("H", bound=RankedHand)


@dataclass(frozen=True, order=True)
class Hand3(RankedHand):
    """A ranked Teen Patti three-card hand (§3.3)."""


@dataclass(frozen=True, order=True)
class SLHand(RankedHand):
    """A ranked Sevenluck three-card hand (§3.3)."""


@dataclass(frozen=True)
class ThreeCardRanking(Generic[H]):
    """How one game ranks three-card hands; ``evaluate`` gives each hand ``(cat, key)``.

    * ``hand_type``: the game's own hand class (hands of two games never compare).
    * ``order``: the category names, best first; the best gets ``cat == len(order)``, the
      worst 1. Holding :data:`TRAIL_OF_ACES` makes three aces that category instead of
      three of a kind.
    * ``a23``: where A-2-3 stands among the twelve sequences: ``"second"`` (just below
      A-K-Q) or ``"lowest"`` (below 4-3-2).
    * ``lowest_sequence_key``: the key of the lowest sequence; each higher one adds 1.

    Keys within a category: three of a kind by its rank, a sequence by its place, a flush
    and a high card by the three ranks high to low, a pair by (pair rank, kicker).
    """

    hand_type: type[H]
    order: tuple[str, ...]
    a23: Literal["second", "lowest"]
    lowest_sequence_key: int
    #: Category name -> cat value (a greater value is a better hand); derived from ``order``.
    categories: dict[str, int] = field(init=False, compare=False)
    #: The ranks of each sequence -> its key; derived from ``a23`` and ``lowest_sequence_key``.
    sequences: dict[frozenset[int], int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        names = set(self.order)
        if len(names) != len(self.order) or not CATEGORIES - {TRAIL_OF_ACES} <= names <= CATEGORIES:
            raise ValueError(f"a three-card order names each of {sorted(CATEGORIES)} once"
                             f" ({TRAIL_OF_ACES} optional), got {list(self.order)}")
        runs = list(_RUNS)
        runs.insert(len(runs) - 1 if self.a23 == "second" else 0, _A23)
        object.__setattr__(self, "categories", {n: len(self.order) - i for i, n in enumerate(self.order)})
        object.__setattr__(self, "sequences", {r: self.lowest_sequence_key + i for i, r in enumerate(runs)})

    def evaluate(self, codes: Sequence[str]) -> H:
        """Rank three distinct cards."""
        cards = parse_distinct(codes, 3)
        ranks = sorted((c.rank for c in cards), reverse=True)
        flush = len({c.suit for c in cards}) == 1
        seq = self.sequences.get(frozenset(ranks))
        key: tuple[int, ...]
        if ranks[0] == ranks[2]:
            aces = ranks[0] == 14 and TRAIL_OF_ACES in self.categories
            name, key = (TRAIL_OF_ACES if aces else "three_of_a_kind"), (ranks[0],)
        elif seq is not None:
            name, key = ("straight_flush" if flush else "straight"), (seq,)
        elif flush:
            name, key = "flush", tuple(ranks)
        elif ranks[0] == ranks[1] or ranks[1] == ranks[2]:
            pair = ranks[1]  # the middle card of a sorted pair hand is always in the pair
            kicker = ranks[2] if ranks[0] == ranks[1] else ranks[0]
            name, key = "pair", (pair, kicker)
        else:
            name, key = "high_card", tuple(ranks)
        return self.hand_type(name, self.categories[name], key)

    def hand(self, hand: H | Sequence[str]) -> H:
        """A ranked hand as it is, card codes ranked."""
        return hand if isinstance(hand, self.hand_type) else self.evaluate(hand)  # type: ignore[arg-type]  # isinstance on hand_type does not narrow away H

    def compare(self, a: H | Sequence[str], b: H | Sequence[str]) -> int:
        """1 if ``a`` beats ``b``, -1 if ``b`` beats ``a``, 0 for a tie. Accepts hands or codes."""
        ha, hb = self.hand(a), self.hand(b)
        return (ha > hb) - (ha < hb)


#: Teen Patti §3.3: trail of aces, trail, pure sequence, sequence, colour, pair, high card;
#: sequences by index s (§3.2): 4-3-2 1 .. K-Q-J 10, A-2-3 11, A-K-Q 12.
TEEN_PATTI: ThreeCardRanking[Hand3] = ThreeCardRanking(
    Hand3,
    order=(TRAIL_OF_ACES, "three_of_a_kind", "straight_flush", "straight", "flush", "pair", "high_card"),
    a23="second",
    lowest_sequence_key=1,
)

#: Sevenluck §3.3: a straight flush beats three of a kind, a straight beats a flush; sequences
#: by their top card with the ace low in A-2-3: A-2-3 3, 4-3-2 4 .. A-K-Q 14.
SEVENLUCK: ThreeCardRanking[SLHand] = ThreeCardRanking(
    SLHand,
    order=("straight_flush", "three_of_a_kind", "straight", "flush", "pair", "high_card"),
    a23="lowest",
    lowest_sequence_key=3,
)
