"""``dealer soak``: K tables for M rounds under random faults, then a full reconciliation.

Everything is real except the people and the hardware: one private Mosquitto (persistence
on), the real ``dealer run`` process started from a TOML config with K tables of the five
games in turn (``--games all``: Seven-Card Stud, Seotda, Matgo, Sevenluck, Teen Patti;
:mod:`tools.soak_games`) on K serial scanners (PTYs), K virtual dealers following the station
prompts through a faulty line (garbage, no-reads, torn and dropped frames, retransmissions) and
making mistakes (foreign and duplicate cards), the games' steady players
(:mod:`tools.soak_players`; the house AI plays Matgo in the backend's worker process), and the
reference settlement consumer placing the bets of every round (the turn games' players' chips
and cover) and applying every result once into its SQLite ledger.

A chaos task injects, at random moments spread over the run, in shuffled rotation:

* ``broker_restart``: Mosquitto SIGKILLed and started again on the same port;
* ``reader_unplug``: one table's reader unplugged, replugged (a new PTY behind the same
  symlink) and powered up again (BOOT);
* ``backend_kill``: the backend SIGKILLed and restarted (journal replay);
* ``link_loss_before_close``: the broker killed right after a ``round_opened`` event (and
  the first accepted bet, if one comes quickly): that round must be CANCELLED and refunded;
* ``link_loss_after_close``: the broker killed while a table is DEALING: that round must
  complete, and its result arrives after the broker is back;
* and the kinds ``docs/soak.md`` lists: the backend down past a decision or turn window, the
  house worker killed mid-decision, the broker lost in the stud exposure window, settlement down
  or slow, a full disk, clock steps, an oversize round.

The simulated people use MQTT as they should: settlement reads results over a persistent
session (nothing may be missed) but round events and bets as live traffic, bettors bet
once per round and only while its betting is open, and a dealer station's screen shows
the newest prompt, never an older one redelivered by a crashed broker.

When every table has at least M results applied by the consumer (and every planned chaos
event happened) the soak stops opening rounds (the backend reloads its config with
``auto_rounds = false``: SIGHUP), waits until every opened round's result has been delivered and
applied, stops everything and reconciles (:func:`reconcile`):

* every round the backend opened (its journal) has exactly one applied result, and
  nothing is left in the outbox;
* every delivery of a result carried the same bytes (at-least-once, never different);
* every bet the consumer placed has exactly one ledger line (settled, REFUND or
  NOT_ACCEPTED) with the amount :func:`dealer.core.settlement.settle_bet` gives; cancelled and
  voided rounds only refund;
* chips are conserved: players' bankrolls + house + escrow before == after, with nothing
  left in escrow; each turn game's hand returns the chips brought less its rake;
* the journal replays through the core to the results paid, and every timer move has a cause
  (:mod:`tools.soak_judge`): only a turn a player left on purpose may be played by the timer;
* every CANCELLED round was cancelled by a link loss before its betting closed (its
  reason, no ``closed_at``, and no ``close_betting`` in the journal), every round hit by a
  link loss after betting closed COMPLETED, and no round was VOIDED (nobody voids here).

The summary is one JSON object (``dealer soak`` prints it with sorted keys and exits 1 on
any discrepancy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import math
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from dealer.edge import topics
from dealer.edge.journal import Journal, JournalError
from dealer.edge.segments import AuditReport, parse_anchor, segment_dir, verify
from dealer.games.matgo import AI_PLAYER as HOUSE_AI
from drivers.mqtt import MqttBus, cancel_and_wait
from simulators.broker import MosquittoProcess
from simulators.pty_port import PtyPort
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink, StationScreen, VirtualDealer
from tools.soak_games import GAME_CHOICES, TURN_GAMES, TableSpec, table_specs, toml_options
from tools.soak_judge import Replay, peer_money, replay
from tools.soak_players import turns_left_to_timer

from tools.soak_reconcile import Reconciliation, SoakData, reconcile
from tools.soak_parts import (
    BackendProcess,
    DEALER_FAULTS,
    LINE_FAULTS,
    MAX_LISTED,
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
    wait_event,
    write_toml,
)


#: The dealer station's screen (newest prompt only) lives with the virtual dealer now.
_StationScreen = StationScreen

log = structlog.get_logger("tools.soak")

#: Faults the chaos task injects (each at least once per cycle of the rotation).
CHAOS_KINDS = ("broker_restart", "reader_unplug", "backend_kill", "link_loss_before_close", "link_loss_after_close",
               "backend_down_long", "clock_step", "settlement_down", "settlement_slow", "disk_full", "oversize_round",
               "house_worker_kill", "backend_kill_in_turn", "exposure_broker_loss")
#: Kinds that run beside the others: those waiting for a rare moment of a game (the house AI's
#: turn, a stud exposure window), armed, fire when it comes (ARMED_SECONDS at most); settlement
#: away or slow for a while kills nothing the others need. One of each kind at a time.
ARMED = ("house_worker_kill", "exposure_broker_loss", "settlement_down", "settlement_slow")
ARMED_SECONDS = 300.0
#: Kinds that may run while the oversize round places its bets: not a broker kill (a link lost
#: while betting is open cancels the round) nor a clock step (its betting would close at once).
BESIDE_OVERSIZE = ("settlement_down", "settlement_slow", "reader_unplug", "house_worker_kill", "backend_kill",
                   "backend_down_long", "backend_kill_in_turn", "disk_full")
#: Kinds that need a table of some game: a soak without one plans none of them.
CHAOS_NEEDS = {"backend_down_long": ("sevenluck",), "house_worker_kill": ("matgo",),
               "backend_kill_in_turn": ("stud", "seotda"), "exposure_broker_loss": ("stud",)}
FAULT_KINDS = CHAOS_KINDS + LINE_FAULTS + DEALER_FAULTS

NODE_ID = "soak-host"

#: A link loss this long before betting closes must cancel the round. The backend hears a
#: broker disconnect within milliseconds on a quiet machine; the margin absorbs a loaded one
#: (the target soak measures hops of 60 ms p50 and 800 ms p99 on 2 cores, and a 100 ms
#: margin judged five rounds whose betting timer fired before the disconnect was read).
BEFORE_CLOSE_MARGIN_MS = 300
#: Journal retention far more aggressive than a studio's, so that segments roll (and are
#: verified at the end) under every fault.
SOAK_SERVICE = ("journal_retain_rows = 500\njournal_segment_rows = 500\n"
                "result_resend_seconds = 2\nresult_resend_max_seconds = 10\nhouse_workers = 1\n")
#: The soak's ``max_message_bytes``: the least the backend allows (a stud table needs more).
SOAK_MESSAGE_BYTES = 16_384
SOAK_MESSAGE_BYTES_STUD = 65_536
#: With chaos on, one more Teen Patti table with a longer betting period, where the
#: ``oversize_round`` fault places thousands of bets in one round: its result is bigger than
#: ``max_message_bytes`` and goes as a manifest plus parts. It plays along, outside the target.
BIG_TABLE, BIG_READER = "SBIG", "RBIG"
#: libfaketime re-reads the backend's clock offset file at most this often (seconds) ...
FAKETIME_CACHE_SECONDS = 1
#: ... so a deadline the backend stamped this soon after a clock step may carry either clock:
#: a fault that must measure the backend's time left does not pick such a round.
STEP_SETTLE_SECONDS = 2.0
BIG_BETTING_SECONDS = 5.0
#: Bets of an oversize round, with 60-character bet ids: about 25 KB of ids, over the soak's
#: 16 KiB ``max_message_bytes``; with a stud table (64 KiB) 1,150 bets of 64-character ids.
#: Paced: a burst on one table of this 2-core machine would delay every other table's
#: players for seconds (the soak would rightly count their decisions taken by the timer).
OVERSIZE_BETS = 400
OVERSIZE_BETS_PER_SECOND = 200
OVERSIZE_BETS_STUD, OVERSIZE_BETS_PER_SECOND_STUD = 1300, 55
BIG_BETTING_SECONDS_STUD = 40.0  # 1,300 bets at 55 a second take 24 s; a loaded host needs the rest (28 s let 952 in: under 64 KiB)


# ---------------------------------------------------------------------------------------------
# The live soak
# ---------------------------------------------------------------------------------------------


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


#: Size of the journal's own filesystem (a tmpfs: it takes memory only as it fills).
JOURNAL_FS_BYTES = 2 << 30


def mount_tmpfs(path: Path, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes on ``path`` (root only): the soak's ``disk_full`` fills
    it, so the backend meets a real ENOSPC. Raises RuntimeError saying what is missing."""
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise RuntimeError(f"the disk_full fault mounts a tmpfs for the journal and needs root: {detail.strip()} "
                           f"(run as root, or --fault-rate 0)") from None
    return True


