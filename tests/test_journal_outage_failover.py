"""A cluster node that cannot write its journal (issue 29, finding 1): two ``dealer run`` nodes on
a private PostgreSQL (killed, or refusing one node's writes) and one Mosquitto, the Sevenluck
table of tests/test_failover.py, leases of 2 s, each node serving its metrics.

(a) PostgreSQL is killed (-9), a card is scanned during the outage (taken, its commit fails) and
    the server is started again a few leases later: every node's journal is writable again
    (``dealer_journal_writable`` 1; it stayed 0 for ever once the held batch's table had left
    the node) and the round goes on, the card asked for again.
(b) The owner's database role loses INSERT on events while players decide: it gives the table up
    after a lease (the other node takes it, gives the decisions full new windows, and the round
    ends with the players' own decisions); it never writes its held rows under the old lease;
    once it can write again it serves tables again and takes the table back between rounds.

Seconds are printed, never asserted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request

import pytest

from dealer.edge import topics
from dealer.edge.journal_pg import PgJournal
from simulators.broker import free_port
from simulators.procs import die_with_parent
from tests.conftest import wait_until
from tests.harness import ROOT, dealer_env
from tests.harness_failover import (DEAL, LEASE, POSITIONS, START, T, Node, Studio, epochs_in_order, first_node,
                                    one_result, report, studio)

__all__ = ["studio"]  # the fixture, imported for pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

UNWRITABLE = "journal unwritable: input refused and the batch held until it commits (retrying with backoff)"
GAVE_UP = "journal unwritable for a whole lease: this node gives its tables up to the others and takes none until " \
          "it can write again"


class MetricNode(Node):
    """A node that serves /metrics on a port of its own (and may log in as another role)."""

    def __init__(self, node: Node, **env: str) -> None:
        super().__init__(node.config, node.node_id, node.log)
        self.port = free_port()
        self.env = env

    def start(self) -> "MetricNode":
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dealer", "run", "--config", str(self.config)], cwd=ROOT,
                env=dealer_env(DEALER_SERVICE__NODE_ID=self.node_id, DEALER_SERVICE__METRICS_ENABLED="true",
                               DEALER_SERVICE__METRICS_PORT=str(self.port), **self.env),
                stdout=subprocess.DEVNULL, stderr=err, preexec_fn=die_with_parent)
        return self

    def metric(self, name: str) -> float | None:
        """A sample without labels from the node's /metrics (None: not served now)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    async def writable(self) -> float | None:
        return await asyncio.to_thread(self.metric, "dealer_journal_writable")


def metric_nodes(s: Studio, **env_of: dict[str, str]) -> tuple[MetricNode, MetricNode]:
    for name in list(s.nodes):
        s.nodes[name] = MetricNode(s.nodes[name], **env_of.get(name.replace("-", "_"), {}))
    a, b = s.nodes["node-a"], s.nodes["node-b"]
    assert isinstance(a, MetricNode) and isinstance(b, MetricNode)
    return a, b


async def until_writable(node: MetricNode, what: str) -> None:
    deadline = time.monotonic() + START
    while await node.writable() != 1.0:
        assert time.monotonic() < deadline, f"{what}\n{node.tail()}"
        await asyncio.sleep(0.2)


async def finish_round(s: Studio, since: int, players: tuple[str, ...] = ("p1",)) -> dict:
    """The decisions (given again after the move) answered by the players themselves, and the one result."""
    for p in players:
        await wait_until(lambda: [m for m in s.private(p, "decision_required", since) if m["data"].get("resumed")]
                         or s.private(p, "decision_required", since), timeout=START, what=f"{p}'s decision asked")
        await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": p, "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(1)}"), timeout=30, what="the result")
    return await one_result(s)


async def play_round(s: Studio, n: int) -> None:
    """Round ``n`` from its opening to its result: two antes, nine cards, two decisions."""
    await wait_until(lambda: len(s.rec.events("round_opened")) >= n, timeout=START, what=f"round {n} opened")
    since = len(s.rec.messages)
    for player, seat in (("p1", 1), ("p3", 3)):
        await s.rec.command(topics.actions(T), {"type": "place_bet", "bet_id": f"r{n}{player}", "player_id": player,
                                                "bet_type": "ante", "stake": "10", "seat": seat})
    await wait_until(lambda: len(s.rec.events("bet_accepted")) >= 2 * n, what=f"round {n}'s bets")
    await s.rec.command(topics.station(T), {"type": "close_betting", "by": "dealer"})
    await s.deal(DEAL, POSITIONS)
    for p in ("p1", "p3"):
        await wait_until(lambda: s.private(p, "decision_required", since), timeout=START, what=f"{p} asked")
        await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": p, "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(n)}"), timeout=30, what=f"round {n}'s result")


# -- (a) PostgreSQL killed with a scan in flight, started again ----------------------------------------


