"""``dealer bench latency``: N tables through a real Mosquitto, one card per second each.

The backend runs in this process with durable journaling (fsync on every group commit);
the load generator (:mod:`simulators.loadgen`) runs as a separate process and deals like
N dealers following their station prompts. Reported, as one stable JSON object:

* ``scan_to_publish_ms``: inside the backend, from the scanner message's arrival to the
  broker's PUBACK of the ``card_registered`` event (journal commit included) — the same
  span as the ``dealer_scan_to_publish_seconds`` histogram, but from raw samples;
* ``end_to_end_ms``: from the load generator's publish to the event arriving back at it
  (two broker hops more);
* ``baseline``: the peers measured in the same run on the same machine: a bare QoS 1
  publish-to-PUBACK on the bus's client (gmqtt) through the same Mosquitto, and a bare SQLite WAL commit with
  fsync, back to back and paced at 5/s — the floor under our figures;
* ``peak_rss_mb`` of the backend process;
* ``backend_cpu``: the backend's CPU time over the run, its share of a core and ``us_per_card``
  (every thread: the event loop and the journal's writer);
* ``floor_ms`` and ``floor_ratio``: the floor under one card (the paced QoS 1 publish plus the
  paced durable commit, in series) and scan→publish over it, at p50 and p99;
* ``load_generator``: its own event-loop lag, how late it sent cards after they were due, its
  CPU, and how many results its settlement consumer acknowledged (it settles every result, as
  a studio's settlement does); ``broker_cpu`` (a private broker's); and ``bottleneck``: which part set the figures
  (:mod:`tools.bench_verdict`), so a saturated generator, broker or machine is never read as a
  slow backend. Every wait has a deadline; a missed one is said, never waited out;
* ``cpu_by_part``: which part of the code used the backend's CPU, sampled in the process
  (:mod:`tools.bench_sampler`): the MQTT client, the journal, the core, the states going out...
  — why a figure is what it is, beside ``stages_ms`` (where a card waited).

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
from collections import Counter
import os
import platform
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.edge.publisher import STAGES
from dealer.edge.service import Service
from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.loadgen import summarize, table_ids
from tools.bench_sampler import Sampler
from tools.bench_verdict import floor_of, floor_ratio, judge


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


def _settings(tmp: Path, url: str, n: int, fsync: bool, journal_url: str | None = None, node_id: str = "bench",
              lease_seconds: float | None = None):
    service: dict[str, Any] = {"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "fsync": fsync,
                               "node_id": node_id}
    if journal_url is not None:
        service["journal_url"] = journal_url
    return load_settings(
        **({"cluster": {"lease_seconds": lease_seconds}} if lease_seconds is not None else {}),
        service=service,
        mqtt={"url": url, "client_id": f"{node_id}-backend"},
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


def _proc_cpu_s(pid: int | None) -> float | None:
    """CPU time (user + system) of process ``pid`` so far, from /proc (None: not known)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _db_cpu(db: Any) -> float | None:
    """A private PostgreSQL server's CPU seconds so far (None: no server of ours to measure)."""
    return db.cpu_seconds() if db is not None else None


def _share(before: float | None, after: float | None, wall: float) -> float | None:
    """CPU seconds between two readings as a share of one core over ``wall`` (None: unknown)."""
    return round((after - before) / wall, 3) if before is not None and after is not None and wall > 0 else None


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


#: Seconds the load generator may take beyond its run to print its figures, and to exit after.
LOADGEN_GRACE_S = 60.0
LOADGEN_EXIT_S = 10.0
#: Seconds the backend may take to stop after a run.
BACKEND_STOP_S = 30.0


