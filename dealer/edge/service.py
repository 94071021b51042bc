"""The backend service: drivers at the edge, the pure core in the middle.

:class:`Service` is the composition root: it builds the parts of the service edge, each with
one job and only the collaborators it uses, wires them to the bus at :meth:`Service.start` and
runs their tasks until :meth:`Service.stop`. Input flows one way: inputs -> input queue ->
commit loop -> releaser -> bus. The parts:

- inputs (dealer/edge/inputs.py): commands and scanner inputs are parsed, authorised and
  bounded (the pure rules in dealer/edge/ingress.py) before they reach the input queue
  (dealer/edge/input_queue.py); what is not taken is answered by the refusals
  (dealer/edge/refusals.py);
- the commit loop (dealer/edge/commit_loop.py): the one task that applies events to every
  :class:`~dealer.core.table.Table` in batches, commits each batch in one transaction (group
  commit, held through a journal outage, a fenced table taken out) and only then hands its
  effects to the releaser;
- the releaser (dealer/edge/releaser.py): what a commit lets go out, through the publisher
  (dealer/edge/publisher.py: live and retained messages, never one that would show a hidden
  card), the outbox relay (dealer/edge/relay.py: results go to settlement until acknowledged)
  and the house players (dealer/edge/house.py);
- ownership (dealer/edge/ownership.py): which tables this node runs (dealer/edge/tables.py).
  The service adopts each table it is given (:meth:`Service.adopt`: rebuilt from the journal,
  subscribed, resumed with fair recovery) and drops each it loses (:meth:`Service.drop`), at
  start and at any time after; with SQLite every configured table is adopted at start and never
  dropped;
- the timers (dealer/edge/timers.py): each table's one timer, which submits an event (the core
  never sees a clock); a round's opening carries the edge data the core never makes
  (dealer/edge/openings.py);
- link tracking (dealer/edge/links.py): the drivers' link reports, and the broker's connects;
- journal maintenance (dealer/edge/maintenance.py): checkpoints, retention and the anchor.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
from collections.abc import Callable
from typing import Any

import structlog

from dealer.core.events import Event, Resume
from dealer.core.operations import OPERATIONS
from dealer.core.round import Rejection, Step
from dealer.core.table import Table
from dealer.edge import topics
from dealer.edge.catchup import Catchup
from dealer.edge.commit_loop import TABLE_MOVED, CommitLoop
from dealer.edge.commit_state import CommitState
from dealer.edge.config import ScannerConfig, Settings, TableConfig
from dealer.edge.house import HouseRunner
from dealer.edge.input_queue import WAKE, InputQueue, Item
from dealer.edge.inputs import Inputs
from dealer.edge.journal import ReplayError
from dealer.edge.journal_contract import Journal
from dealer.edge.journals import open_journal
from dealer.edge.keys import read_hex_keys, supervisor_verifier
from dealer.edge.link_state import scanner_link
from dealer.edge.links import LinkTracker
from dealer.edge.lookups import Lookups
from dealer.edge.maintenance import Maintenance
from dealer.edge.metrics import Metrics
from dealer.edge.openings import opening
from dealer.edge.ownership import HANDOVER_REASONS, Ownership, StaticOwnership
from dealer.edge.publisher import Observer, Publisher
from dealer.edge.refusals import Refusals
from dealer.edge.relay import OutboxRelay
from dealer.edge.releaser import Releaser
from dealer.edge.tables import Tables
from dealer.edge.tasks import TaskSet
from dealer.edge.timers import Timers
from drivers.bus import Bus, new_instance
from drivers.frames import FrameAuthenticator

log = structlog.get_logger("dealer.edge.service")  # one logger for every part of the service


def scanner_authenticator(scanner: ScannerConfig) -> FrameAuthenticator | None:
    """The reader's HMAC keys from ``hmac_key_files`` (hex text), or None when it has none.

    A reader with keys always has to sign: the authenticator refuses unsigned frames whatever
    ``require_mac`` says (``false`` with keys is a deployment error, dealer.edge.security).
    Raises ValueError naming the file for an unreadable, malformed or too short key, and
    when ``require_mac`` is set without a key (every frame would be refused)."""
    keys = read_hex_keys(scanner.hmac_key_files, f"scanner {scanner.reader_id}: HMAC key file")
    if not keys:
        if scanner.require_mac:
            raise ValueError(f"scanner {scanner.reader_id}: require_mac is set but hmac_key_files is empty")
        return None
    return FrameAuthenticator(keys, require=True)


def _reason_label(reason: str) -> str:
    """A drop reason's first word, for a metric label ("handover to node-b" -> "handover")."""
    word = re.match(r"[a-z_]+", reason.lower())
    return word.group(0) if word else "other"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Service:
    """The backend service of one node: its tables, their journal and the parts that run them
    (see the module docstring). Tests and tools use the tables, links, metrics, journal,
    :meth:`submit` / :meth:`open_round` and the observers; the parts hold the rest."""

    def __init__(self, settings: Settings, *, bus: Bus, journal: Journal | None = None,
                 metrics: Metrics | None = None, clock: Callable[[], int] = wall_ms,
                 broker_link: bool | None = None, ownership: Ownership | None = None) -> None:
        # Scanner keys first: a missing or malformed key file stops the service before it opens anything.
        scanner_auth = {t.id: scanner_authenticator(t.scanner) for t in settings.tables}
        supervisors = supervisor_verifier(settings.security)
        self.settings = settings
        self.bus = bus
        self.journal = journal or open_journal(settings)
        #: The SQLite file journal: WAL checkpoints, segment rolls and the anchor are its own.
        self.file_journal = self.journal.rolls_segments
        self.metrics = metrics or Metrics()
        self.now_ms = clock
        self.configs: dict[str, TableConfig] = {t.id: t for t in settings.tables}
        #: Which tables this node runs (dealer/edge/ownership.py): every configured one by default.
        self.ownership: Ownership = ownership or StaticOwnership(self.configs)
        #: The tables this node owns now, adopted (:meth:`adopt`) and not dropped (:meth:`drop`).
        #: The journal id is in every round id (and so every idempotency key) this journal opens.
        self.tables = Tables(self.configs, self.ownership, self.metrics)
        self.links = self.tables.links
        self.leaving = self.tables.leaving
        self._adopting: dict[str, bool] = {}  # tables being adopted -> still wanted (a drop meanwhile: False)
        self._dropping: dict[str, asyncio.Event] = {}  # tables being dropped -> set when the drop is done
        self.queue = InputQueue(self.metrics, epoch_of=lambda tid: self.ownership.epoch(tid))
        self.writer = self.journal.writer  # the journal's one writer thread (dealer/edge/journal_writer.py)
        #: A journal server's lookups (a command id, an old acknowledgement) run off the event loop.
        self.lookup = Lookups(self.journal_name)
        self.background = TaskSet()  # fire-and-forget tasks (publishes, house moves) until done
        self.house = HouseRunner(self.submit, self.now_ms, mode=settings.service.house_players,
                                 workers=settings.service.house_workers,
                                 games=[t.rules().game for t in settings.tables])
        self._bg: list[asyncio.Task[Any]] = []
        self._scanners: dict[str, asyncio.Task[None]] = {}  # serial scanner links of the owned tables
        self._failure: asyncio.Future[None] | None = None  # a scanner link task that failed
        self.commit_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.ready = asyncio.Event()
        # Retained catch-up messages (dealer/edge/catchup.py): the instance (the bus's, whose status
        # names the same session).
        self.instance: str = getattr(bus, "instance", None) or new_instance()
        self.catchup = Catchup(settings.service.node_id, time.time_ns() // 1000)
        saved_readers = self.journal.reader_states()  # signed readers' boot and seq as journaled
        # The parts, each with one job, each given what it uses; input flows down the queue to the
        # commit loop, whose committed effects go out through the releaser.
        s, now_ms, spawn = settings.service, self.now_ms, self.background.spawn
        self.state = CommitState()
        self.timers = Timers(self.tables, self.state, now_ms=now_ms, submit=self.submit, open_round=self.open_round)
        self.publisher = Publisher(bus, self.tables, self.metrics, self.catchup, now_ms=now_ms, spawn=spawn,
                                   paused_reason=self.timers.paused_reason, instance=self.instance,
                                   max_message_bytes=s.max_message_bytes)
        self.refusals = Refusals(self.tables, self.metrics, self.publisher, self.queue)
        self.relay = OutboxRelay(bus, self.tables, self.journal, self.metrics, s, file_journal=self.file_journal,
                                 lookup=self.lookup, refusals=self.refusals, now_ms=now_ms, submit=self.submit,
                                 spawn=spawn)
        self.maintenance = Maintenance(self.journal, settings, self.metrics, bus, file_journal=self.file_journal,
                                       writer=self.writer, queue=self.queue, tables=self.tables, now_ms=now_ms,
                                       submit=self.submit, spawn=spawn)
        self.releaser = Releaser(self.tables, self.metrics, self.publisher, self.relay, self.house, self.catchup,
                                 self.queue, self.state, now_ms=now_ms, also_on_connect=self.maintenance.reconnected)
        self.link_tracker = LinkTracker(self.tables, self.metrics, bus,
                                        broker_link=bus.name == "broker" if broker_link is None else broker_link,
                                        resume_due=self.timers.resume_due, submit=self.submit,
                                        on_reconnect=self.releaser.reconnected,
                                        on_disconnect=self.releaser.disconnected)
        self.inputs = Inputs(self.tables, self.queue, self.metrics, self.refusals, self.state, now_ms=now_ms,
                             announce=self.publisher.announce,
                             on_scan_link=self.link_tracker.on_scan_link, saved_readers=saved_readers,
                             scanner_auth=scanner_auth, supervisors=supervisors)
        self.commit_loop = CommitLoop(self.tables, self.queue, self.journal, self.ownership, self.metrics, self.state,
                                      self.releaser, self.timers, self.refusals, writer=self.writer,
                                      lookup=self.lookup, file_journal=self.file_journal,
                                      journal_name=self.journal_name, now_ms=now_ms,
                                      max_message_bytes=s.max_message_bytes, drop=self.drop,
                                      retention=self.maintenance.retention if self.file_journal else None)

    # -- public API -------------------------------------------------------------------

    scanner_link = staticmethod(scanner_link)

    def add_observer(self, observer: Observer) -> None:
        self.publisher.observers.append(observer)

    def submit(self, table_id: str, event: Event, *, received_ns: int = 0) -> asyncio.Future[Step]:
        """Queue an event for a table; the future resolves to the core's :class:`Step`."""
        refused = self._not_here(table_id, event.type)
        if refused is not None:
            return refused
        fut: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        if event.at == 0:
            event = event.model_copy(update={"at": self.now_ms()})
        if isinstance(event, Resume):  # until it is applied, no timer is armed on the old deadlines
            self.state.resume_queued.add(table_id)
        self.queue.put(Item(table_id, event, received_ns, fut))
        return fut

    def open_round(self, table_id: str) -> asyncio.Future[Step]:
        refused = self._not_here(table_id, "open_round")
        if refused is not None:
            return refused
        return self.submit(table_id, opening(self.tables[table_id], self.configs[table_id], self.now_ms()))

    def _not_here(self, table_id: str, event_type: str) -> asyncio.Future[Step] | None:
        """A refusal for an event of a table this node does not run now (unknown, or owned by
        another node), or None."""
        if self.tables.owns(table_id):
            return None
        fut: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        if table_id in self.configs:
            reason, label = TABLE_MOVED, table_id
        else:
            reason, label = f"unknown table {table_id!r} (this backend runs {', '.join(sorted(self.configs))})", "unknown"
        fut.set_result(Step(False, False, [Rejection(event_type, reason)]))
        self.metrics.rejections.labels(table=label, type=event_type).inc()
        log.warning("event rejected", table_id=table_id, type=event_type, reason=reason)
        return fut

    @property
    def outbox_pending(self) -> int:
        """Results waiting in the outbox (a result in parts is one, whatever its rows)."""
        return self.relay.pending

    @property
    def journal_writable(self) -> bool:
        """False from a failed group commit until its batch commits (dealer/edge/commit_loop.py)."""
        return self.state.writable

    @property
    def commit_retry(self) -> tuple[float, float]:
        """A failing group commit is retried after the first many seconds, doubling up to the second."""
        return self.commit_loop.commit_retry

    @commit_retry.setter
    def commit_retry(self, value: tuple[float, float]) -> None:
        self.commit_loop.commit_retry = value

    @property
    def max_queue(self) -> int:
        """The input queue's cap for droppable items (dealer/edge/input_queue.py)."""
        return self.queue.max_queue

    @max_queue.setter
    def max_queue(self, value: int) -> None:
        self.queue.max_queue = value

    @property
    def latency_samples(self) -> list[int] | None:
        """When set to a list (benchmarks), every scan-to-publish latency is appended in ns."""
        return self.publisher.latency_samples

    @latency_samples.setter
    def latency_samples(self, value: list[int] | None) -> None:
        self.publisher.latency_samples = value

    @property
    def session(self) -> str:
        """The broker session the retained messages name (the bus's; its status names it too)."""
        return self.publisher.session

    async def run(self) -> None:
        """Adopt the tables this node owns, start every driver and loop until cancelled (or a
        task fails).

        The tasks are awaited without ``gather``, whose cancellation would cancel the bus with
        it: :meth:`stop` still needs the broker to mark the retained table state stale."""
        await self.start()
        try:
            assert self._failure is not None
            done, _ = await asyncio.wait([*self._bg, self._failure], return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled() and (exc := task.exception()) is not None:
                    raise exc
        finally:
            await self.stop()

    @property
    def journal_name(self) -> str:
        """The journal, for log lines: the SQLite file, or the server (without credentials)."""
        return self.journal.path

    async def start(self) -> None:
        # Logged here, not when the journal opens: a start refused later in __init__ (a damaged
        # reader state, a key file) or by the runner stays one line on stderr.
        source = self.journal.journal_id_source
        log.info("journal opened", path=self.journal_name, journal_id=self.journal.journal_id,
                 journal_id_source=source)
        if source == "migrated":
            log.warning("journal id generated for a journal written before journal ids: its rounds keep their "
                        "ids, new rounds carry the journal id", journal_id=self.journal.journal_id)
        self._failure = asyncio.get_running_loop().create_future()
        self.bus.on_connection(self.link_tracker.on_bus)
        await self.ownership.start()
        for tid, epoch in sorted(self.ownership.held().items()):
            await self.adopt(tid, epoch, reason="start")
        inputs = self.inputs
        self.commit_task = asyncio.create_task(self.commit_loop.run(), name="core")
        self._bg = [
            self.commit_task,
            asyncio.create_task(self.relay.run(), name="outbox"),
            asyncio.create_task(self.bus.run(), name="bus"),
            asyncio.create_task(self.ownership.run(self.adopt, self.drop, self.tables.idle), name="ownership"),
            asyncio.create_task(self._revalidate(), name="revalidate"),
        ]
        self._bg.append(asyncio.create_task(self.maintenance.anchors(), name="journal-anchor"))
        if self.file_journal:
            self._bg.append(asyncio.create_task(self.maintenance.checkpoints(), name="wal-checkpoint"))
        if inputs.scanner_ingest.readers:
            self._bg.append(asyncio.create_task(inputs.scanner_ingest.watchdog(inputs.heartbeat_timeouts()),
                                                name="mqtt-scanner-watchdog"))
        self.relay.wake.set()
        # Everything built so far (config, games, pydantic schemas, replayed tables) lives for
        # the whole run: move it out of the collector's way so gen-2 pauses stay short.
        gc.collect()
        gc.freeze()
        self.ready.set()

    async def stop(self) -> None:
        """Stop taking input and adopting tables, let the batch in hand commit and release, then,
        the bus still up, mark the retained catch-up messages stale (nothing can replace them
        after that), hand the tables over (:meth:`Ownership.release_all`: other nodes take them
        at once), and stop the bus, which says offline."""
        self._stopping = True
        self.timers.cancel_all()
        self.inputs.cancel_timers()
        ownership = [t for t in self._bg if t.get_name() == "ownership"]
        for task in ownership:  # no table adopted or dropped from now on
            task.cancel()
        await asyncio.gather(*ownership, return_exceptions=True)
        self.publisher.stopping = True
        if self.commit_task is not None:
            await self.commit_loop.drain(self.commit_task)
        first = [t for t in [*self._bg, *self._scanners.values()] if t.get_name() != "bus"]
        for task in first:
            task.cancel()
        await asyncio.gather(*first, return_exceptions=True)
        if self._bg:  # started: its retained messages are marked stale, then its tables handed over
            await self.publisher.retained_stale()
            await self._release_tables()
        for task in self._bg:
            task.cancel()
        await asyncio.gather(*self._bg, return_exceptions=True)
        await self.maintenance.finish()
        await self.house.close()
        self.writer.shutdown(wait=True)
        self.lookup.close()  # one stuck on a silent database is left behind
        await self.journal.close_async()  # the journal server's async pool needs its loop

    async def _release_tables(self, timeout: float = 5.0) -> None:
        """SIGTERM: every lease is handed over now, not when it expires (failover at once)."""
        try:
            async with asyncio.timeout(timeout):
                await self.ownership.release_all()
        except Exception as exc:  # the leases expire by themselves: the tables move within the lease time
            log.warning("tables not handed over at stop; they move when their leases expire", error=repr(exc)[:300])

    # -- the tables this node owns (dealer/edge/ownership.py) ---------------------------------

    def idle(self, tid: str) -> bool:
        """Whether a table is between rounds (asked while its handover waits: :meth:`Tables.idle`)."""
        return self.tables.idle(tid)

    def round_id(self, tid: str) -> str | None:
        """The id of the table's current round, if any."""
        return self.tables.round_id(tid)

    async def _revalidate(self, period: float = 0.25) -> None:
        """Wake the commit loop when a table's held-back output may go again (nothing else may)."""
        while True:
            await asyncio.sleep(period)
            if self.tables.held_back():
                self.queue.put(WAKE)

    async def adopt(self, tid: str, epoch: int, reason: str = "lease") -> None:
        """This node now owns table ``tid`` (at ``epoch``): rebuild it from the journal (off the
        event loop), journal its rules if they changed, take its input, hand its pending results
        to the relay, publish its prompt and catch-up state, and resume it fairly: every pending
        decision, turn or confirmation window gets a whole new window (a journaled Resume, as
        after a restart): nobody is timed out by the move. Idempotent; a table dropped while it
        was being rebuilt is not adopted."""
        dropping = self._dropping.get(tid)
        if dropping is not None:  # taken again while its drop still runs: adopt it once the drop is done
            await dropping.wait()
        if tid in self.tables or tid in self._adopting or self._stopping:
            return
        cfg = self.configs.get(tid)
        if cfg is None:
            log.error("table not adopted: it is not in this node's configuration", table_id=tid, epoch=epoch)
            return
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        self._adopting[tid] = True
        try:
            self._journal_forget(tid)  # the chain head as the previous owner left it, read again
            table = await loop.run_in_executor(self.writer, self.commit_loop.rebuild, tid)
            rows = await loop.run_in_executor(self.writer, self.journal.pending, [tid])
            reader = await loop.run_in_executor(self.writer, self._reader_state, cfg.scanner.reader_id)
        except ReplayError:
            # At start `dealer run` refuses to start (exit 2); later the lease manager releases the
            # lease and tries again after a backoff (the table is never dealt half-built).
            log.error("table not adopted: its journal cannot be replayed", table_id=tid, epoch=epoch)
            raise
        finally:
            wanted = self._adopting.pop(tid, False)
        if not wanted or self._stopping or self.ownership.epoch(tid) is None:
            log.info("table not adopted: it left this node while it was being rebuilt", table_id=tid)
            return
        # From here on nothing awaits: the table joins whole, between two batches of the commit loop.
        now = self.now_ms()
        self.tables[tid] = table
        self.leaving.discard(tid)
        self.tables.suppressed.discard(tid)
        self._table_series(cfg)
        self.catchup.adopt(tid, time.time_ns() // 1000)
        self.inputs.adopt(tid, reader)
        self.commit_loop.adopted(tid, table, now)
        for pattern, handler in self._table_topics(cfg):
            self.bus.subscribe(pattern, handler)
        for row in rows:
            self.relay.add(row)
        self.metrics.outbox_pending.set(self.relay.pending)
        self.relay.wake.set()
        resume = "backend restarted" if reason == "start" else f"table taken over by node {self.settings.service.node_id}"
        self.link_tracker.adopt(tid, resume)
        self.publisher.release_prompt(table.prompt_now(now))
        if self.bus.connected and self.link_tracker.broker_link and reason != "start":
            self.releaser.release_private(table, now, resuming=True)  # hole cards again; the Resume sends decisions
        self.publisher.catchup_due.add(tid)
        self.queue.put(WAKE)
        self.timers.schedule(tid)
        if cfg.scanner.kind == "serial":
            task = asyncio.create_task(self.inputs.serial(cfg), name=f"serial-{tid}")
            task.add_done_callback(self._scanner_done)
            self._scanners[tid] = task
        self.metrics.table_owned.labels(table=tid).set(1)
        self.metrics.table_moves.labels(direction="adopted", reason=reason).inc()
        cur = table.current
        log.info("table adopted", table_id=tid, epoch=epoch, reason=reason, state=table.mode.value,
                 round_id=cur.round_id if cur else None, phase=cur.phase.value if cur else None,
                 position=cur.expected_position if cur else None, pending_results=len(rows),
                 seconds=round(loop.time() - t0, 3))

    async def drop(self, tid: str, reason: str) -> None:
        """This node no longer owns table ``tid``: take no more input for it (items still queued
        are refused: "table moved"), let the batch in hand commit (or take the table out of it
        when it cannot), cancel its timers, forget its results and its state, and publish nothing
        more for it: its retained messages are the next owner's to write. On a clean handover,
        with the lease still valid, its retained catch-up state is marked stale first."""
        if tid in self._adopting:
            self._adopting[tid] = False  # adopt() sees it when its rebuild returns
            return
        table = self.tables.get(tid)
        if table is None or tid in self.leaving:
            return
        self.leaving.add(tid)
        done = self._dropping[tid] = asyncio.Event()
        try:
            await self._drop(tid, table, reason)
        finally:
            del self._dropping[tid]
            done.set()

    async def _drop(self, tid: str, table: Table, reason: str) -> None:
        self.commit_loop.forget(tid)  # a commit waiting to retry goes without the table at once
        handover = reason.startswith(HANDOVER_REASONS) and self.ownership.valid(tid)
        cfg = self.configs[tid]
        for pattern, _ in self._table_topics(cfg):
            self.bus.unsubscribe(pattern)
        scanner = self._scanners.pop(tid, None)
        if scanner is not None:
            scanner.cancel()
        await self.commit_loop.settled(tid)
        if handover and not self._stopping:
            await self.publisher.retained_stale([tid])
        await self.publisher.sent(tid)  # none of ours lands after the next owner's (a retained state would stay)
        if self.tables.get(tid) is not table:
            return  # dropped meanwhile
        self.timers.forget(tid)
        self.inputs.forget(tid)
        self.relay.forget_table(tid)
        try:  # the table's reader is another node's now: a join must not find it here
            self.metrics.table_reader.remove(tid, cfg.scanner.reader_id, cfg.game)
        except KeyError:
            pass
        self._journal_forget(tid)
        self.house.forget(tid)
        self.commit_loop.forget(tid)
        self.catchup.drop(tid)
        self.publisher.catchup_due.discard(tid)
        self.tables.suppressed.discard(tid)
        self.tables.round_holds.pop(tid, None)
        del self.tables[tid]
        self.leaving.discard(tid)
        self.commit_loop.operating_gauge(tid)
        self.metrics.table_owned.labels(table=tid).set(0)
        self.metrics.table_moves.labels(direction="dropped", reason=_reason_label(reason)).inc()
        self.metrics.outbox_pending.set(self.relay.pending)
        if scanner is not None:
            await asyncio.gather(scanner, return_exceptions=True)
        cur = table.current
        log.info("table dropped", table_id=tid, reason=reason, handover=handover,
                 round_id=cur.round_id if cur else None, phase=cur.phase.value if cur else None,
                 position=cur.expected_position if cur else None)

    def _journal_forget(self, tid: str) -> None:
        """A journal server keeps each table's chain head in memory: forgotten when the table
        moves, so a table that comes back continues the chain its other owner wrote."""
        self.journal.forget_table(tid)

    def _reader_state(self, reader: str) -> Any:
        """The journaled boot and seq of a table's signed reader (writer thread)."""
        return self.journal.reader_states().get(reader)

    def _table_topics(self, cfg: TableConfig) -> list[tuple[str, Callable[[str, bytes], None]]]:
        """The topics a table's input comes on, with their handlers."""
        tid, inputs = cfg.id, self.inputs
        out: list[tuple[str, Callable[[str, bytes], None]]] = [(topics.actions(tid), inputs.on_command), (topics.station(tid), inputs.on_command),
               (topics.supervisor(tid), inputs.on_command), (topics.results_ack(tid), self.relay.on_ack)]
        if cfg.scanner.kind == "mqtt":
            out.append((topics.scanner(tid), inputs.scanner_ingest.handle))
        return out

    def _table_series(self, t: TableConfig) -> None:
        """A table's metric series exist from its adoption, so "no rounds for 10 min" can be seen."""
        self.metrics.table_reader.labels(table=t.id, reader=t.scanner.reader_id, game=t.game).set(1)
        for outcome in ("completed", "cancelled", "voided"):
            self.metrics.rounds.labels(table=t.id, game=t.game, outcome=outcome)
        self.metrics.result_acks_unknown.labels(table=t.id)  # increase() sees the first unknown ack
        for operation in OPERATIONS.values():
            for outcome in ("applied", "refused", "repeat"):
                self.metrics.table_operations.labels(table=t.id, operation=operation, outcome=outcome)

    def _scanner_done(self, task: asyncio.Task[None]) -> None:
        """A serial scanner link ended by itself with an error: the service stops (as before tables moved)."""
        if task.cancelled() or (exc := task.exception()) is None:
            return
        if self._failure is not None and not self._failure.done():
            self._failure.set_exception(exc)
