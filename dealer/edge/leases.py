"""Table ownership by lease between backend nodes that share a PostgreSQL journal.

A node deals a table only while it holds the table's row in ``leases`` (pg_schema.sql): its
node id, an epoch (+1 at every acquisition, the fencing token every journal row carries) and
an expiry set by the database's clock. The database refuses a journal row whose (node,
epoch) is not the table's unexpired lease, so a node that was paused or cut off can never
write after another took over; this module only decides who takes what, when.

Two loops per node:

* renewal, every ``[cluster] renew`` seconds: one statement beats the node's heartbeat and
  renews all of its leases (only if the heartbeat row is still this process's session); a
  lease not renewed is lost. Each lease is also valid *locally* until the monotonic clock
  at the start of its last successful renewal + lease - renew: a node that was paused
  (SIGSTOP) or cut off finds every lease invalid before it talks to the database again.
* placement, on every renewal period and at once on a NOTIFY ``dealer_leases`` (a release,
  a node joining or leaving): read live nodes and leases, place tables (dealer/core/
  placement.py via lease_plan.py), take the free or expired leases placed here, hand the
  tables placed elsewhere over between rounds.

A lease says who may write a table; a node that cannot write its journal is no use holding one.
The commit loop reports how long it has been trying to write without success
(:meth:`LeaseManager.watch_journal`). Past a renewal period this node takes no table; past a
whole lease it gives every table up: it stops renewing them, drops them (their held rows are
never written: the fence and the epoch check refuse them), marks its ``nodes`` row ``leaving`` so
the others no longer place tables here, and releases the leases (NOTIFY: another node takes them
at once, replays them and resumes their rounds with full new windows). Once the journal commits
again (an empty commit proves it when nothing else is held) the row is marked serving again and
tables come back by normal placement (between rounds).

The caller (the node runtime) gives three callbacks to :meth:`LeaseManager.run`:
``adopt(table, epoch)`` after a lease is taken (replay and resume the table), ``drop(table,
reason)`` before a lease is released and after one is lost (stop dealing it), and
``idle(table)`` (no round in play: a rebalancing move waits for it). Callbacks are awaited
in the manager's task: they should schedule long work rather than do it.

Connections are our own (one for statements, one for LISTEN) rather than a psycopg_pool:
the pool reconnects with an unbounded exponential backoff (1, 2, 4, 8 ... s) and libpq's
connect timeout is at least 2 s, while a lease manager must notice a dead database and come
back within a fraction of a lease. Every statement runs under a deadline; a statement that
does not answer (a paused server) closes its connection.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, TypeVar

import psycopg
import structlog
from prometheus_client import CollectorRegistry
from psycopg.types.json import Jsonb

from dealer.edge.config import ClusterSection
from dealer.edge.lease_db import _bounded, _finish, _iso, _one_line, _Unreachable, describe
from dealer.edge.lease_metrics import LeaseMetrics, lease_metrics
from dealer.edge.lease_plan import ORPHANED, LeaseRow, NodeRow, plan
from dealer.edge.lease_sql import (
    _ACQUIRE,
    _ACQUIRE_ORPHANS,
    _CHECK,
    _ENSURE_ROWS,
    _LEAVE,
    _NODE,
    _READ_LEASES,
    _READ_NODES,
    _READ_PINS,
    _REGISTER,
    _RELEASE,
    _RENEW,
    _SERVING,
    NOTIFY_PAYLOAD_MAX,
)
from dealer.edge.metrics import Metrics

log = structlog.get_logger("dealer.edge.leases")

CHANNEL = "dealer_leases"

#: How long after another node's lease should have run out (by the database's clock, read a
#: moment earlier) this node looks again to take it: the round trip and a little more.
EXPIRY_MARGIN_S = 0.05

Adopt = Callable[[str, int], Awaitable[None]]
Drop = Callable[[str, str], Awaitable[None]]
Idle = Callable[[str], bool]
T = TypeVar("T")


class LeaseError(ValueError):
    """The node cannot take part in the cluster (database unreachable at start, no schema, a
    clock far off, its node id already running, superseded): one line for ``dealer run``."""


class LeaseManager:
    """This node's table leases: take, renew, hand over and give up (module docstring)."""

    def __init__(self, url: str, *, node_id: str, session: str, tables: Sequence[str],
                 preferred: Mapping[str, Sequence[str]] | None = None, cluster: ClusterSection,
                 metrics: Metrics | CollectorRegistry | None = None,
                 monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._url = url
        self.node_id = node_id
        self.session = session
        prefs = preferred or {}
        self._tables: dict[str, tuple[str, ...]] = {t: tuple(prefs.get(t, ())) for t in tables}
        self._cluster = cluster
        self._lease = cluster.lease_seconds
        self._renew = cluster.renew
        self._margin = cluster.renew  # a lease is valid locally until lease - renew after its renewal began
        self._op_timeout = cluster.lease_seconds / 2
        registry = metrics.registry if isinstance(metrics, Metrics) else metrics
        self.metrics = lease_metrics(registry if registry is not None else CollectorRegistry())
        self._mono = monotonic
        self._wall = wall

        self._held: dict[str, int] = {}
        self._deadline: dict[str, float] = {}
        self._lost: set[str] = set()  # not renewed: the placement loop drops them
        self._handover_since: dict[str, float] = {}
        self._pending: dict[str, str] = {}  # held tables placement puts elsewhere -> their node (last look)
        self._next_look = 0.0
        self._hold_off: dict[str, float] = {}  # table -> monotonic time before which it is not taken again
        self._adopt_backoff: dict[str, float] = {}
        self._known_unknown: dict[str, str] = {}
        self._known_disagreements: set[str] = set()
        self._skew_bad = False

        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._db_lock = asyncio.Lock()
        self._step = asyncio.Lock()
        self._wake = asyncio.Event()
        self._listening = asyncio.Event()
        self._reachable = True
        self._down_since: float | None = None
        self._back_at = 0.0
        self._last_live: list[str] = []
        self._remembered: set[str] = set()
        self._started = False
        self._closing = False
        self._superseded: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._adopt: Adopt | None = None
        self._drop: Drop | None = None
        self._idle: Idle | None = None
        #: seconds the journal has been failing to write (the commit loop's, :meth:`watch_journal`)
        self._journal_down: Callable[[], float] = lambda: 0.0
        self._unfit = False  # the journal failed for a lease: every table given up, none taken
        self._marked_unfit = False  # what this node's nodes row says (leaving) about it
        self._unreleased: dict[str, int] = {}  # leases given up for the journal, not released yet

    def watch_journal(self, unwritable_for: Callable[[], float]) -> None:
        """Follow the journal's health: ``unwritable_for()`` is how many seconds this node has been
        trying to write without success (0.0: writing fine, or nothing to write). The service's
        commit loop registers it (dealer/edge/commit_loop.py); see the module docstring."""
        self._journal_down = unwritable_for

    # ----------------------------------------------------------------- queries

    def valid(self, table_id: str) -> bool:
        """Held, and its local deadline (from the last successful renewal) still ahead."""
        return table_id in self._held and self._mono() < self._deadline.get(table_id, -math.inf)

    def epoch(self, table_id: str) -> int | None:
        """The epoch this node holds the table's lease at (None: not held)."""
        return self._held.get(table_id)

    def held(self) -> dict[str, int]:
        """Table -> epoch of every lease this node holds (valid or not yet dropped)."""
        return dict(self._held)

    def poke(self) -> None:
        """Look at placement now (the runtime calls it when a table's round ends, so a
        waiting handover goes at once rather than at the next renewal)."""
        self._wake.set()

    # ----------------------------------------------------------------- database access

    async def _connect(self, timeout: float) -> psycopg.AsyncConnection[Any]:
        coro = psycopg.AsyncConnection.connect(self._url, autocommit=True,
                                               application_name=f"dealer leases {self.node_id}"[:63])
        return await _bounded(coro, timeout, None, "connect")

    async def _db(self, what: str, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                  timeout: float | None = None) -> T:
        """Run ``fn`` on the statement connection (connecting if needed) within a deadline."""
        timeout = timeout or self._op_timeout
        async with self._db_lock:
            if self._conn is None or self._conn.closed:
                self._conn = None
                self._conn = await self._connect(timeout)
            conn = self._conn
            started = time.perf_counter()
            try:
                result = await _bounded(fn(conn), timeout, conn, what)
            except (_Unreachable, asyncio.CancelledError):
                self._conn = None  # cut: its socket closes once the statement has ended
                raise
            if what in ("renew", "read", "acquire", "release"):
                self.metrics.statement.labels(what).observe(time.perf_counter() - started)
            return result

    @staticmethod
    async def _fetchall(conn: psycopg.AsyncConnection[Any], sql: str, params: Mapping[str, Any]) -> list[Any]:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()

    @staticmethod
    async def _fetchone(conn: psycopg.AsyncConnection[Any], sql: str, params: Mapping[str, Any]) -> Any:
        cur = await conn.execute(sql, params)
        return await cur.fetchone()

    def _params(self, **kw: Any) -> dict[str, Any]:
        return {"node": self.node_id, "session": self.session, "lease": self._lease, "channel": CHANNEL, **kw}

    def _payload(self, event: str, tables: Sequence[str] = ()) -> str:
        """A NOTIFY payload: who and what, and the tables while they fit (PostgreSQL refuses a
        payload of 8,000 bytes or more: a 1,000-table node's release named them all and failed)."""
        text = json.dumps({"node": self.node_id, "event": event, "tables": list(tables)})
        if len(text.encode()) < NOTIFY_PAYLOAD_MAX:
            return text
        return json.dumps({"node": self.node_id, "event": event, "table_count": len(tables)})

    # ----------------------------------------------------------------- start

    async def start(self) -> None:
        """Connect, check the schema and the clock, register this node (refusing a node id
        already running elsewhere) and make sure every table of its own has a lease row."""
        where = describe(self._url)
        start_timeout = max(5.0, self._lease)
        try:
            self._conn = await self._connect(start_timeout)
        except _Unreachable as e:
            raise LeaseError(f"cannot reach the lease database {where}: {e}") from None
        try:
            await self._check_schema(where, start_timeout)
            await self._check_clock(start_timeout)
            await self._register(start_timeout)
            await self._db("ensure rows", lambda c: c.execute(_ENSURE_ROWS, {"tables": sorted(self._tables)}),
                           start_timeout)
        except _Unreachable as e:
            await self.close()
            raise LeaseError(f"lease database {where}: {e}") from None
        except psycopg.Error as e:
            await self.close()
            raise LeaseError(f"lease database {where}: {_one_line(e)}") from None
        except LeaseError:
            await self.close()
            raise
        self._started = True
        self._back_at = self._mono()
        self.metrics.database_up.set(1)
        log.info("lease manager started", node=self.node_id, session=self.session, tables=len(self._tables),
                 lease_s=self._lease, renew_s=self._renew)

    async def _check_schema(self, where: str, timeout: float) -> None:
        row = await self._db("schema", lambda c: self._fetchone(
            c, "SELECT to_regclass('leases') IS NOT NULL AND to_regclass('nodes') IS NOT NULL "
               "AND EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'nodes' "
               "AND column_name = 'tables' AND table_schema = current_schema())", {}), timeout)
        if not row[0]:
            raise LeaseError(f"lease database {where} has no dealer schema (tables leases and nodes of "
                             f"dealer/edge/pg_schema.sql): the PostgreSQL journal creates it when it opens")

    async def _clock_sample(self, timeout: float, what: str = "clock") -> tuple[float, float, float]:
        """(our wall clock at mid-flight, the database's, round trip) in seconds."""
        before = self._wall()
        row = await self._db(what, lambda c: self._fetchone(
            c, "SELECT extract(epoch FROM clock_timestamp())::float8", {}), timeout)
        after = self._wall()
        return (before + after) / 2, float(row[0]), max(0.0, after - before)

    async def _check_clock(self, timeout: float) -> None:
        samples = [await self._clock_sample(timeout) for _ in range(3)]
        ours, theirs, rtt = min(samples, key=lambda s: s[2])
        skew = ours - theirs
        self.metrics.clock_skew.set(skew)
        limit = self._cluster.max_clock_skew_seconds
        if abs(skew) > limit + rtt / 2:
            raise LeaseError(f"this node's clock reads {_iso(ours)} but the database's reads {_iso(theirs)}: "
                             f"{skew:+.3f} s apart, more than [cluster] max_clock_skew_seconds = {limit:g}; "
                             f"fix the node's time synchronisation (NTP, chrony)")

    async def _register(self, timeout: float) -> None:
        """Insert or take over this node's row; refuse while another live process holds it.
        A session whose heartbeat is recent but no longer moves (a crash just before this
        restart) is waited out for up to a lease; one whose heartbeat moves is running."""
        params = self._params(tables=Jsonb({t: list(p) for t, p in self._tables.items()}))
        first_seen: Any = None
        give_up = self._mono() + self._lease + 2 * self._renew
        while True:
            row = await self._db("register", lambda c: self._fetchone(c, _REGISTER, params), timeout)
            if row is not None:
                return
            other = await self._db("register", lambda c: self._fetchone(c, _NODE, params), timeout)
            if other is None:
                continue  # deleted meanwhile: try again
            session, heartbeat_at, silent = other
            if first_seen is None:
                first_seen = heartbeat_at
                log.info("waiting for the other session of this node to fall silent", node=self.node_id,
                         other_session=session, heard_s_ago=round(silent, 3))
            elif heartbeat_at != first_seen or self._mono() > give_up:
                raise LeaseError(f"node {self.node_id} is already running (session {session}, heard {silent:.1f} s "
                                 f"ago): two processes with one node id would fight over its tables; stop the "
                                 f"other one or give this one another node id")
            await asyncio.sleep(min(self._renew / 2, 0.5))

    # ----------------------------------------------------------------- run

    async def run(self, adopt: Adopt, drop: Drop, idle: Idle) -> None:
        """Keep this node's leases until :meth:`release_all` (returns) or until another
        process takes over this node's id (drops every table, raises :class:`LeaseError`).
        A database outage never raises: tables are dropped when their leases run out
        locally and taken again when the database is back."""
        if not self._started:
            raise RuntimeError("LeaseManager.run before start")
        self._adopt, self._drop, self._idle = adopt, drop, idle
        self._tasks = [asyncio.create_task(self._renew_loop(), name=f"leases-renew-{self.node_id}"),
                       asyncio.create_task(self._listen_loop(), name=f"leases-listen-{self.node_id}")]
        try:
            # listen before the first look and before telling the others: a table they
            # release for us right after our join must wake us, not wait for the next poll
            with suppress(TimeoutError):
                async with asyncio.timeout(2 * self._op_timeout):
                    await self._listening.wait()
            with suppress(_Unreachable, psycopg.Error):
                await self._db("notify", lambda c: c.execute("SELECT pg_notify(%s, %s)",
                                                             (CHANNEL, self._payload("join"))))
            await self._main_loop()
        finally:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
            if not self._closing:
                await self.close()

    async def _main_loop(self) -> None:
        woken = True
        while not self._closing:
            async with self._step:
                if self._closing:
                    return
                if self._superseded is not None:
                    for t in list(self._held):
                        await self._lose(t, f"node superseded by session {self._superseded}", "superseded")
                    raise LeaseError(f"node {self.node_id} was started again elsewhere (session "
                                     f"{self._superseded}): this process gave up its tables")
                await self._follow_journal()
                await self._step_down()
                due = woken or self._mono() >= self._next_look
                if due:  # even with the database away: the next look is a period on, never "now" again
                    self._next_look = self._mono() + self._renew
                if self._reachable:
                    try:
                        if due:
                            await self._place()
                        elif self._pending:  # between looks: only whether a waiting table's round ended
                            await self._hand_over(self._pending)
                    except _Unreachable as e:
                        self._set_unreachable(str(e))
                    except Exception as e:  # a bug or a refused statement: logged, tried again next period
                        log.error("lease placement failed", node=self.node_id, error=_one_line(e),
                                  exc_info=not isinstance(e, psycopg.Error))
            woken = await self._sleep()

    async def _sleep(self) -> bool:
        """Wait for a wake-up (True: NOTIFY, poke, a lost lease, the database back), the next
        look, a local deadline or, while a handover waits, the next poll of ``idle``."""
        timeout = max(0.0, self._next_look - self._mono())
        if self._deadline:
            timeout = min(timeout, max(0.0, min(self._deadline.values()) - self._mono()) + 0.001)
        if self._pending:
            timeout = min(timeout, max(0.05, self._renew / 4))  # idle() is polled: a round may have ended
        down = self._journal_down()
        if down > 0 and self._held and not self._unfit:  # give the tables up the moment it reaches a lease
            timeout = min(timeout, max(0.0, self._lease - down) + 0.001)
        woken = False
        # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
        # arrives as the event is set, and run() would then never end when cancelled
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()
            woken = True
        self._wake.clear()
        return woken

    async def _step_down(self) -> None:
        """Drop the tables whose lease was not renewed, or ran out locally."""
        for t in sorted(self._lost):
            if t in self._held:
                await self._lose(t, "lease lost (taken over or expired)", "lost")
        self._lost.clear()
        now = self._mono()
        for t in sorted(t for t in self._held if now >= self._deadline.get(t, -math.inf)):
            if self._reachable:  # a renewal late or this process stopped for a while: same outcome
                await self._lose(t, "lease ran out before a renewal answered (database slow or unreachable, "
                                    "or this node was paused)", "expired_locally")
            else:
                await self._lose(t, "database unreachable", "unreachable")

    async def _follow_journal(self) -> None:
        """Give every table up once the journal has failed for a lease; serve again once it
        writes (module docstring). The row's ``leaving`` mark and the releases are retried on
        every pass until the database takes them; unreleased leases expire anyway (not renewed)."""
        down = self._journal_down()
        if not self._unfit and down >= self._lease:
            self._unfit = True
            (log.error if self._held else log.warning)(
                "journal unwritable for a whole lease: this node gives its tables up to the others and takes none "
                "until it can write again", node=self.node_id, unwritable_s=round(down, 3), tables=sorted(self._held))
            for t in sorted(self._held):
                epoch = self._held[t]
                await self._lose(t, "journal unwritable for longer than the lease", "journal_unwritable")
                self._unreleased[t] = epoch
        elif self._unfit and down < self._renew:
            self._unfit = False
            self._unreleased.clear()
            self._next_look = self._mono()  # look for tables at once
            log.warning("this node serves tables again: its journal writes", node=self.node_id)
        if not self._reachable:
            return
        try:
            if self._marked_unfit != self._unfit:
                await self._db("serving", lambda c: c.execute(_SERVING, self._params(
                    serving=not self._unfit, payload=self._payload("unfit" if self._unfit else "join"))))
                self._marked_unfit = self._unfit
            if self._unreleased:
                await self._release(sorted(self._unreleased.items()), "release")
                self._unreleased.clear()
        except (_Unreachable, psycopg.Error) as e:  # tried again next pass; the leases run out meanwhile
            log.warning("could not tell the cluster this node's journal state", node=self.node_id,
                        unfit=self._unfit, error=str(e) if isinstance(e, _Unreachable) else _one_line(e))

    async def _lose(self, table_id: str, reason: str, label: str) -> None:
        """Forget the lease (``valid`` turns false) and tell the runtime. A handover tells the
        runtime first, while the lease is still ours and valid: the node commits the batch in
        hand and marks the table's retained state stale before the next owner may write
        (the lease is released only after this returns). Any other loss forgets first: the
        lease may already be someone else's, so nothing more may go out under it."""
        if table_id not in self._held:
            return
        voluntary = label == "handover"
        if voluntary:
            await self._tell_drop(table_id, reason)
        epoch = self._held.pop(table_id, None)
        if epoch is None:
            return
        self._deadline.pop(table_id, None)
        self._handover_since.pop(table_id, None)
        self._pending.pop(table_id, None)
        self.metrics.held.labels(table_id).set(0)
        self.metrics.losses.labels(table_id, label).inc()
        level = log.info if label in ("handover", "shutdown") else log.warning
        level("table lease given up", node=self.node_id, table_id=table_id, epoch=epoch, reason=reason)
        if not voluntary:
            await self._tell_drop(table_id, reason)

    async def _tell_drop(self, table_id: str, reason: str) -> None:
        if self._drop is not None:
            try:
                await self._drop(table_id, reason)
            except Exception as e:  # the lease is gone whatever the callback does
                log.error("drop callback failed", node=self.node_id, table_id=table_id, error=_one_line(e))

    async def _read(self) -> tuple[list[NodeRow], list[LeaseRow], dict[str, str]]:
        async def q(c: psycopg.AsyncConnection[Any]) -> tuple[list[Any], list[Any], list[Any]]:
            return (await self._fetchall(c, _READ_NODES, {}), await self._fetchall(c, _READ_LEASES, {}),
                    await self._fetchall(c, _READ_PINS, {}))
        nodes, leases, pins = await self._db("read", q)
        return ([NodeRow(n, s, float(silent), bool(leaving), {t: tuple(p) for t, p in (tables or {}).items()})
                 for n, s, silent, leaving, tables in nodes],
                [LeaseRow(t, n, int(e), float(x)) for t, n, e, x in leases],
                {str(t): str(n) for t, n in pins})

    async def _place(self) -> None:
        nodes, leases, pins = await self._read()
        now = self._mono()
        in_grace = now - self._back_at < self._lease
        if not in_grace:
            self._remembered.clear()
        for t, until in list(self._hold_off.items()):
            if now >= until:
                del self._hold_off[t]
        # Look again the moment another node's lease or heartbeat runs out, not up to a renewal
        # period later: a dead node's tables are taken at its leases' expiry (a live node renews
        # before then, and the look in between sees it and moves this one on).
        running = [-r.expired_s for r in leases if r.node not in (None, self.node_id) and r.expired_s < 0]
        running += [self._lease - n.silent_s for n in nodes
                    if n.node != self.node_id and not n.leaving and n.silent_s < self._lease]
        if running:
            self._next_look = min(self._next_look, now + min(running) + EXPIRY_MARGIN_S)
        hold_off = set(self._hold_off)
        if self._journal_down() >= self._renew:  # a table taken now could not be written
            hold_off |= set(self._tables)
        p = plan(self.node_id, self._tables, set(self._held), nodes, leases, self._lease,
                 also_live=self._remembered, orphans=not in_grace, hold_off=hold_off, pins=pins,
                 leaving=self._unfit)
        self._last_live = p.live
        self._pending = dict(p.hand_over)
        self.metrics.nodes_live.set(len(p.live))
        self._note_unknown(p.unknown)
        self._note_disagreements(p.disagreements)
        if self._closing:
            return
        if p.missing:
            await self._db("acquire", lambda c: c.execute(_ENSURE_ROWS, {"tables": p.missing}))
        placed = sorted(t for t, r in p.acquire.items() if r != ORPHANED)
        orphaned = sorted(t for t, r in p.acquire.items() if r == ORPHANED)
        taken: list[tuple[str, int]] = []
        for group, sql in ((placed, _ACQUIRE), (orphaned, _ACQUIRE_ORPHANS)):
            if not group:
                continue
            began = self._mono()
            rows = await self._db("acquire", lambda c: self._fetchall(c, sql, self._params(tables=group)))  # noqa: B023 (awaited here)
            for t, e in sorted(rows):
                self._held[t] = int(e)
                self._deadline[t] = began + self._lease - self._margin
                self.metrics.held.labels(t).set(1)
                self.metrics.epoch.labels(t).set(int(e))
                self.metrics.acquisitions.labels(t, p.acquire[t]).inc()
                log.info("table lease taken", node=self.node_id, table_id=t, epoch=int(e), reason=p.acquire[t])
                taken.append((t, int(e)))
        for t, e in taken:
            await self._adopt_one(t, e)
        await self._hand_over(p.hand_over)

    async def _adopt_one(self, table_id: str, epoch: int) -> None:
        if self._adopt is None or self._held.get(table_id) != epoch:
            return
        try:
            await self._adopt(table_id, epoch)
        except Exception as e:
            backoff = min(60.0, self._adopt_backoff.get(table_id, self._lease / 2) * 2)
            self._adopt_backoff[table_id] = backoff
            self._hold_off[table_id] = self._mono() + backoff
            log.error("adopting a table failed: its lease is released", node=self.node_id, table_id=table_id,
                      epoch=epoch, error=_one_line(e), retry_in_s=backoff)
            await self._lose(table_id, f"adopting it failed: {_one_line(e)}", "adopt_failed")  # undo what it began
            await self._release([(table_id, epoch)], "release")
        else:
            self._adopt_backoff.pop(table_id, None)

    async def _hand_over(self, hand_over: Mapping[str, str]) -> None:
        for t in list(self._handover_since):
            if t not in hand_over:
                del self._handover_since[t]
        ready: list[tuple[str, int, str]] = []
        now = self._mono()
        for t, target in sorted(hand_over.items()):
            if t not in self._held:
                continue
            since = self._handover_since.setdefault(t, now)
            waited = now - since >= self._cluster.handover_wait_seconds
            try:
                is_idle = self._idle(t) if self._idle is not None else True
            except Exception as e:
                log.error("idle callback failed", node=self.node_id, table_id=t, error=_one_line(e))
                is_idle = False
            if is_idle or waited:
                ready.append((t, self._held[t], target))
                if not is_idle:
                    log.warning("handing a table over mid-round: its round did not end in time", node=self.node_id,
                                table_id=t, to=target, waited_s=round(now - since, 3))
        if not ready:
            return
        for t, _e, target in ready:  # stop dealing first; then let the other node in
            self._pending.pop(t, None)
            await self._lose(t, f"handover to {target}", "handover")
        await self._release([(t, e) for t, e, _ in ready], "release")

    async def _release(self, leases: Sequence[tuple[str, int]], event: str) -> set[str]:
        if not leases:
            return set()
        params = self._params(tables=[t for t, _ in leases], epochs=[e for _, e in leases],
                              payload=self._payload(event, [t for t, _ in leases]))
        row = await self._db("release", lambda c: self._fetchone(c, _RELEASE, params))
        return set(row[0])

    def _note_unknown(self, unknown: Mapping[str, str]) -> None:
        for t, holder in unknown.items():
            if self._known_unknown.get(t) != holder:
                self._known_unknown[t] = holder
                self.metrics.unknown_holders.labels(t).inc()
                log.warning("table lease held by a node that is not registered: taken over only once it expires",
                            node=self.node_id, table_id=t, holder=holder)
        for t in list(self._known_unknown):
            if t not in unknown:
                del self._known_unknown[t]

    def _note_disagreements(self, disagreements: Mapping[str, Mapping[str, tuple[str, ...]]]) -> None:
        for t, views in disagreements.items():
            if t not in self._known_disagreements:
                self._known_disagreements.add(t)
                log.warning("live nodes' configurations disagree on a table's preferred nodes: the first node's "
                            "(by id) is used", node=self.node_id, table_id=t,
                            views={n: list(v) for n, v in views.items()})
        self._known_disagreements &= set(disagreements)

    # ----------------------------------------------------------------- renewal

    async def _renew_loop(self) -> None:
        failures = 0
        while not self._closing:
            began = self._mono()
            paced = asyncio.get_running_loop().time()
            now = began
            snapshot = {t: e for t, e in self._held.items() if now < self._deadline.get(t, -math.inf)}
            if self._journal_down() >= self._lease:  # giving them up: not renewed, they run out on the database's clock
                snapshot = {}
            params = self._params(tables=list(snapshot), epochs=list(snapshot.values()))

            async def renew(c: psycopg.AsyncConnection[Any]) -> tuple[Any, float, float]:
                before = self._wall()
                row = await self._fetchone(c, _RENEW, params)  # noqa: B023 (awaited in this iteration)
                return row, before, self._wall()
            try:
                (ok, renewed, db_now), wall_before, wall_after = await self._db("renew", renew)
            except (_Unreachable, psycopg.Error) as e:
                failures += 1
                self.metrics.renew_failures.inc()
                self._set_unreachable(str(e) if isinstance(e, _Unreachable) else _one_line(e))
                delay = min(self._renew * 2 ** (failures - 1), max(self._renew, 2.0))
            else:
                failures = 0
                self._set_reachable()
                if not ok:
                    try:
                        row = await self._db("register", lambda c: self._fetchone(c, _NODE, self._params()))
                    except (_Unreachable, psycopg.Error):
                        row = None
                    self._superseded = str(row[0]) if row else "(unknown)"
                    log.error("this node's row belongs to another session: stepping down", node=self.node_id,
                              other_session=self._superseded)
                    self._wake.set()
                    return
                renewed_set = set(renewed)
                for t, epoch in snapshot.items():
                    if self._held.get(t) != epoch:
                        continue
                    if t in renewed_set:
                        self._deadline[t] = began + self._lease - self._margin
                    else:
                        self._lost.add(t)
                if self._lost or len(snapshot) != len(self._held):
                    self._wake.set()
                self._note_skew((wall_before + wall_after) / 2 - float(db_now), wall_after - wall_before)
                delay = self._renew
            elapsed = asyncio.get_running_loop().time() - paced
            await asyncio.sleep(max(0.0, delay - elapsed))

    def _note_skew(self, skew: float, rtt: float) -> None:
        self.metrics.clock_skew.set(skew)
        bad = abs(skew) > self._cluster.max_clock_skew_seconds + rtt / 2
        if bad != self._skew_bad:
            self._skew_bad = bad
            if bad:
                log.error("this node's clock is off the database's beyond [cluster] max_clock_skew_seconds",
                          node=self.node_id, skew_s=round(skew, 3))
            else:
                log.info("this node's clock is back within max_clock_skew_seconds", node=self.node_id,
                         skew_s=round(skew, 3))

    def _set_unreachable(self, error: str) -> None:
        if self._reachable:
            self._reachable = False
            self._down_since = self._mono()
            self._remembered = set(self._last_live)
            self.metrics.database_up.set(0)
            log.error("lease database unreachable: leases are not renewed; tables stop when their leases run "
                      "out", node=self.node_id, error=error)

    def _set_reachable(self) -> None:
        if not self._reachable:
            self._reachable = True
            now = self._mono()
            self._back_at = now
            self.metrics.database_up.set(1)
            log.info("lease database reachable again", node=self.node_id,
                     down_s=round(now - (self._down_since or now), 3))
            self._wake.set()

    # ----------------------------------------------------------------- notifications

    async def _listen_loop(self) -> None:
        """Wake the placement loop on another node's NOTIFY (a release, a join, a leave).
        Polling every renewal still happens: this only makes it faster."""
        failures = 0
        while not self._closing:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await self._connect(self._op_timeout)
                await _bounded(conn.execute(f"LISTEN {CHANNEL}"), self._op_timeout, conn, "listen")
                self._listening.set()
                self._wake.set()  # anything sent while we were not listening: look now
                failures = 0
                while not self._closing:
                    async for n in conn.notifies(timeout=max(self._lease, 1.0)):
                        try:
                            sender = json.loads(n.payload).get("node")
                        except (ValueError, AttributeError):
                            sender = None
                        if sender != self.node_id:
                            self._wake.set()
                    await _bounded(conn.execute("SELECT 1"), self._op_timeout, conn, "listen")
            except asyncio.CancelledError:
                raise
            except Exception as e:  # reconnect: this connection only speeds things up
                failures += 1
                if failures == 1:
                    log.info("lease notifications interrupted: reconnecting", node=self.node_id, error=_one_line(e))
            finally:
                self._listening.clear()
                _finish(conn)
            await asyncio.sleep(min(self._renew * 2 ** max(0, failures - 1), max(self._renew, 2.0)))

    # ----------------------------------------------------------------- fencing and shutdown

    async def check_now(self) -> set[str]:
        """Re-read this node's leases now (the journal reported Fenced): drop and return the
        tables no longer held at our epoch or expired. A database that does not answer
        returns nothing: those tables stop anyway when their leases run out locally."""
        snapshot = dict(self._held)
        if not snapshot:
            return set()
        try:
            rows = await self._db("check", lambda c: self._fetchall(c, _CHECK, {"tables": list(snapshot)}))
        except (_Unreachable, psycopg.Error) as e:
            log.warning("could not check leases after a fenced write", node=self.node_id, error=str(e))
            return set()
        ours = {t for t, n, e, alive in rows if n == self.node_id and e == snapshot.get(t) and alive}
        lost = {t for t in snapshot if t not in ours and self._held.get(t) == snapshot[t]}
        for t in sorted(lost):
            await self._lose(t, "fenced: the lease is no longer ours", "fenced")
        if lost:
            self._wake.set()
        return lost

    async def release_all(self) -> None:
        """SIGTERM: mark this node leaving, drop every table, release every lease and NOTIFY,
        so the other nodes take the tables at once. A database that does not answer leaves
        the leases to expire."""
        async with self._step:
            if self._closing:
                return
            self._closing = True
            if not self._started:
                return
            self._wake.set()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            held = dict(self._held)
            try:
                await self._db("leave", lambda c: c.execute(_LEAVE, self._params(payload=self._payload("leave"))))
            except (_Unreachable, psycopg.Error) as e:
                log.warning("could not mark this node leaving", node=self.node_id, error=str(e))
            for t in sorted(held):
                await self._lose(t, "shutdown", "shutdown")
            try:
                released = await self._release(sorted(held.items()), "release")
                log.info("leases released", node=self.node_id, tables=len(released))
            except (_Unreachable, psycopg.Error) as e:
                log.warning("could not release leases: they expire on their own", node=self.node_id,
                            error=str(e))
            await self.close()

    async def close(self) -> None:
        """Close the connections (nothing is released: a crash, as far as others can tell)."""
        _finish(self._conn)
        self._conn = None


__all__ = ["CHANNEL", "LeaseError", "LeaseManager", "LeaseMetrics", "describe", "lease_metrics"]
