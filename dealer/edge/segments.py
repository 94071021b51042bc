"""Journal retention by segments: settled history rolls into read-only, hash-chained files.

A *segment* is a small standalone SQLite file ``<journal>.segments/NNNNNN.sqlite`` holding a
run of the oldest journal rows exactly as they were (ids, bodies, ``prev_hash``, ``hash``),
and one ``segment`` row: its number, first and last row id, the chain link in (the
``prev_hash`` of its first row: the previous segment's last hash, GENESIS for the first),
its last hash and an **anchor**, the live journal's head (last row id and hash) when it was
rolled. It is fsynced, renamed into place and made read-only (0444).

Rolling is two steps, so the commit loop is never held up by copying rows:

1. :func:`prepare_roll` (any thread, its own read connection): finds the rows that can go,
   copies them into the segment file and returns a :class:`Prepared`. Rolled rows are
   immutable and below every table's replay start, so copying them beside the writer is
   safe; the floor (:func:`replay_floor`) only ever moves forward as rows are committed.
2. :meth:`dealer.edge.journal.Journal.finish_roll` (the writer thread, between group commits): in
   one transaction checks the floor again, records the segment (number, rows, last hash,
   anchor, file SHA-256) in the live journal's append-only ``segments`` table and deletes the
   rolled rows. The events table's delete trigger lets only rows covered by a recorded
   segment go, so the append-only guard stays in force for everything else.

A crash between the two leaves an unrecorded file with the next number: the next roll
replaces it, and :func:`verify` reports it as ``uncommitted`` (not a failure).

:func:`verify` (``dealer audit verify``) walks every segment in order and then the live rows,
checking each link, the files against their records (missing, altered, extra), and every
anchor against the row with that id wherever it now lives; an anchor from outside (the
retained ``studio/v1/backends/{node}/journal`` message, ``--anchor ID:HASH``) detects rows cut
off the end after the last roll.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dealer.edge.journal_chain import row_hash
from dealer.edge.journal_errors import JournalError
from dealer.edge.journal_replay import replay_start
from dealer.edge.journal_rows import GENESIS, AuditReport, JournalRow

_ROW_COLS = "id, table_id, round_id, type, body, recorded_at, prev_hash, hash"

_SEGMENT_SCHEMA = """
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    table_id TEXT NOT NULL,
    round_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX events_by_round ON events (table_id, type, round_id);
