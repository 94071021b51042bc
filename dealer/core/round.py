"""The round state machine: pure, no IO, no clock (h11-style).

Events from :mod:`dealer.core.events` go in through :meth:`Round.handle`; a :class:`Step`
comes out saying whether the event was accepted, whether it must be journaled, and
which effects to release (station prompts, round events, the round result).

How to read it, like the rulebook:

* :data:`TRANSITIONS` (at the end) says which event each phase takes and which handler runs
  it; :data:`REFUSALS` beside it says why any other event is refused. Nothing else is legal.
* Each handler returns a :class:`Transition`: its effects and the phase the round goes to.
  :meth:`Round.handle` is the one place the phase changes; entering ``RESULT``,
  ``CANCELLED`` or ``VOID`` builds the result (:mod:`dealer.core.results`).
* A peer game's hand is driven by one loop, :meth:`Round._progress`
  (:mod:`dealer.core.round_peer`): it asks the hand for its next step (deal these cards / run
  these turns / end) until the hand waits for a card, for a player, or ends.
* What a round holds, and the records a handler returns, are :mod:`dealer.core.round_state`.
* Who sees which card is :mod:`dealer.core.visibility`; what a game adds (decisions, peer
  hands, reservations, exposures) are the capabilities of :mod:`dealer.core.game_contract`.

The error rules of ``decks.md`` §5 live here, for every game: a no-read, misread,
corrupt or lost frame, device fault, foreign card or duplicate card never advances the
deal; it prompts a RESCAN and, after ``alert_after`` identical rejections in a row, a
supervisor ALERT. A link failure while betting is open cancels the round (refund all);
after betting has closed the round continues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast
from decimal import Decimal

from dealer.core import results, visibility
from dealer.core.events import (
    CardExposed,
    CloseBetting,
    ConfirmTimeout,
    DealerConfirm,
    DecisionTimeout,
    Event,
    LinkDown,
    OpenRound,
    PlaceBet,
    PlayerDecision,
    ReadFailed,
    ResultDelivered,
    ScanRead,
    SupervisorExpose,
    SupervisorVoid,
)
from dealer.core.game_contract import Decisions, Exposures, HouseSeat, PeerGame, offers
from dealer.core.game_records import Position
from dealer.core.messages import DecisionRecord, PlayerMessage, RoundEvent, StationPrompt
from dealer.core.money import MoneyError, check_stake
from dealer.core.round_ids import sequence_of
from dealer.core.round_peer import PeerTurns
from dealer.core.round_state import (
    ACTIVE,
    BetLimit,
    DealTally,
    Effect,
    Phase,
    Rejection,
    RoundState,
    Step,
    TableRules,
    Transition,
    stale_timer,
)
from dealer.core.shift import MISTAKES

__all__ = ["ACTIVE", "BetLimit", "Effect", "Phase", "REFUSALS", "Rejection", "Round", "Step", "TRANSITIONS",
           "TableRules", "Transition", "step_player"]

#: The refund-all ends and the outcome their result carries.
_REFUNDS: dict[Phase, results.RefundOutcome] = {Phase.CANCELLED: "CANCELLED", Phase.VOID: "VOIDED"}

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


class Round(PeerTurns, RoundState):
    """One round at one table, from betting open to settled (or cancelled / void). Its data and
    the messages it words are :class:`~dealer.core.round_state.RoundState`; the hand of a peer
    game between the cards is :class:`~dealer.core.round_peer.PeerTurns`."""

    def __init__(self, rules: TableRules, opened: OpenRound) -> None:
        super().__init__(rules, opened)
        self.phase = Phase.BETTING_OPEN

    # -- public -----------------------------------------------------------------------

    @property
    def house_players(self) -> frozenset[str]:
        """The players the house plays in this round (a :class:`HouseSeat` hand's)."""
        return self.hand.house_players() if offers(self.hand, HouseSeat) else frozenset()  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)

    def handle(self, event: Event) -> Step:
        """Run ``event`` through :data:`TRANSITIONS`: the one place the phase changes."""
        self.revision += 1
        try:
            handler = TRANSITIONS.get((self.phase, event.type))
            out = Transition.refused(event.type, self._refusal(event)) if handler is None else handler(self, event)
            if out.next_phase is not None:
                self.phase = out.next_phase
                out.effects += self._entered(out, event.at)
        finally:
            self.revision += 1
        # a refusal never names a hidden card, whoever wrote the reason (the games' rules too)
        effects = [Rejection(e.event_type, visibility.redact(self, e.reason)) if isinstance(e, Rejection) else e
                   for e in out.effects]
        return Step(out.accepted, out.journal, effects)

    def _entered(self, out: Transition, at: int) -> list[Effect]:
        """What entering a phase adds: the result of a round that ends."""
        if self.phase == Phase.RESULT:
            return results.completed(self, at)
        if self.phase in _REFUNDS:
            return results.refunded(self, _REFUNDS[self.phase], out.reason, at)
        return []

    def _refusal(self, event: Event) -> str:
        """Why ``event`` is not taken in this phase, from :data:`REFUSALS`."""
        text = REFUSALS.get((self.phase, event.type)) or REFUSALS.get((None, event.type)) or _NOT_ALLOWED
        return text.format(event=event.type, round=self.round_id, phase=self.phase.value)

    def prompt_now(self, at: int) -> StationPrompt:
        """What the dealer station should show right now (used after a restart)."""
        if self.phase == Phase.BETTING_OPEN:
            return self.prompt("WAIT", at, message="betting is open: do not deal")
        if self.phase in (Phase.BETTING_CLOSED, Phase.DEALING):
            return self._next_prompt(at)
        if self.phase == Phase.DECISION:
            return self._deciding_prompt(at)
        if self.phase == Phase.ACTION and self.hand is not None:
            return self._turn_prompt(at)
        return self.prompt("DONE", at, message=f"round {self.phase.lower()}")

    def private_now(self, at: int) -> list[PlayerMessage]:
        """Every private message a player needs to see the round as it stands (used after a
        reconnect or a restart: live messages published while the broker was down are lost):
        their hole cards so far, a pending decision, and the turn of the player to act."""
        if self.phase not in ACTIVE:
            return []
        out = [self.tell(owner, "hole_card", at, position=p.name, card=self.cards[p.name])
               for p, owner in visibility.owner_cards(self)]
        if self.phase == Phase.DECISION:
            out += self._decisions_required(at, sorted(p for p in self.deciders if p not in self.decisions))
        if self.phase == Phase.ACTION and self.hand is not None:
            out.append(self._your_turn(at))
        return out

    def resume(self, at: int) -> list[Effect]:
        """Players could not reach the backend (the broker link was down, or the backend itself
        was): every pending decision, or the pending turn, gets a whole window from ``at``; so
        does the station's window before a timed confirmation (it reports through the broker too)."""
        return self.resume_decisions(at) + self.resume_turn(at) + self.resume_window(at)

    def resume_window(self, at: int) -> list[Effect]:
        """A timed confirmation (a position with ``window_ms``) gets its whole window again from ``at``."""
        if self.phase not in (Phase.BETTING_CLOSED, Phase.DEALING) or self.confirm_deadline is None:
            return []
        self._arm_window(at)
        pos = self.plan[self.next_index]
        return [self.event("confirm_window", at, step=pos.name, closes_at=self.confirm_deadline, resumed=True),
                self._next_prompt(at)]

    def resume_betting(self, at: int, closes_at: int | None) -> list[Effect]:
        """The table was paused while betting was open (no bet was taken): betting runs a full
        period again until ``closes_at`` (the service's edge data), told in ``betting_resumed``."""
        if self.phase != Phase.BETTING_OPEN or closes_at is None:
            return []
        self.betting_closes_at = closes_at
        return [self.event("betting_resumed", at, betting_closes_at=closes_at)]

    def resume_decisions(self, at: int) -> list[Effect]:
        """Every player still undecided gets a whole decision window again, told on their own
        topic (``decision_required`` with ``resumed: true``); a public ``decisions_open``
        with ``resumed: true`` marks it. Nobody is folded because the house was unreachable."""
        if self.phase != Phase.DECISION:
            return []
        self.decision_deadline = at + self.rules.decision_ms
        pending = sorted(p for p in self.deciders if p not in self.decisions)
        return [self.event("decisions_open", at, players=pending, closes_at=self.decision_deadline, resumed=True),
                *self._decisions_required(at, pending, resumed=True), self._deciding_prompt(at)]

    def resume_turn(self, at: int) -> list[Effect]:
        """The broker link is back: the player to act gets a whole turn again (nobody is
        timed out because the studio's broker was down)."""
        if self.phase != Phase.ACTION or self.hand is None:
            return []
        self.action_deadline = at + self.rules.action_ms
        return [self.event("turn", at, player_id=self.hand.to_act, turn=self.turn, street=self.street,
                           closes_at=self.action_deadline, resumed=True, **self.hand.turn_summary()),
                self._your_turn(at, resumed=True), self.prompt_now(at)]

    # -- betting ------------------------------------------------------------------------

    def _place_bet(self, ev: PlaceBet) -> Transition:
        reason = self._bet_problem(ev)
        if reason is not None:
            out = Transition.refused(ev.type, reason)
            out.effects.append(self.event("bet_rejected", ev.at, bet_id=ev.bet_id, reason=reason))
            return out
        self.bets[ev.bet_id] = ev
        self._held.setdefault(ev.player_id, set()).add(ev.bet_type)
        if ev.seat is not None:
            self.seat_owner[ev.seat] = ev.player_id
        data = {"bet_id": ev.bet_id, "player_id": ev.player_id, "bet_type": ev.bet_type, "stake": str(ev.stake),
                "seat": ev.seat}
        return Transition([self.event("bet_accepted", ev.at, **data), self.tell(ev.player_id, "bet_accepted", ev.at, **data)])

    def _bet_problem(self, ev: PlaceBet) -> str | None:
        """Why a bet is refused (the first rule it breaks), or None."""
        r = self.rules
        if ev.round_id is not None and ev.round_id != self.round_id:
            return f"bet is for round {ev.round_id}, but round {self.round_id} is open"
        if ev.bet_id in self.bets:
            return f"duplicate bet id {ev.bet_id!r}"
        reason = (r.game.check_bet(ev.bet_type, frozenset(self._held.get(ev.player_id, ())))
                  or self._seat_problem(ev) or r.game.check_stake(ev.stake, ev.player_id, self.context))
        if reason is not None:
            return reason
        try:
            check_stake(ev.stake, r.minor_unit)
        except MoneyError as exc:
            return str(exc)
        limit = r.limits.get(ev.bet_type)
        if limit is not None and not (limit.min <= ev.stake <= limit.max):
            return f"stake {ev.stake} outside the table limits {limit.min}..{limit.max} for {ev.bet_type}"
        return None

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

    def _close_betting(self, ev: CloseBetting) -> Transition:
        game = self.rules.game
        self.closed_at = ev.at
        closed = self.event("betting_closed", ev.at, by=ev.by, bets=len(self.bets))
        if not isinstance(game, PeerGame):
            self.plan = game.deal_plan(sorted(self.seat_owner))
            return Transition([closed, self._next_prompt(ev.at)], Phase.BETTING_CLOSED)
        if len(self.seat_owner) < game.min_players:
            reason = f"{game.name} needs at least {game.min_players} seated players, {len(self.seat_owner)} sat down"
            return Transition([closed], Phase.CANCELLED, reason=reason)
        chips: dict[str, Decimal] = {}
        for bet in self.bets.values():
            chips[bet.player_id] = chips.get(bet.player_id, Decimal(0)) + bet.stake
        seq = sequence_of(self.round_id)
        self.hand = game.start_hand(dict(sorted(self.seat_owner.items())), chips, 1 if seq is None else seq,
                                    self.rules.minor_unit, self.context, draw=self.draw)
        return self._progress(ev.at, [closed])

    # -- the deal -----------------------------------------------------------------------

    def _scan(self, ev: ScanRead) -> Transition:
        pos = self.plan[self.next_index]
        if pos.confirm:
            card = "a burn card" if ev.burn else visibility.safe_code(self, ev.code, "card")
            return Transition.refused(ev.type, f"{pos.name} is to be confirmed before the next card "
                                   f"({card} not registered)", self._next_prompt(ev.at))
        problem = self._card_problem(ev, pos)
        if problem is not None:
            return self._rescan(ev, problem, ev.code)
        if ev.burn and not pos.burn:
            return self._set_aside(ev, pos)
        self.cards[pos.name] = ev.code
        self.next_index += 1
        self._tally().cards += 1
        self._reject_key, self.reject_count = None, 0
        if self.hand is not None:
            self.hand.register(pos, ev.code)
        effects: list[Effect] = [self.event(
            "card_registered", ev.at, position=pos.name, step=self.next_index,
            card=ev.code if visibility.is_public(self, pos) else None,
        )]
        effects += [self.tell(owner, "hole_card", ev.at, position=p.name, card=self.cards[p.name])
                    for p, owner in visibility.deliveries(self, pos)]  # to their owners only
        return self._dealt(ev.at, effects, Phase.DEALING)

    def _tally(self) -> DealTally:
        """The figures of the dealer dealing now."""
        who = self.dealers[-1] if self.dealers else ""
        tally = self.tally.get(who)
        if tally is None:
            tally = self.tally[who] = DealTally()
        return tally

    def _card_problem(self, ev: ScanRead, pos: Position) -> str | None:
        """Why a scanned card cannot go to ``pos`` (a foreign or duplicate card), or None."""
        if ev.code not in self.rules.game.deck:
            return "foreign_card"
        if self.set_aside.get(ev.code) == pos.deck:  # burned earlier in this deal
            return "duplicate_card"
        if ev.burn and not pos.burn:
            return None  # set aside, if it is not a card dealt already (checked there)
        if pos.from_burns:  # dealt again from this round's burn cards
            burns = {self.cards[p.name] for p in self.plan if p.burn and p.name in self.cards}
            reused = {self.cards[p.name] for p in self.plan if p.from_burns and p.name in self.cards}
            return "duplicate_card" if ev.code not in burns or ev.code in reused else None
        return "duplicate_card" if self._holder(ev.code, pos) is not None else None

    def _holder(self, code: str, pos: Position) -> Position | None:
        """The position of ``pos``'s shuffle that already holds ``code``."""
        return next((p for p in self.plan if p.deck == pos.deck and self.cards.get(p.name) == code), None)

    def _dealt(self, at: int, effects: list[Effect], phase: Phase) -> Transition:
        """A step of the deal is done: prompt the next one, or the deal is complete: the hand
        goes on, the players decide, or the round is resolved."""
        if self.next_index < len(self.plan):
            return Transition(effects + self._window_opened(at) + [self._next_prompt(at)], phase)
        if self.hand is not None:
            return self._progress(at, effects)
        game = self.rules.game
        self.deciders = game.deciders(results.bet_views(self)) if offers(game, Decisions) else {}  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
        if self.deciders:
            return Transition(effects + self._open_decisions(at), Phase.DECISION)
        return Transition(effects, Phase.RESULT)

    def _set_aside(self, ev: ScanRead, pos: Position) -> Transition:
        """A card the reader says was burned where the deal plan expects a dealt card: the dealer
        put it on the burn pile, so it goes to no position and no hand (decks.md §5.2(6): a card
        is assigned only to the expected position), is never shown (§3: burns are journal only),
        and the deal still waits for ``pos``. A burn where the plan has one registers there."""
        if self._holder(ev.code, pos) is not None:
            return self._rescan(ev, "duplicate_card", ev.code)
        self.set_aside[ev.code] = pos.deck
        nxt = self._next_prompt(ev.at)
        return Transition([
            self.event("card_burned", ev.at, expected=pos.name, count=len(self.set_aside)),
            nxt.model_copy(update={"message": f"burn card set aside, not dealt: {nxt.message}"}),
        ])

    def _read_failed(self, ev: ReadFailed) -> Transition:
        return self._rescan(ev, ev.reason, ev.detail)

    def _rescan(self, ev: ScanRead | ReadFailed, reason: str, detail: str) -> Transition:
        """Neither the public event nor the station's prompt names a hidden card (a duplicate of
        a face-down card, a misread that spells one): stations and ops never see one."""
        key = (reason, detail)
        tally = self._tally()
        tally.rescans += 1
        if reason in MISTAKES:
            tally.mistakes += 1
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
            self.event("scan_rejected", ev.at, position=pos, reason=reason, detail=detail, count=self.reject_count),
            self.prompt("RESCAN", ev.at, reason=reason, count=self.reject_count,
                        message=f"RESCAN {pos}: {text}" + (f" ({detail})" if detail else "")),
        ]
        if self.reject_count % self.rules.alert_after == 0:
            effects.append(self.prompt(
                "ALERT", ev.at, reason=reason, count=self.reject_count,
                message=f"SUPERVISOR: {self.reject_count} identical rejections at {pos} ({reason}"
                        + (f" {detail}" if detail else "") + f"); check the shoe: the deal stays at {pos} until a valid card registers",
            ))
        return Transition(effects)

    def _confirm(self, ev: DealerConfirm) -> Transition:
        pos = self.expected_position
        if pos is None or not self.plan[self.next_index].confirm or ev.step != pos:
            want = f"the next step is {pos}" if pos else "no step is expected"
            return Transition.refused(ev.type, f"cannot confirm {ev.step}: {want}")
        return self._step_confirmed(ev.step, ev.at, {})

    def _confirm_timeout(self, ev: ConfirmTimeout) -> Transition:
        """The window of a timed confirmation ran out: the step is taken as confirmed."""
        pos = self.expected_position
        if self.exposure_reports and ev.step == pos:
            return Transition.refused(ev.type, f"the window of {ev.step} stands still: {self._waiting()}")
        if self.confirm_deadline is None or ev.step != pos:
            want = f"the next step is {pos}" if pos else "no step is expected"
            return Transition.refused(ev.type, f"no window of {ev.step} is open: {want}")
        if (stale := stale_timer(ev, self.confirm_deadline, f"the window of {ev.step}")) is not None:
            return stale
        return self._step_confirmed(ev.step, ev.at, {"by": "timer"})

    def _step_confirmed(self, step: str, at: int, extra: dict[str, object]) -> Transition:
        pos = self.plan[self.next_index]
        if pos.window_ms and self.exposure_reports:  # the station goes on without them: the cards stay down
            extra = {**extra, "unconfirmed": list(self.exposure_reports)}
            self.exposure_reports = []
        self.next_index += 1
        self.confirm_deadline = None
        if self.hand is not None:
            self.hand.register(pos, "")  # a confirmed step is part of the hand too
        return self._dealt(at, [self.event("dealer_confirmed", at, step=step, **extra)], self.phase)

    def _exposures(self, ev: CardExposed | SupervisorExpose) -> Exposures | Transition:
        """The hand's exposure rules, or the refusal of a game that has none."""
        if self.hand is None:
            return Transition.refused(ev.type, f"{self.rules.game.name} has no rule for exposed cards: call the supervisor")
        if not offers(self.hand, Exposures):  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
            where = f" at {ev.position}" if isinstance(ev, CardExposed) else ""
            return Transition.refused(ev.type, f"exposed card{where}: call the supervisor (decks.md §5.4)")
        return self.hand

    def _exposure_problem(self, rules: Exposures, position: str) -> str | None:
        """Why the card at ``position`` cannot be exposed now: the game's rule, or it is shown already."""
        reason = rules.exposable(position)
        if reason is None and visibility.is_public(self, next(p for p in self.plan if p.name == position)):
            reason = f"{position} is face up already"
        return reason

    def _exposure_reported(self, ev: CardExposed) -> Transition:
        """The station reports an exposed card. Its word alone shows nothing: the report waits
        for a supervisor (:meth:`_supervisor_exposed`), the window stands still meanwhile, and
        the supervisor is alerted. (Rules journaled before that replay the report as the exposure.)"""
        rules = self._exposures(ev)
        if isinstance(rules, Transition):
            return rules
        if not rules.corroborated():
            reason = rules.expose(ev.position)
            if reason is not None:
                return Transition.refused(ev.type, reason)
            return Transition([self.event("card_exposed", ev.at, position=ev.position, card=self.cards.get(ev.position))])
        reason = self._exposure_problem(rules, ev.position)
        if reason is None and ev.position in self.exposure_reports:
            reason = f"{ev.position} was reported already: {self._waiting()}"
        if reason is not None:
            return Transition.refused(ev.type, reason)
        self.exposure_reports.append(ev.position)
        self._arm_window(ev.at)  # a window open now stands still
        seat = next(p.seat for p in self.plan if p.name == ev.position)
        return Transition([
            self.event("exposure_reported", ev.at, position=ev.position, waiting_for="supervisor"),
            self.prompt("ALERT", ev.at, reason="exposure_reported",
                        message=f"SUPERVISOR: the dealer reports {ev.position} exposed: it plays face up only once "
                                f"you confirm it: dealer supervisor expose {self.table_id} {self.round_id} "
                                f"--seat {seat} --card CODE"),
            self._next_prompt(ev.at)])

    def _supervisor_exposed(self, ev: SupervisorExpose) -> Transition:
        """A supervisor corroborates a reported exposure: the seat's card the rule concerns, the
        station's report of it, and the card named as the one registered there. Then (and only
        then) it plays face up; once no report waits, a window that stood still starts again whole."""
        rules = self._exposures(ev)
        if isinstance(rules, Transition):
            return rules
        position = rules.exposure_position(ev.seat)
        reason = self._exposure_problem(rules, position)
        if reason is None and position not in self.exposure_reports:
            reason = (f"the dealer station has not reported {position} exposed: it reports the card first "
                      "(card_exposed), then a supervisor confirms it")
        if reason is None and self.cards.get(position) != ev.card:  # never says which card it is
            reason = (f"the card named is not the card registered at {position}: nothing exposed (check the seat "
                      "and the card on the table)")
        if reason is not None:
            return Transition.refused(ev.type, reason)
        self.exposure_reports.remove(position)
        reason = rules.expose(position)
        assert reason is None, reason  # exposable() said yes a moment ago
        effects: list[Effect] = [self.event("card_exposed", ev.at, position=position, card=self.cards[position],
                                            supervisor=ev.supervisor)]
        pos = self.plan[self.next_index] if self.next_index < len(self.plan) else None
        if pos is not None and pos.confirm and pos.window_ms and not self.exposure_reports:
            self._arm_window(ev.at)
            effects.append(self.event("confirm_window", ev.at, step=pos.name, closes_at=self.confirm_deadline,
                                      resumed=True))
        return Transition(effects + [self._next_prompt(ev.at)])

    # -- decisions (a game with the Decisions capability) --------------------------------------

    def _open_decisions(self, at: int) -> list[Effect]:
        """The deal is complete: the decision timer starts now, never while a card is awaited."""
        self.decision_deadline = at + self.rules.decision_ms
        return [self.event("decisions_open", at, players=sorted(self.deciders), closes_at=self.decision_deadline),
                self._deciding_prompt(at), *self._decisions_required(at, sorted(self.deciders))]

    def _decisions_required(self, at: int, players: list[str], **extra: object) -> list[PlayerMessage]:
        actions = list(self._decider_game.decision_actions)
        return [self.tell(p, "decision_required", at, actions=actions, closes_at=self.decision_deadline,
                          seat=self.deciders[p], **extra) for p in players]

    def _deciding_prompt(self, at: int) -> StationPrompt:
        return self.prompt("WAIT", at, message="players are deciding: do not reveal")

    @property
    def _decider_game(self) -> Decisions:
        game = self.rules.game
        assert offers(game, Decisions), "only a game with decisions opens them"  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
        return game

    def _decide(self, ev: PlayerDecision) -> Transition:
        actions = self._decider_game.decision_actions
        if ev.player_id not in self.deciders:
            return Transition.refused(ev.type, f"player {ev.player_id} has no decision to make in round {self.round_id}")
        if ev.player_id in self.decisions:
            return Transition.refused(ev.type, f"player {ev.player_id} already chose {self.decisions[ev.player_id].action}")
        if ev.action not in actions:
            return Transition.refused(ev.type, f"unknown action {ev.action!r} (expected one of {', '.join(actions)})")
        effects = self._record_decision(ev.player_id, ev.action, "player", ev.at)
        return Transition(effects, Phase.RESULT if len(self.decisions) == len(self.deciders) else None)

    def _decision_timeout(self, ev: DecisionTimeout) -> Transition:
        if (stale := stale_timer(ev, self.decision_deadline, "the decisions")) is not None:
            return stale
        default = self._decider_game.default_decision()
        assert default is not None, "a game with decisions must have a default"
        effects: list[Effect] = []
        for player in sorted(set(self.deciders) - set(self.decisions)):
            effects += self._record_decision(player, default, "timeout", ev.at)
        return Transition(effects, Phase.RESULT)

    def _record_decision(self, player: str, action: str, by: str, at: int) -> list[Effect]:
        mine = [b for b in results.bet_views(self) if b.player_id == player]
        self.decisions[player] = DecisionRecord(action=action, by=by, seat=self.deciders[player],  # type: ignore[arg-type]  # pydantic validates the record's fields
                                                play_stake=self._decider_game.decision_stake(action, mine))
        return [self.event("decision_made", at, player_id=player, action=action, by=by),
                self.tell(player, "decision_accepted", at, action=action, by=by)]

    # -- links, the supervisor, settlement ------------------------------------------------------

    def _link_before_first_card(self, ev: LinkDown) -> Transition:
        """Betting closed but no card yet: games that start at the first card cancel (decks.md §5.3)."""
        if self.rules.game.starts_at_first_card:
            return self._cancel_on_link(ev)
        return self._link_noted(ev)

    def _cancel_on_link(self, ev: LinkDown) -> Transition:
        reason = f"link {ev.link} down before the round started" + (f": {ev.reason}" if ev.reason else "")
        return Transition([], Phase.CANCELLED, reason=reason)

    def _link_noted(self, ev: LinkDown) -> Transition:
        """After betting closed a link failure does not stop the round (decks.md §5.3)."""
        return Transition([self.event("link_down_round_continues", ev.at, link=ev.link)], journal=False)

    def _void(self, ev: SupervisorVoid) -> Transition:
        return Transition([], Phase.VOID, reason=f"voided by supervisor {ev.supervisor}: {ev.reason}")

    def _delivered(self, ev: ResultDelivered) -> Transition:
        if self.delivered:
            return Transition.refused(ev.type, f"the result of round {self.round_id} was already delivered")
        self.delivered = True
        data = {"idempotency_key": ev.idempotency_key} if ev.idempotency_key is not None else {}
        return Transition([self.event("round_settled", ev.at, **data, outbox_id=ev.outbox_id)],
                       Phase.SETTLED if self.phase == Phase.RESULT else None)


