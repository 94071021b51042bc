"""Table leases between nodes on a real PostgreSQL (dealer/edge/leases.py): placement over
live nodes, takeover after a crash with the next epoch and the database's fence, handover at
once on shutdown (NOTIFY), rebalancing between rounds, preferences, refused starts, and a
database that stops answering.

Leases are short (1 s) so a takeover after expiry takes about a second; tests wait for
what they expect (``wait_until``) and assert on the order of events, never on durations.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest

from dealer.core.placement import place
from dealer.edge.config import ClusterSection
from dealer.edge.leases import LeaseError, LeaseManager
from simulators.pgserver import PgServer
from tests.conftest import wait_until
from tests.harness_leases import FAST, SIX, Clock, Node, leases, nodes, sql, start, with_schema, write_event  # noqa: F401  (nodes: the fixture)

async def test_tables_are_split_by_placement(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a")
    await wait_until(lambda: a.held() == set(SIX), what="a alone takes every table")
    b = await start(nodes, url, "b")
    await wait_until(lambda: len(a.held()) == 3 and len(b.held()) == 3, what="three tables each")
    assert a.held().isdisjoint(b.held())
    rows = await leases(url)
    holders = {t: n for t, (n, _) in rows.items()}
    assert {t for t, n in holders.items() if n == "a"} == a.held()
    assert place(SIX, ["a", "b"], current=holders) == holders  # where placement wants them: it settles
    moved = {x for k, x, _ in b.events if k == "adopt"}
    assert all(r == "handover to b" for _, r in a.drops()) and {x for x, _ in a.drops()} == moved
    assert all(e == 2 for t, (_, e) in rows.items() if t in moved)  # a had epoch 1, b took the next


async def test_a_crashed_nodes_tables_are_taken_after_expiry_and_its_epoch_is_fenced(
        pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a")
    b = await start(nodes, url, "b")
    await wait_until(lambda: len(a.held()) == 3 and len(b.held()) == 3, what="three tables each")
    lost = a.m.held()
    t = sorted(lost)[0]
    await write_event(url, t, "a", lost[t])  # a may write its table while it holds the lease
    told = len(a.drops())
    await a.kill()
    await wait_until(lambda: b.held() == set(SIX), what="b takes a's tables once their leases expire")
    for x, e in lost.items():
        assert b.m.epoch(x) == e + 1
        assert ("adopt", x, e + 1) in b.events
    assert len(a.drops()) == told  # a crashed: it was told nothing
    with pytest.raises(psycopg.Error) as refused:
        await write_event(url, t, "a", lost[t])
    assert refused.value.sqlstate == "DL001" and "fenced" in str(refused.value)
    await write_event(url, t, "b", lost[t] + 1)  # the new owner writes
    reasons = b.m.metrics.acquisitions
    assert sum(reasons.labels(x, r)._value.get() for x in lost for r in ("expired", "orphaned")) == 3


async def test_release_all_hands_tables_over_at_once(pg: str, nodes: list[Node]) -> None:
    """Renewal every 29 s, leases of 60 s: only NOTIFY can move tables within the wait."""
    url = await with_schema(pg)
    slow = ClusterSection(lease_seconds=60, renew_seconds=29)
    a = await start(nodes, url, "a", cluster=slow)
    await wait_until(lambda: a.held() == set(SIX), what="a alone takes every table")
    b = await start(nodes, url, "b", cluster=slow)
    await wait_until(lambda: len(a.held()) == 3 and len(b.held()) == 3, timeout=20,
                     what="b's join (NOTIFY) makes a hand three tables over")
    expiring = dict(await sql(url, "SELECT table_id, expires_at FROM leases WHERE node = 'a'"))
    await a.m.release_all()
    assert {x for x, r in a.drops() if r == "shutdown"} == set(expiring)
    assert a.held() == set() and not any(a.m.valid(t) for t in SIX)
    await wait_until(lambda: b.held() == set(SIX), timeout=20, what="b takes a's tables on its NOTIFY")
    taken = dict(await sql(url, "SELECT table_id, acquired_at FROM leases WHERE table_id = ANY(%s)",
                           (list(expiring),)))
    assert all(taken[t] < expiring[t] for t in expiring)  # taken while a's old leases still ran
    assert (await sql(url, "SELECT leaving FROM nodes WHERE node = 'a'")) == [(True,)]


async def test_a_joining_node_gets_tables_only_between_rounds(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a")
    b = await start(nodes, url, "b")
    await wait_until(lambda: len(a.held()) == 3 and len(b.held()) == 3, what="three tables each")
    a.busy = set(a.held())  # every table of a has a round in play
    told = len(a.drops())
    c = await start(nodes, url, "c")
    await wait_until(lambda: len(c.held()) == 1, what="b hands one table over to c")
    asked = len(a.idle_asked)
    await wait_until(lambda: len(a.idle_asked) > asked + 3, what="a keeps asking whether its round ended")
    assert len(a.held()) == 3 and len(a.drops()) == told  # still dealing all three: the rounds go on
    a.busy = set()
    a.m.poke()
    await wait_until(lambda: len(c.held()) == 2, what="a hands one over once idle")
    assert sorted(len(n.held()) for n in (a, b, c)) == [2, 2, 2]
    assert not a.dropped_busy and a.drops()[told:] == [(a.drops()[told][0], "handover to c")]


async def test_a_round_that_does_not_end_is_handed_over_after_the_wait(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    cluster = ClusterSection(lease_seconds=1.0, renew_seconds=0.25, handover_wait_seconds=0.5)
    a = await start(nodes, url, "a", tables=["t1", "t2"], cluster=cluster)
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes both")
    a.busy = {"t1", "t2"}
    b = await start(nodes, url, "b", tables=["t1", "t2"], cluster=cluster)
    await wait_until(lambda: len(b.held()) == 1, what="a hands one over mid-round after the wait")
    assert len(a.dropped_busy) == 1 and a.drops() == [(a.dropped_busy[0], "handover to b")]


async def test_preferred_nodes_are_honoured(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    tables = ["t1", "t2", "t3", "t4"]
    prefs = {"t1": ["b"], "t2": ["z", "b"]}  # z is never live
    a = await start(nodes, url, "a", tables=tables, preferred=prefs)
    await wait_until(lambda: a.held() == set(tables), what="b is not live: a takes every table")
    b = await start(nodes, url, "b", tables=tables, preferred=prefs)
    await wait_until(lambda: b.held() == {"t1", "t2"}, what="b takes the tables that prefer it")
    assert a.held() == {"t3", "t4"}


async def test_a_clock_far_off_is_refused(pg: str) -> None:
    url = await with_schema(pg)
    m = LeaseManager(url, node_id="a", session="s", tables=SIX, cluster=FAST, wall=lambda: time.time() + 10)
    with pytest.raises(LeaseError) as e:
        await m.start()
    msg = str(e.value)
    assert "\n" not in msg and "this node's clock reads" in msg and "the database's reads" in msg
    assert "max_clock_skew_seconds = 2" in msg
    assert await sql(url, "SELECT * FROM nodes") == []  # refused before registering


async def test_a_second_process_with_the_same_node_id_is_refused(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a", session="first")
    await wait_until(lambda: a.held() == set(SIX), what="a takes every table")
    twin = Node(url, "a", session="second")
    nodes.append(twin)
    with pytest.raises(LeaseError, match=r"node a is already running \(session first, heard .* s ago\)"):
        await twin.m.start()
    assert a.held() == set(SIX)
    await a.kill()  # a crash, then the service manager restarts it
    epochs = a.m.held()
    await twin.start()  # waits until the crashed session falls silent, then takes the row over
    await wait_until(lambda: twin.held() == set(SIX), what="the restarted node takes its tables again")
    assert all(twin.m.epoch(t) == e + 1 for t, e in epochs.items())


async def test_an_unreachable_database_or_one_without_schema_is_refused_in_one_line(pg: str) -> None:
    from tests.conftest import free_port
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    with pytest.raises(LeaseError, match=r"^cannot reach the lease database 127\.0\.0\.1:\d+/nowhere: ") as e:
        await LeaseManager(url, node_id="a", session="s", tables=SIX, cluster=FAST).start()
    assert "\n" not in str(e.value)
    with pytest.raises(LeaseError, match="has no dealer schema"):
        await LeaseManager(pg, node_id="a", session="s", tables=SIX, cluster=FAST).start()


async def test_a_paused_node_wakes_with_every_lease_invalid(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    clock = Clock()
    a = await start(nodes, url, "a", monotonic=clock)
    await wait_until(lambda: a.held() == set(SIX) and all(a.m.valid(t) for t in SIX), what="a takes every table")
    before = a.m.held()
    clock.offset += 30  # the process was stopped 30 s: its leases ran out while it slept
    assert not any(a.m.valid(t) for t in SIX)  # before any word with the database
    await wait_until(lambda: len(a.drops()) == 6, what="a steps down from every table")
    await wait_until(lambda: all(a.m.epoch(t) == before[t] + 1 for t in SIX) and all(a.m.valid(t) for t in SIX),
                     what="a takes them again, under new epochs, once the old leases expired")


async def test_check_now_drops_a_table_taken_behind_our_back(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a", tables=["t1", "t2"])
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes both")
    await sql(url, "INSERT INTO nodes (node, session, started_at, heartbeat_at) VALUES ('b', 'x', now(), now())")
    await sql(url, "UPDATE leases SET node = 'b', epoch = epoch + 1 WHERE table_id = 't1'")
    assert await a.m.check_now() == {"t1"}
    assert not a.m.valid("t1") and a.m.valid("t2")
    assert a.drops() == [("t1", "fenced: the lease is no longer ours")]
    assert await a.m.check_now() == set()


async def test_a_lease_held_by_an_unknown_node_is_reported_and_taken_once_expired(
        pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    await sql(url, "INSERT INTO leases VALUES ('t1', 'ghost', 7, clock_timestamp() + interval '1 second', now())")
    a = await start(nodes, url, "a", tables=["t1", "t2"])
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes t2 at once, t1 once ghost's lease expired")
    assert a.m.epoch("t1") == 8
    assert a.m.metrics.unknown_holders.labels("t1")._value.get() == 1
    assert a.m.metrics.acquisitions.labels("t1", "expired")._value.get() == 1
    assert a.events.index(("adopt", "t2", 1)) < a.events.index(("adopt", "t1", 8))


async def test_a_database_that_stops_answering_steps_the_node_down_until_it_is_back(
        pg_private: PgServer, nodes: list[Node]) -> None:
    url = await with_schema(pg_private.create_database("leases"))
    a = await start(nodes, url, "a", tables=["t1", "t2"])
    await wait_until(lambda: a.held() == {"t1", "t2"} and a.m.valid("t1"), what="a takes both")
    before = a.m.held()
    pg_private.pause()
    try:
        await wait_until(lambda: len(a.drops()) == 2, what="a steps down when its leases run out locally")
        assert all("database unreachable" in str(r) for _, r in a.drops())
        assert not a.m.valid("t1") and not a.m.valid("t2") and a.held() == set()
        await wait_until(lambda: a.m.metrics.renew_failures._value.get() > 0, what="a renewal failed")
        assert a.m.metrics.database_up._value.get() == 0
        # and it waits for the database without spinning: it once looked again at every turn of
        # the event loop (a whole core); a few passes per renewal attempt is right
        passes = 0
        sleep = a.m._sleep

        async def counted() -> bool:
            nonlocal passes
            passes += 1
            return await sleep()
        a.m._sleep = counted  # type: ignore[method-assign]
        failed = a.m.metrics.renew_failures._value.get()
        await wait_until(lambda: a.m.metrics.renew_failures._value.get() >= failed + 2, what="two more renewals fail")
        assert passes < 100, f"{passes} placement passes over two failed renewals with the database away"
    finally:
        pg_private.resume()
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes its tables again")
    assert all(a.m.epoch(t) == before[t] + 1 for t in before) and a.m.valid("t1")
    assert a.task is not None and not a.task.done()  # run() never raised


async def test_a_node_whose_row_another_session_took_steps_down_and_stops(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = await start(nodes, url, "a", tables=["t1", "t2"])
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes both")
    await sql(url, "UPDATE nodes SET session = 'intruder' WHERE node = 'a'")  # a's id started elsewhere
    await wait_until(lambda: a.task is not None and a.task.done(), what="a's run() ends")
    with pytest.raises(LeaseError, match=r"node a was started again elsewhere \(session intruder\)"):
        a.task.result()
    assert a.held() == set() and sorted(a.drops()) == [("t1", "node superseded by session intruder"),
                                                        ("t2", "node superseded by session intruder")]


async def test_lease_metrics_are_served_with_the_services_metrics(pg: str, nodes: list[Node]) -> None:
    from prometheus_client import generate_latest

    from dealer.edge.metrics import Metrics
    url = await with_schema(pg)
    metrics = Metrics()
    a = await start(nodes, url, "a", tables=["t1"], metrics=metrics)
    await wait_until(lambda: a.held() == {"t1"}, what="a takes t1")
    await wait_until(lambda: a.m.metrics.statement.labels("renew")._sum.get() > 0, what="a renewal")
    text = generate_latest(metrics.registry).decode()
    for line in ('dealer_table_lease_held{table="t1"} 1.0', 'dealer_lease_epoch{table="t1"} 1.0',
                 'dealer_lease_acquisitions_total{reason="placement",table="t1"} 1.0',
                 "dealer_cluster_nodes_live 1.0", "dealer_lease_renew_failures_total 0.0",
                 "dealer_lease_database_up 1.0", "dealer_clock_skew_seconds "):
        assert line in text, line


async def test_a_table_that_fails_to_adopt_is_released_and_taken_again_later(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    a = Node(url, "a", tables=["t1", "t2"])
    nodes.append(a)
    a.fail_adopt = {"t1"}
    await a.start()
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes t1 again after its backoff")
    assert a.drops("t1") == [("t1", "adopting it failed: cannot replay t1")]
    assert [e for k, x, e in a.events if k == "adopt" and x == "t1"] == [1, 2]
    assert a.m.metrics.losses.labels("t1", "adopt_failed")._value.get() == 1


async def test_run_ends_when_cancelled_even_as_it_is_woken(pg: str, nodes: list[Node]) -> None:
    """Python 3.11's wait_for swallows a cancellation that lands as its event is set: the
    placement loop would go on for ever after a crash-like cancel."""
    url = await with_schema(pg)
    a = await start(nodes, url, "a", tables=["t1"])
    await wait_until(lambda: a.held() == {"t1"}, what="a takes t1")
    await asyncio.sleep(0.05)  # the placement loop is asleep, waiting for a wake-up
    a.m.poke()
    await a.kill()
    assert a.task is not None and a.task.cancelled()


_STALLED_LOOP = """
import asyncio, contextlib, sys, time
import psycopg, uvloop
from dealer.edge import leases

