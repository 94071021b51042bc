"""Teen Patti 20-20 (`teen-patti-2020.md`): two three-card hands, A and B, dealt face up.

Players bet on the result (A / B / Tie) and on side bets (Pair Plus per hand,
Six Card Bonus over all six cards). Nothing is decided after betting closes,
so the game is a pure function of the six registered cards and the options.

* :func:`evaluate3` / :func:`compare3` rank a three-card hand exactly as §3.3
  (:mod:`dealer.games.three_card` with Teen Patti's order, which is not poker's: e.g.
  trips beat a straight flush and A-2-3 is the second-best sequence).
* :func:`six_card_bonus` takes the best five of the six cards (§3.4) with the
  standard five-card ranking from pokerkit, plus the house option that can
  refuse the wheel A-2-3-4-5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import combinations
from typing import Any, Literal

from pokerkit import Label, StandardHighHand
from pydantic import Field, ValidationInfo, field_validator

from dealer.core.cards import CARD_ID, STANDARD_52, Card, CardError
from dealer.core.game_contract import Game
from dealer.core.game_records import BetResolution, BetView, Face, GameOutcome, HandInfo, Outcome, Position
from dealer.games.base import GameOptions
from dealer.games._common import exact_ratio, hand_codes, pay_table, parse_distinct
from dealer.games.three_card import TEEN_PATTI, Hand3

# --- Three-card ranking (§3) -----------------------------------------------------------

#: Category name -> category value (§3.1); a greater value is a better hand.
HAND3_CATEGORIES: dict[str, int] = TEEN_PATTI.categories
#: The 12 sequences of §3.2 -> index s: A-K-Q 12, A-2-3 11, K-Q-J 10 ... 4-3-2 1.
SEQUENCE_INDEX: dict[frozenset[int], int] = TEEN_PATTI.sequences
#: Rank three distinct cards per §3.3 (:mod:`dealer.games.three_card` with Teen Patti's order).
evaluate3 = TEEN_PATTI.evaluate
#: 1 if ``a`` beats ``b``, -1 if ``b`` beats ``a``, 0 for a tie (§3.3). Accepts hands or codes.
compare3 = TEEN_PATTI.compare


# --- Six Card Bonus (§3.4) -------------------------------------------------------------

#: Six Card Bonus category name -> value (§3.4); anything lower (value 0) loses.
SIX_CARD_CATEGORIES: dict[str, int] = {
    "royal_flush": 7,
    "straight_flush": 6,
    "four_of_a_kind": 5,
    "full_house": 4,
    "flush": 3,
    "straight": 2,
    "three_of_a_kind": 1,
}

_LABEL_TO_CATEGORY: dict[Label, str | None] = {
    Label.STRAIGHT_FLUSH: "straight_flush",
    Label.FOUR_OF_A_KIND: "four_of_a_kind",
    Label.FULL_HOUSE: "full_house",
    Label.FLUSH: "flush",
    Label.STRAIGHT: "straight",
    Label.THREE_OF_A_KIND: "three_of_a_kind",
    Label.TWO_PAIR: None,
    Label.ONE_PAIR: None,
    Label.HIGH_CARD: None,
}
_ROYAL_RANKS = frozenset({14, 13, 12, 11, 10})
_WHEEL_RANKS = frozenset({14, 5, 4, 3, 2})


@dataclass(frozen=True)
class SixCardHand:
    """The best five of six cards: ``category`` is None when it is below three of a kind."""

    category: str | None
    best_five: tuple[str, ...]

    @property
    def cat(self) -> int:
        """The category value of §3.4 (0 = below three of a kind, the bet loses)."""
        return SIX_CARD_CATEGORIES[self.category] if self.category else 0


def _pokerkit_code(card: Card) -> str:
    """Our ``TD`` is pokerkit's ``Td`` (rank upper case, suit lower case)."""
    return card.code[0] + card.suit.lower()


def _rate_five(cards: Sequence[Card], wheel_allowed: bool) -> tuple[str | None, int]:
    """Category of five cards plus pokerkit's strength index (for choosing among equal categories).

    A refused wheel has no pokerkit entry of its own, so it is downgraded by
    hand: five distinct ranks make it a flush if suited, otherwise nothing.
    Its strength is -1, below every other hand of its category; that is exact,
    because any other five-card flush from the same six cards holds the ace
    and a card above the five.
    """
    ranks = frozenset(c.rank for c in cards)
    suited = len({c.suit for c in cards}) == 1
    if not wheel_allowed and ranks == _WHEEL_RANKS:
        return ("flush" if suited else None), -1
    entry = StandardHighHand("".join(_pokerkit_code(c) for c in cards)).entry
    category = _LABEL_TO_CATEGORY[entry.label]
    if category == "straight_flush" and ranks == _ROYAL_RANKS:
        category = "royal_flush"
    return category, entry.index


