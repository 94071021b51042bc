"""What a journal raises, whatever holds it: the caller's answer differs by class (refuse to
start, retry the batch later, step down from the table), never by backend."""

from __future__ import annotations


class JournalError(ValueError):
    """The journal cannot be used as it is (missing or unwritable directory, not a SQLite
    database, damaged, too old): restarting cannot help, a person must act. ``dealer run``
    prints the message on one line and exits 2."""


class ReplayError(JournalError):
    """Replaying the journal failed at a row (its body is not a valid event, or the core refused
    it): the tables cannot be rebuilt as they were, so the service refuses to start (exit 2)."""


class JournalLocked(JournalError):
    """Another process holds the journal's lock (:func:`lock_journal`)."""


class JournalWriteFailed(RuntimeError):
    """A group commit to a journal server failed and may succeed later (the database is down,
    unreachable, restarting or read-only): the commit loop holds the batch and retries it, as it
    does for SQLite's disk-full and I/O errors. ``reason`` is the metric label."""

    def __init__(self, message: str, reason: str = "database_unreachable") -> None:
        super().__init__(message)
        self.reason = reason


class Fenced(RuntimeError):
    """The database refused a write because this node no longer holds the table's lease at the
    epoch it wrote (another node took the table over, or the lease expired while this node was
    paused or cut off). Nothing of the batch was written; the node must step down from the
    table, never retry the write (dealer/edge/leases.py)."""

    def __init__(self, message: str, table_id: str | None = None) -> None:
        super().__init__(message)
        self.table_id = table_id


class JournalDiskFull(RuntimeError):
    """The journal cannot be opened because its file system is full (SQLite needs room for its
    WAL index and schema even to read): this may pass by itself, so ``dealer run`` exits 1
    (restarted with backoff), not 2."""


__all__ = ["Fenced", "JournalDiskFull", "JournalError", "JournalLocked", "JournalWriteFailed", "ReplayError"]