async def test_a_database_killed_during_a_scan_leaves_every_journal_writable_once_it_is_back(studio: Studio) -> None:
    s = studio
    a, b = metric_nodes(s)
    await first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL[:3], POSITIONS[:3])
    await wait_until(lambda: s.expects(POSITIONS[3]), what="NEXT P1.2")
    assert await a.writable() == 1.0
    s.pg.kill()
    t0 = time.monotonic()
    try:
        await s.scan(DEAL[3])  # taken (the journal has not failed yet): its commit is the one that fails
        await wait_until(lambda: a.said(UNWRITABLE), timeout=START, what=f"node-a's commit failing\n{a.tail()}")
        assert a.said(UNWRITABLE)[0]["held_rows"] >= 1
        await wait_until(lambda: a.said("table dropped", table_id=T), timeout=START,
                         what=f"node-a stepping down without its database\n{a.tail()}")
        await asyncio.sleep(2 * LEASE)  # the database stays away a while (the finding: 12 s with 4 s leases)
        assert await a.writable() == 0.0
    finally:
        mark = len(s.rec.messages)
        s.pg.start()
    back = time.monotonic()
    await until_writable(a, "node-a's journal writable again once the database is back")
    await until_writable(b, "node-b's journal writable")
    writable_after = time.monotonic() - back
    node, took = await s.served_by_other("", mark, "the table served again")
    # the card scanned during the outage was never registered: the station is asked for it again
    await wait_until(lambda: s.expects(POSITIONS[3], mark), what="NEXT P1.2 again")
    await s.deal(DEAL[3:], POSITIONS[3:])
    res = await finish_round(s, mark)
    assert res["decisions"]["p1"]["by"] == "player"
    # nine cards, each journaled once: the one of the outage only when it was passed again
    assert s.sql("SELECT count(*) FROM events WHERE type = 'scan_read' AND round_id = %s",
                 (s.round_id(1),))[0][0] == 9
    epochs_in_order(s)
    report("database killed with a scan in flight", outage=back - t0, writable_after_restart=writable_after,
            served_after_restart=took)
    print(f"served by {node} after the restart")


# -- (b) one node cannot write: it gives the table up ------------------------------------------------------


@pytest.mark.parametrize("studio", [{"decision_seconds": 10.0}], indirect=True)  # no window ends by itself here
async def test_a_node_that_cannot_write_gives_its_table_up_and_serves_again_once_it_can(studio: Studio) -> None:
    s = studio
    # node-a logs in as a node role of deploy/postgresql/roles.sql; node-b as the database's owner
    PgJournal(s.db, node_id="setup").close()
    dbname = s.db.rsplit("/", 1)[1]
    s.pg.psql(dbname, (ROOT / "deploy/postgresql/roles.sql").read_text())
    s.sql("CREATE ROLE dealer_node_a LOGIN IN ROLE dealer_node")
    a, b = metric_nodes(s, node_a={"DEALER_SERVICE__JOURNAL_URL": s.db.replace("postgres@", "dealer_node_a@")})
    await first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL, POSITIONS)
    await wait_until(lambda: s.private("p1", "decision_required") and s.private("p3", "decision_required"),
                     what="decisions required")
    asked = {p: s.private(p, "decision_required")[-1]["data"]["closes_at"] for p in ("p1", "p3")}
    epoch = s.sql("SELECT epoch FROM leases WHERE table_id = %s", (T,))[0][0]
    s.sql("REVOKE INSERT ON events FROM dealer_node")  # node-a's journal refuses every write from now on
    a_rows = s.sql("SELECT count(*) FROM events WHERE node = 'node-a'")[0][0]
    mark = len(s.rec.messages)
    t0 = time.monotonic()
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p3", "action": "PLAY"})
    await wait_until(lambda: a.said(UNWRITABLE), timeout=START, what=f"node-a's commit failing\n{a.tail()}")
    node, took = await s.served_by_other("node-a", mark, "node-b taking the table node-a cannot write")
    assert node == "node-b"
    assert await a.writable() == 0.0  # node-a still cannot write: it let the table go, not the fault
    assert a.said(GAVE_UP) and a.said("table dropped", table_id=T)
    assert s.sql("SELECT leaving FROM nodes WHERE node = 'node-a'")[0][0] is True  # placed on nobody now
    # the round goes on at node-b: both decisions get a full new window and are the players' own
    for p in ("p1", "p3"):
        again = await wait_until(lambda: [m for m in s.private(p, "decision_required", mark)
                                          if m["data"].get("resumed")], what=f"{p}'s decision given again")
        assert again[-1]["data"]["closes_at"] > asked[p]
    res = await finish_round(s, mark, ("p1", "p3"))
    assert res["decisions"]["p1"]["by"] == "player" and res["decisions"]["p3"]["by"] == "player"
    # node-a's writes come back: it serves again and takes the table back between rounds (its first choice)
    s.sql("GRANT INSERT ON events TO dealer_node")
    healed = time.monotonic()
    await until_writable(a, "node-a's journal writable again")
    await wait_until(lambda: s.sql("SELECT leaving FROM nodes WHERE node = 'node-a'")[0][0] is False,
                     timeout=START, what="node-a serving again")
    mark = len(s.rec.messages)
    await play_round(s, 2)  # node-b ends the round in play, then hands the table over
    back, _ = await s.served_by_other("node-b", mark, "node-a taking the table back")
    assert back == "node-a"
    # never a row of node-a under the lease it gave up: its held decision was dropped, not written late
    assert s.sql("SELECT count(*) FROM events WHERE node = 'node-a' AND epoch = %s", (epoch,))[0][0] == a_rows
    await wait_until(lambda: s.rows_by()[-1][0] == "node-a", timeout=START, what="node-a journaling the table")
    runs = epochs_in_order(s)
    assert [r[0] for r in runs] == ["node-a", "node-b", "node-a"], runs
    report("a node that cannot write", gave_up_after=took, back_after_fix=time.monotonic() - healed,
            unwritable_for=healed - t0)