_Handler = Callable[[Round, "Event"], Transition]

#: The rulebook: (phase, event type) -> the handler that runs it. Anything else is refused,
#: for the reason :data:`REFUSALS` gives.
#: Each handler takes the event class its key names; mypy cannot tie the key's string to that
#: class, so the table is cast to handlers of any event.
TRANSITIONS = cast(dict[tuple[Phase, str], _Handler], {
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
    (Phase.DEALING, "card_exposed"): Round._exposure_reported,
    (Phase.DEALING, "supervisor_expose"): Round._supervisor_exposed,
    (Phase.ACTION, "player_action"): Round._player_action,
    (Phase.ACTION, "action_timeout"): Round._action_timeout,
    (Phase.ACTION, "card_exposed"): Round._exposure_reported,
    (Phase.ACTION, "supervisor_expose"): Round._supervisor_exposed,
    (Phase.ACTION, "link_down"): Round._link_noted,
    (Phase.ACTION, "supervisor_void"): Round._void,
    (Phase.DECISION, "player_decision"): Round._decide,
    (Phase.DECISION, "decision_timeout"): Round._decision_timeout,
    (Phase.DECISION, "link_down"): Round._link_noted,
    (Phase.DECISION, "supervisor_void"): Round._void,
    (Phase.RESULT, "result_delivered"): Round._delivered,
    (Phase.CANCELLED, "result_delivered"): Round._delivered,
    (Phase.VOID, "result_delivered"): Round._delivered,
})

