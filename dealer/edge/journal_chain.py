"""The hash chain's links: how a row's hash is made (one chain per journal in SQLite, one per table
in PostgreSQL) and the tight check of a run of SQLite rows. Pure functions, shared by the
journals, the segment files, the tools that build or audit a journal and the tests."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from typing import Any

from dealer.edge.journal_rows import ChainReport


def row_hash(prev_hash: str, row_id: int, table_id: str, round_id: str | None, type_: str, body: str,
             recorded_at: int) -> str:
    """The chain link of one journal row: SHA-256 over the previous hash and the row."""
    text = "\x1f".join((prev_hash, str(row_id), table_id, round_id or "", type_, body, str(recorded_at)))
    return hashlib.sha256(text.encode()).hexdigest()


def verify_rows(rows: Iterable[tuple[Any, ...]], expected_id: int, prev: str) -> ChainReport:
    """The chain check of ``(id, table_id, round_id, type, body, recorded_at, prev_hash, hash)``
    tuples in id order, the first expected to be ``expected_id`` and to link to ``prev``: the
    first row missing, not linking, altered, or unreadable (SQLite's error while reading it, or a
    column of the wrong type: bytes damaged in the file) ends the walk."""
    sha, n = hashlib.sha256, 0
    try:
        for rid, t, r, ty, body, at, ph, h in rows:
            n += 1
            if rid != expected_id:
                return ChainReport(n, False, rid, f"row {expected_id} is missing (next row is {rid})")
            if ph != prev:
                return ChainReport(n, False, rid, f"row {rid} does not link to row {rid - 1}")
            # row_hash's text, spelled as an f-string (the fastest way; a damaged column type only hashes wrong)
            if sha(f"{prev}\x1f{rid}\x1f{t}\x1f{r or ''}\x1f{ty}\x1f{body}\x1f{at}".encode()).hexdigest() != h:
                return ChainReport(n, False, rid, f"row {rid} was altered (its hash does not match its content)")
            prev, expected_id = h, rid + 1
    except (sqlite3.DatabaseError, ValueError) as exc:  # a damaged page; bytes no longer UTF-8 (UnicodeError)
        return ChainReport(n, False, expected_id, f"the rows from {expected_id} on cannot be read "
                           f"({' '.join(str(exc).split())[:120]})")
    return ChainReport(n, True)


def pg_row_hash(prev_hash: str, seq: int, table_id: str, round_id: str | None, type_: str, body: str,
                recorded_at: int, node: str, epoch: int) -> str:
    """The chain link of one row of a table: SHA-256 over the previous row's hash and this row,
    as :func:`dealer.edge.journal.row_hash` plus the writer's node and lease epoch (so a row
    cannot be re-attributed to another node or lease without breaking the chain)."""
    text = "\x1f".join((prev_hash, str(seq), table_id, round_id or "", type_, body, str(recorded_at), node,
                        str(epoch)))
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["pg_row_hash", "row_hash", "verify_rows"]
