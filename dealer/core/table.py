"""One table: the current round, rounds whose results still wait for delivery, link state.

Pure like :mod:`dealer.core.round`. The table decides what a round never could on its own:
whether a new round may open (never while a link is down, a round is in play, or the table
is paused or closed), which round a delivery acknowledgement belongs to, the next round id,
and its operating state (:mod:`dealer.core.operations`: open, paused, closing, closed), changed
only by a supervisor's journaled table operations.
"""

from __future__ import annotations

from dealer.core import round_ids, visibility
from dealer.core.events import (TABLE_OPERATIONS, ActionTimeout, ConfirmTimeout, DealerLogon, DecisionTimeout, Event,
                           KeysChanged, LinkDown, LinkUp, OpenRound, ResultDelivered, Resume, RulesChanged, SecurityEvent, SupervisorResume,
                           TableOperation)
from dealer.core.messages import PlayerMessage, RoundEvent, StationPrompt
from dealer.core.operations import EVENT_NAMES, FROZEN, OPERATIONS, Mode, OperatingState
from dealer.core.round import Round
from dealer.core.round_state import ACTIVE, Effect, Rejection, Step, TableRules
from dealer.core.rules import RulesError, own_game, rules_from_canonical
from dealer.core.shift import Shift
from dealer.core.game_contract import Remembers, offers

BROKER = "broker"  # the link players' actions come through
#: How a command for another round is named in its refusal.
_WHAT = {"place_bet": "bet", "player_action": "action"}


