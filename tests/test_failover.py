"""Failover between real backend nodes: two or three ``dealer run`` processes on one PostgreSQL
journal (a private server the test kills and pauses) and one Mosquitto, one Sevenluck table on
an MQTT scanner gateway (which every node reaches), short leases.

(a) the owner is killed (-9) mid-deal, then the next owner while players decide: each time
    another node takes the table over, resumes at the same position, and nobody is timed out;
    one result; the journal's rows go node after node, epoch after epoch.
(b) the owner is stopped (SIGSTOP) past its lease, another node takes over and deals, the old
    owner is resumed: the database refuses its rows, it publishes nothing for the table (the
    broker's log says who published what) and it steps down.
(c) SIGTERM hands the table over at once.
(d) the owner loses the database (paused past the lease): it stops; the table comes back
    when the database does.

Failover seconds are printed, never asserted (tests never assert on time)."""

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

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

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
        """The node named by the latest retained prompt of the table since message ``since``."""
        for t, m in reversed(self.rec.messages[since:]):
            if t == topics.current_prompt(T) and m and not m.get("stale"):
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
        p = [m for t, m in self.rec.messages[since:] if t == topics.prompts(T) and m["kind"] != "ALERT"]
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


async def _first_node(s: Studio, name: str) -> None:
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


def _report(case: str, **figures: float) -> None:
    print(f"\nFAILOVER {case}: " + ", ".join(f"{k}={v:.2f}s" for k, v in figures.items()))


async def _one_result(s: Studio) -> dict[str, Any]:
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


def _epochs_in_order(s: Studio) -> list[tuple[str, int, int, int]]:
    runs = s.rows_by()
    epochs = [r[1] for r in runs]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), f"rows interleaved between owners: {runs}"
    return runs


# -- (a) kill -9 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("studio", [{"nodes": ["node-a", "node-b", "node-c"]}], indirect=True)
async def test_a_killed_owner_mid_deal_and_then_mid_decision_another_node_resumes_fairly(studio: Studio) -> None:
    s = studio
    await _first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL[:4], POSITIONS[:4])
    await wait_until(lambda: s.expects(POSITIONS[4]), what="NEXT P3.2")  # the 4th card is journaled
    mark = len(s.rec.messages)
    s.nodes["node-a"].kill()
    second, kill1 = await s.served_by_other("node-a", mark, "another node after the kill")
    first = next(m for t, m in s.rec.messages[mark:] if t == topics.prompts(T))
    assert (first["kind"], first["round_id"], first["position"]) == ("NEXT", s.round_id(1), POSITIONS[4])

    await s.deal(DEAL[4:], POSITIONS[4:])
    asked = await wait_until(lambda: s.private("p1", "decision_required"), what="decision required")
    mark = len(s.rec.messages)
    s.nodes[second].kill()  # while the players decide: the window (1 s) passes during the failover
    third, kill2 = await s.served_by_other(second, mark, "the last node after the second kill")
    assert third not in ("node-a", second)
    again = await wait_until(lambda: [m for m in s.private("p1", "decision_required", mark) if m["data"].get("resumed")],
                             what="p1's decision given again")
    assert again[-1]["data"]["closes_at"] > asked[0]["data"]["closes_at"]
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
    key = f"{T}:{s.round_id(1)}"
    await wait_until(lambda: s.rec.results(key), timeout=30, what="the result")
    res = await _one_result(s)
    assert res["decisions"]["p1"] == {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "10"}
    assert res["decisions"]["p3"]["by"] == "timeout"  # folded by the new window's timer, not by the outage
    made = [e for e in s.rec.events("decision_made") if e["data"]["player_id"] == "p3"]
    opened = [e for e in s.rec.events("decisions_open") if e["data"].get("resumed")]
    # after the new window (its timer runs on the monotonic clock: a millisecond of rounding either way)
    assert made and opened and made[-1]["at"] >= opened[-1]["data"]["closes_at"] - 5
    assert made[-1]["at"] > asked[0]["data"]["closes_at"]  # not at the old deadline
    runs = _epochs_in_order(s)
    assert [r[0] for r in runs] == ["node-a", second, third], runs
    _report("kill -9 mid-deal", failover=kill1)
    _report("kill -9 mid-decision", failover=kill2)


# -- (b) SIGSTOP past the lease, SIGCONT ---------------------------------------------------------------


