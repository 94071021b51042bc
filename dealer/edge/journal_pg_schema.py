"""The PostgreSQL journal's schema (dealer/edge/pg_schema.sql): found and checked, or created in an
empty database, and the journal id it holds. Run once when a journal opens."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from dealer.edge.journal_errors import JournalError
from dealer.edge.journal_pg_sql import COLUMNS, SCHEMA_LOCK, SCHEMA_VERSION, TABLES, one_line, schema_sql
from dealer.edge.journal_rows import JOURNAL_ID, new_journal_id


def open_schema(conn: psycopg.Connection[Any], path: str, read_only: bool) -> tuple[str, str]:
    """Check the database holds this version's journal, or create it (empty database, not
    read-only): ``existing`` or ``created``. Two nodes opening one empty database at once
    agree on one journal id (an advisory lock serialises the creation)."""
    found = existing_schema(conn, path)
    if found is not None:
        return found, "existing"
    if read_only:
        raise JournalError(f"journal {path}: no dealer journal in this database (it has no meta table)")
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            found = existing_schema(conn, path)
            if found is not None:
                return found, "existing"
            conn.execute(schema_sql())
            journal_id = new_journal_id()
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', %s), ('journal_id', %s)",
                         (str(SCHEMA_VERSION), journal_id))
    except pg_errors.InsufficientPrivilege as exc:
        raise JournalError(f"journal {path}: the database has no journal yet and this role cannot create "
                           f"it ({one_line(exc)}): open it once as the database's owner, then grant "
                           "deploy/postgresql/roles.sql") from None
    return journal_id, "created"

def existing_schema(conn: psycopg.Connection[Any], path: str) -> str | None:
    """The journal id of a database holding our schema; None for an empty one; JournalError
    for another version or tables named like ours that are not ours."""
    present = {r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_name = ANY(%s)", (list(TABLES),))}
    if "meta" not in present:
        if present:
            raise JournalError(f"journal {path}: the database has tables named like the journal's "
                               f"({', '.join(sorted(present))}) but no dealer meta table: not a dealer journal; "
                               "use an empty database")
        return None
    cols: dict[str, set[str]] = {}
    for table, col in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ANY(%s)", (list(TABLES),)):
        cols.setdefault(table, set()).add(col)
    if not COLUMNS["meta"] <= cols.get("meta", set()):
        raise JournalError(f"journal {path}: its meta table is not a dealer journal's; use an empty database")
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'journal_id')").fetchall())
    version = meta.get("schema_version")
    if version is None:
        raise JournalError(f"journal {path}: the database has a meta table without a schema_version: "
                           "not a dealer journal; use an empty database")
    if version != str(SCHEMA_VERSION):
        raise JournalError(f"journal {path}: schema version {version}, this software needs "
                           f"{SCHEMA_VERSION}: migrate it")
    for table, want in COLUMNS.items():
        missing = want - cols.get(table, set())
        if missing:
            raise JournalError(f"journal {path}: table {table} lacks column(s) {', '.join(sorted(missing))}: "
                               "not a dealer journal of this schema version")
    journal_id = meta.get("journal_id")
    if not isinstance(journal_id, str) or not JOURNAL_ID.match(journal_id):
        what = "is missing" if journal_id is None else f"is damaged ({str(journal_id)[:40]!r})"
        raise JournalError(f"journal {path}: its journal id {what}; round ids and idempotency keys "
                           "depend on it: restore the journal from a backup")
    return journal_id


__all__ = ["existing_schema", "open_schema"]
