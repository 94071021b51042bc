"""SQLite journal (WAL, fsync on commit) and the durable outbox, in one file.

Every accepted event is written here before its effects are released; a round's
result row is inserted in the *same* transaction as the event that produced it, so
after a crash either both exist or neither does. An outbox row is deleted in the
same transaction that journals its ``result_delivered`` event, i.e. only after settlement
acknowledged the result's idempotency key (``Batch.acked``: the row of that key and every
row of its parts, ``{key}#...``). Used from one thread at a time (its writer thread:
dealer/edge/journal_writer.py).

The events table is **append-only** (triggers refuse UPDATE and DELETE) and
**hash-chained**: each row stores the SHA-256 of the previous row's hash and its own
content, so ``dealer audit verify`` finds the first row that was altered, removed or
inserted out of order (:func:`verify_chain`).

**Retention** (dealer/edge/segments.py): settled rows roll into read-only segment files; the
``segments`` table (append-only) records each one, and the delete trigger lets through only
rows a recorded segment holds. The live chain continues from the last segment's last hash
(:meth:`Journal.chain_start`); replay reads the live journal only (a roll never takes a row a
replay needs), recall and audit read across the segments (:meth:`Journal.rows`).

**Scanner replay state** (``reader_state``): per signed reader, the boot counter and sequence
number of its last accepted frame, the fingerprint of the key that verified it and the MAC
of its last scan result (:class:`~drivers.frames.ReaderState`), so that after a restart a
recorded frame of an earlier boot, or an old seq of this boot, is still a replay
(docs/scanner-protocol.md §6.5). It is a small *mutable* table, one row per reader,
upserted in the same transaction as the batch that holds the reads of the frames it
covers. It is not derived from the events because most frames that move it journal no
event at all (BOOT frames, heartbeats, scan results while no card is expected, and ScanRead
carries no boot counter), and it is not written as events because that would add a chained
row per frame for a value of which only the latest copy matters. It sits outside the hash
chain (``verify_chain`` and ``dealer audit verify`` are unchanged): rolling a row back
would reopen the restart window it closes, and needs write access to the journal file,
which has to be protected for the events' sake anyway.

**Journal id** (``meta``): 8 random characters generated when the journal is created and
never changed (the table refuses UPDATE and DELETE). The service puts it into every round id,
``{table}-{journal_id}-{seq:06d}``, and so into every idempotency key: a new, lost or
re-installed journal starts its round sequence again, but never repeats a key settlement has
seen. A journal from before journal ids gets one when first opened; its old rounds keep their
ids and the sequence continues from them.

Crash safety: the service hands a reader's new state to the group commit that takes the
frame's read (or to an earlier one, never a later one). A frame whose read was not committed
before a crash may therefore be accepted again afterwards: its read never registered, so it
registers once. A frame whose read was committed is refused as a replay after the restart.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dealer.core.commands import StoredCommand
from dealer.edge import segments
from dealer.edge.journal_chain import row_hash, verify_rows
from dealer.edge.journal_errors import (Fenced, JournalDiskFull, JournalError, JournalLocked, JournalWriteFailed,
                                        ReplayError)
from dealer.edge.journal_health import failure_reason
from dealer.edge.journal_replay import Replays, replay_start
from dealer.edge.journal_writer import WriterThread
from dealer.edge.journal_rows import (GENESIS, JOURNAL_ID, AuditReport, Batch, ChainReport, JournalRow, OutboxRow,
                                      new_journal_id, result_key)
from drivers.frames import ReaderState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    table_id TEXT NOT NULL,
    round_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,  -- server wall clock at commit, epoch ms
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_round ON events (table_id, type, round_id);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TABLE IF NOT EXISTS segments (  -- rolled segment files (dealer/edge/segments.py), append-only
    number INTEGER PRIMARY KEY,
    first_id INTEGER NOT NULL,
    last_id INTEGER NOT NULL,
    last_hash TEXT NOT NULL,
    anchor_id INTEGER NOT NULL,   -- the head (last row) of the journal when the segment was rolled
    anchor_hash TEXT NOT NULL,
    sha256 TEXT NOT NULL,         -- of the segment file
    rows INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS segments_no_update BEFORE UPDATE ON segments
    BEGIN SELECT RAISE(ABORT, 'segment records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS segments_no_delete BEFORE DELETE ON segments
    BEGIN SELECT RAISE(ABORT, 'segment records are append-only'); END;
CREATE TABLE IF NOT EXISTS commands (  -- accepted command ids, kept forever (dealer/core/commands.py)
    table_id TEXT NOT NULL,
    command_id TEXT NOT NULL,
    round_id TEXT,
    type TEXT NOT NULL,
    role TEXT NOT NULL,
    digest TEXT NOT NULL,
    answer TEXT NOT NULL,
    event_id INTEGER NOT NULL,  -- the journal row of the command
    PRIMARY KEY (table_id, role, command_id)  -- one role cannot squat another's ids
);
CREATE TRIGGER IF NOT EXISTS commands_no_update BEFORE UPDATE ON commands
    BEGIN SELECT RAISE(ABORT, 'command ids are append-only'); END;
CREATE TRIGGER IF NOT EXISTS commands_no_delete BEFORE DELETE ON commands
    BEGIN SELECT RAISE(ABORT, 'command ids are append-only'); END;
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an id names one result forever
    key TEXT NOT NULL UNIQUE,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    created_at INTEGER  -- server wall clock at commit, epoch ms (NULL only in rows migrated from old journals)
);
CREATE TABLE IF NOT EXISTS reader_state (  -- mutable: the latest accepted boot/seq per signed reader
    reader TEXT PRIMARY KEY,
    boot INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,           -- fingerprint of the key that verified the reader's last signed frame
    mac TEXT,                    -- MAC of the last scan result, when its seq is `seq`
    updated_at INTEGER NOT NULL  -- server wall clock at commit, epoch ms
);
"""

