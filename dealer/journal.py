"""SQLite journal (WAL, fsync on commit) and the durable outbox, in one file.

Every accepted event is written here before its effects are released; a round's
result row is inserted in the *same* transaction as the event that produced it, so
after a crash either both exist or neither does. An outbox row is deleted in the
same transaction that journals its ``result_delivered`` event, i.e. only after the
broker's PUBACK. Used from one thread at a time (the service's writer thread).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dealer.events import EVENT_ADAPTER, Event

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    table_id TEXT NOT NULL,
    round_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_round ON events (table_id, type, round_id);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an id names one result forever
    key TEXT NOT NULL UNIQUE,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    key: str
    topic: str
    payload: bytes
    table_id: str
    round_id: str


@dataclass(slots=True)
class Batch:
    """What one group commit writes: journal rows, new outbox rows, delivered outbox ids."""

    events: list[tuple[str, str | None, Event]] = field(default_factory=list)
    outbox: list[tuple[str, str, bytes, str, str]] = field(default_factory=list)  # key, topic, payload, table, round
    delivered: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events or self.outbox or self.delivered)


class Journal:
    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self.path = str(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: the WAL is fsynced at every commit, so a committed event survives power loss.
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        # Checkpoints (copying the WAL into the database file, with its own fsyncs) are not
        # done by the committing connection, so they never land on a card's latency path;
        # :meth:`checkpoint` runs them from another connection and thread.
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._db.executescript(_SCHEMA)
        self._checkpointer: sqlite3.Connection | None = None

    def commit(self, batch: Batch) -> list[OutboxRow]:
        """Write a batch atomically (one fsync); return the outbox rows it created."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT INTO events (table_id, round_id, type, body) VALUES (?, ?, ?, ?)",
                [(t, r, e.type, e.model_dump_json()) for t, r, e in batch.events],
            )
            rows: list[OutboxRow] = []
            for key, topic, payload, table_id, round_id in batch.outbox:
                cur = db.execute(
                    # Only a second row for the same idempotency key is ignored (a replayed
                    # commit); any other constraint failure aborts the whole batch.
                    "INSERT INTO outbox (key, topic, payload, table_id, round_id) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (key) DO NOTHING",
                    (key, topic, payload, table_id, round_id),
                )
                if cur.rowcount:
                    rows.append(OutboxRow(int(cur.lastrowid or 0), key, topic, payload, table_id, round_id))
            db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in batch.delivered])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return rows

    def pending(self) -> list[OutboxRow]:
        cur = self._db.execute("SELECT id, key, topic, payload, table_id, round_id FROM outbox ORDER BY id")
        return [OutboxRow(i, k, t, bytes(p), tb, r) for i, k, t, p, tb, r in cur]

    def replay(self, table_id: str) -> Iterator[Event]:
        """The events needed to rebuild a table: from the oldest round not yet delivered
        (or the last round opened, which carries the round sequence) to the end."""
        start = self._db.execute(
            """SELECT MIN(id) FROM events WHERE table_id = ?1 AND type = 'open_round' AND round_id NOT IN
                 (SELECT round_id FROM events WHERE table_id = ?1 AND type = 'result_delivered')""",
            (table_id,),
        ).fetchone()[0]
        if start is None:
            start = self._db.execute(
                "SELECT MAX(id) FROM events WHERE table_id = ? AND type = 'open_round'", (table_id,)
            ).fetchone()[0]
        if start is None:
            return
        for (body,) in self._db.execute(
            "SELECT body FROM events WHERE table_id = ? AND id >= ? ORDER BY id", (table_id, start)
        ):
            yield EVENT_ADAPTER.validate_json(body)

    def count(self, table_id: str | None = None) -> int:
        if table_id is None:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM events WHERE table_id = ?", (table_id,)).fetchone()[0])

    def checkpoint(self) -> int:
        """Passive WAL checkpoint from a second connection (the writer is not blocked; once
        everything is copied SQLite restarts the WAL from its start). Returns the frames
        still waiting to be copied."""
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _busy, wal_frames, copied = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(0, int(wal_frames) - int(copied))

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._db.close()
