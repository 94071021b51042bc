"""The journal contract: what every journal answers, whatever holds it. The service, the commit
loop, maintenance, the start checks and the tools are written against :class:`Journal`, never
against a backend; a backend is chosen by :func:`dealer.edge.journals.open_journal`.

The SQLite journal (dealer/edge/journal.py) and the PostgreSQL journal (dealer/edge/journal_pg.py)
implement it; tests/memory_journal.py is a third, kept in memory, that passes the same contract
tests (tests/test_journal_contract.py). A capability only one backend has is still a member here,
answered by the others with "nothing to do" (``forget_table``, ``checkpoint``, ``finish_roll``):
callers never ask which backend they hold.

The values it takes and gives are in dealer/edge/journal_rows.py, what it raises in
dealer/edge/journal_errors.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Protocol

from dealer.core.commands import StoredCommand
from dealer.core.events import Event
from dealer.edge.journal_rows import GENESIS, AuditReport, Batch, ChainReport, JournalRow, OutboxRow
from drivers.frames import ReaderState


class Journal(Protocol):
    """A journal: the hash-chained, append-only events of every table, the outbox, the accepted
    command ids and the signed readers' state, written a batch at a time, all or nothing."""

    #: True for a journal in a file on this host that rolls settled rows into segment files
    #: (SQLite): its reads answer at once on the event loop, and WAL checkpoints, segment rolls
    #: and its own head record (dealer/edge/anchors.py) are run for it. False for a journal
    #: server (asked off the event loop, keeping its own history).
    rolls_segments: bool

    @property
    def path(self) -> str:
        """Where it is, for messages and logs: the file, or the URL without its password."""
        ...

    @property
    def journal_id(self) -> str:
        """The journal's id, the series of its round ids (dealer/edge/journal_rows.py)."""
        ...

    #: How the id came to be at open: ``existing``, ``created``, ``migrated`` or ``none`` (read-only, no id).
    journal_id_source: str

    @property
    def head(self) -> tuple[int, str]:
        """(id, hash) of the last committed row: the anchor published on the journal topic."""
        ...

    # -- writing -------------------------------------------------------------------------------

    def commit(self, batch: Batch) -> list[OutboxRow]:
        """Write a batch in one transaction; return the outbox rows it created. All or nothing:
        on :class:`~dealer.edge.journal_errors.JournalWriteFailed` (or sqlite3.Error) the same
        batch may be committed again; :class:`~dealer.edge.journal_errors.Fenced`: step down."""
        ...

    async def commit_async(self, batch: Batch) -> list[OutboxRow]:
        """:meth:`commit` from the event loop (a blocking backend runs it in :attr:`writer`)."""
        ...

    @property
    def writer(self) -> Executor:
        """The one thread this journal's blocking calls run in (commits, replays, retention steps),
        so that they never overlap (dealer/edge/journal_writer.py)."""
        ...

    def forget_table(self, table_id: str) -> None:
        """This node no longer writes the table (a backend that keeps per-table heads drops it)."""
        ...

    # -- the event loop's reads ------------------------------------------------------------------

    def command(self, table_id: str, role: str, command_id: str) -> StoredCommand | None:
        """An accepted command id of a table and role, from any earlier run."""
        ...

    def delivered(self, table_id: str, round_id: str) -> bool:
        """Whether the journal holds a ``result_delivered`` for the round."""
        ...

    # -- reads ---------------------------------------------------------------------------------

    def pending(self, tables: Iterable[str] | None = None) -> list[OutboxRow]:
        """The outbox rows waiting for settlement's acknowledgement, oldest first."""
        ...

    def reader_states(self) -> dict[str, ReaderState]:
        """The last committed state of every signed reader."""
        ...

    def replay(self, table_id: str) -> Iterator[Event]:
        """The events that rebuild a table (dealer/edge/journal_replay.py)."""
        ...

    def replay_rows(self, table_id: str) -> Iterator[tuple[int, Event]]:
        """(row id, event) of the events that rebuild a table."""
        ...

    def rules_before(self, table_id: str, row_id: int | None) -> JournalRow | None:
        """The last ``table_rules`` row of a table before ``row_id`` (None: before the end)."""
        ...

    def rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        """Every row in id order, history included (recall and audit)."""
        ...

    def live_rows(self, table_id: str | None = None, since_id: int = 0) -> Iterator[JournalRow]:
        """The rows not rolled out into segment files, in id order."""
        ...

    def hash_at(self, row_id: int) -> str | None:
        """The hash of row ``row_id`` (None: no such row), to compare an anchor with."""
        ...

    def count(self, table_id: str | None = None) -> int:
        """The live rows (of one table)."""
        ...

    # -- checks --------------------------------------------------------------------------------

    def verify_chain(self) -> ChainReport:
        """The live chain, walked: the first row altered, removed or out of order."""
        ...

    def audit(self, anchors: Iterable[tuple[int, str]] = ()) -> AuditReport:
        """``dealer audit verify``: the whole chain, history included, and each anchor given."""
        ...

    # -- retention (segment files: nothing to do for a journal that does not roll) ---------------

    def checkpoint(self) -> int:
        """Copy the write-ahead log into the journal (off the commit path); frames still waiting."""
        ...

    def segment_records(self) -> list[Any]:
        """The segments rolled out of this journal, in order (none: ``[]``)."""
        ...

    def chain_start(self) -> tuple[int, str]:
        """(id, hash) the live rows link to."""
        ...

    def finish_roll(self, prepared: Any, purge_rows: int = 2000) -> bool:
        """Record a prepared segment (dealer/edge/segments.py); False: nothing rolled."""
        ...

    def purge_rolled(self, limit: int = 2000) -> int:
        """Delete rows a recorded segment holds; how many went."""
        ...

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection (from any thread)."""
        ...

    async def close_async(self) -> None:
        """Close from the event loop (a backend whose connections need the loop closes them here)."""
        ...


class NoSegments:
    """The retention half of :class:`Journal` for a journal that never rolls rows out into
    segment files (SQLite's retention, dealer/edge/segments.py): PostgreSQL checkpoints by
    itself and keeps every row; the chain starts at the genesis. Its audit is therefore its
    chain and each anchor against the row it names (``verify_chain`` and ``hash_at``)."""

    def verify_chain(self) -> ChainReport:
        raise NotImplementedError

    def hash_at(self, row_id: int) -> str | None:
        raise NotImplementedError

    def audit(self, anchors: Iterable[tuple[int, str]] = ()) -> AuditReport:
        """``dealer audit verify``: every table's chain, and each anchor (ID:HASH as published)
        against the row with that id."""
        given = list(anchors)
        chain = self.verify_chain()
        rep = AuditReport(rows=chain.rows, segments=0, anchors=len(given))
        if not chain.ok:
            return rep.fail(chain.reason, chain.first_broken)
        for rid, h in given:
            found = self.hash_at(rid)
            if found is None:
                return rep.fail(f"row {rid}, named by the given anchor, is missing: rows were cut off or removed", rid)
            if found != h:
                return rep.fail(f"row {rid} differs from the given anchor (hash {found[:16]}..., anchored "
                                f"{h[:16]}...)", rid)
        return rep

    def checkpoint(self) -> int:
        return 0

    def segment_records(self) -> list[Any]:
        return []

    def chain_start(self) -> tuple[int, str]:
        return (0, GENESIS)

    def finish_roll(self, prepared: Any, purge_rows: int = 2000) -> bool:
        return False

    def purge_rolled(self, limit: int = 2000) -> int:
        return 0


class JournalBackend(Protocol):
    """A journal class as the registry (dealer/edge/journals.py) opens it."""

    @classmethod
    def open(cls, target: str | Path, *, node_id: str | None = None, fsync: bool = True) -> Journal:
        """The journal at ``target`` for the service (created if new), written by ``node_id``."""
        ...

    @classmethod
    def open_read_only(cls, target: str | Path) -> Journal:
        """The journal at ``target`` for reading only: never created, migrated or written."""
        ...


__all__ = ["Journal", "JournalBackend"]
