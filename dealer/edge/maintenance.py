"""Journal maintenance: WAL checkpoints, retention (segment rolls), the head record and the published anchor.

Checkpoints run in their own thread, off the commit path. Retention (dealer/edge/segments.py): a
segment file is written beside the writer and recorded between group commits in the writer
thread (:meth:`Maintenance.retention`, called by the commit loop). The journal's head is published
retained on ``studio/v1/backends/{node}/journal`` (:meth:`Maintenance.publish_anchor`) and, for
the SQLite journal, recorded in ``<journal>.head`` (dealer/edge/anchors.py) after each checkpoint
when it moved, before each anchor goes out and at a clean stop: start-up refuses a journal behind
either, so a rolled-back journal never deals a round id or an idempotency key again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import structlog

from dealer.core.events import Event, RulesChanged
from dealer.edge import topics
from dealer.edge.anchors import HeadRecord
from dealer.edge.config import Settings
from dealer.edge.input_queue import WAKE, InputQueue
from dealer.edge.journal_health import disk_usage
from dealer.edge.metrics import Metrics
from dealer.edge.segments import NoRoll, Prepared, prepare_roll
from dealer.edge.tables import Tables
from drivers.bus import Bus, BusError

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


class Maintenance:
    """Keeps the journal short and its head published: checkpoints, segment rolls and anchors.
    Uses the journal, its writer thread, the settings, metrics, bus and input queue (a prepared
    segment wakes the commit loop), and the tables (rules journaled again through ``submit``)."""

    def __init__(self, journal: Any, settings: Settings, metrics: Metrics, bus: Bus, *, file_journal: bool,
                 writer: Executor, queue: InputQueue, tables: Tables, now_ms: Callable[[], int],
                 submit: Callable[[str, Event], Any],
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        self.journal = journal
        self.settings = settings
        self.metrics = metrics
        self.bus = bus
        self.file_journal = file_journal
        self.writer = writer
        self.queue = queue
        self.tables = tables
        self.now_ms = now_ms
        self.submit = submit
        self.spawn = spawn
        # A segment prepared beside the writer, waiting for the commit loop to record it between
        # group commits; the row id to try again at.
        self._roll_task: asyncio.Task[None] | None = None
        self._roll_ready: Prepared | None = None
        self._roll_next_at = 0
        self._purge_due = True  # rows of a recorded segment left by a crash in the middle of a roll
        recs = self.journal.segment_records() if self.file_journal else []  # a journal server keeps its own
        self.segments = len(recs)
        self._rolled_upto = recs[-1].last_id if recs else 0
        self.metrics.journal_segment_files.set(self.segments)
        self._anchor_sent: tuple[int, str] | None = None
        #: Whether the anchor retained on the broker was compared with the journal: ``dealer run``
        #: does it at start (dealer/edge/runner.py); when it could not reach the broker it sets this
        #: False, and no anchor goes out until the first connection has compared it (:meth:`anchors`).
        self.anchor_checked = True
        self._anchor_wake = asyncio.Event()
        #: the SQLite journal's head record (a journal server is its own record)
        self.record = HeadRecord(self.journal.path, self.journal.journal_id) if self.file_journal else None
        self._record_failing = False

    async def checkpoints(self, period: float = 1.0) -> None:
        """Keep the WAL short without putting checkpoint fsyncs on the commit path, and keep
        the journal's size and its disk's free space current for the metrics. A checkpoint that
        keeps failing (a full disk) is logged when it starts and when it stops failing."""
        loop = asyncio.get_running_loop()
        failing = False
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wal-checkpoint") as pool:
            while True:
                await asyncio.sleep(period)
                try:
                    await loop.run_in_executor(pool, self.journal.checkpoint)
                except Exception as exc:
                    if not failing:
                        log.warning("WAL checkpoint failing: retried every period, logged again when it works",
                                    error=str(exc), period=period)
                    failing = True
                else:
                    if failing:
                        log.info("WAL checkpoint works again")
                    failing = False
                await loop.run_in_executor(pool, self.record_head)
                try:
                    usage = await loop.run_in_executor(pool, disk_usage, self.journal.path)
                except OSError as exc:
                    log.warning("journal disk usage unknown", error=str(exc))
                    continue
                self.metrics.journal_bytes.set(usage.journal_bytes)
                self.metrics.journal_disk_free.set(usage.free_bytes)
                self.metrics.journal_disk_size.set(usage.size_bytes)

    async def retention(self, loop: asyncio.AbstractEventLoop) -> None:
        """Between group commits: record a prepared segment (writer thread, one transaction),
        and start preparing the next one when the live journal has grown past
        ``journal_retain_rows + journal_segment_rows`` (cheap: two integers compared)."""
        prepared, self._roll_ready = self._roll_ready, None
        if prepared is not None:
            rec = prepared.record
            try:
                done = await loop.run_in_executor(self.writer, self.journal.finish_roll, prepared)
            except Exception as exc:  # the rows stay live; the next roll tries again
                self.metrics.journal_roll_failures.inc()
                log.error("journal roll failed; rows kept in the live journal", segment=rec.number, error=repr(exc))
                done = False
            if done:
                self.segments, self._rolled_upto = rec.number, rec.last_id
                self.metrics.journal_segments.inc()
                self.metrics.journal_rows_rolled.inc(rec.rows)
                self.metrics.journal_segment_files.set(self.segments)
                log.info("journal segment rolled", segment=rec.number, first_row=rec.first_id, last_row=rec.last_id,
                         rows=rec.rows, anchor_row=rec.anchor_id, path=str(prepared.path))
                self.publish_anchor()
                self._purge_due = True
        elif self._purge_due:  # the rolled rows go a chunk per batch: the writer is never held for long
            try:
                self._purge_due = await loop.run_in_executor(self.writer, self.journal.purge_rolled, 2000) > 0
            except Exception as exc:
                self.metrics.journal_roll_failures.inc()
                log.error("rolled journal rows could not be purged; tried again later", error=repr(exc))
        cfg = self.settings.service
        head = self.journal.head[0]
        # One segment at a time: none is started while one is prepared and not yet recorded (it
        # may have become ready while this method awaited the writer): a second preparation would
        # take the same number, and overwrite the first one's file.
        if (cfg.journal_segment_rows and self._roll_task is None and self._roll_ready is None
                and head >= self._roll_next_at
                and head - self._rolled_upto >= cfg.journal_retain_rows + cfg.journal_segment_rows):
            self._roll_task = asyncio.create_task(self._prepare_roll(head), name="journal-roll")

    async def _prepare_roll(self, head: int) -> None:
        """Copy the next segment's rows into its file beside the writer (its own connection:
        the rows are below every replay floor, nothing changes them), then wake the commit loop."""
        cfg = self.settings.service
        retry_at = head + max(1, cfg.journal_segment_rows // 10)
        try:
            got = await asyncio.to_thread(prepare_roll, self.journal.path, keep_rows=cfg.journal_retain_rows,
                                          segment_rows=cfg.journal_segment_rows)
        except Exception as exc:
            self.metrics.journal_roll_failures.inc()
            log.error("journal segment could not be written; rows kept in the live journal", error=repr(exc))
            self._roll_next_at = retry_at
            return
        finally:
            self._roll_task = None
        if isinstance(got, Prepared):
            self._roll_ready = got
            self.queue.put(WAKE)
            return
        self._roll_next_at = retry_at
        self._rules_again(got)

    def _rules_again(self, no: NoRoll) -> None:
        """A table whose rules have not changed for a long time pins retention at its old
        ``table_rules`` row (every replay needs the rules in force at its start): journal the
        same rules again, so the floor can pass the old row once a later round opens. The
        table's ``rules_changed`` event says the same hash and version as before."""
        now = self.now_ms()
        for tid in no.pinned:
            table = self.tables.get(tid)
            if table is None or not table.rules.canonical:
                continue  # a table no longer configured keeps its rows: nothing to journal for it
            r = table.rules
            log.info("table rules journaled again so journal retention can roll older rows", table_id=tid,
                     rules_hash=r.rules_hash, software_version=r.software_version, eligible_rows=no.eligible)
            self.submit(tid, RulesChanged(rules=r.canonical, rules_hash=r.rules_hash,
                                         software_version=r.software_version, at=now))

    async def finish(self) -> None:
        """At stop: a segment file being written is let finish (the next roll records or replaces it),
        and the head record takes the last committed row (a clean stop's rows are covered too)."""
        if self._roll_task is not None:
            await asyncio.gather(self._roll_task, return_exceptions=True)
        await asyncio.to_thread(self.record_head)

    def record_head(self) -> bool:
        """Write the journal's head to its head record if it moved (any thread; False: nothing
        written). A failure (a full disk) is logged when it starts and when it stops; the next
        call tries again, and until then start-up compares with the older record."""
        if self.record is None:
            return False
        try:
            wrote = self.record.write(self.journal.head)
        except OSError as exc:
            if not self._record_failing:
                log.warning("journal head record cannot be written: tried again after the next checkpoint",
                            path=str(self.record.path), error=exc.strerror or str(exc))
            self._record_failing = True
            return False
        if self._record_failing:
            log.info("journal head record written again", path=str(self.record.path))
        self._record_failing = False
        return wrote

    async def anchors(self) -> None:
        """Publish the journal's head periodically (when it moved), retained; first, if start-up
        could not, compare the journal with the anchor already retained there (raises
        :class:`~dealer.edge.journal.JournalError`, which stops the service, when the journal is
        behind it: that anchor is never overwritten by a shorter head)."""
        period = self.settings.service.journal_anchor_seconds
        while True:
            if not self.anchor_checked:
                if not self.bus.connected:
                    await self._anchor_wake.wait()  # the broker link is up
                self._anchor_wake.clear()
                await self._check_retained()
                if not self.anchor_checked:  # the broker went again: at the next connection, or soon
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._anchor_wake.wait(), min(period, 5.0))
                    continue
                self.publish_anchor()
            await asyncio.sleep(period)
            self.publish_anchor()

    async def _check_retained(self) -> None:
        from dealer.edge.anchors import retained_anchor

        got = await retained_anchor(self.settings)
        anchor = got.anchor
        if not got.reached:  # compared at the next try
            log.warning("journal not compared with the anchor on the broker yet; no anchor published until it is",
                        reason=got.problem)
            return
        if got.problem is not None:
            log.warning("journal not compared with the anchor on the broker", reason=got.problem)
        if anchor is not None:
            try:
                found = await asyncio.to_thread(_behind, self.settings, anchor)
            except Exception as exc:  # the journal cannot be read now (its database is down): compared again soon
                log.warning("journal not compared with the anchor on the broker yet; no anchor published until it is",
                            reason=" ".join(str(exc).split())[:300])
                return
            if found is not None:
                log.error("journal behind the anchor retained on the broker: stopping, the anchor is not overwritten",
                          reason=found)
                from dealer.edge.journal import JournalError

                raise JournalError(f"{found} (found at the first broker connection; the start could not reach "
                                   "the broker)")
        log.info("journal compared with the anchor on the broker", anchor_row=anchor.row_id if anchor else None)
        self.anchor_checked = True

    def reconnected(self) -> None:
        """The broker link is up: the anchor is published again on every connect."""
        self._anchor_sent = None
        self._anchor_wake.set()
        self.publish_anchor()

    def publish_anchor(self) -> None:
        """The head (row id, hash) retained on ``studio/v1/backends/{node}/journal``: rows cut
        off the journal's end after it are found by ``dealer audit verify --anchor ID:HASH``, and
        a journal behind it is refused at start (dealer/edge/anchors.py)."""
        head = self.journal.head
        if head == self._anchor_sent or head[0] == 0 or not self.bus.connected or not self.anchor_checked:
            return
        node = self.settings.service.node_id
        payload = json.dumps({"node_id": node, "row_id": head[0], "hash": head[1], "anchor": f"{head[0]}:{head[1]}",
                              "journal": str(self.journal.path), "journal_id": self.journal.journal_id,
                              "segments": self.segments, "at": self.now_ms()}, sort_keys=True).encode()

        async def send() -> None:
            # recorded beside the journal first: the record is never behind what the broker holds
            await asyncio.to_thread(self.record_head)
            try:
                await self.bus.publish(topics.backend_journal(node), payload, qos=1, retain=True)
            except BusError as exc:  # the next period (or connect) publishes a newer head
                self.metrics.publish_failures.labels(kind="journal_anchor").inc()
                log.warning("publish dropped", kind="journal_anchor", topic=topics.backend_journal(node),
                            row_id=head[0], reason=str(exc)[:200])
                return
            self._anchor_sent = head

        self.spawn(send())


def _behind(settings: Any, anchor: Any) -> str | None:
    """:func:`dealer.edge.anchors.behind` on a read-only connection of its own (the writer thread
    keeps the service's)."""
    from dealer.edge.anchors import behind
    from dealer.edge.journals import open_read_only, target_of

    journal = open_read_only(target_of(settings))
    try:
        return behind(journal, anchor)
    finally:
        journal.close()
