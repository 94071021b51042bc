"""The journal and outbox in PostgreSQL: the SQLite journal's guarantees, shared by several nodes.

A drop-in for :class:`dealer.edge.journal.Journal` as the service uses it (``service.journal_url``;
:func:`dealer.edge.journals.open_journal` picks one). What is the same: every event is journaled
before its effects are released, a batch is one transaction (one commit, ``synchronous_commit =
on``: the commit returns once the WAL is flushed, so a committed event survives a crash of the
database host), a result's outbox row is written with the event that produced it and deleted
with the ``result_delivered`` that acknowledges it, command ids are kept forever, rows are
append-only (triggers refuse UPDATE, DELETE and TRUNCATE) and hash-chained.

What differs (dealer/edge/pg_schema.sql):

* **One chain per table.** Each table's rows have ``seq`` 1, 2, 3 ... and each links to the
  previous row *of its table* (:func:`pg_row_hash`, which also covers the writing ``node`` and
  lease ``epoch``). Tables move between nodes, so a global chain would need a global lock; a
  per-table chain is written by the table's one owner. ``id`` (bigserial) orders rows across
  tables; within a table it grows with ``seq`` (one writer per table, and a takeover waits for
  a commit in flight: the fencing trigger locks the lease row).
* **Fencing.** Every row carries the node and the epoch of its table's lease
  (``Batch.epochs``); the database refuses a row whose lease is not current
  (:class:`~dealer.edge.journal.Fenced`: the node steps down, never retries).
* **Per-table heads in memory.** (seq, hash) of each table's last row, loaded from the database
  the first time the table is written or replayed (a node taking a table over continues the
  chain its previous owner left), advanced only when a commit succeeds.
* **No segments.** Retention by segment files is SQLite's (dealer/edge/segments.py);
  :meth:`segment_records` is empty, :meth:`checkpoint`, :meth:`finish_roll` and
  :meth:`purge_rolled` do nothing. PostgreSQL's own archiving and backups keep history.

Failures. A commit that fails and may succeed later (the server is down, restarting, read-only,
a timeout) raises :class:`~dealer.edge.journal.JournalWriteFailed` with a small set of
``reason`` labels (:data:`REASONS`); nothing of the batch is written and the heads are unchanged,
so the *same* batch is committed again later and gets the same ``seq`` numbers. When the
connection broke while the commit was in flight its outcome is unknown: the next commit first
looks whether the batch's rows are in the database (written by this node at this epoch) and, if
so, takes that as its success instead of writing them twice. The next commit reconnects by
itself after a server restart (the process need not restart).

Threads. :meth:`commit` (sync) runs in the service's one writer thread on a connection of its
own; :meth:`commit_async` is the same SQL on psycopg's ``AsyncConnection`` from an
``AsyncConnectionPool`` (for an event loop that awaits the commit instead of using a thread);
a service uses one or the other, never both at once. :meth:`command` and :meth:`delivered`
are called from the event loop: a small pool with short timeouts (2 s to connect, 2 s per
statement); when the database cannot answer they raise ``JournalWriteFailed``, which the caller
must treat as "cannot tell": refuse, never assume. The other reads (replay, pending, rows,
verify) use a third connection and reconnect once if it broke.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from dealer.core.commands import StoredCommand
from dealer.edge.journal_chain import pg_row_hash
from dealer.edge.journal_contract import NoSegments
from dealer.edge.journal_errors import Fenced, JournalError, JournalWriteFailed, ReplayError
from dealer.edge.journal_pg_schema import open_schema
from dealer.edge.journal_pg_sql import (AFTER_SQL, COMMIT_SQL, HEADS_SQL, OUTBOX_BY_KEYS_SQL, PAGE, QUICK_TIMEOUT,
                                        REASONS, ROW_COLS, SCHEMA_VERSION, CommitPlan, PgJournalRow, Query,
                                        ReadAdapter, classify, head_of_row, one_line, where)
from dealer.edge.journal_replay import Replays, replay_start
from dealer.edge.journal_rows import GENESIS, Batch, ChainReport, OutboxRow
from dealer.edge.journal_urls import redact, url_password
from dealer.edge.journal_writer import WriterThread
from drivers.frames import ReaderState



class PgJournal(NoSegments, Replays, WriterThread):
    """The journal in a PostgreSQL database (module docstring): the
    :class:`~dealer.edge.journal_contract.Journal` contract, shared by the nodes of a cluster.
    ``node_id`` is written into every row (the fencing trigger compares it with the table's lease)."""

    #: SQLite's retention by segment files does not apply (maintenance skips it).
    rolls_segments = False

    def __init__(self, url: str, *, node_id: str, fsync: bool = True, read_only: bool = False,
                 connect_timeout: float = 5.0, statement_timeout: float = 30.0) -> None:
        self.url = url
        self.path = redact(url)
        self.node_id = node_id
        self.read_only = read_only
        self._secret = url_password(url)
        self._connect_timeout = connect_timeout
        # synchronous_commit = on: a commit returns once its WAL record is flushed (fsync=False,
        # for tests and benchmarks: off, the server flushes within wal_writer_delay).
        self._options = [f"-c synchronous_commit={'on' if fsync else 'off'}",
                         f"-c statement_timeout={int(statement_timeout * 1000)}"]
        if read_only:
            self._options.append("-c default_transaction_read_only=on")
        self._heads: dict[str, tuple[int, str]] = {}
        self._head: tuple[int, str] = (0, GENESIS)
        self._in_doubt = False
        self._writer: psycopg.Connection[Any] | None = None
        self._reader: psycopg.Connection[Any] | None = None
        self._quick: Any = None  # psycopg_pool.ConnectionPool, made on first use
        self._apool: Any = None  # psycopg_pool.AsyncConnectionPool, made on first commit_async
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._apids: set[int] = set()  # backend pids of the async pool's connections already used
        self._id, self.journal_id_source = "", "none"
        try:
            conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise JournalError(f"journal URL {self.path} is not a valid PostgreSQL URL: "
                               f"{one_line(exc, self._secret)}") from None
        try:
            self._reader = self._connect(connect_timeout, self._options)
            self._id, self.journal_id_source = open_schema(self._reader, self.path, self.read_only)
            row = self._reader.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
            self._head = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        except JournalError:
            self.close()
            raise
        except psycopg.Error as exc:
            self.close()
            raise JournalError(f"journal {self.path}: cannot be opened: {one_line(exc, self._secret)}") from None

    @classmethod
    def open(cls, target: str | Path, *, node_id: str | None = None, fsync: bool = True) -> "PgJournal":
        """The journal at URL ``target`` for the node ``node_id`` that writes it (schema created if
        the database is empty and the role may)."""
        if not node_id:
            raise ValueError("the PostgreSQL journal needs the node id that writes it")
        return cls(str(target), node_id=node_id, fsync=fsync)

    @classmethod
    def open_read_only(cls, url: str | Path) -> "PgJournal":
        """The journal at ``url`` for reading only (recall, audit): the session is read-only,
        nothing is created, and a database without a dealer journal is a :class:`JournalError`."""
        return cls(str(url), node_id="", read_only=True)

    # -- connections ------------------------------------------------------------------------

    def _kwargs(self, timeout: float, options: Sequence[str]) -> dict[str, Any]:
        info = conninfo_to_dict(self.url)
        opts = " ".join(o for o in (str(info.get("options") or ""), *options) if o)
        kw: dict[str, Any] = {"autocommit": True, "options": opts,
                              "application_name": info.get("application_name") or f"dealer-{self.node_id or 'read'}",
                              # a peer that vanished (a cut network) is noticed in seconds, not hours
                              "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                              "tcp_user_timeout": 10_000}
        if "connect_timeout" not in info:
            kw["connect_timeout"] = max(2, int(timeout))
        return kw

    def _connect(self, timeout: float, options: Sequence[str]) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, **self._kwargs(timeout, options))
        except psycopg.Error as exc:
            raise JournalError(f"journal {self.path}: cannot connect to {where(self.url)}: "
                               f"{one_line(exc, self._secret)}") from None

    def _read_conn(self) -> psycopg.Connection[Any]:
        with self._read_lock:  # reads come from the event loop and from worker threads
            conn = self._reader
            if conn is None or conn.closed or conn.broken:
                if conn is not None:
                    conn.close()
                try:
                    conn = self._reader = psycopg.connect(self.url,
                                                          **self._kwargs(self._connect_timeout, self._options))
                except psycopg.Error as exc:
                    raise JournalWriteFailed(f"journal {self.path}: cannot connect to {where(self.url)}: "
                                             f"{one_line(exc, self._secret)}", "database_unreachable") from None
            return conn

    def _read(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run a read on the reads connection; reconnect and run it again once if the connection
        had broken (a server restart). Raises :class:`JournalWriteFailed` when it cannot."""
        for attempt in (1, 2):
            conn = self._read_conn()
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.Error as exc:
                err = classify(exc)
                if isinstance(err, JournalWriteFailed) and err.reason == "database_unreachable" and attempt == 1:
                    continue
                raise JournalWriteFailed(f"journal {self.path}: read failed: {err}", getattr(err, "reason",
                                                                                             "database_error")) from exc
        raise AssertionError("unreachable")

    def _quick_pool(self) -> Any:
        with self._lock:
            if self._quick is None:
                from psycopg_pool import ConnectionPool

                opts = [*self._options[:1], f"-c statement_timeout={int(QUICK_TIMEOUT * 1000)}",
                        "-c default_transaction_read_only=on"]
                self._quick = ConnectionPool(self.url, min_size=1, max_size=2, timeout=QUICK_TIMEOUT,
                                             kwargs=self._kwargs(QUICK_TIMEOUT, opts), open=True,
                                             check=ConnectionPool.check_connection, reconnect_timeout=QUICK_TIMEOUT,
                                             name="dealer-journal-reads")
            return self._quick

    def _quick_read(self, sql: str, params: Any) -> tuple[Any, ...] | None:
        """One row from the event loop's pool, within :data:`QUICK_TIMEOUT`; JournalWriteFailed
        when the database cannot answer (the caller refuses: it cannot tell)."""
        from psycopg_pool import PoolTimeout

        try:
            with self._quick_pool().connection() as conn:
                row: tuple[Any, ...] | None = conn.execute(sql, params).fetchone()  # the pool's rows are tuples
                return row
        except PoolTimeout:
            raise JournalWriteFailed(f"journal {self.path}: no connection to {where(self.url)} within "
                                     f"{QUICK_TIMEOUT:g} s", "database_unreachable") from None
        except psycopg.Error as exc:
            err = classify(exc)
            raise JournalWriteFailed(f"journal {self.path}: read failed: {err}",
                                     getattr(err, "reason", "database_error")) from exc

    @property
    def journal_id(self) -> str:
        """This journal's id (``meta.journal_id``), the series of its round ids: shared by every node."""
        return self._id

    @property
    def head(self) -> tuple[int, str]:
        """(id, hash) of the last row this journal committed (at open: the database's last row):
        the anchor published on the journal topic (``dealer audit verify --anchor``)."""
        return self._head

    def head_of(self, table_id: str) -> tuple[int, str]:
        """(seq, hash) of a table's last row: from memory, or loaded from the database the first
        time (the chain a previous owner left)."""
        head = self._heads.get(table_id)
        if head is None:
            rows = self._read(HEADS_SQL, ([table_id],))
            head = self._heads[table_id] = head_of_row(rows[0])
        return head

    def forget_table(self, table_id: str) -> None:
        """Drop a table's head from memory (this node stepped down: the next owner writes on;
        if this node takes it again, the head is loaded again)."""
        self._heads.pop(table_id, None)

    # -- commit -------------------------------------------------------------------------------

    def _check(self, batch: Batch) -> list[str]:
        if self.read_only:
            raise JournalError(f"journal {self.path} is open read-only")
        tables = list(dict.fromkeys(t for t, _r, _e in batch.events))
        missing = [t for t in tables if t not in batch.epochs]
        if missing:  # a programming error: never write a row without its lease epoch
            raise ValueError(f"batch has rows of table(s) {', '.join(missing)} without a lease epoch (Batch.epochs)")
        return tables

    def _plan(self, batch: Batch, heads: dict[str, tuple[int, str]]) -> CommitPlan:
        """The commit statement's parameters: every row of the batch chained on ``heads``."""
        now = time.time_ns() // 1_000_000
        new_heads: dict[str, tuple[int, str]] = {}
        events: list[tuple[str, int, str | None, str, str, str]] = []
        e: dict[str, list[Any]] = {k: [] for k in ("table", "seq", "round", "type", "body", "at", "node", "epoch",
                                                   "prev", "hash")}
        for t, r, ev in batch.events:
            seq, prev = new_heads.get(t) or heads[t]
            body = ev.model_dump_json()
            seq += 1
            epoch = batch.epochs[t]
            h = pg_row_hash(prev, seq, t, r, ev.type, body, now, self.node_id, epoch)
            for k, v in (("table", t), ("seq", seq), ("round", r), ("type", ev.type), ("body", body), ("at", now),
                         ("node", self.node_id), ("epoch", epoch), ("prev", prev), ("hash", h)):
                e[k].append(v)
            events.append((t, seq, r, ev.type, body, h))
            new_heads[t] = (seq, h)
        readers = {r.reader: r for r in batch.readers}  # the latest state of each reader
        outbox: dict[str, tuple[str, bytes, str, str]] = {}
        for key, topic, payload, t, r in batch.outbox:  # a key twice: the first row is the one inserted
            outbox.setdefault(key, (topic, bytes(payload), t, r))
        params: dict[str, Any] = {f"e_{k}": v for k, v in e.items()}
        params.update(
            now=now,
            o_key=[o[0] for o in batch.outbox], o_topic=[o[1] for o in batch.outbox],
            o_payload=[bytes(o[2]) for o in batch.outbox], o_table=[o[3] for o in batch.outbox],
            o_round=[o[4] for o in batch.outbox],
            delivered=list(batch.delivered), acked=list(batch.acked),
            c_table=[c.table_id for c, _ in batch.commands], c_id=[c.command_id for c, _ in batch.commands],
            c_round=[c.round_id for c, _ in batch.commands], c_type=[c.type for c, _ in batch.commands],
            c_role=[c.role for c, _ in batch.commands], c_digest=[c.digest for c, _ in batch.commands],
            c_answer=[json.dumps(c.answer, sort_keys=True) for c, _ in batch.commands],
            c_etable=[events[i][0] for _, i in batch.commands], c_eseq=[events[i][1] for _, i in batch.commands],
            r_reader=list(readers), r_boot=[r.boot for r in readers.values()],
            r_seq=[r.seq for r in readers.values()], r_key=[r.key for r in readers.values()],
            r_mac=[r.mac for r in readers.values()],
        )
        return CommitPlan(params, new_heads, events, outbox, now)

    def _flow(self, batch: Batch, tables: list[str]) -> Any:
        """The commit as a generator of queries (each answered with its rows), so the sync and
        async paths run the very same steps: load unknown heads, settle a commit in doubt, then
        the one commit statement. Returns the new outbox rows."""
        unknown = [t for t in tables if t not in self._heads]
        if unknown:
            for row in (yield Query(HEADS_SQL, (unknown,))):
                # the database's head before this batch: kept even if the commit fails, so a
                # commit in doubt is compared with where the table stood before it
                self._heads[row[0]] = head_of_row(row)
        if self._in_doubt and tables:
            done = yield from self._settle_in_doubt(batch, tables)
            if done is not None:
                return done
        plan = self._plan(batch, self._heads)
        rows = yield Query(COMMIT_SQL, plan.params)
        return self._committed(plan, rows)

    def _settle_in_doubt(self, batch: Batch, tables: list[str]) -> Any:
        """The last commit broke off with its outcome unknown: if the database has this batch's
        rows after the heads (written by this node at these epochs), it committed: adopt it and
        return its outbox rows. No rows: it did not, write it (None). Other rows: another writer."""
        heads = [self._heads[t][0] for t in tables]
        after = [PgJournalRow(*r) for r in (yield Query(AFTER_SQL, (tables, heads)))]
        if not after:
            return None
        for r in after:
            if r.node != self.node_id or r.epoch != batch.epochs.get(r.table_id):
                raise Fenced(f"fenced: table {r.table_id} has a row after seq {self._heads[r.table_id][0]} written "
                             f"by node {r.node} at epoch {r.epoch}", r.table_id)
        for t in tables:
            want = [(rd, e.type, e.model_dump_json()) for tt, rd, e in batch.events if tt == t]
            got = [(r.round_id, r.type, r.body) for r in after if r.table_id == t]
            if got != want:  # rows of this node that are not this batch: the caller changed the batch
                raise Fenced(f"fenced: table {t} has {len(got)} row(s) of this node after seq {self._heads[t][0]} "
                             "that are not the batch being committed", t)
        outbox = yield Query(OUTBOX_BY_KEYS_SQL, ([o[0] for o in batch.outbox],))
        for r in after:
            self._heads[r.table_id] = (r.seq, r.hash)
        last = max(after, key=lambda r: r.id)
        self._head = (last.id, last.hash)
        self._in_doubt = False
        return [OutboxRow(i, k, t, bytes(p), tb, rd, c) for i, k, t, p, tb, rd, c in outbox]

    def _committed(self, plan: CommitPlan, rows: list[tuple[Any, ...]]) -> list[OutboxRow]:
        ids = [(int(i), str(t), int(s)) for kind, i, t, s in rows if kind == "e"]
        if ids:
            last_id, t, s = max(ids)
            self._head = (last_id, next(h for tt, ss, _r, _ty, _b, h in plan.events if tt == t and ss == s))
        self._heads.update(plan.heads)
        self._in_doubt = False
        out = []
        for kind, i, key, _ in rows:
            if kind == "o":
                topic, payload, t, r = plan.outbox[key]
                out.append(OutboxRow(int(i), key, topic, payload, t, r, plan.now))
        return sorted(out, key=lambda o: o.id)

    def commit(self, batch: Batch) -> list[OutboxRow]:
        """Write a batch in one transaction, one commit; return the outbox rows it created. From
        the writer thread. Raises :class:`Fenced` (step down), :class:`JournalWriteFailed`
        (nothing written, the heads unchanged: commit the same batch again later) or ValueError
        (a table with rows but no epoch: nothing written)."""
        tables = self._check(batch)
        for attempt in (1, 2):
            reused = self._writer is not None and not (self._writer.closed or self._writer.broken)
            conn = self._writer_conn()
            flow = self._flow(batch, tables)
            try:
                query = next(flow)
                while True:
                    query = flow.send(conn.execute(query.sql, query.params).fetchall())
            except StopIteration as stop:
                rows: list[OutboxRow] = stop.value  # what _flow returns: the batch's outbox rows
                return rows
            except psycopg.Error as exc:
                broke = conn.closed or conn.broken
                err = self._failed(exc, broke)
                if broke and reused and attempt == 1:
                    continue  # it broke while idle (a server restart, a dropped link): once more, on a new one
                raise err from exc
        raise AssertionError("unreachable")

    def _writer_conn(self) -> psycopg.Connection[Any]:
        conn = self._writer
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._writer = None
            try:
                conn = self._writer = psycopg.connect(self.url, **self._kwargs(self._connect_timeout, self._options))
            except psycopg.Error as exc:
                raise JournalWriteFailed(f"journal {self.path}: cannot connect to {where(self.url)}: "
                                         f"{one_line(exc, self._secret)}", "database_unreachable") from None
        return conn

    def _failed(self, exc: BaseException, broke: bool) -> Fenced | JournalWriteFailed:
        """The error to raise for a failed commit. When the connection broke (or the client gave
        up) with the statement in flight, whether it committed is unknown: the next commit
        settles that first (:meth:`_settle_in_doubt`). An error the server reported means the
        statement was rolled back."""
        err = classify(exc) if isinstance(exc, psycopg.Error) else JournalWriteFailed(
            f"journal {self.path}: commit timed out: {one_line(exc)}", "database_timeout")
        if broke:
            self._in_doubt = True
        return err

    async def commit_async(self, batch: Batch, *, timeout: float | None = 30.0) -> list[OutboxRow]:
        """:meth:`commit` on psycopg's async connection from an ``AsyncConnectionPool`` (one
        connection), for an event loop that awaits the commit instead of a writer thread: the
        same SQL, results and failures. ``timeout`` bounds the whole commit on the client side
        (a server that stopped answering): the commit is then in doubt, settled by the next one."""
        from psycopg_pool import PoolTimeout

        tables = self._check(batch)
        pool = await self._async_pool()
        for attempt in (1, 2):
            conn: Any = None
            reused = False
            try:
                async with asyncio.timeout(timeout):
                    async with pool.connection(timeout=self._connect_timeout) as conn:
                        reused = conn.info.backend_pid in self._apids
                        self._apids.add(conn.info.backend_pid)
                        flow = self._flow(batch, tables)
                        try:
                            query = next(flow)
                            while True:
                                cur = await conn.execute(query.sql, query.params)
                                query = flow.send(await cur.fetchall())
                        except StopIteration as stop:
                            rows: list[OutboxRow] = stop.value  # what _flow returns: the batch's outbox rows
                            return rows
            except PoolTimeout:
                raise JournalWriteFailed(f"journal {self.path}: no connection to {where(self.url)} within "
                                         f"{self._connect_timeout:g} s", "database_unreachable") from None
            except (psycopg.Error, TimeoutError) as exc:
                timed_out = isinstance(exc, TimeoutError)
                broke = conn is not None and (timed_out or conn.closed or conn.broken)
                err = self._failed(exc, broke)
                if broke and reused and not timed_out and attempt == 1:
                    continue
                raise err from exc
        raise AssertionError("unreachable")

    async def _async_pool(self) -> Any:
        if self._apool is None:
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(self.url, min_size=1, max_size=1, open=False, timeout=self._connect_timeout,
                                       kwargs=self._kwargs(self._connect_timeout, self._options),
                                       reconnect_timeout=self._connect_timeout, name="dealer-journal-writer")
            await pool.open(wait=False)
            self._apool = pool
        return self._apool

    async def close_async(self) -> None:
        """Close the async pool (from its event loop), then everything else."""
        if self._apool is not None:
            pool, self._apool = self._apool, None
            await pool.close()
        self.close()

    # -- the event loop's reads ---------------------------------------------------------------

    def command(self, table_id: str, role: str, command_id: str) -> StoredCommand | None:
        """An accepted command id of a table and role, whichever node accepted it. Raises
        :class:`JournalWriteFailed` when the database cannot answer within 2 s: refuse the
        command (it may be a duplicate), never treat it as new."""
        row = self._quick_read("SELECT round_id, type, role, digest, answer FROM commands WHERE table_id = %s "
                               "AND role = %s AND command_id = %s", (table_id, role, command_id))
        if row is None:
            return None
        return StoredCommand(table_id, command_id, row[0], row[1], row[2], row[3], json.loads(row[4]))

    def delivered(self, table_id: str, round_id: str) -> bool:
        """Whether the journal holds a ``result_delivered`` for the round. Raises
        :class:`JournalWriteFailed` when the database cannot answer within 2 s (cannot tell)."""
        return self._quick_read("SELECT 1 FROM events WHERE table_id = %s AND type = 'result_delivered' "
                                "AND round_id = %s LIMIT 1", (table_id, round_id)) is not None

    # -- reads --------------------------------------------------------------------------------

    def pending(self, tables: Iterable[str] | None = None) -> list[OutboxRow]:
        """The outbox rows waiting for settlement's acknowledgement, oldest first (of ``tables`` only, if given)."""
        sql = "SELECT id, key, topic, payload, table_id, round_id, created_at FROM outbox"
        params: tuple[Any, ...] = ()
        if tables is not None:
            sql += " WHERE table_id = ANY(%s::text[])"
            params = (list(tables),)
        return [OutboxRow(i, k, t, bytes(p), tb, r, c) for i, k, t, p, tb, r, c in self._read(sql + " ORDER BY id",
                                                                                                 params)]

    def reader_states(self) -> dict[str, ReaderState]:
        """The last committed state of every signed reader (JournalError naming a damaged row)."""
        out: dict[str, ReaderState] = {}
        for reader, boot, seq, key, mac in self._read("SELECT reader, boot, seq, key, mac FROM reader_state "
                                                      "ORDER BY reader"):
            try:
                out[reader] = ReaderState(reader, int(boot), int(seq), key, mac)
            except ValueError as exc:
                raise JournalError(f"journal {self.path}: table reader_state is damaged: {exc}") from None
        return out

    # -- replay (dealer/edge/journal_replay.py), each row checked against its table's chain ---

    def _replay_start(self, table_id: str) -> int | None:
        """Loads the table's head afresh (a node taking the table over continues its chain), then
        the start, exactly as the SQLite journal chooses it. Every row replayed is checked against
        its hash, and the rows from the start on link to each other and to the stored row before
        them, so an edited or damaged row never rebuilds a table (at start and at every takeover;
        the whole chain, rows no replay reads included, is ``dealer audit verify``'s)."""
        self._heads[table_id] = head_of_row(self._read(HEADS_SQL, ([table_id],))[0])
        return replay_start(ReadAdapter(self._read), table_id, placeholder="%s")

    def _replay_rules(self, table_id: str, start: int | None) -> PgJournalRow | None:
        rules = self.rules_before(table_id, start)
        if rules is not None:
            self._chained(rules, rules.prev_hash, rules.seq)
        return rules

    def _replay_from(self, table_id: str, start: int) -> Iterator[tuple[int, str]]:
        prev: str | None = None
        seq = 0
        for row in self._paged(f"SELECT {ROW_COLS} FROM events WHERE table_id = %s AND id >= %s", (table_id, start)):
            if prev is None:  # the link into the stored chain: the hash of the row before
                seq = row.seq
                before = self._read("SELECT hash FROM events WHERE table_id = %s AND seq = %s", (table_id, seq - 1))
                prev = str(before[0][0]) if before else GENESIS
            self._chained(row, prev, seq)
            prev, seq = row.hash, seq + 1
            yield row.id, row.body

    def _chained(self, row: "PgJournalRow", prev: str, seq: int) -> None:
        """Check one replayed row's place in its table's chain: ReplayError naming it."""
        why = ""
        if row.seq != seq:
            why = f"row seq {seq} is missing (the next row is seq {row.seq}, id {row.id})"
        elif row.prev_hash != prev:
            why = f"row seq {row.seq} (id {row.id}) does not link to seq {row.seq - 1}"
        elif pg_row_hash(prev, row.seq, row.table_id, row.round_id, row.type, row.body, row.recorded_at, row.node,
                         row.epoch) != row.hash:
            why = f"row seq {row.seq} (id {row.id}) was altered (its hash does not match its content)"
        if why:
            raise ReplayError(f"journal {self.path}: table {row.table_id}: {why}")

    def rules_before(self, table_id: str, row_id: int | None) -> PgJournalRow | None:
        """The last ``table_rules`` row of a table before ``row_id`` (None: before the end)."""
        rows = self._read(f"SELECT {ROW_COLS} FROM events WHERE table_id = %s AND type = 'table_rules' AND id < %s "
                          "ORDER BY id DESC LIMIT 1", (table_id, row_id if row_id is not None else 1 << 62))
        return PgJournalRow(*rows[0]) if rows else None

    def _paged(self, sql: str, params: tuple[Any, ...]) -> Iterator[PgJournalRow]:
        """Rows of ``sql`` (filtered, unordered) in id order, a page at a time: no transaction
        or cursor stays open between pages (rows only ever come after the last one)."""
        last = 0
        while True:
            page = self._read(f"{sql} AND id > %s ORDER BY id LIMIT {PAGE}", (*params, last))
            for r in page:
                yield PgJournalRow(*r)
            if len(page) < PAGE:
                return
            last = int(page[-1][0])

    def rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[PgJournalRow]:
        """Journal rows in id order (all of them: there are no segments), for recall and audit."""
        return self.live_rows(table_id, since_id)

    def live_rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[PgJournalRow]:
        sql = f"SELECT {ROW_COLS} FROM events WHERE id >= %s"
        params: tuple[Any, ...] = (since_id,)
        if table_id is not None:
            sql += " AND table_id = %s"
            params += (table_id,)
        return self._paged(sql, params)

    def _chains(self) -> Iterator[PgJournalRow]:
        """Every row in (table, seq) order, a page at a time."""
        after: tuple[str, int] = ("", 0)
        while True:
            page = self._read(f"SELECT {ROW_COLS} FROM events WHERE (table_id, seq) > (%s, %s) "
                              f"ORDER BY table_id, seq LIMIT {PAGE}", after)
            for r in page:
                yield PgJournalRow(*r)
            if len(page) < PAGE:
                return
            after = (str(page[-1][1]), int(page[-1][8]))

    def verify_chain(self) -> ChainReport:
        """Walk every table's chain: its rows consecutive in ``seq`` from 1, each linking to the
        previous one's hash, each hash matching its content, ids growing with ``seq``. Reports
        the first broken row (of the tables with one, the one with the lowest id)."""
        n = 0
        broken: dict[str, tuple[int, str]] = {}
        table, expected, prev, last_id = None, 1, GENESIS, 0
        for row in self._chains():
            n += 1
            if row.table_id != table:
                table, expected, prev, last_id = row.table_id, 1, GENESIS, 0
            if table in broken:
                continue
            why = ""
            if row.seq != expected:
                why = f"table {table}: row seq {expected} is missing (the next row is seq {row.seq}, id {row.id})"
            elif row.prev_hash != prev:
                why = f"table {table}: row seq {row.seq} (id {row.id}) does not link to seq {row.seq - 1}"
            elif pg_row_hash(prev, row.seq, row.table_id, row.round_id, row.type, row.body, row.recorded_at,
                             row.node, row.epoch) != row.hash:
                why = f"table {table}: row seq {row.seq} (id {row.id}) was altered (its hash does not match its content)"
            elif row.id <= last_id:
                why = f"table {table}: row seq {row.seq} has id {row.id}, not after seq {row.seq - 1}'s id {last_id}"
            if why:
                broken[table] = (row.id, why)
                continue
            prev, expected, last_id = row.hash, row.seq + 1, row.id
        if not broken:
            return ChainReport(n, True)
        first_id, reason = min(broken.values())
        return ChainReport(n, False, first_id, reason)

    def hash_at(self, row_id: int) -> str | None:
        """The hash of row ``row_id`` (None: no such row), for an anchor kept outside the journal."""
        found = self._read("SELECT hash FROM events WHERE id = %s", (row_id,))
        return str(found[0][0]) if found else None

    def count(self, table_id: str | None = None) -> int:
        if table_id is None:
            return int(self._read("SELECT COUNT(*) FROM events")[0][0])
        return int(self._read("SELECT COUNT(*) FROM events WHERE table_id = %s", (table_id,))[0][0])

    def close(self) -> None:
        """Close the connections and the reads pool (the async pool needs its loop: :meth:`close_async`)."""
        self._stop_writer()
        for name in ("_writer", "_reader"):
            conn = getattr(self, name, None)
            if conn is not None:
                conn.close()
                setattr(self, name, None)
        quick = getattr(self, "_quick", None)
        if quick is not None:
            self._quick = None
            quick.close()


__all__ = ["PgJournal", "PgJournalRow", "REASONS", "SCHEMA_VERSION", "classify", "pg_row_hash", "redact"]


