"""Catching up: the retained messages a client gets the moment it subscribes.

A station, an ops screen or a player that connects mid-round must not wait for the next
change. So the backend's messages per table are **retained** (``docs/mqtt-topics.md`` §4.8),
each replaced on every change:

* ``state``: the table's one public message (:class:`~dealer.core.messages.TableState`): the
  round state the public may see, the current station prompt, and the round events and prompts
  of the batch it follows (:class:`News`), so a subscriber that stays misses nothing;
* ``history``: the last rounds and the dealers' figures;
* ``players/{player}/state``: each seated player's own cards, bets and pending decision or
  turn (:class:`~dealer.core.messages.PlayerState`), cleared (empty retained payload) once that
  player's round is settled, so retained topics stay bounded by the players in play.

Every one names the backend node and its broker **session** (``{instance}.{connection}``).
A retained message outlives its publisher, so a client treats it as current only while the
node's retained status is online with the same session (:func:`is_current`): the status is
the connection's last will, so a backend that dies (kill -9, power, network) turns every
message it left stale at once, and one that reconnects republishes all of them under its new
session. A clean stop republishes each with ``stale: true`` first.

This module builds the messages and decides which changed; it is pure (no IO, no clock): the
service stamps the time and publishes. Who may see which card is asked of
:mod:`dealer.core.visibility`, never decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dealer.edge import topics

from dealer.core import visibility
from dealer.core.messages import (DealerLine, PlayerBet, PlayerState, RoundEvent, RoundLine, StationPrompt,
                                  TableHistory, TableState, TurnState)
from dealer.core.round import ACTIVE, Phase, Round
from dealer.core.table import Table

#: What a clean stop leaves as the table's prompt (with ``stale: true``).
STOPPED_REASON = "backend_stopped"

#: Fields that change without the content changing (a message is published again only when
#: something else differs, or when it carries news).
_VOLATILE = {"version", "at", "events", "prompts"}


@dataclass(slots=True)
class News:
    """What a table did since its last state went out: round events and prompts, in order, and
    the cards among the events whose scan-to-publish latency is measured (their receive instants)."""

    events: list[RoundEvent] = field(default_factory=list)
    prompts: list[StationPrompt] = field(default_factory=list)
    latency_from: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events or self.prompts)


def is_current(message: Mapping[str, Any] | None, status: Mapping[str, Any] | None) -> bool:
    """Whether a retained catch-up message may be acted on: it is not marked stale and the
    retained status of the node it names (``studio/v1/backends/{node_id}/status``) says online
    with the same session. A client with no status yet waits (False)."""
    if not message or not status:
        return False
    return (message.get("stale") is False and status.get("online") is True
            and isinstance(message.get("session"), str) and message.get("session") == status.get("session"))


def _content(msg: BaseModel) -> str:
    return msg.model_dump_json(exclude=_VOLATILE)


class Catchup:
    """The retained messages of every table: what was last sent on each topic, and the
    per-table version counter. ``first_version`` (the instance's start in microseconds, from
    the service) makes a new instance's versions exceed an older one's."""

    def __init__(self, node_id: str, first_version: int) -> None:
        self.node_id = node_id
        self._first = first_version
        self._version: dict[str, int] = {}
        self._sent: dict[str, str] = {}  # topic -> content last sent
        #: per table: the players whose state is retained (player -> round id)
        self._players: dict[str, dict[str, str]] = {}
        #: per table: the latest prompt released (the live stream's last)
        self.prompts: dict[str, StationPrompt] = {}
        #: per table: (round id, phase) and since when (epoch ms), for ``phase_since``
        self._phase: dict[str, tuple[tuple[str | None, str | None], int]] = {}
        #: per table: the shift revision last built into ``history`` (built only when it moved)
        self._history_rev: dict[str, int] = {}
        #: per table: the last state built (what :meth:`announce` sends again with a new prompt)
        self._last: dict[str, TableState] = {}

    def forget(self) -> None:
        """A new broker session: everything is sent again (under the new session)."""
        self._sent.clear()

    def forget_table(self, table_id: str) -> None:
        """Everything of one table is sent again."""
        prefix = topics.table_topic(table_id, "")
        for topic in [t for t in self._sent if t.startswith(prefix)]:
            del self._sent[topic]

    def adopt(self, table_id: str, version_floor: int) -> None:
        """The table joins this node (taken over from another): all of its retained messages are
        sent again, numbered above ``version_floor`` (the adoption's time in microseconds, so
        above the previous owner's numbers, which started at its own start)."""
        self.forget_table(table_id)
        self._version[table_id] = max(self._version.get(table_id, self._first), version_floor)

    def drop(self, table_id: str) -> None:
        """The table left this node: nothing of it is remembered (its next owner publishes it)."""
        self.forget_table(table_id)
        self._players.pop(table_id, None)
        self.prompts.pop(table_id, None)
        self._last.pop(table_id, None)
        self._phase.pop(table_id, None)
        self._history_rev.pop(table_id, None)

    def _peek(self, table_id: str) -> int:
        """The version the table's next changed message gets (:meth:`_next` takes it)."""
        return self._version.get(table_id, self._first) + 1

    def _next(self, table_id: str) -> int:
        v = self._version.get(table_id, self._first) + 1
        self._version[table_id] = v
        return v

    def _changed(self, topic: str, msg: BaseModel) -> bool:
        content = _content(msg)
        if self._sent.get(topic) == content:
            return False
        self._sent[topic] = content
        return True

    # -- the current prompt -----------------------------------------------------------------

    def set_prompt(self, prompt: StationPrompt) -> None:
        """The table's prompt is now ``prompt`` (the next state carries it)."""
        self.prompts[prompt.table_id] = prompt

    def announce(self, table_id: str, news: News, *, at: int) -> TableState | None:
        """The last state built for the table again, with the current prompt and ``news``, now:
        for a prompt that cannot wait for the next batch (the journal is down, a forged frame),
        whose table in memory may hold a batch not yet journaled. None: no state was built yet
        (the next batch's state carries the prompt)."""
        base = self._last.get(table_id)
        if base is None:
            return None
        msg = base.model_copy(update={"prompt": self.prompts.get(table_id), "events": news.events,
                                      "prompts": news.prompts, "version": self._next(table_id), "at": at})
        self._sent[topics.state(table_id)] = _content(msg)
        return msg

    # -- table and player states ------------------------------------------------------------

    def updates(self, table: Table, *, session: str, at: int, paused_reason: str | None = None,
                stale: bool = False, news: News | None = None) -> list[tuple[str, BaseModel | None]]:
        """(topic, message) for the table's state (with the current prompt and ``news``) and
        every player state that changed since they were last sent; message None: clear that
        player's retained state (empty payload). The state goes when it changed or has news."""
        tid = table.table_id
        out: list[tuple[str, BaseModel | None]] = []
        cur = table.current
        key = (cur.round_id, cur.phase.value) if cur is not None else (None, None)
        seen = self._phase.get(tid)
        if seen is None or seen[0] != key:
            seen = self._phase[tid] = (key, at)
        state = table_state(table, node_id=self.node_id, session=session, at=at, paused_reason=paused_reason,
                            stale=stale, version=self._peek(tid), phase_since=seen[1], prompt=self.prompts.get(tid),
                            news=news)
        self._last[tid] = state
        if self._changed(topics.state(tid), state) or news:
            self._next(tid)
            out.append((topics.state(tid), state))
        hist_topic = topics.history(tid)
        if hist_topic not in self._sent or self._history_rev.get(tid) != table.shift.revision:
            # built only when the shift moved (a round ended, a dealer logged on) or it is to be sent again
            self._history_rev[tid] = table.shift.revision
            hist = table_history(table, node_id=self.node_id, session=session, at=at, stale=stale,
                                 version=self._peek(tid))
            if self._changed(hist_topic, hist):
                self._next(tid)
                out.append((hist_topic, hist))
        now = player_states(table, node_id=self.node_id, session=session, at=at, stale=stale)
        kept = self._players.setdefault(tid, {})
        for player in sorted(set(kept) - set(now)):  # their round is settled: clear
            del kept[player]
            topic = topics.player_state(tid, player)
            self._sent.pop(topic, None)
            out.append((topic, None))
        for player, msg in sorted(now.items()):
            kept[player] = msg.round_id
            topic = topics.player_state(tid, player)
            if self._changed(topic, msg):
                out.append((topic, msg.model_copy(update={"version": self._next(tid)})))
        return out

    def stopped(self, table: Table, *, session: str, at: int) -> list[tuple[str, BaseModel | None]]:
        """Everything retained for the table again, marked stale, for a clean stop: the prompt
        becomes a stale WAIT (a station that ignores ``stale`` still deals nothing)."""
        self.forget_table(table.table_id)
        cur = table.current
        prompt = StationPrompt(table_id=table.table_id, round_id=cur.round_id if cur else None, kind="WAIT",
                               reason=STOPPED_REASON, at=at,
                               message=f"backend {self.node_id} stopped: do not deal until it is back")
        self.set_prompt(prompt)
        return self.updates(table, session=session, at=at, stale=True, news=News(prompts=[prompt]))


def table_state(table: Table, *, node_id: str, session: str, at: int, paused_reason: str | None = None,
                stale: bool = False, version: int = 0, phase_since: int | None = None,
                prompt: StationPrompt | None = None, news: News | None = None) -> TableState:
    """The public state of the table's latest round, its current ``prompt`` and the ``news`` it
    follows (:class:`Catchup` gives its ``version``)."""
    cur = table.current
    base: dict[str, Any] = dict(table_id=table.table_id, node_id=node_id, session=session, version=version,
                                stale=stale, prompt=prompt, events=news.events if news else [],
                                prompts=news.prompts if news else [],
                                paused=paused_reason is not None, paused_reason=paused_reason,
                                links_down=dict(sorted(table.links_down.items())), mode=table.mode.value,
                                dealer=table.dealer, phase_since=phase_since, unsettled=len(table.undelivered),
                                at=at)
    if cur is None:
        return TableState(game=table.rules.game.name, **base)
    dealing = cur.phase in (Phase.BETTING_CLOSED, Phase.DEALING)
    turn = None
    if cur.phase == Phase.ACTION and cur.hand is not None:
        turn = TurnState(turn=cur.turn, player_id=cur.hand.to_act, street=cur.street, closes_at=cur.action_deadline)
    return TableState(
        game=cur.rules.game.name, round_id=cur.round_id, phase=cur.phase.value,
        position=cur.expected_position if dealing else None, cards=visibility.public_cards(cur),
        betting_closes_at=cur.betting_closes_at if cur.phase == Phase.BETTING_OPEN else None,
        decision_closes_at=cur.decision_deadline if cur.phase == Phase.DECISION else None, turn=turn,
        outcome=cur.result.outcome if cur.result is not None else None,
        winner=cur.result.winner if cur.result is not None else None,
        dealt=[p.name for p in cur.plan if not p.confirm and p.name in cur.cards],
        confirm_closes_at=cur.confirm_deadline if cur.phase in ACTIVE else None, **base)


def table_history(table: Table, *, node_id: str, session: str, at: int, stale: bool = False,
                  version: int = 0) -> TableHistory:
    """The table's last rounds and per-dealer figures (:mod:`dealer.core.shift`); no card codes."""
    shift = table.shift
    rounds = [RoundLine(round_id=r.round_id, outcome=r.outcome, winner=r.winner, reason=r.reason,  # type: ignore[arg-type]  # pydantic validates the outcome text against RoundLine's
                        dealers=list(r.dealers), opened_at=r.opened_at, finished_at=r.finished_at, dealt=r.dealt, rescans=r.rescans, mistakes=r.mistakes) for r in shift.rounds]
    dealers = [DealerLine(dealer=f.dealer, on_shift=f.dealer is not None and f.dealer == shift.dealer, since=f.since,
                          rounds=f.rounds, cards=f.tally.cards, rescans=f.tally.rescans, mistakes=f.tally.mistakes)
               for f in sorted(shift.figures.values(), key=lambda f: (f.dealer is None, f.since))]
    return TableHistory(table_id=table.table_id, game=table.rules.game.name, node_id=node_id, session=session,
                        version=version, stale=stale, dealer=shift.dealer, since=shift.since, rounds=rounds,
                        dealers=dealers, at=at)


def player_states(table: Table, *, node_id: str, session: str, at: int, stale: bool = False) -> dict[str, PlayerState]:
    """player -> private state, for every player seated in a round of the table that is not
    settled yet (the newest such round of each player). Players without a seat (Teen Patti's
    bettors) have no private round state; the house AI's is never published."""
    rounds: dict[str, Round] = dict(table.undelivered)
    if table.current is not None:
        rounds[table.current.round_id] = table.current
    out: dict[str, PlayerState] = {}
    for rnd in sorted(rounds.values(), key=lambda r: (table.round_seq(r.round_id) or 0, r.round_id)):
        if rnd.delivered:
            continue
        out.update(_round_players(rnd, node_id=node_id, session=session, at=at, stale=stale))
    return out


def _round_players(rnd: Round, *, node_id: str, session: str, at: int, stale: bool) -> dict[str, PlayerState]:
    seat_of = {p: s for s, p in sorted(rnd.seat_owner.items())}
    players = (set(seat_of) | set(rnd.deciders)) - rnd.house_players
    if not players:
        return {}
    cards: dict[str, dict[str, str]] = {p: {} for p in players}
    for pos, owner in visibility.owner_cards(rnd):  # the policy says which cards each player holds
        if owner in cards:
            cards[owner][pos.name] = rnd.cards[pos.name]
    bets: dict[str, list[PlayerBet]] = {p: [] for p in players}
    for b in rnd.bets.values():
        if b.player_id in bets:
            bets[b.player_id].append(PlayerBet(bet_id=b.bet_id, bet_type=b.bet_type, stake=b.stake, seat=b.seat))
    decision: dict[str, dict[str, Any]] = {}
    turn: dict[str, dict[str, Any]] = {}
    if rnd.phase in ACTIVE:  # what the round would send each player again after a reconnect
        for m in rnd.private_now(at):
            if m.kind == "decision_required":
                decision[m.player_id] = dict(m.data)
            elif m.kind == "your_turn":
                turn[m.player_id] = dict(m.data)
    return {p: PlayerState(table_id=rnd.table_id, player_id=p, node_id=node_id, session=session, version=0,
                           stale=stale, round_id=rnd.round_id, phase=rnd.phase.value,
                           seat=seat_of.get(p, rnd.deciders.get(p)), cards=cards[p], bets=bets[p],
                           decision=decision.get(p), decided=rnd.decisions.get(p), turn=turn.get(p), at=at)
            for p in sorted(players)}


__all__ = ["Catchup", "News", "STOPPED_REASON", "is_current", "player_states", "table_history", "table_state"]
