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


def _settings(tmp: Path, url: str, n: int, fsync: bool):
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "fsync": fsync, "node_id": "bench"},
        mqtt={"url": url, "client_id": "bench-backend"},
        tables=[{"id": tid, "game": "teen-patti", "betting_seconds": 1.0, "pause_seconds": 0.5,
                 "scanner": {"kind": "mqtt", "reader_id": reader, "heartbeat_timeout": 15}}
                for tid, reader in table_ids(n)],
    )


async def run_latency_bench(tables: int = 1, seconds: float = 20.0, broker: str | None = None,
                            fsync: bool = True, loop: str = "asyncio") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dealer-bench-") as tmpdir:
        tmp = Path(tmpdir)
        mq = None if broker is not None else private_broker(tmp)
        broker = broker if mq is None else mq.url
        try:
            baseline = {"mqtt_qos1_publish_ms": await _mqtt_baseline(broker),
                        "sqlite_wal_fsync_commit_ms": _sqlite_baseline(tmp / "baseline.sqlite"),
                        **await _paced_baselines(broker, tmp / "baseline-paced.sqlite")}
            service = Service(_settings(tmp, broker, tables, fsync),
                              bus=MqttBus(broker, client_id="bench-backend"))
            service.latency_samples = []
            run = asyncio.create_task(service.run())
            await asyncio.wait_for(service.ready.wait(), 60)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "simulators.loadgen", "--broker", broker, "--tables", str(tables),
                "--seconds", str(seconds), "--loop", loop, stdout=asyncio.subprocess.PIPE)
            out, _ = await proc.communicate()
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            loadgen = json.loads(out) if out else {"error": f"load generator exited {proc.returncode}"}
            rounds = sum(1 for t in service.tables.values() for _ in range(t.last_seq))
            return {
                "bench": "latency",
                "tables": tables,
                "seconds": seconds,
                "fsync": fsync,
                "loop": loop,
                "cards": len(service.latency_samples),
                "rounds_opened": rounds,
                "scan_to_publish_ms": summarize(service.latency_samples),
                "end_to_end_ms": loadgen.get("end_to_end_ms"),
                "cards_sent": loadgen.get("cards_sent"),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "baseline": baseline,
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            }
        finally:
            if mq is not None:
                mq.stop()