def fill_filesystem(filler: Path) -> int:
    """Take every free byte of ``filler``'s filesystem (unbuffered writes, smaller and smaller,
    until ENOSPC); returns the bytes taken."""
    st = os.statvfs(filler.parent)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    taken = 0
    try:
        with contextlib.suppress(OSError):  # most of it at once (tmpfs undoes a fallocate that fails)
            want = max(0, st.f_bavail * st.f_frsize - (1 << 20))
            os.posix_fallocate(fd, 0, want)
            taken = want
        os.lseek(fd, taken, os.SEEK_SET)
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            chunk = b"\0" * size
            try:
                while True:
                    taken += os.write(fd, chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return taken


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def find_libfaketime() -> str | None:
    """libfaketime (Debian package ``libfaketime``), which steps the backend's wall clock."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")) + sorted(glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    return found[0] if found else None


def house_worker_pids(backend_pid: int) -> list[int]:
    """The house players' worker processes of a backend (dealer/edge/house.py): the children of
    its fork server, itself a child of the backend (its resource tracker is not a worker)."""
    children: dict[int, list[int]] = {}
    cmd: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd[int(d)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    servers = [p for p in children.get(backend_pid, []) if "forkserver" in cmd.get(p, "")]
    return sorted(w for s in servers for w in children.get(s, []))


def _quantiles(xs: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    return {"p50": round(s[len(s) // 2], 1), "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 1),
            "max": round(s[-1], 1)}


class _Soak:
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
        self.screens: list[_StationScreen] = []
        for i, ((tid, reader), port) in enumerate(zip(self.ids, self.ports)):
            dealer = make_soak_dealer(
                self.games[tid], tid, VirtualShoe(reader), PtyShoeLink(port), self.dealer_bus,
                rng=random.Random(self.seed * 7919 + i),
                faults=FaultPlan(garbage=p, noread=p, torn=p, drop=p, repeat=p),
                dealer_faults=DealerFaults(foreign=p, duplicate=p),
                deal_interval=self.deal_interval, heartbeat_interval=0.1, patience=0.5)
            screen = _StationScreen(dealer)
            self.dealer_bus.subscribe(topics.prompts(tid), screen.on_prompt)
            self.screens.append(screen)
            self.dealers.append(dealer)
        self.monitor.subscribe(topics.table_topic("+", "events"), self._on_event)
        self.monitor.subscribe(topics.table_topic("+", "prompts"), self._on_prompt)
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

    def _on_result(self, topic: str, payload: bytes) -> None:
        try:
            msg = json.loads(payload)
            key = msg["idempotency_key"]
            if msg.get("schema_id") == "studio.v1.round_result_part":  # a part: its own delivery
                key = f"{key}#{msg['part']}/{msg['parts']}"
        except (ValueError, KeyError, TypeError):
            self.problems.append(f"undecodable result on {topic}: {payload[:200]!r}")
            return
        self.deliveries.setdefault(key, []).append(payload)
        if "#" in key:
            return  # a part counts with its manifest
        self.first_delivery.setdefault(key, time.monotonic())
        tid = key.split(":", 1)[0]
        if tid in self.applied_per_table and key not in self.applied_per_table[tid]:
            self.applied_per_table[tid].add(key)
            self.last_progress = self.table_progress[tid] = time.monotonic()

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

    async def _wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any] | None:
        return await wait_event(self._waiters, pred, timeout)

    # -- chaos ----------------------------------------------------------------------------------

    def _plan(self) -> list[str]:
        if self.fault_rate <= 0:
            return []
        kinds = self.chaos_kinds
        n = max(len(kinds), math.ceil(self.fault_rate * self.n_tables * self.rounds))
        plan: list[str] = []
        while len(plan) < n:
            cycle = list(kinds)
            self.rng.shuffle(cycle)
            plan += cycle
        return plan[:n]

    def total_applied(self) -> int:
        return sum(len(s) for s in self.applied_per_table.values())

    async def _chaos(self) -> None:
        plan = self._plan()
        total = self.n_tables * self.rounds
        cycle = len(self.chaos_kinds)
        for i in range(len(plan)):
            kind = plan[i]
            if kind == "oversize_round":  # what may run beside it comes first in the rest of its cycle
                end = (i // cycle + 1) * cycle
                rest = plan[i + 1:end]
                plan[i + 1:end] = [k for k in rest if k in BESIDE_OVERSIZE] + [k for k in rest if k not in BESIDE_OVERSIZE]
            if i % cycle == 0:
                self._served.clear()
            if kind in self._served:
                continue  # a kill earlier in this cycle was this fault too
            if kind in ARMED:  # it runs beside: the other faults go on meanwhile
                before = self._armed_kind.get(kind)
                if before is not None:
                    await before
                self._armed_kind[kind] = task = asyncio.create_task(self._inject(kind))
                self._armed.append(task)
                continue
            # spread over 5 %..85 % of the run, with jitter, so the last ones land before the end
            threshold = total * (0.05 + 0.8 * (i + self.rng.random()) / len(plan))
            while self.total_applied() < threshold:
                await asyncio.sleep(0.02)
            await asyncio.sleep(self.rng.uniform(0, self.betting_seconds + self.pause_seconds))
            if kind not in BESIDE_OVERSIZE and self._oversize_task is not None:
                await self._oversize_task  # the big round's bets are in before anything is killed
                self._oversize_task = None
            await self._inject(kind)
        if self._oversize_task is not None:
            await self._oversize_task
        await asyncio.gather(*self._armed)

    async def _broker_crashed(self, code: int | None) -> None:
        """The broker exited by itself (a 2-core run once saw Mosquitto 2.0.11 end on "Error: No
        such file or directory" saving its database): as a crashed broker host, restarted, counted
        and named in the summary; the backend must live through it like any broker loss."""
        async with self._broker_lock:
            log_path = self.workdir / "broker" / "mosquitto.log"
            last = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
            self.broker_crashes.append(f"exit {code}: {last[0][:200] if last else 'no log'}")
            log.warning("the broker exited by itself: restarted", code=code, last_log=last)
            self.broker.proc = None
            await asyncio.to_thread(self.broker.start)

    async def _broker_down(self, down_for: float) -> float:
        """Kill the broker for ``down_for`` seconds (one fault at a time: an armed fault may fire
        beside another); returns the backend's clock at the kill."""
        async with self._broker_lock:
            at = self.backend_now_ms()
            self.broker.kill()
            await asyncio.sleep(down_for)
            await asyncio.to_thread(self.broker.start)
            return at

    async def _inject(self, kind: str) -> None:
        rng = self.rng
        entry: dict[str, Any] = {"kind": kind, "t": round(time.monotonic() - self.t0, 3),
                                 "at_ms": int(self.backend_now_ms())}
        if kind == "broker_restart":
            await self._broker_down(rng.uniform(0.05, 0.6))
        elif kind == "reader_unplug":
            i = rng.randrange(self.n_tables)
            entry["table"] = self.tids[i]
            self.ports[i].unplug()
            await asyncio.sleep(rng.uniform(0.05, 0.8))
            self.ports[i].replug()
            dealer = self.dealers[i]
            await dealer.link.send([dealer.shoe.boot()])  # power-up announcement of the reader
        elif kind == "backend_kill":
            self._backend_busy = True
            try:
                self.backend.kill()
                await asyncio.sleep(rng.uniform(0, 0.3))
                await self._start_backend()
            finally:
                self._backend_busy = False
        elif kind == "link_loss_before_close":
            deadline = time.monotonic() + 60
            while True:  # a round whose opening we hear in time to hit its betting period
                ev = await self._wait_event(lambda e: e.get("event") == "round_opened",
                                            timeout=max(0.0, deadline - time.monotonic()))
                if ev is None:
                    self.problems.append("chaos: no round opened in time within 60 s "
                                         "(link_loss_before_close not injected)")
                    return
                closes_at = (ev.get("data") or {}).get("betting_closes_at")
                left_ms = (closes_at - self.backend_now_ms()) if closes_at is not None else 0
                # a round opened just before a clock step carries a deadline of the old clock
                if left_ms > BEFORE_CLOSE_MARGIN_MS + 20 and ev["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS:
                    break
                self.before_close_missed += 1  # heard too late (a loaded machine): try the next one
            key = f"{ev['table_id']}:{ev['round_id']}"
            # let a bet or two be accepted first, so the cancellation has something to refund
            await self._wait_event(lambda e: e.get("event") == "bet_accepted" and e.get("round_id") == ev["round_id"],
                                   timeout=min(0.05, (left_ms - BEFORE_CLOSE_MARGIN_MS - 20) / 1000))
            kill_ms = await self._broker_down(rng.uniform(0.1, 0.6))
            entry.update(round=key, before_close_ms=None if closes_at is None else round(closes_at - kill_ms))
            # judged only when the backend that opened the round is the one that lived through
            # the kill (a round opened by an instance killed since was replayed, not watched)
            opened_here = isinstance(ev.get("at"), int) and ev["at"] >= self.online_wall_ms
            if closes_at is not None and kill_ms < closes_at - BEFORE_CLOSE_MARGIN_MS and opened_here:
                self.must_cancel[key] = f"broker killed {closes_at - kill_ms:.0f} ms before betting closed"
                self.must_cancel_closes_at[key] = closes_at
            else:
                self.before_close_late += 1
        elif kind == "link_loss_after_close":
            ev = await self._wait_event(
                lambda e: e.get("event") == "card_registered" and 1 <= int((e.get("data") or {}).get("step") or 0) <= 4,
                timeout=30)
            if ev is None:
                self.problems.append("chaos: no table was dealing within 30 s (link_loss_after_close not injected)")
                return
            key = f"{ev['table_id']}:{ev['round_id']}"
            await self._broker_down(rng.uniform(0.1, 0.8))
            self.broker_back_at[key] = time.monotonic()
            self.must_complete[key] = f"broker killed while dealing (after card {ev['data']['step']})"
            entry["round"] = key
        elif kind == "backend_down_long":
            if not await self._kill_long(entry, "decision"):
                return
        elif kind == "house_worker_kill":
            if not await self._kill_house_worker(entry):
                return
        elif kind == "backend_kill_in_turn":
            if not await self._kill_long(entry, "turn"):
                return
        elif kind == "exposure_broker_loss":
            if not await self._broker_loss_in_exposure(entry):
                return
        elif kind == "settlement_down":
            await self._settlement_down(entry)
        elif kind == "settlement_slow":
            # for a while settlement takes 1..5 s to acknowledge what it applied (the backend
            # re-sends after 2 s: the repeats are applied once and acknowledged again)
            window = rng.uniform(3.0, 8.0)
            self.consumer.slow_until = time.monotonic() + window
            entry["window_seconds"] = round(window, 2)
            await asyncio.sleep(window)
        elif kind == "disk_full":
            await self._disk_full(entry)
        elif kind == "oversize_round":
            # its bets take half a minute, paced (a burst would slow every table): it runs beside the
            # faults that do not end its betting (the others wait for it)
            self._oversize_task = asyncio.create_task(self._oversize_in_background(entry))
            return
        elif kind == "clock_step":
            # Forward by 1..5 minutes, or back to the real time (a step back just as big).
            step = rng.randint(60, 300) if self.clock_offset == 0 else -self.clock_offset
            self.clock_offset += step
            self.clock_file.write_text(f"{self.clock_offset:+d}\n")
            self.last_step_at = time.monotonic()
            self.consumer.clock_offset_ms = self.clock_offset * 1000
            self.consumer.step_at = self.last_step_at
            self.clock_steps.append(step)
            entry["step_seconds"] = step
        else:
            raise ValueError(kind)
        self.chaos_counts[kind] += 1
        entry["end_ms"] = entry["at_ms"] if kind == "clock_step" else int(self.backend_now_ms())
        self.chaos_log.append(entry)

    async def _settlement_down(self, entry: dict[str, Any]) -> None:
        """Settlement's results session goes away for a while; half the time it comes back
        without its session (the broker drops what it queued): only the backend's re-sends
        of unacknowledged results can deliver those."""
        rng = self.rng
        lose = rng.random() < 0.5
        await cancel_and_wait(self._bus_tasks[0])  # the consumer's persistent results session
        down = rng.uniform(1.0, 4.0)
        await asyncio.sleep(down)
        if lose:  # a clean connect under the same client id discards the stored session
            clean = MqttBus(self.broker.url, client_id=self.settle_bus.client_id)
            task = asyncio.create_task(clean.run())
            try:
                async with asyncio.timeout(15):
                    await clean.wait_connected()
            except TimeoutError:
                self.problems.append("chaos: settlement could not reconnect within 15 s (settlement_down)")
            await cancel_and_wait(task)
        self._bus_tasks[0] = asyncio.create_task(self.settle_bus.run())
        entry.update(down_seconds=round(down, 2), session_lost=lose)

    async def _disk_full(self, entry: dict[str, Any]) -> None:
        """The journal's filesystem fills up for a while (a real ENOSPC), then space returns:
        the backend must hold its input, keep every round as it was and carry on."""
        filler = self.journal_fs / "filler"
        alerts = self.journal_alerts
        # SQLite reuses the WAL space it holds: empty the WAL first (a checkpoint any reader may
        # run), so the backend's next commits need new blocks and meet the full disk at once.
        with contextlib.suppress(sqlite3.Error):
            con = sqlite3.connect(self.journal_path, timeout=1)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
        try:
            filled = await asyncio.to_thread(fill_filesystem, filler)
            hold = self.rng.uniform(1.0, 4.0)
            await asyncio.sleep(hold)
        finally:  # space returns even when the soak is cut short here
            filler.unlink(missing_ok=True)
        self.disk_full_windows.append({"hold_seconds": round(hold, 2), "filled_bytes": filled,
                                       "backend_alerted": self.journal_alerts > alerts})
        entry.update(hold_seconds=round(hold, 2), filled_bytes=filled)

    async def _oversize_in_background(self, entry: dict[str, Any]) -> None:
        if await self._oversize_round(entry):
            self.chaos_counts["oversize_round"] += 1
            entry["end_ms"] = int(self.backend_now_ms())
            self.chaos_log.append(entry)

    async def _oversize_round(self, entry: dict[str, Any]) -> bool:
        """Thousands of bets in one round of the big table: its result cannot be one message."""
        ev = await self._wait_event(lambda e: e.get("event") == "round_opened" and e.get("table_id") == BIG_TABLE
                                    and (e.get("data") or {}).get("betting_closes_at", 0) - self.backend_now_ms()
                                    > self.big_betting * 750
                                    and e["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS, timeout=60)
        if ev is None:
            self.problems.append(f"chaos: no round of {BIG_TABLE} opened in time within 60 s (oversize_round)")
            return False
        key = f"{BIG_TABLE}:{ev['round_id']}"
        n, rate = (OVERSIZE_BETS_STUD, OVERSIZE_BETS_PER_SECOND_STUD) if self.stud else (OVERSIZE_BETS,
                                                                                          OVERSIZE_BETS_PER_SECOND)
        sent = await self.consumer.place_many(BIG_TABLE, str(ev["round_id"]), n, rate, id_length=64 if self.stud else 60)
        self.oversize[key] = sent
        entry.update(round=key, bets=sent)
        # the next fault waits for this round's betting to close (a kill now would only drop bets)
        await self._wait_event(lambda e: e.get("event") == "betting_closed" and e.get("round_id") == ev["round_id"],
                               timeout=self.big_betting + 30)
        return True

    async def _kill_house_worker(self, entry: dict[str, Any]) -> bool:
        """SIGKILL the house players' worker process(es) as the house AI's turn starts (it thinks
        for ``ai_budget_ms``): the backend must replace its pool and ask again; the AI moves, never
        the timer (judged with every timer move)."""
        deadline = time.monotonic() + ARMED_SECONDS
        while True:
            ev = await self._wait_event(lambda e: e.get("event") == "turn"
                                        and (e.get("data") or {}).get("player_id") == HOUSE_AI,
                                        timeout=max(0.0, deadline - time.monotonic()))
            if ev is None:
                self.problems.append(f"chaos: no house AI turn within {ARMED_SECONDS:.0f} s (house_worker_kill not "
                                     "injected)")
                return False
            if not self.backend.alive or self._backend_busy or self.backend.proc is None:
                continue
            pids: list[int] = []
            for _ in range(10):  # a pool just started may not have forked its worker yet
                pids = house_worker_pids(self.backend.proc.pid)
                if pids:
                    break
                await asyncio.sleep(0.02)
            if pids:
                break
            self.worker_kill_misses += 1  # no worker yet at this turn: the next one
        entry["at_ms"] = int(self.backend_now_ms())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        key = f"{ev['table_id']}:{ev['round_id']}"
        entry.update(round=key, turn=(ev.get("data") or {}).get("turn"), workers_killed=len(pids),
                     after_ms=round((time.monotonic() - ev["_rx"]) * 1000, 1))
        self.worker_kills.append(dict(entry))
        return True

    async def _broker_loss_in_exposure(self, entry: dict[str, Any]) -> bool:
        """The broker dies while a stud table's exposure window (LAST_CARD) is open: the window
        pauses with the link (the station could not report through it) and runs whole again."""
        deadline = time.monotonic() + ARMED_SECONDS
        while True:
            ev = await self._wait_event(lambda e: e.get("event") == "confirm_window" and not
                                        (e.get("data") or {}).get("resumed")
                                        and self.games.get(e.get("table_id")) == "stud",
                                        timeout=max(0.0, deadline - time.monotonic()))
            if ev is None:
                self.problems.append(f"chaos: no stud exposure window within {ARMED_SECONDS:.0f} s "
                                     "(exposure_broker_loss not injected)")
                return False
            if (self._oversize_task is None or self._oversize_task.done()) and not self._backend_busy:
                break  # not while the big round takes its bets, nor while the backend is down
        key = f"{ev['table_id']}:{ev['round_id']}"
        entry["at_ms"] = await self._broker_down(self.rng.uniform(0.3, 1.2))
        self.must_complete[key] = "broker killed in the stud exposure window (LAST_CARD)"
        entry.update(round=key)
        return True

    def _open_now(self) -> tuple[dict[str, str], dict[str, str]]:
        """(Sevenluck rounds deciding, stud or Seotda rounds with a player's turn open) now, by
        round key: what a backend kill now must not cost a player."""
        deciding: dict[str, str] = {}
        turns: dict[str, str] = {}
        for tid, payload in self.last_event.items():
            game = self.games.get(tid)
            if game not in ("sevenluck", "stud", "seotda"):
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                ev = json.loads(payload)
                data = ev.get("data") or {}
                key = f"{tid}:{ev.get('round_id')}"
                if game == "sevenluck" and ev.get("event") == "decisions_open":
                    deciding[key] = "its players deciding"
                elif ev.get("event") == "turn" and data.get("player_id") != HOUSE_AI:
                    turns[key] = f"{data.get('player_id')}'s turn {data.get('turn')}"
        return deciding, turns

    async def _kill_long(self, entry: dict[str, Any], aim: str) -> bool:
        """Kill the backend while Sevenluck players decide (``backend_down_long``) or while a stud
        or Seotda player's turn is open (``backend_kill_in_turn``), and keep it down past the
        window: on restart they get a whole window again, never the timer's move (judged with
        every timer move). One kill serves both when the other is open at that instant too (its
        kind is then counted, and not injected again in this cycle of the rotation)."""
        if aim == "decision":
            ev = await self._wait_event(lambda e: e.get("event") == "decisions_open", timeout=60)
        else:
            ev = await self._wait_event(lambda e: e.get("event") == "turn" and self.games.get(e.get("table_id")) in
                                        ("stud", "seotda") and not (e.get("data") or {}).get("resumed")
                                        and (e.get("data") or {}).get("player_id") != HOUSE_AI
                                        and e["_rx"] > self.last_step_at + STEP_SETTLE_SECONDS, timeout=60)
        kind = "backend_down_long" if aim == "decision" else "backend_kill_in_turn"
        if ev is None:
            self.problems.append(f"chaos: no {'decisions' if aim == 'decision' else 'stud or Seotda turn'} "
                                 f"opened within 60 s ({kind} not injected)")
            return False
        deciding, turns = self._open_now()
        key = f"{ev['table_id']}:{ev['round_id']}"
        (deciding if aim == "decision" else turns).setdefault(key, "the round aimed at")
        window = max(self.decision_seconds if deciding else 0.0, self.action_seconds if turns else 0.0)
        self._backend_busy = True
        try:
            self.backend.kill()
            down = window * self.rng.uniform(1.2, 1.5)
            await asyncio.sleep(down)
            await self._start_backend()
        finally:
            self._backend_busy = False
        for k, what in deciding.items():
            self.must_not_time_out[k] = f"backend killed with {what}, down {down:.1f} s (window {self.decision_seconds} s)"
        for k, what in turns.items():
            self.must_not_time_out[k] = f"backend killed in {what}, down {down:.1f} s (window {self.action_seconds} s)"
        entry.update(round=key, down_seconds=round(down, 2), deciding=sorted(deciding), turns=sorted(turns))
        other = "backend_kill_in_turn" if aim == "decision" else "backend_down_long"
        if (turns if aim == "decision" else deciding) and other in self.chaos_kinds:
            self.chaos_counts[other] += 1  # this kill was that fault too
            self._served.add(other)
            entry["also"] = other
        return True

    # -- the run ----------------------------------------------------------------------------

    def _diagnose(self) -> str:
        parts = []
        for tid, dealer in zip(self.tids, self.dealers):
            prompt = self.last_prompt.get(tid, b"")
            parts.append(f"{tid}: applied={len(self.applied_per_table[tid])} dealer(in_hand={dealer.in_hand}, "
                         f"dealt={len(dealer.dealt)}, round={dealer._round}) last_prompt={prompt[:300]!r}")
        return "; ".join(parts)

    async def _loop_lag(self) -> None:
        """How late this process's event loop wakes up (a busy simulator delays everything)."""
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            self.loop_lag_ms.append((time.monotonic() - t - 0.01) * 1000)

    async def _play(self) -> None:
        self._tasks.append(asyncio.create_task(self._loop_lag()))
        chaos = self._chaos_task = asyncio.create_task(self._chaos())
        next_report = time.monotonic() + 10
        while True:
            await asyncio.sleep(0.2)
            if time.monotonic() >= next_report:
                next_report += 10
                log.info("soak progress", seconds=round(time.monotonic() - self.t0),
                         results=self.total_applied(),
                         min_table=min(len(s) for t, s in self.applied_per_table.items() if t != BIG_TABLE),
                         chaos=sum(self.chaos_counts.values()))
            if chaos.done() and chaos.exception() is not None:
                raise chaos.exception()  # type: ignore[misc]
            if chaos.done() and all(len(s) >= self.rounds for t, s in self.applied_per_table.items() if t != BIG_TABLE):
                return
            now = time.monotonic()
            if now - self.t0 > self.max_seconds:
                self.problems.append(f"timed out after {self.max_seconds} s before the target: {self._diagnose()}")
                return
            if now - self.last_progress > self.stall_seconds:
                self.problems.append(f"stalled: no new result for {self.stall_seconds} s: {self._diagnose()}")
                return
            stuck = [t for t, at in self.table_progress.items()
                     if now - at > self.stall_seconds and (len(self.applied_per_table[t]) < self.rounds or t == BIG_TABLE)]
            if stuck:
                self.problems.append(f"table(s) {stuck} stalled: no new result for {self.stall_seconds} s: "
                                     f"{self._diagnose()}")
                return
            if not self.backend.alive and not self._backend_busy:
                code = self.backend.proc.returncode if self.backend.proc else None
                self.problems.append(f"the backend exited by itself (code {code}); restarted")
                await self._start_backend()
            broker = self.broker.proc
            if broker is not None and broker.poll() is not None and not self._broker_lock.locked():
                await self._broker_crashed(broker.returncode)

    async def _drain(self) -> None:
        """Stop opening rounds, then wait until every opened round's result is delivered and applied."""
        if self._chaos_task is not None and not self._chaos_task.done():  # a timeout or a stall
            self._chaos_task.cancel()
            await asyncio.gather(self._chaos_task, return_exceptions=True)
            for task in (self._oversize_task, *self._armed):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await asyncio.sleep(1.0)  # a broker start running in a thread finishes
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
        deadline = time.monotonic() + self.drain_seconds
        while True:
            state = self._journal_state()
            waiting = state["open_without_delivery"] + state["outbox"]
            unapplied = [k for k in state["opened_keys"] if k.split(":", 1)[0] in self.applied_per_table
                         and k not in self.applied_per_table[k.split(":", 1)[0]]]
            if not waiting and not unapplied:
                return
            if time.monotonic() > deadline:
                self.problems.append(f"drain timed out after {self.drain_seconds} s: undelivered {waiting[:10]}, "
                                     f"unapplied {unapplied[:10]}: {self._diagnose()}")
                return
            await asyncio.sleep(0.5)

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

    async def _stop(self) -> None:
        for task in (self._chaos_task, self._oversize_task, *self._armed):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if hasattr(self, "backend"):
            await asyncio.to_thread(self.backend.terminate)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0.3)  # let the last PUBACKed deliveries reach the consumer
        for t in self._bus_tasks:
            t.cancel()
        await asyncio.gather(*self._bus_tasks, return_exceptions=True)
        if hasattr(self, "broker"):
            await asyncio.to_thread(self.broker.stop)
        for port in getattr(self, "ports", []):
            port.close()

    def _collect(self) -> SoakData:
        """The journal's side of the reconciliation, across its segment files (the backend has
        stopped), and the outbox left in the live file."""
        opened: dict[str, list[str]] = {t: [] for t in self.tids}
        closed: set[str] = set()
        outbox: list[str] = []
        acked: list[str] | None = None
        try:
            journal = Journal(self.journal_path, fsync=False)
            try:
                acked = []
                for row in journal.rows():
                    if row.type == "open_round":
                        opened.setdefault(row.table_id, []).append(str(row.round_id))
                    elif row.type == "close_betting":
                        closed.add(str(row.round_id))
                    elif row.type == "result_delivered":
                        acked.append(f"{row.table_id}:{row.round_id}")
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
        c = self.consumer.db
        return SoakData(
            tables=list(self.tids), opened=opened, closed=closed, outbox_left=outbox,
            deliveries=self.deliveries,
            applied=[(k, body) for k, body in c.execute("SELECT key, result FROM applied ORDER BY rowid")],
            bets=[tuple(r) for r in c.execute("SELECT bet_id, round_id, player_id, bet_type, stake FROM bets")],  # type: ignore[misc]
            ledger=[tuple(r) for r in c.execute(  # type: ignore[misc]
                "SELECT bet_id, key, player_id, bet_type, stake, outcome, returned FROM ledger")],
            consumer_mismatches=list(self.consumer.mismatches),
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

    def _faults(self) -> dict[str, int]:
        out = {k: self.chaos_counts.get(k, 0) for k in CHAOS_KINDS}
        dealt: Counter[str] = Counter()
        for dealer in getattr(self, "dealers", []):
            dealt.update(dealer.faults_injected)
        for k in LINE_FAULTS + DEALER_FAULTS:
            out[k] = dealt.get(k, 0)
        return out

    async def run(self) -> dict[str, Any]:
        self.t0 = time.monotonic()
        phases: dict[str, float] = {}

        def phase(name: str, since: float) -> float:
            now = time.monotonic()
            phases[name] = round(now - since, 1)
            return now

        t = self.t0
        try:
            await self._start()
            t = phase("start", t)
            self.last_progress = time.monotonic()
            self.table_progress = {t: self.last_progress for t in self.tids}
            await self._play()
            t = phase("play", t)
            await self._drain()
            t = phase("drain", t)
        except Exception as exc:  # reported as a discrepancy, never hidden
            log.exception("soak failed")
            self.problems.append(f"soak aborted: {type(exc).__name__}: {exc}")
        finally:
            await self._stop()
        seconds = time.monotonic() - self.t0
        t = time.monotonic()
        try:
            rec = reconcile(self._collect()) if hasattr(self, "consumer") else Reconciliation([], {})
        finally:
            self._keep_journal()
        phase("reconcile", t)
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
            "results": rec.stats.get("results", 0),
            "completed": rec.stats.get("completed", 0),
            "cancelled": rec.stats.get("cancelled", 0),
            "voided": rec.stats.get("voided", 0),
            "cancelled_by": rec.stats.get("cancelled_by", {}),
            "deliveries": rec.stats.get("deliveries", 0),
            "duplicates_ignored": duplicates,
            "stale_round_opened_ignored": stale,
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
            "games": rec.stats.get("games", {}),
            "seotda_asking_tables": sorted(t for t, spec in self.specs.items() if spec.label == "seotda/prompt"),
            "timer_moves": rec.stats.get("timer_moves", {}),
            "replay": rec.stats.get("replay", {}),
            "peer_money": rec.stats.get("peer_money", {}),
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
            "discrepancy_count": len(discrepancies),
            "discrepancies": discrepancies[:MAX_LISTED] + ([f"... and {len(discrepancies) - MAX_LISTED} more"]
                                                           if len(discrepancies) > MAX_LISTED else []),
            "workdir": str(self.workdir),
        }
        (self.workdir / "chaos.json").write_text(json.dumps(self.chaos_log, indent=1))
        (self.workdir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
        return summary


async def run_soak(tables: int, rounds: int, seed: int, workdir: Path, fault_rate: float, *,
                   card_fault_rate: float | None = None, betting_seconds: float = 0.15, pause_seconds: float = 0.05,
                   deal_interval: float = 0.005, max_seconds: float = 3600.0, stall_seconds: float = 90.0,
                   drain_seconds: float = 120.0, games: str = "all", decision_seconds: float = 6.0,
                   action_seconds: float = 6.0, silent_rate: float = 0.01) -> dict[str, Any]:
    """Run the soak and return its summary (see the module docstring).

    ``fault_rate`` sets both the number of chaos events (``ceil(fault_rate * tables *
    rounds)``, at least one of each kind when > 0) and, unless ``card_fault_rate`` is
    given, the probability per card pass of a reader line fault or dealer mistake, split
    evenly over garbage, noread, torn, drop, repeat, foreign and duplicate.
    """
    soak = _Soak(tables, rounds, seed, Path(workdir), fault_rate, card_fault_rate=card_fault_rate,
                 betting_seconds=betting_seconds, pause_seconds=pause_seconds, deal_interval=deal_interval,
                 max_seconds=max_seconds, stall_seconds=stall_seconds, drain_seconds=drain_seconds,
                 games=games, decision_seconds=decision_seconds, action_seconds=action_seconds,
                 silent_rate=silent_rate)
    return await soak.run()


# ---------------------------------------------------------------------------------------------
# dealer soak
# ---------------------------------------------------------------------------------------------


def _cmd_soak(args: argparse.Namespace) -> int:
    from dealer.cli.args import fail
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    if args.workdir:  # never into a directory that holds anything: the soak writes, mounts and deletes there
        wd = Path(args.workdir)
        if wd.exists() and not wd.is_dir():
            return fail("dealer soak", f"--workdir {wd} is not a directory")
        if wd.is_dir() and any(wd.iterdir()):
            return fail("dealer soak", f"--workdir {wd} is not empty: give a new or empty directory")
    nodes = getattr(args, "nodes", 1)
    if nodes < 2 and getattr(args, "journal", None) is not None:
        return fail("dealer soak", "--journal is for the multi-node soak: give --nodes 2 or more")
    if nodes >= 2:
        from tools import soak_nodes

        journal = args.journal or "auto"
        if journal != "auto":
            why = soak_nodes.check_journal_url(journal)
            if why is not None:
                return fail("dealer soak", why)
    configure_logging(args.log_level)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dealer-soak-"))
    if nodes >= 2:
        summary = run_loop(soak_nodes.run_node_soak(
            nodes, args.tables, args.rounds, args.seed, workdir, journal=journal, lease_seconds=args.lease_seconds,
            fault_every=args.fault_every,
            card_fault_rate=args.fault_rate if args.card_fault_rate is None else args.card_fault_rate,
            betting_seconds=args.betting_seconds, max_seconds=args.max_seconds, games=args.games,
            decision_seconds=args.decision_seconds, chaos=args.fault_every > 0, node_log_level=args.node_log_level,
            action_seconds=args.action_seconds, silent_rate=args.silent_rate))
        print(json.dumps(summary, sort_keys=True))
        return 0 if summary["ok"] else 1
    summary = run_loop(run_soak(args.tables, args.rounds, args.seed, workdir, args.fault_rate,
                                card_fault_rate=args.card_fault_rate, betting_seconds=args.betting_seconds,
                                max_seconds=args.max_seconds, games=args.games,
                                decision_seconds=args.decision_seconds, action_seconds=args.action_seconds,
                                silent_rate=args.silent_rate))
    print(json.dumps(summary, sort_keys=True))
    return 0 if summary["ok"] else 1


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer soak`` to the ``dealer`` command's subparsers."""
    from dealer.cli.args import fraction, int_range, seconds

    p = subparsers.add_parser("soak", help="K tables x M rounds against the real backend process with random "
                              "faults, then reconcile results, bets and chips (JSON summary; exit 1 on a discrepancy)")
    p.add_argument("--tables", type=int_range(1, 1000), default=2, metavar="K", help="tables in the backend (default 2)")
    p.add_argument("--rounds", type=int_range(1, 1_000_000), default=20, metavar="M",
                   help="results per table before the soak winds down")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (faults, cards, bets; default 1)")
    p.add_argument("--fault-rate", type=fraction, default=0.06,
                   help="chaos events per round played (broker restarts, reader unplugs, backend kills, link "
                        "losses before and after betting closes, in rotation) and, unless --card-fault-rate is "
                        "given, the chance per card pass of a line fault or dealer mistake")
    p.add_argument("--card-fault-rate", type=fraction, default=None,
                   help="the chance per card pass of a line fault or dealer mistake (default: --fault-rate)")
    p.add_argument("--betting-seconds", type=seconds(0, 3600), default=0.15, help="betting window of each round "
                   "(default 0.15)")
    p.add_argument("--games", default="all", choices=list(GAME_CHOICES),
                   help="all (default): the five games in turn (stud, Seotda, Matgo, Sevenluck, Teen Patti; every "
                        "second Seotda table asks 9-4 rematches and re-entries); mixed: Sevenluck and Teen Patti; "
                        "or one game at every table")
    p.add_argument("--decision-seconds", type=seconds(0, 3600), default=6.0,
                   help="Sevenluck decision window (its players answer within 0.3 s: a load margin)")
    p.add_argument("--action-seconds", type=seconds(0, 3600), default=6.0,
                   help="turn window of stud, Seotda and Matgo (their players answer within 0.2 s)")
    p.add_argument("--silent-rate", type=fraction, default=0.01,
                   help="share of turns a player leaves to the timer on purpose (counted as player_silent; any "
                        "other timer move on a player's turn is a discrepancy)")
    p.add_argument("--max-seconds", type=seconds(0, 30 * 86_400), default=3600.0,
                   help="give up (and report it) after this long")
    p.add_argument("--nodes", type=int_range(1, 16), default=1, metavar="N",
                   help="backend nodes; 2 or more: the multi-node soak (tools/soak_nodes.py): nodes share a "
                        "PostgreSQL journal and own the tables by lease, while nodes are killed, paused past their "
                        "lease and stopped, and PostgreSQL and the broker restart (default 1)")
    p.add_argument("--journal", metavar="URL|auto", default=None,
                   help="with --nodes: the PostgreSQL journal, an empty database at postgresql://..., or 'auto' "
                        "(default): a private server the soak also kills and restarts (with a URL it cannot, and "
                        "skips postgres_restart)")
    p.add_argument("--lease-seconds", type=seconds(1, 300, allow_low=True), default=3.0,
                   help="with --nodes: each node's [cluster] lease_seconds (default 3; failover target 5 s)")
    p.add_argument("--fault-every", type=seconds(0, 1_000_000, allow_low=True, unit="rounds"), default=4.0, metavar="R",
                   help="with --nodes: one fault every R rounds per table, every second one a node kill or pause, "
                        "the others node stops, PostgreSQL and broker restarts in turn (default 4; 0: no chaos)")
    p.add_argument("--node-log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="with --nodes: each node's log_level (its log is node-N.log in the workdir; default warning)")
    p.add_argument("--workdir", help="a new or empty directory for the broker, journal, ledger and logs "
                                     "(default: a fresh temporary directory, kept)")
    p.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"],
                   help="level of the soak's own JSON log lines on stderr (default error)")
    p.set_defaults(func=_cmd_soak)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.soak")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["soak", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
