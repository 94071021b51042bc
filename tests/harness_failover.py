"""Test harness: a failover studio. Real ``dealer run`` nodes on one PostgreSQL journal (a
private server a test kills and pauses) and one Mosquitto that logs who publishes, one
Sevenluck table (``T``) on an MQTT scanner gateway every node reaches, short leases; and what
the failover tests read back from it (the first owner, the one result, the epochs in order)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dealer.edge import topics
from simulators.broker import MosquittoProcess
from simulators.pgserver import PgServer
from simulators.procs import die_with_parent
from simulators.shoe import VirtualShoe
from simulators.station import MqttShoeLink
from tests.conftest import cancel_and_wait, wait_until
from tests.harness import ROOT, Recorder, dealer_env

T = "F1"
READER = "GWF"
LEASE = 2.0
START = 60.0  # a `dealer run` start on a loaded machine: a bound, not a measure
#: P1 P3 D, three times: P1 three aces
DEAL = ["AS", "2H", "2C", "AD", "5D", "3C", "AC", "9S", "4C"]
PUBLISH = re.compile(r"Received PUBLISH from (\S+) \(.*?'([^']*)'")


# -- the studio: PostgreSQL, a broker that logs who publishes, the nodes, the gateway ---------------


class Node:
    """One ``dealer run`` of the cluster (its node id from the environment, the config shared)."""

    def __init__(self, config: Path, node_id: str, log: Path) -> None:
        self.config, self.node_id, self.log = config, node_id, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "Node":
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(self.config)],
                                         cwd=ROOT, env=dealer_env(DEALER_SERVICE__NODE_ID=self.node_id),
                                         stdout=subprocess.DEVNULL, stderr=err, preexec_fn=die_with_parent)
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop_all([self])

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def said(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        return [r for r in self.lines() if r.get("event") == event and all(r.get(k) == v for k, v in fields.items())]

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def stop_all(nodes: Iterable[Node], timeout: float = 20.0) -> None:
    """SIGCONT and SIGTERM every running node at once, then SIGKILL whatever has not exited
    within ``timeout`` seconds in all: a teardown that cannot hang or leave a node behind."""
    running = [n.proc for n in nodes if n.proc is not None and n.proc.poll() is None]
    for p in running:
        with suppress(ProcessLookupError):
            p.send_signal(signal.SIGCONT)
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in running:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Studio:
    """The database, the broker, the nodes, a recorder (players and settlement) and the table's
    scanner gateway."""

    def __init__(self, tmp: Path, pg: PgServer, broker: MosquittoProcess, rec: Recorder, nodes: dict[str, Node],
                 db: str) -> None:
        self.tmp, self.pg, self.broker, self.rec, self.nodes, self.db = tmp, pg, broker, rec, nodes, db
        self.shoe = VirtualShoe(READER)
        self.gateway = MqttShoeLink(rec.bus, T)
        self._beat: asyncio.Task[None] | None = None

    async def beat(self) -> None:
        await self.gateway.send([self.shoe.boot()])
        while True:
            await self.gateway.send([self.shoe.heartbeat()])
            await asyncio.sleep(0.2)

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.db, autocommit=True, connect_timeout=5) as c:
            cur = c.execute(query, params)
            return cur.fetchall() if cur.description else []

    def journal_id(self) -> str:
        return str(self.sql("SELECT value FROM meta WHERE key = 'journal_id'")[0][0])

    def round_id(self, seq: int = 1) -> str:
        return f"{T}-{self.journal_id()}-{seq:06d}"

    # -- who serves the table, as the clients see it -----------------------------------------------

    def serving(self, since: int = 0) -> str | None:
        """The node named by the latest retained state carrying a prompt (protocol 2: the
        table's current prompt) since message ``since``."""
        for t, m in reversed(self.rec.messages[since:]):
            if t == topics.state(T) and m and not m.get("stale") and m.get("prompt"):
                return str(m.get("node_id"))
        return None

    async def served_by_other(self, than: str, since: int, what: str) -> tuple[str, float]:
        """Wait until another node serves the table; (its id, seconds waited)."""
        t0 = time.monotonic()
        node = await wait_until(lambda: (n := self.serving(since)) not in (None, than) and n,
                                timeout=START, what=what)
        return node, time.monotonic() - t0

    def expects(self, position: str, since: int = 0) -> bool:
        """The station's last prompt asks for ``position`` (an alert between, e.g. for a forged
        supervisor command, does not change what the deal waits for)."""
        p = [m for t, m in self.rec.messages[since:]  # the prompts the states carried, as the recorder lists them
             if t == topics.table_topic(T, "prompts") and m["kind"] != "ALERT"]
        return bool(p and p[-1]["kind"] in ("NEXT", "RESCAN") and p[-1]["position"] == position)

    def private(self, player: str, kind: str, since: int = 0) -> list[dict[str, Any]]:
        return [m for t, m in self.rec.messages[since:] if t == topics.player(T, player) and m["kind"] == kind]

    # -- playing ------------------------------------------------------------------------------------

    async def scan(self, code: str) -> None:
        await self.gateway.send([self.shoe.scan(code)])

    async def deal(self, codes: list[str], positions: list[str]) -> None:
        for code, pos in zip(codes, positions):
            await wait_until(lambda: self.expects(pos), timeout=START, what=f"NEXT {pos}")
            await self.scan(code)

    async def antes(self) -> None:
        await wait_until(lambda: self.rec.events("round_opened"), timeout=START, what="round opened")
        for bet, player, seat in (("a1", "p1", 1), ("a3", "p3", 3)):
            await self.rec.command(topics.actions(T), {"type": "place_bet", "bet_id": bet, "player_id": player,
                                                       "bet_type": "ante", "stake": "10", "seat": seat})
        await wait_until(lambda: len(self.rec.events("bet_accepted")) >= 2, what="bets accepted")
        await self.rec.command(topics.station(T), {"type": "close_betting", "by": "dealer"})

    def rows_by(self) -> list[tuple[str, int, int, int]]:
        """(node, epoch, first seq, last seq) of the table's journal rows, in seq order."""
        rows = self.sql("SELECT node, epoch, seq FROM events WHERE table_id = %s ORDER BY seq", (T,))
        runs: list[list[Any]] = []
        for node, epoch, seq in rows:
            if runs and runs[-1][0] == node and runs[-1][1] == epoch:
                runs[-1][3] = seq
            else:
                runs.append([node, epoch, seq, seq])
        return [tuple(r) for r in runs]  # type: ignore[misc]

    def broker_log_offset(self) -> int:
        return (self.broker.dir / "mosquitto.log").stat().st_size

    def published_by(self, client: str, offset: int) -> list[str]:
        """Topics of the table that ``client`` published to, from the broker's log after ``offset``."""
        with (self.broker.dir / "mosquitto.log").open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return [m.group(2) for m in PUBLISH.finditer(text)
                if m.group(1) == client and topics.table_of(m.group(2)) == T]


POSITIONS = ["P1.1", "P3.1", "D.1", "P1.2", "P3.2", "D.2", "P1.3", "P3.3", "D.3"]


def cluster_config(tmp: Path, broker_url: str, db_url: str, preferred: list[str], *,
                   decision_seconds: float = 1.0) -> Path:
    """The nodes' shared config. ``fsync`` stays on (synchronous_commit): with it off, a killed
    database loses the last commits whose effects were already published."""
    table = {"id": T, "game": "sevenluck", "betting_seconds": 120, "pause_seconds": 0.3,
             "decision_seconds": decision_seconds, "options": {"seats": 3}, "preferred_nodes": preferred,
             "scanner": {"kind": "mqtt", "reader_id": READER, "heartbeat_timeout": 5}}
    text = (f'[service]\njournal_url = "{db_url}"\nmetrics_enabled = false\nlog_level = "info"\n'
            f'[mqtt]\nurl = "{broker_url}"\n'
            f'[cluster]\nlease_seconds = {LEASE}\nrenew_seconds = {LEASE / 4}\n'
            f'[[tables]]\n' + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items() if not isinstance(v, dict))
            + "[tables.options]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table["options"].items())
            + "[tables.scanner]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table["scanner"].items()))
    cfg = tmp / "cluster.toml"
    cfg.write_text(text)
    return cfg


@pytest.fixture
async def studio(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Studio]:
    param: dict[str, Any] = getattr(request, "param", {})
    names: list[str] = param.get("nodes", ["node-a", "node-b"])
    pg = PgServer(tmp_path)
    pg.start()
    bdir = tmp_path / "broker"
    bdir.mkdir()
    broker = MosquittoProcess(bdir, persistence=False)
    broker.conf.write_text(broker.conf.read_text() + "log_type all\n")  # who published what, for (b)
    broker.start()
    db = pg.create_database("studio")
    cfg = cluster_config(tmp_path, broker.url, db, names, decision_seconds=param.get("decision_seconds", 1.0))
    rec = await Recorder(broker.url).start()
    nodes = {n: Node(cfg, n, tmp_path / f"{n}.log") for n in names}
    s = Studio(tmp_path, pg, broker, rec, nodes, db)
    beat = asyncio.create_task(s.beat())
    try:
        yield s
    finally:
        try:
            await cancel_and_wait(beat)
            stop_all(nodes.values())
            with suppress(Exception):
                await asyncio.wait_for(rec.stop(), 10)
        finally:  # whatever happened above (a test timeout lands anywhere): no process outlives the test
            for n in nodes.values():
                if n.proc is not None and n.proc.poll() is None:
                    n.proc.kill()
            broker.kill()
            pg.cleanup()


async def first_node(s: Studio, name: str) -> None:
    """Start ``name`` alone and wait until it serves the table; then the others."""
    s.nodes[name].start()
    await wait_until(lambda: s.serving() == name, timeout=START,
                     what=f"{name} serving the table\n{s.nodes[name].tail()}")
    for n, node in s.nodes.items():
        if n != name:
            node.start()
    for n, node in s.nodes.items():
        await wait_until(lambda: node.said("lease manager started"), timeout=START,
                         what=f"{n} joined\n{node.tail()}")


def report(case: str, **figures: float) -> None:
    print(f"\nFAILOVER {case}: " + ", ".join(f"{k}={v:.2f}s" for k, v in figures.items()))


async def one_result(s: Studio) -> dict[str, Any]:
    """The round's one result: every copy the same, acknowledged by settlement once (one
    ``result_delivered`` in the journal, the outbox empty)."""
    rid = s.round_id(1)
    results = s.rec.results(f"{T}:{rid}")
    assert results, "no result"
    assert all(r == results[0] for r in results), "the same round settled with two different results"
    await wait_until(lambda: s.sql("SELECT count(*) FROM outbox WHERE table_id = %s", (T,))[0][0] == 0,
                     what="the result acknowledged")
    delivered = s.sql("SELECT count(*) FROM events WHERE table_id = %s AND type = 'result_delivered' "
                      "AND round_id = %s", (T, rid))[0][0]
    assert delivered == 1, delivered
    return results[0]


def epochs_in_order(s: Studio) -> list[tuple[str, int, int, int]]:
    runs = s.rows_by()
    epochs = [r[1] for r in runs]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), f"rows interleaved between owners: {runs}"
    return runs
