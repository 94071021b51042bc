"""The backend service: drivers at the edge, the pure core in the middle.

One asyncio task (:meth:`Service._core_loop`) owns every :class:`~dealer.core.table.Table`. It
takes events off a queue in batches, applies them to the tables, writes the journal rows
(and outbox rows for results) of the whole batch in one SQLite transaction with one fsync
(group commit) in a writer thread, and only then releases the effects: prompts and round
events are published, results are handed to the outbox relay. The relay publishes each
outbox row at QoS 1 and publishes it again with backoff (and after every broker reconnect)
until settlement acknowledges the result's idempotency key on ``results/ack``; the
acknowledgement becomes a ``result_delivered`` event through the same loop, whose commit
deletes every outbox row of the result. Timers (betting period, decisions, turns, pause
between rounds) are plain loop handles that submit events; the core never sees a clock.
Journaled deadlines are epoch ms; each is turned into an instant on the loop's monotonic
clock once, when first armed (:meth:`Service._mono_deadline`), so a wall-clock step never
fires or stalls a timer. Decision and turn timers are paused while the broker link is down
and, after a restart, until the first broker connect, which submits a journaled
:class:`~dealer.core.events.Resume` that gives every pending decision and turn a new window.
A table a supervisor paused (dealer/core/operations.py, journaled) runs no timer at all and opens
no round until the supervisor's resume, which gives every pending window in full again; a
supervisor's open request becomes an :class:`~dealer.core.events.OpenRound` here, at the edge,
where the round id, the betting deadline and the draw are made.

A group commit that fails (disk full, an SQLite I/O error) never ends the loop: the batch is
already applied to the tables, so the same batch is committed again with backoff until it
goes through, and its effects stay held until then (nothing is published that is not
journaled). Meanwhile the journal counts as unavailable: commands are refused at the edge
(``journal_unavailable``), scanner reads are not taken (the station is told to stop dealing),
no round opens, decision and turn timers pause; the first successful commit queues a journaled
``Resume(link="journal")`` that gives every pending decision and turn a full new window.
Journal retention (dealer/edge/segments.py): a segment file is written beside the writer and
recorded between group commits in the writer thread (:meth:`Service._retention`); the
journal's head is published retained on ``studio/v1/backends/{node}/journal``.

Catching up (dealer/edge/catchup.py): every prompt released is also retained on
``prompts/current``, and after each group commit the state of every table the batch touched
(and of its seated players) is retained on ``state`` and ``players/{p}/state`` when it
changed; all of it again after every broker connect (under the new session), and marked stale
on a clean stop before the status goes offline.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import secrets
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from dealer.core import acks, commands, result_parts, visibility

from dealer.edge import ingress, topics
from dealer.edge.catchup import Catchup
from dealer.edge.house import HouseRunner
from dealer.edge.config import ScannerConfig, Settings, TableConfig
from dealer.core.draws import DRAW_BYTES
from dealer.core.events import (
    ACTION_ADAPTER,
    ActionTimeout,
    ConfirmTimeout,
    CloseBetting,
    DecisionTimeout,
    Event,
    LinkDown,
    LinkUp,
    OpenRound,
    ReadFailed,
    ResultDelivered,
    Resume,
    RulesChanged,
    ScanRead,
    SecurityEvent,
    SupervisorOpenRound,
    SupervisorResume,
)
from dealer.edge.keys import supervisor_verifier
from dealer.edge.journal import Batch, Journal, OutboxRow, ReplayError, result_key
from dealer.edge.journal_health import disk_usage, failure_reason
from dealer.edge.segments import NoRoll, Prepared, prepare_roll
from dealer.edge.keys import read_hex_keys
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.edge.metrics import Metrics
from dealer.core.operations import OPERATIONS, Mode
from dealer.edge.ratelimit import FloodSummary, FloodWindows, TokenBuckets
from dealer.edge.roles import COMMAND_TOPIC
from dealer.core.round import Phase, Rejection, Round, Step
from dealer.games.matgo import AI_PLAYER
from dealer.core.table import BROKER, Table
from drivers.bus import Bus, BusError, new_instance
from drivers.frames import FrameAuthenticator, ReaderSession, ReaderState
from drivers.scan import LinkStatus, ScanInput, ScanKind
from drivers.scanner_json import MqttScannerIngest

log = structlog.get_logger("dealer.edge.service")

Observer = Callable[[str, Any], None]  # (kind, message): kind in event/prompt/result/rejection


_ROUND_OUTCOME = {"round_result": "completed", "round_cancelled": "cancelled", "round_voided": "voided"}

_FAIL_REASON = {
    ScanKind.NOREAD: "noread",
    ScanKind.MISREAD: "misread",
    ScanKind.CORRUPT: "corrupt_frame",
    ScanKind.LOST: "frame_lost",
    ScanKind.FAULT: "device_fault",
    ScanKind.FORGED: "forged_frame",
}


#: Hard cap of the core queue (see :meth:`Service._put_droppable`).
MAX_QUEUE = 100_000

#: A failing group commit is retried after this many seconds, doubling up to the cap.
COMMIT_RETRY = (0.2, 5.0)
#: The ``link`` of the Resume journaled when the journal is writable again.
JOURNAL = "journal"
JOURNAL_UNAVAILABLE = "journal_unavailable"


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


def _name_of(msg: BaseModel) -> str | None:
    """What a live message is, for a log line that must not carry the message itself: a round
    event's ``event``, a prompt's or player message's ``kind``."""
    name = getattr(msg, "event", None) or getattr(msg, "kind", None)
    return str(name) if name is not None else None


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Item:
    table_id: str
    event: Event | SupervisorOpenRound
    received_ns: int = 0
    future: asyncio.Future[Step] | None = None
    cmd: ingress.Accepted | None = None  # a command from the wire: its id and digest
    #: ``time.monotonic()`` when the item was made, next to its event's wall-clock ``at``: the
    #: deadlines this event sets are measured from here (:meth:`Service._mono_deadline`)
    mono: float = field(default_factory=time.monotonic)


#: Queued only to wake the core loop for a reader state that came without a read (a BOOT
#: frame): never applied; the loop writes the pending reader states with its next batch.
_WAKE = _Item("", LinkUp(link="reader-state"))


@dataclass(slots=True)
class _Links:
    """Live link state of one table, as its drivers last reported it (never journaled)."""

    up: dict[str, bool | None] = field(default_factory=dict)  # None: not reported yet
    reason: dict[str, str] = field(default_factory=dict)  # why the last report said down

    @property
    def ready(self) -> bool:
        return all(v is True for v in self.up.values())

    def waiting_for(self) -> str | None:
        """What the table waits for, for its station ("reader SC1: not heard since start"), or None."""
        parts = []
        for link, up in sorted(self.up.items()):
            if up is True:
                continue
            who = f"reader {link.split(':', 1)[1]}" if link.startswith("scanner:") else f"the {link}"
            why = "not heard since start" if up is None else f"down ({self.reason.get(link) or 'no reason given'})"
            parts.append(f"{who}: {why}")
        return "; ".join(parts) or None


