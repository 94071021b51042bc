"""Seven-Card Stud (``seven-card-stud.md``): a poker room table; players against each other, rake.

Before the deal each player brings chips to the hand (a ``chips`` bet naming their seat:
table stakes, §2). The hand is a :class:`StudHand`: 3rd street (two down, one up), the
bring-in by the low card, then 4th to 7th street each after a burn, each followed by a
spread-limit betting round opened by the high hand showing (§3). The betting itself is
:mod:`dealer.core.betting`; pots, rake and splits are :mod:`dealer.core.pots`; hands are ranked by
:mod:`dealer.games.stud_eval` (phevaluator behind our own interface).

The result tells settlement, per player, exactly what goes back from the chips they
brought (what they did not put in, plus what they won); the difference is the rake.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from dealer.core.betting import Betting, SpreadLimit
from dealer.core.cards import STANDARD_52
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
from dealer.games.stud_eval import (
    StudHand as RankedStudHand,
)
from dealer.games.stud_eval import (
    card_name,
    evaluate,
    first_to_act,
    low_card,
    odd_chip_key,
    showing_name,
)
from dealer.core.pots import award, build_pots, rake_amount, take_rake

CHIPS = "chips"
STREETS = (3, 4, 5, 6, 7)
#: The timed confirmation after the 7th cards (§3.5): the window to report an exposed one.
LAST_CARD = "LAST_CARD"
#: The one community card dealt when the deck cannot give every player a 7th card (§3.6).
COMMUNITY = "COMM"
#: The table's memory key (``OpenRound.context``): hands dealt since the last wash; None = no
#: wash yet at this table. Absent in rounds journaled before it: counted by round number then.
WASH_KEY = "hands_since_wash"
_ORDINAL = {3: "3rd", 4: "4th", 5: "5th", 6: "6th", 7: "7th"}
Money = Annotated[Decimal, Field(ge=0, le=Decimal("1000000"))]


class StreetLimit(GameOptions):
    min: Money
    max: Money

    @model_validator(mode="after")
    def _ordered(self) -> "StreetLimit":
        if not 0 < self.min <= self.max:
            raise ValueError(f"street limit needs 0 < min <= max, got {self.min}..{self.max}")
        return self


def _default_limits() -> dict[int, StreetLimit]:
    low, one, high = Decimal("0.50"), Decimal("1.00"), Decimal("3.00")
    return {3: StreetLimit(min=low, max=high), 4: StreetLimit(min=one, max=high),
            5: StreetLimit(min=one, max=high), 6: StreetLimit(min=one, max=high),
            7: StreetLimit(min=one, max=Decimal("6.00"))}


class StudOptions(GameOptions):
    """House options of one stud table (``seven-card-stud.md`` §2–§6 and §8).

    * ``ante``: posted by every player before the deal (§2; default 0, "usually no ante").
    * ``bring_in``: ``SPREAD_0.50_3.00`` the low card opens for any amount in the 3rd-street
      range, or ``FIXED_0.50`` exactly the 3rd-street minimum (§3.2).
    * ``min_raise_rule``: ``DOUBLE_LEVEL`` (seed example) or ``PREVIOUS_INCREMENT`` (§4).
    * ``deck_exhaustion``: ``COMMUNITY_CARD`` or ``RESHUFFLE_BURNS`` (§3.6).
    * ``rake_early_end``: ``NONE`` hands that end before the 7th card are not raked, or ``RAKE``.
    * ``street_limits``: the spread of each street, bets and raise increments (§2).
    * ``wash_every``: hands between two washes (§1: every 3 hands). Hands are counted as they
      are dealt (a hand whose first card registered), not by round number: a round cancelled
      before its first card is no hand, and a wash confirmed in it counts.
    * ``exposure_window_seconds``: after the last 7th card registers, the dealer station has
      this long to report an exposed 7th card (§3.5) before 7th-street betting opens; the
      station may close the window early by confirming ``LAST_CARD``. No window when fewer
      than two players can still bet (all-in), since the exposure then decides nothing. 0: no window (betting
      opens on the last scan, so the last-dealt 7th card can never be reported exposed). Rules
      journaled before the option existed mean 0 (:attr:`Stud.legacy_options`).
    * ``exposure_corroboration``: ``SUPERVISOR``: a 7th card the station reports exposed plays
      face up only once a supervisor's signed act names its seat and card (the station's word
      alone shows no hidden card). ``NONE`` is how rules journaled before the option existed
      replay (the station's report was the exposure); a table's configuration cannot ask for
      it (:meth:`Stud.check_config`).
    """

    seats: Annotated[int, Field(strict=True, ge=2, le=8)] = 8
    ante: Money = Decimal(0)
    bring_in: Literal["SPREAD_0.50_3.00", "FIXED_0.50"] = "SPREAD_0.50_3.00"
    min_raise_rule: Literal["DOUBLE_LEVEL", "PREVIOUS_INCREMENT"] = "DOUBLE_LEVEL"
    deck_exhaustion: Literal["COMMUNITY_CARD", "RESHUFFLE_BURNS"] = "COMMUNITY_CARD"
    rake_early_end: Literal["NONE", "RAKE"] = "NONE"
    rake_rate: Annotated[Decimal, Field(ge=0, le=1)] = Decimal("0.10")
    rake_cap: Money = Decimal("3.00")
    raise_cap: Annotated[int, Field(strict=True, ge=1, le=20)] = 3  # raises after the bet, 3+ players
    street_limits: dict[int, StreetLimit] = Field(default_factory=_default_limits)
    wash_every: Annotated[int, Field(strict=True, ge=1, le=100)] = 3
    exposure_window_seconds: Annotated[float, Field(ge=0, le=60)] = 5.0
    exposure_corroboration: Literal["SUPERVISOR", "NONE"] = "SUPERVISOR"

    @model_validator(mode="after")
    def _all_streets(self) -> "StudOptions":
        if sorted(self.street_limits) != list(STREETS):
            raise ValueError(f"street_limits must name exactly the streets {list(STREETS)}, "
                             f"got {sorted(self.street_limits)}")
        return self


class Stud(PeerGame):
    name = "stud"
    Options = StudOptions
    #: Options added later, and what rules journaled before them mean: no window before 7th-street
    #: betting; the station's report alone exposed a 7th card.
    legacy_options = {"exposure_window_seconds": 0.0, "exposure_corroboration": "NONE"}
    #: A result carries the hand's action history (8 seats, 5 streets, the default raise_cap:
    #: about 35 KB), so a backend with a stud table needs messages of at least this size.
    min_message_bytes = 65_536
    min_message_why = "its action history"
    min_message_title = "Seven-Card Stud"
    chips_bet = CHIPS
    chips_once = "a player brings chips to a hand once (table stakes: no chips are added during a hand)"

    options: StudOptions

    @property
    def deck(self) -> frozenset[str]:
        return frozenset(STANDARD_52)

    def check_unit(self, unit: Decimal) -> str | None:
        o = self.options
        amounts = [("ante", o.ante), ("rake_cap", o.rake_cap)] + [
            (f"street_limits.{k}.{n}", getattr(v, n)) for k, v in o.street_limits.items() for n in ("min", "max")]
        for name, amount in amounts:
            if amount % unit != 0:
                return f"{name} = {amount} is not a whole number of the money unit {unit}"
        return None

    def check_config(self) -> str | None:
        if self.options.exposure_corroboration != "SUPERVISOR":
            return ("exposure_corroboration = NONE is how rules journaled before the option existed replay "
                    "(the station's word alone exposed a 7th card); a table may only use SUPERVISOR: a hidden "
                    "card is never shown on the station's word alone")
        return None

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        """The whole deal when nobody folds (documentation and tests; the live deal is
        built street by street by :class:`StudHand`)."""
        plan: list[Position] = []
        for street in STREETS:
            plan += street_positions(street, seats, 52 - len(plan))
        return tuple(plan)

    def start_hand(self, seats: Mapping[int, str], chips: Mapping[str, Decimal], hand_number: int,
                   unit: Decimal, context: Mapping[str, Any] | None = None, *,
                   draw: str | None = None) -> "StudHand":
        return StudHand(self.options, seats, chips, hand_number, unit, context)

    def initial_memory(self) -> dict[str, Any]:
        return {WASH_KEY: None}  # a new table washes before its first hand (§1)

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """A showdown of every seat's cards in ``cards`` (no betting): who would win."""
        held: dict[int, list[str]] = {}
        for s in range(1, self.options.seats + 1):
            mine = [cards[p.name] for p in (_card(s, i, Face.DOWN) for i in range(1, 8)) if p.name in cards]
            if mine:
                held[s] = mine
        community = [cards[COMMUNITY]] if COMMUNITY in cards else []
        hands = {s: evaluate(c + community) for s, c in held.items()}
        best = max(h.rank_key for h in hands.values())
        winners = [f"P{s}" for s, h in hands.items() if h.rank_key == best]
        return GameOutcome(hands={f"P{s}": HandInfo(h.best_five, h.category.lower()) for s, h in hands.items()},
                           winner=",".join(winners), bets={})


def street_positions(street: int, seats: Sequence[int], undealt: int,
                     exhaustion: str = "COMMUNITY_CARD", burns: int = 3) -> list[Position]:
    """The positions of one street for ``seats`` (active, in seat order), §3.1 and §3.6."""
    if street == 3:
        return ([_card(s, 1, Face.DOWN) for s in seats] + [_card(s, 2, Face.DOWN) for s in seats]
                + [_card(s, 3, Face.UP) for s in seats])
    burn = Position(f"BURN{street - 3}", Face.DOWN, burn=True)
    if street < 7 or undealt >= len(seats) + 1:
        face = Face.DOWN if street == 7 else Face.UP
        return [burn] + [_card(s, street, face) for s in seats]
    out = [burn] if undealt >= 2 else []
    left = undealt - len(out)
    if exhaustion == "RESHUFFLE_BURNS" and left + burns + len(out) >= len(seats):
        return out + [_card(s, 7, Face.DOWN, from_burns=i >= left) for i, s in enumerate(seats)]
    return out + [Position(COMMUNITY, Face.UP, hand=COMMUNITY, index=7)]


def _card(seat: int, index: int, face: Face, from_burns: bool = False) -> Position:
    """Seat ``seat``'s ``index``-th card (``P3.7``: seat 3's 7th)."""
    return Position(f"P{seat}.{index}", face, seat=seat, from_burns=from_burns, hand=f"P{seat}", index=index)


class StudHand(BettingTurns):
    """One hand of stud: the streets, who opens each betting round, and the showdown."""

    def __init__(self, options: StudOptions, seats: Mapping[int, str], chips: Mapping[str, Decimal],
                 hand_number: int, unit: Decimal, context: Mapping[str, Any] | None = None) -> None:
        self.o = options
        self.unit = unit
        self.hand_number = hand_number
        ctx = context or {}
        if WASH_KEY in ctx:
            since = ctx[WASH_KEY]
            self.since_wash: int | None = since if isinstance(since, int) and since >= 0 else None
        else:  # a round journaled before hands were counted: by round number, as it was played
            r = (hand_number - 1) % options.wash_every
            self.since_wash = r if r else options.wash_every
        self.washed = False  # WASH confirmed in this hand
        self.seat_of = {p: s for s, p in seats.items()}
        self.betting = Betting.seat([(p, s, chips[p]) for s, p in seats.items()], unit)
        self.antes: dict[str, Decimal] = {}
        if options.ante > 0:
            for p in self.betting.players:  # posted before the deal, outside any betting round
                a = min(options.ante, p.stack)
                p.stack -= a
                p.total += a
                self.antes[p.player_id] = a
        self.cards: dict[str, str] = {}
        self.dealt: dict[str, Position] = {}  # name -> position of every card registered
        self._sevenths = {_card(s, 7, Face.DOWN).name for s in range(1, options.seats + 1)}
        self.burn_cards: list[str] = []
        self.exposed: list[int] = []  # seats whose 7th card was exposed, in deal order
        self._plan: list[tuple[str, int]] = [(kind, s) for s in STREETS for kind in ("deal", "bet")]
        self._next = 0
        self.street = 0
        self.round_start: dict[int, int] = {}
        self.first_of: dict[int, str] = {}
        self.seventh_dealt = False
        self.community: str | None = None

    # -- flow ---------------------------------------------------------------------------

    @property
    def live_seats(self) -> list[int]:
        return [p.seat for p in self.betting.players if not p.folded]

    def wash_due(self) -> bool:
        """§1: before the table's first hand and after every ``wash_every`` hands dealt."""
        return self.since_wash is None or self.since_wash >= self.o.wash_every

    def carry(self) -> dict[str, Any]:
        """Hands dealt since the last wash, this one included once its first card registered."""
        since = 0 if self.washed else self.since_wash
        if since is not None and self.cards:
            since += 1
        return {WASH_KEY: since}

    def carry_unfinished(self) -> dict[str, Any]:
        return self.carry()  # a cancelled or voided hand counts if it was dealt; its wash counts

    # -- what the table sees (§3.5, §6) ----------------------------------------------------

    def shows(self, position: Position, ended: bool) -> bool:
        """An exposed 7th card plays face up; at a showdown every hand still in shows all its
        cards; a folded hand and an uncontested winner never show."""
        if position.index == 7 and position.seat in self.exposed:
            return True
        live = self.betting.live
        return ended and len(live) > 1 and position.seat in {p.seat for p in live}

    def mucked(self, position: Position) -> bool:
        return any(p.seat == position.seat and p.folded for p in self.betting.players)

    def next_step(self) -> DealStep | BetStep | EndStep:
        if len(self.betting.live) <= 1 or self._next >= len(self._plan):
            return EndStep()
        kind, street = self._plan[self._next]
        self._next += 1
        self.street = street
        if kind == "deal":
            undealt = 52 - len(self.cards) - len(self.burn_cards)
            positions = street_positions(street, self.live_seats, undealt, self.o.deck_exhaustion,
                                         len(self.burn_cards))
            if street == 3:
                prefix = [Position("WASH", confirm=True)] if self.wash_due() else []
                positions = prefix + [Position("SHUFFLE", confirm=True)] + positions
            window = int(self.o.exposure_window_seconds * 1000)
            betting = len(self.betting.able) >= 2
            if street == 7 and window > 0 and betting and any(p.seat is not None and p.index == 7 for p in positions):
                # §3.5: a moment to report an exposed 7th card before the betting opens (it decides
                # who acts first; with nobody left to bet there is nothing to decide: the card
                # plays either way and every hand still in shows at the showdown)
                positions.append(Position(LAST_CARD, confirm=True, window_ms=window))
            return DealStep(tuple(positions), "Last card. Good luck" if street == 7 else None)
        first, announce = self._opener(street)
        self.round_start[street] = len(self.betting.history)
        self.first_of[street] = first
        lim = self.o.street_limits[street]
        fixed = self.o.bring_in == "FIXED_0.50"
        limits = SpreadLimit(
            min_bet=lim.min, max_bet=lim.max, raise_rule=self.o.min_raise_rule,
            forced_open=street == 3, open_min=lim.min if street == 3 else None,
            open_max=(lim.min if fixed else lim.max) if street == 3 else None,
            raise_cap=self.o.raise_cap + 1, cap_players=3)
        return BetStep(first=first, limits=limits, street=_ORDINAL[street], announce=announce)

    def register(self, position: Position, code: str) -> None:
        if position.confirm:
            self.washed = self.washed or position.name == "WASH"
            return
        if position.burn:
            self.burn_cards.append(code)
            return
        self.cards[position.name] = code
        self.dealt[position.name] = position
        if position.hand == COMMUNITY:
            self.community = code
        if position.index == 7:
            self.seventh_dealt = True

    def corroborated(self) -> bool:
        return self.o.exposure_corroboration == "SUPERVISOR"

    def exposure_position(self, seat: int) -> str:
        """§3.5 concerns one card per seat: its 7th."""
        return f"P{seat}.7"

    def exposable(self, position: str) -> str | None:
        """§3.5: only a 7th card dealt to a seat, only before the 7th-street betting opens;
        any other exposed card is the supervisor's irregularity (§7, decks.md §5.4)."""
        if position not in self._sevenths:
            return (f"exposed card at {position}: only a 7th card may be exposed and play; "
                    "call the supervisor (decks.md §5.4)")
        pos = self.dealt.get(position)
        if pos is None or pos.seat is None:
            return f"{position} has not been dealt"
        if self.street != 7 or 7 in self.round_start:
            return f"{position} can only be reported exposed before the 7th-street betting opens"
        return None

    def expose(self, position: str) -> str | None:
        """§3.5: an exposed 7th card plays, and its player acts first on 7th street."""
        reason = self.exposable(position)
        if reason is not None:
            return reason
        seat = self.dealt[position].seat
        assert seat is not None
        if seat not in self.exposed:  # 7th-street deal order is seat order, whatever the report order
            self.exposed = sorted(self.exposed + [seat])
        return None

    # -- openers ------------------------------------------------------------------------

    def up_cards(self, seat: int) -> list[str]:
        ups = [self.cards[f"P{seat}.{i}"] for i in (3, 4, 5, 6) if f"P{seat}.{i}" in self.cards]
        if self.community is not None:
            ups.append(self.community)
        if seat in self.exposed:
            ups.append(self.cards[f"P{seat}.7"])
        return ups

    def _opener(self, street: int) -> tuple[str, str]:
        players = {p.seat: p.player_id for p in self.betting.players}
        if street == 3:
            seat = low_card([(s, self.cards[f"P{s}.3"]) for s in self.live_seats])
            return players[seat], f"{card_name(self.cards[f'P{seat}.3']).capitalize()}, low"
        live = self.live_seats
        if street == 7 and self.exposed:
            seat = self.exposed[0]
            return players[seat], f"P{seat} exposed the last card: P{seat} acts first"
        seat = first_to_act([(s, self.up_cards(s)) for s in live])
        name = showing_name(self.up_cards(seat))
        return players[seat], (name if name.endswith(" high") else f"{name} high").capitalize()

    # -- showdown -----------------------------------------------------------------------

    def seven(self, seat: int) -> list[str]:
        own = [self.cards[f"P{seat}.{i}"] for i in range(1, 8) if f"P{seat}.{i}" in self.cards]
        return own + ([self.community] if self.community is not None else [])

    def outcome(self) -> GameOutcome:
        b = self.betting
        live = [p.player_id for p in b.players if not p.folded]
        contributions = b.contributions()
        pots = build_pots(contributions, live)
        total = sum((p.amount for p in pots), Decimal(0))
        raked = self.seventh_dealt or self.o.rake_early_end == "RAKE"
        rake = rake_amount(total, self.o.rake_rate, self.o.rake_cap, self.unit) if raked else Decimal(0)
        pots = take_rake(pots, rake)
        showdown = len(live) > 1
        hands: dict[str, RankedStudHand] = {}
        if showdown:
            hands = {p: evaluate(self.seven(self.seat_of[p])) for p in live}

        def winners_of(eligible: Sequence[str]) -> list[str]:
            if not showdown:
                return list(eligible)
            best = max(hands[p].rank_key for p in eligible)
            tied = [p for p in eligible if hands[p].rank_key == best]
            return sorted(tied, key=lambda p: odd_chip_key(hands[p].best_five), reverse=True)

        won, records = award(pots, winners_of, self.unit)
        player_bets: dict[str, dict[str, BetResolution]] = {}
        returned: dict[str, str] = {}
        for p in b.players:
            back = p.stack + won.get(p.player_id, Decimal(0))
            brought = p.stack + p.total
            outcome = Outcome.WIN if back > brought else Outcome.LOSE if back < brought else Outcome.PUSH
            player_bets[p.player_id] = {CHIPS: BetResolution(outcome, returned=back)}
            returned[p.player_id] = str(back)
        main_winners = records[0]["winners"] if records else []
        winner = ",".join(f"P{self.seat_of[p]}" for p in main_winners)
        announce = None
        if showdown:
            h = hands[main_winners[0]]
            announce = f"{h.name[0].upper()}{h.name[1:]}, win"
        return GameOutcome(
            hands={f"P{self.seat_of[p]}": HandInfo(h.best_five, h.category.lower()) for p, h in hands.items()},
            winner=winner or None, bets={}, player_bets=player_bets,
            details={
                "pots": records, "rake": str(rake), "raked": raked, "total_pot": str(total),
                "antes": {p: str(a) for p, a in self.antes.items()},
                "contributions": {p: str(a) for p, a in contributions.items()},
                "returned": returned, "showdown": showdown,
                "showdown_order": [f"P{self.seat_of[p]}" for p in self.showdown_order()] if showdown else [],
                "names": {f"P{self.seat_of[p]}": h.name for p, h in hands.items()},
                "community": self.community, "exposed": [f"P{s}.7" for s in self.exposed],
                "announce": announce,
                "actions": [r.as_json() for r in b.history],
            })

    def showdown_order(self) -> list[str]:
        """§6.3: the last aggressor of the final round shows first, else the first to act
        on 7th street; then clockwise."""
        b = self.betting
        live = [p.player_id for p in b.players if not p.folded]
        last_street = max(self.round_start) if self.round_start else 3
        final = b.history[self.round_start.get(last_street, 0):]
        aggressors = [r.player_id for r in final if r.increment > 0 and r.player_id in live]
        first = aggressors[-1] if aggressors else self.first_of.get(last_street, live[0])
        order = [p.player_id for p in b.players]
        i = order.index(first)
        rotated = order[i:] + order[:i]
        return [p for p in rotated if p in live]