async def test_b_a_paused_owner_resumed_after_the_takeover_writes_and_publishes_nothing(studio: Studio) -> None:
    s = studio
    a, b = s.nodes["node-a"], s.nodes["node-b"]
    await _first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL[:3], POSITIONS[:3])
    await wait_until(lambda: s.expects(POSITIONS[3]), what="NEXT P1.2")
    old_epoch = s.sql("SELECT epoch FROM leases WHERE table_id = %s", (T,))[0][0]
    mark = len(s.rec.messages)
    a.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    node, took = await s.served_by_other("node-a", mark, "node-b after the pause")
    assert node == "node-b"
    # something both nodes journal (a forged supervisor command: a security event), queued for the paused one
    # (sent again until node-b journals it: right after its takeover, a loaded host may not have
    # its subscription to the table's supervisor topic in place yet, and the broker drops it)
    for attempt in range(5):
        await s.rec.command(topics.supervisor(T), {"type": "supervisor_void", "supervisor": "mallory", "reason": "x",
                                                   "table_id": T, "issued_at": int(time.time() * 1000),
                                                   "signature": "0" * 64})
        try:
            await wait_until(lambda: s.sql("SELECT count(*) FROM events WHERE type = 'security_event' "
                                           "AND node = 'node-b'")[0][0], timeout=6, what="node-b journaling the forged command")
            break
        except AssertionError:
            if attempt == 4:
                raise
    await s.deal(DEAL[3:5], POSITIONS[3:5])  # node-b deals; the round stays in play (no handback meanwhile)
    await wait_until(lambda: s.expects(POSITIONS[5]), what="NEXT D.2 from node-b")
    a_rows = s.sql("SELECT count(*) FROM events WHERE node = 'node-a'")[0][0]
    offset = s.broker_log_offset()
    resumed_after = time.monotonic() - stopped
    a.signal(signal.SIGCONT)
    await wait_until(lambda: a.said("table dropped", table_id=T), timeout=START,
                     what=f"node-a stepping down\n{a.tail()}")
    await asyncio.sleep(LEASE)  # its timers, its queued commands, its reconnect: all had their chance
    assert s.sql("SELECT count(*) FROM events WHERE node = 'node-a' AND epoch = %s", (old_epoch,))[0][0] == a_rows
    assert s.published_by("dealer-node-a", offset) == [], "the resumed node published for the table"
    assert s.serving() == "node-b"
    dropped = a.said("table dropped", table_id=T)[0]
    assert dropped["reason"]  # why it stepped down (lease ran out / fenced)
    how = [r["event"] for r in a.lines() if r.get("event") in (
        "journal refused a write: this node no longer holds the table's lease; re-reading the leases",
        "rows of tables this node no longer owns taken out of the batch: never written, never released",
        "output of a table held back: this node's lease of it is not valid now")]
    print(f"\nnode-a after SIGCONT: dropped ({dropped['reason']}); {how}")
    # the round goes on at node-b and ends once
    await s.deal(DEAL[5:], POSITIONS[5:])
    await wait_until(lambda: s.private("p1", "decision_required"), what="decision required")
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(1)}"), timeout=30, what="the result")
    await _one_result(s)
    runs = _epochs_in_order(s)
    assert runs[0][0] == "node-a" and runs[1][0] == "node-b", runs
    _report("SIGSTOP past the lease", failover=took, paused=resumed_after)


# -- (c) SIGTERM -------------------------------------------------------------------------------------------


async def test_c_sigterm_hands_the_table_over_at_once(studio: Studio) -> None:
    s = studio
    a = s.nodes["node-a"]
    await _first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL[:2], POSITIONS[:2])
    await wait_until(lambda: s.expects(POSITIONS[2]), what="NEXT D.1")
    mark = len(s.rec.messages)
    t0 = time.monotonic()
    a.signal(signal.SIGTERM)
    node, took = await s.served_by_other("node-a", mark, "node-b after SIGTERM")
    assert a.proc is not None and a.proc.wait(timeout=30) == 0
    fresh = await wait_until(lambda: [i for i, (t, m) in enumerate(s.rec.messages[mark:])
                                      if t == topics.state(T) and m and m.get("node_id") == node
                                      and not m.get("stale")], what="node-b's retained table state")
    stale = [i for i, (t, m) in enumerate(s.rec.messages[mark:]) if t == topics.state(T) and m and m.get("stale")]
    assert stale and stale[0] < fresh[0], "node-a's stale mark came after node-b's state"
    first = next(m for t, m in s.rec.messages[mark:] if t == topics.prompts(T) and m["kind"] == "NEXT")
    assert (first["round_id"], first["position"]) == (s.round_id(1), POSITIONS[2])
    await s.deal(DEAL[2:], POSITIONS[2:])
    await wait_until(lambda: s.private("p1", "decision_required"), what="decision required")
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(1)}"), timeout=30, what="the result")
    await _one_result(s)
    _epochs_in_order(s)
    _report("SIGTERM", failover=took, exit=time.monotonic() - t0)


