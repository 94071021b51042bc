"""The round state machine: pure, no IO, no clock (h11-style).

Events from :mod:`dealer.core.events` go in through :meth:`Round.handle`; a :class:`Step`
comes out saying whether the event was accepted, whether it must be journaled, and
which effects to release (station prompts, round events, the round result). The
transition table :data:`TRANSITIONS` reads like the rulebook: anything not in it is
rejected with a clear reason and changes nothing.

The error rules of ``decks.md`` §5 live here, for every game: a no-read, misread,
corrupt or lost frame, device fault, foreign card or duplicate card never advances the
deal; it prompts a RESCAN and, after ``alert_after`` identical rejections in a row, a
supervisor ALERT. A link failure while betting is open cancels the round (refund all);
after betting has closed the round continues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Union

from dealer.core.events import (
    ActionTimeout,
    CardExposed,
    CloseBetting,
    ConfirmTimeout,
    DealerConfirm,
    DecisionTimeout,
    Event,
    LinkDown,
    OpenRound,
    PlaceBet,
    PlayerAction,
    PlayerDecision,
    ReadFailed,
    ResultDelivered,
    ScanRead,
    SupervisorVoid,
)
from dealer.core import visibility
from dealer.games.base import BetResolution, BetStep, BetView, DealStep, Game, PeerHand, Position
from dealer.core.messages import (
    BetsSummary,
    BetTypeResult,
    DecisionRecord,
    HandResult,
    MoneyRules,
    PlayerMessage,
    RoundEvent,
    RoundResult,
    StationPrompt,
)
from dealer.core.money import MoneyError, Rounding, check_stake
from dealer.core.round_ids import sequence_of


class Phase(StrEnum):
    BETTING_OPEN = "BETTING_OPEN"
    BETTING_CLOSED = "BETTING_CLOSED"  # the round has started (teen-patti-2020.md §6)
    DEALING = "DEALING"
    DECISION = "DECISION"  # the deal is complete; players decide (timer runs from here only)
    ACTION = "ACTION"  # peer games: a betting round between cards (the turn timer runs only here)
    RESULT = "RESULT"  # result computed, waiting in the outbox for settlement's acknowledgement
    SETTLED = "SETTLED"  # settlement acknowledged the result
    CANCELLED = "CANCELLED"  # failure before the round started: refund all
    VOID = "VOID"  # supervisor void: refund all


#: Phases in which the round is still being played.
ACTIVE = frozenset({Phase.BETTING_OPEN, Phase.BETTING_CLOSED, Phase.DEALING, Phase.DECISION, Phase.ACTION})


@dataclass(frozen=True, slots=True)
class BetLimit:
    min: Decimal
    max: Decimal


@dataclass(frozen=True)
class TableRules:
    """Everything the pure core needs to know about a table (built from configuration)."""

    table_id: str
    game: Game
    currency: str = "EUR"
    minor_unit: Decimal = Decimal("0.01")
    rounding: Rounding = Rounding.DOWN
    limits: Mapping[str, BetLimit] = field(default_factory=dict)
    alert_after: int = 3
    decision_ms: int = 15_000
    action_ms: int = 20_000  # peer games: the turn timer
    #: The canonical JSON these rules were built from (dealer.core.rules), its SHA-256 and the
    #: software version journaled with them: every result of a round played under them names both.
    canonical: str = ""
    rules_hash: str = ""
    software_version: str = ""

    @property
    def money(self) -> MoneyRules:
        return MoneyRules(currency=self.currency, minor_unit=self.minor_unit, rounding=self.rounding)


@dataclass(frozen=True, slots=True)
class Rejection:
    """An event the machine refused. Nothing changed; the reason is for the sender and the log."""

    event_type: str
    reason: str


Effect = Union[StationPrompt, RoundEvent, RoundResult, PlayerMessage, Rejection]


@dataclass(slots=True)
class Step:
    accepted: bool
    journal: bool = False
    effects: list[Effect] = field(default_factory=list)

    @property
    def rejection(self) -> Rejection | None:
        return next((e for e in self.effects if isinstance(e, Rejection)), None)


_READ_FAILURE_TEXT = {
    "noread": "the scanner could not read the card",
    "misread": "the scanner misread the card",
    "corrupt_frame": "the scanner's message arrived damaged",
    "frame_lost": "a scanner message was lost on the line",
    "device_fault": "the scanner reported a fault",
    "forged_frame": "the scanner message failed authentication",
    "foreign_card": "the card is not part of this game's deck",
    "duplicate_card": "the card was already registered in this round",
}


class Round:
    """One round at one table, from betting open to settled (or cancelled / void)."""

    def __init__(self, rules: TableRules, opened: OpenRound) -> None:
        self.rules = rules
        self.round_id = opened.round_id
        self.context = dict(opened.context)
        #: The round's secret random draw (``OpenRound.draw``; None in rounds journaled before draws).
        self.draw = opened.draw
        self.opened_at = opened.at
        self.betting_closes_at = opened.betting_closes_at
        self.closed_at: int | None = None
        self.phase = Phase.BETTING_OPEN
        self.plan: tuple[Position, ...] = ()  # fixed when betting closes: it depends on the seats that bet
        self.next_index = 0
        self.cards: dict[str, str] = {}
        #: Cards the reader reported burned where the plan has no burn (code -> deck number): on no
        #: position, in no hand, never shown; a later read of one is a duplicate (docs/scanner-protocol.md §10.4).
        self.set_aside: dict[str, int] = {}
        self.bets: dict[str, PlaceBet] = {}
        self._held: dict[str, set[str]] = {}
        self.seat_owner: dict[int, str] = {}
        self.deciders: dict[str, int | None] = {}
        self.decisions: dict[str, DecisionRecord] = {}
        self.decision_deadline: int | None = None
        self._reject_key: tuple[str, str] | None = None
        self.reject_count = 0
        self.result: RoundResult | None = None
        self.delivered = False
        self.hand: PeerHand | None = None  # peer games: the hand, created when betting closes
        self.turn = 0  # peer games: numbers each turn, so a late timer cannot act on a newer one
        self.action_deadline: int | None = None
        self.street: str | None = None
        self.announce: str | None = None
        #: A timed confirmation is expected (stud's LAST_CARD): it is taken as given at this
        #: instant (epoch ms, journaled data like the other deadlines); None otherwise.
        self.confirm_deadline: int | None = None
        #: Bumped before and after every event, so a cached visibility view is never stale.
        self.revision = 0

    # -- public -----------------------------------------------------------------------

    @property
    def table_id(self) -> str:
        return self.rules.table_id

    @property
    def expected_position(self) -> str | None:
        return self.plan[self.next_index].name if self.next_index < len(self.plan) else None

    def handle(self, event: Event) -> Step:
        self.revision += 1
        try:
            action = TRANSITIONS.get((self.phase, event.type))
            step = self._reject(event, self._why_not(event)) if action is None else action(self, event)
        finally:
            self.revision += 1
        # a refusal never names a hidden card, whoever wrote the reason (the games' rules too)
        step.effects = [Rejection(e.event_type, visibility.redact(self, e.reason)) if isinstance(e, Rejection) else e
                        for e in step.effects]
        return step

    def prompt_now(self, at: int) -> StationPrompt:
        """What the dealer station should show right now (used after a restart)."""
        if self.phase == Phase.BETTING_OPEN:
            return self._prompt("WAIT", at, message="betting is open: do not deal")
        if self.phase in (Phase.BETTING_CLOSED, Phase.DEALING):
            return self._next_prompt(at)
        if self.phase == Phase.DECISION:
            return self._prompt("WAIT", at, message="players are deciding: do not reveal")
        if self.phase == Phase.ACTION and self.hand is not None:
            return self._prompt("WAIT", at, announce=self.announce, message=self.hand.turn_prompt(self.street))
        return self._prompt("DONE", at, message=f"round {self.phase.lower()}")

    def private_now(self, at: int) -> list[PlayerMessage]:
        """Every private message a player needs to see the round as it stands (used after a
        reconnect or a restart: live messages published while the broker was down are lost):
        their hole cards so far, a pending decision, and the turn of the player to act."""
        if self.phase not in ACTIVE:
            return []
        out = [self._tell(owner, "hole_card", at, position=p.name, card=self.cards[p.name])
               for p, owner in visibility.owner_cards(self)]
        if self.phase == Phase.DECISION:
            actions = list(self.rules.game.decision_actions)
            out += [self._tell(p, "decision_required", at, actions=actions, closes_at=self.decision_deadline,
                               seat=seat) for p, seat in sorted(self.deciders.items()) if p not in self.decisions]
        if self.phase == Phase.ACTION and self.hand is not None:
            out.append(self._your_turn(at))
        return out

    def resume(self, at: int) -> list[Effect]:
        """Players could not reach the backend (the broker link was down, or the backend itself
        was): every pending decision, or the pending turn, gets a whole window from ``at``; so
        does the station's window before a timed confirmation (it reports through the broker too)."""
        return self.resume_decisions(at) + self.resume_turn(at) + self.resume_window(at)

    def resume_window(self, at: int) -> list[Effect]:
        """A timed confirmation (stud's LAST_CARD) gets its whole window again from ``at``."""
        if self.phase not in (Phase.BETTING_CLOSED, Phase.DEALING) or self.confirm_deadline is None:
            return []
        self._arm_window(at)
        pos = self.plan[self.next_index]
        return [self._event("confirm_window", at, step=pos.name, closes_at=self.confirm_deadline, resumed=True),
                self._next_prompt(at)]

    def resume_betting(self, at: int, closes_at: int | None) -> list[Effect]:
        """The table was paused while betting was open (no bet was taken): betting runs a full
        period again until ``closes_at`` (the service's edge data), told in ``betting_resumed``."""
        if self.phase != Phase.BETTING_OPEN or closes_at is None:
            return []
        self.betting_closes_at = closes_at
        return [self._event("betting_resumed", at, betting_closes_at=closes_at)]

    def resume_decisions(self, at: int) -> list[Effect]:
        """Every player still undecided gets a whole decision window again, told on their own
        topic (``decision_required`` with ``resumed: true``); a public ``decisions_open``
        with ``resumed: true`` marks it. Nobody is folded because the house was unreachable."""
        if self.phase != Phase.DECISION:
            return []
        self.decision_deadline = at + self.rules.decision_ms
        pending = sorted(p for p in self.deciders if p not in self.decisions)
        actions = list(self.rules.game.decision_actions)
        return [self._event("decisions_open", at, players=pending, closes_at=self.decision_deadline, resumed=True),
                *[self._tell(p, "decision_required", at, actions=actions, closes_at=self.decision_deadline,
                             seat=self.deciders[p], resumed=True) for p in pending],
                self._prompt("WAIT", at, message="players are deciding: do not reveal")]

    def resume_turn(self, at: int) -> list[Effect]:
        """The broker link is back: the player to act gets a whole turn again (nobody is
        timed out because the studio's broker was down)."""
        if self.phase != Phase.ACTION or self.hand is None:
            return []
        self.action_deadline = at + self.rules.action_ms
        return [self._event("turn", at, player_id=self.hand.to_act, turn=self.turn, street=self.street,
                            closes_at=self.action_deadline, resumed=True, **self.hand.turn_summary()),
                self._your_turn(at, resumed=True), self.prompt_now(at)]

    # -- transitions ------------------------------------------------------------------

    def _place_bet(self, ev: PlaceBet) -> Step:
        r = self.rules
        reason: str | None = None
        if ev.round_id is not None and ev.round_id != self.round_id:
            reason = f"bet is for round {ev.round_id}, but round {self.round_id} is open"
        elif ev.bet_id in self.bets:
            reason = f"duplicate bet id {ev.bet_id!r}"
        else:
            reason = r.game.check_bet(ev.bet_type, frozenset(self._held.get(ev.player_id, ())))
        if reason is None:
            reason = self._seat_problem(ev)
        if reason is None:
            reason = r.game.check_stake(ev.stake, ev.player_id, self.context)
        if reason is None:
            try:
                check_stake(ev.stake, r.minor_unit)
            except MoneyError as exc:
                reason = str(exc)
        limit = r.limits.get(ev.bet_type)
        if reason is None and limit is not None and not (limit.min <= ev.stake <= limit.max):
            reason = f"stake {ev.stake} outside the table limits {limit.min}..{limit.max} for {ev.bet_type}"
        if reason is not None:
            step = self._reject(ev, reason)
            step.effects.append(self._event("bet_rejected", ev.at, bet_id=ev.bet_id, reason=reason))
            return step
        self.bets[ev.bet_id] = ev
        self._held.setdefault(ev.player_id, set()).add(ev.bet_type)
        if ev.seat is not None:
            self.seat_owner[ev.seat] = ev.player_id
        data = {"bet_id": ev.bet_id, "player_id": ev.player_id, "bet_type": ev.bet_type, "stake": str(ev.stake),
                "seat": ev.seat}
        return Step(True, True, [self._event("bet_accepted", ev.at, **data),
                                 self._tell(ev.player_id, "bet_accepted", ev.at, **data)])

    def _seat_problem(self, ev: PlaceBet) -> str | None:
        """Seated games: a bet names an existing seat, one player per seat, one seat per player."""
        n = self.rules.game.seat_count
        if n == 0:
            return None if ev.seat is None else f"{self.rules.game.name} bets have no seat (got seat {ev.seat})"
        if ev.seat is None:
            return f"a {self.rules.game.name} bet must name a seat 1..{n}"
        if not 1 <= ev.seat <= n:
            return f"seat {ev.seat} does not exist at this table (seats 1..{n})"
        owner = self.seat_owner.get(ev.seat)
        if owner is not None and owner != ev.player_id:
            return f"seat {ev.seat} is taken by another player"
        mine = next((s for s, p in self.seat_owner.items() if p == ev.player_id), None)
        if mine is not None and mine != ev.seat:
            return f"player {ev.player_id} already plays seat {mine}"
        return None

    def _close_betting(self, ev: CloseBetting) -> Step:
        game = self.rules.game
        self.phase = Phase.BETTING_CLOSED
        self.closed_at = ev.at
        closed = self._event("betting_closed", ev.at, by=ev.by, bets=len(self.bets))
        if not game.peer:
            self.plan = game.deal_plan(sorted(self.seat_owner))
            return Step(True, True, [closed, self._next_prompt(ev.at)])
        if len(self.seat_owner) < game.min_players:
            reason = f"{game.name} needs at least {game.min_players} seated players, {len(self.seat_owner)} sat down"
            return Step(True, True, [closed] + self._refund_all(Phase.CANCELLED, "CANCELLED", reason, ev.at))
        chips: dict[str, Decimal] = {}
        for bet in self.bets.values():
            chips[bet.player_id] = chips.get(bet.player_id, Decimal(0)) + bet.stake
        seq = sequence_of(self.round_id)
        self.hand = game.start_hand(dict(sorted(self.seat_owner.items())), chips, 1 if seq is None else seq,
                                    self.rules.minor_unit, self.context, draw=self.draw)
        return Step(True, True, [closed] + self._advance_hand(ev.at))

    def _scan(self, ev: ScanRead) -> Step:
        pos = self.plan[self.next_index]
        if pos.confirm:
            card = "a burn card" if ev.burn else visibility.safe_code(self, ev.code, "card")
            return Step(False, False, [Rejection(ev.type, f"{pos.name} is to be confirmed before the next card "
                                                 f"({card} not registered)"), self._next_prompt(ev.at)])
        if ev.code not in self.rules.game.deck:
            return self._rescan(ev, "foreign_card", ev.code)
        if self.set_aside.get(ev.code) == pos.deck:  # burned earlier in this deal
            return self._rescan(ev, "duplicate_card", ev.code)
        if ev.burn and not pos.burn:
            return self._set_aside(ev, pos)
        if pos.from_burns:  # dealt again from this round's burn cards (stud RESHUFFLE_BURNS)
            burns = {self.cards[p.name] for p in self.plan if p.burn and p.name in self.cards}
            reused = {self.cards[p.name] for p in self.plan if p.from_burns and p.name in self.cards}
            if ev.code not in burns or ev.code in reused:
                return self._rescan(ev, "duplicate_card", ev.code)
        else:
            held = next((p for p in self.plan if p.deck == pos.deck and self.cards.get(p.name) == ev.code), None)
            if held is not None:
                return self._rescan(ev, "duplicate_card", ev.code)
        self.cards[pos.name] = ev.code
        self.next_index += 1
        self.phase = Phase.DEALING
        self._reject_key, self.reject_count = None, 0
        if self.hand is not None:
            self.hand.register(pos, ev.code)
        effects: list[Effect] = [self._event(
            "card_registered", ev.at, position=pos.name, step=self.next_index,
            card=ev.code if visibility.is_public(self, pos) else None,
        )]
        effects += [self._tell(owner, "hole_card", ev.at, position=p.name, card=self.cards[p.name])
                    for p, owner in visibility.deliveries(self, pos)]  # to their owners only
        if self.next_index < len(self.plan):
            effects += self._window_opened(ev.at)
            effects.append(self._next_prompt(ev.at))
            return Step(True, True, effects)
        if self.hand is not None:
            return Step(True, True, effects + self._advance_hand(ev.at))
        self.deciders = self.rules.game.deciders(self._bet_views())
        if self.deciders:
            return Step(True, True, effects + self._open_decisions(ev.at))
        return Step(True, True, effects + self._finish(ev.at))

    def _set_aside(self, ev: ScanRead, pos: Position) -> Step:
        """A card the reader says was burned where the deal plan expects a dealt card: the dealer
        put it on the burn pile, so it goes to no position and no hand (decks.md §5.2(6): a card
        is assigned only to the expected position), is never shown (§3: burns are journal only),
        and the deal still waits for ``pos``. A burn where the plan has one registers there."""
        held = next((p for p in self.plan if p.deck == pos.deck and self.cards.get(p.name) == ev.code), None)
        if held is not None:
            return self._rescan(ev, "duplicate_card", ev.code)
        self.set_aside[ev.code] = pos.deck
        nxt = self._next_prompt(ev.at)
        return Step(True, True, [
            self._event("card_burned", ev.at, expected=pos.name, count=len(self.set_aside)),
            nxt.model_copy(update={"message": f"burn card set aside, not dealt: {nxt.message}"}),
        ])

    def _open_decisions(self, at: int) -> list[Effect]:
        """The deal is complete: the decision timer starts now, never while a card is awaited."""
        self.phase = Phase.DECISION
        self.decision_deadline = at + self.rules.decision_ms
        actions = list(self.rules.game.decision_actions)
        effects: list[Effect] = [
            self._event("decisions_open", at, players=sorted(self.deciders), closes_at=self.decision_deadline),
            self._prompt("WAIT", at, message="players are deciding: do not reveal"),
        ]
        effects += [self._tell(p, "decision_required", at, actions=actions, closes_at=self.decision_deadline,
                               seat=seat) for p, seat in sorted(self.deciders.items())]
        return effects

    def _decide(self, ev: PlayerDecision) -> Step:
        game = self.rules.game
        if ev.player_id not in self.deciders:
            return self._reject(ev, f"player {ev.player_id} has no decision to make in round {self.round_id}")
        if ev.player_id in self.decisions:
            return self._reject(ev, f"player {ev.player_id} already chose {self.decisions[ev.player_id].action}")
        if ev.action not in game.decision_actions:
            return self._reject(ev, f"unknown action {ev.action!r} (expected one of {', '.join(game.decision_actions)})")
        effects = self._record_decision(ev.player_id, ev.action, "player", ev.at)
        if len(self.decisions) == len(self.deciders):
            effects += self._finish(ev.at)
        return Step(True, True, effects)

    def _decision_timeout(self, ev: DecisionTimeout) -> Step:
        default = self.rules.game.default_decision()
        assert default is not None, "a game with decisions must have a default"
        effects: list[Effect] = []
        for player in sorted(set(self.deciders) - set(self.decisions)):
            effects += self._record_decision(player, default, "timeout", ev.at)
        return Step(True, True, effects + self._finish(ev.at))

    def _record_decision(self, player: str, action: str, by: str, at: int) -> list[Effect]:
        ante = next((b.stake for b in self.bets.values() if b.player_id == player and b.bet_type == "ante"), None)
        self.decisions[player] = DecisionRecord(action=action, by=by, seat=self.deciders[player],  # type: ignore[arg-type]
                                                play_stake=ante if action == "PLAY" else None)
        return [self._event("decision_made", at, player_id=player, action=action, by=by),
                self._tell(player, "decision_accepted", at, action=action, by=by)]

    # -- peer games: the hand between cards --------------------------------------------------

    def _advance_hand(self, at: int) -> list[Effect]:
        """The previous step is complete: deal the next street, open a betting round, or finish."""
        hand = self.hand
        assert hand is not None
        effects: list[Effect] = []
        while True:
            step = hand.next_step()
            effects += self._hand_notes(at)
            if isinstance(step, DealStep):
                self.plan = tuple(self.plan) + step.positions
                self.phase = Phase.DEALING if self.cards else Phase.BETTING_CLOSED
                self.action_deadline, self.announce = None, step.announce
                return effects + self._window_opened(at) + [self._next_prompt(at)]
            if isinstance(step, BetStep):
                self.street, self.announce = step.street, step.announce
                someone = hand.open_turns(step)
                # ``designated`` is who the rules name (low card, high hand); ``first`` who acts,
                # which differs when the designated player is all-in
                effects.append(self._event("betting_round_opened", at, street=step.street, announce=step.announce,
                                           designated=step.first, first=hand.to_act,
                                           betting="TO_ACT" if someone else "ROUND_OVER"))
                if someone:
                    return effects + self._next_turn(at)
                effects += self._close_betting_round(at)
                continue
            return effects + self._finish(at)

    def _hand_notes(self, at: int) -> list[Effect]:
        """The hand's public notes (a pot awarded, a showdown, a rematch) as round events; any
        hand they show carries its cards only as far as :mod:`dealer.core.visibility` shows them now."""
        assert self.hand is not None
        return [self._event(name, at, **visibility.noted(self, data)) for name, data in self.hand.notes()]

    def _next_turn(self, at: int) -> list[Effect]:
        hand = self.hand
        assert hand is not None and hand.to_act is not None
        self.phase = Phase.ACTION
        self.turn += 1
        self.action_deadline = at + self.rules.action_ms
        reserved = hand.take_reservation(hand.to_act)
        if isinstance(reserved, tuple):  # a reserved action still legal: it runs now (seotda.md §6.2)
            step = self._act(hand.to_act, reserved[0], reserved[1], "reservation", None, at)
            if step.accepted:
                return [self._event("reservation_executed", at, player_id=step_player(step), turn=self.turn)] + step.effects
            reserved = "the reserved action is no longer allowed"
        notes: list[Effect] = []
        if isinstance(reserved, str):
            notes = [self._tell(hand.to_act, "reservation_cancelled", at, reason=reserved)]
        return notes + [
            self._event("turn", at, player_id=hand.to_act, turn=self.turn, street=self.street,
                        closes_at=self.action_deadline, **hand.turn_summary()),
            self._your_turn(at),
            self.prompt_now(at),
        ]

    def _your_turn(self, at: int, **extra: object) -> PlayerMessage:
        assert self.hand is not None and self.hand.to_act is not None
        return self._tell(self.hand.to_act, "your_turn", at, turn=self.turn, street=self.street,
                          closes_at=self.action_deadline, **self.hand.turn_options(), **extra)

    def _close_betting_round(self, at: int) -> list[Effect]:
        assert self.hand is not None
        return [self._event(name, at, **data) for name, data in self.hand.close_turns()]

    def _player_action(self, ev: PlayerAction) -> Step:
        if ev.round_id is not None and ev.round_id != self.round_id:
            return self._refuse_player(ev, ev.player_id, f"action is for round {ev.round_id}, but round "
                                       f"{self.round_id} is in play")
        assert self.hand is not None
        if ev.turn is not None and ev.turn != self.turn and not ev.reserve:
            return self._refuse_player(ev, ev.player_id, f"the action is for turn {ev.turn}, which is over "
                                       f"(turn {self.turn} is running)")
        if ev.reserve:
            reason = self.hand.reserve(ev.player_id, ev.action, ev.amount)
            if reason is not None:
                return self._refuse_player(ev, ev.player_id, reason)
            return Step(True, True, [self._tell(ev.player_id, "reservation_accepted", ev.at, action=ev.action)])
        return self._act(ev.player_id, ev.action, ev.amount, "player", ev, ev.at, ev.card)

    def _action_timeout(self, ev: ActionTimeout) -> Step:
        assert self.hand is not None and self.hand.to_act is not None
        if ev.turn != self.turn:
            return self._reject(ev, f"timer for turn {ev.turn} is stale (turn {self.turn} is running)")
        action, amount, card = self.hand.default_action()
        return self._act(self.hand.to_act, action, amount, "timeout", ev, ev.at, card)

    def _act(self, player: str, action: str, amount: Decimal | None, by: str, ev: Event | None, at: int,
             card: str | None = None) -> Step:
        hand = self.hand
        assert hand is not None
        label = action
        if by == "player" or by == "reservation":
            translated = hand.translate(player, action, amount)
            if isinstance(translated, str):
                return self._refuse(ev, "player_action", translated)
            action, amount = translated
        record, more = hand.do_action(player, action, amount, card, by)
        if isinstance(record, str):
            return self._refuse(ev, "player_action", record)
        data = record | {"by": by} | ({"button": label} if label != action else {})
        effects: list[Effect] = [self._event("player_acted", at, street=self.street, **data),
                                 self._tell(player, "action_accepted", at, **data)]
        effects += self._hand_notes(at)
        if more:
            return Step(True, True, effects + self._next_turn(at))
        effects += self._close_betting_round(at)
        return Step(True, True, effects + self._advance_hand(at))

    def _refuse(self, ev: Event | None, event_type: str, reason: str) -> Step:
        return Step(False, False, [Rejection(ev.type if ev is not None else event_type, reason)])

    def _refuse_player(self, ev: Event, player: str, reason: str) -> Step:
        """The service answers a refused action on the acting player's own topic."""
        return self._reject(ev, reason)

    def _confirm(self, ev: DealerConfirm) -> Step:
        pos = self.expected_position
        if pos is None or not self.plan[self.next_index].confirm or ev.step != pos:
            want = f"the next step is {pos}" if pos else "no step is expected"
            return self._reject(ev, f"cannot confirm {ev.step}: {want}")
        return self._step_confirmed(ev.step, ev.at, {})

    def _confirm_timeout(self, ev: ConfirmTimeout) -> Step:
        """The window of a timed confirmation ran out: the step is taken as confirmed."""
        pos = self.expected_position
        if self.confirm_deadline is None or ev.step != pos:
            want = f"the next step is {pos}" if pos else "no step is expected"
            return self._reject(ev, f"no window of {ev.step} is open: {want}")
        return self._step_confirmed(ev.step, ev.at, {"by": "timer"})

    def _step_confirmed(self, step: str, at: int, extra: dict[str, object]) -> Step:
        pos = self.plan[self.next_index]
        self.next_index += 1
        self.confirm_deadline = None
        if self.hand is not None:
            self.hand.register(pos, "")  # stud counts its washes
        effects: list[Effect] = [self._event("dealer_confirmed", at, step=step, **extra)]
        if self.next_index < len(self.plan):
            return Step(True, True, effects + self._window_opened(at) + [self._next_prompt(at)])
        return Step(True, True, effects + self._advance_hand(at))

    def _arm_window(self, at: int) -> None:
        pos = self.plan[self.next_index] if self.next_index < len(self.plan) else None
        self.confirm_deadline = at + pos.window_ms if pos is not None and pos.confirm and pos.window_ms else None

    def _window_opened(self, at: int) -> list[Effect]:
        """The next step is a timed confirmation: its window starts now (public ``confirm_window``)."""
        self._arm_window(at)
        if self.confirm_deadline is None:
            return []
        return [self._event("confirm_window", at, step=self.plan[self.next_index].name,
                            closes_at=self.confirm_deadline)]

    def _exposed(self, ev: CardExposed) -> Step:
        if self.hand is None:
            return self._reject(ev, f"{self.rules.game.name} has no rule for exposed cards: call the supervisor")
        reason = self.hand.expose(ev.position)
        if reason is not None:
            return self._reject(ev, reason)
        return Step(True, True, [self._event("card_exposed", ev.at, position=ev.position,
                                             card=self.cards.get(ev.position))])

    def _read_failed(self, ev: ReadFailed) -> Step:
        return self._rescan(ev, ev.reason, ev.detail)

    def _link_before_first_card(self, ev: LinkDown) -> Step:
        """Betting closed but no card yet: games that start at the first card cancel (decks.md §5.3)."""
        if self.rules.game.starts_at_first_card:
            return self._cancel_on_link(ev)
        return self._link_noted(ev)

    def _cancel_on_link(self, ev: LinkDown) -> Step:
        reason = f"link {ev.link} down before the round started" + (f": {ev.reason}" if ev.reason else "")
        return Step(True, True, self._refund_all(Phase.CANCELLED, "CANCELLED", reason, ev.at))

    def _link_noted(self, ev: LinkDown) -> Step:
        """After betting closed a link failure does not stop the round (decks.md §5.3)."""
        return Step(True, False, [self._event("link_down_round_continues", ev.at, link=ev.link)])

    def _void(self, ev: SupervisorVoid) -> Step:
        reason = f"voided by supervisor {ev.supervisor}: {ev.reason}"
        return Step(True, True, self._refund_all(Phase.VOID, "VOIDED", reason, ev.at))

    def _delivered(self, ev: ResultDelivered) -> Step:
        if self.delivered:
            return self._reject(ev, f"the result of round {self.round_id} was already delivered")
        self.delivered = True
        if self.phase == Phase.RESULT:
            self.phase = Phase.SETTLED
        data = {"idempotency_key": ev.idempotency_key} if ev.idempotency_key is not None else {}
        return Step(True, True, [self._event("round_settled", ev.at, **data, outbox_id=ev.outbox_id)])

    # -- helpers ----------------------------------------------------------------------

    def _rescan(self, ev: ScanRead | ReadFailed, reason: str, detail: str) -> Step:
        """Neither the public event nor the station's prompt names a hidden card (a duplicate of
        a face-down card, a misread that spells one): stations and ops never see one."""
        key = (reason, detail)
        self.reject_count = self.reject_count + 1 if key == self._reject_key else 1
        self._reject_key = key
        pos = self.expected_position
        text = _READ_FAILURE_TEXT[reason]
        if reason == "duplicate_card" and detail in self.set_aside:
            detail = "a card already burned"  # burns are never shown
        elif reason == "duplicate_card":
            detail = visibility.safe_code(self, detail, "a face-down card already dealt")
        else:
            detail = visibility.redact(self, detail)
        effects: list[Effect] = [
            self._event("scan_rejected", ev.at, position=pos, reason=reason, detail=detail, count=self.reject_count),
            self._prompt("RESCAN", ev.at, reason=reason, count=self.reject_count,
                         message=f"RESCAN {pos}: {text}" + (f" ({detail})" if detail else "")),
        ]
        if self.reject_count % self.rules.alert_after == 0:
            effects.append(self._prompt(
                "ALERT", ev.at, reason=reason, count=self.reject_count,
                message=f"SUPERVISOR: {self.reject_count} identical rejections at {pos} ({reason}"
                        + (f" {detail}" if detail else "") + f"); check the shoe: the deal stays at {pos} until a valid card registers",
            ))
        return Step(True, True, effects)

    def _bet_views(self) -> list[BetView]:
        return [BetView(b.bet_id, b.player_id, b.bet_type, b.stake, b.seat) for b in self.bets.values()]

    def _finish(self, at: int) -> list[Effect]:
        r = self.rules
        if self.hand is not None:
            outcome = self.hand.outcome()
        else:
            dealt = {p.name: self.cards[p.name] for p in self.plan if not p.burn and p.name in self.cards}
            outcome = r.game.resolve(dealt, self._bet_views(), {p: d.action for p, d in self.decisions.items()})
        self.phase = Phase.RESULT
        # what the table shows now; folded hands, an uncontested winner, burns: the journal only
        revealed = visibility.revealed(self)
        cards, hands, details = visibility.shown(self, outcome.hands, outcome.details)
        self.result = RoundResult(
            idempotency_key=f"{self.table_id}:{self.round_id}",
            table_id=self.table_id, round_id=self.round_id, game=r.game.name,
            outcome="COMPLETED", refund_all=False, cards=cards,
            hands={k: HandResult(cards=list(h.cards), category=h.category) for k, h in hands.items()},
            winner=outcome.winner,
            bets={k: _bet_result(b) for k, b in outcome.bets.items()},
            player_bets={p: {k: _bet_result(b) for k, b in res.items()} for p, res in outcome.player_bets.items()},
            decisions=dict(self.decisions),
            details=details, accepted_bets=self._bets_summary(), money=r.money,
            opened_at=self.opened_at, closed_at=self.closed_at, finished_at=at,
            rules_hash=self.rules.rules_hash, software_version=self.rules.software_version,
        )
        reveal: list[Effect] = [self._event("cards_revealed", at, cards=revealed)] if revealed else []
        announce = outcome.details.get("announce") if self.hand is not None else None
        return reveal + [
            self._event("round_result", at, winner=outcome.winner,
                        hands={k: h.category for k, h in outcome.hands.items()}),
            self._prompt("DONE", at, message=f"round complete: winner {outcome.winner}", announce=announce),
            self.result,
        ]

    def _refund_all(self, phase: Phase, outcome: str, reason: str, at: int) -> list[Effect]:
        self.phase = phase
        public = visibility.public_cards(self)  # the hole cards dealt so far stay in the journal
        self.result = RoundResult(
            idempotency_key=f"{self.table_id}:{self.round_id}",
            table_id=self.table_id, round_id=self.round_id, game=self.rules.game.name,
            outcome=outcome, reason=reason, refund_all=True, cards=public,  # type: ignore[arg-type]
            accepted_bets=self._bets_summary(), money=self.rules.money,
            opened_at=self.opened_at, closed_at=self.closed_at, finished_at=at,
            rules_hash=self.rules.rules_hash, software_version=self.rules.software_version,
        )
        return [
            self._event(f"round_{outcome.lower()}", at, reason=reason),
            self._prompt("DONE", at, reason=reason, message=f"round {outcome.lower()}: every bet is refunded"),
            self.result,
        ]

    def _bets_summary(self) -> BetsSummary:
        stakes: dict[str, Decimal] = {}
        for bet in self.bets.values():
            stakes[bet.bet_type] = stakes.get(bet.bet_type, Decimal(0)) + bet.stake
        return BetsSummary(count=len(self.bets), stakes=stakes, bet_ids=list(self.bets))

    def _why_not(self, event: Event) -> str:
        t, p, rid = event.type, self.phase, self.round_id
        if t in ("scan_read", "read_failed"):
            if p == Phase.BETTING_OPEN:
                return "card scanned while betting is open: the deal starts after betting closes"
            if p == Phase.ACTION:
                return f"players are betting in round {rid}: the next card comes after the betting round"
            return f"the deal of round {rid} is complete ({p.value}): no card is expected"
        if t == "place_bet":
            return f"betting is closed for round {rid} ({p.value})"
        if t == "close_betting":
            return f"betting is not open in round {rid} ({p.value})"
        if t == "supervisor_void":
            return f"round {rid} is already {p.value}: a round with a result cannot be voided"
        if t == "result_delivered":
            return f"round {rid} has no result waiting for delivery ({p.value})"
        if t in ("player_decision", "decision_timeout"):
            return f"round {rid} takes no decisions while {p.value}"
        if t in ("player_action", "action_timeout"):
            if p in (Phase.BETTING_CLOSED, Phase.DEALING):
                return f"no betting round is open in round {rid}: the dealer is dealing"
            return f"round {rid} takes no betting actions while {p.value}"
        if t == "dealer_confirm":
            return f"round {rid} expects no confirmation while {p.value}"
        if t == "confirm_timeout":
            return f"round {rid} has no confirmation window open while {p.value}"
        if t == "card_exposed":
            return f"round {rid} is not dealing ({p.value})"
        return f"{t} is not allowed in round {rid} while {p.value}"

    def _reject(self, event: Event, reason: str) -> Step:
        return Step(False, False, [Rejection(event.type, reason)])

    def _tell(self, player: str, kind: str, at: int, **data: object) -> PlayerMessage:
        return PlayerMessage(table_id=self.table_id, round_id=self.round_id, player_id=player,
                             kind=kind, at=at, data=data)  # type: ignore[arg-type]

    def _event(self, name: str, at: int, **data: object) -> RoundEvent:
        return RoundEvent(table_id=self.table_id, round_id=self.round_id, event=name, at=at, data=data)

    def _prompt(self, kind: str, at: int, *, message: str, reason: str | None = None,
                count: int | None = None, announce: str | None = None) -> StationPrompt:
        pos = self.expected_position if kind in ("NEXT", "RESCAN", "ALERT", "CONFIRM") else None
        return StationPrompt(
            table_id=self.table_id, round_id=self.round_id, kind=kind,  # type: ignore[arg-type]
            position=pos, step=self.next_index + 1 if pos else None, of=len(self.plan) if pos else None,
            reason=reason, count=count, message=message, at=at, announce=announce,
        )

    def _next_prompt(self, at: int) -> StationPrompt:
        pos = self.plan[self.next_index]
        if pos.confirm and pos.window_ms:
            return self._prompt("CONFIRM", at, announce=self.announce,
                                message=f"report an exposed card now (card_exposed), then confirm {pos.name}; "
                                        f"without a confirmation the deal goes on by itself in "
                                        f"{pos.window_ms / 1000:g} s")
        if pos.confirm:
            return self._prompt("CONFIRM", at, message=f"{pos.name} the cards, then confirm {pos.name}",
                                announce=self.announce)
        face = "burn card" if pos.burn else f"face {pos.face.lower()}"
        extra = " from the shuffled burn cards" if pos.from_burns else ""
        return self._prompt("NEXT", at, message=f"deal {pos.name} ({face}){extra}", announce=self.announce)


