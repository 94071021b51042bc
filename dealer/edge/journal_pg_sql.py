"""What the PostgreSQL journal (dealer/edge/journal_pg.py) says to the server and how it reads the
answers: its schema's names, the SQL of a commit (one statement for the sync and async paths),
the row it reads back, and what a failed statement means (:func:`classify`). No connection
is made here."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from dealer.edge.journal_errors import Fenced, JournalWriteFailed
from dealer.edge.journal_rows import GENESIS, JournalRow

#: The schema this code writes and reads (``meta.schema_version``); another one is refused.
SCHEMA_VERSION = 1

#: ``JournalWriteFailed.reason`` of this journal (the ``dealer_journal_commit_failures_total`` label).
REASONS = ("database_unreachable", "database_read_only", "database_timeout", "database_busy",
           "database_disk_full", "database_error")

#: Our tables: a database that has one of them but no dealer ``meta`` is not a journal of ours.
TABLES = ("meta", "nodes", "leases", "events", "commands", "outbox", "reader_state")
COLUMNS = {
    "meta": {"key", "value"},
    "events": {"id", "table_id", "seq", "round_id", "type", "body", "recorded_at", "node", "epoch", "prev_hash",
               "hash"},
    "commands": {"table_id", "command_id", "round_id", "type", "role", "digest", "answer", "event_id"},
    "outbox": {"id", "key", "topic", "payload", "table_id", "round_id", "created_at"},
    "reader_state": {"reader", "boot", "seq", "key", "mac", "updated_at"},
    "leases": {"table_id", "node", "epoch", "expires_at", "acquired_at"},
    "nodes": {"node", "session", "started_at", "heartbeat_at", "leaving"},
}

#: pg_advisory_xact_lock key serialising schema creation (two nodes opening an empty database).
SCHEMA_LOCK = 0x6465616C65720001  # "dealer" + 1

#: A short timeout for the event loop's reads (connect and statement), seconds.
QUICK_TIMEOUT = 2.0

ROW_COLS = "id, table_id, round_id, type, body, recorded_at, prev_hash, hash, seq, node, epoch"
PAGE = 5000


@dataclass(frozen=True, slots=True)
class PgJournalRow(JournalRow):
    """A journal row with its place in its table's chain and who wrote it (``id`` is global)."""

    seq: int = 0
    node: str = ""
    epoch: int = 0