async def _run_loadgen(broker: str, tables: int, seconds: float, loop: str, phase: str) -> dict[str, Any]:
    """The load generator's figures, within deadlines: it must print them within ``seconds`` +
    :data:`LOADGEN_GRACE_S` and exit within :data:`LOADGEN_EXIT_S` after; a deadline missed is
    said in the figures (what it was waiting for), and the process killed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "simulators.loadgen", "--broker", broker, "--tables", str(tables),
        "--seconds", str(seconds), "--loop", loop, "--phase", phase, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), seconds + LOADGEN_GRACE_S)
    except TimeoutError:
        line = b""
        out: dict[str, Any] = {"error": f"the load generator printed no figures within {seconds + LOADGEN_GRACE_S:g} s "
                                        "(waiting for its run to end): killed"}
    else:
        try:
            out = json.loads(line) if line.strip() else {"error": "the load generator exited without figures"}
        except ValueError:
            out = {"error": f"the load generator printed something else than its figures: {line[:200]!r}"}
    try:
        await asyncio.wait_for(proc.wait(), LOADGEN_EXIT_S)
    except TimeoutError:
        out.setdefault("error", f"the load generator did not exit within {LOADGEN_EXIT_S:g} s of its figures: killed")
        proc.kill()
        await proc.wait()
    if proc.returncode not in (0, None) and "error" not in out:
        out["error"] = f"the load generator exited {proc.returncode}"
    return out


#: The topic kinds of a table's public path (what ``messages_per_card`` counts): what stations,
#: screens, the player platform and ops read of a table. Results (settlement's), a player's own
#: topics and the backend's status are counted apart (``messages_by_kind_per_card``).
PUBLIC_PATH = ("events", "prompts", "prompts/current", "state", "history")


class CountingBus(MqttBus):
    """The backend's bus, counting every message it hands to the broker by topic kind
    (:func:`dealer.edge.topics.kind`): ``messages_per_card`` in the figures."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.sent: Counter[str] = Counter()

    def publish_nowait(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> asyncio.Future[None]:
        self.sent[topics.kind(topic)] += 1
        return super().publish_nowait(topic, payload, qos=qos, retain=retain)


def messages_per_card(sent: Counter[str], cards: int) -> dict[str, Any]:
    """Messages on the wire per card: on the public path (the issue's figure) and by kind."""
    if not cards:
        return {"messages_per_card": None, "messages_by_kind_per_card": {}}
    return {"messages_per_card": round(sum(sent[k] for k in PUBLIC_PATH) / cards, 2),
            "messages_by_kind_per_card": {k: round(n / cards, 2) for k, n in sorted(sent.items())}}


def backend(settings: Any, broker: str, client_id: str) -> tuple[Service, Any]:
    """A backend as ``dealer run`` builds one (its journal, and its leases when the journal is
    PostgreSQL), recording every scan-to-publish latency; and its metrics."""
    from dealer.edge.journals import open_journal
    from dealer.edge.metrics import Metrics
    from dealer.edge.runner import build_ownership

    bus = CountingBus(broker, client_id=client_id)
    metrics = Metrics()
    journal = open_journal(settings) if settings.service.journal_url else None
    ownership = build_ownership(settings, journal, bus, metrics)
    service = Service(settings, bus=bus, metrics=metrics, journal=journal, ownership=ownership)
    service.latency_samples = []
    service.publisher.stages = {k: [] for k in STAGES}
    return service, metrics


def _figures(*, samples: list[int], backend_cpu: float, wall: float, loadgen: dict[str, Any],
             broker_cpu: float | None, db_share: float | None, measured_db: bool,
             process_shares: list[float] | None = None, stages: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """The figures every run reports the same way: latencies, where each card's time went
    (``stages_ms``: :data:`dealer.edge.publisher.STAGES`), the backend's CPU per card (over the
    load generator's whole run: heartbeats, prompts and events included), the generator's own,
    the broker's and the database's CPU, and the verdict on what set them."""
    s2p = summarize(samples)
    backend_share = _share(0.0, backend_cpu, wall)
    broker_share = _share(0.0, broker_cpu, wall)
    return {
        "cards": len(samples),
        "scan_to_publish_ms": s2p,
        "stages_ms": {k: summarize((stages or {}).get(k, [])) for k in STAGES},
        "end_to_end_ms": loadgen.get("end_to_end_ms"),
        "cards_sent": loadgen.get("cards_sent"),
        "backend_cpu": {"seconds": round(backend_cpu, 3), "share_of_a_core": backend_share,
                        "us_per_card": round(backend_cpu / len(samples) * 1e6, 1) if samples else None},
        "broker_cpu": {"seconds": None if broker_cpu is None else round(broker_cpu, 3),
                       "share_of_a_core": broker_share},
        "load_generator": {k: loadgen.get(k) for k in ("phase", "hand_delay_ms", "peak_cards_per_10ms", "loop_lag_ms",
                                                       "deal_delay_ms", "cpu_s", "cpu_share", "results_acknowledged",
                                                       "teardown", "error") if k in loadgen},
        **({"database_cpu": {"share_of_a_core": db_share}} if measured_db else {}),
        "bottleneck": judge(backend_cpu_share=backend_share, loadgen=loadgen, broker_cpu_share=broker_share,
                            scan_to_publish=s2p, cpus=os.cpu_count() or 1, backend_process_shares=process_shares,
                            database_cpu_share=db_share),
    }


async def _measure(settings: Any, broker: str, tables: int, seconds: float, loop: str, phase: str,
                   broker_pid: int | None = None, db: Any = None) -> dict[str, Any]:
    """One backend (the journal ``settings`` name) under the load generator; its figures. Its
    RSS is the benchmark process's: ``rss_mb_before`` says what the runs before it left there
    (Python keeps the memory it freed), ``rss_mb_after`` the total after the run."""
    rss_before = _rss_mb()
    service, metrics = backend(settings, broker, "bench-backend")
    run = asyncio.create_task(service.run())
    try:
        await asyncio.wait_for(service.ready.wait(), 60)
        deadline = time.monotonic() + 60  # a node adopts its tables once it holds their leases
        while len(service.tables) < tables:
            if time.monotonic() > deadline or run.done():
                raise RuntimeError(f"the backend owns {len(service.tables)} of {tables} tables after 60 s")
            await asyncio.sleep(0.05)
        service.latency_samples.clear()  # the run's cards only
        for v in service.publisher.stages.values():
            v.clear()
        sent = service.bus.sent
        sent.clear()
        cpu0, broker0, wall0, db0 = _cpu_s(), _proc_cpu_s(broker_pid), time.monotonic(), _db_cpu(db)
        sampler = Sampler().start()
        try:
            loadgen = await _run_loadgen(broker, tables, seconds, loop, phase)
        finally:
            sampler.stop()
        wall = time.monotonic() - wall0
        backend_cpu = _cpu_s() - cpu0
        broker1, db_share = _proc_cpu_s(broker_pid), _share(db0, _db_cpu(db), wall)
        return {
            **_figures(samples=service.latency_samples, backend_cpu=backend_cpu, wall=wall, loadgen=loadgen,
                       broker_cpu=None if broker0 is None or broker1 is None else broker1 - broker0,
                       db_share=db_share, measured_db=db is not None, stages=service.publisher.stages),
            "cpu_by_part": sampler.figures(),
            **messages_per_card(sent, len(service.latency_samples)),
            "rounds_opened": sum(t.last_seq for t in service.tables.values()),
            "journal_commit_ms": _histogram_ms(metrics),
            "rss_mb_before": rss_before,
            "rss_mb_after": _rss_mb(),
        }
    finally:
        run.cancel()
        _, stuck = await asyncio.wait({run}, timeout=BACKEND_STOP_S)
        if stuck:
            raise RuntimeError(f"the backend did not stop within {BACKEND_STOP_S:g} s of the run's end")


#: Seconds the nodes of a ``--processes`` run may take to share the tables out between them.
NODES_SETTLE_S = 120.0
#: The share must hold this long (no table moving) before the run starts.
NODES_STABLE_S = 3.0
#: Seconds a node may take to print its figures after ``stop``, and to exit after them.
NODE_FIGURES_S = 30.0
#: The longest line read from a node: its figures carry every latency sample (a 1,000-table
#: node's are about 100 KB; asyncio's default limit of 64 KiB lost them).
NODE_LINE_MAX = 64 * 1024 * 1024


class _Node:
    """One ``tools.bench_node`` process: its latest count of tables held, its figures at the
    end, or what went wrong (with the tail of its log)."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log
        self.owned = 0
        self.changed = time.monotonic()
        self.figures: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.reader = asyncio.create_task(self._read(), name=f"read-{name}")

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except ValueError as exc:  # over NODE_LINE_MAX: said, not lost in a dead task
                if not self.figures.done():
                    self.figures.set_result({"error": f"{self.name} printed a line too long to read: {exc}"})
                return
            if not line:
                if not self.figures.done():
                    self.figures.set_result({"error": f"{self.name} exited ({self.proc.returncode}) without figures: "
                                                      f"{self.tail()}"})
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "owned" in msg and "samples_ns" not in msg:
                if msg["owned"] != self.owned:
                    self.owned, self.changed = msg["owned"], time.monotonic()
            elif not self.figures.done():
                self.figures.set_result(msg if "error" not in msg else msg | {"error": f"{self.name}: {msg['error']}"})

    def tail(self, n: int = 3) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no log)"
        return " | ".join(line[:300] for line in lines) or "(empty log)"

    async def send(self, command: str) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(command.encode() + b"\n")
            try:
                await self.proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass

    async def end(self) -> None:
        """Exit within :data:`NODE_FIGURES_S`, else killed."""
        try:
            await asyncio.wait_for(self.proc.wait(), NODE_FIGURES_S)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)


async def _measure_nodes(processes: int, journal_url: str, broker: str, tables: int, seconds: float, loop: str,
                         phase: str, fsync: bool, tmp: Path, broker_pid: int | None = None,
                         db: Any = None) -> dict[str, Any]:
    """``processes`` backend processes (``tools.bench_node``) sharing the tables by lease on
    one PostgreSQL journal, under one load generator; their figures together and each one's."""
    nodes: list[_Node] = []
    try:
        for i in range(1, processes + 1):
            name = f"bench-node-{i}"
            work = tmp / name
            work.mkdir()
            log = work / "node.log"
            with log.open("wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "tools.bench_node", "--broker", broker, "--tables", str(tables),
                    "--journal-url", journal_url, "--node-id", name, "--workdir", str(work), "--loop", loop,
                    *([] if fsync else ["--no-fsync"]), stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, stderr=err, limit=NODE_LINE_MAX)
            nodes.append(_Node(name, proc, log))
        deadline = time.monotonic() + NODES_SETTLE_S
        while True:  # every table held, by every node some, and nothing moving for a while
            now = time.monotonic()
            held = sum(n.owned for n in nodes)
            if held == tables and all(n.owned for n in nodes) and now - max(n.changed for n in nodes) >= NODES_STABLE_S:
                break
            gone = [n for n in nodes if n.figures.done()]
            if gone or now > deadline:
                why = "; ".join(n.figures.result().get("error", "?") for n in gone) or (
                    f"after {NODES_SETTLE_S:g} s the nodes hold {[n.owned for n in nodes]} of {tables} tables")
                raise RuntimeError(f"the backend nodes did not share the tables out: {why}")
            await asyncio.sleep(0.1)
        shares = [n.owned for n in nodes]
        broker0, wall0, db0 = _proc_cpu_s(broker_pid), time.monotonic(), _db_cpu(db)
        for n in nodes:
            await n.send("start")
        loadgen = await _run_loadgen(broker, tables, seconds, loop, phase)
        wall = time.monotonic() - wall0
        broker1, db_share = _proc_cpu_s(broker_pid), _share(db0, _db_cpu(db), wall)
        for n in nodes:
            await n.send("stop")
        figures = []
        for n in nodes:
            try:
                figures.append(await asyncio.wait_for(asyncio.shield(n.figures), NODE_FIGURES_S))
            except TimeoutError:
                figures.append({"error": f"{n.name} printed no figures within {NODE_FIGURES_S:g} s of the stop: "
                                         f"{n.tail()}"})
    finally:
        for n in nodes:
            if n.proc.returncode is None:
                await n.send("stop")
        await asyncio.gather(*(n.end() for n in nodes), return_exceptions=True)
    errors = [f["error"] for f in figures if "error" in f]
    if errors:
        raise RuntimeError("; ".join(errors))
    cpu = [f["cpu_s"] for f in figures]
    shares_cpu = [round(c / wall, 3) for c in cpu] if wall > 0 else []
    commits = sum(f["journal_commit_ms"]["commits"] for f in figures)
    return {
        "processes": processes,
        **_figures(samples=[x for f in figures for x in f["samples_ns"]], backend_cpu=sum(cpu), wall=wall,
                   loadgen=loadgen, broker_cpu=None if broker0 is None or broker1 is None else broker1 - broker0,
                   db_share=db_share, measured_db=db is not None, process_shares=shares_cpu,
                   stages={k: [x for f in figures for x in f["stages_ns"][k]] for k in STAGES}),
        "rounds_opened": sum(f["rounds_opened"] for f in figures),
        "journal_commit_ms": {"commits": commits, "mean": round(sum(
            f["journal_commit_ms"]["mean"] * f["journal_commit_ms"]["commits"] for f in figures) / commits, 3)
            if commits else 0.0},
        "nodes": [{"tables_at_start": s, "tables_at_end": f["owned"], "cards": len(f["samples_ns"]),
                   "cpu_share": c, "rss_mb": f["rss_mb"]} for s, f, c in zip(shares, figures, shares_cpu)],
        "rss_mb_after": round(sum(f["rss_mb"] for f in figures), 1),
    }


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
                            fsync: bool = True, loop: str = "asyncio", journal: str | None = None,
                            processes: int = 1, phase: str = "spread",
                            lease_seconds: float | None = None) -> dict[str, Any]:
    """SQLite always; with ``journal`` (a postgresql:// URL of a scratch database, or
    ``private`` for a PostgreSQL server of the benchmark's own) also the PostgreSQL journal,
    one after the other under the same load, same broker, same machine, in the same run; with
    ``processes`` > 1 (and ``private``) then the PostgreSQL journal again, the tables shared by
    lease between that many backend processes (``journals.postgresql_processes``). ``phase``:
    the load's shape (:data:`simulators.loadgen.PHASES`): tables out of step, as in a studio, or
    in step, every table's card in the same instant. ``lease_seconds``: the PostgreSQL node's
    lease (default: the config's, 4 s), longer for a smoke run on a loaded machine, where a
    renewal answered late would give the tables up mid-run."""
    with tempfile.TemporaryDirectory(prefix="dealer-bench-") as tmpdir:
        tmp = Path(tmpdir)
        mq = None if broker is not None else private_broker(tmp)
        broker = broker if mq is None else mq.url
        pg = None
        try:
            baseline = {"mqtt_qos1_publish_ms": await _mqtt_baseline(broker),
                        "sqlite_wal_fsync_commit_ms": _sqlite_baseline(tmp / "baseline.sqlite"),
                        **await _paced_baselines(broker, tmp / "baseline-paced.sqlite")}
            broker_pid = mq.proc.pid if mq is not None and mq.proc is not None else None
            runs = {"sqlite": await _measure(_settings(tmp, broker, tables, fsync), broker, tables, seconds, loop,
                                             phase, broker_pid)}
            floors = {"sqlite": floor_of(baseline["mqtt_qos1_publish_paced_ms"],
                                         baseline["sqlite_wal_fsync_commit_paced_ms"])}
            if journal is not None:
                url = journal
                if journal == "private":
                    from simulators.pgserver import PgServer

                    pg = PgServer()
                    pg.start()
                    url = pg.create_database("bench")
                baseline["postgresql_commit_paced_ms"] = await _pg_baseline(url)
                runs["postgresql"] = await _measure(_settings(tmp, broker, tables, fsync, journal_url=url,
                                                              lease_seconds=lease_seconds), broker,
                                                    tables, seconds, loop, phase, broker_pid, db=pg)
                floors["postgresql"] = floor_of(baseline["mqtt_qos1_publish_paced_ms"],
                                                baseline["postgresql_commit_paced_ms"])
                if processes > 1:  # a database of their own: the one-node run's leases are not theirs
                    assert pg is not None, "several processes need the benchmark's own PostgreSQL server"
                    runs["postgresql_processes"] = await _measure_nodes(
                        processes, pg.create_database("bench_nodes"), broker, tables, seconds, loop, phase, fsync,
                        tmp, broker_pid, db=pg)
                    floors["postgresql_processes"] = floors["postgresql"]
            for name, r in runs.items():  # the floor under one card, and how far above it the backend is
                r["floor_ms"] = floors[name]
                r["floor_ratio"] = floor_ratio(r["scan_to_publish_ms"], floors[name])
            return {
                "bench": "latency",
                "tables": tables,
                "seconds": seconds,
                "fsync": fsync,
                "loop": loop,
                "processes": processes,
                "phase": phase,
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
