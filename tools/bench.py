"""``dealer bench latency``: N tables through a real Mosquitto, one card per second each.

The backend runs in this process with durable journaling (fsync on every group commit);
the load generator (:mod:`simulators.loadgen`) runs as a separate process and deals like
N dealers following their station prompts. Reported, as one stable JSON object:

* ``scan_to_publish_ms``: inside the backend, from the scanner message's arrival to the
  broker's PUBACK of the ``card_registered`` event (journal commit included) — the same
  span as the ``dealer_scan_to_publish_seconds`` histogram, but from raw samples;
* ``end_to_end_ms``: from the load generator's publish to the event arriving back at it
  (two broker hops more);
* ``baseline``: the peers measured in the same run on the same machine: a bare aiomqtt
  QoS 1 publish-to-PUBACK through the same Mosquitto, and a bare SQLite WAL commit with
  fsync, back to back and paced at 5/s — the floor under our figures;
* ``peak_rss_mb`` of the backend process.

With ``--journal postgresql://...`` (a scratch database) or ``--journal private`` (a PostgreSQL
server of the benchmark's own, fsync on), the same load runs a second time against the
PostgreSQL journal, as one node holding every table's lease (fencing on every row), after the
SQLite run, in the same process and against the same broker: ``journals.sqlite`` and
``journals.postgresql`` side by side, and ``baseline.postgresql_commit_paced_ms`` (one-row
commit round trip) as the PostgreSQL floor.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dealer.edge.config import load_settings
from dealer.edge.service import Service
from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.loadgen import summarize, table_ids


async def _mqtt_baseline(url: str, n: int = 2000) -> dict[str, Any]:
    bus = MqttBus(url, client_id="bench-baseline")
    task = asyncio.create_task(bus.run())
    await asyncio.wait_for(bus.wait_connected(), 10)
    samples = []
    for i in range(n):
        t0 = time.monotonic_ns()
        await bus.publish("bench/baseline", b'{"i": %d}' % i, qos=1)
        samples.append(time.monotonic_ns() - t0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return summarize(samples[n // 10:])


def _sqlite_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    return db


def _sqlite_commit(db: sqlite3.Connection) -> int:
    t0 = time.monotonic_ns()
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t (body) VALUES (?)", ('{"type":"scan_read","code":"AS"}',))
    db.execute("COMMIT")
    return time.monotonic_ns() - t0


def _sqlite_baseline(path: Path, n: int = 500) -> dict[str, Any]:
    db = _sqlite_db(path)
    samples = [_sqlite_commit(db) for _ in range(n)]
    db.close()
    return summarize(samples[n // 10:])


async def _paced_baselines(url: str, path: Path, n: int = 30, gap: float = 0.2) -> dict[str, Any]:
    """The same two peers at 5 operations a second: an idle machine wakes up cold, and one
    card per second per table is how the backend meets them."""
    bus = MqttBus(url, client_id="bench-baseline-paced")
    task = asyncio.create_task(bus.run())
    await asyncio.wait_for(bus.wait_connected(), 10)
    db = _sqlite_db(path)
    mqtt, disk = [], []
    for i in range(n + 3):
        await asyncio.sleep(gap)
        disk.append(_sqlite_commit(db))
        await asyncio.sleep(gap)
        t0 = time.monotonic_ns()
        await bus.publish("bench/baseline", b'{"i": %d}' % i, qos=1)
        mqtt.append(time.monotonic_ns() - t0)
    db.close()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {"mqtt_qos1_publish_paced_ms": summarize(mqtt[3:]), "sqlite_wal_fsync_commit_paced_ms": summarize(disk[3:])}


def private_broker(tmp: Path) -> MosquittoProcess:
    """A Mosquitto of the benchmark's own in ``tmp/broker``, started (the caller stops it)."""
    (tmp / "broker").mkdir()
    mq = MosquittoProcess(tmp / "broker", persistence=False)
    mq.start()
    return mq


def broker_unreachable(broker: str | None) -> str | None:
    """Why a ``--broker`` given to a benchmark cannot be used (tried for at most 5 s), or None."""
    if not broker:
        return None
    from dealer.cli.broker_check import BrokerUnreachable, reach_broker

    try:
        asyncio.run(reach_broker(broker, client_prefix="dealer-bench-probe"))
    except BrokerUnreachable as exc:
        return str(exc)
    return None


def _settings(tmp: Path, url: str, n: int, fsync: bool, journal_url: str | None = None):
    service: dict[str, Any] = {"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "fsync": fsync,
                               "node_id": "bench"}
    if journal_url is not None:
        service["journal_url"] = journal_url
    return load_settings(
        service=service,
        mqtt={"url": url, "client_id": "bench-backend"},
        tables=[{"id": tid, "game": "teen-patti", "betting_seconds": 1.0, "pause_seconds": 0.5,
                 "scanner": {"kind": "mqtt", "reader_id": reader, "heartbeat_timeout": 15}}
                for tid, reader in table_ids(n)],
    )


