"""``dealer soak --nodes N``: the multi-node soak. N backend nodes share one PostgreSQL journal
and own K tables by lease, while nodes are killed, paused past their lease and stopped, and
PostgreSQL and the broker restart; then everything is reconciled.

Everything is real except the people and the hardware: one private Mosquitto, a private
PostgreSQL (``--journal auto``, :class:`simulators.pgserver.PgServer`, which the soak also
kills and restarts) or the one at ``--journal URL`` (an empty database; the soak cannot
restart that server, so ``postgres_restart`` is skipped and the summary says so), and N
``dealer run`` processes, ``node-1`` .. ``node-N``, each from a TOML of its own with the same
tables and journal. Scanners report over MQTT (``kind = "mqtt"``: a scanner gateway is not
wired to one host), so any node can deal any table; the virtual dealers keep their line
faults (the gateway drops what it cannot decode: the seq gap tells the backend) and their
mistakes (foreign and duplicate cards). Settlement, bettors and Sevenluck players are
``tools/soak_parts.py``'s.

Chaos, one fault at a time, one every ``--fault-every`` rounds (the mean over tables; a fault
waits for the one before it to end, its node back and its tables taken over): every second
fault is a node kill or pause, so one comes at least every ``2 * --fault-every`` rounds, and
the others come in turn between them (:func:`plan_chaos`):

* ``node_kill``: SIGKILL a node that holds tables; start it again 1-4 s later;
* ``node_pause``: SIGSTOP it for ``lease_seconds`` + 1.5..3 s (past its lease), then SIGCONT:
  its tables must have moved, and it must write nothing more under its old leases;
* ``node_term``: SIGTERM (it hands its tables over at once); start it again 0.5-2 s later;
* ``postgres_restart``: PostgreSQL SIGKILLed (every process) and started again (``auto`` only);
* ``broker_restart``: Mosquitto SIGKILLed and started again on its port.

Then the drain (the nodes restarted with ``auto_rounds = false``; every opened round's
result delivered, applied and acknowledged) and the reconciliation: everything
:func:`tools.soak_reconcile.reconcile` checks (each opened round exactly one applied result, every bet
one ledger line at the right amount, chips conserved, nobody timed out by the decision
timer), plus :mod:`tools.soak_ownership`: one writer per table at a time (epochs only go up
along each table's chain, one node per epoch, the node its lease named, and no row of an
epoch committed after a later epoch's lease had committed), the chains' shape, and
``PgJournal.verify_chain`` (the hashes).

**Failover time**, per node fault and per table the victim held when the signal went: from
that instant to the first journal row of the table's next epoch (its commit), or, when that
epoch wrote no row, to its lease's ``acquired_at``. One clock, the database's: the fault
instant is ``clock_timestamp()`` read in the query that lists the victim's leases, just
before the signal; a row's time is its commit timestamp (the soak's own PostgreSQL runs with
``track_commit_timestamp = on``). On a database without commit timestamps (an explicit
``--journal URL``) a row's time is its ``recorded_at`` (the writing node's clock, this host's)
moved onto the database's clock by the offset measured at each fault.

The summary is one JSON object: ``discrepancies``, ``failover_s`` (p50, p99, max, count,
overall and per kind), fault counts, the ownership figures and everything the single-node
soak reports about rounds, bets and chips.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import structlog

from dealer.edge import topics
from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.feed import events_of, prompts_of
from simulators.pgserver import PgServer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, MqttShoeLink, StationScreen, VirtualDealer
from tools.soak_parts import (
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
from tools.soak_reconcile import Reconciliation, SoakData, reconcile
from tools.soak_base import SoakRun, consumer_rows, discrepancies_summary, games_summary, rounds_of, rounds_summary
from tools.soak_node_faults import CHAOS_KINDS, CHAOS_NEEDS, NodeFaults, NodeProcess, plan_chaos
from tools.soak_games import TURN_GAMES, TableSpec, table_specs
from tools.soak_judge import Replay, replay
from tools.soak_players import turns_left_to_timer
from tools.soak_ownership import (
    EventRow,
    Failover,
    LeaseSeen,
    NodeFault,
    check_chains,
    check_ownership,
    failover_summary,
    failover_times,
    quantiles,
)

log = structlog.get_logger("tools.soak_nodes")

DATABASE = "soak"
#: How often the soak reads ``leases`` (it records every lease it sees, with its commit time).
LEASE_POLL_SECONDS = 0.1
NODE_SERVICE = "result_resend_seconds = 2\nresult_resend_max_seconds = 10\nhouse_workers = 1\n"


def node_ids(n: int) -> list[str]:
    return [f"node-{i}" for i in range(1, n + 1)]


def write_node_config(path: Path, *, node_id: str, journal_url: str, broker_url: str,
                      tables: Sequence[tuple[str, str, str]], lease_seconds: float, betting_seconds: float,
                      pause_seconds: float, auto_rounds: bool = True, decision_seconds: float = 6.0,
                      heartbeat_timeout: float = 3.0, log_level: str = "warning",
                      options: dict[str, dict[str, Any]] | None = None, action_seconds: float = 6.0,
                      betting_overrides: dict[str, float] | None = None,
                      action_overrides: dict[str, float] | None = None) -> Path:
    """One node's TOML: the shared journal and tables (id, MQTT reader, game), its own node id;
    each table with its ``options`` (default: Sevenluck's seats)."""
    stud = any(game == "stud" for _, _, game in tables)
    parts = [f"""[service]
node_id = "{node_id}"
journal_url = "{journal_url}"
metrics_enabled = false
log_level = "{log_level}"
{NODE_SERVICE}{"max_message_bytes = 65536" if stud else ""}
[cluster]
lease_seconds = {lease_seconds}

[mqtt]
url = "{broker_url}"
"""]
    for tid, reader, game in tables:
        parts.append(table_toml(tid, game, f'kind = "mqtt"\nreader_id = "{reader}"\nheartbeat_timeout = {heartbeat_timeout}\n',
                                betting_seconds=betting_seconds, pause_seconds=pause_seconds, auto_rounds=auto_rounds,
                                decision_seconds=decision_seconds, action_seconds=action_seconds, options=options,
                                betting_overrides=betting_overrides, action_overrides=action_overrides))
    return write_toml(path, parts)


class _NodeSoak(NodeFaults, SoakRun):
    """One ``dealer soak --nodes N`` run (see the module docstring)."""

    log = log
    CHAOS_KINDS = CHAOS_KINDS

    def __init__(self, nodes: int, tables: int, rounds: int, seed: int, workdir: Path, *, journal: str,
                 lease_seconds: float, fault_every: float, card_fault_rate: float, betting_seconds: float,
                 pause_seconds: float, deal_interval: float, decision_seconds: float, max_seconds: float,
                 stall_seconds: float, drain_seconds: float, games: str, chaos: bool = True,
                 node_log_level: str = "warning", action_seconds: float = 6.0, silent_rate: float = 0.01) -> None:
        if nodes < 2:
            raise ValueError("the multi-node soak needs at least two nodes")
        if tables < 1 or rounds < 1:
            raise ValueError("a soak needs at least one table and one round")
        self.n_nodes, self.n_tables, self.rounds, self.seed = nodes, tables, rounds, seed
        self.workdir = Path(workdir)
        self.journal_arg = journal
        self.auto_pg = journal == "auto"
        self.lease_seconds, self.fault_every = lease_seconds, fault_every
        self.card_fault_rate = card_fault_rate
        self.betting_seconds, self.pause_seconds, self.deal_interval = betting_seconds, pause_seconds, deal_interval
        self.decision_seconds = decision_seconds
        self.max_seconds, self.stall_seconds, self.drain_seconds = max_seconds, stall_seconds, drain_seconds
        self.chaos_on = chaos
        self.node_log_level = node_log_level
        self.rng = random.Random(seed)
        self.ids = table_ids(tables)
        self.tids = [t for t, _ in self.ids]
        self.specs: dict[str, TableSpec] = dict(zip(self.tids, table_specs(tables, games)))
        self.games = {t: spec.game for t, spec in self.specs.items()}
        self.action_seconds, self.silent_rate = action_seconds, silent_rate
        self.kinds = tuple(k for k in CHAOS_KINDS if (self.auto_pg or k != "postgres_restart")
                           and (k not in CHAOS_NEEDS or CHAOS_NEEDS[k] in self.games.values()))
        self.replayed: Replay | None = None
        self.rematch_moves: list[dict[str, Any]] = []
        self._waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[dict[str, Any]]]] = []
        self.skipped: dict[str, str] = {} if self.auto_pg else {
            "postgres_restart": "--journal names a server the soak did not start: it cannot kill and restart it"}
        self.problems: list[str] = []
        self.chaos_counts: Counter[str] = Counter()
        self.chaos_log: list[dict[str, Any]] = []
        self.node_faults: list[NodeFault] = []
        self.pause_checks: list[dict[str, Any]] = []
        self.must_not_time_out: dict[str, str] = {}
        self.leases_seen: dict[tuple[str, int], LeaseSeen] = {}
        self.lease_expiries: dict[tuple[str, int], float] = {}  # the latest expires_at seen of each lease
        self.lease_now: dict[str, tuple[str | None, int, float]] = {}  # table -> (node, epoch, expires_at)
        self.db_now = 0.0  # the database clock at the last lease poll
        #: a node back from a fault (restarted, or resumed and stepped down) -> the database time it
        #: came back; removed when it holds its even share of the tables again (rebalancing)
        self.rejoining: dict[str, float] = {}
        self.rejoin_s: list[float] = []  # back -> its share held again, per comeback
        self.rejoin_cut_short = 0  # comebacks ended by the node's next fault (or the run's end) first
        self.clock_offsets: list[float] = []  # database clock - this host's clock, at each fault
        self.commit_times = False
        self.applied_per_table: dict[str, set[str]] = {t: set() for t in self.tids}
        self.deliveries: dict[str, list[bytes]] = {}
        self.last_progress = time.monotonic()
        self.table_progress = {t: self.last_progress for t in self.tids}
        self.last_event: dict[str, dict[str, Any]] = {}  # table -> its latest round event (event, round_id)
        self.instances: dict[str, set[str]] = {n: set() for n in node_ids(nodes)}
        self.online_at: dict[str, float] = {n: 0.0 for n in node_ids(nodes)}
        self.loop_lag_ms: list[float] = []
        self.pg_restarts_s: list[float] = []
        self._busy: set[str] = set()  # nodes the chaos is stopping and starting
        self._chaos_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._bus_tasks: list[asyncio.Task[Any]] = []
        self.startup_s: float | None = None  # database, broker and every node online
        self.pg: PgServer | None = None
        self.url = ""

    # -- set-up ------------------------------------------------------------------------------

    def _configs(self, auto_rounds: bool) -> None:
        for node in self.nodes.values():
            write_node_config(node.config, node_id=node.node_id, journal_url=self.url, broker_url=self.broker.url,
                              tables=[(t, r, self.games[t]) for t, r in self.ids], lease_seconds=self.lease_seconds,
                              betting_seconds=self.betting_seconds, pause_seconds=self.pause_seconds,
                              auto_rounds=auto_rounds, decision_seconds=self.decision_seconds,
                              log_level=self.node_log_level, action_seconds=self.action_seconds,
                              action_overrides=matgo_windows(self.games, self.action_seconds),
                              options={t: spec.options for t, spec in self.specs.items()},
                              betting_overrides={t: max(self.betting_seconds, PEER_BETTING_SECONDS)
                                                 for t, g in self.games.items() if g in TURN_GAMES})

    async def _start_database(self) -> None:
        if self.auto_pg:
            self.pg = PgServer(self.workdir)
            await asyncio.to_thread(self.pg.start)
            # commit times: the one clock the failover times and the fencing check are read on
            await asyncio.to_thread(self.pg.psql, "postgres", "ALTER SYSTEM SET track_commit_timestamp = on")
            await asyncio.to_thread(self.pg.stop)
            await asyncio.to_thread(self.pg.start)
            self.url = await asyncio.to_thread(self.pg.create_database, DATABASE)
        else:
            self.url = self.journal_arg
        with await asyncio.to_thread(psycopg.connect, self.url, connect_timeout=10, autocommit=True) as con:
            self.commit_times = con.execute("SELECT current_setting('track_commit_timestamp')").fetchone()[0] == "on"

    async def _start(self) -> None:
        wd = self.workdir
        wd.mkdir(parents=True, exist_ok=True)
        if (wd / "ledger.sqlite").exists():
            raise FileExistsError(f"{wd} already holds a soak run (ledger.sqlite): use a new workdir")
        (wd / "broker").mkdir(exist_ok=True)
        await self._start_database()
        self.broker = MosquittoProcess(wd / "broker", save_on_every_change=False)
        await asyncio.to_thread(self.broker.start)
        self.nodes = {n: NodeProcess(n, wd / f"{n}.toml", wd / f"{n}.log") for n in node_ids(self.n_nodes)}
        self._configs(auto_rounds=True)

        url = self.broker.url
        self.settle_bus = MqttBus(url, client_id="soak-settlement", persistent_session=True)
        self.live_bus = MqttBus(url, client_id="soak-bettors")
        self.dealer_bus = MqttBus(url, client_id="soak-dealers", persistent_session=True)
        self.monitor = MqttBus(url, client_id="soak-monitor", accept_retained=True)
        self.consumer = SoakConsumer(SplitBus(durable=self.settle_bus, live=self.live_bus), list(self.tids),
                                      wd / "ledger.sqlite", rng=random.Random(self.seed + 1),
                                      players=SEVENLUCK_SEATS, games=dict(self.games), plans=peer_plans(self.specs))
        self.consumer.db.execute("PRAGMA synchronous=NORMAL")
        self.player_buses, self.players = make_players_of(url, self.specs, self.seed, self.silent_rate)
        for tid in self.tids:
            self.settle_bus.subscribe(topics.results(tid), self._on_result)
        p = self.card_fault_rate / (len(LINE_FAULTS) + len(DEALER_FAULTS))
        self.dealers: list[VirtualDealer] = []
        self.screens: list[StationScreen] = []
        for i, (tid, reader) in enumerate(self.ids):
            dealer = make_soak_dealer(
                self.games[tid], tid, VirtualShoe(reader), MqttShoeLink(self.dealer_bus, tid), self.dealer_bus,
                rng=random.Random(self.seed * 7919 + i),
                faults=FaultPlan(garbage=p, noread=p, torn=p, drop=p, repeat=p),
                dealer_faults=DealerFaults(foreign=p, duplicate=p),
                deal_interval=self.deal_interval, heartbeat_interval=0.5, patience=0.5)
            screen = StationScreen(dealer)
            self.dealer_bus.subscribe(topics.state(tid), prompts_of(screen.on_prompt))
            self.screens.append(screen)
            self.dealers.append(dealer)
        self.monitor.subscribe(topics.table_topic("+", "events"), self._on_event)  # refusals
        self.monitor.subscribe(topics.table_topic("+", "state"), events_of(self._on_event))
        for n in self.nodes:
            self.monitor.subscribe(topics.backend_status(n), self._status_handler(n))

        buses = (self.settle_bus, self.live_bus, self.dealer_bus, self.monitor, *self.player_buses)
        for bus in buses:
            self._bus_tasks.append(asyncio.create_task(bus.run()))
        for bus in buses:
            async with asyncio.timeout(15):
                await bus.wait_connected()
        self._tasks.append(asyncio.create_task(self._watch_leases()))
        # every node at once: they race to lay the schema down on the empty database (one does)
        await asyncio.gather(*(self._start_node(n) for n in self.nodes.values()))
        self._tasks += [asyncio.create_task(d.run()) for d in self.dealers]

    def _status_handler(self, node_id: str) -> Callable[[str, bytes], None]:
        """A node's retained status: a start counts when a new instance (the first part of its
        ``session``) says online, never a killed instance's retained "online"."""
        def on_status(topic: str, payload: bytes) -> None:
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                status = json.loads(payload)
                if status.get("online") is True:
                    instance = str(status.get("session") or "").split(".")[0]
                    if instance not in self.instances[node_id]:
                        self.instances[node_id].add(instance)
                        self.online_at[node_id] = time.monotonic()
        return on_status

    async def _start_node(self, node: NodeProcess, timeout: float = 60.0) -> None:
        t = time.monotonic()
        node.start()
        try:
            async with asyncio.timeout(timeout):
                while self.online_at[node.node_id] < t:
                    if not node.alive:
                        code = node.proc.returncode if node.proc else None
                        raise RuntimeError(f"{node.node_id} exited with {code} at start (see {node.log_path})")
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise RuntimeError(f"{node.node_id} did not come online within {timeout} s (see {node.log_path})") from None

    # -- what the soak hears and reads -----------------------------------------------------------

    def _on_event(self, topic: str, payload: bytes) -> None:
        tid = topics.table_of(topic) or "?"
        with contextlib.suppress(ValueError, AttributeError):
            ev = json.loads(payload)
            data = ev.get("data") or {}
            self.last_event[tid] = {"event": ev.get("event"), "round_id": ev.get("round_id"),
                                    "player_id": data.get("player_id"), "turn": data.get("turn")}
            if self.games.get(tid) in TURN_GAMES:
                self.table_progress[tid] = time.monotonic()  # a long round is not a stalled table
            for pred, fut in list(self._waiters):
                if not fut.done() and pred(ev):
                    fut.set_result(ev)

    async def _watch_leases(self) -> None:
        """Read ``leases`` every LEASE_POLL_SECONDS, recording every (table, epoch) seen: its
        node, ``acquired_at`` and the commit time of the row version seen first."""
        cts = ", extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8" if self.commit_times else ", NULL"
        sql = ("SELECT table_id, node, epoch, extract(epoch FROM acquired_at)::float8, "
               "extract(epoch FROM expires_at)::float8" + cts + ", extract(epoch FROM clock_timestamp())::float8 "
               "FROM leases")
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=2) as con:
                    while True:
                        for tid, node, epoch, acquired, expires, committed, now in await (await con.execute(sql)).fetchall():
                            self.db_now = now
                            self.lease_now[tid] = (node, int(epoch), expires)
                            key = (tid, int(epoch))
                            if node is not None:
                                if key not in self.leases_seen:
                                    self.leases_seen[key] = LeaseSeen(tid, int(epoch), node, acquired, committed)
                                self.lease_expiries[key] = max(expires, self.lease_expiries.get(key, expires))
                        self._note_rejoins()
                        await asyncio.sleep(LEASE_POLL_SECONDS)
            except (psycopg.Error, OSError):
                await asyncio.sleep(0.2)

    def _rejoined(self, node: str) -> None:
        """``node`` is back from a fault (restarted, or resumed): time its share's return."""
        self.rejoining[node] = self.db_now

    def _note_rejoins(self) -> None:
        share = len(self.tids) // len(self.nodes)
        for node, since in list(self.rejoining.items()):
            held = sum(1 for n, _, expires in self.lease_now.values() if n == node and expires > self.db_now)
            if held >= share and self.db_now > since:
                self.rejoin_s.append(self.db_now - since)
                del self.rejoining[node]

    async def _db(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            with psycopg.connect(self.url, connect_timeout=5, autocommit=True) as con:
                return con.execute(sql, args).fetchall()
        return await asyncio.to_thread(run)

    # -- the run ----------------------------------------------------------------------------

    def _diagnose(self) -> str:
        parts = []
        for tid, dealer in zip(self.tids, self.dealers):
            lease = self.lease_now.get(tid)
            parts.append(f"{tid}: applied={len(self.applied_per_table[tid])} lease={lease} "
                         f"last_event={self.last_event.get(tid)} dealer(in_hand={dealer.in_hand}, dealt={len(dealer.dealt)})")
        return "; ".join(parts)

    async def _watch_processes(self) -> None:
        for node in self.nodes.values():
            if not node.alive and node.node_id not in self._busy:
                code = node.proc.returncode if node.proc else None
                self.problems.append(f"{node.node_id} exited by itself (code {code}); restarted")
                await self._start_node(node)

    async def _drain(self) -> None:
        """Stop opening rounds (every node restarted with ``auto_rounds = false``), then wait
        until every opened round's result is delivered, applied and acknowledged."""
        await self._cancel_chaos()
        if self.pg is not None and self.pg.proc is None:
            await asyncio.to_thread(self.pg.start)
        if self.broker.proc is None:
            await asyncio.to_thread(self.broker.start)
        self._configs(auto_rounds=False)
        for node in self.nodes.values():
            node.resume()
        self._busy.update(self.nodes)
        try:  # each node reloads in place (SIGHUP: auto_rounds = false applies at once); one that cannot restarts
            reloaded = await asyncio.gather(*(reload_process(n, self.problems) if n.alive else _false()
                                              for n in self.nodes.values()))
            again = [n for n, ok in zip(self.nodes.values(), reloaded) if not ok]
            await asyncio.gather(*(asyncio.to_thread(n.term) for n in again))
            await asyncio.gather(*(self._start_node(n) for n in again))
        finally:
            self._busy.clear()
        await self._await_drained()

    async def _undone(self) -> tuple[list[str], list[str]]:
        opened, waiting = await self._journal_state()
        return waiting, [k for k in opened if k not in self.applied_per_table.get(k.split(":", 1)[0], ())]

    async def _journal_state(self) -> tuple[list[str], list[str]]:
        """(every opened round's key, the keys still waiting: no acknowledgement journaled or
        still in the outbox)."""
        try:
            rows = await self._db(
                "SELECT e.table_id, e.round_id, EXISTS (SELECT 1 FROM events d WHERE d.table_id = e.table_id "
                "AND d.type = 'result_delivered' AND d.round_id = e.round_id) FROM events e WHERE e.type = 'open_round'")
            outbox = [k for (k,) in await self._db("SELECT key FROM outbox ORDER BY id")]
        except psycopg.Error as exc:
            return [], [f"(journal unreadable: {exc})"]
        opened = [f"{t}:{r}" for t, r, _ in rows]
        return opened, [f"{t}:{r}" for t, r, d in rows if not d] + outbox

    async def _stop_processes(self) -> None:
        for node in getattr(self, "nodes", {}).values():
            node.resume()
        await asyncio.gather(*(asyncio.to_thread(n.term) for n in getattr(self, "nodes", {}).values()))

    # -- reconciliation -----------------------------------------------------------------------

    def _read_journal(self) -> tuple[list[EventRow], list[str], str | None]:
        """Every events row, the outbox left, and the chain verification's complaint (None: ok)."""
        offset = sorted(self.clock_offsets)[len(self.clock_offsets) // 2] if self.clock_offsets else 0.0
        cts = "extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8" if self.commit_times else "NULL::float8"
        with psycopg.connect(self.url, connect_timeout=10, autocommit=True) as con:
            rows = [EventRow(i, t, int(s), n, int(e), ty, r, ph, h,
                             at if at is not None else (rec / 1000 + offset if not self.commit_times else None),
                             None if made is None else int(made) / 1000 + offset)
                    for i, t, s, n, e, ty, r, ph, h, rec, at, made in con.execute(
                        "SELECT id, table_id, seq, node, epoch, type, round_id, prev_hash, hash, recorded_at, "
                        f"{cts}, body::json->>'at' FROM events ORDER BY table_id, seq")]
            outbox = [k for (k,) in con.execute("SELECT key FROM outbox ORDER BY id")]
        return rows, outbox, self._verify_chain()

    def _replay(self) -> Replay:
        """Every table's journal replayed through the core (tools/soak_judge.py)."""
        from dealer.edge.journal_pg import PgJournal

        journal = PgJournal.open_read_only(self.url)
        try:
            return replay(journal, self.tids)
        finally:
            journal.close()

    def _verify_chain(self) -> str | None:
        """``PgJournal.verify_chain``: every row's hash over its content and the previous hash."""
        from dealer.edge.journal_pg import PgJournal  # the PostgreSQL journal (dealer/edge/journal_pg.py)

        journal = PgJournal.open_read_only(self.url)
        try:
            report = journal.verify_chain()
        finally:
            journal.close()
        return None if report.ok else report.reason or f"chain broken at row {report.first_broken}"

    def _collect(self) -> tuple[SoakData, list[EventRow]]:
        rows: list[EventRow] = []
        outbox: list[str] = []
        try:
            rows, outbox, chain = self._read_journal()
            if chain is not None:
                self.problems.append(f"the journal's hash chain does not verify: {chain}")
            self.replayed = self._replay()
        except (psycopg.Error, OSError, RuntimeError, ValueError) as exc:  # JournalError is a ValueError
            self.problems.append(f"cannot read the journal at {self.url}: {exc}")
        opened, closed, acked = rounds_of(rows, self.tids)  # in chain order per table
        data = SoakData(
            tables=list(self.tids), opened=opened, closed=closed, outbox_left=outbox, deliveries=self.deliveries,
            **consumer_rows(self.consumer), must_not_time_out=dict(self.must_not_time_out),
            acked=acked, replay=self.replayed, silent_turns=turns_left_to_timer(self.players), games=dict(self.games),
            faults=[(e["kind"], e["at_ms"], e["end_ms"]) for e in self.chaos_log if "end_ms" in e])
        return data, rows

    async def run(self) -> dict[str, Any]:
        phases: dict[str, float] = {}
        seconds = await self._run_phases(phases)
        self.startup_s = phases.get("start")  # database, broker and every node online
        rec, rows = Reconciliation([], {}), []
        if hasattr(self, "consumer"):
            data, rows = self._collect()
            rec = reconcile(data)
        if self.pg is not None:
            await asyncio.to_thread(self.pg.stop)  # kept in the workdir for inspection
        leases = list(self.leases_seen.values())
        ownership, own_stats = check_ownership(rows, leases)
        chains = check_chains(rows)
        failovers, never = failover_times(self.node_faults, rows, leases, self.lease_expiries)
        pauses, paused_wrote = self._judge_pauses(rows)
        node_logs: dict[str, dict[str, int]] = {}
        for n in node_ids(self.n_nodes):
            path = self.workdir / f"{n}.log"
            node_logs[n] = scan_backend_log(path.read_text(errors="replace") if path.exists() else "")
            node_logs[n]["fatal_errors"] = _fatal_errors(path)
            if node_logs[n]["tracebacks"] or node_logs[n]["fatal_errors"]:
                self.problems.append(f"{n} logged {node_logs[n]['tracebacks']} traceback(s) and "
                                     f"{node_logs[n]['fatal_errors']} fatal error(s): see {path}")
        discrepancies = self.problems + ownership + chains + never + paused_wrote + rec.discrepancies
        per_table = [len(s) for s in self.applied_per_table.values()]
        if hasattr(self, "consumer"):
            duplicates, stale = self.consumer.duplicates, self.consumer.stale_openings
            acks_sent = self.consumer.acks_sent
            self.consumer.close()
        else:
            duplicates = stale = acks_sent = 0
        summary: dict[str, Any] = {
            "ok": not discrepancies,
            "nodes": self.n_nodes,
            "tables": self.n_tables,
            "rounds": {"target": self.rounds, "min": min(per_table), "total": sum(per_table)},
            "seconds": round(seconds, 1),
            "startup_s": self.startup_s,
            "seed": self.seed,
            "lease_seconds": self.lease_seconds,
            "fault_every_rounds": self.fault_every,
            "card_fault_rate": self.card_fault_rate,
            "journal": {"postgres": "private (--journal auto)" if self.auto_pg else "given (--journal URL)",
                        "commit_timestamps": self.commit_times, "rows": len(rows),
                        "clock": "database" if self.commit_times else "database (row times: recorded_at + offset)"},
            "faults": self._faults(),
            "faults_skipped": self.skipped,
            "failover_s": failover_summary(failovers),
            # a node back from a fault: until it holds its even share (tables // nodes) again
            "rebalance_s": quantiles(self.rejoin_s) | {"cut_short_by_next_fault": self.rejoin_cut_short,
                                                       "unfinished_at_end": len(self.rejoining)},
            "ownership": own_stats,
            "pauses": pauses,
            "postgres_restart_s": quantiles(self.pg_restarts_s),
            **rounds_summary(rec, duplicates, stale),
            **games_summary(rec, self.specs, self._per_game(rec.stats.get("games", {}), failovers)),
            "lease_moves_in_rematch": self.rematch_moves,
            "players": {"turns_left_to_timer": len(turns_left_to_timer(getattr(self, "players", []))),
                        "turns_answered_from_state": sum(getattr(p, "from_state", 0) for p in getattr(self, "players", []))},
            "decisions": rec.stats.get("decisions", {}),
            "decisions_judged_after_node_faults": len(self.must_not_time_out),
            "acks_journaled": rec.stats.get("acks"),
            "settlement": {"acks_sent": acks_sent},
            "bets": rec.stats.get("bets", {}),
            "chips": rec.stats.get("chips", {}),
            "node_logs": node_logs,
            "node_starts": {n.node_id: n.starts for n in getattr(self, "nodes", {}).values()},
            "simulator_loop_lag_ms": {k: round(v, 1) for k, v in quantiles(self.loop_lag_ms).items() if k != "count"},
            **discrepancies_summary(discrepancies, self.workdir),
        }
        self._write_summary(summary)
        (self.workdir / "failovers.json").write_text(json.dumps([_failover_dict(f) for f in failovers], indent=1))
        return summary

    def _per_game(self, games: dict[str, dict[str, Any]], failovers: Sequence[Failover]) -> dict[str, dict[str, Any]]:
        """Per game: what the reconciliation counted, and its tables' failover times (target: p99
        at most 5 s; reported, never asserted: a loaded host is no verdict on the code)."""
        for game, row in games.items():
            times = [f.seconds for f in failovers if self.games.get(f.table_id) == game and f.seconds is not None]
            row["failover_s"] = quantiles(times)
        return games

    def _judge_pauses(self, rows: Sequence[EventRow]) -> tuple[list[dict[str, Any]], list[str]]:
        """Per pause: the rows the paused node committed under the leases it held when it was
        stopped, after it was resumed (none may be, where its table had been taken over)."""
        out: list[dict[str, Any]] = []
        problems: list[str] = []
        for check in self.pause_checks:
            node, resumed, held = check["node"], check["resumed_at"], check["held"]
            late = [r for r in rows if r.node == node and held.get(r.table_id) == r.epoch
                    and r.at is not None and r.at > resumed]
            taken = {t for t, e in held.items() if any(lease.table_id == t and lease.epoch > e
                                                       and lease.acquired_at < resumed
                                                       for lease in self.leases_seen.values())}
            bad = [r for r in late if r.table_id in taken]
            out.append({"node": node, "paused_s": check["paused_s"], "tables": check["tables"],
                        "taken_over_while_paused": len(taken), "old_lease_rows_after_resume": len(bad)})
            problems += [f"{node} (paused {check['paused_s']} s) wrote seq {r.seq} of {r.table_id} under its old "
                         f"epoch {r.epoch} after it was resumed and the table had been taken over" for r in bad[:20]]
        return out, problems


async def _false() -> bool:
    return False


def _fatal_errors(path: Path) -> int:
    """Crashes below Python (faulthandler's "Fatal Python error" lines) in a node's log."""
    try:
        return sum(1 for line in path.read_text(errors="replace").splitlines() if line.startswith("Fatal Python error"))
    except OSError:
        return 0


def _failover_dict(f: Failover) -> dict[str, Any]:
    return {"kind": f.kind, "node": f.node, "table": f.table_id, "seconds": f.seconds, "epoch": f.epoch,
            "by": f.by, "measured_to": f.measured_to, "lease_seconds": f.lease_seconds, "takeover": f.takeover}


async def run_node_soak(nodes: int, tables: int, rounds: int, seed: int, workdir: Path, *, journal: str = "auto",
                        lease_seconds: float = 3.0, fault_every: float = 4.0, card_fault_rate: float = 0.06,
                        betting_seconds: float = 0.15, pause_seconds: float = 0.05, deal_interval: float = 0.005,
                        decision_seconds: float = 6.0, max_seconds: float = 3600.0, stall_seconds: float = 90.0,
                        drain_seconds: float = 120.0, games: str = "all", chaos: bool = True,
                        node_log_level: str = "warning", action_seconds: float = 6.0,
                        silent_rate: float = 0.01) -> dict[str, Any]:
    """Run the multi-node soak and return its summary (see the module docstring)."""
    soak = _NodeSoak(nodes, tables, rounds, seed, Path(workdir), journal=journal, lease_seconds=lease_seconds,
                     fault_every=fault_every, card_fault_rate=card_fault_rate, betting_seconds=betting_seconds,
                     pause_seconds=pause_seconds, deal_interval=deal_interval, decision_seconds=decision_seconds,
                     max_seconds=max_seconds, stall_seconds=stall_seconds, drain_seconds=drain_seconds, games=games,
                     chaos=chaos, node_log_level=node_log_level, action_seconds=action_seconds,
                     silent_rate=silent_rate)
    return await soak.run()


def check_journal_url(url: str) -> str | None:
    """Why ``--journal URL`` cannot be soaked (None: it can): not PostgreSQL, unreachable, or
    a database that already holds a journal (the soak reconciles everything in it)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return f"--journal {url!r}: give a postgresql:// URL or 'auto'"
    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as con:
            row = con.execute("SELECT to_regclass('events') IS NOT NULL").fetchone()
            if row and row[0] and con.execute("SELECT EXISTS (SELECT 1 FROM events)").fetchone()[0]:
                return f"--journal {url}: the database already holds a journal; the soak needs an empty one"
    except psycopg.Error as exc:
        return f"--journal {url}: cannot connect: {' '.join(str(exc).split())}"
    return None


__all__ = ["CHAOS_KINDS", "check_journal_url", "node_ids", "plan_chaos", "run_node_soak", "write_node_config"]