async def main() -> None:
    loop = asyncio.get_running_loop()
    cut = 0
    for i in range(8):
        conn = await psycopg.AsyncConnection.connect(sys.argv[1], autocommit=True)
        # The loop stalls past the deadline (a SIGSTOP as the process sees it): psycopg's
        # 0.1 s re-registration and the deadline then run in the same turn.
        loop.call_later(0.05 + 0.01 * i, time.sleep, 0.5)
        try:
            await leases._bounded(conn.execute("SELECT pg_sleep(3)"), 0.3, conn, "stalled")
        except leases._Unreachable:
            cut += 1
        for _ in range(500):  # the cut statement ends within a few loop turns; then it is closed
            if conn.closed:
                break
            await asyncio.sleep(0.01)
        assert conn.closed, "a cut connection is closed once its statement has ended"
    print("cut", cut)

uvloop.run(main())
"""


def test_a_deadline_after_a_stalled_loop_cuts_the_statement_without_aborting_uvloop(pg: str) -> None:
    """A node resumed after SIGSTOP used to die with SIGABRT inside libuv: the deadline closed
    the socket in the same loop turn as psycopg re-registered it. Eight stalls in a real
    uvloop process on a real server: each statement is cut, the process lives."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", _STALLED_LOOP, pg], capture_output=True, text=True,
                       timeout=120, cwd=root)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["cut", "8"]
    assert "Traceback" not in r.stderr and "never retrieved" not in r.stderr, r.stderr[-2000:]


