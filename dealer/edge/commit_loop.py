"""The commit loop: the one task that applies events to the tables and commits them in groups.

It takes items off the input queue in batches, applies them to the tables, writes the journal
rows (and outbox rows for results) of the whole batch in one SQLite transaction with one fsync
(group commit) in a writer thread, and only then releases the effects: prompts and round
events are published, results are handed to the outbox relay.

A group commit that fails (disk full, an SQLite I/O error) never ends the loop: the batch is
already applied to the tables, so the same batch is committed again with backoff until it
goes through, and its effects stay held until then (nothing is published that is not
journaled). Meanwhile the journal counts as unavailable: commands are refused at the edge
(``journal_unavailable``), scanner reads are not taken (the station is told to stop dealing),
no round opens, decision and turn timers pause; the first successful commit queues a journaled
``Resume(link="journal")`` that gives every pending decision and turn a full new window.

Each table is rebuilt from the journal when the node adopts it, at start or later
(:meth:`CommitLoop.rebuild`, run off the event loop), and tables come and go between batches
(dealer/edge/ownership.py): an item of a table the node no longer owns is answered with a
refusal, never applied. Every batch carries each table's lease epoch; when the journal
refuses a table's rows (:class:`~dealer.edge.journal.Fenced`: another node took it over), the
loop asks the ownership to re-read its leases (which drops the lost tables), takes the lost
tables' rows out of the batch (their effects are never released: their senders get a refusal)
and commits the rest.

A batch emptied that way during an outage (every table of it dropped: its lease ran out while
the database was away, or another node took it) does not end the outage: nothing proves the
journal writable, so the loop goes on committing the empty batch (a probe: the same write
transaction with no rows, which still needs the server, the connection and the write rights)
with the same backoff until one commits; only then is the journal writable again. The lease
manager (dealer/edge/leases.py) watches :meth:`CommitLoop.unwritable_for`: a node that cannot
write for a whole lease gives its tables up to the other nodes, and takes tables again once
this says it can write.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import structlog

from dealer.core import commands, result_parts
from dealer.core.events import (
    ActionTimeout,
    ConfirmTimeout,
    DecisionTimeout,
    ResultDelivered,
    Resume,
    RulesChanged,
    ScanRead,
)
from dealer.core.messages import RoundResult
from dealer.core.operations import OPERATIONS, Mode
from dealer.core.round import Rejection, Step
from dealer.core.table import Table
from dealer.edge import ingress, topics
from dealer.edge.commit_state import CommitState
from dealer.edge.input_queue import NOT_HELD, WAKE, InputQueue, Item
from dealer.edge.journal import Batch, Fenced, JournalWriteFailed, OutboxRow, ReplayError
from dealer.edge.journal_health import failure_reason
from dealer.edge.lookups import Lookups
from dealer.edge.metrics import Metrics
from dealer.edge.openings import edge_data
from dealer.edge.ownership import Ownership
from dealer.edge.refusals import Refusals
from dealer.edge.releaser import Releaser
from dealer.edge.tables import Tables
from dealer.edge.timers import Timers

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service

#: A failing group commit is retried after this many seconds, doubling up to the cap.
COMMIT_RETRY = (0.2, 5.0)
#: The ``link`` of the Resume journaled when the journal is writable again.
JOURNAL = "journal"

#: Timeouts a journal outage supersedes: the Resume after it gives a new window instead.
_TIMEOUTS = (DecisionTimeout, ActionTimeout, ConfirmTimeout)

#: The answer to an item of a table this node no longer owns (dropped, or fenced by the journal).
TABLE_MOVED = "table moved: this node no longer owns it"
#: A table the journal fences although the ownership still says it holds it is dropped after
#: this many fenced commits in a row (never retried for ever).
FENCED_RETRIES = 3


class CommitLoop:
    """Applies queued events to the tables, commits each batch (group commit, held through a
    journal outage) and then hands its effects to the releaser. Owns the journal's availability
    (``state``) and the accepted command ids. Takes its input from the queue; uses the tables,
    the journal (written in the ``writer`` thread; a journal server's lookups through
    ``lookup``), the ownership (each batch's lease epochs), the timers (armed after each batch),
    the refusals (a reused command id) and ``drop`` (a table the journal keeps fencing).
    ``retention``: the SQLite journal's segment rolls, between group commits (None: a server's)."""

    def __init__(self, tables: Tables, queue: InputQueue, journal: Any, ownership: Ownership, metrics: Metrics,
                 state: CommitState, releaser: Releaser, timers: Timers, refusals: Refusals, *,
                 writer: Executor, lookup: Lookups, file_journal: bool, journal_name: str,
                 now_ms: Callable[[], int], max_message_bytes: int,
                 drop: Callable[[str, str], Awaitable[None]],
                 retention: Callable[[asyncio.AbstractEventLoop], Awaitable[None]] | None) -> None:
        self.tables = tables
        self.queue = queue
        self.journal = journal
        self.ownership = ownership
        self.metrics = metrics
        self.state = state
        self.releaser = releaser
        self.timers = timers
        self.refusals = refusals
        self.writer = writer
        self.lookup = lookup
        self.file_journal = file_journal
        self.journal_name = journal_name
        self.now_ms = now_ms
        self.max_message_bytes = max_message_bytes
        self.drop = drop
        self.retention = retention
        self.task: asyncio.Task[None] | None = None  # the loop's own task (:meth:`run`)
        self.commit_retry = COMMIT_RETRY
        self._down_at = 0.0  # loop time of the first failed attempt of the outage
        #: monotonic start of the first attempt of the commit in hand (None: none in hand): a
        #: commit that fails or hangs keeps it until one attempt goes through
        self._writing_since: float | None = None
        self._back = False  # the outage just ended: resume and resync after the batch's effects
        #: accepted command ids of this run (the journal holds every earlier one)
        self._commands: dict[tuple[str, str, str], commands.StoredCommand] = {}
        #: Tables with items in the batch being committed and released (a drop waits for them).
        self.batch_tables: set[str] = set()
        self._failing = False  # the batch's commit failed: a drop need not wait for it (its rows are taken out)
        self._changed = asyncio.Event()  # set (and replaced) whenever batch_tables or _failing change
        self._retry_wake = asyncio.Event()  # a drop cuts the retry backoff short: the batch goes without it
        self._draining = False  # the service stops: finish the batch in hand, take no other
        #: the batch's command ids as a journal server answered them (or why it could not)
        self._looked_up: dict[tuple[str, str, str], commands.StoredCommand | None | JournalWriteFailed] = {}
        #: the table of each delivered outbox id in the batch (a fenced table's are taken out)
        self._delivered_of: dict[int, str] = {}
        self._gauged: dict[str, Mode | None] = {}  # the mode last exported per table (operating_gauge)
        self.metrics.journal_writable.set(1)
        watch = getattr(self.ownership, "watch_journal", None)  # leases: a node that cannot write lets go
        if watch is not None:
            watch(self.unwritable_for)

    @property
    def changed(self) -> asyncio.Event:
        """Set when the batch in hand changes (it is replaced then): a waiter sees the next change."""
        return self._changed

    def unwritable_for(self) -> float:
        """Seconds this node has been trying to write without success: since the first attempt of
        a commit that has failed or not answered yet (a few milliseconds for a commit in flight;
        0.0 with nothing to write). The lease manager gives every table up once it reaches a
        lease, and takes none while it exceeds a renewal period."""
        since = self._writing_since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    # -- start-up ---------------------------------------------------------------------

    def rebuild(self, tid: str) -> Table:
        """The table rebuilt from the journal, under the rules journaled for it (a round keeps
        the rules it opened with). Blocking (journal reads): the service runs it off the event
        loop, in the writer thread, when it adopts the table (at start, or taken over later).

        A journaled event the core refuses (other than the delivery of an older, settled round)
        means the table cannot be rebuilt as it was: :class:`~dealer.edge.journal.ReplayError` names
        the row, and ``dealer run`` refuses to start (exit 2) instead of carrying on."""
        journal = self.journal
        table = Table(self.tables.configs[tid].rules(), series=journal.journal_id)
        n = 0
        for row_id, ev in journal.replay_rows(tid):
            try:
                step = table.handle(ev)
            except Exception as exc:  # a bug or a forged row: never carry on with a half-built table
                log.error("journal replay failed", table_id=tid, row=row_id, event_type=ev.type, error=repr(exc))
                raise ReplayError(f"journal {journal.path}: replay of table {tid} failed at row {row_id} "
                                  f"({ev.type}): {type(exc).__name__}: {exc}") from exc
            n += 1
            # Replay starts at the oldest undelivered round, so the delivery of an older,
            # already settled round can follow it: nothing to rebuild there.
            if not step.accepted and ev.type != "result_delivered":
                reason = step.rejection.reason if step.rejection else "refused"
                log.error("journal replay refused an event", table_id=tid, row=row_id, event_type=ev.type,
                          reason=reason)
                raise ReplayError(f"journal {journal.path}: replay of table {tid} refused row {row_id} "
                                  f"({ev.type}): {reason}")
        # Links that the journal says are down stay down until their driver reports them
        # up: that report is then journaled (LinkUp), so the next replay sees the recovery.
        cur = table.current
        log.info("table restored", table_id=tid, replayed=n, state=table.mode.value,
                 round_id=cur.round_id if cur else None, phase=cur.phase.value if cur else None,
                 position=cur.expected_position if cur else None,
                 round_rules_hash=cur.rules.rules_hash if cur else None)
        return table

    def replay(self) -> None:
        """Rebuild every configured table from the journal into the service, and nothing else
        (no effect, no timer): for tools and tests that read a journal through a service that
        does not run. A running service adopts its tables one by one (:meth:`Service.adopt`)."""
        for tid in self.tables.configs:
            self.tables[tid] = self.rebuild(tid)

    def adopted(self, tid: str, table: Table, now: int) -> None:
        """A rebuilt table joins the loop: its rules are journaled if today's differ, and its
        operating state is exported."""
        self.journal_rules(tid, table, now)
        self.operating_gauge(tid)

    def forget(self, tid: str) -> None:
        """A table left this node: its accepted command ids leave the cache (the next owner may
        accept more; the journal has them all when it comes back)."""
        for k in [k for k in self._commands if k[0] == tid]:
            del self._commands[k]
        self.state.resume_queued.discard(tid)
        self._retry_wake.set()

    def journal_rules(self, tid: str, table: Table, now: int) -> None:
        """Queue a ``table_rules`` event when today's rules or software version differ from the
        last journaled for the table. It is the first item of the input queue, so it is journaled
        (group commit) and in force before any new round can open; a round in play keeps its rules.
        A journal without any rules event (older than them) replays under today's rules."""
        rules = self.tables.configs[tid].rules()
        if table.journaled_rules == (rules.rules_hash, rules.software_version):
            return
        log.info("table rules journaled", table_id=tid, rules_hash=rules.rules_hash,
                 software_version=rules.software_version,
                 previous_hash=table.journaled_rules[0] if table.journaled_rules else None,
                 previous_version=table.journaled_rules[1] if table.journaled_rules else None)
        self.queue.put(Item(tid, RulesChanged(rules=rules.canonical, rules_hash=rules.rules_hash,
                                                  software_version=rules.software_version, at=now)))

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        self.task = asyncio.current_task()
        queue = self.queue.items
        loop = asyncio.get_running_loop()
        while not self._draining:
            items = [await queue.get()]
            while not queue.empty() and len(items) < 1000:
                items.append(queue.get_nowait())
            self.metrics.queue_depth.set(queue.qsize())
            taken_ns = time.monotonic_ns() if self.releaser.tracing else 0
            await self._look_up_commands(items)
            batch = Batch(readers=self.queue.take_reader_states())
            steps: list[tuple[Item, Step]] = []
            self._delivered_of.clear()
            for item in items:
                if item is WAKE:
                    continue
                if not self.tables.owns(item.table_id):
                    self._moved(item)  # the table left between the item's queueing and now
                    continue
                if item.epoch is not None and item.epoch != self.ownership.epoch(item.table_id):
                    self._stale(item)  # it came in under another lease (or none): never applied under this one
                    continue
                if item.table_id not in batch.epochs:
                    # The epoch the rows are made under, fixed now: if the table is dropped and
                    # taken again while this batch waits (a failing or fenced commit), its rows
                    # belong to the old lease and the old in-memory table, and are never written
                    # under the new one (_gone).
                    epoch = self.ownership.epoch(item.table_id)
                    if epoch is not None:
                        batch.epochs[item.table_id] = epoch
                step = self.apply(item, batch)
                steps.append((item, step))
            self._in_batch({item.table_id for item, _ in steps})
            try:
                new_rows = await self.commit(batch, steps) if batch else []
                if taken_ns:  # a benchmark asks where each card's time goes
                    committed_ns = time.monotonic_ns()
                    for item, _step in steps:
                        if item.received_ns and isinstance(item.event, ScanRead):
                            self.releaser.trace(item.received_ns, int(item.mono * 1e9), taken_ns, committed_ns)
                self.releaser.committed(batch, new_rows)
                touched: set[str] = set()
                for item, step in steps:
                    if item.table_id in self.tables:
                        self.releaser.release(item, step)
                        touched.add(item.table_id)
                    if item.future is not None and not item.future.done():
                        item.future.set_result(step)
                if self._back:
                    self._back = False
                    touched |= set(self.tables)
                    self.after_journal_outage()
                touched |= self.releaser.revalidated()  # output held back while a lease was not valid: sent now
                touched &= set(self.tables)
                for tid in touched:
                    self.timers.schedule(tid)
                    self.operating_gauge(tid)
                self.releaser.flush(touched)
            finally:
                self._in_batch(set())
                self._looked_up.clear()
            if self.retention is not None:
                await self.retention(loop)

    def _in_batch(self, tables: set[str], failing: bool = False) -> None:
        self.batch_tables, self._failing = tables, failing
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def settled(self, tid: str) -> None:
        """Wait until the batch in hand no longer holds ``tid``: committed and released, or
        failing (its commit retried: the rows of a table that is leaving are taken out before the
        next attempt). At once when called from the commit loop itself (a drop during a fenced
        commit: the loop takes the table out of the batch when the drop returns), and as soon as
        the table's lease is no longer valid (a commit hanging on a database that stopped
        answering is not waited for: whatever it writes, the next owner replays)."""
        while (tid in self.batch_tables and not self._failing and asyncio.current_task() is not self.task
               and self.ownership.valid(tid)):
            try:
                async with asyncio.timeout(0.1):  # the lease may lapse meanwhile: look again
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def drain(self, task: asyncio.Task[None], timeout: float = 10.0) -> None:
        """Stop the loop after the batch in hand is committed and released (a clean stop: the
        leases can be handed over once nothing of this node is in flight). A batch held by a
        journal outage is not waited for: nothing of it is written, and the next owner replays."""
        self._draining = True
        if self.batch_tables and self.state.writable and not task.done():
            await asyncio.wait({task}, timeout=timeout)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def _stale(self, item: Item) -> None:
        """Refuse an item that came in while the table was held at another epoch (or not held):
        the table was dropped and taken again since, so the item was meant for a table that no
        longer is (see dealer/edge/input_queue.py)."""
        self.metrics.stale_inputs.labels(table=item.table_id).inc()
        log.warning("input from under an earlier lease refused: the table was taken again since",
                    table_id=item.table_id, type=item.event.type, epoch=self.ownership.epoch(item.table_id),
                    queued_under=None if item.epoch == NOT_HELD else item.epoch)
        self._moved(item)

    def _moved(self, item: Item) -> None:
        """Answer an item of a table this node no longer owns: refused, nothing applied, nothing published."""
        if item.future is not None and not item.future.done():
            item.future.set_result(Step(False, False, [Rejection(item.event.type, TABLE_MOVED)]))

    # -- group commit and journal outages ---------------------------------------------------

    async def commit(self, batch: Batch, steps: list[tuple[Item, Step]] | None = None) -> list[OutboxRow]:
        """Commit one batch, retrying the very same batch with backoff until it commits.

        The tables have already applied it, so committing it later keeps memory and journal
        equal; :meth:`Journal.commit` writes all or nothing and keeps its chain head on a
        failure, so a retry gets the same row ids. The caller holds the batch's effects until
        this returns. The first failure marks the journal unavailable (one log line, an alert
        at every table, input refused at the edge); the commit that succeeds ends it.

        Before every attempt the rows of tables that left the node (or whose lease is gone)
        are taken out of the batch and their items answered with a refusal (``steps`` loses
        them: their effects are never released). A fenced commit has the ownership re-read its
        leases (it drops the lost tables) and goes again at once with the rest.

        A batch emptied while the journal is unwritable is committed empty (a probe) until that
        goes through: returning at once would leave the journal unwritable for ever, refusing
        every input of the tables the node takes again (or keeps)."""
        self._writing_since = time.monotonic()
        try:
            return await self._commit_until_written(batch, steps if steps is not None else [])
        finally:
            self._writing_since = None

    async def _commit_until_written(self, batch: Batch, steps: list[tuple[Item, Step]]) -> list[OutboxRow]:
        delay, cap = self.commit_retry
        attempts = 0
        fenced: Counter[str] = Counter()
        while True:
            self._strip(batch, steps, self._gone(batch, steps))
            if not batch and self.state.writable:
                return []
            self._stamp_epochs(batch)
            t0 = time.perf_counter()
            try:
                rows: list[OutboxRow] = await self.journal.commit_async(batch)  # SQLite: in the journal's writer thread
            except Fenced as exc:
                await self._fenced(exc, batch, steps, fenced)
                continue
            except (sqlite3.Error, JournalWriteFailed) as exc:
                attempts += 1
                reason = exc.reason if isinstance(exc, JournalWriteFailed) else failure_reason(exc)
                self.metrics.journal_commit_failures.labels(reason=reason).inc()
                if self.state.writable:
                    self._journal_unavailable(reason, exc, batch)
                self._in_batch(self.batch_tables, failing=True)
                self._retry_wake.clear()
                try:
                    async with asyncio.timeout(delay):
                        await self._retry_wake.wait()  # a table dropped: its rows go out of the batch now
                except TimeoutError:
                    pass
                delay = min(cap, delay * 2)
                continue
            self.metrics.journal_commit.observe(time.perf_counter() - t0)
            if not self.state.writable:
                self._journal_writable_again(attempts, probe=not batch)
            self._in_batch(self.batch_tables)
            return rows

    def _gone(self, batch: Batch, steps: list[tuple[Item, Step]]) -> set[str]:
        """Tables of the batch this node may not write now: left (or leaving), or no longer held."""
        tables = self._tables_of(batch) | {item.table_id for item, _ in steps}
        own = self.ownership
        return {t for t in tables if not self.tables.owns(t) or (e := own.epoch(t)) is None
                or (t in batch.epochs and batch.epochs[t] != e)}

    def _stamp_epochs(self, batch: Batch) -> None:
        """Every table with rows in the batch, with the epoch its rows were made under (fixed when
        its first item was applied; the current one for rows without an item, such as acks)."""
        own = self.ownership
        made = batch.epochs
        batch.epochs = {t: made[t] if t in made else e for t in sorted(self._tables_of(batch))
                        if (e := own.epoch(t)) is not None}

    def _tables_of(self, batch: Batch) -> set[str]:
        tables = {t for t, _r, _e in batch.events} | {o[3] for o in batch.outbox}
        tables |= {c.table_id for c, _ in batch.commands} | {k.split(":", 1)[0] for k in batch.acked}
        tables |= {self._delivered_of[i] for i in batch.delivered if i in self._delivered_of}
        return tables

    async def _fenced(self, exc: Fenced, batch: Batch, steps: list[tuple[Item, Step]], fenced: Counter[str]) -> None:
        """The journal refused the batch: a table's lease is no longer this node's at the epoch it
        wrote. The ownership re-reads the leases and drops the lost tables (through the
        service's drop, inline: this loop is the one waiting); their rows leave the batch."""
        tid = exc.table_id
        self.metrics.journal_fenced.labels(table=tid or "unknown").inc()
        log.warning("journal refused a write: this node no longer holds the table's lease; re-reading the leases",
                    table_id=tid, epoch=self.ownership.epoch(tid) if tid else None, reason=str(exc)[:300])
        self._in_batch(self.batch_tables, failing=True)
        try:
            lost = await self.ownership.check_now()
        except Exception as e:  # the leases cannot be read now: the batch waits, like any failed commit
            log.warning("leases could not be re-read after a fenced write; trying again", error=repr(e)[:300])
            await asyncio.sleep(self.commit_retry[0])
            lost = set()
        if tid is not None and tid not in lost and tid in self._tables_of(batch):
            fenced[tid] += 1
            if fenced[tid] >= FENCED_RETRIES:  # the journal knows better than the ownership's view
                log.error("journal keeps fencing a table this node believes it holds: dropping it", table_id=tid,
                          attempts=fenced[tid])
                await self.drop(tid, "fenced")
        self._in_batch(self.batch_tables)

    def _strip(self, batch: Batch, steps: list[tuple[Item, Step]], lost: set[str]) -> None:
        """Take the rows of ``lost`` tables out of the batch, and their items out of ``steps``,
        each answered with a refusal: nothing of theirs is written, nothing released."""
        if not lost:
            return
        keep = [i for i, (t, _r, _e) in enumerate(batch.events) if t not in lost]
        index = {old: new for new, old in enumerate(keep)}
        batch.events = [batch.events[i] for i in keep]
        batch.commands = [(c, index[i]) for c, i in batch.commands if c.table_id not in lost and i in index]
        batch.outbox = [o for o in batch.outbox if o[3] not in lost]
        batch.acked = [k for k in batch.acked if k.split(":", 1)[0] not in lost]
        batch.delivered = [i for i in batch.delivered if self._delivered_of.get(i) not in lost]
        batch.readers = [r for r in batch.readers if self.tables.reader_table.get(r.reader) not in lost]
        batch.epochs = {t: e for t, e in batch.epochs.items() if t not in lost}
        dropped = [(item, step) for item, step in steps if item.table_id in lost]
        steps[:] = [(item, step) for item, step in steps if item.table_id not in lost]
        for item, _ in dropped:
            self._moved(item)
        self._in_batch(self.batch_tables - lost, self._failing)
        log.warning("rows of tables this node no longer owns taken out of the batch: never written, never released",
                    tables=sorted(lost), items=len(dropped))

    def _journal_unavailable(self, reason: str, exc: Exception, batch: Batch) -> None:
        """The first failed attempt of an outage: refuse input from now on, pause the decision
        and turn timers and open no round, alert every table."""
        self.state.writable = False
        self._down_at = asyncio.get_running_loop().time()
        self.metrics.journal_writable.set(0)
        log.error("journal unwritable: input refused and the batch held until it commits (retrying with backoff)",
                  reason=reason, error=str(exc), journal=self.journal_name, held_rows=len(batch.events),
                  held_results=len(batch.outbox))
        now = self.now_ms()
        for tid in list(self.tables):
            self.timers.schedule(tid)
            self.releaser.journal_alert(tid, now)

    def _journal_writable_again(self, attempts: int, probe: bool) -> None:
        self.state.writable = True
        self._back = True
        self.metrics.journal_writable.set(1)
        log.warning("journal writable again: " + ("an empty commit went through (the held batch's tables had left "
                                                  "this node)" if probe else "the held batch is committed")
                    + ", input accepted", failed_attempts=attempts,
                    seconds=round(asyncio.get_running_loop().time() - self._down_at, 1))
        poke = getattr(self.ownership, "poke", None)
        if poke is not None:  # the lease manager may take tables again now
            poke()

    def after_journal_outage(self) -> None:
        """The journal commits again and the held batch's effects are out: queue a
        ``Resume(link="journal")`` per table ahead of everything else, so every pending decision
        and turn gets a full new window from now (journaled, and told to the players as any
        resume), and drop decision and turn timeouts queued meanwhile (the Resume supersedes
        them: nobody is timed out by the outage). The inputs queued meanwhile follow, stamped
        now: applied now, a window they open (the next player's turn) is whole. Then resync every station, and the players if
        the bus reconnected during the outage (their resync was held)."""
        queue = self.queue.items
        now = self.now_ms()
        held: list[Item] = []
        while not queue.empty():
            held.append(queue.get_nowait())
        stale = [i for i in held if isinstance(i.event, _TIMEOUTS)]
        for tid in sorted(self.tables):
            self.state.resume_queued.add(tid)
            queue.put_nowait(Item(tid, Resume(link=JOURNAL, reason="journal writable again", at=now)))
        mono = time.monotonic()
        for item in held:
            if not isinstance(item.event, _TIMEOUTS):
                queue.put_nowait(_stamped_now(item, now, mono))
        for item in stale:
            if item.future is not None and not item.future.done():
                item.future.set_result(Step(False, False, [Rejection(item.event.type, "superseded by the resume "
                                                                     "after the journal outage")]))
        if stale:
            log.info("timeouts queued during the journal outage dropped: the resume gives a new window",
                     count=len(stale))
        resync, self.state.resync_due = self.state.resync_due, False
        self.releaser.resync(now, private=resync)

    # -- applying one item ------------------------------------------------------------------

    async def _look_up_commands(self, items: list[Item]) -> None:
        """A journal server is asked about the batch's new command ids before the batch is
        applied, off the event loop and within a bound (the SQLite file answers at once, on the
        loop, in :meth:`_known_command`)."""
        if self.file_journal:
            return
        keys = {(i.table_id, i.cmd.role.value, i.cmd.command_id) for i in items if i.cmd is not None}
        keys -= set(self._commands)

        async def one(key: tuple[str, str, str]) -> None:
            try:
                self._looked_up[key] = await self.lookup(self.journal.command, *key)
            except JournalWriteFailed as exc:
                self._looked_up[key] = exc

        await asyncio.gather(*(one(k) for k in sorted(keys)))

    def _known_command(self, tid: str, role: str, command_id: str) -> commands.StoredCommand | None:
        key = (tid, role, command_id)
        stored = self._commands.get(key)
        if stored is not None:
            return stored
        if key in self._looked_up:
            found = self._looked_up[key]
            if isinstance(found, JournalWriteFailed):
                raise found
            return found
        found_now: commands.StoredCommand | None = self.journal.command(tid, role, command_id)
        return found_now

    def _apply_command(self, item: Item, batch: Batch) -> Step | None:
        """A command id seen before: the original answer again (same content) or a refusal
        (other content). A late supervisor command that is not a repeat is refused. None: new."""
        cmd = item.cmd
        assert cmd is not None
        try:
            stored = self._known_command(item.table_id, cmd.role.value, cmd.command_id)
        except JournalWriteFailed as exc:  # the journal server cannot tell now: refuse, never assume "new"
            log.warning("command refused: its id cannot be checked against the journal now", table_id=item.table_id,
                        command_id=cmd.command_id, error=str(exc)[:200])
            return Step(False, False, [Rejection(item.event.type, "journal unavailable: the backend cannot check "
                                                 "this command id now; nothing was applied: send it again later with "
                                                 "the same command_id")])
        if stored is not None and stored.digest == cmd.digest:
            self.metrics.command_repeats.labels(table=item.table_id, role=cmd.role.value).inc()
            if item.event.type in OPERATIONS:
                self.metrics.table_operations.labels(table=item.table_id, operation=OPERATIONS[item.event.type],
                                                    outcome="repeat").inc()
            return Step(True, False, commands.repeat_effects(stored, item.event.at))
        if stored is not None:
            why = (f"command id {cmd.command_id} was already used for another command ({stored.type} in round "
                   f"{stored.answer.get('round_id')}): use a new id for a new command")
            refusal = ingress.Refused(item.table_id, cmd.role, "reused_command_id", why, item.event.type,
                                      cmd.command_id, getattr(item.event, "player_id", None),
                                      getattr(item.event, "supervisor", None))
        elif cmd.late is not None:
            refusal = cmd.late
        else:
            return None
        self.refusals.refuse(refusal, item.event.at)
        return Step(False, False, [])

    def apply(self, item: Item, batch: Batch) -> Step:
        """Apply one item to its table and add what it journals to ``batch``."""
        table = self.tables[item.table_id]
        ev = item.event
        self.timers.stamp(item.table_id, ev.at, item.mono)
        if isinstance(ev, Resume):
            self.state.resume_queued.discard(item.table_id)  # its new windows are armed after this batch
        if item.cmd is not None:
            answered = self._apply_command(item, batch)
            if answered is not None:
                return answered
        ev = edge_data(table, self.tables.configs[item.table_id], ev)
        try:
            step = table.handle(ev)
        except Exception as exc:  # a bug must not take the table down; the event changed nothing we journal
            log.exception("core raised", table_id=item.table_id, event=ev.type)
            return Step(False, False, [Rejection(item.event.type, f"internal error: {exc}")])
        if ev is not item.event and not step.accepted:  # a refused open request is answered as what was sent
            step.effects = [Rejection(item.event.type, e.reason) if isinstance(e, Rejection) else e
                            for e in step.effects]
        if step.journal:
            round_id = None if isinstance(ev, RulesChanged) else (
                getattr(ev, "round_id", None) or (table.current.round_id if table.current else None))
            batch.events.append((item.table_id, round_id, ev))
            if item.cmd is not None and step.accepted:
                stored = commands.StoredCommand(item.table_id, item.cmd.command_id, round_id, item.event.type,
                                                item.cmd.role.value, item.cmd.digest, commands.answer_of(ev, step))
                self._commands[(item.table_id, stored.role, stored.command_id)] = stored
                if len(self._commands) > 100_000:  # bounded: the journal remembers the rest
                    self._commands.pop(next(iter(self._commands)))
                batch.commands.append((stored, len(batch.events) - 1))
            for eff in step.effects:
                if isinstance(eff, RoundResult):
                    payload = eff.model_dump_json()
                    self.releaser.result_made(eff, payload)  # money: delivered anyway
                    for msg in self._result_messages(eff):  # one outbox row per message: manifest, then parts
                        batch.outbox.append((msg.key, topics.results(eff.table_id), msg.payload, eff.table_id,
                                             eff.round_id))
            if isinstance(ev, ResultDelivered):
                if ev.idempotency_key is not None:
                    batch.acked.append(ev.idempotency_key)
                elif ev.outbox_id is not None:
                    batch.delivered.append(ev.outbox_id)
                    self._delivered_of[ev.outbox_id] = item.table_id
        elif isinstance(ev, ResultDelivered) and ev.idempotency_key is not None:
            self.releaser.ack_refused(ev.idempotency_key)  # refused by the core (logged as a rejection): rows stay
        operation = OPERATIONS.get(item.event.type)
        if operation is not None:
            self.metrics.table_operations.labels(table=item.table_id, operation=operation,
                                                outcome="applied" if step.accepted else "refused").inc()
        return step

    def operating_gauge(self, tid: str) -> None:
        """``dealer_table_operating{table,state}``: 1 for the table's state, 0 for the others (all 0:
        the table is not on this node)."""
        table = self.tables.get(tid)
        mode = table.mode if table is not None else None
        if tid in self._gauged and self._gauged[tid] is mode:
            return  # unchanged: called for every table of every batch, so only a change is exported
        self._gauged[tid] = mode
        for m in Mode:
            self.metrics.table_operating.labels(table=tid, state=m.value).set(1 if m is mode else 0)

    def _result_messages(self, result: RoundResult) -> list[result_parts.Message]:
        """The result as messages under ``max_message_bytes``: itself, or a manifest plus parts.
        A manifest that cannot fit is kept whole in the outbox (money is never dropped) and the
        relay refuses to send it: logged, counted, and an operator raises the limit."""
        limit = self.max_message_bytes
        try:
            msgs = result_parts.split_result(result, limit)
        except result_parts.OversizeResult as exc:  # counted by the relay, which refuses the row
            log.error("result over the message limit even without its bet ids; kept in the outbox, not sent",
                      key=result.idempotency_key, limit=limit, reason=str(exc))
            return [result_parts.Message(result.idempotency_key, result.model_dump_json().encode())]
        if len(msgs) > 1:
            log.info("result split into parts", key=result.idempotency_key, parts=len(msgs) - 1,
                     bets=result.accepted_bets.count, limit=limit)
        return msgs


def _stamped_now(item: Item, now: int, mono: float) -> Item:
    """``item``, waiting in the queue through a journal outage, stamped with the instant it is
    applied. The fault soak found why: a stud player's CHECK came in as the journal failed, was
    applied 6 s later with its old stamp, and the next player's turn, measured from that stamp,
    was over before it began: the timer played it."""
    at = getattr(item.event, "at", None)
    if item is WAKE or getattr(item.event, "signature", None) is not None:  # a signed act keeps its own
        return item
    if isinstance(at, int) and 0 < at < now:
        item.event = item.event.model_copy(update={"at": now})
        item.mono = mono
    return item