class Table:
    def __init__(self, rules: TableRules, series: str | None = None) -> None:
        """``series`` (the service passes its journal id) goes into every new round id, so a
        new or re-installed journal never repeats a round id, nor an idempotency key."""
        self.series = series
        #: The rules the next round opens under (a round keeps the rules it opened with).
        self.rules = rules
        #: (hash, software version) of the last ``table_rules`` event handled; None before the first.
        self.journaled_rules: tuple[str, str] | None = None
        self.current: Round | None = None
        self.undelivered: dict[str, Round] = {}
        self.links_down: dict[str, str] = {}
        self.last_seq = 0
        #: What the game carries from one hand to the next (Seotda's first seat); it travels in
        #: each ``OpenRound.context`` so a replay that starts at that round needs nothing older.
        self.memory: dict[str, object] = rules.game.initial_memory()
        #: Open, paused or closed (dealer.core.operations): changed only by journaled table operations.
        self.ops = OperatingState()
        #: The dealer on shift, the last rounds and every dealer's figures (dealer.core.shift).
        self.shift = Shift()

    @property
    def table_id(self) -> str:
        return self.rules.table_id

    def next_round_id(self) -> str:
        return round_ids.make(self.table_id, self.last_seq + 1, self.series)

    def round_seq(self, round_id: str) -> int | None:
        """The sequence number of a round id of this table, in either form (with this table's
        series, or without one from a journal older than journal ids); None if it is not one."""
        rid = round_ids.parse(round_id, self.table_id)
        return rid.seq if rid is not None and rid.series in (None, self.series) else None

    @property
    def dealer(self) -> str | None:
        """The dealer logged on at the table's station (None: nobody yet)."""
        return self.shift.dealer

    @property
    def in_play(self) -> bool:
        return self.current is not None and self.current.phase in ACTIVE

    @property
    def mode(self) -> Mode:
        return self.ops.mode(self.in_play)

    @property
    def paused(self) -> bool:
        return self.ops.paused

    def can_open(self) -> str | None:
        """Why a new round may not open now, or None."""
        why = self.ops.why_no_round(self.in_play, self.current.round_id if self.current is not None else None)
        if why is not None:
            return why
        if self.in_play:
            assert self.current is not None
            return f"round {self.current.round_id} is still in play ({self.current.phase.value})"
        if self.links_down:
            return "link(s) down: " + ", ".join(f"{k} ({v})" if v else k for k, v in sorted(self.links_down.items()))
        return None

    def handle(self, event: Event) -> Step:
        was_in_play = self.in_play
        step = self._handle(event)
        if not step.accepted and "command_id" in type(event).model_fields:  # a command: the same words whoever
            # holds a card it named (an id that spells one, a Matgo card)
            deck = self.rules.game.deck
            step.effects = [Rejection(e.event_type, visibility.unnamed(deck, e.reason, event))
                            if isinstance(e, Rejection) else e for e in step.effects]
        if was_in_play and not self.in_play and (self.ops.paused or self.ops.closed):
            step.effects += self._after_round(event.at)
        return step

    def _handle(self, event: Event) -> Step:
        if isinstance(event, OpenRound):
            return self._open(event)
        if isinstance(event, ResultDelivered):
            rnd = self.undelivered.get(event.round_id)
            if rnd is None:
                return _reject(event.type, f"no undelivered result for round {event.round_id}")
            step = rnd.handle(event)
            if rnd.delivered:
                del self.undelivered[event.round_id]
            return step
        # Link transitions are journaled when they change the table, so that a replay
        # crossing an outage sees the same "may a round open?" answers as the live run did.
        if isinstance(event, LinkDown):
            newly_down = event.link not in self.links_down
            self.links_down[event.link] = event.reason
            note = self._event("link_down", event.at, link=event.link, reason=event.reason)
            step = self.current.handle(event) if self.current and self.current.phase in ACTIVE else Step(True)
            step.accepted = True
            step.journal = step.journal or newly_down
            step.effects = [e for e in step.effects if not isinstance(e, Rejection)]
            step.effects.append(note)
            self._track_result()
            return step
        if isinstance(event, LinkUp):
            was_down = self.links_down.pop(event.link, None) is not None
            effects: list[Effect] = [self._event("link_up", event.at, link=event.link)] if was_down else []
            if was_down and event.link == BROKER and self.current is not None and not self.ops.paused:
                effects += self.current.resume(event.at)  # players could not decide or act while it was down
            return Step(True, was_down, effects)
        if isinstance(event, Resume):  # the backend is back and so is its broker link
            was_down = event.link is not None and self.links_down.pop(event.link, None) is not None
            effects = [self._event("link_up", event.at, link=event.link)] if was_down else []
            # else its LinkUp resumes; a paused table's windows are renewed by the supervisor's resume
            if self.current is not None and BROKER not in self.links_down and not self.ops.paused:
                effects += self.current.resume(event.at)
            return Step(True, bool(effects), effects)
        if isinstance(event, SecurityEvent):
            return self._security(event)
        if isinstance(event, RulesChanged):
            return self._rules_changed(event)
        if isinstance(event, KeysChanged):  # journaled for the audit; the public note names no key
            return Step(True, True, [RoundEvent(
                table_id=self.table_id, round_id=None, event="keys_changed", at=event.at,
                data={"scanner_keys": len(event.scanner) if event.scanner is not None else None,
                      "supervisors": sorted(event.supervisors or {})})])
        if isinstance(event, TABLE_OPERATIONS):
            return self._operate(event)
        if isinstance(event, DealerLogon):
            return self._logon(event)
        if self.ops.paused and self.in_play and event.type in FROZEN:
            return _reject(event.type, self._frozen(event.type))
        if isinstance(event, ActionTimeout) and BROKER in self.links_down:
            return _reject(event.type, "the turn timer is paused while the broker link is down")
        if isinstance(event, DecisionTimeout) and BROKER in self.links_down:
            return _reject(event.type, "the decision timer is paused while the broker link is down")
        if isinstance(event, ConfirmTimeout) and BROKER in self.links_down:
            return _reject(event.type, "the confirmation window is paused while the broker link is down "
                           "(the station could not report through it)")
        if self.current is None:
            return _reject(event.type, f"no round is open at table {self.table_id}")
        rid = getattr(event, "round_id", None)  # a command names its round: one for another round changes nothing
        if rid is not None and rid != self.current.round_id:
            return _reject(event.type, f"{_WHAT.get(event.type, event.type)} is for round {rid}, but round "
                           f"{self.current.round_id} is " + ("in play" if self.in_play else self.current.phase.value))
        step = self.current.handle(event)
        self._track_result()
        return step

    def _rules_changed(self, ev: RulesChanged) -> Step:
        """New effective rules: they apply from the next round; the round in play (and every
        round waiting for its delivery) keeps the rules it opened with."""
        try:
            games = self.rules.games if self.rules.games is not None else own_game(self.rules.game)
            rules = rules_from_canonical(self.table_id, ev.rules, ev.software_version, games=games)
        except RulesError as exc:
            return _reject(ev.type, f"the table rules cannot be used: {exc}")
        self.rules = rules
        self.journaled_rules = (rules.rules_hash, rules.software_version)
        note = RoundEvent(table_id=self.table_id, round_id=None, event="rules_changed", at=ev.at,
                          data={"rules_hash": rules.rules_hash, "software_version": rules.software_version,
                                "game": rules.game.name})
        return Step(True, True, [note])

    def _security(self, ev: SecurityEvent) -> Step:
        """A refused input with a security reason: journaled, and the supervisor is alerted on
        the station; the deal stays where it was."""
        prompt = self.prompt_now(ev.at)
        who = f" from supervisor {ev.supervisor}" if ev.supervisor else ""
        alert = prompt.model_copy(update={
            "kind": "ALERT", "reason": "security", "count": None,
            "message": f"SUPERVISOR: a {ev.role} command{who} was refused ({ev.kind}: {ev.detail}); "
                       "nothing changed at the table"})
        return Step(True, True, [alert])

    def _logon(self, ev: DealerLogon) -> Step:
        """A dealer takes over the table, also mid-round (a dealer change): that round then names
        both. Taken while paused too: a change of dealer is what a pause is often for."""
        if ev.dealer_id == self.shift.dealer:
            return _reject(ev.type, f"dealer {ev.dealer_id} is already logged on at table {self.table_id}")
        if ev.dealer_id in self.rules.game.deck:  # it would read as a card: every message naming it would be withheld
            return _reject(ev.type, f"dealer id {ev.dealer_id!r} is a card code of this game: choose another")
        previous = self.shift.logon(ev.dealer_id, ev.at)
        if self.in_play and self.current is not None and ev.dealer_id not in self.current.dealers:
            self.current.dealers.append(ev.dealer_id)
        note = RoundEvent(table_id=self.table_id, round_id=self._round_in_play(), event="dealer_logged_on",
                          at=ev.at, data={"dealer_id": ev.dealer_id, "previous": previous})
        return Step(True, True, [note])

    # -- operating state (dealer.core.operations) -----------------------------------------------

    def _operate(self, ev: TableOperation) -> Step:
        """A supervisor's pause, resume, close or reopen: applied, or refused with the reason."""
        in_play = self.in_play
        rid = self.current.round_id if in_play and self.current is not None else None
        why = self.ops.refusal(ev.type, in_play, rid)
        if why is not None:
            return _reject(ev.type, f"{OPERATIONS[ev.type]} refused at table {self.table_id}: {why}")
        self.ops = self.ops.after(ev.type, in_play, by=ev.supervisor, reason=ev.reason, at=ev.at)
        name = EVENT_NAMES.get(ev.type) or ("table_closing" if in_play else "table_closed")
        data: dict[str, object] = {"supervisor": ev.supervisor, "reason": ev.reason, "state": self.mode.value}
        if name == "table_closing":
            data["last_round"] = rid
        effects: list[Effect] = [RoundEvent(table_id=self.table_id, round_id=rid, event=name, at=ev.at, data=data)]
        if isinstance(ev, SupervisorResume) and in_play and self.current is not None:
            effects += self.current.resume_betting(ev.at, ev.betting_closes_at)
            if BROKER not in self.links_down:  # else the broker's LinkUp gives the windows
                effects += self.current.resume(ev.at)
        if not any(isinstance(e, StationPrompt) for e in effects):
            effects.append(self.prompt_now(ev.at))
        return Step(True, True, effects)

    def _after_round(self, at: int) -> list[Effect]:
        """The round in play ended (result, void, cancellation) while the table was paused or
        closing: a closing table is closed now; the station is told the table's state after
        the round's DONE."""
        if not self.ops.closed:
            return [self.prompt_now(at)]
        self.ops = self.ops.at_round_end()
        return [self._event("table_closed", at, supervisor=self.ops.by, reason=self.ops.reason, state=self.mode.value),
                self.prompt_now(at)]

    def _frozen(self, event_type: str) -> str:
        by = f" by supervisor {self.ops.by}" if self.ops.by else ""
        if event_type == "scan_read":
            return (f"the table is paused{by}: this card was NOT registered; keep it aside and pass it again after "
                    "the resume, when the station asks for it")
        if event_type in ("decision_timeout", "action_timeout", "close_betting"):
            return f"the table is paused{by}: no timer runs and betting stays as it is until the resume"
        return f"the table is paused{by}: nothing is taken for round {self._round_in_play()} until the resume"

    def _round_in_play(self) -> str | None:
        return self.current.round_id if self.in_play and self.current is not None else None

    def _state_prompt(self, at: int) -> StationPrompt | None:
        """PAUSED or CLOSED, when the table is so; None otherwise."""
        ops, rid = self.ops, self._round_in_play()
        why = f": {ops.reason}" if ops.reason else ""
        by = f" by supervisor {ops.by}" if ops.by else ""
        if ops.paused:
            where = f"; round {rid} stays where it is" if rid else ""
            return StationPrompt(table_id=self.table_id, round_id=rid, kind="PAUSED", at=at,
                                 message=f"PAUSED{by}{why}: do not deal, wait for the resume{where}")
        if self.mode is Mode.CLOSED:
            return StationPrompt(table_id=self.table_id, kind="CLOSED", at=at,
                                 message=f"table CLOSED{by}{why}: no new round until it is reopened")
        return None

    def prompt_now(self, at: int) -> StationPrompt:
        state = self._state_prompt(at)
        if state is not None:
            return state
        if self.current is not None and self.current.phase in ACTIVE:
            return self.current.prompt_now(at)
        why = self.can_open()
        return StationPrompt(table_id=self.table_id, kind="WAIT", at=at,
                             message=f"waiting: {why}" if why else "waiting for the next round")

    def private_now(self, at: int) -> list[PlayerMessage]:
        if self.current is not None and self.current.phase in ACTIVE:
            msgs = self.current.private_now(at)
            if self.ops.paused:  # no window runs: the resume gives each pending decision or turn in full
                msgs = [m for m in msgs if m.kind not in ("decision_required", "your_turn")]
            return msgs
        return []

    def _open(self, ev: OpenRound) -> Step:
        why = self.can_open()
        seq = self.round_seq(ev.round_id)
        if why is None and (seq is None or seq <= self.last_seq):
            why = f"round id {ev.round_id!r} is not new for table {self.table_id} (next is {self.next_round_id()})"
        if why is not None:
            return _reject(ev.type, why)
        assert seq is not None
        self.last_seq = seq
        self.memory = dict(ev.context)
        if ev.dealer is not None:  # a replay that starts here learns who deals
            self.shift.restore(ev.dealer, ev.at)
        self.current = Round(self.rules, ev)
        by = {"opened_by": ev.supervisor} if ev.supervisor is not None else {}
        opened = self._event("round_opened", ev.at, game=self.rules.game.name,
                             betting_closes_at=ev.betting_closes_at, **by)
        opened = opened.model_copy(update={"round_id": ev.round_id})
        return Step(True, True, [opened, self.current.prompt_now(ev.at)])

    def _track_result(self) -> None:
        cur = self.current
        if cur is not None and cur.result is not None and not cur.delivered:
            if cur.round_id not in self.undelivered:  # the round has just ended
                self.shift.round_ended(cur)
            if cur.round_id not in self.undelivered and cur.hand is not None:
                hand = cur.hand if offers(cur.hand, Remembers) else None  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717); a hand the table forgets
                if cur.result.outcome == "COMPLETED":
                    self.memory = hand.carry() if hand is not None else {}
                else:
                    self.memory = {**self.memory, **(hand.carry_unfinished() if hand is not None else {})}
            self.undelivered.setdefault(cur.round_id, cur)

    def _event(self, name: str, at: int, **data: object) -> RoundEvent:
        rid = self.current.round_id if self.current is not None else None
        return RoundEvent(table_id=self.table_id, round_id=rid, event=name, at=at, data=data)


def _reject(event_type: str, reason: str) -> Step:
    return Step(False, False, [Rejection(event_type, reason)])
