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
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dealer.edge import topics
from tests.conftest import wait_until
from tests.harness import ROOT, dealer_env
from tests.harness_failover import (DEAL, LEASE, POSITIONS, START, T, Studio, epochs_in_order, first_node, one_result,
                                    report, studio)  # noqa: F401  (studio: the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


# -- (a) kill -9 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("studio", [{"nodes": ["node-a", "node-b", "node-c"]}], indirect=True)
async def test_a_killed_owner_mid_deal_and_then_mid_decision_another_node_resumes_fairly(studio: Studio) -> None:
    s = studio
    await first_node(s, "node-a")
    await s.antes()
    await s.deal(DEAL[:4], POSITIONS[:4])
    await wait_until(lambda: s.expects(POSITIONS[4]), what="NEXT P3.2")  # the 4th card is journaled
    mark = len(s.rec.messages)
    s.nodes["node-a"].kill()
    second, kill1 = await s.served_by_other("node-a", mark, "another node after the kill")
    first = next(m for t, m in s.rec.messages[mark:] if t == topics.table_topic(T, "prompts"))
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
    res = await one_result(s)
    assert res["decisions"]["p1"] == {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "10"}
    assert res["decisions"]["p3"]["by"] == "timeout"  # folded by the new window's timer, not by the outage
    # the result (outbox relay) may arrive before the table's state carrying the same batch's events
    made = await wait_until(lambda: [e for e in s.rec.events("decision_made") if e["data"]["player_id"] == "p3"],
                            what="p3's decision_made on the table's state")
    opened = [e for e in s.rec.events("decisions_open") if e["data"].get("resumed")]
    # after the new window (its timer runs on the monotonic clock: a millisecond of rounding either way)
    assert made and opened and made[-1]["at"] >= opened[-1]["data"]["closes_at"] - 5
    assert made[-1]["at"] > asked[0]["data"]["closes_at"]  # not at the old deadline
    runs = epochs_in_order(s)
    assert [r[0] for r in runs] == ["node-a", second, third], runs
    report("kill -9 mid-deal", failover=kill1)
    report("kill -9 mid-decision", failover=kill2)


# -- (b) SIGSTOP past the lease, SIGCONT ---------------------------------------------------------------


async def test_b_a_paused_owner_resumed_after_the_takeover_writes_and_publishes_nothing(studio: Studio) -> None:
    s = studio
    a = s.nodes["node-a"]
    await first_node(s, "node-a")
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
    await one_result(s)
    runs = epochs_in_order(s)
    assert runs[0][0] == "node-a" and runs[1][0] == "node-b", runs
    report("SIGSTOP past the lease", failover=took, paused=resumed_after)


# -- (c) SIGTERM -------------------------------------------------------------------------------------------


async def test_c_sigterm_hands_the_table_over_at_once(studio: Studio) -> None:
    s = studio
    a = s.nodes["node-a"]
    await first_node(s, "node-a")
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
    first = next(m for t, m in s.rec.messages[mark:] if t == topics.table_topic(T, "prompts") and m["kind"] == "NEXT")
    assert (first["round_id"], first["position"]) == (s.round_id(1), POSITIONS[2])
    await s.deal(DEAL[2:], POSITIONS[2:])
    await wait_until(lambda: s.private("p1", "decision_required"), what="decision required")
    await s.rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
    await wait_until(lambda: s.rec.results(f"{T}:{s.round_id(1)}"), timeout=30, what="the result")
    await one_result(s)
    epochs_in_order(s)
    report("SIGTERM", failover=took, exit=time.monotonic() - t0)


# -- (d) the owner loses the database ------------------------------------------------------------------------


@pytest.mark.parametrize("studio", [{"decision_seconds": 2.0}], indirect=True)  # the fault lands inside it
@pytest.mark.parametrize("fault", ["pause", "kill"])
async def test_d_the_database_lost_past_the_lease_stops_the_table_and_it_comes_back(studio: Studio,
                                                                                    fault: str) -> None:
    s = studio
    a = s.nodes["node-a"]
    await first_node(s, "node-a")
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
    res = await one_result(s)
    assert res["decisions"]["p1"]["by"] == "player"
    epochs_in_order(s)
    report(f"database {fault}", step_down=stepped, outage=outage, back_after_database=took)


# -- refused starts ------------------------------------------------------------------------------------------


async def test_e_a_cluster_node_refuses_to_start_in_one_line(studio: Studio, tmp_path: Path) -> None:
    """An unreachable database, and a node id that is already running, each stop ``dealer run``
    with one line and exit 2 (before it touches the broker)."""
    from simulators.broker import free_port

    s = studio
    a = s.nodes["node-a"]
    await first_node(s, "node-a")
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
