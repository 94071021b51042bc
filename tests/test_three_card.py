"""The one three-card evaluator (dealer/games/three_card.py) ranks every hand as the two
evaluators it replaced did.

Teen Patti and Sevenluck each had their own evaluator until issue 15. The recorded output
below is theirs (commit 6b20c88, before the merge): for every one of the 22,100 three-card
hands, in ``combinations(STANDARD_52, 3)`` order, the line ``"<codes>:<category>:<rank key>"``
(see :func:`listing`), hashed. Rank keys travel in results (``details.rank_keys``) and decide
every comparison, so equal listings mean equal behaviour on every hand.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import combinations

import pytest

from dealer.core.cards import STANDARD_52
from dealer.games import sevenluck, teen_patti, three_card
from dealer.games._common import RankedHand

HANDS = list(combinations(STANDARD_52, 3))

#: sha256 of :func:`listing` for each game's ``evaluate3`` at commit 6b20c88 (before the merge).
RECORDED = {
    "teen-patti": "ed224f597b22594a8350efed06f38fa1f20db2a7d2680549da8fda1730395765",
    "sevenluck": "c5f7f6288d4ffd769d42455925b748d9310e6aa998e279443445e669088b3619",
}

#: Hands per category over all 22,100 (the well-known three-card counts), as a readable
#: first check before the digest: a mismatch here says which category moved.
COUNTS = {
    "teen-patti": {"trail_of_aces": 4, "three_of_a_kind": 48, "straight_flush": 48, "straight": 720,
                   "flush": 1096, "pair": 3744, "high_card": 16440},
    "sevenluck": {"three_of_a_kind": 52, "straight_flush": 48, "straight": 720,
                  "flush": 1096, "pair": 3744, "high_card": 16440},
}

EVALUATORS: dict[str, Callable[[Sequence[str]], RankedHand]] = {
    "teen-patti": teen_patti.evaluate3,
    "sevenluck": sevenluck.evaluate3,
}


def listing(evaluate: Callable[[Sequence[str]], RankedHand]) -> str:
    """One line per hand: its codes, its category name and its full rank key."""
    lines = []
    for codes in HANDS:
        hand = evaluate(codes)
        lines.append(f"{' '.join(codes)}:{hand.category}:{','.join(map(str, hand.rank_key))}\n")
    return "".join(lines)


@pytest.mark.parametrize("game", sorted(EVALUATORS))
def test_every_hand_ranks_as_before(game: str) -> None:
    text = listing(EVALUATORS[game])
    assert len(HANDS) == 22_100
    assert dict(Counter(line.split(":")[1] for line in text.splitlines())) == COUNTS[game]
    assert hashlib.sha256(text.encode()).hexdigest() == RECORDED[game]


def test_the_games_rank_with_the_shared_rankings() -> None:
    """The games' public functions are the shared evaluator with their own ranking, nothing else."""
    assert teen_patti.evaluate3 == three_card.TEEN_PATTI.evaluate
    assert teen_patti.compare3 == three_card.TEEN_PATTI.compare
    assert sevenluck.evaluate3 == three_card.SEVENLUCK.evaluate
    assert sevenluck.compare3 == three_card.SEVENLUCK.compare
    assert teen_patti.HAND3_CATEGORIES == {"trail_of_aces": 7, "three_of_a_kind": 6, "straight_flush": 5,
                                           "straight": 4, "flush": 3, "pair": 2, "high_card": 1}
    assert sevenluck.SL_CATEGORIES == {"straight_flush": 6, "three_of_a_kind": 5, "straight": 4,
                                       "flush": 3, "pair": 2, "high_card": 1}


@pytest.mark.parametrize(("ranking", "a23", "lowest", "highest"), [
    (three_card.TEEN_PATTI, 11, ({4, 3, 2}, 1), ({14, 13, 12}, 12)),
    (three_card.SEVENLUCK, 3, ({14, 2, 3}, 3), ({14, 13, 12}, 14)),
])
def test_twelve_sequences_and_no_wrap_around(ranking: three_card.ThreeCardRanking[RankedHand], a23: int,
                                             lowest: tuple[set[int], int], highest: tuple[set[int], int]) -> None:
    keys = ranking.sequences
    assert len(keys) == 12 and sorted(keys.values()) == list(range(lowest[1], lowest[1] + 12))
    assert keys[frozenset({14, 2, 3})] == a23
    assert keys[frozenset(lowest[0])] == lowest[1] and keys[frozenset(highest[0])] == highest[1]
    assert frozenset({13, 14, 2}) not in keys and frozenset({12, 13, 14}) in keys


@pytest.mark.parametrize("order", [
    ("straight_flush", "three_of_a_kind", "straight", "flush", "pair"),  # high_card missing
    ("straight_flush", "straight_flush", "three_of_a_kind", "straight", "flush", "pair", "high_card"),
    ("royal", "straight_flush", "three_of_a_kind", "straight", "flush", "pair", "high_card"),
])
def test_a_ranking_names_each_category_once(order: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="names each of"):
        three_card.ThreeCardRanking(three_card.SLHand, order=order, a23="lowest", lowest_sequence_key=3)
