"""The backend service: drivers at the edge, the pure core in the middle.

:class:`Service` is the composition root: it builds the parts of the service edge, each with
one job, wires them to the bus at :meth:`Service.start` and runs their tasks until
:meth:`Service.stop`. The parts:

- inputs (dealer/edge/inputs.py): commands and scanner inputs are parsed, authorised and
  bounded (the pure rules in dealer/edge/ingress.py) before they reach the core queue
  (dealer/edge/core_queue.py);
- the core loop (dealer/edge/core_loop.py): the one task that owns every
  :class:`~dealer.core.table.Table`, applies events in batches, commits each batch in one
  transaction (group commit, held through a journal outage) and only then releases its
  effects; at start it replays the journal;
- the publisher (dealer/edge/publisher.py): live messages and retained catch-up messages, never
  one that would show a hidden card;
- the outbox relay (dealer/edge/relay.py): results go to settlement until acknowledged;
- the timers (dealer/edge/timers.py): each table's one timer, which submits an event (the core
  never sees a clock);
- link tracking (dealer/edge/links.py): the drivers' link reports, and what a broker connect
  sends again;
- journal maintenance (dealer/edge/maintenance.py): checkpoints, retention and the anchor.

The service itself makes the edge data the core never makes: a round's id, its betting
deadline and its secret random draw (:meth:`Service._opening`), and it hands the house player's
turns to the house player.
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from pydantic import BaseModel

from dealer.core.draws import DRAW_BYTES
from dealer.core.events import Event, OpenRound, Resume, SupervisorOpenRound, SupervisorResume
from dealer.core.messages import PlayerMessage
from dealer.core.operations import OPERATIONS
from dealer.core.round import Rejection, Step
from dealer.core.table import Table
from dealer.edge import ingress, topics
from dealer.edge.catchup import Catchup
from dealer.edge.config import ScannerConfig, Settings, TableConfig
from dealer.edge.house import HouseRunner
from dealer.edge.core_loop import CoreLoop
from dealer.edge.core_queue import CoreQueue, Item
from dealer.edge.inputs import Inputs
from dealer.edge.journal import Batch, Journal
from dealer.edge.keys import read_hex_keys, supervisor_verifier
from dealer.edge.links import LinkTracker, Links, scanner_link
from dealer.edge.maintenance import Maintenance
from dealer.edge.metrics import Metrics
from dealer.edge.publisher import Observer, Publisher
from dealer.edge.relay import OutboxRelay
from dealer.edge.timers import Purpose, Timers
from drivers.bus import Bus, new_instance
from drivers.frames import FrameAuthenticator
from drivers.scan import ScanInput
from drivers.scanner_json import MqttScannerIngest

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


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Service:
    """The backend service of one node: its tables, their journal and the parts that run them
    (see the module docstring). Tests and tools use the tables, links, metrics, journal,
    :meth:`submit` / :meth:`open_round` and the observers; the parts hold the rest."""

    def __init__(self, settings: Settings, *, bus: Bus, journal: Journal | None = None,
                 metrics: Metrics | None = None, clock: Callable[[], int] = wall_ms,
                 broker_link: bool | None = None) -> None:
        # Scanner keys first: a missing or malformed key file stops the service before it opens anything.
        scanner_auth = {t.id: scanner_authenticator(t.scanner) for t in settings.tables}
        supervisors = supervisor_verifier(settings.security)
        self.settings = settings
        self.bus = bus
        self.journal = journal or Journal(settings.service.journal_path, fsync=settings.service.fsync)
        self.metrics = metrics or Metrics()
        self.now_ms = clock
        self.configs: dict[str, TableConfig] = {t.id: t for t in settings.tables}
        # The journal id is in every round id (and so every idempotency key) this journal opens.
        self.tables: dict[str, Table] = {t.id: Table(t.rules(), series=self.journal.journal_id)
                                         for t in settings.tables}
        self.links: dict[str, Links] = {t: Links() for t in self.tables}
        for t in settings.tables:  # series exist from the start, so "no rounds for 10 min" can be seen
            for outcome in ("completed", "cancelled", "voided"):
                self.metrics.rounds.labels(table=t.id, game=t.game, outcome=outcome)
            self.metrics.result_acks_unknown.labels(table=t.id)  # increase() sees the first unknown ack
            for operation in OPERATIONS.values():
                for outcome in ("applied", "refused", "repeat"):
                    self.metrics.table_operations.labels(table=t.id, operation=operation, outcome=outcome)
        self.queue = CoreQueue(self.metrics)
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._tasks: set[asyncio.Task[Any]] = set()  # fire-and-forget tasks (publishes, house moves) until done
        self.house = HouseRunner(self.submit, self.now_ms, mode=settings.service.house_players,
                                 workers=settings.service.house_workers,
                                 games=[t.rules.game for t in self.tables.values()])
        self._bg: list[asyncio.Task[Any]] = []
        self.ready = asyncio.Event()
        # Retained catch-up messages (dealer/edge/catchup.py): the instance (the bus's, whose status
        # names the same session).
        self.instance: str = getattr(bus, "instance", None) or new_instance()
        self.catchup = Catchup(settings.service.node_id, time.time_ns() // 1000)
        # The parts, each with one job; they reach each other through this service.
        self.link_tracker = LinkTracker(self, broker_link=bus.name == "broker" if broker_link is None else broker_link)
        self.publisher = Publisher(self)
        self.relay = OutboxRelay(self)
        self.timers = Timers(self)
        self.inputs = Inputs(self, scanner_auth=scanner_auth, supervisors=supervisors)
        self.core = CoreLoop(self)
        self.maintenance = Maintenance(self)

    # -- public API -------------------------------------------------------------------

    scanner_link = staticmethod(scanner_link)

    def add_observer(self, observer: Observer) -> None:
        self.publisher.observers.append(observer)

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
        self.queue.put(Item(table_id, event, received_ns, fut))
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

    def edge_data(self, tid: str, ev: Any) -> Event:
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
        return self.relay.pending

    @property
    def journal_writable(self) -> bool:
        """False from a failed group commit until its batch commits (dealer/edge/core_loop.py)."""
        return self.core.journal_writable

    @property
    def commit_retry(self) -> tuple[float, float]:
        """A failing group commit is retried after the first many seconds, doubling up to the second."""
        return self.core.commit_retry

    @commit_retry.setter
    def commit_retry(self, value: tuple[float, float]) -> None:
        self.core.commit_retry = value

    @property
    def max_queue(self) -> int:
        """The core queue's cap for droppable items (dealer/edge/core_queue.py)."""
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
        self.core.replay()
        inputs = self.inputs
        for tid in self.tables:
            self.bus.subscribe(topics.actions(tid), inputs.on_command)
            self.bus.subscribe(topics.station(tid), inputs.on_command)
            self.bus.subscribe(topics.supervisor(tid), inputs.on_command)
            self.bus.subscribe(topics.results_ack(tid), self.relay.on_ack)
            if self.configs[tid].scanner.kind == "mqtt":
                self.bus.subscribe(topics.scanner(tid), inputs.scanner_ingest.handle)
        self.bus.on_connection(self.link_tracker.on_bus)
        if not self.link_tracker.broker_link:  # players do not come through a broker here: resume at once
            for tid in sorted(self.timers.resume_due):
                self.submit(tid, Resume(link=None))
            self.timers.resume_due.clear()
        self._bg = [
            asyncio.create_task(self.core.run(), name="core"),
            asyncio.create_task(self.relay.run(), name="outbox"),
            asyncio.create_task(self.bus.run(), name="bus"),
            asyncio.create_task(self.maintenance.checkpoints(), name="wal-checkpoint"),
            asyncio.create_task(self.maintenance.anchors(), name="journal-anchor"),
        ]
        if inputs.scanner_ingest.readers:
            self._bg.append(asyncio.create_task(inputs.scanner_ingest.watchdog(inputs.heartbeat_timeouts()),
                                                name="mqtt-scanner-watchdog"))
        for cfg in self.configs.values():
            if cfg.scanner.kind == "serial":
                self._bg.append(asyncio.create_task(inputs.serial(cfg), name=f"serial-{cfg.id}"))
        self.relay.wake.set()
        # Everything built so far (config, games, pydantic schemas, replayed tables) lives for
        # the whole run: move it out of the collector's way so gen-2 pauses stay short.
        gc.collect()
        gc.freeze()
        self.ready.set()

    async def stop(self) -> None:
        """Stop every task: the core loop, timers and drivers first, then, the bus still up,
        mark the retained catch-up messages stale (nothing can replace them after that), then
        the bus, which says offline."""
        self.publisher.stopping = True
        self.timers.cancel_all()
        self.inputs.cancel_timers()
        first = [t for t in self._bg if t.get_name() != "bus"]
        for task in first:
            task.cancel()
        await asyncio.gather(*first, return_exceptions=True)
        if self._bg:  # started: its retained messages are marked stale
            await self.publisher.retained_stale()
        for task in self._bg:
            task.cancel()
        await asyncio.gather(*self._bg, return_exceptions=True)
        await self.maintenance.finish()
        await self.house.close()
        self.writer.shutdown(wait=True)
        self.journal.close()

    # -- shared by the parts ----------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a fire-and-forget coroutine (a publish), kept referenced until it is done."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def round_id(self, tid: str) -> str | None:
        """The id of the table's current round, if any."""
        cur = self.tables[tid].current
        return cur.round_id if cur is not None else None

    def _refused(self, r: ingress.Refused, at: int) -> None:
        """Count, log and answer a refused command (dealer/edge/inputs.py). Every refusal, at the
        ingress or in the core loop (a reused command id), goes through here."""
        self.inputs.refused(r, at)

    def _publish_soft(self, topic: str, msg: BaseModel, kind: str, latency_from: int = 0) -> bool:
        return self.publisher.publish_soft(topic, msg, kind, latency_from)

    # -- what tests and tools reach for (the parts hold them) ---------------------------------

    @property
    def _writer(self) -> ThreadPoolExecutor:
        return self.writer

    @property
    def _queue(self) -> asyncio.Queue[Item]:
        return self.queue.items

    @property
    def _timers(self) -> dict[str, tuple[Purpose, asyncio.TimerHandle]]:
        return self.timers.armed

    def _schedule(self, tid: str) -> None:
        self.timers.schedule(tid)

    @property
    def _segments(self) -> int:
        return self.maintenance.segments

    @property
    def _serial_links(self) -> list[Any]:
        return self.inputs.serial_links

    @property
    def _scanner_ingest(self) -> MqttScannerIngest:
        return self.inputs.scanner_ingest

    def _on_command(self, topic: str, payload: bytes) -> None:
        self.inputs.on_command(topic, payload)

    _on_action = _on_command  # the player platform's topic was the only command topic once

    def _on_scan_input(self, table_id: str, inp: ScanInput) -> None:
        self.inputs.on_scan_input(table_id, inp)

    def _replay(self) -> None:
        self.core.replay()

    def _apply(self, item: Item, batch: Batch) -> Step:
        return self.core.apply(item, batch)

    def _release(self, item: Item, step: Step) -> None:
        self.core.release(item, step)

    # -- house players ------------------------------------------------------------------

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