def where(url: str) -> str:
    """host:port of a URL, for messages (libpq's defaults when absent)."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "?"
    return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"


def one_line(exc: BaseException, secret: str | None = None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.removeprefix("connection failed: ")
    return text.replace(secret, "***") if secret else text


def schema_sql() -> str:
    return resources.files("dealer.edge").joinpath("pg_schema.sql").read_text(encoding="utf-8")


# -- failures -------------------------------------------------------------------------------

_FENCED_TABLE = re.compile(r"^fenced: table (\S+) ")
_DUPLICATE_SEQ = re.compile(r"\(table_id, seq\)=\((.*), (\d+)\)")
#: Connection-level states: the outcome of a statement in flight is unknown.
_UNREACHABLE = ("57P01", "57P02", "57P03", "53300")


def classify(exc: psycopg.Error) -> Fenced | JournalWriteFailed:
    """What a failed commit means: :class:`Fenced` (the lease is gone: the trigger's DL001, or
    another writer already wrote this table's next ``seq``), else :class:`JournalWriteFailed`
    with its reason label."""
    state = exc.sqlstate or ""
    msg = one_line(exc)
    if state == "DL001":
        m = _FENCED_TABLE.match(exc.diag.message_primary or "")
        return Fenced(msg, m.group(1) if m else None)
    if state == "23505" and exc.diag.table_name == "events":
        m = _DUPLICATE_SEQ.search(exc.diag.message_detail or "")
        return Fenced(f"fenced: another writer already wrote this table's next row ({msg})", m.group(1) if m else None)
    if not state or state.startswith("08") or state in _UNREACHABLE:
        return JournalWriteFailed(msg, "database_unreachable")
    if state == "25006":
        return JournalWriteFailed(msg, "database_read_only")
    if state in ("57014", "55P03"):
        return JournalWriteFailed(msg, "database_timeout")
    if state in ("40001", "40P01"):
        return JournalWriteFailed(msg, "database_busy")
    if state == "53100":
        return JournalWriteFailed(msg, "database_disk_full")
    return JournalWriteFailed(msg, "database_error")


# -- the SQL of a commit (shared by the sync and async paths) --------------------------------

HEADS_SQL = """
SELECT t.table_id, h.seq, h.hash
FROM unnest(%s::text[]) AS t(table_id)
LEFT JOIN LATERAL (SELECT seq, hash FROM events e WHERE e.table_id = t.table_id ORDER BY seq DESC LIMIT 1) h ON true
"""

AFTER_SQL = f"""
SELECT {", ".join("e." + c for c in ROW_COLS.split(", "))} FROM events e
JOIN unnest(%s::text[], %s::bigint[]) AS h(table_id, seq) ON e.table_id = h.table_id AND e.seq > h.seq
ORDER BY e.table_id, e.seq
"""

OUTBOX_BY_KEYS_SQL = """
SELECT id, key, topic, payload, table_id, round_id, created_at FROM outbox WHERE key = ANY(%s::text[]) ORDER BY id
"""

#: One statement, so one transaction and one round trip: data-modifying CTEs all run to
#: completion and commit together (or not at all) in autocommit mode. They see one snapshot, so
#: the DELETE does not see the outbox rows inserted beside it: an outbox row is always
#: committed (and published) before the ack or delivery that deletes it can exist.
COMMIT_SQL = """
WITH ev AS (
    INSERT INTO events (table_id, seq, round_id, type, body, recorded_at, node, epoch, prev_hash, hash)
    SELECT table_id, seq, round_id, type, body, recorded_at, node, epoch, prev_hash, hash
    FROM unnest(%(e_table)s::text[], %(e_seq)s::bigint[], %(e_round)s::text[], %(e_type)s::text[],
                %(e_body)s::text[], %(e_at)s::bigint[], %(e_node)s::text[], %(e_epoch)s::bigint[],
                %(e_prev)s::text[], %(e_hash)s::text[])
         WITH ORDINALITY AS u(table_id, seq, round_id, type, body, recorded_at, node, epoch, prev_hash, hash, o)
    ORDER BY table_id, o  -- the fence locks lease rows in table order, as the lease statements do
    RETURNING id, table_id, seq
), ob AS (
    INSERT INTO outbox (key, topic, payload, table_id, round_id, created_at)
    SELECT key, topic, payload, table_id, round_id, %(now)s
    FROM unnest(%(o_key)s::text[], %(o_topic)s::text[], %(o_payload)s::bytea[], %(o_table)s::text[],
                %(o_round)s::text[]) WITH ORDINALITY AS u(key, topic, payload, table_id, round_id, o)
    ORDER BY o
    ON CONFLICT (key) DO NOTHING  -- a second row for one idempotency key (a replayed commit)
    RETURNING id, key
), gone AS (
    DELETE FROM outbox x  -- the first condition spares a scan of the outbox when nothing goes
    WHERE (cardinality(%(delivered)s::bigint[]) > 0 OR cardinality(%(acked)s::text[]) > 0)
      AND (x.id = ANY(%(delivered)s::bigint[])
           OR EXISTS (SELECT 1 FROM unnest(%(acked)s::text[]) AS a(k)
                      WHERE x.key = a.k OR left(x.key, length(a.k) + 1) = a.k || '#'))
    RETURNING 1
), cmd AS (
    INSERT INTO commands (table_id, command_id, round_id, type, role, digest, answer, event_id)
    SELECT c.table_id, c.command_id, c.round_id, c.type, c.role, c.digest, c.answer, ev.id
    FROM unnest(%(c_table)s::text[], %(c_id)s::text[], %(c_round)s::text[], %(c_type)s::text[], %(c_role)s::text[],
                %(c_digest)s::text[], %(c_answer)s::text[], %(c_etable)s::text[], %(c_eseq)s::bigint[])
         AS c(table_id, command_id, round_id, type, role, digest, answer, etable, eseq)
    JOIN ev ON ev.table_id = c.etable AND ev.seq = c.eseq
    ON CONFLICT DO NOTHING
    RETURNING 1
), rs AS (
    INSERT INTO reader_state (reader, boot, seq, key, mac, updated_at)
    SELECT reader, boot, seq, key, mac, %(now)s
    FROM unnest(%(r_reader)s::text[], %(r_boot)s::bigint[], %(r_seq)s::bigint[], %(r_key)s::text[],
                %(r_mac)s::text[]) AS u(reader, boot, seq, key, mac)
    ON CONFLICT (reader) DO UPDATE SET boot = excluded.boot, seq = excluded.seq, key = excluded.key,
        mac = excluded.mac, updated_at = excluded.updated_at
    RETURNING 1
)
SELECT 'e', id, table_id, seq FROM ev
UNION ALL SELECT 'o', id, key, NULL FROM ob
"""


@dataclass(slots=True)
class CommitPlan:
    """A batch turned into the commit statement's parameters, and what it will make of the heads."""

    params: dict[str, Any]
    heads: dict[str, tuple[int, str]]  # each written table's new head (seq, hash)
    events: list[tuple[str, int, str | None, str, str, str]]  # table, seq, round, type, body, hash
    outbox: dict[str, tuple[str, bytes, str, str]]  # key -> topic, payload, table, round
    now: int


@dataclass(slots=True)
class Query:
    sql: str
    params: Any


def head_of_row(row: tuple[Any, ...]) -> tuple[int, str]:
    """(seq, hash) from a (table, seq, hash) row of ``HEADS_SQL`` (a table without rows: 0, GENESIS)."""
    return (int(row[1]), str(row[2])) if row[1] is not None else (0, GENESIS)


class ReadAdapter:
    """``execute(sql, params).fetchone()`` over the PostgreSQL journal's reads, for the query logic
    shared with SQLite (:func:`dealer.edge.journal_replay.replay_start`)."""

    def __init__(self, read: Callable[[str, Any], list[tuple[Any, ...]]]) -> None:
        self._read = read

    def execute(self, sql: str, params: Sequence[Any] = ()) -> "Rows":
        return Rows(self._read(sql, tuple(params)))


class Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


__all__ = ["AFTER_SQL", "COLUMNS", "COMMIT_SQL", "HEADS_SQL", "OUTBOX_BY_KEYS_SQL", "PAGE", "QUICK_TIMEOUT", "REASONS",
           "ROW_COLS", "SCHEMA_LOCK", "SCHEMA_VERSION", "TABLES", "CommitPlan", "PgJournalRow", "Query",
           "ReadAdapter", "Rows", "classify", "head_of_row", "one_line", "schema_sql", "where"]
