"""Every reason ``dealer run`` refuses to start, in one list, for ``run`` and ``deploy check`` alike.

``dealer run`` refuses (exit 2, a person must act) for an unsafe deployment
(:func:`dealer.edge.security.check_deployment`), a strict table whose pay table is outside its
declared RTP bounds, a key file that holds no usable key, and a journal it cannot use: a missing
or read-only directory, a journal locked by another process, a file that is not a journal, a
PostgreSQL journal it cannot reach; a journal whose hash chain does not hold (its live rows, what
replay rebuilds the tables from: a byte edited in the file, a bit flipped on the disk), and a
journal behind the head it committed before, as its head record says (dealer/edge/anchors.py: its
last rows cut off or its ``-wal`` lost, it would deal round ids and idempotency keys again).
``dealer deploy check`` prints exactly this list (``tests/test_preflight.py`` holds the two
commands to the same lines), so a host can be checked before its unit is started. Nothing is
created (but the journal's lock file, as ``run`` creates it), migrated or locked for longer than
the check.

One check needs the broker, :func:`broker_check` (the journal against the anchor retained there):
``dealer run`` makes it after this list, before the service connects; ``dealer deploy check`` makes
it too, and says when it could not reach the broker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dealer.edge.security import check_deployment

if TYPE_CHECKING:
    from dealer.edge.anchors import Head
    from dealer.edge.config import Settings
    from dealer.edge.rtp_policy import TableRtp


def start_refusals(settings: Settings, config_path: str | Path | None,
                   rtp_reports: Sequence[TableRtp] | None = None) -> list[str]:
    """Every reason to refuse to start with ``settings`` (``[]``: it may start)."""
    return config_refusals(settings, config_path, rtp_reports) + _journal_refusals(settings)


def config_refusals(settings: Settings, config_path: str | Path | None,
                    rtp_reports: Sequence[TableRtp] | None = None) -> list[str]:
    """The refusals of the configuration itself, not of the journal it names: what a reload
    (SIGHUP, dealer/edge/reload.py) checks too."""
    from dealer.edge.rtp_policy import refusals, table_reports

    problems = check_deployment(settings, config_path)
    problems += refusals(rtp_reports if rtp_reports is not None else table_reports(settings))
    problems += _key_refusals(settings)
    return problems


def _key_refusals(settings: Settings) -> list[str]:
    """Key files whose content is not a key (their mode and readability are check_deployment's)."""
    from dealer.edge.keys import read_hex_key

    out: list[str] = []
    for tc in settings.tables:
        for f in tc.scanner.hmac_key_files:
            out += _key(read_hex_key, Path(f), f"scanner {tc.scanner.reader_id}: HMAC key file")
    for sup in settings.security.supervisors:
        for f in sup.key_files:
            out += _key(read_hex_key, Path(f), f"supervisor {sup.id}: key file")
    return out


def _key(read: Callable[[Path, str], object], path: Path, what: str) -> list[str]:
    if not path.is_file() or not os.access(path, os.R_OK):
        return []  # check_deployment already says it cannot be read
    try:
        read(path, what)
    except ValueError as exc:
        return [str(exc)]
    return []


def _journal_refusals(settings: Settings) -> list[str]:
    from dealer.edge.journal import JournalError, lock_journal
    from dealer.edge.journals import open_read_only

    url = settings.service.journal_url
    if url:
        try:
            journal = open_read_only(url)
        except JournalError as exc:
            text = " ".join(str(exc).split())
            if "no dealer journal in this database" in text:
                return []  # a new database: the node creates the schema if its role may (dealer cluster init)
            return [text]
        return _content_refusals(journal, [], [t.id for t in settings.tables])
    path = Path(settings.service.journal_path)
    try:
        os.close(lock_journal(path))  # the directory, and nobody else running on this journal
    except JournalError as exc:
        return [" ".join(str(exc).split())]
    if path.exists():
        from dealer.edge.anchors import read_record

        try:
            record = read_record(path)
            journal = open_read_only(path)
        except JournalError as exc:
            return [" ".join(str(exc).split())]
        return _content_refusals(journal, [record] if record is not None else [], [])
    return []


def _content_refusals(journal: Any, heads: Sequence[Head], tables: Sequence[str]) -> list[str]:
    """The journal's own chain, then each head kept outside it (a journal behind what it
    committed would deal round ids and idempotency keys again). Closes ``journal``.

    SQLite: the whole live journal (what replay rebuilds the tables from, bounded by retention:
    ``dealer bench verify`` says what a million rows cost), and the file's integrity beside it
    (every page, every index against its table: an index the replay's queries read could be
    damaged where the chain is not). PostgreSQL keeps every row forever and is read by every
    node: each of ``tables`` is checked as its replay reads it (each row against its hash,
    linked to the stored chain: :meth:`PgJournal.replay_rows`), as again at every takeover."""
    import sqlite3

    from dealer.edge.anchors import behind
    from dealer.edge.journal import JournalError, JournalWriteFailed, ReplayError

    sqlite_file = journal.rolls_segments
    integrity = _Integrity(journal.path) if sqlite_file else None
    after = ": it was changed or damaged after it was written (a byte edited, a bit flipped on the disk); restore it"
    try:
        if not sqlite_file:
            for tid in tables:
                for _row in journal.replay_rows(tid):
                    pass
        report = journal.verify_chain() if sqlite_file else None
        if report is not None and not report.ok:
            return [f"journal {journal.path}: {report.reason}{after} from a backup (dealer audit verify --journal "
                    f"{journal.path} checks its segments too)"]
        damage = integrity.result() if integrity is not None else None
        if damage:
            return [f"journal {journal.path} is damaged (SQLite's integrity check: {damage}); restore it from a backup"]
        return [why for why in (behind(journal, h) for h in heads) if why is not None][:1]
    except ReplayError as exc:
        return [f"{' '.join(str(exc).split())}{after} from a backup"]
    except (JournalError, JournalWriteFailed, sqlite3.DatabaseError) as exc:  # a database that went away meanwhile
        return [f"journal {journal.path} cannot be read: {' '.join(str(exc).split())}"]
    finally:
        if integrity is not None:
            integrity.stop()
        journal.close()


class _Integrity:
    """``PRAGMA integrity_check`` of a SQLite file in a thread of its own, from a read-only
    connection, while the chain is walked in this one: SQLite runs it without the GIL, so the
    start costs the longer of the two, not their sum."""

    def __init__(self, path: str | Path) -> None:
        import sqlite3
        import threading

        self._con = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        self._out: list[str] = []
        self._thread = threading.Thread(target=self._run, name="journal-integrity", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import sqlite3

        try:
            rows = self._con.execute("PRAGMA integrity_check(3)").fetchall()
            self._out[:] = [str(r[0]) for r in rows if r[0] != "ok"]
        except sqlite3.Error as exc:  # interrupted (the chain failed first), or the file cannot be read
            self._out[:] = [" ".join(str(exc).split())]

    def result(self) -> str:
        """The first problems found ('' when none), once the check is done."""
        self._thread.join()
        return "; ".join(" ".join(p.split()) for p in self._out)[:300]

    def stop(self) -> None:
        if self._thread.is_alive():
            self._con.interrupt()
            self._thread.join()
        self._con.close()


async def broker_check(settings: Settings) -> tuple[list[str], str | None, bool]:
    """The journal against the anchor the node last published, retained on the broker. It needs
    the broker, so ``dealer run`` checks it once the start-up checks passed, before the service
    connects, and ``dealer deploy check`` after its own (:func:`broker_refusals`). Returns
    (refusals, why it was not compared or None, whether the broker was reached: when not, the run
    compares at its first connection, before it publishes an anchor). A journal without a row
    (none yet, new) has nothing to compare: no anchor was ever published for it (one cut to no
    row at all is its head record's to find)."""
    from dealer.edge.anchors import behind, retained_anchor
    from dealer.edge.journal import JournalError, JournalWriteFailed
    from dealer.edge.journals import open_read_only, target_of

    if settings.mqtt.url is None:
        return [], None, True
    target = target_of(settings)
    if not settings.service.journal_url and not Path(target).exists():
        return [], None, True
    try:
        journal = open_read_only(target)
    except JournalError:
        return [], None, True  # said by start_refusals (or a new database)
    try:
        if not journal.journal_id or journal.head[0] == 0:  # nothing journaled yet: no anchor was ever published
            return [], None, True
        got = await retained_anchor(settings)
        if got.anchor is None:
            return [], got.problem, got.reached
        try:
            found = behind(journal, got.anchor)
        except JournalWriteFailed as exc:  # the database went away meanwhile: the start fails on it next
            return [], str(exc), True
        return ([found] if found is not None else []), None, True
    finally:
        journal.close()


def broker_refusals(settings: Settings) -> tuple[list[str], str | None]:
    """:func:`broker_check` from synchronous code: (refusals, why it was not compared or None)."""
    import asyncio

    refused, why_not, _reached = asyncio.run(broker_check(settings))
    return refused, why_not


__all__ = ["broker_check", "broker_refusals", "config_refusals", "start_refusals"]