def six_card_bonus(codes: Sequence[str], wheel_allowed: bool = True) -> SixCardHand:
    """Best five-card hand among the six dealt cards (§3.4); only its category is paid.

    Every 5-card subset is rated and the best (category, strength) wins, so a
    six-card set holding a full house is a full house whatever else it holds.
    """
    cards = parse_distinct(codes, 6)
    best: tuple[int, int] | None = None
    best_cards: tuple[Card, ...] = ()
    best_category: str | None = None
    for five in combinations(cards, 5):
        category, strength = _rate_five(five, wheel_allowed)
        score = (SIX_CARD_CATEGORIES[category] if category else 0, strength)
        if best is None or score > best:
            best, best_cards, best_category = score, five, category
    ordered = tuple(sorted((c.code for c in best_cards), key=CARD_ID.__getitem__))
    return SixCardHand(best_category, ordered)


# --- Options (house options and pay tables) --------------------------------------------

PAIR_PLUS_CATEGORIES: tuple[str, ...] = tuple(n for n in HAND3_CATEGORIES if n != "high_card")


def _default_pair_plus() -> dict[str, Decimal]:
    return {
        "trail_of_aces": Decimal("50"),
        "three_of_a_kind": Decimal("40"),
        "straight_flush": Decimal("30"),
        "straight": Decimal("6"),
        "flush": Decimal("3"),
        "pair": Decimal("1"),
    }


def _default_six_card_bonus() -> dict[str, Decimal]:
    return {
        "royal_flush": Decimal("1000"),
        "straight_flush": Decimal("200"),
        "four_of_a_kind": Decimal("100"),
        "full_house": Decimal("20"),
        "flush": Decimal("15"),
        "straight": Decimal("10"),
        "three_of_a_kind": Decimal("7"),
    }


class TeenPattiOptions(GameOptions):
    """House options (§2.2, §3.4, §4) and pay tables (§5) of one Teen Patti table."""

    deal_order: Literal["ALTERNATE", "BLOCK"] = "ALTERNATE"
    burn_cards: Literal[0, 1] = 0
    six_card_wheel: Literal["ALLOWED", "NOT_ALLOWED"] = "ALLOWED"
    allow_opposite_main_bets: bool = True
    main_ratio: Decimal = Decimal("0.95")
    tie_ratio: Decimal = Decimal("50")
    pair_plus: dict[str, Decimal] = Field(default_factory=_default_pair_plus)
    six_card_bonus: dict[str, Decimal] = Field(default_factory=_default_six_card_bonus)

    @field_validator("main_ratio", "tie_ratio", mode="before")
    @classmethod
    def _check_ratio(cls, value: Any, info: ValidationInfo) -> Decimal:
        return exact_ratio(value, str(info.field_name))

    @field_validator("pair_plus", mode="before")
    @classmethod
    def _check_pair_plus(cls, value: Any) -> dict[str, Decimal]:
        return pay_table(value, PAIR_PLUS_CATEGORIES, "pair_plus")

    @field_validator("six_card_bonus", mode="before")
    @classmethod
    def _check_six_card_bonus(cls, value: Any) -> dict[str, Decimal]:
        return pay_table(value, tuple(SIX_CARD_CATEGORIES), "six_card_bonus")


# --- The game -------------------------------------------------------------------------

HAND_POSITIONS: dict[str, tuple[str, ...]] = {"A": ("A1", "A2", "A3"), "B": ("B1", "B2", "B3")}
_DEAL_ORDERS: dict[str, tuple[str, ...]] = {
    "ALTERNATE": ("A1", "B1", "A2", "B2", "A3", "B3"),
    "BLOCK": ("A1", "A2", "A3", "B1", "B2", "B3"),
}
_DECK = frozenset(STANDARD_52)
_LOSE = BetResolution(Outcome.LOSE)
_PUSH = BetResolution(Outcome.PUSH)


