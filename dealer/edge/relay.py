"""The outbox relay: every committed result goes to settlement until settlement acknowledges it.

The relay publishes each outbox row at QoS 1 and publishes it again with backoff (and after
every broker reconnect) until settlement acknowledges the result on ``results/ack``, naming its
idempotency key and the SHA-256 of the result's bytes; the acknowledgement becomes a
``result_delivered`` event through the commit loop, whose commit deletes every outbox row of the
result (:meth:`OutboxRelay.committed`). An acknowledgement without the hash, or with another
one, is refused (a security event) and changes nothing: the key alone is public.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from dealer.core import acks
from dealer.core.events import Event, ResultDelivered
from dealer.edge import topics
from dealer.edge.config import ServiceSection
from dealer.edge.journal import Batch, JournalWriteFailed, OutboxRow, result_key
from dealer.edge.lookups import Lookups
from dealer.edge.metrics import Metrics
from dealer.edge.refusals import Refusals
from dealer.edge.tables import Tables
from drivers.bus import Bus, BusError

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


class OutboxRelay:
    """Holds the outbox rows not yet acknowledged, publishes each when it is due, and turns
    settlement's acknowledgement into a ``result_delivered`` for the commit loop (``submit``).
    Uses the bus, the tables, the journal (an old acknowledgement; a journal server's through
    ``lookup``), the metrics, the service settings and the refusals (a bad or unbound one)."""

    def __init__(self, bus: Bus, tables: Tables, journal: Any, metrics: Metrics, settings: ServiceSection, *,
                 file_journal: bool, lookup: Lookups, refusals: Refusals, now_ms: Callable[[], int],
                 submit: Callable[[str, Event], Any],
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        self.bus = bus
        self.tables = tables
        self.journal = journal
        self.metrics = metrics
        self.settings = settings
        self.file_journal = file_journal
        self.lookup = lookup
        self.refusals = refusals
        self.now_ms = now_ms
        self.submit = submit
        self.spawn = spawn
        self._pending: dict[int, OutboxRow] = {}
        self._by_key: dict[str, set[int]] = {}  # result idempotency key -> its pending outbox row ids
        self._inflight: set[int] = set()
        self._oversize_rows: set[int] = set()  # outbox rows over the limit, logged once
        self._sends: dict[int, int] = {}  # publishes of each pending row acknowledged by the broker, this run
        self._due: dict[int, float] = {}  # loop time of each pending row's next publish (absent: now)
        self._reconnect_resend: set[int] = set()  # rows going again because the broker link came back
        self._acking: set[str] = set()  # acknowledged keys whose result_delivered is on its way to the journal
        self._next: float | None = None  # loop time the relay wakes up at by itself (None: only when woken)
        self.wake = asyncio.Event()
        self.metrics.outbox_oldest_age.set_function(self._oldest_age)

    @property
    def pending(self) -> int:
        """Results waiting in the outbox (a result in parts is one, whatever its rows)."""
        return len(self._by_key)

    def add(self, row: OutboxRow) -> None:
        self._pending[row.id] = row
        self._by_key.setdefault(result_key(row.key), set()).add(row.id)

    def _drop(self, oid: int) -> None:
        row = self._pending.pop(oid, None)
        self._inflight.discard(oid)
        self._sends.pop(oid, None)
        self._due.pop(oid, None)
        self._reconnect_resend.discard(oid)
        if row is not None:
            ids = self._by_key.get(result_key(row.key))
            if ids is not None:
                ids.discard(oid)
                if not ids:
                    del self._by_key[result_key(row.key)]

    def committed(self, batch: Batch, new_rows: list[OutboxRow]) -> None:
        """A batch is committed: the rows it delivered or whose result it acknowledged leave
        the outbox, the rows it wrote join it (and are sent at once)."""
        metrics = self.metrics
        for oid in batch.delivered:
            self._drop(oid)
        for key in batch.acked:
            for oid in sorted(self._by_key.get(key, ())):
                self._drop(oid)
            self._acking.discard(key)
            metrics.result_acks.labels(table=key.split(":", 1)[0], outcome="applied").inc()
            log.info("result acknowledged by settlement", idempotency_key=key)
        for row in new_rows:
            if row.table_id in self.tables:  # else the table left meanwhile: its next owner sends it
                self.add(row)
        metrics.outbox_pending.set(self.pending)
        if new_rows:
            self.wake.set()

    def forget_table(self, tid: str) -> None:
        """A table left this node: its rows stay in the journal's outbox for its next owner to send."""
        for oid in [oid for oid, row in self._pending.items() if row.table_id == tid]:
            self._drop(oid)
        self._acking = {k for k in self._acking if not acks.of_table(tid, k)}

    def ack_refused(self, key: str) -> None:
        """The core refused an acknowledgement's ``result_delivered`` (logged as a rejection): its rows stay."""
        self._acking.discard(key)

    def reconnected(self) -> None:
        """The broker link is up again: every row sent before goes again now (the broker may have lost it)."""
        self._reconnect_resend = {oid for oid in self._pending if self._sends.get(oid)}
        self._due.clear()
        self.wake.set()

    def disconnected(self) -> None:
        self._inflight.clear()

    def _oldest_age(self) -> float:
        """Seconds since the oldest unacknowledged outbox row was committed (read at scrape
        time, from the metrics thread: the list is copied in one step)."""
        try:
            created = [r.created_at for r in list(self._pending.values())]
        except RuntimeError:  # changed while copied: the next scrape reads it
            return 0.0
        return max(0.0, (self.now_ms() - min(created)) / 1000) if created else 0.0

    async def run(self) -> None:
        """Publish every outbox row that is due: at once when new, then again after the resend
        backoff (``service.result_resend_seconds``, doubling up to ``result_resend_max_seconds``)
        and after every broker reconnect, until settlement acknowledges its result."""
        loop = asyncio.get_running_loop()
        cfg = self.settings
        while True:
            self.wake.clear()
            now, next_due = loop.time(), None
            if self.bus.connected:
                for oid in sorted(self._pending):
                    if oid in self._inflight:
                        continue
                    due = self._due.get(oid, 0.0)
                    if due > now:
                        next_due = due if next_due is None else min(next_due, due)
                        continue
                    row = self._pending[oid]
                    if not self.tables.may_publish(row.table_id, "result"):  # sent when the lease is valid again
                        continue
                    if self._refused_oversize(row):
                        continue
                    if self._sends.get(oid):
                        reason = "reconnect" if oid in self._reconnect_resend else "backoff"
                        self.metrics.result_resends.labels(table=row.table_id, reason=reason).inc()
                        log.info("result sent again: settlement has not acknowledged it", key=row.key,
                                 reason=reason, sends=self._sends[oid])
                    self._reconnect_resend.discard(oid)
                    self._inflight.add(oid)
                    self.spawn(self._deliver(row, cfg.result_resend_seconds, cfg.result_resend_max_seconds))
            # A timer sets the wake-up event: asyncio.wait_for (3.11) can swallow the task's
            # cancellation when the event is set at the same moment, and stop() would hang.
            self._next = next_due
            timer = loop.call_at(next_due, self.wake.set) if next_due is not None else None
            try:
                await self.wake.wait()
            finally:
                if timer is not None:
                    timer.cancel()

    def _refused_oversize(self, row: OutboxRow) -> bool:
        """A row over the limit is never sent (the broker would drop the connection): logged
        and counted once per row and run; it stays in the outbox (raise the limit to send it)."""
        limit = self.settings.max_message_bytes
        if len(row.payload) <= limit:
            return False
        if row.id not in self._oversize_rows:
            self._oversize_rows.add(row.id)
            self.metrics.messages_oversize.labels(kind="result").inc()
            log.error("outbox row over the message limit: not sent", kind="result", key=row.key, topic=row.topic,
                      round_id=row.round_id, size=len(row.payload), limit=limit)
        return True

    async def _deliver(self, row: OutboxRow, initial: float, cap: float) -> None:
        """One publish of an outbox row. The PUBACK only schedules the next publish: the row
        leaves the outbox when settlement acknowledges its result (:meth:`on_ack`)."""
        try:
            await self.bus.publish(row.topic, row.payload, qos=1)
        except BusError as exc:
            log.warning("result publish failed; kept in outbox", kind="result", key=row.key, topic=row.topic,
                        round_id=row.round_id, reason=str(exc)[:200])
            self._inflight.discard(row.id)
            return
        self._inflight.discard(row.id)
        if row.id not in self._pending:
            return  # acknowledged meanwhile
        sends = self._sends[row.id] = self._sends.get(row.id, 0) + 1
        due = self._due[row.id] = asyncio.get_running_loop().time() + acks.resend_delay(sends, initial, cap)
        if self._next is None or due < self._next:
            self.wake.set()  # the relay's next wake-up is this one (else it comes earlier anyway)

    def on_ack(self, topic: str, payload: bytes) -> None:
        """Settlement acknowledged a result on ``results/ack``: its ``result_delivered`` goes
        through the commit loop, whose commit deletes every outbox row of the result. One that
        does not carry the held result's SHA-256 is refused (:meth:`_unbound`); a repeat
        (already acknowledged) is counted and ignored quietly; an unknown key is counted,
        logged and ignored; a malformed payload is a bad message."""
        tid = topics.table_of(topic) or "unknown"
        verdict = acks.parse_ack(payload)
        if isinstance(verdict, acks.BadAck):
            self.refusals.bad_message("results_ack", f"table {tid}: {verdict.reason}")
            return
        key = verdict.idempotency_key
        if not self.tables.owns(tid):  # the table's next owner takes its acknowledgements
            log.debug("acknowledgement for a table this node does not own now; ignored", table_id=tid)
            return
        mine = acks.of_table(tid, key)  # another table's key (or a part's) is unknown here
        ids = self._by_key.get(key) if mine else None
        if mine and key not in self._acking and not ids and not self.file_journal:
            self.spawn(self._ack_looked_up(tid, verdict))  # a journal server is asked off the event loop
            return
        try:
            seen = mine and (key in self._acking or (not ids and self.journal.delivered(tid, key.split(":", 1)[1])))
        except JournalWriteFailed as exc:  # cannot tell now: the result is sent again and acknowledged again
            log.warning("acknowledgement not checked: the journal cannot answer now; ignored", table_id=tid,
                        idempotency_key=key[:200], error=str(exc)[:200])
            return
        self._ack(tid, verdict, bool(seen), ids)

    async def _ack_looked_up(self, tid: str, ack: acks.Ack) -> None:
        key = ack.idempotency_key
        try:
            seen = await self.lookup(self.journal.delivered, tid, key.split(":", 1)[1])
        except JournalWriteFailed as exc:
            log.warning("acknowledgement not checked: the journal cannot answer now; ignored", table_id=tid,
                        idempotency_key=key[:200], error=str(exc)[:200])
            return
        if self.tables.owns(tid):
            self._ack(tid, ack, seen or key in self._acking, self._by_key.get(key))

    def _unbound(self, ack: acks.Ack, ids: set[int]) -> tuple[str, str] | None:
        """Why ``ack`` does not acknowledge the result held under its key, as (kind, detail),
        or None when it carries the SHA-256 of the result's own message (the row whose key is
        the idempotency key: the whole result, or the manifest of one in parts)."""
        key = ack.idempotency_key
        main = next((self._pending[i] for i in ids if self._pending[i].key == key), None)
        if ack.result_sha256 is None:
            return ("ack_without_hash", f"acknowledgement of {key[:100]} without result_sha256 (protocol 1.1: the key "
                                        "alone is public); refused, the result stays in the outbox")
        if main is None or not acks.binds(ack, main.payload):
            return ("ack_hash_mismatch", f"acknowledgement of {key[:100]} with result_sha256 {ack.result_sha256[:16]}... "
                                         "that is not the held result's; refused, the result stays in the outbox")
        return None

    def _ack(self, tid: str, ack: acks.Ack, seen: bool, ids: set[int] | None) -> None:
        key = ack.idempotency_key
        if ids:
            refusal = self._unbound(ack, ids)
            if refusal is not None:  # it changes nothing: the result goes again and settlement's real ack takes it
                kind, detail = refusal
                self.metrics.result_acks.labels(table=tid, outcome="refused").inc()
                self.refusals.security_event(tid, kind, "settlement", detail, None, None, self.now_ms())
                return
        if seen:
            self.metrics.result_acks.labels(table=tid, outcome="repeat").inc()
            log.debug("result acknowledged again; ignored", idempotency_key=key)
            return
        if not ids:
            self.metrics.result_acks_unknown.labels(table=tid).inc()
            log.warning("acknowledgement for an unknown result; ignored", table_id=tid, idempotency_key=key[:200])
            return
        rows = [self._pending[i] for i in sorted(ids)]
        main = next((r for r in rows if r.key == key), rows[0])
        self._acking.add(key)
        self.submit(tid, ResultDelivered(round_id=main.round_id, idempotency_key=key,
                                        outbox_id=main.id if main.key == key else None))