CREATE TABLE segment (
    number INTEGER NOT NULL,
    first_id INTEGER NOT NULL,
    last_id INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,    -- the chain link in: the previous segment's last hash (GENESIS for the first)
    last_hash TEXT NOT NULL,
    anchor_id INTEGER NOT NULL, -- the live journal's head when this segment was rolled
    anchor_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
"""


def segment_dir(journal_path: str | Path) -> Path:
    return Path(f"{journal_path}.segments")


def segment_name(number: int) -> str:
    return f"{number:06d}.sqlite"


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """A segment as the live journal records it (table ``segments``)."""

    number: int
    first_id: int
    last_id: int
    last_hash: str
    anchor_id: int
    anchor_hash: str
    sha256: str
    rows: int
    created_at: int


@dataclass(frozen=True, slots=True)
class Prepared:
    """A segment file written and fsynced, waiting for :meth:`Journal.finish_roll`."""

    record: SegmentRecord
    path: Path
    #: every table with rows in the journal when it was prepared: a table that appears later
    #: has only rows after the segment, so the floor check at the commit needs only these
    tables: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NoRoll:
    """Nothing rolled: too few rows may go. ``pinned`` names the tables whose old ``table_rules``
    row holds the floor back (journaling their rules again lets it move)."""

    eligible: int
    pinned: tuple[str, ...] = ()


def _ro(path: Path) -> sqlite3.Connection:
    """A read-only connection that writes nothing next to the file (segments are 0444)."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def _missing(rec: SegmentRecord, path: Path) -> str | None:
    """Why the recorded segment ``rec`` cannot be read from ``path`` because the file is gone, or None."""
    if path.is_file():
        return None
    return f"segment {rec.number} (rows {rec.first_id}..{rec.last_id}) is missing: {path}"


@contextmanager
def _open_segment(d: Path, rec: SegmentRecord) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """The file of the recorded segment ``rec`` in segment directory ``d`` and a read-only
    connection to it, closed afterwards; :class:`JournalError` if the file is missing."""
    path = d / segment_name(rec.number)
    missing = _missing(rec, path)
    if missing is not None:
        raise JournalError(missing)
    con = _ro(path)
    try:
        yield path, con
    finally:
        con.close()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def records(con: sqlite3.Connection) -> list[SegmentRecord]:
    cur = con.execute("SELECT number, first_id, last_id, last_hash, anchor_id, anchor_hash, sha256, rows, created_at "
                      "FROM segments ORDER BY number")
    return [SegmentRecord(*r) for r in cur]


def journal_tables(con: sqlite3.Connection) -> tuple[str, ...]:
    return tuple(str(t) for (t,) in con.execute("SELECT DISTINCT table_id FROM events"))


def replay_floor(con: sqlite3.Connection, tables: Iterable[str] | None = None) -> tuple[int | None, dict[str, int]]:
    """The lowest row id any table's replay needs (its start, or the ``table_rules`` row in
    force there), over every table in the journal (configured or not: a table taken out of
    the configuration keeps what it needs). None: no table needs anything. Also, per table
    whose needed rules row is its last ``table_rules`` row and lies below its start, that
    row's id (journaling the rules again would let the floor move past it)."""
    floor: int | None = None
    rules_pins: dict[str, int] = {}
    for tid in (journal_tables(con) if tables is None else tables):
        start = replay_start(con, tid)
        rules = con.execute("SELECT MAX(id) FROM events WHERE table_id = ? AND type = 'table_rules' AND id < ?",
                            (tid, start if start is not None else 1 << 62)).fetchone()[0]
        need = [x for x in (start, rules) if x is not None]
        if not need:
            continue
        floor = min(need) if floor is None else min(floor, *need)
        if rules is not None:
            last_rules = con.execute("SELECT MAX(id) FROM events WHERE table_id = ? AND type = 'table_rules'",
                                     (tid,)).fetchone()[0]
            if last_rules == rules:
                rules_pins[tid] = int(rules)
    return floor, rules_pins


def roll_range(con: sqlite3.Connection, *, keep_rows: int, segment_rows: int,
               tables: Iterable[str] | None = None) -> tuple[int, int, NoRoll | None]:
    """(first, last) row ids of the next segment, or a :class:`NoRoll` saying why not.

    A segment is exactly ``segment_rows`` rows, never reaching into the newest ``keep_rows``
    rows nor to or past the replay floor."""
    recs = records(con)
    first = recs[-1].last_id + 1 if recs else 1  # rows of a recorded segment not yet purged are not counted
    head = con.execute("SELECT MAX(id) FROM events").fetchone()[0]
    if head is None or head < first:
        return 0, 0, NoRoll(0)
    head = int(head)
    floor, pins = replay_floor(con, tables)
    limit = head - keep_rows
    upto = min(limit, floor - 1) if floor is not None else limit
    last = first + segment_rows - 1
    if upto < last:
        # a table's last rules row inside the range holds it back: journaling the rules again frees it
        blocking = tuple(sorted(t for t, r in pins.items() if r <= last))
        return first, upto, NoRoll(max(0, upto - first + 1), blocking)
    return first, last, None


def prepare_roll(journal_path: str | Path, *, keep_rows: int, segment_rows: int,
                 now_ms: int | None = None) -> Prepared | NoRoll:
    """Copy the next segment's rows into a new read-only segment file (fsynced), from a
    connection of its own. Raises :class:`JournalError` when the rows to roll do not chain
    (a broken journal is never archived as if it were sound)."""
    path = Path(journal_path)
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        con.execute("BEGIN")  # one snapshot for the range, the head and the rows
        recs = records(con)
        number = recs[-1].number + 1 if recs else 1
        prev_hash = recs[-1].last_hash if recs else GENESIS
        tables = journal_tables(con)
        first, last, no = roll_range(con, keep_rows=keep_rows, segment_rows=segment_rows, tables=tables)
        if no is not None:
            return no
        anchor_id, anchor_hash = con.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        rows = (JournalRow(*r) for r in con.execute(
            f"SELECT {_ROW_COLS} FROM events WHERE id BETWEEN ? AND ? ORDER BY id", (first, last)))
        created = now_ms if now_ms is not None else time.time_ns() // 1_000_000
        out, last_hash, sha = _write_segment(path, number, first, last, prev_hash, (int(anchor_id), str(anchor_hash)),
                                             rows, created)
        con.execute("COMMIT")
    finally:
        con.close()
    return Prepared(SegmentRecord(number, first, last, last_hash, int(anchor_id), str(anchor_hash), sha,
                                  last - first + 1, created), out, tables)


def _write_segment(journal: Path, number: int, first: int, last: int, prev_hash: str, anchor: tuple[int, str],
                   rows: Iterable[JournalRow], created: int) -> tuple[Path, str, str]:
    d = segment_dir(journal)
    if not d.is_dir():
        d.mkdir(mode=0o750)
        _fsync_dir(d.parent)
    final = d / segment_name(number)
    tmp = d / (segment_name(number) + ".tmp")
    for stale in (tmp, final):  # an unrecorded file of a roll that crashed before its commit
        stale.unlink(missing_ok=True)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SEGMENT_SCHEMA)
        db.execute("BEGIN")
        link, expected = prev_hash, first
        for r in rows:
            if r.id != expected or r.prev_hash != link or row_hash(
                    link, r.id, r.table_id, r.round_id, r.type, r.body, r.recorded_at) != r.hash:
                raise JournalError(f"journal {journal}: row {r.id} does not chain (expected row {expected}); "
                                   "run dealer audit verify: nothing was rolled")
            db.execute(f"INSERT INTO events ({_ROW_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (r.id, r.table_id, r.round_id, r.type, r.body, r.recorded_at, r.prev_hash, r.hash))
            link, expected = r.hash, r.id + 1
        if expected != last + 1:
            raise JournalError(f"journal {journal}: rows {expected}..{last} are missing; nothing was rolled")
        db.execute("INSERT INTO segment VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (number, first, last, prev_hash, link, anchor[0], anchor[1], created))
        db.execute("COMMIT")
    except BaseException:
        db.close()
        tmp.unlink(missing_ok=True)
        raise
    db.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    sha = file_sha256(tmp)
    os.chmod(tmp, 0o444)
    os.replace(tmp, final)
    _fsync_dir(d)
    return final, link, sha


def segment_rows(journal_path: str | Path, recs: list[SegmentRecord], table_id: str | None = None,
                 since_id: int = 0) -> Iterator[JournalRow]:
    """The rows kept in segment files, in order (for recall and audit). Raises
    :class:`JournalError` naming a missing or unreadable segment."""
    d = segment_dir(journal_path)
    for rec in recs:
        if rec.last_id < since_id:
            continue
        with _open_segment(d, rec) as (p, con):
            sql = f"SELECT {_ROW_COLS} FROM events WHERE id >= ?"
            args: tuple[object, ...] = (since_id,)
            if table_id is not None:
                sql += " AND table_id = ?"
                args += (table_id,)
            try:
                for r in con.execute(sql + " ORDER BY id", args):
                    yield JournalRow(*r)
            except sqlite3.DatabaseError as exc:
                raise JournalError(f"segment {rec.number} ({p}) cannot be read: {exc}") from None


def rules_in_segments(journal_path: str | Path, recs: list[SegmentRecord], table_id: str,
                      before: int) -> JournalRow | None:
    """The last ``table_rules`` row of a table before row ``before`` in the segment files."""
    d = segment_dir(journal_path)
    for rec in reversed(recs):
        if rec.first_id >= before:
            continue
        with _open_segment(d, rec) as (_, con):
            row = con.execute(f"SELECT {_ROW_COLS} FROM events WHERE table_id = ? AND type = 'table_rules' AND id < ? "
                              "ORDER BY id DESC LIMIT 1", (table_id, before)).fetchone()
        if row is not None:
            return JournalRow(*row)
    return None


# -- verification ----------------------------------------------------------------------


def parse_anchor(text: str) -> tuple[int, str]:
    """``ID:HASH`` (as published on the journal topic) to (row id, hash)."""
    rid, sep, h = text.strip().partition(":")
    if not sep or not rid.isdigit() or len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
        raise ValueError(f"an anchor is ROW_ID:SHA256_HEX, got {text!r}")
    return int(rid), h


class _Rolled(Protocol):
    """What :func:`verify` reads of the SQLite journal: its file, its segment records, its live rows."""

    path: str

    def segment_records(self) -> list[SegmentRecord]: ...

    def live_rows(self) -> Iterator[JournalRow]: ...


def verify(journal: _Rolled, anchors: Iterable[tuple[int, str]] = ()) -> AuditReport:
    """Walk every segment in order, then the live rows: each link, each file against its record,
    each anchor (the segments' own and ``anchors``) against the row with its id."""
    given = list(anchors)
    rep = AuditReport()
    recs = journal.segment_records()
    rep.segments, rep.anchors = len(recs), len(recs) + len(given)
    d = segment_dir(journal.path)
    want: dict[int, list[tuple[str, str]]] = {}  # row id -> [(hash, where the anchor came from)]
    for rid, h in given:
        want.setdefault(rid, []).append((h, "the given anchor"))
    on_disk = {p.name for p in d.glob("*.sqlite")} if d.is_dir() else set()
    named = {segment_name(r.number) for r in recs}
    last_no = recs[-1].number if recs else 0
    for extra in sorted(on_disk - named):
        if extra == segment_name(last_no + 1):
            rep.uncommitted.append(extra)  # a roll that crashed before its commit: the next one replaces it
        else:
            return rep.fail(f"segment file {d / extra} is not recorded in the journal (added, or its record removed)")
    prev, expected = GENESIS, 1

    def check(r: JournalRow, seg: int | None) -> bool:
        nonlocal prev, expected
        where = f" (segment {seg})" if seg is not None else " (live journal)"
        rep.rows += 1
        if r.id != expected:
            rep.fail(f"row {expected} is missing{where}: the next row is {r.id}", r.id, seg)
        elif r.prev_hash != prev:
            rep.fail(f"row {r.id}{where} does not link to row {r.id - 1}", r.id, seg)
        elif row_hash(prev, r.id, r.table_id, r.round_id, r.type, r.body, r.recorded_at) != r.hash:
            rep.fail(f"row {r.id}{where} was altered (its hash does not match its content)", r.id, seg)
        for h, source in want.pop(r.id, ()):
            if h != r.hash:
                rep.fail(f"row {r.id}{where} differs from {source} (hash {r.hash[:16]}..., anchored "
                         f"{h[:16]}...)", r.id, seg)
        prev, expected = r.hash, r.id + 1
        return rep.ok

    for i, rec in enumerate(recs, start=1):
        if rec.number != i:
            return rep.fail(f"segment record {i} is missing (the next record is segment {rec.number})", segment=i)
        p = d / segment_name(rec.number)
        if (missing := _missing(rec, p)) is not None:
            return rep.fail(missing, rec.first_id, rec.number)
        altered = file_sha256(p) != rec.sha256
        want.setdefault(rec.anchor_id, []).append((rec.anchor_hash, f"the anchor in segment {rec.number}"))
        con = _ro(p)
        try:
            meta = con.execute("SELECT number, first_id, last_id, prev_hash, last_hash, anchor_id, anchor_hash "
                               "FROM segment").fetchall()
            if len(meta) != 1 or meta[0][:3] != (rec.number, rec.first_id, rec.last_id) \
                    or meta[0][4] != rec.last_hash or meta[0][5:] != (rec.anchor_id, rec.anchor_hash):
                return rep.fail(f"segment {rec.number} ({p}): its header does not match the journal's record",
                                rec.first_id, rec.number)
            if meta[0][3] != prev:
                return rep.fail(f"segment {rec.number} does not link to the segment before it", rec.first_id,
                                rec.number)
            for r in con.execute(f"SELECT {_ROW_COLS} FROM events ORDER BY id"):
                if not check(JournalRow(*r), rec.number):
                    return rep
        except sqlite3.DatabaseError as exc:
            return rep.fail(f"segment {rec.number} ({p}) cannot be read: {exc}", rec.first_id, rec.number)
        finally:
            con.close()
        if expected != rec.last_id + 1 or prev != rec.last_hash:
            return rep.fail(f"segment {rec.number} ends at row {expected - 1}, its record says row {rec.last_id}",
                            expected, rec.number)
        if altered:
            return rep.fail(f"segment {rec.number} ({p}) was altered: its SHA-256 does not match the journal's record",
                            rec.first_id, rec.number)
    for r in journal.live_rows():
        if not check(r, None):
            return rep
    for rid, naming in sorted(want.items()):
        _h, source = naming[0]
        return rep.fail(f"row {rid}, named by {source}, is missing: rows after {expected - 1} were cut off the end",
                        rid)
    return rep


__all__ = ["AuditReport", "NoRoll", "Prepared", "SegmentRecord", "parse_anchor", "prepare_roll", "records",
           "replay_floor", "roll_range", "rules_in_segments", "segment_dir", "segment_name", "segment_rows",
           "verify"]
