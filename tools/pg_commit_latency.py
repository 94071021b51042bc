"""Group-commit latency of the PostgreSQL journal beside the SQLite one, in the same run.

    python -m tools.pg_commit_latency [--commits N] [--dir DIR]

Starts a private PostgreSQL server (simulators/pgserver.py: fsync on, synchronous_commit on)
and a SQLite journal (WAL, synchronous=FULL) in the same directory, so both flush to the same
disk, and commits batches of 1 row and of 50 rows (10 tables x 5 rows, with one outbox row)
to each: the PostgreSQL journal's sync ``commit`` and ``commit_async`` and SQLite's ``commit``
(journals opened through dealer/edge/journals.py), in turn, batch after batch (a burst of load hits all three alike). Prints one JSON object: p50/p99/max milliseconds per journal and size.
A measurement for the README and the report, not a test (nothing is asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from dealer.core.events import ScanRead
from dealer.edge.journal_contract import Journal
from dealer.edge.journal_rows import Batch
from dealer.edge.journals import open_journal
from simulators.pgserver import PgServer

#: The tables each journal writes (the two PostgreSQL journals write tables of their own, as
#: two nodes would: each keeps its tables' chain heads in memory).
TABLES = {name: [f"{name[0].upper()}{i}" for i in range(10)] for name in ("sync", "async", "lite")}


def batch(tables: list[str], rows: int, n: int) -> Batch:
    b = Batch(epochs={t: 1 for t in tables})
    for i in range(rows):
        t = tables[i % len(tables)]
        b.events.append((t, f"{t}-abcdefgh-{n:06d}", ScanRead(reader="SC1", code="AS", seq=i, at=1_767_261_600_000)))
    if rows > 1:
        b.outbox.append((f"k-{n}", "studio/v1/results", b"x" * 600, tables[0], f"{tables[0]}-{n}"))
    return b


def stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"p50": round(statistics.median(ms), 3), "p99": round(ms[max(0, int(len(ms) * 0.99) - 1)], 3),
            "max": round(ms[-1], 3), "n": len(ms)}


async def timed(commit: object, b: Batch) -> float:
    t0 = time.perf_counter()
    got = commit(b)  # type: ignore[operator]  # commit is the journal's commit or commit_async (called, then awaited if a coroutine)
    if asyncio.iscoroutine(got):
        await got
    return time.perf_counter() - t0


async def measure(url: str, lite: Journal, commits: int, warm: int = 20) -> dict[str, object]:
    """Each batch size: the three journals commit in turn, batch after batch, so a burst of load
    on the machine hits them alike."""
    sync_pg = open_journal(url, node_id="bench")
    async_pg = open_journal(url, node_id="bench")
    out: dict[str, object] = {}
    try:
        for rows in (1, 50):
            samples: dict[str, list[float]] = {"postgresql_sync": [], "postgresql_async": [], "sqlite": []}
            for i in range(warm + commits):
                n = rows * 1_000_000 + 3 * i
                for j, (name, tables, commit) in enumerate((
                        ("postgresql_sync", TABLES["sync"], sync_pg.commit),
                        ("postgresql_async", TABLES["async"], async_pg.commit_async),
                        ("sqlite", TABLES["lite"], lite.commit))):
                    took = await timed(commit, batch(tables, rows, n + j))
                    if i >= warm:
                        samples[name].append(took)
            for name, got in samples.items():
                out[f"{name}_{rows}"] = stats(got)
    finally:
        sync_pg.close()
        await async_pg.close_async()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=500, help="commits per journal and batch size (default 500)")
    p.add_argument("--dir", type=Path, default=None, help="where both journals live (default: a temp dir)")
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pg-latency-", dir=args.dir))
    server = PgServer(base)
    server.start()
    try:
        url = server.create_database("bench")
        open_journal(url, node_id="bench").close()  # creates the schema
        with psycopg.connect(url, autocommit=True) as c:
            for t in TABLES["sync"] + TABLES["async"]:
                c.execute("INSERT INTO leases VALUES (%s, 'bench', 1, now() + interval '1 day', now())", (t,))
        lite = open_journal(base / "journal.sqlite", fsync=True)
        result: dict[str, object] = {"commits": args.commits, "dir": str(base)}
        result.update(asyncio.run(measure(url, lite, args.commits)))
        lite.close()
        print(json.dumps(result, indent=2))
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