async def test_renewals_and_commits_of_many_tables_never_deadlock(pg: str, nodes: list[Node]) -> None:
    """A node's lease renewal locks every lease row it holds; its journal's commits lock the
    rows of their tables (the fence, FOR SHARE). Taken in different orders the two deadlock: at
    1,000 tables the benchmark saw PostgreSQL abort one or the other within seconds, and an
    aborted renewal stops the node's tables. Both lock in table order now: commits of every
    table in reverse order, back to back, beside renewals every 50 ms, deadlock never."""
    from dealer.core.events import CloseBetting
    from dealer.edge.journal import Batch
    from dealer.edge.journal_pg import PgJournal

    url = pg
    journal = PgJournal(url, node_id="a")  # makes the schema (and its meta row)
    tables = [f"t{i:03d}" for i in range(300)]
    a = await start(nodes, url, "a", tables=tables, cluster=ClusterSection(lease_seconds=5.0, renew_seconds=0.05))
    await wait_until(lambda: a.held() == set(tables), what="a takes every table")
    epochs = {t: e for t, (_n, e) in (await leases(url)).items()}
    errors: list[str] = []

    def hammer() -> None:
        for _ in range(60):
            order = tables[::-1] if _ % 2 == 0 else tables[150:] + tables[:150]
            try:
                journal.commit(Batch(events=[(t, None, CloseBetting()) for t in order], epochs=epochs))
            except Exception as exc:  # noqa: BLE001 (what a deadlock would raise: said below)
                errors.append(str(exc)[:300])
    try:
        await asyncio.to_thread(hammer)
    finally:
        journal.close()
    assert not [e for e in errors if "deadlock" in e], errors[:3]
    assert errors == [], errors[:3]
    assert a.drops() == [] and a.held() == set(tables), a.drops()[:5]
    assert a.m.metrics.renew_failures._value.get() == 0  # no renewal was aborted either


async def test_a_thousand_table_node_releases_every_lease_at_shutdown(pg: str, nodes: list[Node]) -> None:
    """The release's NOTIFY named every table; PostgreSQL refuses a payload of 8,000 bytes or
    more, so a 1,000-table node's release failed and its tables waited out their leases. The
    payload names the tables only while they fit."""
    url = await with_schema(pg)
    tables = [f"table-{i:04d}" for i in range(1000)]
    a = await start(nodes, url, "a", tables=tables, cluster=ClusterSection(lease_seconds=60, renew_seconds=5))
    await wait_until(lambda: a.held() == set(tables), what="a takes every table")
    await a.m.release_all()
    assert {n for n, _e in (await leases(url)).values()} == {None}  # every lease free at once
    assert len(a.m._payload("release", tables).encode()) < 8000 and "table-0001" in a.m._payload("release", tables[:5])
