"""One table: the current round, rounds whose results still wait for delivery, link state.

Pure like :mod:`dealer.round`. The table decides what a round never could on its own:
whether a new round may open (never while a link is down or a round is in play), which
round a delivery acknowledgement belongs to, and the next round id.
"""

from __future__ import annotations

import re

from dealer.events import (ActionTimeout, ConfirmTimeout, DecisionTimeout, Event, LinkDown, LinkUp, OpenRound,
                           ResultDelivered, Resume, RulesChanged, SecurityEvent)
from dealer.messages import PlayerMessage, RoundEvent, StationPrompt
from dealer.round import ACTIVE, Effect, Rejection, Round, Step, TableRules
from dealer.rules import RulesError, rules_from_canonical

#: What follows ``{table}-`` in a round id: ``{series}-{seq}`` (the journal id, since journals
#: have one) or ``{seq}`` (journals from before, and pure core tests without a series).
_TAIL = re.compile(r"^(?:(?P<series>[a-z2-7]{8})-)?(?P<seq>\d+)$")
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

    @property
    def table_id(self) -> str:
        return self.rules.table_id

    def next_round_id(self) -> str:
        if self.series is None:
            return f"{self.table_id}-{self.last_seq + 1:06d}"
        return f"{self.table_id}-{self.series}-{self.last_seq + 1:06d}"

    def round_seq(self, round_id: str) -> int | None:
        """The sequence number of a round id of this table, in either form (with this table's
        series, or without one from a journal older than journal ids); None if it is not one."""
        prefix = f"{self.table_id}-"
        m = _TAIL.match(round_id[len(prefix):]) if round_id.startswith(prefix) else None
        if m is None or m.group("series") not in (None, self.series):
            return None
        return int(m.group("seq"))

    @property
    def in_play(self) -> bool:
        return self.current is not None and self.current.phase in ACTIVE

    def can_open(self) -> str | None:
        """Why a new round may not open now, or None."""
        if self.in_play:
            assert self.current is not None
            return f"round {self.current.round_id} is still in play ({self.current.phase.value})"
        if self.links_down:
            return "link(s) down: " + ", ".join(f"{k} ({v})" if v else k for k, v in sorted(self.links_down.items()))
        return None

    def handle(self, event: Event) -> Step:
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
            step.effects = [e for e in step.effects if not isinstance(e, Rejection)] + [note]
            self._track_result()
            return step
        if isinstance(event, LinkUp):
            was_down = self.links_down.pop(event.link, None) is not None
            effects: list[Effect] = [self._event("link_up", event.at, link=event.link)] if was_down else []
            if was_down and event.link == BROKER and self.current is not None:
                effects += self.current.resume(event.at)  # players could not decide or act while it was down
            return Step(True, was_down, effects)
        if isinstance(event, Resume):  # the backend is back and so is its broker link
            was_down = event.link is not None and self.links_down.pop(event.link, None) is not None
            effects = [self._event("link_up", event.at, link=event.link)] if was_down else []
            if self.current is not None and BROKER not in self.links_down:  # else its LinkUp resumes
                effects += self.current.resume(event.at)
            return Step(True, bool(effects), effects)
        if isinstance(event, SecurityEvent):
            return self._security(event)
        if isinstance(event, RulesChanged):
            return self._rules_changed(event)
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
            rules = rules_from_canonical(self.table_id, ev.rules, ev.software_version)
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

    def prompt_now(self, at: int) -> StationPrompt:
        if self.current is not None and self.current.phase in ACTIVE:
            return self.current.prompt_now(at)
        why = self.can_open()
        return StationPrompt(table_id=self.table_id, kind="WAIT", at=at,
                             message=f"waiting: {why}" if why else "waiting for the next round")

    def private_now(self, at: int) -> list[PlayerMessage]:
        if self.current is not None and self.current.phase in ACTIVE:
            return self.current.private_now(at)
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
        self.current = Round(self.rules, ev)
        opened = self._event("round_opened", ev.at, game=self.rules.game.name,
                             betting_closes_at=ev.betting_closes_at)
        opened = opened.model_copy(update={"round_id": ev.round_id})
        return Step(True, True, [opened, self.current.prompt_now(ev.at)])

    def _track_result(self) -> None:
        cur = self.current
        if cur is not None and cur.result is not None and not cur.delivered:
            if cur.round_id not in self.undelivered and cur.hand is not None:
                if cur.result.outcome == "COMPLETED":
                    self.memory = cur.hand.carry()
                else:
                    self.memory = {**self.memory, **cur.hand.carry_unfinished()}
            self.undelivered.setdefault(cur.round_id, cur)

    def _event(self, name: str, at: int, **data: object) -> RoundEvent:
        rid = self.current.round_id if self.current is not None else None
        return RoundEvent(table_id=self.table_id, round_id=rid, event=name, at=at, data=data)


def _reject(event_type: str, reason: str) -> Step:
    return Step(False, False, [Rejection(event_type, reason)])