class TeenPatti(Game):
    """Teen Patti 20-20: no decisions after betting, so resolve() is the whole game."""

    name = "teen-patti"
    Options = TeenPattiOptions
    bet_types = ("player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus")

    options: TeenPattiOptions

    @property
    def deck(self) -> frozenset[str]:
        return _DECK

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        """§2.2: six face-up cards, optionally after one burn card that is never shown."""
        burn_count = self.options.burn_cards
        burns = tuple(Position(f"BURN{i}", Face.DOWN, burn=True) for i in range(1, burn_count + 1))
        return burns + tuple(Position(name, Face.UP) for name in _DEAL_ORDERS[self.options.deal_order])

    def check_bet(self, bet_type: str, held: frozenset[str]) -> str | None:
        """§4: HOUSE OPTION ALLOW_OPPOSITE_MAIN_BETS may forbid holding both Player A and Player B."""
        reason = super().check_bet(bet_type, held)
        if reason is not None or self.options.allow_opposite_main_bets:
            return reason
        opposite = {"player_a": "player_b", "player_b": "player_a"}.get(bet_type)
        if opposite is not None and opposite in held:
            return (
                f"{bet_type} may not be combined with {opposite} at this table"
                " (opposite main bets are not allowed)"
            )
        return None

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """§5: settle all six bet types from the six registered cards A1..B3."""
        hand_codes = _hand_codes(cards)
        a, b = evaluate3(hand_codes["A"]), evaluate3(hand_codes["B"])
        result = compare3(a, b)
        winner = "A" if result > 0 else "B" if result < 0 else "TIE"
        six = six_card_bonus(
            hand_codes["A"] + hand_codes["B"], wheel_allowed=self.options.six_card_wheel == "ALLOWED"
        )
        return GameOutcome(
            hands={
                "A": HandInfo(hand_codes["A"], a.category),
                "B": HandInfo(hand_codes["B"], b.category),
            },
            winner=winner,
            bets={
                **self._main_bets(winner),
                "pair_plus_a": self._pair_plus(a),
                "pair_plus_b": self._pair_plus(b),
                "six_card_bonus": self._six_card(six),
            },
            details={
                "six_card": {"category": six.category, "best_five": list(six.best_five)},
                "rank_keys": {"A": a.rank_key, "B": b.rank_key},
            },
        )

    def _main_bets(self, winner: str) -> dict[str, BetResolution]:
        """§5.1: on a tie both main bets are refunded and only the Tie bet wins."""
        win_main = BetResolution(Outcome.WIN, self.options.main_ratio)
        if winner == "TIE":
            win_tie = BetResolution(Outcome.WIN, self.options.tie_ratio)
            return {"player_a": _PUSH, "player_b": _PUSH, "tie": win_tie}
        return {
            "player_a": win_main if winner == "A" else _LOSE,
            "player_b": win_main if winner == "B" else _LOSE,
            "tie": _LOSE,
        }

    def _pair_plus(self, hand: Hand3) -> BetResolution:
        """§5.2: paid on the hand's own category, whatever the main result."""
        ratio = self.options.pair_plus.get(hand.category)
        if ratio is None:  # high card
            return BetResolution(Outcome.LOSE, category=hand.category)
        return BetResolution(Outcome.WIN, ratio, hand.category)

    def _six_card(self, six: SixCardHand) -> BetResolution:
        """§5.3: three of a kind or better pays; lower loses with no category."""
        if six.category is None:
            return _LOSE
        return BetResolution(Outcome.WIN, self.options.six_card_bonus[six.category], six.category)


def _hand_codes(cards: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    return hand_codes("teen-patti", cards, HAND_POSITIONS, "burn cards are not passed")


# --- Supervisor CLI report ---------------------------------------------------------------


def _resolution_json(resolution: BetResolution) -> dict[str, Any]:
    return {
        "outcome": resolution.outcome.value,
        "ratio": str(resolution.ratio),
        "category": resolution.category,
    }


def hand_report(
    a: Sequence[str], b: Sequence[str], options: TeenPattiOptions | None = None
) -> dict[str, Any]:
    """JSON-safe report of one deal for ``dealer hand teen-patti ... --vs ...`` (supervisor checks)."""
    if isinstance(a, str) or isinstance(b, str):
        raise CardError("hand_report expects each hand as a sequence of three card codes")
    if len(a) != 3 or len(b) != 3:
        raise ValueError(f"each hand needs exactly 3 cards, got {len(a)} and {len(b)}")
    game = TeenPatti(options)
    deal = dict(zip(HAND_POSITIONS["A"], a)) | dict(zip(HAND_POSITIONS["B"], b))
    outcome = game.resolve(deal)
    return {
        "game": TeenPatti.name,
        "hands": {
            name: {
                "cards": list(info.cards),
                "category": info.category,
                "rank_key": outcome.details["rank_keys"][name],
            }
            for name, info in outcome.hands.items()
        },
        "winner": outcome.winner,
        "pair_plus": {"A": outcome.hands["A"].category, "B": outcome.hands["B"].category},
        "six_card_bonus": outcome.details["six_card"],
        "bets": {bet: _resolution_json(outcome.bets[bet]) for bet in TeenPatti.bet_types},
    }
