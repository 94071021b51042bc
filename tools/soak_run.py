"""The single-node soak's run (``dealer soak``, see :mod:`tools.soak`): one backend process
from a TOML config (:func:`write_config`), its tables' PTY readers and virtual dealers, the
players and the settlement consumer; its faults come from :mod:`tools.soak_faults`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from dealer.edge import topics
from dealer.edge.journal import Journal, JournalError
from dealer.edge.segments import AuditReport, parse_anchor, segment_dir, verify
from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.feed import events_of, prompts_of
from simulators.pty_port import PtyPort
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink, StationScreen, VirtualDealer
from tools.soak_games import TURN_GAMES, TableSpec, table_specs
from tools.soak_judge import Replay, replay
from tools.soak_players import turns_left_to_timer
from tools.soak_reconcile import Reconciliation, SoakData, reconcile
from tools.soak_parts import (
    BackendProcess,
    DEALER_FAULTS,
    LINE_FAULTS,
    PEER_BETTING_SECONDS,
    SEVENLUCK_SEATS,
    SoakConsumer,
    SplitBus,
    make_players_of,
    make_soak_dealer,
    matgo_windows,
    peer_plans,
    reload_process,
    scan_backend_log,
    table_ids,
    table_toml,
    write_toml,
)
from tools.soak_base import SoakRun, consumer_rows, discrepancies_summary, games_summary, rounds_of, rounds_summary
from tools.soak_faults import (
    BIG_BETTING_SECONDS,
    BIG_BETTING_SECONDS_STUD,
    BIG_READER,
    BIG_TABLE,
    CHAOS_KINDS,
    CHAOS_NEEDS,
    FAKETIME_CACHE_SECONDS,
    JOURNAL_FS_BYTES,
    NODE_ID,
    SOAK_MESSAGE_BYTES,
    SOAK_MESSAGE_BYTES_STUD,
    SOAK_SERVICE,
    SoakFaults,
    find_libfaketime,
    mount_tmpfs,
    unmount,
)


log = structlog.get_logger("tools.soak")


def write_config(path: Path, *, broker_url: str, journal: Path, tables: Sequence[tuple[str, str, str, str]],
                 betting_seconds: float, pause_seconds: float, auto_rounds: bool = True,
                 heartbeat_timeout: float = 3.0, decision_seconds: float = 6.0, log_level: str = "warning",
                 service_extra: str = "", betting_overrides: dict[str, float] | None = None,
                 options: dict[str, dict[str, Any]] | None = None, action_seconds: float = 6.0,
                 action_overrides: dict[str, float] | None = None) -> Path:
    """The backend's TOML: one table per (id, reader, serial port, game), each with its
    ``options`` (default: Sevenluck's seats)."""
    parts = [f"""[service]
node_id = "{NODE_ID}"
journal_path = "{journal}"
metrics_enabled = false
log_level = "{log_level}"
{service_extra}
[mqtt]
url = "{broker_url}"
client_id = "soak-backend"
"""]
    for tid, reader, port, game in tables:
        parts.append(table_toml(tid, game, f'kind = "serial"\nport = "{port}"\nreader_id = "{reader}"\n'
                                f"heartbeat_timeout = {heartbeat_timeout}\n", betting_seconds=betting_seconds,
                                pause_seconds=pause_seconds, auto_rounds=auto_rounds,
                                decision_seconds=decision_seconds, action_seconds=action_seconds, options=options,
                                betting_overrides=betting_overrides, action_overrides=action_overrides))
    return write_toml(path, parts)


def _quantiles(xs: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    return {"p50": round(s[len(s) // 2], 1), "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 1),
            "max": round(s[-1], 1)}


class _Soak(SoakFaults, SoakRun):
    """One ``dealer soak`` run on one node (see :mod:`tools.soak`)."""

    log = log
    CHAOS_KINDS = CHAOS_KINDS
    ALWAYS_WATCHED = frozenset({BIG_TABLE})  # the oversize table plays along, outside the target

    def __init__(self, tables: int, rounds: int, seed: int, workdir: Path, fault_rate: float, *,
                 card_fault_rate: float | None, betting_seconds: float, pause_seconds: float,
                 deal_interval: float, max_seconds: float, stall_seconds: float, drain_seconds: float,
                 games: str = "all", decision_seconds: float = 6.0, action_seconds: float = 6.0,
                 silent_rate: float = 0.01) -> None:
        if tables < 1 or rounds < 1:
            raise ValueError("a soak needs at least one table and one round")
        if not 0 <= fault_rate <= 1:
            raise ValueError("fault_rate must be within 0..1")
        self.n_tables, self.rounds, self.seed = tables, rounds, seed
        self.workdir = Path(workdir)
        self.fault_rate = fault_rate
        self.card_fault_rate = fault_rate if card_fault_rate is None else card_fault_rate
        if not 0 <= self.card_fault_rate <= 1:
            raise ValueError("card_fault_rate must be within 0..1")
        self.betting_seconds, self.pause_seconds, self.deal_interval = betting_seconds, pause_seconds, deal_interval
        self.max_seconds, self.stall_seconds, self.drain_seconds = max_seconds, stall_seconds, drain_seconds
        self.rng = random.Random(seed)
        self.ids = table_ids(tables) + ([(BIG_TABLE, BIG_READER)] if fault_rate > 0 else [])
        self.tids = [t for t, _ in self.ids]
        self.specs: dict[str, TableSpec] = dict(zip(self.tids, table_specs(tables, games) + [TableSpec("teen-patti")]))
        self.games = {t: spec.game for t, spec in self.specs.items()}
        self.action_seconds, self.silent_rate = action_seconds, silent_rate
        self.stud = "stud" in self.games.values()
        self.big_betting = BIG_BETTING_SECONDS_STUD if self.stud else BIG_BETTING_SECONDS
        self.chaos_kinds = tuple(k for k in CHAOS_KINDS
                                 if not set(CHAOS_NEEDS.get(k, ())).isdisjoint(self.games.values()) or k not in CHAOS_NEEDS)
        self.worker_kills: list[dict[str, Any]] = []
        self.worker_kill_misses = 0  # house turns passed over: no worker process forked yet
        #: kinds a fault of the current cycle of the rotation served already (a long kill caught both)
        self._served: set[str] = set()
        self._oversize_task: asyncio.Task[None] | None = None
        self._armed: list[asyncio.Task[None]] = []  # faults running beside the others
        self._armed_kind: dict[str, asyncio.Task[None]] = {}
        self._broker_lock = asyncio.Lock()
        self.replayed: Replay | None = None
        self.start_s: list[float] = []  # each backend start: until its new instance said online
        self.oversize: dict[str, int] = {}  # round key -> bets placed by oversize_round
        self.decision_seconds = decision_seconds
        self.clock_offset = 0  # seconds the backend's wall clock is ahead of the real one (clock_step)
        self.clock_steps: list[int] = []
        self.last_step_at = -math.inf
        self.journal_fs_mounted = False
        self.disk_full_windows: list[dict[str, Any]] = []
        self.journal_alerts = 0  # ALERT prompts about the journal (disk_full)
        self.backend_retried_starts = 0  # starts that exited 1 (may pass by itself) and were retried
        self.broker_crashes: list[str] = []  # the broker exited by itself (not a fault of ours): restarted
        self.online_wall_ms = 0.0  # the backend's wall clock when its current instance came online
        self.journal_audit: AuditReport | None = None
        self.anchor: tuple[int, str] | None = None
        self.journal_segments = 0
        self.must_not_time_out: dict[str, str] = {}  # round key -> the outage its deciders lived through
        self.chaos_counts: Counter[str] = Counter()
        self.chaos_log: list[dict[str, Any]] = []
        self.problems: list[str] = []  # discrepancies found while running (stalls, timeouts, crashes)
        self.must_cancel: dict[str, str] = {}
        self.must_complete: dict[str, str] = {}
        self.before_close_late = 0  # link losses that came too close to betting close to be decisive
        self.must_cancel_closes_at: dict[str, float] = {}  # round key -> its betting deadline (backend ms)
        self.before_close_missed = 0  # round openings heard too late to aim a link loss at them
        self.deliveries: dict[str, list[bytes]] = {}
        self.first_delivery: dict[str, float] = {}
        self.broker_back_at: dict[str, float] = {}  # link_loss_after_close round -> broker restarted
        self.applied_per_table: dict[str, set[str]] = {t: set() for t in self.tids}
        self.last_progress = time.monotonic()
        self.table_progress = {t: self.last_progress for t in self.tids}
        self.status_online_at = 0.0
        self.instances_seen: set[str] = set()  # backend instances (status "session") heard online
        self.instance_online_at = 0.0  # when the newest instance first said online (monotonic)
        self.last_prompt: dict[str, bytes] = {}
        self.loop_lag_ms: list[float] = []
        self.opening_lag_ms: list[float] = []  # round_opened: backend stamp to arrival at the monitor
        self.last_event: dict[str, bytes] = {}
        self._waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[dict[str, Any]]]] = []
        self._backend_busy = False  # the chaos is killing and restarting it
        self._chaos_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._bus_tasks: list[asyncio.Task[Any]] = []

    # -- set-up ------------------------------------------------------------------------------

    def _config(self, auto_rounds: bool) -> Path:
        return write_config(self.workdir / "soak.toml", broker_url=self.broker.url, journal=self.journal_path,
                            tables=[(t, r, p.path, self.games[t]) for (t, r), p in zip(self.ids, self.ports)],
                            betting_seconds=self.betting_seconds, pause_seconds=self.pause_seconds,
                            auto_rounds=auto_rounds, decision_seconds=self.decision_seconds,
                            action_seconds=self.action_seconds, action_overrides=matgo_windows(self.games,
                                                                                               self.action_seconds),
                            options={t: spec.options for t, spec in self.specs.items()},
                            service_extra=SOAK_SERVICE + "max_message_bytes = "
                            f"{SOAK_MESSAGE_BYTES_STUD if self.stud else SOAK_MESSAGE_BYTES}\n",
                            betting_overrides={BIG_TABLE: self.big_betting} | {
                                t: max(self.betting_seconds, PEER_BETTING_SECONDS) for t, g in self.games.items()
                                if g in TURN_GAMES})

    async def _start(self) -> None:
        wd = self.workdir
        wd.mkdir(parents=True, exist_ok=True)
        self.journal_fs = wd / "journal-fs"
        self.journal_path = self.journal_fs / "journal.sqlite"
        if self.journal_fs.exists() or (wd / "ledger.sqlite").exists():
            raise FileExistsError(f"{wd} already holds a soak run (journal-fs / ledger.sqlite): use a new workdir")
        self.journal_fs.mkdir()
        if self.fault_rate > 0:  # disk_full: the journal lives on a filesystem of its own, which the soak fills
            self.journal_fs_mounted = mount_tmpfs(self.journal_fs, JOURNAL_FS_BYTES)
        (wd / "broker").mkdir(exist_ok=True)
        (wd / "dev").mkdir(exist_ok=True)
        # Persistence on (it works as root too), saved once a second as a production broker would:
        # a kill -9 loses up to a second of queued messages, which the backend's re-sends of
        # unacknowledged results and its resyncs on reconnect must make good.
        self.broker = MosquittoProcess(wd / "broker", save_on_every_change=False)
        await asyncio.to_thread(self.broker.start)
        self.ports = [PtyPort(wd / "dev", f"shoe-{tid}") for tid in self.tids]
        # The backend's wall clock follows a libfaketime offset file (its monotonic clock is the
        # machine's): ``clock_step`` rewrites the file, as an NTP step would move the clock.
        faketime = find_libfaketime()
        if faketime is None and self.fault_rate > 0:  # every kind is planned when there is chaos
            raise RuntimeError("the clock_step fault needs libfaketime (Debian package libfaketime; scripts/test "
                               "installs it)")
        self.clock_file = wd / "clock-offset"
        self.clock_file.write_text("+0\n")
        env = None if faketime is None else {
            "LD_PRELOAD": faketime, "FAKETIME_TIMESTAMP_FILE": str(self.clock_file),
            # read the offset file at most once a second (FAKETIME_CACHE_DURATION): re-reading it on
            # every clock call (FAKETIME_NO_CACHE) made the backend ~40x slower on some hosts (round
            # openings 115 ms p50 late instead of 3-5 ms); judgments allow STEP_SETTLE_SECONDS
            "FAKETIME_CACHE_DURATION": str(FAKETIME_CACHE_SECONDS),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        self.backend = BackendProcess(self._config(auto_rounds=True), wd / "backend.log", env=env)

        url = self.broker.url
        # Settlement keeps a persistent session for what must not be missed, the results, and
        # reads round events and sends bets over a plain session, as live traffic: a broker
        # saves every message queued for a persistent session to disk before going on.
        self.settle_bus = MqttBus(url, client_id="soak-settlement", persistent_session=True)
        self.live_bus = MqttBus(url, client_id="soak-bettors")
        self.dealer_bus = MqttBus(url, client_id="soak-dealers", persistent_session=True)
        self.monitor = MqttBus(url, client_id="soak-monitor", accept_retained=True)
        self.consumer = SoakConsumer(SplitBus(durable=self.settle_bus, live=self.live_bus), list(self.tids),
                                      wd / "ledger.sqlite", rng=random.Random(self.seed + 1),
                                      players=SEVENLUCK_SEATS, games=dict(self.games),
                                      plans=peer_plans(self.specs))
        self.player_buses, self.players = make_players_of(url, self.specs, self.seed, self.silent_rate)
        # The simulated ledger's durability is not under test (this process never crashes):
        # spare the event loop one fsync per bet.
        self.consumer.db.execute("PRAGMA synchronous=NORMAL")
        for tid in self.tids:  # after the consumer's own handler: it has applied the result by then
            self.settle_bus.subscribe(topics.results(tid), self._on_result)
        p = self.card_fault_rate / (len(LINE_FAULTS) + len(DEALER_FAULTS))
        self.dealers: list[VirtualDealer] = []
        self.screens: list[StationScreen] = []
        for i, ((tid, reader), port) in enumerate(zip(self.ids, self.ports)):
            dealer = make_soak_dealer(
                self.games[tid], tid, VirtualShoe(reader), PtyShoeLink(port), self.dealer_bus,
                rng=random.Random(self.seed * 7919 + i),
                faults=FaultPlan(garbage=p, noread=p, torn=p, drop=p, repeat=p),
                dealer_faults=DealerFaults(foreign=p, duplicate=p),
                deal_interval=self.deal_interval, heartbeat_interval=0.1, patience=0.5)
            screen = StationScreen(dealer)
            self.dealer_bus.subscribe(topics.state(tid), prompts_of(screen.on_prompt))
            self.screens.append(screen)
            self.dealers.append(dealer)
        self.monitor.subscribe(topics.table_topic("+", "events"), self._on_event)  # refusals
        self.monitor.subscribe(topics.table_topic("+", "state"), events_of(self._on_event))
        self.monitor.subscribe(topics.table_topic("+", "state"), prompts_of(self._on_prompt))
        self.monitor.subscribe(topics.backend_status(NODE_ID), self._on_status)
        self.monitor.subscribe(topics.backend_journal(NODE_ID), self._on_anchor)

        buses = (self.settle_bus, self.live_bus, self.dealer_bus, self.monitor, *self.player_buses)
        for bus in buses:
            self._bus_tasks.append(asyncio.create_task(bus.run()))
        for bus in buses:
            async with asyncio.timeout(15):
                await bus.wait_connected()
        self._tasks += [asyncio.create_task(self._dealer(tid, d)) for tid, d in zip(self.tids, self.dealers)]
        await self._start_backend()

    async def _dealer(self, tid: str, dealer: VirtualDealer) -> None:
        """A virtual dealer's task: one that fails is a discrepancy of the soak (its table stops
        being dealt), said with its traceback, never a silent stall."""
        try:
            await dealer.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("virtual dealer failed", table_id=tid, set_aside=dealer.set_aside, resyncs=dealer.resyncs,
                          trace=[list(t) for t in dealer.trace])
            self.problems.append(f"{tid}: the virtual dealer failed: {type(exc).__name__}: {exc}")

    def _backend_replaced(self) -> None:
        """A new backend instance is starting: a link loss it never saw cannot cancel a round
        whose betting was still open when the instance that saw it stopped (killed, or stopped
        by the drain before its LinkDown was journaled). Such a round is no longer judged."""
        now = self.backend_now_ms()
        for key, closes_at in list(self.must_cancel_closes_at.items()):
            if now < closes_at:
                del self.must_cancel_closes_at[key]
                self.must_cancel.pop(key, None)
                self.before_close_late += 1

    async def _start_backend(self, timeout: float = 30.0) -> None:
        """Start the backend and wait for its retained "online". Exit 1 means "may pass by
        itself" (a full disk at start): started again a second later, as systemd would (each
        counted); any other exit, or no "online" in time, is a failure of the soak."""
        self._backend_replaced()
        t = time.monotonic()
        self.backend.start()
        try:
            async with asyncio.timeout(timeout):
                while self.instance_online_at < t:  # a new instance's "online", not a stale retained one
                    if not self.backend.alive:
                        code = self.backend.proc.returncode if self.backend.proc else None
                        if code != 1:
                            raise RuntimeError(f"the backend exited with {code} (see {self.backend.log_path})")
                        self.backend_retried_starts += 1
                        await asyncio.sleep(1.0)
                        self.backend.start()
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise RuntimeError(f"the backend did not come online within {timeout} s") from None
        self.start_s.append(time.monotonic() - t)

    # -- what the simulator hears ----------------------------------------------------------------

    def _result_heard(self, key: str) -> None:
        self.first_delivery.setdefault(key, time.monotonic())

    def _on_event(self, topic: str, payload: bytes) -> None:
        tid = topics.table_of(topic) or "?"
        self.last_event[tid] = payload
        if tid in self.table_progress and self.games.get(tid) in TURN_GAMES:
            # a turn game's round is long (a Matgo game is some forty moves and flips): it stalls
            # when nothing happens at its table, not when no round ends for a while
            self.table_progress[tid] = time.monotonic()
        opening = b'"round_opened"' in payload
        if not self._waiters and not opening:
            return
        try:
            ev = json.loads(payload)
        except ValueError:
            return
        ev["_rx"] = time.monotonic()
        if opening and isinstance(ev.get("at"), int) and ev["_rx"] > self.last_step_at + 5:  # not across a step
            self.opening_lag_ms.append(self.backend_now_ms() - ev["at"])
        for pred, fut in list(self._waiters):
            if not fut.done() and pred(ev):
                fut.set_result(ev)

    def _on_anchor(self, topic: str, payload: bytes) -> None:
        """The journal head the backend publishes (retained), as an auditor would log it."""
        with contextlib.suppress(ValueError, KeyError, TypeError):
            self.anchor = parse_anchor(json.loads(payload)["anchor"])

    def backend_now_ms(self) -> float:
        """The backend's wall clock now (libfaketime runs it ``clock_offset`` seconds ahead)."""
        return time.time() * 1000 + self.clock_offset * 1000

    def _on_prompt(self, topic: str, payload: bytes) -> None:
        self.last_prompt[topics.table_of(topic) or "?"] = payload
        if b'"ALERT"' in payload and b"journal" in payload:
            self.journal_alerts += 1

    def _on_status(self, topic: str, payload: bytes) -> None:
        """The backend's retained status. Its ``session`` is ``{instance}.{connection}`` with a
        random instance per process: a start counts only when a new instance says online (a
        retained "online" of a killed instance, restored by a restarted broker before the will
        was saved, must not pass for the new one), and a reconnect of the same instance does
        not move the instant its instance came online."""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            status = json.loads(payload)
            if status.get("online") is True:
                instance = str(status.get("session") or "").split(".")[0]
                self.status_online_at = time.monotonic()
                if instance not in self.instances_seen:
                    self.instances_seen.add(instance)
                    self.instance_online_at = self.status_online_at
                    self.online_wall_ms = self.backend_now_ms()

    # -- the run ----------------------------------------------------------------------------

    def _diagnose(self) -> str:
        parts = []
        for tid, dealer in zip(self.tids, self.dealers):
            prompt = self.last_prompt.get(tid, b"")
            parts.append(f"{tid}: applied={len(self.applied_per_table[tid])} dealer(in_hand={dealer.in_hand}, "
                         f"dealt={len(dealer.dealt)}, round={dealer._round}) last_prompt={prompt[:300]!r}")
        return "; ".join(parts)

    def _counted(self) -> dict[str, set[str]]:
        return {t: s for t, s in self.applied_per_table.items() if t != BIG_TABLE}

    def _stalled(self, now: float) -> str | None:
        if now - self.last_progress > self.stall_seconds:
            return f"stalled: no new result for {self.stall_seconds} s: {self._diagnose()}"
        return super()._stalled(now)

    async def _watch_processes(self) -> None:
        if not self.backend.alive and not self._backend_busy:
            code = self.backend.proc.returncode if self.backend.proc else None
            self.problems.append(f"the backend exited by itself (code {code}); restarted")
            await self._start_backend()
        broker = self.broker.proc
        if broker is not None and broker.poll() is not None and not self._broker_lock.locked():
            await self._broker_crashed(broker.returncode)

    def _background(self) -> tuple[asyncio.Task[Any] | None, ...]:
        return (self._chaos_task, self._oversize_task, *self._armed)

    async def _drain(self) -> None:
        """Stop opening rounds, then wait until every opened round's result is delivered and applied."""
        await self._cancel_chaos()
        if self.journal_fs_mounted:  # a disk_full cut short: space returns before the last start
            (self.journal_fs / "filler").unlink(missing_ok=True)
        if self.broker.proc is None:
            await asyncio.to_thread(self.broker.start)
        for port, dealer in zip(self.ports, self.dealers):
            if not port.plugged:
                port.replug()
                await dealer.link.send([dealer.shoe.boot()])
        # a link loss injected just before the drain is judged by the instance that saw it: let
        # the betting it must cancel close before that instance is stopped
        left = max((c - self.backend_now_ms() for c in self.must_cancel_closes_at.values()), default=0.0)
        if left > 0:
            await asyncio.sleep(left / 1000 + 1.0)
        self._config(auto_rounds=False)
        if not (self.backend.alive and await reload_process(self.backend, self.problems)):
            await asyncio.to_thread(self.backend.terminate)
            await self._start_backend()
        await self._await_drained()

    async def _undone(self) -> tuple[list[str], list[str]]:
        state = self._journal_state()
        waiting = state["open_without_delivery"] + state["outbox"]
        unapplied = [k for k in state["opened_keys"] if k.split(":", 1)[0] in self.applied_per_table
                     and k not in self.applied_per_table[k.split(":", 1)[0]]]
        return waiting, unapplied

    def _journal_db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.journal_path}?mode=ro", uri=True, timeout=10)

    def _journal_state(self) -> dict[str, list[str]]:
        db = self._journal_db()
        try:
            opened = [(t, r) for t, r in db.execute(
                "SELECT table_id, round_id FROM events WHERE type = 'open_round' ORDER BY id")]
            delivered = {r for (r,) in db.execute("SELECT DISTINCT round_id FROM events WHERE type = 'result_delivered'")}
            outbox = [k for (k,) in db.execute("SELECT key FROM outbox ORDER BY id")]
        finally:
            db.close()
        return {"opened_keys": [f"{t}:{r}" for t, r in opened],
                "open_without_delivery": [f"{t}:{r}" for t, r in opened if r not in delivered],
                "outbox": outbox}

    async def _stop_processes(self) -> None:
        if hasattr(self, "backend"):
            await asyncio.to_thread(self.backend.terminate)

    def _closed(self) -> None:
        for port in getattr(self, "ports", []):
            port.close()

    def _collect(self) -> SoakData:
        """The journal's side of the reconciliation, across its segment files (the backend has
        stopped), and the outbox left in the live file."""
        opened, closed, _ = rounds_of((), self.tids)
        outbox: list[str] = []
        acked: list[str] | None = None
        try:
            journal = Journal(self.journal_path, fsync=False)
            try:
                opened, closed, acked = rounds_of(journal.rows(), self.tids)
                outbox = [r.key for r in journal.pending()]
                self.replayed = replay(journal, self.tids)
                # checked against the last head the backend published, too: rows cut off the end show
                self.journal_audit = verify(journal, [self.anchor] if self.anchor else [])
                self.journal_segments = len(journal.segment_records())
            finally:
                journal.close()
        except (sqlite3.Error, JournalError) as exc:
            self.problems.append(f"cannot read the backend journal {self.journal_path}: {exc}")
        if self.journal_audit is not None and not self.journal_audit.ok:
            self.problems.append(f"dealer audit verify fails on the journal: {self.journal_audit.reason}")
        return SoakData(
            tables=list(self.tids), opened=opened, closed=closed, outbox_left=outbox,
            deliveries=self.deliveries, **consumer_rows(self.consumer),
            must_cancel=dict(self.must_cancel), must_complete=dict(self.must_complete),
            must_not_time_out=dict(self.must_not_time_out), acked=acked,
            faults=[(e["kind"], e["at_ms"], e["end_ms"]) for e in self.chaos_log],
            replay=self.replayed, silent_turns=turns_left_to_timer(self.players), games=dict(self.games),
        )

    def _keep_journal(self) -> None:
        """Copy the journal off its tmpfs into the workdir (kept for inspection), then unmount."""
        if not self.journal_fs_mounted:
            return
        try:
            if self.journal_path.exists():
                src = self._journal_db()
                dst = sqlite3.connect(self.workdir / "journal.sqlite")
                try:
                    src.backup(dst)
                finally:
                    src.close()
                    dst.close()
            segments = segment_dir(self.journal_path)
            if segments.is_dir():
                shutil.copytree(segments, segment_dir(self.workdir / "journal.sqlite"), dirs_exist_ok=True)
        except (sqlite3.Error, OSError) as exc:
            self.problems.append(f"cannot copy the journal off its filesystem: {exc}")
        finally:
            unmount(self.journal_fs)
            self.journal_fs_mounted = False

    async def run(self) -> dict[str, Any]:
        phases: dict[str, float] = {}
        seconds = await self._run_phases(phases)
        t = time.monotonic()
        try:
            rec = reconcile(self._collect()) if hasattr(self, "consumer") else Reconciliation([], {})
        finally:
            self._keep_journal()
        phases["reconcile"] = round(time.monotonic() - t, 1)
        log_path = self.workdir / "backend.log"
        backend_log = scan_backend_log(log_path.read_text(errors="replace") if log_path.exists() else "")
        if backend_log["tracebacks"]:
            self.problems.append(f"the backend logged {backend_log['tracebacks']} traceback(s): see {log_path}")
        discrepancies = self.problems + rec.discrepancies
        per_table = [len(s) for t, s in self.applied_per_table.items() if t != BIG_TABLE]
        if hasattr(self, "consumer"):
            duplicates, stale, lags = self.consumer.duplicates, self.consumer.stale_openings, self.consumer.opening_lag_ms
            self.consumer.close()
        else:
            duplicates, stale, lags = 0, 0, []
        summary: dict[str, Any] = {
            "ok": not discrepancies,
            "tables": self.n_tables,
            "rounds": {"target": self.rounds, "min": min(per_table), "total": sum(per_table)},
            "seconds": round(seconds, 1),
            "phases_s": phases,
            "seed": self.seed,
            "fault_rate": self.fault_rate,
            "card_fault_rate": self.card_fault_rate,
            "faults": self._faults(),
            **rounds_summary(rec, duplicates, stale),
            "stale_prompts_dropped": sum(sc.dropped for sc in getattr(self, "screens", [])),
            "dealer_resyncs": sum(d.resyncs for d in getattr(self, "dealers", [])),
            "round_opened_lag_ms": {"monitor": _quantiles(self.opening_lag_ms),
                                    "settlement": _quantiles(lags)},
            "simulator_loop_lag_ms": _quantiles(self.loop_lag_ms),
            "link_loss_checks": {
                "before_close_must_cancel": len(self.must_cancel),
                "before_close_too_late_to_judge": self.before_close_late,
                "before_close_openings_heard_too_late": self.before_close_missed,
                "after_close_must_complete": len(self.must_complete),
                "after_close_result_after_restart": sum(
                    1 for k, t in self.broker_back_at.items() if self.first_delivery.get(k, 0) > t),
            },
            **games_summary(rec, self.specs, rec.stats.get("games", {})),
            "house_worker_kills": {"kills": len(self.worker_kills),
                                   "workers_killed": sum(k.get("workers_killed", 0) for k in self.worker_kills),
                                   "pools_replaced": backend_log.get("house_pools_replaced", 0),
                                   "turns_passed_over": self.worker_kill_misses},
            "players": {"turns_left_to_timer": len(turns_left_to_timer(getattr(self, "players", []))),
                        "turns_answered_from_state": sum(getattr(p, "from_state", 0) for p in getattr(self, "players", [])),
                        "answers_resent_from_state": sum(getattr(p, "resent_from_state", 0)
                                                         for p in getattr(self, "players", [])),
                        "refused": sum(len(getattr(p, "rejected", [])) for p in getattr(self, "players", [])),
                        "refused_examples": [str(r.get("reason"))[:160] for p in getattr(self, "players", [])
                                             for r in getattr(p, "rejected", [])][:8]},
            "decisions": rec.stats.get("decisions", {}),
            "acks_journaled": rec.stats.get("acks"),
            "clock_steps_seconds": self.clock_steps,
            "backend_down_long_rounds": len(self.must_not_time_out),
            "disk_full_windows": self.disk_full_windows,
            "settlement": {"acks_sent": getattr(getattr(self, "consumer", None), "acks_sent", 0),
                           "acks_delayed": getattr(getattr(self, "consumer", None), "slow_acks", 0),
                           "down": sum(1 for e in self.chaos_log if e["kind"] == "settlement_down"),
                           "sessions_lost": sum(1 for e in self.chaos_log if e.get("session_lost"))},
            "oversize_rounds": {"rounds": len(self.oversize), "bets_sent": sum(self.oversize.values()),
                                "results_in_parts": rec.stats.get("results_in_parts", 0)},
            "journal": {"segments": self.journal_segments, "anchor_checked": self.anchor is not None,
                        "audit_ok": None if self.journal_audit is None else self.journal_audit.ok},
            "bets": rec.stats.get("bets", {}),
            "chips": rec.stats.get("chips", {}),
            "backend_log": backend_log,
            "backend_starts": getattr(getattr(self, "backend", None), "starts", 0),
            "backend_starts_retried": self.backend_retried_starts,
            "broker_crashes": self.broker_crashes,
            "backend_start_s": _quantiles(self.start_s),
            **discrepancies_summary(discrepancies, self.workdir),
        }
        self._write_summary(summary)
        return summary