class Service:
    def __init__(self, settings: Settings, *, bus: Bus, journal: Journal | None = None,
                 metrics: Metrics | None = None, clock: Callable[[], int] = wall_ms,
                 broker_link: bool | None = None) -> None:
        # Scanner keys first: a missing or malformed key file stops the service before it opens anything.
        self._scanner_auth = {t.id: scanner_authenticator(t.scanner) for t in settings.tables}
        self._supervisors = supervisor_verifier(settings.security)
        self.settings = settings
        self.bus = bus
        self.journal = journal or Journal(settings.service.journal_path, fsync=settings.service.fsync)
        self.metrics = metrics or Metrics()
        self.now_ms = clock
        self.configs: dict[str, TableConfig] = {t.id: t for t in settings.tables}
        # The journal id is in every round id (and so every idempotency key) this journal opens.
        self.tables: dict[str, Table] = {t.id: Table(t.rules(), series=self.journal.journal_id)
                                         for t in settings.tables}
        self.links: dict[str, _Links] = {t: _Links() for t in self.tables}
        for t in settings.tables:  # series exist from the start, so "no rounds for 10 min" can be seen
            for outcome in ("completed", "cancelled", "voided"):
                self.metrics.rounds.labels(table=t.id, game=t.game, outcome=outcome)
            self.metrics.result_acks_unknown.labels(table=t.id)  # increase() sees the first unknown ack
            for operation in OPERATIONS.values():
                for outcome in ("applied", "refused", "repeat"):
                    self.metrics.table_operations.labels(table=t.id, operation=operation, outcome=outcome)
        self._broker_link = bus.name == "broker" if broker_link is None else broker_link
        for tid, cfg in self.configs.items():  # every link's series exists from the start: 0 until heard
            self.links[tid].up[self.scanner_link(cfg)] = None
            self.metrics.link_up.labels(link=self.scanner_link(cfg)).set(0)
            if self._broker_link:
                self.links[tid].up["broker"] = None
                self.metrics.link_up.labels(link=BROKER).set(0)
        self._observers: list[Observer] = []
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._pending: dict[int, OutboxRow] = {}
        self._by_key: dict[str, set[int]] = {}  # result idempotency key -> its pending outbox row ids
        self._inflight: set[int] = set()
        self._oversize_rows: set[int] = set()  # outbox rows over the limit, logged once
        self._sends: dict[int, int] = {}  # publishes of each pending row acknowledged by the broker, this run
        self._due: dict[int, float] = {}  # loop time of each pending row's next publish (absent: now)
        self._reconnect_resend: set[int] = set()  # rows going again because the broker link came back
        self._acking: set[str] = set()  # acknowledged keys whose result_delivered is on its way to the journal
        self._relay_next: float | None = None  # loop time the relay wakes up at by itself (None: only when woken)
        self.metrics.outbox_oldest_age.set_function(self._oldest_age)
        self._outbox_wake = asyncio.Event()
        self._timers: dict[str, tuple[tuple[str, str | None], asyncio.TimerHandle]] = {}
        #: Per table and timer kind: the journaled (wall-clock) deadline last armed and the loop's
        #: monotonic instant computed for it, once; a re-arm for the same deadline reuses it.
        self._mono: dict[tuple[str, str], tuple[int, float]] = {}
        #: Per table, the wall-clock ``at`` of the last event applied and the monotonic time it
        #: was stamped at: a deadline that event set is measured from there, not from the wall
        #: clock when the timer is armed (a step may come in between).
        self._clock_ref: dict[str, tuple[int, float]] = {}
        #: Tables whose pending decisions and turns wait for this run's first broker connect
        #: (a :class:`~dealer.core.events.Resume`): no decision or turn timer runs before it.
        self._resume_due: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.house = HouseRunner(self.submit, self.now_ms, mode=settings.service.house_players,
                                 workers=settings.service.house_workers,
                                 games=[t.rules.game for t in self.tables.values()])
        self._bg: list[asyncio.Task[Any]] = []
        self.ready = asyncio.Event()
        # Signed readers' boot and seq as journaled before this start, and the newer ones that
        # wait for the next group commit (docs/scanner-protocol.md §6.5).
        self._saved_readers = self.journal.reader_states()
        self._reader_states: dict[str, ReaderState] = {}
        self._scanner_ingest = MqttScannerIngest(
            {cfg.scanner.reader_id: tid for tid, cfg in self.configs.items() if cfg.scanner.kind == "mqtt"},
            on_input=self._on_scan_input, on_link=self._on_scan_link, on_bad=self._on_bad_message,
            auth={cfg.scanner.reader_id: self._scanner_auth[tid] for tid, cfg in self.configs.items()},
            on_state=lambda tid, state: self._on_reader_state(state),
        )
        for reader, tid in self._scanner_ingest.readers.items():
            self._restore_reader(tid, self._scanner_ingest.session(reader))
        self._serial_links: list[Any] = []
        self._table_ids = frozenset(self.tables)
        self._security_budget = TokenBuckets(burst=20, per_second=0.5)
        #: per table, its reader's failed reads beyond a burst: summarised once per flood window
        self._floods = {t.id: FloodWindows(t.scanner.flood_burst, t.scanner.flood_window) for t in settings.tables}
        self._flood_timers: dict[str, asyncio.TimerHandle] = {}
        self.max_queue = MAX_QUEUE
        self._queue_full = False  # logged once per overflow
        #: accepted command ids of this run (the journal holds every earlier one)
        self._commands: dict[tuple[str, str, str], commands.StoredCommand] = {}
        #: When set to a list (benchmarks), every scan-to-publish latency is appended in ns.
        self.latency_samples: list[int] | None = None
        #: False from a failed group commit until its batch commits (:meth:`_commit`).
        self.journal_writable = True
        self.commit_retry = COMMIT_RETRY
        self._journal_down_at = 0.0  # loop time of the first failed attempt of the outage
        self._journal_back = False  # the outage just ended: resume and resync after the batch's effects
        self._resync_due = False  # the bus reconnected during the outage: private messages go again
        #: Tables whose Resume(link="journal") is queued but not applied yet: their decision and
        #: turn timers stay paused until it is (the old deadlines passed during the outage).
        self._journal_resume: set[str] = set()
        self.metrics.journal_writable.set(1)
        # Journal retention (dealer/edge/segments.py): a segment prepared beside the writer, waiting
        # for the core loop to record it between group commits; the row id to try again at.
        self._roll_task: asyncio.Task[None] | None = None
        self._roll_ready: Prepared | None = None
        self._roll_next_at = 0
        self._purge_due = True  # rows of a recorded segment left by a crash in the middle of a roll
        recs = self.journal.segment_records()
        self._segments = len(recs)
        self._rolled_upto = recs[-1].last_id if recs else 0
        self.metrics.journal_segment_files.set(self._segments)
        self._anchor_sent: tuple[int, str] | None = None
        # Retained catch-up messages (dealer/edge/catchup.py): the instance (the bus's, whose status
        # names the same session), and the tables whose state waits for the core loop to send it.
        self.instance: str = getattr(bus, "instance", None) or new_instance()
        self.catchup = Catchup(settings.service.node_id, time.time_ns() // 1000)
        self._catchup_due: set[str] = set()
        self._stopping = False  # stop() has begun: the stale marks are the last retained word

    # -- public API -------------------------------------------------------------------

    @staticmethod
    def scanner_link(cfg: TableConfig) -> str:
        return f"scanner:{cfg.scanner.reader_id}"

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def submit(self, table_id: str, event: Event, *, received_ns: int = 0) -> asyncio.Future[Step]:
        """Queue an event for a table; the future resolves to the core's :class:`Step`."""
        fut: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        if table_id not in self.tables:
            reason = f"unknown table {table_id!r} (this backend runs {', '.join(sorted(self.tables))})"
            fut.set_result(Step(False, False, [Rejection(event.type, reason)]))
            self.metrics.rejections.labels(table="unknown", type=event.type).inc()
            log.warning("event rejected", table_id=table_id, type=event.type, reason=reason)
            return fut
        if event.at == 0:
            event = event.model_copy(update={"at": self.now_ms()})
        self._queue.put_nowait(_Item(table_id, event, received_ns, fut))
        return fut

    def open_round(self, table_id: str) -> asyncio.Future[Step]:
        return self.submit(table_id, self._opening(table_id, self.now_ms()))

    def _opening(self, table_id: str, at: int, **signed: Any) -> OpenRound:
        """The table's next round opening at ``at``, with the edge data the core never makes: the
        round id, the betting deadline, and the round's secret random draw from the OS CSPRNG.
        ``signed``: the fields of the supervisor's command that asked for it."""
        table, cfg = self.tables[table_id], self.configs[table_id]
        return OpenRound(round_id=table.next_round_id(), at=at, context=table.memory,
                         betting_closes_at=at + int(cfg.betting_seconds * 1000),
                         draw=secrets.token_hex(DRAW_BYTES), **signed)

    def _edge_data(self, tid: str, ev: Any) -> Event:
        """A supervisor's open request becomes the round's OpenRound; a resume carries the new
        betting deadline (used if the round in play still takes bets). Made when the event is
        applied, so they follow the table as it is then, and journaled, so a replay needs no edge."""
        if isinstance(ev, SupervisorOpenRound):
            signed = ev.model_dump(include={"supervisor", "command_id", "issued_at", "signature", "reason"})
            return self._opening(tid, ev.at, **signed)
        if isinstance(ev, SupervisorResume) and ev.betting_closes_at is None:
            return ev.model_copy(update={
                "betting_closes_at": ev.at + int(self.configs[tid].betting_seconds * 1000)})
        return ev  # type: ignore[no-any-return]

    @property
    def outbox_pending(self) -> int:
        """Results waiting in the outbox (a result in parts is one, whatever its rows)."""
        return len(self._by_key)

    async def run(self) -> None:
        """Replay the journal, start every driver and loop until cancelled (or a task fails).

        The tasks are awaited without ``gather``, whose cancellation would cancel the bus with
        it: :meth:`stop` still needs the broker to mark the retained table state stale."""
        await self.start()
        try:
            done, _ = await asyncio.wait(self._bg, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            await self.stop()

    async def start(self) -> None:
        # Logged here, not when the journal opens: a start refused later in __init__ (a damaged
        # reader state, a key file) or by the runner stays one line on stderr.
        log.info("journal opened", path=self.journal.path, journal_id=self.journal.journal_id,
                 journal_id_source=self.journal.journal_id_source)
        if self.journal.journal_id_source == "migrated":
            log.warning("journal id generated for a journal written before journal ids: its rounds keep their "
                        "ids, new rounds carry the journal id", journal_id=self.journal.journal_id)
        self._replay()
        for tid in self.tables:
            self.bus.subscribe(topics.actions(tid), self._on_command)
            self.bus.subscribe(topics.station(tid), self._on_command)
            self.bus.subscribe(topics.supervisor(tid), self._on_command)
            self.bus.subscribe(topics.results_ack(tid), self._on_ack)
            if self.configs[tid].scanner.kind == "mqtt":
                self.bus.subscribe(topics.scanner(tid), self._scanner_ingest.handle)
        self.bus.on_connection(self._on_bus)
        if not self._broker_link:  # players do not come through a broker here: resume at once
            for tid in sorted(self._resume_due):
                self.submit(tid, Resume(link=None))
            self._resume_due.clear()
        self._bg = [
            asyncio.create_task(self._core_loop(), name="core"),
            asyncio.create_task(self._relay(), name="outbox"),
            asyncio.create_task(self.bus.run(), name="bus"),
            asyncio.create_task(self._checkpoints(), name="wal-checkpoint"),
            asyncio.create_task(self._anchors(), name="journal-anchor"),
        ]
        if self._scanner_ingest.readers:
            self._bg.append(asyncio.create_task(self._scanner_ingest.watchdog(self._heartbeat_timeouts()), name="mqtt-scanner-watchdog"))
        for cfg in self.configs.values():
            if cfg.scanner.kind == "serial":
                self._bg.append(asyncio.create_task(self._serial(cfg), name=f"serial-{cfg.id}"))
        self._outbox_wake.set()
        # Everything built so far (config, games, pydantic schemas, replayed tables) lives for
        # the whole run: move it out of the collector's way so gen-2 pauses stay short.
        gc.collect()
        gc.freeze()
        self.ready.set()

    async def stop(self) -> None:
        """Stop every task: the core loop, timers and drivers first, then, the bus still up,
        mark the retained catch-up messages stale (nothing can replace them after that), then
        the bus, which says offline."""
        self._stopping = True
        for _, handle in self._timers.values():
            handle.cancel()
        for handle in self._flood_timers.values():
            handle.cancel()
        first = [t for t in self._bg if t.get_name() != "bus"]
        for task in first:
            task.cancel()
        await asyncio.gather(*first, return_exceptions=True)
        await self._retained_stale()
        for task in self._bg:
            task.cancel()
        await asyncio.gather(*self._bg, return_exceptions=True)
        if self._roll_task is not None:  # a segment file being written: let it finish (the next roll records or replaces it)
            await asyncio.gather(self._roll_task, return_exceptions=True)
        await self.house.close()
        self._writer.shutdown(wait=True)
        self.journal.close()

    # -- start-up ---------------------------------------------------------------------

    def _replay(self) -> None:
        """Rebuild every table from the journal, under the rules journaled for it (a round keeps
        the rules it opened with), then journal each table's rules from today's configuration if
        their hash or the software version changed: they apply from the next round.

        A journaled event the core refuses (other than the delivery of an older, settled round)
        means the table cannot be rebuilt as it was: :class:`~dealer.edge.journal.ReplayError` names
        the row, and ``dealer run`` refuses to start (exit 2) instead of carrying on."""
        now = self.now_ms()
        for tid, table in self.tables.items():
            n = 0
            for row_id, ev in self.journal.replay_rows(tid):
                try:
                    step = table.handle(ev)
                except Exception as exc:  # a bug or a forged row: never carry on with a half-built table
                    log.error("journal replay failed", table_id=tid, row=row_id, event_type=ev.type, error=repr(exc))
                    raise ReplayError(f"journal {self.journal.path}: replay of table {tid} failed at row {row_id} "
                                      f"({ev.type}): {type(exc).__name__}: {exc}") from exc
                n += 1
                # Replay starts at the oldest undelivered round, so the delivery of an older,
                # already settled round can follow it: nothing to rebuild there.
                if not step.accepted and ev.type != "result_delivered":
                    reason = step.rejection.reason if step.rejection else "refused"
                    log.error("journal replay refused an event", table_id=tid, row=row_id, event_type=ev.type,
                              reason=reason)
                    raise ReplayError(f"journal {self.journal.path}: replay of table {tid} refused row {row_id} "
                                      f"({ev.type}): {reason}")
            # Links that the journal says are down stay down until their driver reports them
            # up: that report is then journaled (LinkUp), so the next replay sees the recovery.
            cur = table.current
            log.info("table restored", table_id=tid, replayed=n, state=table.mode.value,
                     round_id=cur.round_id if cur else None, phase=cur.phase.value if cur else None,
                     position=cur.expected_position if cur else None,
                     round_rules_hash=cur.rules.rules_hash if cur else None)
            self._journal_rules(tid, table, now)
        for row in self.journal.pending():
            self._add_pending(row)
        self.metrics.outbox_pending.set(self.outbox_pending)
        # Deadlines that passed while the backend was down never fire: pending decisions and
        # turns wait for a Resume (the first broker connect of this run), which gives each a
        # full window from then, journaled.
        self._resume_due = set(self.tables)
        for tid, table in self.tables.items():
            self._operating_gauge(tid)
            self._release_prompt(table.prompt_now(now))
            self._schedule(tid)  # private messages go again when the bus connects (_on_bus)

    def _journal_rules(self, tid: str, table: Table, now: int) -> None:
        """Queue a ``table_rules`` event when today's rules or software version differ from the
        last journaled for the table. It is the first item of the core queue, so it is journaled
        (group commit) and in force before any new round can open; a round in play keeps its rules.
        A journal without any rules event (older than them) replays under today's rules."""
        rules = self.configs[tid].rules()
        if table.journaled_rules == (rules.rules_hash, rules.software_version):
            return
        log.info("table rules journaled", table_id=tid, rules_hash=rules.rules_hash,
                 software_version=rules.software_version,
                 previous_hash=table.journaled_rules[0] if table.journaled_rules else None,
                 previous_version=table.journaled_rules[1] if table.journaled_rules else None)
        self._queue.put_nowait(_Item(tid, RulesChanged(rules=rules.canonical, rules_hash=rules.rules_hash,
                                                       software_version=rules.software_version, at=now)))

    def _heartbeat_timeouts(self) -> dict[str, float]:
        return {c.scanner.reader_id: c.scanner.heartbeat_timeout for c in self.configs.values() if c.scanner.kind == "mqtt"}

    async def _checkpoints(self, period: float = 1.0) -> None:
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
                try:
                    usage = await loop.run_in_executor(pool, disk_usage, self.journal.path)
                except OSError as exc:
                    log.warning("journal disk usage unknown", error=str(exc))
                    continue
                self.metrics.journal_bytes.set(usage.journal_bytes)
                self.metrics.journal_disk_free.set(usage.free_bytes)
                self.metrics.journal_disk_size.set(usage.size_bytes)

    # -- the core loop ----------------------------------------------------------------

    async def _core_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty() and len(items) < 1000:
                items.append(self._queue.get_nowait())
            self.metrics.queue_depth.set(self._queue.qsize())
            batch = Batch(readers=self._take_reader_states())
            steps: list[tuple[_Item, Step]] = []
            for item in items:
                if item is _WAKE:
                    continue
                step = self._apply(item, batch)
                steps.append((item, step))
            new_rows = await self._commit(batch) if batch else []
            for oid in batch.delivered:
                self._drop_pending(oid)
            for key in batch.acked:
                for oid in sorted(self._by_key.get(key, ())):
                    self._drop_pending(oid)
                self._acking.discard(key)
                self.metrics.result_acks.labels(table=key.split(":", 1)[0], outcome="applied").inc()
                log.info("result acknowledged by settlement", idempotency_key=key)
            for row in new_rows:
                self._add_pending(row)
            self.metrics.outbox_pending.set(self.outbox_pending)
            if new_rows:
                self._outbox_wake.set()
            touched: set[str] = set()
            for item, step in steps:
                self._release(item, step)
                touched.add(item.table_id)
                if item.future is not None and not item.future.done():
                    item.future.set_result(step)
            if self._journal_back:
                self._journal_back = False
                touched |= set(self.tables)
                self._after_journal_outage()
            for tid in touched:
                self._schedule(tid)
                self._operating_gauge(tid)
            self._catchup_due |= touched
            self._flush_catchup()
            await self._retention(loop)

    # -- journal retention and anchoring ------------------------------------------------

    async def _retention(self, loop: asyncio.AbstractEventLoop) -> None:
        """Between group commits: record a prepared segment (writer thread, one transaction),
        and start preparing the next one when the live journal has grown past
        ``journal_retain_rows + journal_segment_rows`` (cheap: two integers compared)."""
        prepared, self._roll_ready = self._roll_ready, None
        if prepared is not None:
            rec = prepared.record
            try:
                done = await loop.run_in_executor(self._writer, self.journal.finish_roll, prepared)
            except Exception as exc:  # the rows stay live; the next roll tries again
                self.metrics.journal_roll_failures.inc()
                log.error("journal roll failed; rows kept in the live journal", segment=rec.number, error=repr(exc))
                done = False
            if done:
                self._segments, self._rolled_upto = rec.number, rec.last_id
                self.metrics.journal_segments.inc()
                self.metrics.journal_rows_rolled.inc(rec.rows)
                self.metrics.journal_segment_files.set(self._segments)
                log.info("journal segment rolled", segment=rec.number, first_row=rec.first_id, last_row=rec.last_id,
                         rows=rec.rows, anchor_row=rec.anchor_id, path=str(prepared.path))
                self._publish_anchor()
                self._purge_due = True
        elif self._purge_due:  # the rolled rows go a chunk per batch: the writer is never held for long
            try:
                self._purge_due = await loop.run_in_executor(self._writer, self.journal.purge_rolled, 2000) > 0
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
        the rows are below every replay floor, nothing changes them), then wake the core loop."""
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
            self._queue.put_nowait(_WAKE)
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

    async def _anchors(self) -> None:
        """Publish the journal's head periodically (when it moved), retained."""
        while True:
            await asyncio.sleep(self.settings.service.journal_anchor_seconds)
            self._publish_anchor()

    def _publish_anchor(self) -> None:
        """The head (row id, hash) retained on ``studio/v1/backends/{node}/journal``: rows cut
        off the journal's end after it are found by ``dealer audit verify --anchor ID:HASH``."""
        head = self.journal.head
        if head == self._anchor_sent or head[0] == 0 or not self.bus.connected:
            return
        node = self.settings.service.node_id
        payload = json.dumps({"node_id": node, "row_id": head[0], "hash": head[1], "anchor": f"{head[0]}:{head[1]}",
                              "journal": str(self.journal.path), "segments": self._segments,
                              "at": self.now_ms()}, sort_keys=True).encode()

        async def send() -> None:
            try:
                await self.bus.publish(topics.backend_journal(node), payload, qos=1, retain=True)
            except BusError as exc:  # the next period (or connect) publishes a newer head
                self.metrics.publish_failures.labels(kind="journal_anchor").inc()
                log.warning("publish dropped", kind="journal_anchor", topic=topics.backend_journal(node),
                            row_id=head[0], reason=str(exc)[:200])
                return
            self._anchor_sent = head

        task = asyncio.create_task(send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _commit(self, batch: Batch) -> list[OutboxRow]:
        """Commit one batch, retrying the very same batch with backoff until it commits.

        The tables have already applied it, so committing it later keeps memory and journal
        equal; :meth:`Journal.commit` writes all or nothing and keeps its chain head on a
        failure, so a retry gets the same row ids. The caller holds the batch's effects until
        this returns. The first failure marks the journal unavailable (one log line, an alert
        at every table, input refused at the edge); the commit that succeeds ends it."""
        loop = asyncio.get_running_loop()
        delay, cap = self.commit_retry
        attempts = 0
        while True:
            t0 = time.perf_counter()
            try:
                rows = await loop.run_in_executor(self._writer, self.journal.commit, batch)
            except sqlite3.Error as exc:
                attempts += 1
                reason = failure_reason(exc)
                self.metrics.journal_commit_failures.labels(reason=reason).inc()
                if self.journal_writable:
                    self._journal_unavailable(reason, exc, batch)
                await asyncio.sleep(delay)
                delay = min(cap, delay * 2)
                continue
            self.metrics.journal_commit.observe(time.perf_counter() - t0)
            if not self.journal_writable:
                self._journal_writable_again(attempts)
            return rows

    def _journal_unavailable(self, reason: str, exc: sqlite3.Error, batch: Batch) -> None:
        """The first failed attempt of an outage: refuse input from now on, pause the decision
        and turn timers and open no round, alert every table."""
        self.journal_writable = False
        self._journal_down_at = asyncio.get_running_loop().time()
        self.metrics.journal_writable.set(0)
        log.error("journal unwritable: input refused and the batch held until it commits (retrying with backoff)",
                  reason=reason, error=str(exc), journal=self.journal.path, held_rows=len(batch.events),
                  held_results=len(batch.outbox))
        now = self.now_ms()
        for tid in self.tables:
            self._schedule(tid)
            self._release_prompt(self._journal_alert(tid, now))

    def _journal_writable_again(self, attempts: int) -> None:
        self.journal_writable = True
        self._journal_back = True
        self.metrics.journal_writable.set(1)
        log.warning("journal writable again: the held batch is committed, input accepted",
                    failed_attempts=attempts,
                    seconds=round(asyncio.get_running_loop().time() - self._journal_down_at, 1))

    def _journal_alert(self, tid: str, at: int, *, card: bool = False) -> StationPrompt:
        """The station's ALERT while the journal is unavailable. It names no position: the
        table in memory may be one batch ahead of the journal, and that batch is not published."""
        what = ("this card was NOT registered: keep it aside and pass it again when the station asks for it"
                if card else "no card, bet or decision is taken until it can write again; the round stays as it is")
        return StationPrompt(table_id=tid, kind="ALERT", reason=JOURNAL_UNAVAILABLE, at=at,
                             message=f"journal unavailable: stop dealing. The backend cannot write its journal "
                                     f"(disk full or I/O error): {what}")

    def _after_journal_outage(self) -> None:
        """The journal commits again and the held batch's effects are out: queue a
        ``Resume(link="journal")`` per table ahead of everything else, so every pending decision
        and turn gets a full new window from now (journaled, and told to the players as any
        resume), and drop decision and turn timeouts queued meanwhile (the Resume supersedes
        them: nobody is timed out by the outage). Then resync every station, and the players if
        the bus reconnected during the outage (their resync was held)."""
        now = self.now_ms()
        held: list[_Item] = []
        while not self._queue.empty():
            held.append(self._queue.get_nowait())
        stale = [i for i in held if isinstance(i.event, (DecisionTimeout, ActionTimeout, ConfirmTimeout))]
        for tid in sorted(self.tables):
            self._journal_resume.add(tid)
            self._queue.put_nowait(_Item(tid, Resume(link=JOURNAL, reason="journal writable again", at=now)))
        for item in held:
            if not isinstance(item.event, (DecisionTimeout, ActionTimeout, ConfirmTimeout)):
                self._queue.put_nowait(item)
        for item in stale:
            if item.future is not None and not item.future.done():
                item.future.set_result(Step(False, False, [Rejection(item.event.type, "superseded by the resume "
                                                                     "after the journal outage")]))
        if stale:
            log.info("timeouts queued during the journal outage dropped: the resume gives a new window",
                     count=len(stale))
        resync, self._resync_due = self._resync_due, False
        for tid, table in self.tables.items():
            self._release_prompt(table.prompt_now(now))
            if resync:
                self._release_private(table, now, resuming=True)

    def _known_command(self, tid: str, role: str, command_id: str) -> commands.StoredCommand | None:
        stored = self._commands.get((tid, role, command_id))
        return stored if stored is not None else self.journal.command(tid, role, command_id)

    def _apply_command(self, item: _Item, batch: Batch) -> Step | None:
        """A command id seen before: the original answer again (same content) or a refusal
        (other content). A late supervisor command that is not a repeat is refused. None: new."""
        cmd = item.cmd
        assert cmd is not None
        stored = self._known_command(item.table_id, cmd.role.value, cmd.command_id)
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
        self._refused(refusal, item.event.at)
        return Step(False, False, [])

    def _apply(self, item: _Item, batch: Batch) -> Step:
        table = self.tables[item.table_id]
        ev = item.event
        self._clock_ref[item.table_id] = (ev.at, item.mono)
        if isinstance(ev, Resume) and ev.link == JOURNAL:
            self._journal_resume.discard(item.table_id)  # its new windows are armed after this batch
        if item.cmd is not None:
            answered = self._apply_command(item, batch)
            if answered is not None:
                return answered
        ev = self._edge_data(item.table_id, ev)
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
                    self._withheld(topics.results(eff.table_id), payload, "result", eff.round_id)  # money: delivered anyway
                    for msg in self._result_messages(eff):  # one outbox row per message: manifest, then parts
                        batch.outbox.append((msg.key, topics.results(eff.table_id), msg.payload, eff.table_id,
                                             eff.round_id))
            if isinstance(ev, ResultDelivered):
                if ev.idempotency_key is not None:
                    batch.acked.append(ev.idempotency_key)
                elif ev.outbox_id is not None:
                    batch.delivered.append(ev.outbox_id)
        elif isinstance(ev, ResultDelivered) and ev.idempotency_key is not None:
            self._acking.discard(ev.idempotency_key)  # refused by the core (logged as a rejection): rows stay
        operation = OPERATIONS.get(item.event.type)
        if operation is not None:
            self.metrics.table_operations.labels(table=item.table_id, operation=operation,
                                                 outcome="applied" if step.accepted else "refused").inc()
        return step

    def _operating_gauge(self, tid: str) -> None:
        """``dealer_table_operating{table,state}``: 1 for the table's state, 0 for the others."""
        mode = self.tables[tid].mode
        for m in Mode:
            self.metrics.table_operating.labels(table=tid, state=m.value).set(1 if m is mode else 0)

    def _result_messages(self, result: RoundResult) -> list[result_parts.Message]:
        """The result as messages under ``max_message_bytes``: itself, or a manifest plus parts.
        A manifest that cannot fit is kept whole in the outbox (money is never dropped) and the
        relay refuses to send it: logged, counted, and an operator raises the limit."""
        limit = self.settings.service.max_message_bytes
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

    def _release(self, item: _Item, step: Step) -> None:
        tid = item.table_id
        structlog.contextvars.bind_contextvars(table_id=tid, round_id=getattr(item.event, "round_id", None) or (
            self.tables[tid].current.round_id if self.tables[tid].current else None))
        try:
            self._count_scan(tid, item.event, step)
            for eff in step.effects:
                if isinstance(eff, StationPrompt):
                    self._release_prompt(eff)
                elif isinstance(eff, RoundEvent):
                    latency_from = item.received_ns if eff.event == "card_registered" else 0
                    published = self._publish_soft(topics.events(tid), eff, "event", latency_from)
                    outcome = _ROUND_OUTCOME.get(eff.event)
                    if outcome is not None:
                        self.metrics.rounds.labels(table=tid, game=self.configs[tid].game, outcome=outcome).inc()
                    elif eff.event == "player_acted":
                        self.metrics.player_actions.labels(table=tid, action=str(eff.data.get("action")),
                                                           by=str(eff.data.get("by"))).inc()
                    if published:  # a withheld event is not logged either: ops reads the logs
                        log.info(eff.event, **{k: v for k, v in eff.data.items() if k != "card" or v is not None})
                elif isinstance(eff, PlayerMessage):
                    self._deliver_private(tid, eff)
                elif isinstance(eff, RoundResult):
                    self._notify("result", eff)
                elif isinstance(eff, Rejection):
                    self.metrics.rejections.labels(table=tid, type=eff.event_type).inc()
                    log.warning("event rejected", type=eff.event_type, reason=eff.reason)
                    self._notify("rejection", eff)
                    cid = getattr(item.event, "command_id", None)
                    self._publish_soft(topics.events(tid), RoundEvent(
                        table_id=tid, round_id=None, event="rejected", at=item.event.at,
                        data={"type": eff.event_type, "reason": eff.reason} | ({"command_id": cid} if cid else {})),
                        "event")
                    player = getattr(item.event, "player_id", None)
                    if player is not None and player != AI_PLAYER:  # the player who acted hears why, on their own topic
                        self._publish_soft(topics.player(tid, player), PlayerMessage(
                            table_id=tid, round_id=self._round_id(tid), player_id=player, kind="rejected",
                            at=item.event.at, data={"type": eff.event_type, "reason": eff.reason,
                                                    "bet_id": getattr(item.event, "bet_id", None)}
                            | ({"command_id": cid} if cid else {})), "player")
                    if eff.event_type == "scan_read":  # the dealer passed a card no deal expects
                        self._release_prompt(StationPrompt(table_id=tid, kind="REJECTED", reason="not_expected",
                                                           message=f"card ignored: {eff.reason}", at=item.event.at))
            if isinstance(item.event, (LinkUp, LinkDown, Resume)) and not self.tables[tid].in_play:
                self._release_prompt(self.tables[tid].prompt_now(item.event.at))  # what the table waits for now
        finally:
            structlog.contextvars.unbind_contextvars("table_id", "round_id")

    def _round_id(self, tid: str) -> str | None:
        cur = self.tables[tid].current
        return cur.round_id if cur is not None else None

    def _count_scan(self, tid: str, ev: Event, step: Step) -> None:
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

    def _release_prompt(self, prompt: StationPrompt) -> None:
        if prompt.kind == "WAIT" and prompt.round_id is None:  # between rounds: say which link it waits for
            waiting = self.links[prompt.table_id].waiting_for()
            if waiting is not None:
                prompt = prompt.model_copy(update={"message": f"waiting for {waiting}"})
        if prompt.kind == "RESCAN":
            self.metrics.rescans.labels(table=prompt.table_id, reason=prompt.reason or "").inc()
        elif prompt.kind == "ALERT":
            self.metrics.alerts.labels(table=prompt.table_id, reason=prompt.reason or "").inc()
            log.error("supervisor alert", table_id=prompt.table_id, message=prompt.message)
        self._publish_soft(topics.prompts(prompt.table_id), prompt, "prompt")
        if self.bus.connected and not self._stopping:  # else the next connect sends it anyway
            retained = self.catchup.prompt(prompt, self.session)
            if retained is not None:
                self._publish_retained(topics.current_prompt(prompt.table_id), retained, "current_prompt")

    # -- retained catch-up messages (dealer/edge/catchup.py) ----------------------------------------

    @property
    def session(self) -> str:
        """The broker session the retained messages name (the bus's; its status names it too)."""
        return getattr(self.bus, "session", None) or f"{self.instance}.1"

    def _paused(self, tid: str) -> str | None:
        """Why the table's clocks are stopped now (no decision or turn timer runs, no round
        opens), for its retained state; None when they run."""
        ops = self.tables[tid].ops
        if ops.paused:
            return "paused by supervisor" + (f" {ops.by}" if ops.by else "") + (f": {ops.reason}" if ops.reason else "")
        if not self.journal_writable:
            return "journal unavailable"
        if BROKER in self.tables[tid].links_down:
            return "broker link down"
        if tid in self._resume_due or tid in self._journal_resume:
            return "waiting to resume"
        return None

    def _flush_catchup(self) -> None:
        """Send the retained state of the tables due, where it changed. Called by the core loop
        after a batch's commit and effects, so a state never shows what is not journaled."""
        if not self._catchup_due or not self.bus.connected or self._stopping:
            return  # not connected: the next connect marks every table due again
        due, self._catchup_due = self._catchup_due, set()
        now = self.now_ms()
        for tid in sorted(due):
            if tid not in self.tables:
                continue
            for topic, msg in self.catchup.updates(self.tables[tid], session=self.session, at=now,
                                                   paused_reason=self._paused(tid)):
                self._publish_retained(topic, msg, "player_state" if "/players/" in topic else "table_state")

    def _publish_retained(self, topic: str, msg: BaseModel | None, kind: str) -> None:
        """Publish a catch-up message retained (QoS 1); None clears the topic (an empty retained
        payload). Checked against the visibility policy like every message."""
        payload = b""
        if msg is not None:
            text = msg.model_dump_json()
            if self._withheld(topic, text, kind, getattr(msg, "round_id", None)):
                return
            payload = text.encode()
            if len(payload) > self.settings.service.max_message_bytes:
                self.metrics.messages_oversize.labels(kind=kind).inc()
                log.error("message over the limit: not sent", kind=kind, topic=topic, size=len(payload),
                          limit=self.settings.service.max_message_bytes)
                return
        task = asyncio.create_task(self._send_retained(topic, payload, kind))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_retained(self, topic: str, payload: bytes, kind: str) -> None:
        try:
            await self.bus.publish(topic, payload, qos=1, retain=True)
        except BusError:
            self.metrics.publish_failures.labels(kind=kind).inc()

    async def _retained_stale(self, timeout: float = 2.0) -> None:
        """A clean stop: every table's retained prompt, state and player states again, marked
        stale, before the bus says offline (a dead backend's are stale by its last will)."""
        if not self.bus.connected or not self._bg:
            return
        now, session = self.now_ms(), self.session
        sends = []
        for tid in sorted(self.tables):
            for topic, msg in self.catchup.stopped(self.tables[tid], session=session, at=now):
                text = "" if msg is None else msg.model_dump_json()
                if msg is not None and self._withheld(topic, text, "stale", getattr(msg, "round_id", None)):
                    continue
                sends.append(self.bus.publish(topic, text.encode(), qos=1, retain=True))
        try:
            async with asyncio.timeout(timeout):
                results = await asyncio.gather(*sends, return_exceptions=True)
        except TimeoutError:
            log.warning("retained table state not all marked stale before the stop", timeout=timeout)
            return
        failed = sum(1 for r in results if isinstance(r, BaseException))
        if failed:
            log.warning("retained table state not all marked stale before the stop", failed=failed)

    def _notify(self, kind: str, msg: Any) -> None:
        for obs in list(self._observers):
            try:
                obs(kind, msg)
            except Exception:
                log.exception("observer failed")

    def _publish_soft(self, topic: str, msg: BaseModel, kind: str, latency_from: int = 0) -> bool:
        """Publish a prompt or round event now (QoS 1, not durable: stale ones are useless);
        never one that would show its audience a hidden card (False: withheld)."""
        text = msg.model_dump_json()
        if self._withheld(topic, text, kind, getattr(msg, "round_id", None)):
            return False
        payload = text.encode()
        if len(payload) > self.settings.service.max_message_bytes:  # the broker would drop our connection
            self.metrics.messages_oversize.labels(kind=kind).inc()
            log.error("message over the limit: not sent", kind=kind, topic=topic, size=len(payload),
                      limit=self.settings.service.max_message_bytes, name=_name_of(msg),
                      round_id=getattr(msg, "round_id", None))
            return False
        self._notify(kind, msg)
        task = asyncio.create_task(self._publish_task(topic, payload, kind, latency_from,
                                                      getattr(msg, "round_id", None), _name_of(msg)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _withheld(self, topic: str, payload: str, kind: str, round_id: str | None) -> bool:
        """Whether ``payload`` would show the audience of ``topic`` a card of its round that it
        may not see (:func:`dealer.core.visibility.leaks`): counted, and logged once without naming
        the cards. Effects are released after their batch: the round may have moved on, but
        within a round what an audience may see only grows, so nothing legitimate is held."""
        tid, audience = topics.table_of(topic), visibility.audience_of(topic)
        table = self.tables.get(tid) if tid is not None else None
        if table is None or audience is None:
            return False
        rnd = table.current
        if round_id is not None and (rnd is None or rnd.round_id != round_id):
            rnd = table.undelivered.get(round_id)  # an older round (or none: nothing of it to hide any more)
        leaked = visibility.leaks(rnd, audience, payload)
        if not leaked:
            return False
        self.metrics.visibility_blocked.labels(kind=kind).inc()
        log.error("result carries hidden cards; delivered anyway: it settles money" if kind == "result"
                  else "message withheld: it would show hidden cards", kind=kind, topic=topic, audience=audience,
                  round_id=round_id, hidden=len(leaked), positions=visibility.positions_of(rnd, leaked))
        return True

    async def _publish_task(self, topic: str, payload: bytes, kind: str, latency_from: int,
                            round_id: str | None = None, name: str | None = None) -> None:
        try:
            await self.bus.publish(topic, payload, qos=1)
        except BusError as exc:  # live messages are not kept: one line per message dropped, never its payload
            self.metrics.publish_failures.labels(kind=kind).inc()
            log.warning("publish dropped", kind=kind, name=name, topic=topic, round_id=round_id,
                        size=len(payload), reason=str(exc)[:200])
            return
        if latency_from:
            elapsed = time.monotonic_ns() - latency_from
            self.metrics.scan_to_publish.observe(elapsed / 1e9)
            if self.latency_samples is not None:
                self.latency_samples.append(elapsed)

    # -- outbox relay -----------------------------------------------------------------

    def _add_pending(self, row: OutboxRow) -> None:
        self._pending[row.id] = row
        self._by_key.setdefault(result_key(row.key), set()).add(row.id)

    def _drop_pending(self, oid: int) -> None:
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

    def _oldest_age(self) -> float:
        """Seconds since the oldest unacknowledged outbox row was committed (read at scrape
        time, from the metrics thread: the list is copied in one step)."""
        try:
            created = [r.created_at for r in list(self._pending.values())]
        except RuntimeError:  # changed while copied: the next scrape reads it
            return 0.0
        return max(0.0, (self.now_ms() - min(created)) / 1000) if created else 0.0

    async def _relay(self) -> None:
        """Publish every outbox row that is due: at once when new, then again after the resend
        backoff (``service.result_resend_seconds``, doubling up to ``result_resend_max_seconds``)
        and after every broker reconnect, until settlement acknowledges its result."""
        loop = asyncio.get_running_loop()
        svc = self.settings.service
        while True:
            self._outbox_wake.clear()
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
                    if self._refused_oversize(row):
                        continue
                    if self._sends.get(oid):
                        reason = "reconnect" if oid in self._reconnect_resend else "backoff"
                        self.metrics.result_resends.labels(table=row.table_id, reason=reason).inc()
                        log.info("result sent again: settlement has not acknowledged it", key=row.key,
                                 reason=reason, sends=self._sends[oid])
                    self._reconnect_resend.discard(oid)
                    self._inflight.add(oid)
                    task = asyncio.create_task(self._deliver(row, svc.result_resend_seconds,
                                                             svc.result_resend_max_seconds))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            # A timer sets the wake-up event: asyncio.wait_for (3.11) can swallow the task's
            # cancellation when the event is set at the same moment, and stop() would hang.
            self._relay_next = next_due
            timer = loop.call_at(next_due, self._outbox_wake.set) if next_due is not None else None
            try:
                await self._outbox_wake.wait()
            finally:
                if timer is not None:
                    timer.cancel()

    def _refused_oversize(self, row: OutboxRow) -> bool:
        """A row over the limit is never sent (the broker would drop the connection): logged
        and counted once per row and run; it stays in the outbox (raise the limit to send it)."""
        limit = self.settings.service.max_message_bytes
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
        leaves the outbox when settlement acknowledges its result (:meth:`_on_ack`)."""
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
        if self._relay_next is None or due < self._relay_next:
            self._outbox_wake.set()  # the relay's next wake-up is this one (else it comes earlier anyway)

    def _on_ack(self, topic: str, payload: bytes) -> None:
        """Settlement acknowledged a result on ``results/ack``: its ``result_delivered`` goes
        through the core loop, whose commit deletes every outbox row of the result. A repeat
        (already acknowledged) is counted and ignored quietly; an unknown key is counted,
        logged and ignored; a malformed payload is a bad message."""
        tid = topics.table_of(topic) or "unknown"
        verdict = acks.parse_ack(payload)
        if isinstance(verdict, acks.BadAck):
            self._on_bad_message("results_ack", f"table {tid}: {verdict.reason}")
            return
        key = verdict.idempotency_key
        mine = acks.of_table(tid, key)  # another table's key (or a part's) is unknown here
        ids = self._by_key.get(key) if mine else None
        if mine and (key in self._acking or (not ids and self.journal.delivered(tid, key.split(":", 1)[1]))):
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

    # -- links and drivers --------------------------------------------------------------

    def _set_link(self, tid: str, link: str, up: bool, reason: str) -> None:
        links = self.links[tid]
        was = links.up.get(link)
        links.up[link] = up
        links.reason[link] = "" if up else reason
        self.metrics.link_up.labels(link=link).set(1 if up else 0)
        if was == up:
            return
        # a link coming back is good news (info); losing one is a warning
        (log.info if up else log.warning)("link " + ("up" if up else "down"), table_id=tid, link=link, reason=reason)
        ev: Event = LinkUp(link=link) if up else LinkDown(link=link, reason=reason)
        if up and link == BROKER and tid in self._resume_due:  # this run's first connect: resume the table
            self._resume_due.discard(tid)
            ev = Resume()
            log.info("resuming pending decisions and turns after a restart", table_id=tid)
        self.submit(tid, ev)

    def _on_bus(self, up: bool, reason: str) -> None:
        # Tables whose pending decision or turn is about to be resumed (LinkUp after an outage,
        # Resume after a restart): the resume sends it with its new deadline, not the old one.
        resuming = {tid for tid, t in self.tables.items() if tid in self._resume_due or BROKER in t.links_down} \
            if up and self._broker_link else set()
        if self._broker_link:
            for tid in self.tables:
                self._set_link(tid, "broker", up, reason)
        if up:  # every pending result goes again now: the broker may have lost what it had
            self._reconnect_resend = {oid for oid in self._pending if self._sends.get(oid)}
            self._due.clear()
            self._outbox_wake.set()
            self._anchor_sent = None  # published again on every connect
            self._publish_anchor()
            self.catchup.forget()  # every retained message again, under this connection's session
            self._catchup_due |= set(self.tables)
            self._queue.put_nowait(_WAKE)  # the core loop sends the states (after the batch it may hold)
            now = self.now_ms()
            for tid, table in self.tables.items():  # resync every dealer station and player after a (re)connect
                if not self.journal_writable:  # the table may be a held batch ahead: resync when it commits
                    self._resync_due = True
                    self._release_prompt(self._journal_alert(tid, now))
                    continue
                self._release_prompt(table.prompt_now(now))
                self._release_private(table, now, resuming=tid in resuming)
        else:
            self._inflight.clear()

    def _release_private(self, table: Table, now: int, *, resuming: bool = False) -> None:
        """Private messages are live: what a player missed while the broker was down (hole
        cards, a pending decision or turn) is sent again. Clients key them by position/turn.
        ``resuming``: the pending decision or turn is left to the resume, which sends it with
        its new window."""
        for msg in table.private_now(now):
            if resuming and msg.kind in ("decision_required", "your_turn"):
                continue
            self._deliver_private(table.table_id, msg)

    def _deliver_private(self, tid: str, msg: PlayerMessage) -> None:
        """A player's private message goes to their topic; a house player's (the hand says
        which players the house plays) goes to the house runner, never to a topic: its turn is
        decided in a worker process and answered with an ordinary, journaled action."""
        if not self.house.deliver(tid, self.tables[tid].current, msg):
            self._publish_soft(topics.player(tid, msg.player_id), msg, "player")

    def _table_of_reader(self, reader: str) -> str | None:
        for tid, cfg in self.configs.items():
            if cfg.scanner.reader_id == reader:
                return tid
        return None

    def _on_scan_input(self, table_id: str, inp: ScanInput) -> None:
        """A scanner input becomes a ScanRead or a ReadFailed event on the core queue. A valid
        read always goes at once. Failed reads pass the reader's flood limiter
        (:class:`~dealer.edge.ratelimit.FloodWindows`): the first ``flood_burst`` go through as
        ever (a single bad read gets its RESCAN at once); in a flood the rest of each window are
        counted (``dealer_scanner_flood_suppressed``) and journaled as one ``read_failed``
        when the window ends, or just before the next valid read, whichever comes first."""
        at = self.now_ms()
        if not self.journal_writable:
            self._scan_refused(table_id, inp, at)
            return
        received = inp.received_ns or time.monotonic_ns()
        floods, now = self._floods[table_id], asyncio.get_running_loop().time()
        if inp.kind == ScanKind.OK and inp.code is not None:
            ended = floods.due(now) + [s for s in (floods.flush(inp.reader, now),) if s is not None]
            self._flood_summaries(table_id, ended, at)
            self._queue.put_nowait(_Item(table_id, ScanRead(reader=inp.reader, code=inp.code, seq=inp.seq, at=at,
                                                            burn=inp.burn), received))  # never dropped, never delayed
            return
        reason = _FAIL_REASON[inp.kind]
        if inp.kind == ScanKind.FORGED:
            self.metrics.frames_rejected.labels(reader=inp.reader, reason=inp.reason or "unknown").inc()
        passed, ended = floods.admit(inp.reader, reason, now)
        self._flood_summaries(table_id, ended, at)
        if not passed:
            self.metrics.flood_suppressed.labels(reader=inp.reader, kind=reason).inc()
            self._arm_flood_timer(table_id)
            return
        if inp.kind == ScanKind.FORGED:
            self._on_forged(table_id, inp, at)
        self._put_droppable(_Item(table_id, ReadFailed(reader=inp.reader, reason=reason, detail=inp.detail[:120],  # type: ignore[arg-type]
                                                       at=at), received), "scanner_failure")

    def _scan_refused(self, table_id: str, inp: ScanInput, at: int) -> None:
        """A scanner input while the journal is unavailable: not taken (it could not be journaled),
        counted as ``journal_unavailable``; a card read tells the station to stop dealing (the card
        is not registered), a failed read is only counted (a flood must not queue work), a forged
        frame is still alerted."""
        self.metrics.scan_reads.labels(table=table_id, result=JOURNAL_UNAVAILABLE).inc()
        if inp.kind == ScanKind.FORGED:
            self.metrics.frames_rejected.labels(reader=inp.reader, reason=inp.reason or "unknown").inc()
            self._on_forged(table_id, inp, at)
        elif inp.kind == ScanKind.OK:
            log.warning("card read not taken: journal unavailable", table_id=table_id, reader=inp.reader, seq=inp.seq)
            self._release_prompt(self._journal_alert(table_id, at, card=True))

    def _flood_summaries(self, table_id: str, summaries: list[FloodSummary], at: int) -> None:
        """One journaled read_failed per ended flood window, with its count in the detail."""
        for s in summaries:
            detail = s.detail("bad frames" if s.kind == "corrupt_frame" else "failed reads")
            log.warning("scanner flood: failed reads counted, journaled as one", table_id=table_id, reader=s.key,
                        suppressed=s.total, kinds=s.counts, seconds=round(s.ended - s.started, 1))
            if "forged_frame" in s.counts:
                self._on_forged(table_id, ScanInput(s.key, ScanKind.FORGED, detail=detail, reason="flood"), at)
            self._put_droppable(_Item(table_id, ReadFailed(reader=s.key, reason=s.kind, detail=detail[:120], at=at),  # type: ignore[arg-type]
                                      time.monotonic_ns()), "scanner_failure")

    def _arm_flood_timer(self, table_id: str) -> None:
        if table_id in self._flood_timers:
            return
        deadline = self._floods[table_id].next_deadline()
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._flood_timers[table_id] = loop.call_at(deadline, self._flood_timer_fired, table_id)

    def _flood_timer_fired(self, table_id: str) -> None:
        del self._flood_timers[table_id]
        self._flood_summaries(table_id, self._floods[table_id].due(asyncio.get_running_loop().time()), self.now_ms())
        self._arm_flood_timer(table_id)  # a window still open (the timer fired a hair early): once more

    def _put_droppable(self, item: _Item, kind: str) -> None:
        """Queue an item that a flood could produce without end: a scanner's failed read (after
        its flood limiter) or a refused command's security event (after its token bucket).

        The core queue is bounded by :data:`MAX_QUEUE` for these only: beyond the cap they are
        dropped and counted (``dealer_queue_dropped{kind}``), and the log says so once per
        overflow. Everything else goes through ``put_nowait`` unconditionally and is never
        dropped: card reads, accepted commands and internal events (timers, link changes,
        result deliveries, reader-state wakes), since dropping one would lose a card, a bet or
        a delivery; their sources are bounded by the studio itself (a dealer's hands, the
        ingress's size and rate rules, the tables' timers), so the queue stays bounded too."""
        if self._queue.qsize() >= self.max_queue:
            if not self._queue_full:
                self._queue_full = True
                log.error("core queue full: dropping scanner failures and refused commands (counted)",
                          kind=kind, depth=self._queue.qsize(), cap=self.max_queue)
            self.metrics.queue_dropped.labels(kind=kind).inc()
            return
        self._queue_full = False
        self._queue.put_nowait(item)

    def _on_forged(self, table_id: str, inp: ScanInput, at: int) -> None:
        """A scanner frame failed authentication (counted by the caller): alert the supervisor
        now (the round machine, given it as a ``forged_frame`` read failure, asks for a rescan)."""
        log.error("scanner frame failed authentication", table_id=table_id, reader=inp.reader,
                  reason=inp.reason, seq=inp.seq, detail=inp.detail)
        prompt = self.tables[table_id].prompt_now(at)  # keeps the position the deal stays at
        self._release_prompt(prompt.model_copy(update={
            "kind": "ALERT", "reason": "forged_frame", "count": None,
            "message": f"SUPERVISOR: a message from scanner {inp.reader} failed authentication ({inp.detail}); "
                       "it was ignored and registered no card: check the shoe and its cable"}))

    def _on_reader_state(self, state: ReaderState) -> None:
        """A signed reader's frame was accepted and moved its boot or seq. The link reports it
        before the frame's read is queued, and the core loop takes the pending states after it
        has taken its items, so the state is committed with that read (or earlier), never after."""
        if not self._reader_states:
            self._queue.put_nowait(_WAKE)  # a BOOT frame brings no read that would wake the loop
        self._reader_states[state.reader] = state

    def _take_reader_states(self) -> list[ReaderState]:
        states, self._reader_states = self._reader_states, {}
        return list(states.values())

    def _restore_reader(self, table_id: str, session: ReaderSession) -> None:
        """Give a signed reader's new session the boot and seq journaled before this start."""
        state = self._saved_readers.get(session.reader)
        if state is None or session.auth is None:
            return
        if session.restore(state):
            log.info("scanner replay state restored", table_id=table_id, reader=state.reader, boot=state.boot,
                     seq=state.seq)
        else:
            log.warning("scanner replay state not restored: the key that signed its last frame is no longer "
                        "configured (re-keyed reader); its next signed frame sets the boot counter",
                        table_id=table_id, reader=state.reader, boot=state.boot, seq=state.seq)

    def _on_scan_link(self, table_id: str, status: LinkStatus) -> None:
        self._set_link(table_id, f"scanner:{self.configs[table_id].scanner.reader_id}", status.up, status.reason)

    def _on_bad_message(self, kind: str, reason: str) -> None:
        self.metrics.bad_messages.labels(topic_kind=kind).inc()
        log.warning("bad message", kind=kind, reason=reason[:300])

    async def _serial(self, cfg: TableConfig) -> None:
        from drivers.serial_link import SerialScannerLink

        assert cfg.scanner.port is not None
        reader = cfg.scanner.reader_id
        link = SerialScannerLink(
            cfg.scanner.port, baudrate=cfg.scanner.baudrate, expected_reader=reader,
            heartbeat_timeout=cfg.scanner.heartbeat_timeout, protocol=cfg.scanner.protocol,
            on_input=lambda inp: self._on_scan_input(cfg.id, inp),
            on_link=lambda st: self._on_scan_link(cfg.id, st), auth=self._scanner_auth[cfg.id],
            on_state=self._on_reader_state,
            on_notice=lambda n: self.metrics.scanner_notices.labels(reader=reader, kind=n.kind).inc(),
        )
        if link.capabilities.sequence_numbers:  # only such a reader has a journaled boot and seq to restore
            self._restore_reader(cfg.id, link.session(reader))
        self._serial_links.append(link)
        await link.run()

    def _on_command(self, topic: str, payload: bytes) -> None:
        """A command from the player platform, a dealer station or a supervisor: judged by the
        ingress (role, ids, signature, size); what passes goes to the core loop, where a repeat of
        an accepted command id is answered again instead of applied twice."""
        now = self.now_ms()
        verdict = ingress.parse(topic, payload, tables=self._table_ids, now_ms=now, supervisors=self._supervisors)
        if isinstance(verdict, ingress.Accepted) and not self.journal_writable:
            verdict = ingress.Refused(
                verdict.table_id, verdict.role, JOURNAL_UNAVAILABLE,
                "journal unavailable: the backend cannot record commands now (disk full or I/O error); nothing "
                "was applied: send it again later with the same command_id", verdict.event.type,
                verdict.command_id, getattr(verdict.event, "player_id", None),
                getattr(verdict.event, "supervisor", None))
        if isinstance(verdict, ingress.Accepted):
            if verdict.key_index is not None:  # key rotation: when the old key's count stops rising, retire it
                self.metrics.supervisor_key_uses.labels(supervisor=str(getattr(verdict.event, "supervisor")),
                                                        key=str(verdict.key_index + 1)).inc()
            self._queue.put_nowait(_Item(verdict.table_id, verdict.event, time.monotonic_ns(), cmd=verdict))
            return
        self._refused(verdict, now)

    _on_action = _on_command  # the player platform's topic was the only command topic once

    def _refused(self, r: ingress.Refused, at: int) -> None:
        """Count, log and answer a refused command; a security refusal is also journaled and
        alerted (through the core loop, rate-limited per table and role)."""
        tid = r.table_id
        role = r.role.value if r.role is not None else "unknown"
        self.metrics.commands_refused.labels(table=tid or "unknown", role=role, reason=r.kind).inc()
        if r.kind in ("malformed", "too_large") and r.role is not None:
            self.metrics.bad_messages.labels(topic_kind=COMMAND_TOPIC[r.role]).inc()
        rnd = self.tables[tid].current if tid in self.tables else None
        reason = visibility.redact(rnd, r.reason) if rnd is not None else r.reason  # it may echo a hidden card
        log.warning("command refused", table_id=tid, role=role, kind=r.kind, type=r.command_type,
                    command_id=r.command_id, reason=reason[:300])
        if tid is None:
            return
        data = {"type": r.command_type, "reason": reason, "command_id": r.command_id}
        self._publish_soft(topics.events(tid), RoundEvent(table_id=tid, event="rejected", at=at, data=data), "event")
        if r.player_id is not None and r.player_id not in ingress.HOUSE_PLAYERS:
            self._publish_soft(topics.player(tid, r.player_id), PlayerMessage(
                table_id=tid, round_id=self._round_id(tid), player_id=r.player_id, kind="rejected", at=at,
                data=data), "player")
        if r.security:
            self._security_event(tid, r.kind, role, r.reason, r.command_id, r.supervisor, at)

    def _security_event(self, tid: str, kind: str, role: str, detail: str, command_id: str | None,
                        supervisor: str | None, at: int) -> None:
        self.metrics.security_events.labels(table=tid, kind=kind).inc()
        log.error("security event", table_id=tid, kind=kind, role=role, command_id=command_id,
                  supervisor=supervisor, detail=detail[:300])
        if not self._security_budget.take(tid, role, time.monotonic()):
            self.metrics.security_events_unjournaled.labels(table=tid).inc()
            return  # a flood: counted and logged, not one journal row per message
        self._put_droppable(_Item(tid, SecurityEvent(kind=kind, role=role, detail=detail[:300],
                                                     command_id=(command_id or "")[:64] or None,
                                                     supervisor=supervisor, at=at)), "security_event")

    # -- scheduling ---------------------------------------------------------------------

    def _schedule(self, tid: str) -> None:
        """Arm the table's one timer: the betting deadline, or the pause before the next round.

        A timer that is already armed for the same purpose is kept: events that change
        nothing about it (a bet, a rejected scan, a heartbeat-driven link report) must
        not postpone the next round.
        """
        table, cfg = self.tables[tid], self.configs[tid]
        cur = table.current
        want: tuple[str, str | None] | None = None
        if cur is not None and cur.phase == Phase.BETTING_OPEN:
            if cur.betting_closes_at is not None and not table.paused:  # a supervisor's resume renews it
                want = ("close", cur.round_id)
        elif cur is not None and (cur.phase in (Phase.DECISION, Phase.ACTION) or self._windowed(cur)) and (
                BROKER in table.links_down or tid in self._resume_due or not self.journal_writable
                or tid in self._journal_resume or table.paused):
            want = None  # paused while players cannot reach us (or be heard); the resume gives a new window
        elif cur is not None and self._windowed(cur):
            assert cur.confirm_deadline is not None and cur.expected_position is not None
            want = ("window", f"{cur.round_id}:{cur.expected_position}@{cur.confirm_deadline}")
        elif cur is not None and cur.phase == Phase.DECISION:
            want = ("decide", f"{cur.round_id}@{cur.decision_deadline}")
        elif cur is not None and cur.phase == Phase.ACTION:
            want = ("act", f"{cur.round_id}#{cur.turn}@{cur.action_deadline}")
        elif cfg.auto_rounds and self.journal_writable and table.can_open() is None and self.links[tid].ready:
            want = ("open", cur.round_id if cur is not None else None)
        armed = self._timers.get(tid)
        if armed is not None and armed[0] == want:
            return
        if armed is not None:
            armed[1].cancel()
            del self._timers[tid]
        if want is None:
            return
        loop = asyncio.get_running_loop()
        if want[0] == "close":
            assert cur is not None and cur.betting_closes_at is not None
            rid = cur.round_id
            window = cur.betting_closes_at - cur.opened_at
            handle = loop.call_at(self._mono_deadline(tid, "close", cur.betting_closes_at, window), self._timer_fired, tid,
                                  lambda: self.submit(tid, CloseBetting(by="timer", round_id=rid)))
        elif want[0] == "decide":  # the deadline is journaled data
            assert cur is not None and cur.decision_deadline is not None
            handle = loop.call_at(self._mono_deadline(tid, "decide", cur.decision_deadline, cur.rules.decision_ms),
                                  self._timer_fired, tid,
                                  lambda: self.submit(tid, DecisionTimeout()))
        elif want[0] == "act":  # the turn's deadline is journaled data too; the turn number guards a race
            assert cur is not None and cur.action_deadline is not None
            turn = cur.turn
            handle = loop.call_at(self._mono_deadline(tid, "act", cur.action_deadline, cur.rules.action_ms),
                                  self._timer_fired, tid,
                                  lambda: self.submit(tid, ActionTimeout(turn=turn)))
        elif want[0] == "window":  # stud's LAST_CARD: the station's window to report an exposed card
            assert cur is not None and cur.confirm_deadline is not None and cur.expected_position is not None
            step = cur.expected_position
            window = cur.plan[cur.next_index].window_ms
            handle = loop.call_at(self._mono_deadline(tid, "window", cur.confirm_deadline, window), self._timer_fired, tid,
                                  lambda: self.submit(tid, ConfirmTimeout(step=step)))
        else:
            handle = loop.call_later(cfg.pause_seconds, self._timer_fired, tid, lambda: self._auto_open(tid))
        self._timers[tid] = (want, handle)

    @staticmethod
    def _windowed(cur: Round) -> bool:
        """A timed confirmation is open (the station's window before stud's 7th-street betting)."""
        return cur.phase in (Phase.BETTING_CLOSED, Phase.DEALING) and cur.confirm_deadline is not None

    def _mono_deadline(self, tid: str, kind: str, deadline_ms: int, window_ms: int) -> float:
        """The loop's monotonic instant for a journaled deadline (epoch ms).

        The wall clock is read once per deadline, when it is first armed: ``deadline - now``
        becomes an instant on the loop's monotonic clock, kept per table and timer kind, and
        any re-arm for the same deadline reuses it. So a wall-clock step (NTP, an operator)
        after that never fires a timer early nor stalls it: within a run deadlines run on the
        monotonic clock. Across a restart there is no monotonic clock to carry: the deadlines
        of pending decisions and turns are renewed by the start-up Resume instead.

        A deadline is measured from the event that set it (its ``at`` and the monotonic time
        it was stamped at, ``_clock_ref``), so a step between that stamp and the arming (a
        batch waiting for its commit) does not move it either; a deadline older than every
        event of this run (replayed) is measured from the wall clock now, and never lies
        further away than its whole window (``window_ms``): a restart onto a clock stepped back
        (the soak found a betting period stalled for the 165 s of such a step) gives the
        players a full window from now, not the size of the step on top."""
        kept = self._mono.get((tid, kind))
        if kept is not None and kept[0] == deadline_ms:
            return kept[1]
        ref = self._clock_ref.get(tid)
        if ref is not None and ref[0] <= deadline_ms:
            remaining = (deadline_ms - ref[0]) / 1000 - (time.monotonic() - ref[1])
        else:
            remaining = (deadline_ms - self.now_ms()) / 1000
        at = asyncio.get_running_loop().time() + min(max(0.0, remaining), max(0, window_ms) / 1000)
        self._mono[(tid, kind)] = (deadline_ms, at)
        return at

    def _timer_fired(self, tid: str, action: Callable[[], object]) -> None:
        self._timers.pop(tid, None)
        action()

    def _auto_open(self, tid: str) -> None:
        if self.journal_writable and self.tables[tid].can_open() is None and self.links[tid].ready:
            self.open_round(tid)
