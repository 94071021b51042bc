"""Seotda (``seotda.md``): two-card stud with 20 Hwatu cards, pot betting and rematches.

A game is a :class:`SeotdaHand`: every seated player posts the ante (the room's stake),
``DEAL_1`` (one face-down card each, from the first seat ``S1`` clockwise), ``BET_1``,
``DEAL_2`` (to every player still in), ``BET_2``, then each pot (main and side pots) is
resolved by the showdown of :mod:`dealer.games.seotda_rank`. A 9·4 or a draw does not pay
that pot: it is carried into a **rematch** on the same table (reshuffle, deal, bet, show
down again) among the rule's participants, as often as it takes (§7.2).

Betting uses :mod:`dealer.core.betting` with Seotda's nine buttons (§6.1): each button names an
exact amount, which :meth:`SeotdaHand.translate` turns into an engine action. Any raise
gives every other player a new turn; there is no raise cap by default.

Players bring chips to the game (a ``chips`` bet naming their seat, at least 60 times the
stake, §2); the result says exactly what goes back to each (no rake, §7.1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from dealer.core import draws
from dealer.core.betting import Betting, Player, Range
from dealer.core.cards import SEOTDA_20
from dealer.core.game_contract import PeerGame
from dealer.core.game_records import (
    BetResolution,
    BetStep,
    BetView,
    DealStep,
    EndStep,
    Face,
    GameOutcome,
    HandInfo,
    Outcome,
    Position,
)
from dealer.games.base import BettingTurns, GameOptions
from dealer.games.seotda_rank import RankRules, Showdown, evaluate, showdown
from dealer.core.pots import Pot, build_pots, split

CHIPS = "chips"
ROOMS = (Decimal(5), Decimal(10), Decimal(20), Decimal(50), Decimal(100))
BUTTONS = ("FOLD", "BET", "X2_RAISE", "CALL", "QUARTER", "HALF", "MAX", "ALL_IN", "CHECK")
#: The choices a player makes on a turn that is not a betting turn: the 9·4 holder under
#: ``REMATCH_94_MODE = PROMPT`` (§5.2), a folded player under ``REMATCH_REENTRY = HALF_POT`` (§7.2).
CHOICES = {"REMATCH_94": ("REMATCH", "PLAY_ON"), "REENTRY": ("REJOIN", "SIT_OUT")}
#: What a showdown step that called a rematch is named in the ``rematch`` event.
_CAUSE = {2: "ANIMAL_94", 4: "NINE_FOUR"}


class SeotdaOptions(GameOptions):
    """House options of one Seotda table (``seotda.md``; names are the rulebook's, lower case).

    * ``stake``: the room's stake (§2: 5, 10, 20, 50 or 100); ``min_chips_multiple`` × stake
      is the least a player may bring to a game (§2: 60).
    * ``min_chips_check``: ``EVERY_GAME`` (default) or ``JOIN_ONLY`` (a player of the previous
      game at this table may play on with less).
    * ``first_seat``: ``PREVIOUS_WINNER`` (default) or ``ROTATE`` (§3.1); a table's first
      game draws ``S1`` at random among the seated players, from the round's secret draw
      (:mod:`dealer.core.draws`). A rematch keeps the same ``S1`` order (§7.2 rule 5): no new draw.
    * ``ante_and_blind``: ``ONE_POST`` (1 × stake, default) or ``TWO_POSTS`` (2 × stake).
    * ``raise_cap``: raises per betting round, None = unlimited (default).
    * ``pot_fraction_base``: ``POT_AFTER_CALL`` (default) or ``POT_BEFORE_ACTION`` (§9.14).
    * ranking and showdown: ``animal_94_threshold``, ``pair_hunter_cards``,
      ``rematch_94_mode`` (``AUTO_BEST``, ``ALWAYS`` or ``PROMPT``: the holder is asked
      REMATCH or PLAY_ON on their own turn, with the table's turn timer; a timeout is taken
      as ``AUTO_BEST``, §5.2), ``draw_resolution``.
    * rematches: ``rematch_ante`` (``NONE`` or ``STAKE``), ``max_rematches`` (None = no limit),
      ``rematch_reentry`` (``NONE``, or ``HALF_POT``: a player who folded in the game that
      produced the rematch may rejoin it by paying half of each carried pot, rounded down to
      the table's unit like the pot-fraction buttons; asked REJOIN or SIT_OUT on their turn, a
      timeout sits out, §7.2 rule 3).
    """

    stake: Decimal = Decimal(10)
    min_chips_multiple: Annotated[int, Field(strict=True, ge=1, le=1000)] = 60
    min_chips_check: Literal["EVERY_GAME", "JOIN_ONLY"] = "EVERY_GAME"
    seats: Annotated[int, Field(strict=True, ge=2, le=10)] = 5
    first_seat: Literal["PREVIOUS_WINNER", "ROTATE"] = "PREVIOUS_WINNER"
    ante_and_blind: Literal["ONE_POST", "TWO_POSTS"] = "ONE_POST"
    raise_cap: Annotated[int, Field(strict=True, ge=1, le=100)] | None = None
    pot_fraction_base: Literal["POT_AFTER_CALL", "POT_BEFORE_ACTION"] = "POT_AFTER_CALL"
    animal_94_threshold: Literal["NINE_PAIR", "NINE_POINTS"] = "NINE_PAIR"
    pair_hunter_cards: Literal["03G_07A", "ANY_3_7"] = "03G_07A"
    rematch_94_mode: Literal["AUTO_BEST", "ALWAYS", "PROMPT"] = "AUTO_BEST"
    draw_resolution: Literal["REMATCH", "SPLIT"] = "REMATCH"
    rematch_ante: Literal["NONE", "STAKE"] = "NONE"
    rematch_reentry: Literal["NONE", "HALF_POT"] = "NONE"
    max_rematches: Annotated[int, Field(strict=True, ge=0, le=100)] | None = None

    @field_validator("stake", mode="before")
    @classmethod
    def _room(cls, v: Any) -> Decimal:
        if isinstance(v, float):
            raise ValueError("stake must be a decimal string or an integer, never a float")
        d = Decimal(str(v))
        if d not in ROOMS:
            raise ValueError(f"stake {v} is not a room stake ({', '.join(str(r) for r in ROOMS)})")
        return d

    @property
    def rank_rules(self) -> RankRules:
        return RankRules(animal_94_threshold=self.animal_94_threshold, pair_hunter_cards=self.pair_hunter_cards,
                         rematch_94_mode=self.rematch_94_mode, draw_resolution=self.draw_resolution)

    @property
    def min_chips(self) -> Decimal:
        return self.stake * self.min_chips_multiple

    @property
    def ante(self) -> Decimal:
        return self.stake * (2 if self.ante_and_blind == "TWO_POSTS" else 1)


class Seotda(PeerGame):
    name = "seotda"
    Options = SeotdaOptions
    chips_bet = CHIPS
    chips_once = "a player brings chips to a game once (no chips are added during a game or its rematches)"

    options: SeotdaOptions

    @property
    def deck(self) -> frozenset[str]:
        return frozenset(SEOTDA_20)

    def check_stake(self, stake: Decimal, player: str, context: Mapping[str, Any]) -> str | None:
        """§2: at least ``min_chips_multiple`` × stake, unless ``JOIN_ONLY`` and the player
        played the previous game here."""
        o = self.options
        if stake >= o.min_chips:
            return None
        if o.min_chips_check == "JOIN_ONLY" and player in context.get("players", ()):
            return None
        return f"a player needs at least {o.min_chips} chips ({o.min_chips_multiple} x the stake {o.stake}) to play"

    def check_unit(self, unit: Decimal) -> str | None:
        if self.options.stake % unit != 0:
            return f"stake {self.options.stake} is not a whole number of the money unit {unit}"
        return None

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        """Both deals when nobody folds, S1 = the first seat given (documentation and tests)."""
        order = list(seats)
        return tuple(positions_for(order, {s: i + 1 for i, s in enumerate(order)}, 1, 0)
                     + positions_for(order, {s: i + 1 for i, s in enumerate(order)}, 2, 0))

    def start_hand(self, seats: Mapping[int, str], chips: Mapping[str, Decimal], hand_number: int,
                   unit: Decimal, context: Mapping[str, Any] | None = None, *,
                   draw: str | None = None) -> "SeotdaHand":
        return SeotdaHand(self.options, seats, chips, hand_number, unit, context or {}, draw)

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """A single-pot showdown of every seat's two cards in ``cards`` (no betting)."""
        seats = range(1, self.options.seats + 1)
        named = {s: s for s in seats}  # S1 = seat 1 ...
        held: dict[str, list[str]] = {}
        for p in positions_for(seats, named, 1, 0) + positions_for(seats, named, 2, 0):
            if p.hand is not None and p.name in cards:
                held.setdefault(p.hand, []).append(cards[p.name])
        sd = showdown(held, self.options.rank_rules)
        hands = {s: evaluate(c, self.options.rank_rules) for s, c in held.items()}
        return GameOutcome(hands={s: HandInfo(h.cards, h.category) for s, h in hands.items()},
                           winner=",".join(sd.winners) or None, bets={}, details={"showdown": sd.kind})


def first_seat_drawn(draw: str | None, hand_number: int, seats: Sequence[int]) -> int:
    """§3.1 "in a table's first game S1 is drawn at random": each seated seat equally likely,
    from the round's secret draw. A round journaled before draws (``draw`` None) keeps the
    seat it was played with, which came from the public hand number."""
    if draw is None:
        digest = hashlib.sha256(f"seotda-first-seat:{hand_number}".encode()).digest()
        return seats[digest[0] % len(seats)]
    return draws.choice(draw, "seotda-first-seat", seats)


def positions_for(order: Sequence[int], label: Mapping[int, int], card: int, deal: int) -> list[Position]:
    """One deal round (first or second card) to ``order`` (physical seats, from S1)."""
    prefix = f"R{deal}." if deal else ""
    # §3.2: the second cards go to their owners together, once all of them are dealt
    return [Position(f"{prefix}S{label[s]}.{card}", Face.DOWN, seat=s, deck=deal, hand=f"S{label[s]}", index=card,
                     together=card == 2) for s in order]


@dataclass(frozen=True, slots=True)
class SeotdaLimits:
    """§6.1 as engine limits: a bet or raise is one of the buttons' exact totals."""

    hand: "SeotdaHand"
    forced_open: bool = False
    cap_players: int = 2
    every_raise_reopens: bool = True

    @property
    def raise_cap(self) -> int | None:
        cap = self.hand.o.raise_cap
        return None if cap is None else cap + 1  # the engine counts the opening bet too

    def open_range(self, engine: Betting, player: Player) -> Range | None:
        totals = [t for t in self.hand.button_totals(player).values() if t > 0]
        return Range(min(totals), max(totals)) if totals else None

    def raise_range(self, engine: Betting, player: Player) -> Range | None:
        totals = [t for t in self.hand.button_totals(player).values() if t > engine.level]
        return Range(min(totals), max(totals)) if totals else None

    def max_all_in(self, engine: Betting, player: Player) -> Decimal | None:
        return None


@dataclass
class Game_:
    """One game of a Seotda hand: the first deal, or a rematch."""

    number: int  # 0 = the first game, 1.. = rematches
    order: list[int]  # physical seats playing it, from S1 clockwise
    betting: Betting
    carried: list[tuple[Pot, tuple[str, ...]]]  # pots carried in, with their participants


@dataclass
class _Choice:
    """A pending choice (a turn of its own): ``kind`` is a key of :data:`CHOICES`."""

    kind: str
    player: str
    default: str  # what the turn timer chooses
    public: dict[str, Any]  # what the turn and the player are told about it

    @property
    def actions(self) -> tuple[str, ...]:
        return CHOICES[self.kind]


@dataclass
class _ShowdownRun:
    """A showdown in progress: the pots are resolved one by one, and may wait for a choice."""

    pots: list[tuple[Pot, tuple[str, ...] | None]]
    live: list[str]
    limit_reached: bool
    index: int = 0
    carry: list[tuple[Pot, tuple[str, ...]]] = field(default_factory=list)
    causes: list[dict[str, Any]] = field(default_factory=list)  # one per carried pot
    answers: dict[tuple[int, str], bool] = field(default_factory=dict)  # (pot index, holder) -> REMATCH?
    hands: dict[str, dict[str, Any]] = field(default_factory=dict)  # S-label -> the hand shown
    fees: list[Decimal] | None = None  # HALF_POT: what a rejoining player pays into each carried pot
    offers: list[str] = field(default_factory=list)  # HALF_POT: who may rejoin, S1 order
    rejoin: dict[str, bool] = field(default_factory=dict)


class SeotdaHand(BettingTurns):
    def __init__(self, options: SeotdaOptions, seats: Mapping[int, str], chips: Mapping[str, Decimal],
                 hand_number: int, unit: Decimal, context: Mapping[str, Any], draw: str | None = None) -> None:
        self.o = options
        self.rules = options.rank_rules
        self.unit = unit
        self.player_at = dict(seats)
        self.seat_of = {p: s for s, p in seats.items()}
        self.brought = {p: chips[p] for p in seats.values()}
        self.first_seat = self._first_seat(sorted(seats), context, hand_number, draw)
        ordered = sorted(seats)
        i = ordered.index(self.first_seat)
        order = ordered[i:] + ordered[:i]
        self.label = {s: k + 1 for k, s in enumerate(order)}  # physical seat -> S-number
        self.cards: dict[str, str] = {}
        self.won: dict[str, Decimal] = {}
        self.awards: list[dict[str, Any]] = []
        self.reservations: dict[str, tuple[str, tuple[int, int], Decimal]] = {}  # button, betting round, level
        self._notes: list[tuple[str, dict[str, Any]]] = []
        self.into_rematch: dict[str, Decimal] = {}  # winnings a rematch participant plays on with
        self.antes: dict[str, Decimal] = {}
        self.stacks_out: dict[str, Decimal] = {}  # chips of players who sit out a rematch
        self.shown: list[str] = []  # positions revealed at a showdown
        self.choices: list[dict[str, Any]] = []  # every REMATCH_94 / REENTRY choice made, in order
        self.reentries: list[dict[str, Any]] = []  # HALF_POT: who rejoined which rematch, for how much
        self.game = self._new_game(0, order, stacks=dict(self.brought), carried=[])
        self._post_antes(self.o.ante)
        self._stage = 0  # index into STAGES of the current game
        self.history: list[dict[str, Any]] = []
        self._sd: _ShowdownRun | None = None
        self._choice: _Choice | None = None
        self._choice_made = False

    STAGES = ("shuffle", "deal1", "bet1", "deal2", "bet2", "showdown")

    # -- set-up -------------------------------------------------------------------------

    def _first_seat(self, seats: list[int], context: Mapping[str, Any], hand_number: int,
                    draw: str | None) -> int:
        """§3.1: the previous winner (or the next seat clockwise), or one seat on from the
        previous first seat; a table's first game draws it at random."""
        key = "winner_seat" if self.o.first_seat == "PREVIOUS_WINNER" else "first_seat"
        prev = context.get(key)
        if isinstance(prev, int):
            start = prev if self.o.first_seat == "PREVIOUS_WINNER" else prev + 1
            later = [s for s in seats if s >= start]
            return later[0] if later else seats[0]
        return first_seat_drawn(draw, hand_number, seats)

    def _new_game(self, number: int, order: list[int], stacks: Mapping[str, Decimal],
                  carried: list[tuple[Pot, tuple[str, ...]]]) -> Game_:
        players = [(self.player_at[s], s, stacks[self.player_at[s]]) for s in order]
        betting = Betting.seat(players, self.unit, allow_empty=True)
        # the engine keeps seat order; Seotda acts from S1 clockwise, so order its players that way
        betting.players.sort(key=lambda p: self.label[p.seat])
        return Game_(number, list(order), betting, carried)

    def _post_antes(self, amount: Decimal) -> None:
        for p in self.game.betting.players:  # outside any betting round, like the seed's "ante"
            a = min(amount, p.stack).quantize(self.unit)
            p.stack -= a
            p.total += a
            self.antes[p.player_id] = self.antes.get(p.player_id, Decimal(0)) + a

    @property
    def betting(self) -> Betting:
        return self.game.betting

    # -- flow -----------------------------------------------------------------------------

    def next_step(self) -> DealStep | BetStep | EndStep:
        if self._sd is not None:  # a showdown that waited for a choice goes on
            return self._showdown()
        while True:
            stage = self.STAGES[self._stage]
            g = self.game
            live = [p for p in g.betting.players if not p.folded]
            if stage != "showdown" and len(live) <= 1 and stage not in ("shuffle",):
                self._stage = self.STAGES.index("showdown")
                continue
            self._stage += 1
            if stage == "shuffle":
                return DealStep((Position("SHUFFLE", confirm=True, deck=g.number),),
                                None if not g.number else f"Rematch {g.number}: reshuffle the 20 cards")
            if stage in ("deal1", "deal2"):
                card = 1 if stage == "deal1" else 2
                order = [p.seat for p in g.betting.players if not p.folded]
                return DealStep(tuple(positions_for(order, self.label, card, g.number)))
            if stage in ("bet1", "bet2"):
                first = next((p.player_id for p in g.betting.players if p.able), g.betting.players[0].player_id)
                street = ("BET_1" if stage == "bet1" else "BET_2") + (f" (rematch {g.number})" if g.number else "")
                return BetStep(first=first, limits=SeotdaLimits(self), street=street)
            return self._showdown()

    def _showdown(self) -> DealStep | BetStep | EndStep:
        """§5 for each pot (carried pots first, then this game's), §7.2 for the rematch. A pot
        waits for the 9·4 holder's choice (``PROMPT``), the rematch for the folded players'
        (``HALF_POT``): each is a turn of its own, and the showdown goes on when it is answered."""
        g = self.game
        if self._sd is None:
            self._sd = self._open_showdown()
        sd = self._sd
        while sd.index < len(sd.pots):
            pot, eligible = sd.pots[sd.index]
            contenders = self._contenders(pot, eligible, sd.live)
            if pot.amount == 0:
                sd.index += 1
                continue
            if len(contenders) == 1:
                self._award(pot.amount, contenders, "WIN", g.number, f"{contenders[0]} is the only one left")
                sd.index += 1
                continue
            held = {p: [self.cards[self._pos(p, 1, g.number)], self.cards[self._pos(p, 2, g.number)]]
                    for p in contenders}
            answers = {p: yes for (i, p), yes in sd.answers.items() if i == sd.index}
            sd_pot: Showdown = showdown(held, self.rules, answers, allow_rematch=not sd.limit_reached, ask=True)
            if sd_pot.kind == "ASK":
                return self._ask_holder(sd_pot, pot, held)
            if sd_pot.kind in ("WIN", "SPLIT"):
                self._award(pot.amount, list(sd_pot.winners), sd_pot.kind, g.number, sd_pot.reason)
            else:
                cause = "DRAW" if sd_pot.kind == "REMATCH_DRAW" else _CAUSE.get(sd_pot.step, "NINE_FOUR")
                sd.carry.append((Pot(pot.amount, tuple(sd_pot.participants)), tuple(sd_pot.participants)))
                sd.causes.append({"cause": cause, "by": list(sd_pot.callers), "step": sd_pot.step,
                                  "reason": sd_pot.reason})
                self.awards.append({"game": g.number, "amount": str(pot.amount), "result": sd_pot.kind,
                                    "participants": list(sd_pot.participants), "reason": sd_pot.reason,
                                    "cause": cause, "by": list(sd_pot.callers)})
            sd.index += 1
        if not sd.carry:
            self._sd = None
            return EndStep()
        if self.o.rematch_reentry == "HALF_POT":
            offer = self._offer_reentry()
            if offer is not None:
                return offer
        return self._start_rematch()

    def _open_showdown(self) -> _ShowdownRun:
        """The pots of this showdown, and every contender's cards turned over at once (§3.2:
        "players reveal their hands"): the public ``showdown`` event carries them."""
        g = self.game
        b = g.betting
        live = [p.player_id for p in b.players if not p.folded]
        pots: list[tuple[Pot, tuple[str, ...] | None]] = [(pot, who) for pot, who in g.carried]
        contributions = b.contributions()
        if any(contributions.values()):
            pots += [(pot, None) for pot in build_pots(contributions, live)]
        limit_reached = self.o.max_rematches is not None and g.number >= self.o.max_rematches
        sd = _ShowdownRun(pots=pots, live=live, limit_reached=limit_reached)
        showing: set[str] = set()  # the contenders of every contested pot show their cards
        for pot, eligible in pots:
            contenders = self._contenders(pot, eligible, live)
            if pot.amount and len(contenders) > 1:
                showing.update(contenders)
        for p in self._s_order(list(showing)):
            positions = [self._pos(p, n, g.number) for n in (1, 2)]
            self.shown += [x for x in positions if x not in self.shown]
            h = evaluate([self.cards[x] for x in positions], self.rules)
            sd.hands[f"S{self.label[self.seat_of[p]]}"] = {"player": p, "positions": positions, "name": h.name,
                                                             "rank": h.rank}
        if sd.hands:
            self._notes.append(("showdown", {"game": g.number, "hands": sd.hands}))
        return sd

    def _contenders(self, pot: Pot, eligible: tuple[str, ...] | None, live: list[str]) -> list[str]:
        allowed = eligible if eligible is not None else pot.eligible
        contenders = [p for p in self._s_order(live) if p in allowed]
        # every player of a carried pot folded in the rematch: the last in win it
        return contenders if contenders else self._s_order(live)

    def _suffix(self) -> str:
        return f" (rematch {self.game.number})" if self.game.number else ""

    def _ask_holder(self, sd_pot: Showdown, pot: Pot, held: Mapping[str, Sequence[str]]) -> BetStep:
        """§5.2 ``PROMPT``: the 9·4 holder chooses REMATCH or PLAY ON; the timer chooses as
        ``AUTO_BEST`` (a rematch unless the holder's own hand is the unique best)."""
        holder = sd_pot.callers[0]
        base = {p: evaluate(cards, self.rules).rank for p, cards in held.items()}
        unique_best = base[holder] > max(r for p, r in base.items() if p != holder)
        self._choice = _Choice("REMATCH_94", holder, "PLAY_ON" if unique_best else "REMATCH", {
            "pot": str(pot.amount), "contenders": list(held), "reason": sd_pot.reason})
        return BetStep(first=holder, limits=None, street="REMATCH_CHOICE" + self._suffix())

    def _offer_reentry(self) -> BetStep | None:
        """§7.2 rule 3, ``HALF_POT``: each player who folded in this game and can pay is asked,
        in S1 order, whether to rejoin the rematch for half of each carried pot."""
        sd = self._sd
        assert sd is not None
        if sd.fees is None:
            sd.fees = [self._floor(pot.amount / 2) for pot, _ in sd.carry]
            fee = sum(sd.fees, Decimal(0))
            folded = [p for p in self.game.betting.players if p.folded]
            sd.offers = self._s_order([p.player_id for p in folded
                                       if p.stack + self.won.get(p.player_id, Decimal(0)) >= fee])
        fee = sum(sd.fees, Decimal(0))
        for p in sd.offers:
            if p not in sd.rejoin:
                self._choice = _Choice("REENTRY", p, "SIT_OUT", {
                    "fee": str(fee), "carried": str(sum((pot.amount for pot, _ in sd.carry), Decimal(0))),
                    "rematch": self.game.number + 1})
                return BetStep(first=p, limits=None, street=f"REENTRY (rematch {self.game.number + 1})")
        return None

    def _start_rematch(self) -> DealStep | BetStep | EndStep:
        sd = self._sd
        assert sd is not None
        g = self.game
        b = g.betting
        carry = list(sd.carry)
        stacks = {p.player_id: p.stack for p in b.players}
        rejoined = [p for p in sd.offers if sd.rejoin.get(p)]
        for p in rejoined:  # HALF_POT: half of each carried pot, into that pot
            moved = self.won.pop(p, Decimal(0))
            stacks[p] += moved
            self.into_rematch[p] = self.into_rematch.get(p, Decimal(0)) + moved
            assert sd.fees is not None
            for i, ((pot, who), fee) in enumerate(zip(carry, sd.fees)):
                stacks[p] -= fee
                joined = tuple(self._s_order([*who, p]))
                carry[i] = (Pot(pot.amount + fee, joined), joined)
            self.reentries.append({"game": g.number + 1, "player": p, "paid": str(sum(sd.fees, Decimal(0))),
                                   "into": [str(f) for f in sd.fees]})
        participants = {p for _, who in carry for p in who}
        for p in participants:  # pots already won are paid at once: they play in the rematch
            if p in rejoined:
                continue
            moved = self.won.pop(p, Decimal(0))
            stacks[p] += moved
            self.into_rematch[p] = self.into_rematch.get(p, Decimal(0)) + moved
        self.stacks_out |= {p: s for p, s in stacks.items() if p not in participants}
        self._notes.append(("rematch", {
            "rematch": g.number + 1, "participants": self._s_order(list(participants)),
            "carried": [{"amount": str(pot.amount), "participants": list(who)} | cause
                        for (pot, who), cause in zip(carry, sd.causes)],
            "hands": sd.hands,
            **({"reentries": [r for r in self.reentries if r["game"] == g.number + 1]} if rejoined else {})}))
        order = [s for s in g.order if self.player_at[s] in participants]
        self._sd = None
        self.game = self._new_game(g.number + 1, order, stacks, carry)
        if self.o.rematch_ante == "STAKE":
            self._post_antes(self.o.stake)
        self._stage = 0
        return self.next_step()

    def _floor(self, x: Decimal) -> Decimal:
        return (x / self.unit).to_integral_value(rounding=ROUND_FLOOR) * self.unit

    def _award(self, amount: Decimal, winners: list[str], kind: str, game: int, reason: str) -> None:
        shares = split(amount, winners, self.unit)  # winners come in S1 order: the odd chip to the first
        for w, a in shares.items():
            self.won[w] = self.won.get(w, Decimal(0)) + a
        self.awards.append({"game": game, "amount": str(amount), "result": kind, "winners": winners,
                            "shares": {w: str(a) for w, a in shares.items()}, "reason": reason})
        self._notes.append(("pot_awarded", self.awards[-1]))

    def notes(self) -> list[tuple[str, dict[str, Any]]]:
        out, self._notes = self._notes, []
        return out

    def _s_order(self, players: Sequence[str]) -> list[str]:
        return sorted(players, key=lambda p: self.label[self.seat_of[p]])

    def _pos(self, player: str, card: int, game: int) -> str:
        return f"{'R%d.' % game if game else ''}S{self.label[self.seat_of[player]]}.{card}"

    def register(self, position: Position, code: str) -> None:
        if not position.confirm:
            self.cards[position.name] = code

    # -- what the table sees (§3.2) ----------------------------------------------------------

    def shows(self, position: Position, ended: bool) -> bool:
        """The contenders' cards of every showdown are shown when it happens (a showdown that
        leads to a rematch included)."""
        return position.name in self.shown

    def mucked(self, position: Position) -> bool:
        """A folded hand, and a card of an earlier game that no showdown turned over."""
        if position.deck < self.game.number:
            return position.name not in self.shown
        return any(p.seat == position.seat and p.folded for p in self.game.betting.players)

    # -- choices: turns that are not betting turns (§5.2 PROMPT, §7.2 HALF_POT) ----------------

    def open_turns(self, step: BetStep) -> bool:
        return True if self._choice is not None else super().open_turns(step)

    @property
    def to_act(self) -> str | None:
        return self._choice.player if self._choice is not None else self.game.betting.to_act

    def turn_summary(self) -> dict[str, Any]:
        c = self._choice
        return {"choice": c.kind} if c is not None else super().turn_summary()

    def turn_prompt(self, street: str | None) -> str:
        c = self._choice
        if c is None:
            return super().turn_prompt(street)
        return f"{street}: {c.player} chooses {' or '.join(c.actions)}; do not deal"

    def do_action(self, player: str, action: str, amount: Decimal | None, card: str | None,
                  by: str) -> tuple[dict[str, Any] | str, bool]:
        c = self._choice
        if c is None:
            return super().do_action(player, action, amount, card, by)
        reason = self._check_choice(player, action, amount)
        if reason is None and card is not None:
            reason = f"{action} takes no card"
        if reason is not None:
            return reason, False
        sd = self._sd
        assert sd is not None
        if c.kind == "REMATCH_94":
            sd.answers[(sd.index, player)] = action == "REMATCH"
        else:
            sd.rejoin[player] = action == "REJOIN"
        added = c.public["fee"] if action == "REJOIN" else "0"  # paid into the carried pots when the rematch starts
        record = {"player_id": player, "action": action, "choice": c.kind, "added": added} | c.public
        self.choices.append({"game": self.game.number, **record, "by": by})
        self._choice, self._choice_made = None, True
        return record, False

    def _check_choice(self, player: str, action: str, amount: Decimal | None) -> str | None:
        c = self._choice
        assert c is not None
        if player != c.player:
            return f"it is not {player}'s turn (waiting for {c.player} to choose {' or '.join(c.actions)})"
        if action not in c.actions:
            return f"{action} is not a choice now: {c.player} chooses {' or '.join(c.actions)}"
        if amount is not None:
            return f"{action} takes no amount"
        return None

    def default_action(self) -> tuple[str, Decimal | None, str | None]:
        c = self._choice
        return (c.default, None, None) if c is not None else super().default_action()

    def close_turns(self) -> list[tuple[str, dict[str, Any]]]:
        if self._choice_made:
            self._choice_made = False
            return []
        return super().close_turns()

    # -- buttons (§6.1) ---------------------------------------------------------------------

    def pot(self) -> Decimal:
        """All chips in all pots, the current round's bets and carried pots included."""
        g = self.game
        return sum((p.total for p in g.betting.players), Decimal(0)) + sum((pot.amount for pot, _ in g.carried),
                                                                          Decimal(0))

    def button_totals(self, p: Player) -> dict[str, Decimal]:
        """The round total each raising button makes for ``p`` now (before the all-in cap)."""
        b = self.game.betting
        level, own = b.level, p.street
        call = level - own
        pot = self.pot()
        def floor(x: Decimal) -> Decimal:
            return (x / self.unit).to_integral_value(rounding=ROUND_FLOOR) * self.unit
        out: dict[str, Decimal] = {}
        if level == 0:
            out["BET"] = self.o.stake.quantize(self.unit)
        else:
            out["X2_RAISE"] = 2 * level
        for name, f in (("QUARTER", Decimal("0.25")), ("HALF", Decimal("0.5"))):
            if self.o.pot_fraction_base == "POT_AFTER_CALL":
                add = call + floor(f * (pot + call))
            else:
                add = floor(f * pot)
                if add <= call:
                    continue
            out[name] = own + add
        return out

    def translate(self, player: str, action: str, amount: Decimal | None) -> tuple[str, Decimal | None] | str:
        if self._choice is not None:
            reason = self._check_choice(player, action, amount)
            return reason if reason is not None else (action, None)
        b = self.game.betting
        if action not in BUTTONS:
            return f"{action} is not a Seotda button (buttons: {', '.join(BUTTONS)})"
        if all(p.player_id != player for p in b.players):
            return f"player {player} is not in this game"
        if player != b.to_act:
            return f"it is not {player}'s turn (waiting for {b.to_act})"
        if amount is not None and action not in ("ALL_IN", "MAX"):
            return f"Seotda buttons name their own amount: send {action} without an amount"
        p = b.player(player)
        call = b.level - p.street
        reach = p.street + p.stack
        if action in ("MAX", "ALL_IN"):
            return "ALL_IN", None
        if action == "CHECK" and call > 0:
            return f"CHECK is not allowed: {call} to call (CALL, a raise, ALL_IN or FOLD)"
        if action in ("FOLD", "CHECK"):
            return action, None
        if action == "CALL":
            if call <= 0:
                return "nothing to call: CHECK, BET, QUARTER, HALF, ALL_IN or FOLD"
            return ("ALL_IN", None) if call >= p.stack else ("CALL", None)
        totals = self.button_totals(p)
        if action not in totals:
            why = {"BET": "someone has already bet this round", "X2_RAISE": "nobody has bet this round yet"}
            return f"{action} is not allowed now: " + why.get(action, "that pot fraction does not exceed the call")
        total = totals[action]
        if total >= reach:
            return "ALL_IN", None  # §6.1: an action needing the whole stack becomes ALL-IN
        if total <= b.level:
            return "CALL", None
        return ("BET" if b.level == 0 else "RAISE"), total

    def turn_options(self) -> dict[str, Any]:
        c = self._choice
        if c is not None:  # no buttons: a choice (the player's client shows these actions)
            return {"choice": c.kind, "actions": list(c.actions), "default": c.default, **c.public}
        b = self.game.betting
        base = dict(b.options().as_json())
        p = b.player(b.to_act) if b.to_act else None
        buttons: dict[str, dict[str, str]] = {}
        if p is not None:
            for name in BUTTONS:
                t = self.translate(p.player_id, name, None)
                if isinstance(t, tuple) and b.can(p.player_id, t[0], t[1]):
                    total = t[1] if t[1] is not None else (p.street + p.stack if t[0] == "ALL_IN" else
                                                          b.level if t[0] == "CALL" else p.street)
                    buttons[name] = {"action": t[0], "total": str(total), "adds": str(total - p.street)}
        return base | {"buttons": buttons, "pot": str(self.pot()), "stake": str(self.o.stake)}

    # -- reservations (§6.2) ------------------------------------------------------------------

    def reserve(self, player: str, action: str, amount: Decimal | None) -> str | None:
        if self._choice is not None:
            return f"no betting round is open: {self._choice.player} is choosing {' or '.join(self._choice.actions)}"
        b = self.game.betting
        if action not in BUTTONS:
            return f"unknown button {action!r} (expected one of {', '.join(BUTTONS)})"
        if amount is not None:
            return "a reservation names a button, not an amount"
        try:
            p = b.player(player)
        except ValueError as exc:
            return str(exc)
        if not p.able:
            return f"{player} cannot act in this betting round"
        if player == b.to_act:
            return "it is your turn: act instead of reserving"
        self.reservations[player] = (action, (self.game.number, b.rounds), b.level)
        return None

    def take_reservation(self, player: str) -> tuple[str, Decimal | None] | str | None:
        if self._choice is not None:
            return None  # a choice is not a betting turn: a reservation waits for one
        r = self.reservations.pop(player, None)
        if r is None:
            return None
        action, made_in, level = r
        b = self.game.betting
        if made_in != (self.game.number, b.rounds):  # §6.2: a reservation is for the betting round it was made in
            return f"the {action} reservation was made in an earlier betting round"
        if action == "FOLD":
            return "FOLD", None
        if action == "CHECK":
            return ("CHECK", None) if b.level == b.player(player).street else "CHECK is no longer possible"
        if b.level != level:
            return f"the bet changed since the {action} reservation (level {level} -> {b.level})"
        return action, None

    # -- result -------------------------------------------------------------------------------

    def main_winner(self) -> str | None:
        """"The winner of the previous game" (§3.1): the winner of the first pot decided by the
        last showdown (the carried or main pot), else of any pot; None when every pot was split."""
        last = self.game.number
        for game_filter in (lambda a: a["game"] == last, lambda a: True):
            for a in self.awards:
                if game_filter(a) and a.get("result") == "WIN":
                    return str(a["winners"][0])
        return None

    def carry(self) -> dict[str, Any]:
        winner = self.main_winner()
        winner_seat = self.seat_of[winner] if winner is not None else self.first_seat
        return {"winner_seat": winner_seat, "first_seat": self.first_seat, "players": sorted(self.brought)}

    def carry_unfinished(self) -> dict[str, Any]:
        return {}  # a cancelled or voided game leaves the table's memory as it was

    def outcome(self) -> GameOutcome:
        b = self.game.betting
        final_stack = self.stacks_out | {p.player_id: p.stack for p in b.players}
        player_bets: dict[str, dict[str, BetResolution]] = {}
        returned: dict[str, str] = {}
        for player, brought in self.brought.items():
            back = final_stack[player] + self.won.get(player, Decimal(0))
            back = back.quantize(self.unit)
            outcome = Outcome.WIN if back > brought else Outcome.LOSE if back < brought else Outcome.PUSH
            player_bets[player] = {CHIPS: BetResolution(outcome, returned=back)}
            returned[player] = str(back)
        shown: dict[str, HandInfo] = {}
        names: dict[str, str] = {}
        last = self.game
        live = [p.player_id for p in last.betting.players if not p.folded]
        if len(live) > 1:
            for p in live:
                h = evaluate([self.cards[self._pos(p, 1, last.number)], self.cards[self._pos(p, 2, last.number)]],
                             self.rules)
                label = f"S{self.label[self.seat_of[p]]}"
                shown[label] = HandInfo(h.cards, h.category)
                names[label] = h.name
        winners = [w for a in self.awards if a["game"] == last.number and a["result"] in ("WIN", "SPLIT")
                   for w in a["winners"]]
        return GameOutcome(
            hands=shown, winner=",".join(f"S{self.label[self.seat_of[w]]}" for w in dict.fromkeys(winners)) or None,
            bets={}, player_bets=player_bets,
            details={"first_seat": self.first_seat,
                     "seats": {f"S{k}": {"seat": s, "player": self.player_at[s]} for s, k in self.label.items()},
                     "antes": {p: str(a) for p, a in self.antes.items()}, "awards": self.awards,
                     "rematches": last.number, "returned": returned, "names": names, "rake": "0",
                     **({"choices": self.choices} if self.choices else {}),
                     **({"reentries": self.reentries} if self.reentries else {}),
                     "announce": self._announce(names)})

    def _announce(self, names: Mapping[str, str]) -> str | None:
        """What the dealer says at the end: the main pot's winner and hand."""
        winner = self.main_winner()
        if winner is None:
            return None
        label = f"S{self.label[self.seat_of[winner]]}"
        return f"{label} wins" + (f" with {names[label]}" if label in names else "")
