"""The round machine's part for peer games: the hand between the cards (:class:`PeerTurns`).

A peer game's hand is driven by one loop, :meth:`PeerTurns._progress`: it asks the hand for its
next step (deal these cards / run these turns / end) until the hand waits for a card, for a
player, or ends. :class:`dealer.core.round.Round` inherits it; its transition table names the
handlers below (:meth:`PeerTurns._player_action`, :meth:`PeerTurns._action_timeout`). Pure.
"""

from __future__ import annotations

from decimal import Decimal

from dealer.core import visibility
from dealer.core.events import ActionTimeout, Event, PlayerAction
from dealer.core.game_contract import Reservations, offers
from dealer.core.game_records import BetStep, DealStep
from dealer.core.messages import PlayerMessage, RoundEvent, StationPrompt
from dealer.core.round_state import Effect, Phase, RoundState, Transition, stale_timer


class PeerTurns(RoundState):
    """A peer game's hand between the cards: its steps, its turns, its players' actions."""

    def _progress(self, at: int, effects: list[Effect], executed: list[int] | None = None) -> Transition:
        """The previous step of the hand is complete: ask the hand what comes next until it waits
        for cards (``DealStep``), for a player (a ``BetStep`` whose turns are open), or ends.
        ``executed``: where ``effects`` hold ``reservation_executed`` events (see :meth:`_stamped`)."""
        hand = self.hand
        assert hand is not None
        executed = [] if executed is None else executed
        while True:
            step = hand.next_step()
            effects += self._hand_notes(at)
            if isinstance(step, DealStep):
                self.plan = tuple(self.plan) + step.positions
                self.action_deadline, self.announce = None, step.announce
                phase = Phase.DEALING if self.cards else Phase.BETTING_CLOSED
                out = Transition(effects + self._window_opened(at) + [self._next_prompt(at)], phase)
                break
            if isinstance(step, BetStep):
                self.street, self.announce = step.street, step.announce
                someone = hand.open_turns(step)
                # ``designated`` is who the rules name (low card, high hand); ``first`` who acts,
                # which differs when the designated player is all-in
                effects.append(self.event("betting_round_opened", at, street=step.street, announce=step.announce,
                                          designated=step.first, first=hand.to_act,
                                          betting="TO_ACT" if someone else "ROUND_OVER"))
                if someone and self._turns(at, effects, executed):
                    out = Transition(effects, Phase.ACTION)
                    break
                effects += self._close_turns(at)
                continue
            out = Transition(effects, Phase.RESULT)
            break
        out.effects = self._stamped(out.effects, executed)
        return out

    def _stamped(self, effects: list[Effect], executed: list[int]) -> list[Effect]:
        """Each ``reservation_executed`` event (at ``executed``) names the turn running once the
        hand waits again, as it always has (journaled results replay to the same events)."""
        for i in executed:
            ev = effects[i]
            assert isinstance(ev, RoundEvent)
            effects[i] = ev.model_copy(update={"data": {**ev.data, "turn": self.turn}})
        return effects

    def _turns(self, at: int, effects: list[Effect], executed: list[int]) -> bool:
        """Give the next player their turn; a reserved action still legal runs at once
        (the :class:`Reservations` capability), and so on. True: a player must act now; False: the turns are over."""
        hand = self.hand
        assert hand is not None
        while True:
            player = hand.to_act
            assert player is not None
            self.turn += 1
            self.action_deadline = at + self.rules.action_ms
            reserved = hand.take_reservation(player) if offers(hand, Reservations) else None  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
            if isinstance(reserved, tuple):
                acted = self._run_action(player, reserved[0], reserved[1], "reservation", None, at)
                if not isinstance(acted, str):
                    done, more = acted
                    executed.append(len(effects))
                    effects.append(self.event("reservation_executed", at, player_id=player, turn=self.turn))
                    effects += done
                    if more:
                        continue
                    return False
                reserved = "the reserved action is no longer allowed"
            if isinstance(reserved, str):
                effects.append(self.tell(player, "reservation_cancelled", at, reason=reserved))
            effects += [self.event("turn", at, player_id=player, turn=self.turn, street=self.street,
                                   closes_at=self.action_deadline, **hand.turn_summary()),
                        self._your_turn(at), self._turn_prompt(at)]
            return True

    def _hand_notes(self, at: int) -> list[Effect]:
        """The hand's public notes (a pot awarded, a showdown, a rematch) as round events; any
        hand they show carries its cards only as far as :mod:`dealer.core.visibility` shows them now."""
        assert self.hand is not None
        return [self.event(name, at, **visibility.noted(self, data)) for name, data in self.hand.notes()]

    def _your_turn(self, at: int, **extra: object) -> PlayerMessage:
        assert self.hand is not None and self.hand.to_act is not None
        return self.tell(self.hand.to_act, "your_turn", at, turn=self.turn, street=self.street,
                         closes_at=self.action_deadline, **self.hand.turn_options(), **extra)

    def _turn_prompt(self, at: int) -> StationPrompt:
        assert self.hand is not None
        return self.prompt("WAIT", at, announce=self.announce, message=self.hand.turn_prompt(self.street))

    def _close_turns(self, at: int) -> list[Effect]:
        assert self.hand is not None
        return [self.event(name, at, **data) for name, data in self.hand.close_turns()]

    def _player_action(self, ev: PlayerAction) -> Transition:
        if ev.round_id is not None and ev.round_id != self.round_id:
            return Transition.refused(ev.type, f"action is for round {ev.round_id}, but round {self.round_id} is in play")
        assert self.hand is not None
        if ev.turn is not None and ev.turn != self.turn and not ev.reserve:
            return Transition.refused(ev.type, f"the action is for turn {ev.turn}, which is over "
                                   f"(turn {self.turn} is running)")
        if ev.reserve:
            reason = (self.hand.reserve(ev.player_id, ev.action, ev.amount) if offers(self.hand, Reservations)  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
                      else "this game has no action reservation")
            if reason is not None:
                return Transition.refused(ev.type, reason)
            return Transition([self.tell(ev.player_id, "reservation_accepted", ev.at, action=ev.action)])
        return self._acted(ev, ev.player_id, ev.action, ev.amount, "player", ev.card)

    def _action_timeout(self, ev: ActionTimeout) -> Transition:
        assert self.hand is not None and self.hand.to_act is not None
        if ev.turn != self.turn:
            return Transition.refused(ev.type, f"timer for turn {ev.turn} is stale (turn {self.turn} is running)")
        if (stale := stale_timer(ev, self.action_deadline, f"turn {ev.turn}")) is not None:
            return stale
        action, amount, card = self.hand.default_action()
        return self._acted(ev, self.hand.to_act, action, amount, "timeout", card)

    def _acted(self, ev: Event, player: str, action: str, amount: Decimal | None, by: str,
               card: str | None) -> Transition:
        """A player's action (or its timeout's): run it, then the next turn or the hand goes on."""
        acted = self._run_action(player, action, amount, by, card, ev.at)
        if isinstance(acted, str):
            return Transition.refused(ev.type, acted)
        effects, more = acted
        executed: list[int] = []
        if more and self._turns(ev.at, effects, executed):
            return Transition(self._stamped(effects, executed), Phase.ACTION)
        return self._progress(ev.at, effects + self._close_turns(ev.at), executed)

    def _run_action(self, player: str, action: str, amount: Decimal | None, by: str, card: str | None,
                    at: int) -> tuple[list[Effect], bool] | str:
        """One action through the hand: its effects and whether someone must still act, or the
        reason it is refused (nothing changed)."""
        hand = self.hand
        assert hand is not None
        label = action
        if by in ("player", "reservation"):
            translated = hand.translate(player, action, amount)
            if isinstance(translated, str):
                return translated
            action, amount = translated
        record, more = hand.do_action(player, action, amount, card, by)
        if isinstance(record, str):
            return record
        data = record | {"by": by} | ({"button": label} if label != action else {})
        effects: list[Effect] = [self.event("player_acted", at, street=self.street, **data),
                                 self.tell(player, "action_accepted", at, **data)]
        return effects + self._hand_notes(at), more
