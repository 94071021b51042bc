"""Sevenluck Poker (`sevenluck-poker.md`): each player's three cards against the dealer's three.

A player-vs-dealer three-card game (the structure known as Three Card Poker):
players bet an **Ante** and/or **Pair Plus** before the deal; after the deal each
player holding an Ante decides **PLAY** (a Play bet equal to the Ante is created by
that decision, it is never placed as a bet) or **FOLD**; then the dealer's hand is
revealed and every player is settled individually (§5).

* :func:`evaluate3` / :func:`compare3` rank a three-card hand exactly as §3.3
  (:mod:`dealer.games.three_card` with Sevenluck's order, *not* Teen Patti's: here a
  straight flush beats three of a kind, a straight beats a flush and A-2-3 is the lowest
  sequence).
* :func:`dealer_qualifies` is §3.4; :data:`QUALIFYING_MIN` is the lowest qualifying
  hand (Q-3-2), so ``dealer_qualifies(h) == (h >= QUALIFYING_MIN)``.
* ``HAND_MODE`` ``SEATED`` deals one hand per betting seat, ``SHARED`` one common
  player hand ``P`` that every remote player decides on and is settled on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from dealer.core.cards import STANDARD_52, CardError
from dealer.core.game_contract import Game
from dealer.core.game_records import BetResolution, BetView, Face, GameOutcome, HandInfo, Outcome, Position
from dealer.games.base import GameOptions

from dealer.games._common import hand_codes, pay_table
from dealer.games.three_card import SEVENLUCK, SLHand

# --- Three-card ranking (§3) -----------------------------------------------------------

#: Category name -> category value (§3.1); a greater value is a better hand.
SL_CATEGORIES: dict[str, int] = SEVENLUCK.categories
#: Rank three distinct cards per §3.3 (A-2-3 is the lowest sequence, top 3; no wrap-around).
evaluate3 = SEVENLUCK.evaluate
#: 1 if ``a`` beats ``b``, -1 if ``b`` beats ``a``, 0 for a tie (§3.3). Accepts hands or codes.
compare3 = SEVENLUCK.compare


def dealer_qualifies(hand: SLHand | Sequence[str]) -> bool:
    """§3.4: a pair or better, or a high-card hand headed by Q, K or A (Q-3-2 is the lowest)."""
    h = SEVENLUCK.hand(hand)
    return h.cat >= 2 or h.key[0] >= 12


#: The lowest qualifying dealer hand (Q-3-2 high card): ``dealer_qualifies(h) == (h >= QUALIFYING_MIN)``.
QUALIFYING_MIN: SLHand = evaluate3(("QC", "3D", "2H"))

# --- Options (house options and pay tables) --------------------------------------------

ANTE_BONUS_CATEGORIES: tuple[str, ...] = ("straight_flush", "three_of_a_kind", "straight")
PAIR_PLUS_CATEGORIES: tuple[str, ...] = tuple(n for n in SL_CATEGORIES if n != "high_card")


def _default_ante_bonus() -> dict[str, Decimal]:
    return {"straight_flush": Decimal("5"), "three_of_a_kind": Decimal("4"), "straight": Decimal("1")}


def _default_pair_plus() -> dict[str, Decimal]:
    return {
        "straight_flush": Decimal("40"),
        "three_of_a_kind": Decimal("30"),
        "straight": Decimal("6"),
        "flush": Decimal("4"),
        "pair": Decimal("1"),
    }


class SevenluckOptions(GameOptions):
    """House options (§1, §2.1, §4, §5.2) and pay tables (§5.2, §5.3) of one Sevenluck table.

    * ``hand_mode``: ``SEATED`` one hand per betting seat (seats 1..``seats``), or
      ``SHARED`` one common player hand ``P`` for every player (bets carry no seat).
    * ``decision_timeout_action``: what a decider gets when their timer runs out (§4.2).
    * ``ante_bonus_on_fold``: pay the Ante Bonus on a folded hand too (§5.2, default no).
    * ``reserve_play_funds``: accept an Ante only if the balance also covers an equal
      Play bet (§4.1). **This backend cannot see balances**: the flag is carried for
      settlement (which holds the balances and must enforce it when accepting an Ante);
      nothing in this module acts on it.
    * ``reshuffle_every_round``: informational for the dealer station / shoe handling (§1).
    * ``ante_bonus`` / ``pair_plus``: exact "X to 1" ratios per hand category; each table
      must name exactly its known categories; floats are refused.
    """

    hand_mode: Literal["SEATED", "SHARED"] = "SEATED"
    seats: Annotated[int, Field(strict=True, ge=1, le=9)] = 7
    decision_timeout_action: Literal["FOLD", "PLAY"] = "FOLD"
    ante_bonus_on_fold: bool = False
    reserve_play_funds: bool = True
    reshuffle_every_round: bool = True
    ante_bonus: dict[str, Decimal] = Field(default_factory=_default_ante_bonus)
    pair_plus: dict[str, Decimal] = Field(default_factory=_default_pair_plus)

    @field_validator("ante_bonus", mode="before")
    @classmethod
    def _check_ante_bonus(cls, value: Any) -> dict[str, Decimal]:
        return pay_table(value, ANTE_BONUS_CATEGORIES, "ante_bonus")

    @field_validator("pair_plus", mode="before")
    @classmethod
    def _check_pair_plus(cls, value: Any) -> dict[str, Decimal]:
        return pay_table(value, PAIR_PLUS_CATEGORIES, "pair_plus")


# --- The game -------------------------------------------------------------------------

_DECK = frozenset(STANDARD_52)
_ROUNDS = (1, 2, 3)
DEALER_POSITIONS: tuple[str, ...] = ("D.1", "D.2", "D.3")
SHARED_POSITIONS: tuple[str, ...] = ("P.1", "P.2", "P.3")
_ONE = Decimal(1)
_ZERO = Decimal(0)


def seat_positions(seat: int) -> tuple[str, ...]:
    """``P<seat>.1`` .. ``P<seat>.3``."""
    return tuple(f"P{seat}.{r}" for r in _ROUNDS)


class Sevenluck(Game):
    """Sevenluck Poker: Ante / Pair Plus, a PLAY-or-FOLD decision per Ante, settled per player."""

    name = "sevenluck"
    Options = SevenluckOptions
    #: Play is never placed: it is created by a PLAY decision (equal to the Ante).
    bet_types = ("ante", "pair_plus")
    decision_actions = ("PLAY", "FOLD")

    options: SevenluckOptions

    @property
    def deck(self) -> frozenset[str]:
        return _DECK

    @property
    def shared(self) -> bool:
        return self.options.hand_mode == "SHARED"

    @property
    def seat_count(self) -> int:
        """SEATED: bets name a seat 1..``seats``; SHARED: bets carry no seat."""
        return 0 if self.shared else self.options.seats

    def _check_seats(self, seats: Sequence[int]) -> list[int]:
        ordered = sorted(set(seats))
        bad = [s for s in ordered if isinstance(s, bool) or not isinstance(s, int)
               or not 1 <= s <= self.options.seats]
        if bad:
            raise ValueError(f"sevenluck: seat(s) {bad} out of range 1..{self.options.seats}")
        return ordered

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        """§2.3: three rounds, one card at a time, betting seats in increasing order, dealer last.

        SEATED: ``P<s>.r`` face down to seat ``s`` (its player's hole card), then ``D.r``.
        SHARED: ``P.1 D.1 P.2 D.2 P.3 D.3`` (``seats`` ignored); the common hand is shown
        to every player (UP), the dealer's cards stay DOWN until the reveal. No burn card.
        """
        plan: list[Position] = []
        if self.shared:
            for r in _ROUNDS:
                plan.append(Position(f"P.{r}", Face.UP))
                plan.append(Position(f"D.{r}", Face.DOWN))
            return tuple(plan)
        ordered = self._check_seats(seats)
        for r in _ROUNDS:
            plan.extend(Position(f"P{s}.{r}", Face.DOWN, seat=s) for s in ordered)
            plan.append(Position(f"D.{r}", Face.DOWN))
        return tuple(plan)

    def check_bet(self, bet_type: str, held: frozenset[str]) -> str | None:
        """§4.1: at most one Ante and one Pair Plus per player (seat checks are the round machine's)."""
        reason = super().check_bet(bet_type, held)
        if reason is not None:
            return reason
        if bet_type in held:
            what = "an ante" if bet_type == "ante" else "a pair plus bet"
            return f"player already holds {what} this round (one {bet_type} per player)"
        return None

    def deciders(self, bets: Sequence[BetView]) -> dict[str, int | None]:
        """§4.2: every player holding an Ante decides (player id -> seat; None in SHARED mode).

        Pair-Plus-only players never decide.
        """
        out: dict[str, int | None] = {}
        for bet in bets:
            if bet.bet_type == "ante":
                out[bet.player_id] = None if self.shared else bet.seat
        return out

    def default_decision(self) -> str | None:
        """HOUSE OPTION ``DECISION_TIMEOUT_ACTION`` (default FOLD)."""
        return self.options.decision_timeout_action

    def decision_stake(self, action: str, bets: Sequence[BetView]) -> Decimal | None:
        """§4.2: PLAY places a Play bet equal to the player's Ante; FOLD places nothing."""
        if action != "PLAY":
            return None
        return next((b.stake for b in bets if b.bet_type == "ante"), None)

    def folds(self, action: str) -> bool:
        """§5: a folded hand goes to the muck unseen."""
        return action == "FOLD"

    # --- resolve ------------------------------------------------------------------------

    def _player_bets(self, bets: Sequence[BetView]) -> dict[str, dict[str, BetView]]:
        """player id -> bet type -> bet; one bet per type and one seat per player."""
        by_player: dict[str, dict[str, BetView]] = {}
        for bet in bets:
            if bet.bet_type not in self.bet_types:
                raise ValueError(f"sevenluck resolve: unknown bet type {bet.bet_type!r} (bet {bet.bet_id})")
            if not self.shared:
                if bet.seat is None:
                    raise ValueError(f"sevenluck resolve: bet {bet.bet_id} has no seat (SEATED mode)")
                self._check_seats((bet.seat,))
            held = by_player.setdefault(bet.player_id, {})
            if bet.bet_type in held:
                raise ValueError(
                    f"sevenluck resolve: player {bet.player_id!r} holds two {bet.bet_type} bets"
                    f" ({held[bet.bet_type].bet_id}, {bet.bet_id})"
                )
            if not self.shared and held:
                other = next(iter(held.values()))
                if other.seat != bet.seat:
                    raise ValueError(
                        f"sevenluck resolve: player {bet.player_id!r} holds bets on seats"
                        f" {other.seat} and {bet.seat} (one seat per player)"
                    )
            held[bet.bet_type] = bet
        return by_player

    def _hand_positions(self, by_player: Mapping[str, Mapping[str, BetView]]) -> dict[str, tuple[str, ...]]:
        """Hand name -> its positions: ``P<s>`` per betting seat (or ``P``), then ``D``."""
        if self.shared:
            hands = {"P": SHARED_POSITIONS}
        else:
            seats = sorted({b.seat for held in by_player.values() for b in held.values()})  # type: ignore[type-var]  # not shared: every bet has a seat
            hands = {f"P{s}": seat_positions(s) for s in seats}  # type: ignore[arg-type]  # not shared: every bet has a seat
        return hands | {"D": DEALER_POSITIONS}

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """§5: settle every player's Ante (+ Ante Bonus), Play and Pair Plus against the dealer.

        ``cards``: SEATED ``P<s>.1..3`` for every seat holding a bet plus ``D.1..3``;
        SHARED ``P.1..3`` plus ``D.1..3``; nothing else. ``decisions``: player id ->
        ``PLAY`` / ``FOLD`` for exactly the :meth:`deciders` of ``bets``.
        """
        by_player = self._player_bets(bets)
        hand_codes = _hand_codes(cards, self._hand_positions(by_player))
        hands = {name: evaluate3(codes) for name, codes in hand_codes.items()}
        dealer = hands["D"]
        qualifies = dealer_qualifies(dealer)
        actions = self._decisions(bets, decisions)

        player_bets: dict[str, dict[str, BetResolution]] = {}
        for player_id, held in by_player.items():
            some_bet = next(iter(held.values()))
            hand = hands["P" if self.shared else f"P{some_bet.seat}"]
            action = actions.get(player_id)  # None: Pair-Plus-only, never folded
            resolutions: dict[str, BetResolution] = {}
            if "ante" in held:
                resolutions.update(self._ante_and_play(hand, dealer, qualifies, action == "PLAY"))
            if "pair_plus" in held:
                resolutions["pair_plus"] = self._pair_plus(hand, folded=action == "FOLD")
            player_bets[player_id] = resolutions

        results = {
            name: _comparison(compare3(h, dealer)) for name, h in hands.items() if name != "D"
        }
        return GameOutcome(
            hands={name: HandInfo(hand_codes[name], h.category) for name, h in hands.items()},
            winner=None,
            bets={},
            details={
                "dealer_qualifies": qualifies,
                "rank_keys": {name: h.rank_key for name, h in hands.items()},
                "comparison": results,
            },
            player_bets=player_bets,
        )

    def _decisions(self, bets: Sequence[BetView], decisions: Mapping[str, str] | None) -> dict[str, str]:
        deciders = self.deciders(bets)
        given = dict(decisions or {})
        missing = [p for p in deciders if p not in given]
        if missing:
            raise ValueError(f"sevenluck resolve: missing decision(s) for player(s) {missing}")
        extra = sorted(p for p in given if p not in deciders)
        if extra:
            raise ValueError(f"sevenluck resolve: decision(s) for player(s) {extra} who hold no ante")
        bad = {p: a for p, a in given.items() if a not in self.decision_actions}
        if bad:
            raise ValueError(
                f"sevenluck resolve: invalid decision(s) {bad} (expected one of {', '.join(self.decision_actions)})"
            )
        return given

    def _ante_and_play(self, hand: SLHand, dealer: SLHand, qualifies: bool,
                       played: bool) -> dict[str, BetResolution]:
        """§5.1 + §5.2: Ante (with the Ante Bonus as ``bonus_ratio``) and, if played, Play."""
        if played or self.options.ante_bonus_on_fold:
            bonus = self.options.ante_bonus.get(hand.category, _ZERO)
        else:
            bonus = _ZERO
        if not played:
            return {"ante": BetResolution(Outcome.LOSE, category=hand.category, bonus_ratio=bonus)}
        if not qualifies:
            ante, play = Outcome.WIN, Outcome.PUSH
        else:
            result = compare3(hand, dealer)
            ante = play = Outcome.WIN if result > 0 else Outcome.LOSE if result < 0 else Outcome.PUSH
        return {
            "ante": BetResolution(ante, _ONE if ante == Outcome.WIN else _ZERO, hand.category, bonus),
            "play": BetResolution(play, _ONE if play == Outcome.WIN else _ZERO),
        }

    def _pair_plus(self, hand: SLHand, folded: bool) -> BetResolution:
        """§5.3: paid on the player's own hand whatever the dealer holds; lost when folded."""
        ratio = self.options.pair_plus.get(hand.category)
        if folded or ratio is None:
            return BetResolution(Outcome.LOSE, category=hand.category)
        return BetResolution(Outcome.WIN, ratio, hand.category)


def _comparison(result: int) -> str:
    return "PLAYER" if result > 0 else "DEALER" if result < 0 else "TIE"


def _hand_codes(cards: Mapping[str, str], hands: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return hand_codes("sevenluck", cards, hands, f"expected exactly {[p for ps in hands.values() for p in ps]};"
                      " only seats holding a bet are dealt")


# --- Supervisor CLI report ---------------------------------------------------------------


def _resolution_json(resolution: BetResolution) -> dict[str, Any]:
    return {
        "outcome": resolution.outcome.value,
        "ratio": str(resolution.ratio),
        "bonus_ratio": str(resolution.bonus_ratio),
        "category": resolution.category,
    }


def net_per_unit(resolution: BetResolution) -> Decimal:
    """Net result of a stake of 1 on ``resolution`` (``decks.md`` §4, before any rounding)."""
    if resolution.outcome == Outcome.WIN:
        net = resolution.ratio
    elif resolution.outcome == Outcome.LOSE:
        net = -_ONE
    else:
        net = _ZERO
    return net + resolution.bonus_ratio


def hand_report(
    player: Sequence[str], dealer: Sequence[str], options: SevenluckOptions | None = None
) -> dict[str, Any]:
    """JSON-safe report for ``dealer hand sevenluck KD 4S 2H --vs QS 5D 3C``.

    Ranks both hands and settles, for a player who holds an Ante and a Pair Plus and
    PLAYs, every bet per unit stake (Play = Ante = 1, Pair Plus = 1).
    """
    if isinstance(player, str) or isinstance(dealer, str):
        raise CardError("hand_report expects each hand as a sequence of three card codes")
    if len(player) != 3 or len(dealer) != 3:
        raise ValueError(f"each hand needs exactly 3 cards, got {len(player)} and {len(dealer)}")
    game = Sevenluck(options)
    seat = None if game.shared else 1
    hand_name = "P" if game.shared else "P1"
    positions = SHARED_POSITIONS if game.shared else seat_positions(1)
    deal = dict(zip(positions, player)) | dict(zip(DEALER_POSITIONS, dealer))
    bets = [
        BetView("ante", "report", "ante", _ONE, seat),
        BetView("pair_plus", "report", "pair_plus", _ONE, seat),
    ]
    outcome = game.resolve(deal, bets, {"report": "PLAY"})
    resolved = outcome.player_bets["report"]
    ante_and_play = net_per_unit(resolved["ante"]) + net_per_unit(resolved["play"])
    return {
        "game": Sevenluck.name,
        "hands": {
            label: {
                "cards": list(outcome.hands[name].cards),
                "category": outcome.hands[name].category,
                "rank_key": outcome.details["rank_keys"][name],
            }
            for label, name in (("player", hand_name), ("dealer", "D"))
        },
        "dealer_qualifies": outcome.details["dealer_qualifies"],
        "comparison": outcome.details["comparison"][hand_name],
        "decision": "PLAY",
        "bets": {bet: _resolution_json(resolved[bet]) for bet in ("ante", "play", "pair_plus")},
        "net_per_unit": {
            "ante_and_play": str(ante_and_play),
            "pair_plus": str(net_per_unit(resolved["pair_plus"])),
        },
    }