#: Rows may be deleted only once a recorded segment holds them (Journal.finish_roll).
_DELETE_GUARD = """
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    WHEN OLD.id > (SELECT COALESCE(MAX(last_id), 0) FROM segments)
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
"""
_SCHEMA += _DELETE_GUARD

#: The journal's own small, append-only key/value table. ``journal_id`` names this journal
#: forever: it is part of every round id the service opens, so a new, lost or re-installed
#: journal never reuses a round id or an idempotency key of an earlier one. It is created
#: in one transaction with its triggers, so a meta table without a valid id is damage.
_META = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta "
    "BEGIN SELECT RAISE(ABORT, 'the journal meta table is append-only'); END",
    "CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta "
    "BEGIN SELECT RAISE(ABORT, 'the journal meta table is append-only'); END",
)


#: Below this much free space an open that fails with SQLITE_FULL or SQLITE_IOERR is a full disk.
DISK_FULL_BYTES = 1 << 20


def _check_directory(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise JournalError(f"journal directory {parent} does not exist (journal {path})")
    if not parent.is_dir():
        raise JournalError(f"journal directory {parent} is not a directory (journal {path})")
    # WAL mode creates <journal>-wal and -shm beside the file: the directory must be writable
    if not os.access(parent, os.W_OK | os.X_OK):
        raise JournalError(f"journal directory {parent} is not writable by this user (journal {path})")


def _unreadable(exc: sqlite3.DatabaseError) -> str:
    """SQLite's reason a journal file cannot be used, said so that a person knows what to check."""
    reason = str(exc)
    if "not a database" in reason or "malformed" in reason:
        return f"not a SQLite database, or damaged ({reason})"
    return reason


def _disk_full(exc: sqlite3.Error, directory: Path) -> bool:
    if failure_reason(exc) not in ("disk_full", "io_error"):
        return False
    try:
        vfs = os.statvfs(directory)
    except OSError:
        return False
    return vfs.f_bavail * vfs.f_frsize < DISK_FULL_BYTES


def lock_journal(path: str | Path) -> int:
    """Take the exclusive lock of a journal for the life of the process and return its file
    descriptor (keep it open: closing it releases the lock).

    The lock is ``flock`` on a sidecar ``<journal>.lock`` holding the owner's pid, not on the
    SQLite file itself, whose POSIX locks SQLite manages (and drops when any descriptor of the
    file closes). The kernel releases it when the process exits, however it exits, so a
    stale lock file never blocks a restart; the file is never removed (removing it would let
    two processes lock two different files). Raises :class:`JournalLocked` when another
    process holds it and :class:`JournalError` when the lock file cannot be created."""
    journal = Path(path)
    _check_directory(journal)
    lock_path = Path(f"{journal}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as exc:
        raise JournalError(f"cannot create the lock file {lock_path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() if exc.errno in (
            errno.EWOULDBLOCK, errno.EAGAIN) else ""
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise JournalLocked(f"journal {journal} is in use by another dealer process "
                                f"(pid {owner or 'unknown'}; lock {lock_path})") from None
        raise JournalError(f"cannot lock {lock_path}: {exc.strerror or exc}") from None
    try:  # the pid is for people reading the lock file; the lock holds without it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            os.close(fd)
            raise JournalError(f"cannot write {lock_path}: {exc.strerror or exc}") from None
    return fd




class SqliteJournal(Replays, WriterThread):
    """The journal in one SQLite file on this host (module docstring): the
    :class:`~dealer.edge.journal_contract.Journal` contract, with segment retention."""

    #: Retention rolls settled rows into segment files (dealer/edge/segments.py); the
    #: PostgreSQL journal (dealer/edge/journal_pg.py) has none.
    rolls_segments = True

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self.path = str(path)
        _check_directory(Path(path))
        try:
            self._open(fsync)
        except sqlite3.DatabaseError as exc:  # includes OperationalError (unreadable, read-only file)
            self.close()
            if _disk_full(exc, Path(path).parent):
                raise JournalDiskFull(f"journal {self.path} cannot be opened: its file system is full "
                                      f"({exc}); free space and it starts") from None
            raise JournalError(f"journal {self.path} cannot be opened: {_unreadable(exc)}") from None
        except JournalError:
            self.close()
            raise
        self._checkpointer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None

    @classmethod
    def open(cls, target: str | Path, *, node_id: str | None = None, fsync: bool = True) -> "SqliteJournal":
        """The journal file at ``target``, created if new (``node_id`` is a journal server's)."""
        return cls(target, fsync=fsync)

    @classmethod
    def open_read_only(cls, path: str | Path) -> "SqliteJournal":
        """The journal at ``path`` for reading only (recall, audit): SQLite ``mode=ro``, so it
        is never created, migrated or written, and a missing file is a :class:`JournalError`
        instead of a new empty journal. Safe beside the running backend (WAL readers)."""
        p = Path(path)
        if not p.exists():
            raise JournalError(f"no journal at {p}")
        if not p.is_file():
            raise JournalError(f"journal {p} is not a file")
        self = cls.__new__(cls)
        self.path = str(path)
        self._checkpointer = None
        self._reader = None
        try:
            self._db = sqlite3.connect(p.absolute().as_uri() + "?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(events)")}
            if "events" not in tables:
                raise JournalError(f"{p} is not a dealer journal (it has no events table)")
            if "hash" not in cols:
                raise JournalError(f"journal {p} predates the hash chain")
            if "segments" not in tables:  # a journal from before segments: it has none
                self._db.execute("CREATE TEMP TABLE segments (number INTEGER PRIMARY KEY, first_id INTEGER, "
                                 "last_id INTEGER, last_hash TEXT, anchor_id INTEGER, anchor_hash TEXT, "
                                 "sha256 TEXT, rows INTEGER, created_at INTEGER)")
            found = self._read_journal_id()
            self._id, self.journal_id_source = (found, "existing") if found is not None else ("", "none")
            last = self._db.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
            self._last_id, self._last_hash = (int(last[0]), str(last[1])) if last else self.chain_start()
            self._head = (self._last_id, self._last_hash)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise JournalError(f"journal {p} cannot be read: {_unreadable(exc)}") from None
        except JournalError:
            self.close()
            raise
        return self

    def _open(self, fsync: bool) -> None:
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: the WAL is fsynced at every commit, so a committed event survives power loss.
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        # Checkpoints (copying the WAL into the database file, with its own fsyncs) are not
        # done by the committing connection, so they never land on a card's latency path;
        # :meth:`checkpoint` runs them from another connection and thread.
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(events)")}
        if cols and "hash" not in cols:
            raise JournalError(f"journal {self.path} predates the hash chain; archive it and start a new one")
        self._db.executescript(_SCHEMA)
        self._guard_deletes()
        self._id, self.journal_id_source = self._load_id()
        self._migrate_outbox()
        last = self._db.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        self._last_id, self._last_hash = (int(last[0]), str(last[1])) if last else self.chain_start()
        self._head = (self._last_id, self._last_hash)

    def _guard_deletes(self) -> None:
        """Journals older than segments refuse every DELETE; the guard now lets through only rows
        already covered by a recorded segment (:meth:`finish_roll`). A guard in the trigger,
        rather than dropping and recreating it around each roll, keeps the refusal in force at
        every instant, for every other connection too."""
        sql = self._db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'events_no_delete'"
                               ).fetchone()
        if sql is not None and "segments" not in sql[0]:
            self._db.executescript(f"BEGIN IMMEDIATE; DROP TRIGGER events_no_delete; {_DELETE_GUARD} COMMIT;")

    @property
    def head(self) -> tuple[int, str]:
        """(id, hash) of the last committed row: the anchor published on the journal topic."""
        return self._head

    def chain_start(self) -> tuple[int, str]:
        """(id, hash) the live rows link to: the last segment's last row, or (0, GENESIS)."""
        row = self._db.execute("SELECT last_id, last_hash FROM segments ORDER BY number DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def segment_records(self) -> list[segments.SegmentRecord]:
        """The segments rolled out of this journal, in order."""
        return segments.records(self._db)

    def finish_roll(self, prepared: Any, purge_rows: int = 2000) -> bool:
        """Record a prepared segment (:func:`dealer.edge.segments.prepare_roll`) and delete the first
        ``purge_rows`` of its rows from the events table, in one transaction, from the writer
        thread between group commits; :meth:`purge_rolled` deletes the rest a chunk at a time
        (deleting 100,000 rows in one go holds the writer for half a second). From the commit
        on, the rolled rows are the segment's: every reader skips the ones not yet deleted.
        False (nothing changed, the file removed) when the journal moved on in a way that
        makes the segment wrong: another segment recorded, or a table's replay floor now
        inside it (never expected: the floor only moves forward)."""
        rec = prepared.record
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            recorded = db.execute("SELECT COALESCE(MAX(number), 0) FROM segments").fetchone()[0]
            floor, _ = segments.replay_floor(db, prepared.tables or None)
            if recorded + 1 != rec.number or rec.first_id != self.chain_start()[0] + 1 or \
                    (floor is not None and rec.last_id >= floor) or rec.last_id >= self._last_id:
                db.execute("ROLLBACK")
                if rec.number > recorded:  # never the file of a segment already recorded under that name
                    prepared.path.unlink(missing_ok=True)
                return False
            db.execute("INSERT INTO segments (number, first_id, last_id, last_hash, anchor_id, anchor_hash, sha256, "
                       "rows, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (rec.number, rec.first_id, rec.last_id, rec.last_hash, rec.anchor_id, rec.anchor_hash,
                        rec.sha256, rec.rows, rec.created_at))
            db.execute("DELETE FROM events WHERE id <= ? AND id < (SELECT MIN(id) FROM events) + ?",
                       (rec.last_id, purge_rows))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return True

    def purge_rolled(self, limit: int = 2000) -> int:
        """Delete up to ``limit`` rows already held by a recorded segment (after a roll, or a
        crash in the middle of one); returns how many went (0: none left)."""
        start = self.chain_start()[0]
        if not start:
            return 0
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            n = db.execute("DELETE FROM events WHERE id <= ? AND id < (SELECT MIN(id) FROM events) + ?",
                           (start, limit)).rowcount
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return int(n)

    @property
    def journal_id(self) -> str:
        """This journal's id (8 characters, ``[a-z2-7]``), the series of its round ids."""
        return self._id

    def _load_id(self) -> tuple[str, str]:
        """Read the journal id, or create it: ``existing``, ``created`` (a new journal) or
        ``migrated`` (a journal from before journal ids: its old round ids stay as they are,
        the table's round sequence continues, so new ids never collide with them). A meta
        table without a valid id is damage and refused. Reading takes no write lock (recall
        and audit open the journal of a running service)."""
        found = self._read_journal_id()
        if found is not None:
            return found, "existing"
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # two processes opening a new journal agree on one id
        try:
            found = self._read_journal_id()
            if found is not None:
                db.execute("COMMIT")
                return found, "existing"
            events = db.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
            journal_id = new_journal_id()
            for stmt in _META:
                db.execute(stmt)
            db.execute("INSERT INTO meta (key, value) VALUES ('journal_id', ?)", (journal_id,))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return journal_id, "migrated" if events else "created"

    def _read_journal_id(self) -> str | None:
        """The valid journal id, or None when there is no meta table yet."""
        db = self._db
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
            return None
        row = db.execute("SELECT value FROM meta WHERE key = 'journal_id'").fetchone()
        value = row[0] if row is not None else None
        if not isinstance(value, str) or not JOURNAL_ID.match(value):
            what = "is missing" if row is None else f"is damaged ({str(value)[:40]!r})"
            raise JournalError(f"journal {self.path}: its journal id {what}; round ids and idempotency keys "
                               "depend on it: restore the journal from a backup")
        return value

    def _migrate_outbox(self) -> None:
        """Journals older than settlement acknowledgements have no ``outbox.created_at``: add
        it, dated by the last journal row of the row's round (about when its result was made)."""
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(outbox)")}
        if "created_at" in cols:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("ALTER TABLE outbox ADD COLUMN created_at INTEGER")
            self._db.execute(
                "UPDATE outbox SET created_at = COALESCE((SELECT MAX(recorded_at) FROM events WHERE events.table_id = "
                "outbox.table_id AND events.round_id = outbox.round_id), ?)", (time.time_ns() // 1_000_000,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def commit(self, batch: Batch) -> list[OutboxRow]:
        """Write a batch atomically (one fsync); return the outbox rows it created.

        All or nothing: when it raises (disk full, I/O error) nothing was written and the chain
        head is unchanged, so the same batch may be committed again and gets the same row ids."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        last_id, last_hash = self._last_id, self._last_hash
        try:
            now = time.time_ns() // 1_000_000
            rows = []
            for t, r, e in batch.events:
                body = e.model_dump_json()
                row_id = last_id + 1
                h = row_hash(last_hash, row_id, t, r, e.type, body, now)
                rows.append((row_id, t, r, e.type, body, now, last_hash, h))
                last_id, last_hash = row_id, h
            db.executemany(
                "INSERT INTO events (id, table_id, round_id, type, body, recorded_at, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            new_rows: list[OutboxRow] = []
            for key, topic, payload, table_id, round_id in batch.outbox:
                cur = db.execute(
                    # Only a second row for the same idempotency key is ignored (a replayed
                    # commit); any other constraint failure aborts the whole batch.
                    "INSERT INTO outbox (key, topic, payload, table_id, round_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                    (key, topic, payload, table_id, round_id, now),
                )
                if cur.rowcount:
                    new_rows.append(OutboxRow(int(cur.lastrowid or 0), key, topic, payload, table_id, round_id, now))
            db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in batch.delivered])
            # substr, not LIKE: '_' (allowed in table ids) is a LIKE wildcard
            db.executemany("DELETE FROM outbox WHERE key = ?1 OR substr(key, 1, length(?1) + 1) = ?1 || '#'",
                           [(k,) for k in batch.acked])
            db.executemany(
                "INSERT INTO commands (table_id, command_id, round_id, type, role, digest, answer, event_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(c.table_id, c.command_id, c.round_id, c.type, c.role, c.digest,
                  json.dumps(c.answer, sort_keys=True), rows[i][0]) for c, i in batch.commands])
            db.executemany(
                "INSERT INTO reader_state (reader, boot, seq, key, mac, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (reader) DO UPDATE SET boot = excluded.boot, seq = excluded.seq, key = excluded.key, "
                "mac = excluded.mac, updated_at = excluded.updated_at",
                [(r.reader, r.boot, r.seq, r.key, r.mac, now) for r in batch.readers])
            db.execute("COMMIT")
        except BaseException:
            # A failed COMMIT (disk full, I/O error) has already rolled back: a second ROLLBACK
            # would raise "no transaction is active" and hide the real error. Either way nothing
            # of the batch is written and the chain head is kept, so the same batch can be
            # committed again later (the service retries it until it does).
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the connection rolls back on its own; the original error matters
            raise
        self._last_id, self._last_hash = last_id, last_hash
        self._head = (last_id, last_hash)
        return new_rows

    def command(self, table_id: str, role: str, command_id: str) -> StoredCommand | None:
        """An accepted command id of a table and role, from any earlier run (a separate read
        connection: the writer thread may be committing meanwhile)."""
        if self._reader is None:
            self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        row = self._reader.execute(
            "SELECT round_id, type, role, digest, answer FROM commands WHERE table_id = ? AND role = ? "
            "AND command_id = ?", (table_id, role, command_id)).fetchone()
        if row is None:
            return None
        return StoredCommand(table_id, command_id, row[0], row[1], row[2], row[3], json.loads(row[4]))

    def pending(self, tables: Iterable[str] | None = None) -> list[OutboxRow]:
        """The outbox rows waiting for settlement's acknowledgement, oldest first (of ``tables`` only, if given)."""
        cur = self._db.execute("SELECT id, key, topic, payload, table_id, round_id, COALESCE(created_at, 0) "
                               "FROM outbox ORDER BY id")
        wanted = None if tables is None else set(tables)
        return [OutboxRow(i, k, t, bytes(p), tb, r, c) for i, k, t, p, tb, r, c in cur
                if wanted is None or tb in wanted]

    def delivered(self, table_id: str, round_id: str) -> bool:
        """Whether the journal holds a ``result_delivered`` for the round (an ack seen before;
        a separate read connection, like :meth:`command`)."""
        if self._reader is None:
            self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        return self._reader.execute(
            "SELECT 1 FROM events WHERE table_id = ? AND type = 'result_delivered' AND round_id = ? LIMIT 1",
            (table_id, round_id)).fetchone() is not None

    def reader_states(self) -> dict[str, ReaderState]:
        """The last committed state of every signed reader (to restore its session at start-up).
        Raises :class:`JournalError` (a ValueError) naming the reader for a row that is not a valid state."""
        out: dict[str, ReaderState] = {}
        for reader, boot, seq, key, mac in self._db.execute(
                "SELECT reader, boot, seq, key, mac FROM reader_state ORDER BY reader"):
            try:
                out[reader] = ReaderState(reader, boot, seq, key, mac)
            except ValueError as exc:
                raise JournalError(f"journal {self.path}: table reader_state is damaged: {exc}") from None
        return out

    # -- replay (dealer/edge/journal_replay.py): the live journal only --------------------------

    def _replay_start(self, table_id: str) -> int | None:
        return replay_start(self._db, table_id)

    def _replay_rules(self, table_id: str, start: int | None) -> JournalRow | None:
        return self._live_rules_before(table_id, start)

    def _replay_from(self, table_id: str, start: int) -> Iterable[tuple[int, str]]:
        return self._db.execute("SELECT id, body FROM events WHERE table_id = ? AND id >= ? ORDER BY id",
                                (table_id, start))

    def rules_before(self, table_id: str, row_id: int | None) -> JournalRow | None:
        """The last ``table_rules`` row of a table before ``row_id`` (None: before the end), in
        the live journal or else in the segments rolled out of it (recall of an old round)."""
        row = self._live_rules_before(table_id, row_id)
        if row is not None:
            return row
        return segments.rules_in_segments(self.path, self.segment_records(), table_id,
                                 row_id if row_id is not None else (1 << 62))

    def _live_rules_before(self, table_id: str, row_id: int | None) -> JournalRow | None:
        """Replay reads the live journal only: retention never rolls a row a replay needs."""
        row = self._db.execute(
            "SELECT id, table_id, round_id, type, body, recorded_at, prev_hash, hash FROM events "
            "WHERE table_id = ? AND type = 'table_rules' AND id < ? ORDER BY id DESC LIMIT 1",
            (table_id, row_id if row_id is not None else (1 << 62))).fetchone()
        return JournalRow(*row) if row is not None else None

    def rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        """Journal rows in order, from the segment files on (for recall and audit)."""
        recs = self.segment_records()
        yield from segments.segment_rows(self.path, recs, table_id, since_id)
        yield from self.live_rows(table_id, since_id)

    def live_rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        """The rows of the live journal, in order (not those of a recorded segment still
        waiting for :meth:`purge_rolled`)."""
        sql = "SELECT id, table_id, round_id, type, body, recorded_at, prev_hash, hash FROM events WHERE id >= ?"
        args: tuple[object, ...] = (max(since_id, self.chain_start()[0] + 1),)
        if table_id is not None:
            sql += " AND table_id = ?"
            args += (table_id,)
        for row in self._db.execute(sql + " ORDER BY id", args):
            yield JournalRow(*row)

    def verify_chain(self) -> ChainReport:
        """Walk the live journal's chain, from the last rolled segment's head (the whole chain,
        segments included: :func:`dealer.edge.segments.verify`); report the first row that was
        altered, removed or reordered, or that cannot be read at all (a damaged page, a column
        whose bytes are no longer text). Run at every start (dealer/edge/preflight.py), so it is
        one tight loop over plain tuples: no row objects."""
        start, prev = self.chain_start()
        return verify_rows(self._db.execute(
            "SELECT id, table_id, round_id, type, body, recorded_at, prev_hash, hash FROM events WHERE id > ? "
            "ORDER BY id", (start,)), start + 1, prev)

    def hash_at(self, row_id: int) -> str | None:
        """The hash of row ``row_id``, live or in a segment file (None: no such row): an anchor
        kept outside the journal is compared with it (dealer/edge/anchors.py)."""
        row = next(self.rows(since_id=row_id), None)
        return row.hash if row is not None and row.id == row_id else None

    def count(self, table_id: str | None = None) -> int:
        start = self.chain_start()[0]
        if table_id is None:
            return int(self._db.execute("SELECT COUNT(*) FROM events WHERE id > ?", (start,)).fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM events WHERE id > ? AND table_id = ?",
                                    (start, table_id)).fetchone()[0])

    def audit(self, anchors: Iterable[tuple[int, str]] = ()) -> AuditReport:
        """``dealer audit verify``: every segment in order, then the live rows, and each anchor
        (:func:`dealer.edge.segments.verify`)."""
        return segments.verify(self, anchors)

    def forget_table(self, table_id: str) -> None:
        """Nothing to forget: one process writes this file, and keeps no head per table."""

    async def commit_async(self, batch: Batch) -> list[OutboxRow]:
        """:meth:`commit` from the event loop, in the journal's writer thread (every write of this
        file goes there, never two at once)."""
        return await asyncio.get_running_loop().run_in_executor(self.writer, self.commit, batch)

    def checkpoint(self) -> int:
        """Passive WAL checkpoint from a second connection (the writer is not blocked; once
        everything is copied SQLite restarts the WAL from its start). Returns the frames
        still waiting to be copied."""
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _busy, wal_frames, copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(0, int(wal_frames) - int(copied))

    def close(self) -> None:
        self._stop_writer()
        if (checkpointer := getattr(self, "_checkpointer", None)) is not None:
            checkpointer.close()
        if (reader := getattr(self, "_reader", None)) is not None:
            reader.close()
        if getattr(self, "_db", None) is not None:
            self._db.close()

    async def close_async(self) -> None:
        """:meth:`close` (nothing here needs the event loop)."""
        self.close()


#: The name the service, the tools and the tests have always used for the SQLite journal.
Journal = SqliteJournal

__all__ = ["DISK_FULL_BYTES", "GENESIS", "JOURNAL_ID", "Batch", "ChainReport", "Fenced", "Journal",
           "JournalDiskFull", "JournalError", "JournalLocked", "JournalRow", "JournalWriteFailed", "OutboxRow",
           "ReplayError", "SqliteJournal", "lock_journal", "new_journal_id", "result_key", "row_hash",
           "verify_rows"]