_DEALING_NOW = "no betting round is open in round {round}: the dealer is dealing"
_NO_CARD_NOW = "card scanned while betting is open: the deal starts after betting closes"
_BETTING_NOW = "players are betting in round {round}: the next card comes after the betting round"

#: Why an event the table above does not take is refused: (phase, event type) first, then
#: (None, event type) for any other phase; ``{round}``, ``{phase}`` and ``{event}`` are filled in.
REFUSALS: dict[tuple[Phase | None, str], str] = {
    (Phase.BETTING_OPEN, "scan_read"): _NO_CARD_NOW,
    (Phase.BETTING_OPEN, "read_failed"): _NO_CARD_NOW,
    (Phase.ACTION, "scan_read"): _BETTING_NOW,
    (Phase.ACTION, "read_failed"): _BETTING_NOW,
    (None, "scan_read"): "the deal of round {round} is complete ({phase}): no card is expected",
    (None, "read_failed"): "the deal of round {round} is complete ({phase}): no card is expected",
    (None, "place_bet"): "betting is closed for round {round} ({phase})",
    (None, "close_betting"): "betting is not open in round {round} ({phase})",
    (None, "supervisor_void"): "round {round} is already {phase}: a round with a result cannot be voided",
    (None, "result_delivered"): "round {round} has no result waiting for delivery ({phase})",
    (None, "player_decision"): "round {round} takes no decisions while {phase}",
    (None, "decision_timeout"): "round {round} takes no decisions while {phase}",
    (Phase.BETTING_CLOSED, "player_action"): _DEALING_NOW,
    (Phase.DEALING, "player_action"): _DEALING_NOW,
    (Phase.BETTING_CLOSED, "action_timeout"): _DEALING_NOW,
    (Phase.DEALING, "action_timeout"): _DEALING_NOW,
    (None, "player_action"): "round {round} takes no betting actions while {phase}",
    (None, "action_timeout"): "round {round} takes no betting actions while {phase}",
    (None, "dealer_confirm"): "round {round} expects no confirmation while {phase}",
    (None, "confirm_timeout"): "round {round} has no confirmation window open while {phase}",
    (None, "card_exposed"): "round {round} is not dealing ({phase})",
    (None, "supervisor_expose"): "round {round} is not dealing ({phase}): no card can be exposed",
}
_NOT_ALLOWED = "{event} is not allowed in round {round} while {phase}"


def step_player(step: Step) -> str | None:
    """The player of the first ``player_acted`` event in a step."""
    return next((e.data.get("player_id") for e in step.effects
                 if isinstance(e, RoundEvent) and e.event == "player_acted"), None)
