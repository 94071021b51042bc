"""``dealer bench verify``: what verifying the journal costs every start, at a million rows.

``dealer run`` and ``dealer deploy check`` walk the hash chain of the SQLite journal's live rows
(the rows after the last segment) and run the file's integrity check beside it; a PostgreSQL
journal is checked table by table as its replay reads it (dealer/edge/preflight.py). This builds
a journal of ``--rows`` rows (round openings, bets, cards, acknowledgements: the service's own
event bodies, the chain computed with the journal's own hash function), then times the start-up
check as ``dealer run`` makes it, and its parts alone (for PostgreSQL, also every table's whole
chain, as ``dealer audit verify`` walks it). With ``--journal private`` (a PostgreSQL server of its
own) or a scratch database URL, the PostgreSQL journal too. Figures as JSON: seconds of wall
time, and of this process's CPU for the chain (the machine's load is reported: a shared host
slows both).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

TABLES = 10


def _bodies(series: str, rows: int, tables: int) -> Iterator[tuple[str, str, str, str]]:
    """(table, round id, type, body) of ``rows`` rows: rounds of an opening, 20 bets, the close,
    six cards and settlement's acknowledgement, as the service journals them, spread over
    ``tables`` tables (each table's replay starts at its last round, as in a studio whose
    settlement keeps up)."""
    from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ResultDelivered, ScanRead

    n, seq = 0, 0
    while True:
        seq += 1
        for t in range(tables):
            tid = f"T{t + 1}"
            rid = f"{tid}-{series}-{seq:06d}"
            at = 1_767_261_620_340 + seq * 30_000
            evs: list[Any] = [OpenRound(round_id=rid, at=at, betting_closes_at=at + 15_000, draw=os.urandom(32).hex())]
            evs += [PlaceBet(bet_id=f"bet-{seq}-{t}-{i}", player_id=f"player-{i:04d}", bet_type="player_a",
                             stake=Decimal("25.00"), round_id=rid, command_id=f"cmd-{seq}-{t}-{i}", at=at + i)
                    for i in range(20)]
            evs += [CloseBetting(by="timer", round_id=rid, at=at + 15_000)]
            evs += [ScanRead(reader=f"SC{t + 1}", code="AS", seq=seq * 6 + i, at=at + 16_000 + i) for i in range(6)]
            evs += [ResultDelivered(round_id=rid, idempotency_key=f"{tid}:{rid}", at=at + 20_000)]
            for ev in evs:
                yield tid, rid, ev.type, ev.model_dump_json()
                n += 1
                if n == rows:
                    return


def build_sqlite(path: Path, rows: int, tables: int = TABLES) -> None:
    """A journal of ``rows`` chained rows (created by :class:`Journal`, filled in one transaction)."""
    from dealer.edge.journal_chain import row_hash
    from dealer.edge.journal_rows import GENESIS
    from dealer.edge.journals import open_journal

    j = open_journal(path, fsync=False)
    series = j.journal_id
    j.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    db.execute("BEGIN")
    prev, batch = GENESIS, []
    for i, (tid, rid, type_, body) in enumerate(_bodies(series, rows, tables), start=1):
        h = row_hash(prev, i, tid, rid, type_, body, 1_767_261_620_340 + i)
        batch.append((i, tid, rid, type_, body, 1_767_261_620_340 + i, prev, h))
        prev = h
        if len(batch) == 10_000:
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
            batch.clear()
    db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def build_postgresql(url: str, rows: int, tables: int = TABLES) -> None:
    """The same rows in a PostgreSQL journal, one chain per table (COPY, as the database's
    superuser with the journal's triggers off: the node's own commits would take minutes)."""
    import psycopg

    from dealer.edge.journal_chain import pg_row_hash
    from dealer.edge.journal_rows import GENESIS
    from dealer.edge.journals import open_journal

    j = open_journal(url, node_id="bench")
    series = j.journal_id
    j.close()
    heads: dict[str, tuple[int, str]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        try:
            with conn.cursor().copy("COPY events (table_id, seq, round_id, type, body, recorded_at, node, epoch, "
                                    "prev_hash, hash) FROM STDIN") as copy:
                for tid, rid, type_, body in _bodies(series, rows, tables):
                    seq, prev = heads.get(tid, (0, GENESIS))
                    at = 1_767_261_620_340 + seq
                    h = pg_row_hash(prev, seq + 1, tid, rid, type_, body, at, "bench", 1)
                    copy.write_row((tid, seq + 1, rid, type_, body, at, "bench", 1, prev, h))
                    heads[tid] = (seq + 1, h)
        finally:
            conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        conn.execute("ANALYZE events")


def _timed(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, round(time.perf_counter() - wall, 2), round(time.process_time() - cpu, 2)


def _settings(tables: int, **service: Any) -> Any:
    from dealer.edge.config import load_settings

    return load_settings(service={"metrics_enabled": False, "node_id": "bench"} | service,
                         mqtt={"url": "mqtt://127.0.0.1:1"},
                         tables=[{"id": f"T{t + 1}", "game": "teen-patti",
                                  "scanner": {"kind": "mqtt", "reader_id": f"SC{t + 1}"}} for t in range(tables)])


def measure_sqlite(path: Path, tables: int) -> dict[str, Any]:
    from dealer.edge.journals import open_read_only
    from dealer.edge.preflight import start_refusals

    def chain() -> Any:
        j = open_read_only(path)
        try:
            return j.verify_chain()
        finally:
            j.close()

    def integrity() -> Any:
        db = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            return db.execute("PRAGMA integrity_check(3)").fetchall()
        finally:
            db.close()

    refused, start_s, _ = _timed(lambda: start_refusals(_settings(tables, journal_path=path), None, []))
    report, chain_s, chain_cpu = _timed(chain)
    checked, integrity_s, _ = _timed(integrity)
    assert not refused and report.ok and checked == [("ok",)], (refused, report, checked)
    return {"rows": report.rows, "file_mb": round(path.stat().st_size / 1e6, 1), "start_check_s": start_s,
            "chain_s": chain_s, "chain_cpu_s": chain_cpu, "integrity_check_s": integrity_s}


def measure_postgresql(url: str, tables: int) -> dict[str, Any]:
    from dealer.edge.journals import open_read_only
    from dealer.edge.preflight import start_refusals

    def chain() -> Any:
        j = open_read_only(url)
        try:
            return j.verify_chain()
        finally:
            j.close()

    refused, start_s, _ = _timed(lambda: start_refusals(_settings(tables, journal_url=url), None, []))
    report, chain_s, chain_cpu = _timed(chain)
    assert not refused and report.ok, (refused, report)
    return {"rows": report.rows, "start_check_s": start_s, "full_chain_s": chain_s, "full_chain_cpu_s": chain_cpu}


def run_verify_bench(rows: int, journal: str | None = None, tables: int = TABLES) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": rows, "tables": tables, "cpus": os.cpu_count(),
                           "load_1m_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        path = Path(tmp) / "journal.sqlite"
        _, out["sqlite_build_s"], _ = _timed(lambda: build_sqlite(path, rows, tables))
        out["sqlite"] = measure_sqlite(path, tables)
    if journal is not None:
        pg = None
        url = journal
        if journal == "private":
            from simulators.pgserver import PgServer

            pg = PgServer()
            pg.start()
            url = pg.create_database("bench_verify")
        try:
            _, out["postgresql_build_s"], _ = _timed(lambda: build_postgresql(url, rows, tables))
            out["postgresql"] = measure_postgresql(url, tables)
        finally:
            if pg is not None:
                pg.cleanup()
    out["load_1m_after"] = round(os.getloadavg()[0], 2)
    return out


def _cmd(args: argparse.Namespace) -> int:
    print(json.dumps(run_verify_bench(args.rows, args.journal, args.tables), sort_keys=True))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    """``dealer bench verify`` (added to ``dealer bench`` by :mod:`tools.cli`)."""
    from dealer.cli.args import int_range

    p = bsub.add_parser("verify", help="seconds the start-up journal check takes (hash chain, SQLite's integrity "
                        "check) at N rows")
    p.add_argument("--rows", type=int_range(1, 100_000_000), default=1_000_000, metavar="N",
                   help="journal rows (default 1,000,000: the live journal's default size, journal_retain_rows)")
    p.add_argument("--tables", type=int_range(1, 10_000), default=TABLES, metavar="T",
                   help=f"tables the rows are spread over (default {TABLES})")
    p.add_argument("--journal", metavar="URL",
                   help="also the PostgreSQL journal: a postgresql:// URL of a scratch database, or 'private' for a "
                        "PostgreSQL server of the benchmark's own")
    p.set_defaults(func=_cmd)