def _rss_mb() -> float:
    """This process's resident set now (VmRSS), in MB: each journal's run is measured after it,
    where ``ru_maxrss`` could only give the peak of both."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


async def _pg_baseline(url: str, n: int = 30, gap: float = 0.2) -> dict[str, Any]:
    """The PostgreSQL journal's floor: a one-row INSERT committed with synchronous_commit on,
    paced like the other peers (one round trip plus the server's WAL flush)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE TEMP TABLE bench_floor (id bigserial PRIMARY KEY, body text)")
        samples = []
        for _ in range(n + 3):
            await asyncio.sleep(gap)
            t0 = time.monotonic_ns()
            await conn.execute("INSERT INTO bench_floor (body) VALUES (%s)", ('{"type":"scan_read","code":"AS"}',))
            samples.append(time.monotonic_ns() - t0)
    return summarize(samples[3:])


async def _measure(settings: Any, broker: str, tables: int, seconds: float, loop: str) -> dict[str, Any]:
    """One backend (the journal ``settings`` name) under the load generator; its figures."""
    from dealer.edge.journals import open_journal
    from dealer.edge.metrics import Metrics
    from dealer.edge.runner import build_ownership

    bus = MqttBus(broker, client_id="bench-backend")
    metrics = Metrics()
    journal = open_journal(settings) if settings.service.journal_url else None
    ownership = build_ownership(settings, journal, bus, metrics)
    service = Service(settings, bus=bus, metrics=metrics, journal=journal, ownership=ownership)  # type: ignore[arg-type]
    service.latency_samples = []
    run = asyncio.create_task(service.run())
    try:
        await asyncio.wait_for(service.ready.wait(), 60)
        deadline = time.monotonic() + 60  # a node adopts its tables once it holds their leases
        while len(service.tables) < tables:
            if time.monotonic() > deadline or run.done():
                raise RuntimeError(f"the backend owns {len(service.tables)} of {tables} tables after 60 s")
            await asyncio.sleep(0.05)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "simulators.loadgen", "--broker", broker, "--tables", str(tables),
            "--seconds", str(seconds), "--loop", loop, stdout=asyncio.subprocess.PIPE)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), seconds + 120)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            out = b""
        loadgen = json.loads(out) if out else {"error": f"load generator exited {proc.returncode} or hung"}
        rounds = sum(1 for t in service.tables.values() for _ in range(t.last_seq))
        return {
            "cards": len(service.latency_samples),
            "rounds_opened": rounds,
            "scan_to_publish_ms": summarize(service.latency_samples),
            "end_to_end_ms": loadgen.get("end_to_end_ms"),
            "cards_sent": loadgen.get("cards_sent"),
            "journal_commit_ms": _histogram_ms(metrics),
            "rss_mb_after": _rss_mb(),
        }
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


def _histogram_ms(metrics: Any) -> dict[str, float]:
    """Mean group-commit time from ``dealer_journal_commit_seconds`` (count and sum)."""
    count = total = 0.0
    for fam in metrics.registry.collect():
        if fam.name == "dealer_journal_commit_seconds":
            for smp in fam.samples:
                if smp.name.endswith("_count"):
                    count += smp.value
                elif smp.name.endswith("_sum"):
                    total += smp.value
    return {"commits": int(count), "mean": round(total / count * 1000, 3) if count else 0.0}


async def run_latency_bench(tables: int = 1, seconds: float = 20.0, broker: str | None = None,
                            fsync: bool = True, loop: str = "asyncio", journal: str | None = None) -> dict[str, Any]:
    """SQLite always; with ``journal`` (a postgresql:// URL of a scratch database, or
    ``private`` for a PostgreSQL server of the benchmark's own) also the PostgreSQL journal,
    one after the other under the same load, same broker, same machine, in the same run."""
    with tempfile.TemporaryDirectory(prefix="dealer-bench-") as tmpdir:
        tmp = Path(tmpdir)
        mq = None if broker is not None else private_broker(tmp)
        broker = broker if mq is None else mq.url
        pg = None
        try:
            baseline = {"mqtt_qos1_publish_ms": await _mqtt_baseline(broker),
                        "sqlite_wal_fsync_commit_ms": _sqlite_baseline(tmp / "baseline.sqlite"),
                        **await _paced_baselines(broker, tmp / "baseline-paced.sqlite")}
            runs = {"sqlite": await _measure(_settings(tmp, broker, tables, fsync), broker, tables, seconds, loop)}
            if journal is not None:
                url = journal
                if journal == "private":
                    from simulators.pgserver import PgServer

                    pg = PgServer()
                    pg.start()
                    url = pg.create_database("bench")
                baseline["postgresql_commit_paced_ms"] = await _pg_baseline(url)
                runs["postgresql"] = await _measure(_settings(tmp, broker, tables, fsync, journal_url=url), broker,
                                                    tables, seconds, loop)
            return {
                "bench": "latency",
                "tables": tables,
                "seconds": seconds,
                "fsync": fsync,
                "loop": loop,
                **runs["sqlite"],  # the SQLite figures stay where they always were
                "journals": runs,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "baseline": baseline,
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            }
        finally:
            if pg is not None:
                pg.cleanup()
            if mq is not None:
                mq.stop()
