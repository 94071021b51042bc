"""What the operator needs to know about the journal's disk: why a commit failed (a metric
label), how big the live journal is and how much room is left where it lives.

Pure functions over the file system, called from a worker thread (``statvfs`` on a slow or
hung disk must not stall the event loop)."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

#: SQLite's primary result code name -> ``dealer_journal_commit_failures_total{reason}``.
_REASONS = {
    "SQLITE_FULL": "disk_full",
    "SQLITE_IOERR": "io_error",
    "SQLITE_READONLY": "read_only",
    "SQLITE_BUSY": "busy",
    "SQLITE_LOCKED": "busy",
    "SQLITE_CORRUPT": "corrupt",
    "SQLITE_NOTADB": "corrupt",
    "SQLITE_CANTOPEN": "cant_open",
    "SQLITE_PROTOCOL": "io_error",
    "SQLITE_CONSTRAINT": "constraint",
}

#: The files of the live journal besides the database: its WAL and the WAL index.
SIDE_FILES = ("-wal", "-shm")


def failure_reason(exc: sqlite3.Error) -> str:
    """A low-cardinality label for a failed commit: ``disk_full``, ``io_error``, ``read_only``,
    ``busy``, ``corrupt``, ``cant_open``, ``constraint`` or ``other``.

    Extended codes (``SQLITE_IOERR_WRITE``, ``SQLITE_READONLY_DBMOVED``) map to their primary
    code; an error without a code (older Python, a driver-level error) falls back to its text."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    primary = "_".join(name.split("_")[:2])
    if primary in _REASONS:
        return _REASONS[primary]
    text = str(exc).lower()
    if "disk is full" in text:
        return "disk_full"
    if "i/o error" in text:
        return "io_error"
    if "readonly" in text or "read-only" in text:
        return "read_only"
    return "other"


@dataclass(frozen=True, slots=True)
class DiskUsage:
    journal_bytes: int  # database + WAL + WAL index
    free_bytes: int  # available to the service's user in the journal's file system
    size_bytes: int  # that file system's size


def disk_usage(journal_path: str | Path) -> DiskUsage:
    """The live journal's size and the room left in its file system. A side file that does
    not exist (no WAL yet, a checkpoint just truncated it) counts as 0."""
    path = Path(journal_path)
    total = 0
    for p in (path, *(Path(f"{path}{s}") for s in SIDE_FILES)):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        total += st.st_size
    vfs = os.statvfs(path.parent)
    return DiskUsage(total, vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize)