# -- (d) the owner loses the database ------------------------------------------------------------------------


@pytest.mark.parametrize("studio", [{"decision_seconds": 2.0}], indirect=True)  # the fault lands inside it
@pytest.mark.parametrize("fault", ["pause", "kill"])
async def test_d_the_database_lost_past_the_lease_stops_the_table_and_it_comes_back(studio: Studio,
                                                                                    fault: str) -> None:
    s = studio
    a = s.nodes["node-a"]
    await _first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL, POSITIONS)
    asked = await wait_until(lambda: s.private("p1", "decision_required"), what="decision required")
    mark = len(s.rec.messages)
    if fault == "pause":
        s.pg.pause()  # connections stay open, nothing answers
    else:
        s.pg.kill()  # a crash: connections reset; started again on the same port and data
    t0 = time.monotonic()
    # a player acts meanwhile: the node cannot look the command id up; its loop must not hang on it
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p3", "action": "PLAY"})
    try:
        await wait_until(lambda: a.said("table dropped", table_id=T), timeout=START,
                         what=f"node-a stepping down without its database\n{a.tail()}")
        stepped = time.monotonic() - t0
        offset = s.broker_log_offset()
        await asyncio.sleep(LEASE)
        assert s.published_by("dealer-node-a", offset) == [], "published for a table it cannot journal"
    finally:
        if fault == "pause":
            s.pg.resume()
        else:
            s.pg.start()
    back = time.monotonic()
    outage = back - t0
    node, took = await s.served_by_other("", len(s.rec.messages), "the table served again")
    again = await wait_until(lambda: [m for m in s.private("p1", "decision_required", mark) if m["data"].get("resumed")],
                             what="p1's decision given again")
    assert again[-1]["data"]["closes_at"] > asked[0]["data"]["closes_at"]
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(1)}"), timeout=30, what="the result")
    res = await _one_result(s)
    assert res["decisions"]["p1"]["by"] == "player"
    _epochs_in_order(s)
    _report(f"database {fault}", step_down=stepped, outage=outage, back_after_database=took)


# -- refused starts ------------------------------------------------------------------------------------------


async def test_e_a_cluster_node_refuses_to_start_in_one_line(studio: Studio, tmp_path: Path) -> None:
    """An unreachable database, and a node id that is already running, each stop ``dealer run``
    with one line and exit 2 (before it touches the broker)."""
    from simulators.broker import free_port

    s = studio
    a = s.nodes["node-a"]
    await _first_node(s, "node-a")
    twin = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "dealer", "run", "--config", str(a.config)], cwd=ROOT,
        env=dealer_env(DEALER_SERVICE__NODE_ID="node-a"), capture_output=True, text=True, timeout=START)
    last = twin.stderr.strip().splitlines()[-1]
    assert twin.returncode == 2 and "Traceback" not in twin.stderr, twin.stderr[-2000:]
    assert "node-a is already running" in last, last
    assert a.running() and s.serving() == "node-a"
    cfg = tmp_path / "nowhere.toml"
    cfg.write_text(a.config.read_text().replace(s.db, f"postgresql://postgres@127.0.0.1:{free_port()}/studio"))
    lost = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "dealer", "run", "--config", str(cfg)], cwd=ROOT,
        env=dealer_env(DEALER_SERVICE__NODE_ID="node-z"), capture_output=True, text=True, timeout=START)
    assert lost.returncode == 2 and "Traceback" not in lost.stderr, lost.stderr[-2000:]
    assert "cannot connect" in lost.stderr.strip().splitlines()[-1] or "cannot be opened" in lost.stderr, lost.stderr
