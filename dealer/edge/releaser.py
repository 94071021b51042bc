"""The releaser: what a committed batch lets go out, and nothing before its commit.

The commit loop (dealer/edge/commit_loop.py) hands each committed item's effects here: station
prompts and round events (they go out with the table's state after the batch), players' private messages (a house player's turn goes to the house
runner instead), results to the observers and the outbox relay (dealer/edge/relay.py), and the
answer to a rejection. It also owns what goes out again: a table's output held back while its
lease was not valid (:meth:`Releaser.revalidated`), everything a broker (re)connect may have
lost (:meth:`Releaser.reconnected`), and the stations' and players' state when a journal outage
ends (:meth:`Releaser.resync`).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from dealer.core.events import Event, LinkDown, LinkUp, ReadFailed, Resume, ScanRead, SupervisorOpenRound
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Rejection, Step
from dealer.core.table import Table
from dealer.edge import prompts, topics
from dealer.edge.catchup import Catchup
from dealer.edge.commit_state import CommitState
from dealer.edge.house import HouseRunner
from dealer.edge.input_queue import WAKE, InputQueue, Item
from dealer.edge.journal import Batch, OutboxRow
from dealer.edge.metrics import Metrics
from dealer.edge.publisher import Publisher
from dealer.edge.refusals import rejection_messages
from dealer.edge.relay import OutboxRelay
from dealer.edge.roles import Role
from dealer.edge.tables import Tables

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service

_ROUND_OUTCOME = {"round_result": "completed", "round_cancelled": "cancelled", "round_voided": "voided"}
#: Roles whose accepted commands are answered on the table's events (``command_accepted``); a
#: player's command is answered on the player's own topic instead.
_ANSWERED_ROLES = frozenset({Role.STATION, Role.SUPERVISOR})


class Releaser:
    """Releases committed effects: owns publishing (the publisher), the outbox relay and the
    house players. Uses the tables, the metrics, the catch-up state, the input queue (a wake
    for the catch-up after a connect) and the journal's availability; ``also_on_connect`` runs
    at every broker connect (the journal anchor goes again)."""

    def __init__(self, tables: Tables, metrics: Metrics, publisher: Publisher, relay: OutboxRelay,
                 house: HouseRunner, catchup: Catchup, queue: InputQueue, state: CommitState, *,
                 now_ms: Callable[[], int], also_on_connect: Callable[[], None]) -> None:
        self.tables = tables
        self.metrics = metrics
        self.publisher = publisher
        self.relay = relay
        self.house = house
        self.catchup = catchup
        self.queue = queue
        self.state = state
        self.now_ms = now_ms
        self.also_on_connect = also_on_connect

    # -- a committed batch ----------------------------------------------------------------

    def committed(self, batch: Batch, new_rows: list[OutboxRow]) -> None:
        """A batch is committed: the outbox relay takes its delivered, acknowledged and new rows."""
        self.relay.committed(batch, new_rows)

    def release(self, item: Item, step: Step) -> None:
        """Publish a committed item's effects: prompts, round events, private messages, results
        to the observers, rejections to the sender."""
        publisher, metrics = self.publisher, self.metrics
        tid = item.table_id
        if not self.tables.may_publish(tid, "effects"):  # paused past the lease, or the table is leaving: say nothing
            return
        cur = self.tables[tid].current
        structlog.contextvars.bind_contextvars(table_id=tid, round_id=getattr(item.event, "round_id", None) or (
            cur.round_id if cur else None))
        try:
            self._count_scan(tid, item.event, step)
            if item.cmd is not None and step.accepted and item.cmd.role in _ANSWERED_ROLES:
                # the station's and the supervisor's screens match their command's answer by its id
                publisher.event(tid, RoundEvent(
                    table_id=tid, round_id=getattr(item.event, "round_id", None) or (cur.round_id if cur else None),
                    event="command_accepted", at=item.event.at,
                    data={"type": item.event.type, "command_id": item.cmd.command_id}))
            for eff in step.effects:
                if isinstance(eff, StationPrompt):
                    publisher.release_prompt(eff)
                elif isinstance(eff, RoundEvent):
                    latency_from = item.received_ns if eff.event == "card_registered" else 0
                    published = publisher.event(tid, eff, latency_from)
                    outcome = _ROUND_OUTCOME.get(eff.event)
                    if outcome is not None:
                        metrics.rounds.labels(table=tid, game=self.tables.configs[tid].game, outcome=outcome).inc()
                    elif eff.event == "player_acted":
                        metrics.player_actions.labels(table=tid, action=str(eff.data.get("action")),
                                                      by=str(eff.data.get("by"))).inc()
                    if published:  # a withheld event is not logged either: ops reads the logs
                        log.info(eff.event, **{k: v for k, v in eff.data.items() if k != "card" or v is not None})
                elif isinstance(eff, PlayerMessage):
                    self.deliver_private(tid, eff)
                elif isinstance(eff, RoundResult):
                    publisher.notify("result", eff)
                elif isinstance(eff, Rejection):
                    metrics.rejections.labels(table=tid, type=eff.event_type).inc()
                    log.warning("event rejected", type=eff.event_type, reason=eff.reason)
                    publisher.notify("rejection", eff)
                    cid = getattr(item.event, "command_id", None)
                    by_id = {"command_id": cid} if cid else {}
                    for topic, msg, kind in rejection_messages(  # the player who acted hears why, on their own topic
                            tid, item.event.at, {"type": eff.event_type, "reason": eff.reason} | by_id,
                            player_id=getattr(item.event, "player_id", None), round_id=self.tables.round_id(tid),
                            player_data={"type": eff.event_type, "reason": eff.reason,
                                         "bet_id": getattr(item.event, "bet_id", None)} | by_id):
                        publisher.publish_soft(topic, msg, kind)
                    if eff.event_type == "scan_read":  # the dealer passed a card no deal expects
                        publisher.release_prompt(prompts.card_ignored(tid, eff.reason, item.event.at))
            if isinstance(item.event, (LinkUp, LinkDown, Resume)) and not self.tables[tid].in_play:
                publisher.release_prompt(self.tables[tid].prompt_now(item.event.at))  # what the table waits for now
        finally:
            structlog.contextvars.unbind_contextvars("table_id", "round_id")

    def _count_scan(self, tid: str, ev: Event | SupervisorOpenRound, step: Step) -> None:
        """One count per scanner input, labelled with what became of it."""
        if not isinstance(ev, (ScanRead, ReadFailed)):
            return
        if not step.accepted:
            result = "rejected"  # no card expected (betting open, deal over, no round)
        elif isinstance(ev, ReadFailed):
            result = ev.reason
        else:
            rescan = next((e for e in step.effects if isinstance(e, RoundEvent) and e.event == "scan_rejected"), None)
            result = "ok" if rescan is None else str(rescan.data["reason"])
            if rescan is None and any(isinstance(e, RoundEvent) and e.event == "card_burned" for e in step.effects):
                result = "burned"  # a burn set aside: read fine, dealt to no position
        self.metrics.scan_reads.labels(table=tid, result=result).inc()

    def flush(self, touched: set[str]) -> None:
        """After a batch's effects: the retained state of the tables it touched goes out, where
        it changed (a state never shows what is not journaled)."""
        self.publisher.catchup_due |= touched
        self.publisher.flush_catchup()

    # -- private messages and the house players ----------------------------------------------

    def release_private(self, table: Table, now: int, *, resuming: bool = False) -> None:
        """Private messages are live: what a player missed while the broker was down (hole
        cards, a pending decision or turn) is sent again. Clients key them by position/turn.
        ``resuming``: the pending decision or turn is left to the resume, which sends it with
        its new window."""
        for msg in table.private_now(now):
            if resuming and msg.kind in ("decision_required", "your_turn"):
                continue
            self.deliver_private(table.table_id, msg)

    def deliver_private(self, tid: str, msg: PlayerMessage) -> None:
        """A player's private message goes to their topic; a house player's (the hand says
        which players the house plays) goes to the house runner, never to a topic: its turn is
        decided in a worker process and answered with an ordinary, journaled action."""
        table = self.tables.get(tid)
        if table is None:
            return
        if not self.house.deliver(tid, table.current, msg):
            self.publisher.publish_soft(topics.player(tid, msg.player_id), msg, "player")

    # -- what goes out again ---------------------------------------------------------------------

    def revalidated(self) -> set[str]:
        """Tables whose output was held back and whose lease is valid again (renewed late): their
        station prompt, players' private state and results go out again now."""
        back = self.tables.valid_again()
        now = self.now_ms()
        for tid in sorted(back):
            log.info("output of a table resumed: this node's lease of it is valid again", table_id=tid)
            table = self.tables[tid]
            self.publisher.release_prompt(table.prompt_now(now))
            self.release_private(table, now)
        if back:
            self.relay.wake.set()
        return back

    def reconnected(self, resuming: set[str]) -> None:
        """The broker link is up (again): every pending result, the anchor and the retained
        catch-up messages go again, and every dealer station and player is resynced (``resuming``:
        tables whose pending decision or turn the resume sends, with its new deadline)."""
        publisher = self.publisher
        publisher.first_connect()
        self.relay.reconnected()
        self.also_on_connect()
        self.catchup.forget()  # every retained message again, under this connection's session
        publisher.catchup_due |= set(self.tables)
        self.queue.put(WAKE)  # the commit loop sends the states (after the batch it may hold)
        now = self.now_ms()
        for tid, table in list(self.tables.items()):  # resync every dealer station and player after a (re)connect
            if not self.state.writable:  # the table may be a held batch ahead: resync when it commits
                self.state.resync_due = True
                publisher.announce(prompts.journal_alert(tid, now))
                continue
            publisher.release_prompt(table.prompt_now(now))
            self.release_private(table, now, resuming=tid in resuming)

    def disconnected(self) -> None:
        """The broker link is down: the results on their way go again at the next connect."""
        self.relay.disconnected()

    def journal_alert(self, tid: str, now: int) -> None:
        """The journal cannot be written: the table's station is told to stop dealing, now."""
        self.publisher.announce(prompts.journal_alert(tid, now))

    def resync(self, now: int, *, private: bool) -> None:
        """A journal outage ended and its held batch's effects are out: every station's prompt
        again, and the players' private state when the bus reconnected during the outage."""
        for table in self.tables.values():
            self.publisher.release_prompt(table.prompt_now(now))
            if private:
                self.release_private(table, now, resuming=True)

    # -- for the commit loop -----------------------------------------------------------------------

    @property
    def tracing(self) -> bool:
        """Whether a benchmark asks where each card's time goes (:data:`~dealer.edge.publisher.STAGES`)."""
        return self.publisher.stages is not None

    def trace(self, received_ns: int, made_ns: int, taken_ns: int, committed_ns: int) -> None:
        self.publisher.trace(received_ns, made_ns, taken_ns, committed_ns)

    def result_made(self, result: RoundResult, payload: str) -> None:
        """A result is made: checked against the visibility policy now (counted and logged if it
        shows hidden cards), and delivered anyway, by the outbox relay: it settles money."""
        self.publisher.withheld(topics.results(result.table_id), payload, "result", result.round_id)

    def ack_refused(self, key: str) -> None:
        """The core refused an acknowledgement's ``result_delivered``: its rows stay in the outbox."""
        self.relay.ack_refused(key)