_Action = Callable[[Round, "Event"], Step]

#: (phase, event type) -> transition. Everything else is rejected by :meth:`Round._why_not`.
TRANSITIONS: dict[tuple[Phase, str], _Action] = {
    (Phase.BETTING_OPEN, "place_bet"): Round._place_bet,
    (Phase.BETTING_OPEN, "close_betting"): Round._close_betting,
    (Phase.BETTING_OPEN, "link_down"): Round._cancel_on_link,
    (Phase.BETTING_OPEN, "supervisor_void"): Round._void,
    (Phase.BETTING_CLOSED, "scan_read"): Round._scan,
    (Phase.BETTING_CLOSED, "read_failed"): Round._read_failed,
    (Phase.BETTING_CLOSED, "link_down"): Round._link_before_first_card,
    (Phase.BETTING_CLOSED, "dealer_confirm"): Round._confirm,
    (Phase.BETTING_CLOSED, "supervisor_void"): Round._void,
    (Phase.DEALING, "scan_read"): Round._scan,
    (Phase.DEALING, "read_failed"): Round._read_failed,
    (Phase.DEALING, "link_down"): Round._link_noted,
    (Phase.DEALING, "supervisor_void"): Round._void,
    (Phase.DEALING, "dealer_confirm"): Round._confirm,
    (Phase.DEALING, "confirm_timeout"): Round._confirm_timeout,
    (Phase.DEALING, "card_exposed"): Round._exposed,
    (Phase.ACTION, "player_action"): Round._player_action,
    (Phase.ACTION, "action_timeout"): Round._action_timeout,
    (Phase.ACTION, "card_exposed"): Round._exposed,
    (Phase.ACTION, "link_down"): Round._link_noted,
    (Phase.ACTION, "supervisor_void"): Round._void,
    (Phase.DECISION, "player_decision"): Round._decide,
    (Phase.DECISION, "decision_timeout"): Round._decision_timeout,
    (Phase.DECISION, "link_down"): Round._link_noted,
    (Phase.DECISION, "supervisor_void"): Round._void,
    (Phase.RESULT, "result_delivered"): Round._delivered,
    (Phase.CANCELLED, "result_delivered"): Round._delivered,
    (Phase.VOID, "result_delivered"): Round._delivered,
}  # type: ignore[dict-item]


def step_player(step: Step) -> str | None:
    """The player of the first ``player_acted`` event in a step."""
    return next((e.data.get("player_id") for e in step.effects  # type: ignore[union-attr]
                 if isinstance(e, RoundEvent) and e.event == "player_acted"), None)


def _bet_result(b: BetResolution) -> BetTypeResult:
    return BetTypeResult(outcome=b.outcome, ratio=b.ratio, category=b.category, bonus_ratio=b.bonus_ratio,
                         returned=b.returned)
