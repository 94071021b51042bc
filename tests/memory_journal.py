"""A third journal backend, for tests only: the journal contract (dealer/edge/journal_contract.py)
kept in this process's memory. It proves that a backend is one module plus one registration line
(the last line here): ``open_journal("memory://NAME")`` opens it, and it passes the same contract
tests as the SQLite and PostgreSQL journals (tests/test_journal_contract.py).

Journals of one name share their rows (as two opens of one file do), for the life of the process.
One global hash chain, as SQLite's (:func:`dealer.edge.journal_chain.row_hash`); no segments."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path

from dealer.core.commands import StoredCommand
from dealer.edge.journal_chain import row_hash, verify_rows
from dealer.edge.journal_contract import NoSegments
from dealer.edge.journal_errors import JournalError
from dealer.edge.journal_replay import Replays
from dealer.edge.journal_rows import (GENESIS, Batch, ChainReport, JournalRow, OutboxRow,
                                      new_journal_id)
from dealer.edge.journal_writer import WriterThread
from dealer.edge.journals import register
from drivers.frames import ReaderState

PREFIX = "memory://"
#: The table operations a replay may start at (dealer.core.operations), as the SQL journals ask.
_OPERATIONS = ("supervisor_pause", "supervisor_resume", "supervisor_close", "supervisor_reopen")


@dataclass(slots=True)
class _Store:
    """Everything one named memory journal holds."""

    journal_id: str
    rows: list[JournalRow] = field(default_factory=list)
    outbox: dict[int, OutboxRow] = field(default_factory=dict)
    next_outbox_id: int = 1
    commands: dict[tuple[str, str, str], StoredCommand] = field(default_factory=dict)
    readers: dict[str, ReaderState] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_STORES: dict[str, _Store] = {}


def forget_all() -> None:
    """Drop every memory journal (between tests)."""
    _STORES.clear()


class MemoryJournal(NoSegments, Replays, WriterThread):
    """The journal contract in memory (module docstring)."""

    #: No files, no segments: asked as a journal server is.
    rolls_segments = False

    def __init__(self, target: str, *, read_only: bool = False) -> None:
        if not target.startswith(PREFIX):
            raise JournalError(f"{target!r} is not a {PREFIX} URL")
        created = target not in _STORES
        if read_only and created:
            raise JournalError(f"no journal at {target}")
        self._store = _STORES.setdefault(target, _Store(new_journal_id()))
        self.path = target
        self.read_only = read_only
        self.journal_id_source = "created" if created else "existing"

    @classmethod
    def open(cls, target: str | Path, *, node_id: str | None = None, fsync: bool = True) -> MemoryJournal:
        return cls(str(target))

    @classmethod
    def open_read_only(cls, target: str | Path) -> MemoryJournal:
        return cls(str(target), read_only=True)

    @property
    def journal_id(self) -> str:
        return self._store.journal_id

    @property
    def head(self) -> tuple[int, str]:
        rows = self._store.rows
        return (rows[-1].id, rows[-1].hash) if rows else (0, GENESIS)

    # -- writing -------------------------------------------------------------------------------

    def commit(self, batch: Batch) -> list[OutboxRow]:
        """All or nothing: the new state is built aside and put in place at once."""
        if self.read_only:
            raise JournalError(f"journal {self.path} is open read-only")
        st = self._store
        with st.lock:
            now = time.time_ns() // 1_000_000
            last_id, last_hash = self.head
            rows = []
            for t, r, e in batch.events:
                body = e.model_dump_json()
                last_id, prev = last_id + 1, last_hash
                last_hash = row_hash(prev, last_id, t, r, e.type, body, now)
                rows.append(JournalRow(last_id, t, r, e.type, body, now, prev, last_hash))
            outbox = dict(st.outbox)
            keys = {o.key for o in outbox.values()}
            next_id, new_rows = st.next_outbox_id, []
            for key, topic, payload, table_id, round_id in batch.outbox:
                if key in keys:
                    continue  # a replayed commit: the first row of a key stays
                row = OutboxRow(next_id, key, topic, bytes(payload), table_id, round_id, now)
                outbox[next_id], next_id = row, next_id + 1
                keys.add(key)
                new_rows.append(row)
            for i in batch.delivered:
                outbox.pop(i, None)
            for k in batch.acked:
                for i in [i for i, o in outbox.items() if o.key == k or o.key.startswith(f"{k}#")]:
                    del outbox[i]
            commands = dict(st.commands)
            for c, _i in batch.commands:
                stored = StoredCommand(c.table_id, c.command_id, c.round_id, c.type, c.role, c.digest,
                                       json.loads(json.dumps(c.answer, sort_keys=True)))
                commands.setdefault((c.table_id, c.role, c.command_id), stored)
            readers = dict(st.readers)
            readers.update({r.reader: r for r in batch.readers})
            st.rows = st.rows + rows
            st.outbox, st.next_outbox_id, st.commands, st.readers = outbox, next_id, commands, readers
        return new_rows

    async def commit_async(self, batch: Batch) -> list[OutboxRow]:
        return self.commit(batch)

    def forget_table(self, table_id: str) -> None:
        """Nothing kept per table."""

    # -- reads ---------------------------------------------------------------------------------

    def command(self, table_id: str, role: str, command_id: str) -> StoredCommand | None:
        return self._store.commands.get((table_id, role, command_id))

    def delivered(self, table_id: str, round_id: str) -> bool:
        return any(r.table_id == table_id and r.type == "result_delivered" and r.round_id == round_id
                   for r in self._store.rows)

    def pending(self, tables: Iterable[str] | None = None) -> list[OutboxRow]:
        wanted = None if tables is None else set(tables)
        return [o for _i, o in sorted(self._store.outbox.items()) if wanted is None or o.table_id in wanted]

    def reader_states(self) -> dict[str, ReaderState]:
        return dict(sorted(self._store.readers.items()))

    def _replay_start(self, table_id: str) -> int | None:
        """As the SQL journals ask it (dealer/edge/journal_replay.py): the oldest undelivered
        round, else the last round, else the first table operation."""
        rows = [r for r in self._store.rows if r.table_id == table_id]
        delivered = {r.round_id for r in rows if r.type == "result_delivered"}
        opened = [r for r in rows if r.type == "open_round"]
        undelivered = [r.id for r in opened if r.round_id not in delivered]
        if undelivered:
            return min(undelivered)
        if opened:
            return max(r.id for r in opened)
        return next((r.id for r in rows if r.type in _OPERATIONS), None)

    def _replay_rules(self, table_id: str, start: int | None) -> JournalRow | None:
        return self.rules_before(table_id, start)

    def _replay_from(self, table_id: str, start: int) -> Iterable[tuple[int, str]]:
        return [(r.id, r.body) for r in self._store.rows if r.table_id == table_id and r.id >= start]

    def rules_before(self, table_id: str, row_id: int | None) -> JournalRow | None:
        before = row_id if row_id is not None else 1 << 62
        found = [r for r in self._store.rows if r.table_id == table_id and r.type == "table_rules" and r.id < before]
        return found[-1] if found else None

    def rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        return self.live_rows(table_id, since_id)

    def live_rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        return iter([r for r in self._store.rows if r.id >= since_id and (table_id is None or r.table_id == table_id)])

    def hash_at(self, row_id: int) -> str | None:
        return next((r.hash for r in self._store.rows if r.id == row_id), None)

    def count(self, table_id: str | None = None) -> int:
        return sum(1 for _r in self.live_rows(table_id))

    # -- checks --------------------------------------------------------------------------------

    def verify_chain(self) -> ChainReport:
        return verify_rows((astuple(r) for r in self._store.rows), 1, GENESIS)

    def close(self) -> None:
        """The rows stay for the next open of the same name."""
        self._stop_writer()

    async def close_async(self) -> None:
        self.close()


register("memory", (PREFIX,), "tests.memory_journal:MemoryJournal")
