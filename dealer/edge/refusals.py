"""Refusals: a command the edge does not take is counted, logged and answered here, once.

Every refusal, at the ingress (dealer/edge/inputs.py) or in the commit loop (a reused command
id), goes through :meth:`Refusals.refuse`; a rejection the core makes is answered with the same
messages (:func:`rejection_messages`). A security refusal (a forged signature, an unbound
acknowledgement) is also journaled and alerted through the commit loop, rate-limited per table
and role. A malformed message of a link driver is counted as a bad message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from pydantic import BaseModel

from dealer.core import visibility
from dealer.core.events import SecurityEvent
from dealer.core.messages import PlayerMessage, RoundEvent
from dealer.edge import ingress, topics
from dealer.edge.input_queue import InputQueue, Item
from dealer.edge.metrics import Metrics
from dealer.edge.publisher import Publisher
from dealer.edge.ratelimit import TokenBuckets
from dealer.edge.roles import COMMAND_TOPIC
from dealer.edge.tables import Tables

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


def rejection_messages(tid: str, at: int, data: dict[str, Any], *, player_id: str | None, round_id: str | None,
                       player_data: dict[str, Any] | None = None) -> list[tuple[str, BaseModel, str]]:
    """The answer to a refused command or a rejected event, as (topic, message, kind): a
    ``rejected`` event on the table's events (the station's and supervisor's screens), and the
    player who sent it hears why on their own topic (a house player is nobody's topic)."""
    out: list[tuple[str, BaseModel, str]] = [
        (topics.events(tid), RoundEvent(table_id=tid, round_id=None, event="rejected", at=at, data=data), "event")]
    if player_id is not None and player_id not in ingress.HOUSE_PLAYERS:
        out.append((topics.player(tid, player_id), PlayerMessage(
            table_id=tid, round_id=round_id, player_id=player_id, kind="rejected", at=at,
            data=data if player_data is None else player_data), "player"))
    return out


class Refusals:
    """Counts, logs and answers refused commands and journals security events. Uses the
    tables (a card code in a reason is never named), the metrics, the publisher (the answer)
    and the input queue (a security event's row). ``observers`` see every refusal (tools)."""

    def __init__(self, tables: Tables, metrics: Metrics, publisher: Publisher, queue: InputQueue) -> None:
        self.tables = tables
        self.metrics = metrics
        self.publisher = publisher
        self.queue = queue
        self.observers: list[Callable[[ingress.Refused], None]] = []
        self._security_budget = TokenBuckets(burst=20, per_second=0.5)

    def refuse(self, r: ingress.Refused, at: int) -> None:
        """Count, log and answer a refused command; a security refusal is also journaled and
        alerted (through the commit loop, rate-limited per table and role)."""
        for observer in self.observers:
            observer(r)
        tid = r.table_id
        role = r.role.value if r.role is not None else "unknown"
        self.metrics.commands_refused.labels(table=tid or "unknown", role=role, reason=r.kind).inc()
        if r.kind in ("stale", "future") and r.skew_ms is not None and tid is not None:  # genuine, but its time
            self.metrics.supervisor_clock_refused.labels(table=tid, cause=r.kind).inc()
        if r.kind in ("malformed", "too_large") and r.role is not None:
            self.metrics.bad_messages.labels(topic_kind=COMMAND_TOPIC[r.role]).inc()
        # it may echo what the sender wrote (an id that spells a card): every card code is written "the card
        # named", hidden or not, so that the answer never tells whether a card is hidden
        tables = self.tables
        reason = visibility.unnamed_all(tables[tid].rules.game.deck, r.reason) if tid is not None and tid in tables else r.reason
        log.warning("command refused", table_id=tid, role=role, kind=r.kind, type=r.command_type,
                    command_id=r.command_id, reason=reason[:300])
        if tid is None:
            return
        data = {"type": r.command_type, "reason": reason, "command_id": r.command_id}
        for topic, msg, kind in rejection_messages(tid, at, data, player_id=r.player_id,
                                                   round_id=tables.round_id(tid)):
            self.publisher.publish_soft(topic, msg, kind)
        if r.security:
            self.security_event(tid, r.kind, role, r.reason, r.command_id, r.supervisor, at)

    def security_event(self, tid: str, kind: str, role: str, detail: str, command_id: str | None,
                       supervisor: str | None, at: int) -> None:
        """A security event: counted, logged, and journaled unless the table's role floods."""
        self.metrics.security_events.labels(table=tid, kind=kind).inc()
        log.error("security event", table_id=tid, kind=kind, role=role, command_id=command_id,
                  supervisor=supervisor, detail=detail[:300])
        if not self._security_budget.take(tid, role, time.monotonic()):
            self.metrics.security_events_unjournaled.labels(table=tid).inc()
            return  # a flood: counted and logged, not one journal row per message
        self.queue.put_droppable(Item(tid, SecurityEvent(kind=kind, role=role, detail=detail[:300],
                                                         command_id=(command_id or "")[:64] or None,
                                                         supervisor=supervisor, at=at)), "security_event")

    def bad_message(self, kind: str, reason: str) -> None:
        """A link driver's message that could not be read (a scanner's, an acknowledgement)."""
        self.metrics.bad_messages.labels(topic_kind=kind).inc()
        log.warning("bad message", kind=kind, reason=reason[:300])
