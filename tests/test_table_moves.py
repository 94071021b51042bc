"""Tables come and go on a running service (dealer/edge/ownership.py): a table dropped mid-deal
and adopted again resumes at the same position with fair windows, says nothing while it is away
and refuses what is sent to it; a journal that fences one table's rows has only that table's
items refused and dropped, the rest committed; a lease that is not valid holds back every output
of its table. SQLite journals and a real Mosquitto; the ownership here is a small stand-in for
the lease manager (the seam only: the leases themselves are tested with PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from dealer.core.events import CloseBetting, PlaceBet
from dealer.core.messages import RoundEvent, StationPrompt
from dealer.core.round import Phase
from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.edge.commit_loop import TABLE_MOVED
from dealer.edge.journal import Batch, Fenced, Journal, JournalWriteFailed, OutboxRow
from dealer.edge.ownership import StaticOwnership
from dealer.edge.service import Service
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from tests.conftest import Broker, wait_until
from tests.harness import HandShoe, Recorder, round_id, start_service, stop_service
from tests.harness_moves import ManualOwnership, running

S = "S1"  # sevenluck on a serial shoe: decisions
T = "T2"  # teen-patti, the table that stays
INPUT_LEAVES = ("actions", "station", "supervisor", "scanner", "results/ack")


class FencingJournal(Journal):
    """The real SQLite journal, which refuses one batch holding a given table the way the
    PostgreSQL journal's fencing trigger does (nothing of the batch written)."""

    fence: str | None = None
    epochs_seen: list[dict[str, int]]

    def commit(self, batch: Batch) -> list[OutboxRow]:
        self.epochs_seen.append(dict(batch.epochs))
        if self.fence is not None and any(t == self.fence for t, _r, _e in batch.events):
            tid, self.fence = self.fence, None
            raise Fenced(f"fenced: table {tid} is leased to another node", tid)
        return super().commit(batch)


def _sevenluck(tmp: Path, url: str, port: str) -> Any:
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "node_id": "node-a"},
        mqtt={"url": url, "client_id": "backend-moves"},
        tables=[{"id": S, "game": "sevenluck", "betting_seconds": 1.0, "pause_seconds": 0.1, "decision_seconds": 1.0,
                 "options": {"seats": 3},
                 "scanner": {"kind": "serial", "port": port, "reader_id": "SC7", "heartbeat_timeout": 30}},
                {"id": T, "game": "teen-patti", "auto_rounds": False,
                 "scanner": {"kind": "mqtt", "reader_id": "GW2", "heartbeat_timeout": 600}}])


def _out(rec: Recorder, table: str, since: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """What the backend published for ``table`` (not the commands the recorder itself sent)."""
    return [(t, m) for t, m in rec.messages[since:]
            if topics.table_of(t) == table and not any(t.endswith("/" + leaf) for leaf in INPUT_LEAVES)]


def _private(rec: Recorder, player: str, kind: str, since: int = 0) -> list[dict[str, Any]]:
    return [m for t, m in rec.messages[since:] if t == topics.player(S, player) and m["kind"] == kind]


async def _deal(service: Service, rec: Recorder, shoe: HandShoe, codes: list[str]) -> None:
    for code in codes:
        n = len(service.tables[S].current.cards)
        await wait_until(lambda: rec.last_prompt() and rec.last_prompt()["kind"] in ("NEXT", "RESCAN"),
                         what="deal prompt")
        shoe.scan(code)
        await wait_until(lambda: len(service.tables[S].current.cards) == n + 1, what="card registered")


async def test_a_table_dropped_and_adopted_again_resumes_at_its_position_and_gives_full_windows(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir, reader="SC7")
    rec = await Recorder(broker.url).start()
    service, task = await start_service(_sevenluck(tmp_path, broker.url, shoe.path))
    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        for bet, player, seat in (("a1", "p1", 1), ("a3", "p3", 3)):
            await rec.command(topics.actions(S), {"type": "place_bet", "bet_id": bet, "player_id": player,
                                                  "bet_type": "ante", "stake": "10", "seat": seat})
        await wait_until(lambda: len(rec.events("bet_accepted")) == 2, what="bets accepted")
        await wait_until(lambda: service.tables[S].current.phase == Phase.BETTING_CLOSED, what="betting closed")
        deal = ["AS", "2H", "2C", "AD", "5D", "3C", "AC", "9S", "4C"]  # P1 P3 D, three times
        await _deal(service, rec, shoe, deal[:4])
        position = service.tables[S].current.expected_position
        assert position is not None

        # -- 1. dropped mid-deal: an item still queued is refused, nothing is said for the table
        queued = service.submit(S, CloseBetting(by="dealer"))
        await service.drop(S, "handover")
        assert (await queued).rejection.reason == TABLE_MOVED
        assert S not in service.tables and T in service.tables
        assert service.metrics.table_owned.labels(table=S)._value.get() == 0
        await wait_until(lambda: any(m["stale"] for t, m in rec.messages if t == topics.state(S) and m),
                         what="retained state marked stale at the handover")
        seen = len(rec.messages)
        refused = await service.submit(S, PlaceBet(bet_id="x", player_id="p1", bet_type="ante", stake="10", seat=1))
        assert not refused.accepted and refused.rejection.reason == TABLE_MOVED
        await rec.command(topics.actions(S), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        assert (await service.open_round(T)).accepted  # the other table goes on
        await wait_until(lambda: any(e["round_id"] and e["round_id"].startswith(T) for e in rec.events("round_opened")),
                         what="the other table's round")
        await asyncio.sleep(0.5)
        assert _out(rec, S, seen) == [], "published for a table this node does not own"

        # -- 2. adopted again: same round, same position; the deal goes on
        await service.adopt(S, 0)
        assert service.tables[S].current.expected_position == position
        await wait_until(lambda: rec.expects(position, round_id(service, 1, S)), what="NEXT at the same position")
        await wait_until(lambda: service.links[S].ready, what="the shoe's reader open again")  # a card before is lost
        await _deal(service, rec, shoe, deal[4:])
        first = await wait_until(lambda: _private(rec, "p1", "decision_required"), what="decision required")

        # -- 3. dropped while players decide, away longer than the window: nobody is timed out
        await service.drop(S, "lease_lost")
        seen = len(rec.messages)
        await asyncio.sleep(2.5)
        assert _out(rec, S, seen) == [], "published for a table this node does not own"
        await service.adopt(S, 0)
        again = await wait_until(lambda: [m for m in _private(rec, "p1", "decision_required", seen)
                                          if m["data"].get("resumed")], what="p1's decision given again")
        assert again[-1]["data"]["closes_at"] > first[0]["data"]["closes_at"] + 2000
        assert service.tables[S].current.phase == Phase.DECISION and service.tables[S].current.decisions == {}
        await rec.command(topics.actions(S), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        key = f"{S}:{round_id(service, 1, S)}"
        await wait_until(lambda: rec.results(key), timeout=20, what="result")
        res = rec.results(key)[0]
        assert res["decisions"]["p1"]["by"] == "player"
        assert res["decisions"]["p3"] == {"action": "FOLD", "by": "timeout", "seat": 3, "play_stake": None}
        # the result (outbox relay) may arrive before the table's state carrying the same batch's events
        made = await wait_until(lambda: [e for e in rec.events("decision_made") if e["data"]["player_id"] == "p3"],
                                what="p3's decision_made on the table's state")
        opened = [e for e in rec.events("decisions_open") if e["data"].get("resumed")]
        assert made and opened and made[0]["at"] >= opened[-1]["data"]["closes_at"]  # only after the new window
        await asyncio.sleep(0.3)
        assert len(rec.results(key)) == 1
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()
    journal = Journal(tmp_path / "journal.sqlite")
    try:
        resumes = [json.loads(r.body) for r in journal.rows(S) if r.type == "resume"]
        assert [r["reason"] for r in resumes][-1] == "table taken over by node node-a"
        assert not [r for r in journal.rows(S) if r.type == "close_betting" and json.loads(r.body)["by"] == "dealer"]
    finally:
        journal.close()


def _two_tables(tmp: Path, **service: Any) -> Any:
    return load_settings(
        service={"journal_path": tmp / "j.sqlite", "metrics_enabled": False} | service,
        tables=[{"id": t, "game": "teen-patti", "auto_rounds": False, "betting_seconds": 60,
                 "scanner": {"kind": "mqtt", "reader_id": f"GW{t}"}} for t in ("T1", "T2")])


async def test_a_fenced_commit_refuses_and_drops_only_the_lost_table_and_commits_the_rest(tmp_path: Path) -> None:
    settings = _two_tables(tmp_path)
    journal = FencingJournal(settings.service.journal_path)
    journal.epochs_seen = []
    own = ManualOwnership(["T1", "T2"], epoch=7)
    service = Service(settings, bus=LocalBus(), broker_link=False, journal=journal, ownership=own)
    published: list[Any] = []
    service.add_observer(lambda kind, msg: published.append(msg))
    async with running(service):
        o1, o2 = service.open_round("T1"), service.open_round("T2")  # one batch: every table with its epoch
        assert (await o1).accepted and (await o2).accepted
        assert journal.epochs_seen[-1] == {"T1": 7, "T2": 7}
        journal.fence = "T1"
        own.lose_on_check = {"T1"}
        published.clear()
        # both bets in one batch: the journal refuses it for T1's sake
        b1 = service.submit("T1", PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="5"))
        b2 = service.submit("T2", PlaceBet(bet_id="b2", player_id="p2", bet_type="player_a", stake="5"))
        s1, s2 = await b1, await b2
        assert not s1.accepted and s1.rejection.reason == TABLE_MOVED
        assert s2.accepted
        assert own.checks == 1 and "T1" not in service.tables and "T2" in service.tables
        assert service.metrics.journal_fenced.labels(table="T1")._value.get() == 1
        assert journal.epochs_seen[-2:] == [{"T1": 7, "T2": 7}, {"T2": 7}]  # refused, then the rest alone
        assert "b2" in service.tables["T2"].current.bets
        assert not [m for m in published if getattr(m, "table_id", None) == "T1"], "an effect of T1 went out"
        assert any(isinstance(m, RoundEvent) and m.event == "bet_accepted" and m.table_id == "T2" for m in published)
        refused = await service.submit("T1", CloseBetting())
        assert refused.rejection.reason == TABLE_MOVED
    j = Journal(tmp_path / "j.sqlite")
    try:
        bets = [r.table_id for r in j.rows() if r.type == "place_bet"]
        assert bets == ["T2"], "a fenced table's row was written"
    finally:
        j.close()


async def test_a_lease_that_is_not_valid_holds_back_every_output_of_its_table_until_it_is(tmp_path: Path) -> None:
    settings = _two_tables(tmp_path)
    own = ManualOwnership(["T1", "T2"])
    service = Service(settings, bus=LocalBus(), broker_link=False, ownership=own)
    published: list[Any] = []
    service.add_observer(lambda kind, msg: published.append(msg))
    async with running(service):
        own.invalid.add("T1")  # a node resumed after a pause past its lease: it has not asked the database yet
        published.clear()
        step = await service.open_round("T1")  # SQLite cannot fence: applied, and kept quiet
        assert step.accepted
        assert (await service.open_round("T2")).accepted
        assert not [m for m in published if getattr(m, "table_id", None) == "T1"]
        assert [m for m in published if getattr(m, "table_id", None) == "T2"]
        assert service.metrics.output_suppressed.labels(kind="effects")._value.get() >= 1
        own.invalid.clear()  # the lease was this node's after all (renewed late): the table speaks again
        await wait_until(lambda: any(isinstance(m, StationPrompt) and m.table_id == "T1" for m in published),
                         what="T1's prompt after its lease is valid again")


async def test_the_default_ownership_is_every_configured_table_at_epoch_0(tmp_path: Path) -> None:
    settings = _two_tables(tmp_path)
    service = Service(settings, bus=LocalBus(), broker_link=False)
    assert isinstance(service.ownership, StaticOwnership) and service.tables == {}
    async with running(service):
        assert sorted(service.tables) == ["T1", "T2"] and service.ownership.held() == {"T1": 0, "T2": 0}
        assert (await service.open_round("T1")).accepted
        assert service.idle("T2") and not service.idle("T1")
        assert (await service.submit("T9", CloseBetting())).rejection.reason.startswith("unknown table 'T9'")


async def test_the_mqtt_bus_subscribes_and_unsubscribes_while_connected(broker: Broker) -> None:
    bus = MqttBus(broker.url, client_id="dynamic")
    pub = MqttBus(broker.url, client_id="dynamic-pub")
    got: list[str] = []
    tasks = [asyncio.create_task(bus.run()), asyncio.create_task(pub.run())]
    try:
        await bus.wait_connected()
        await pub.wait_connected()
        bus.subscribe("x/a", lambda t, p: got.append(p.decode()))
        await wait_until(lambda: _delivered(pub, "x/a", "1", got), what="delivered after a runtime subscribe")
        bus.unsubscribe("x/a")
        await bus.settled()  # the UNSUBSCRIBE is acknowledged: nothing is routed from now on
        n = len(got)
        await pub.publish("x/a", b"2")
        bus.subscribe("x/b", lambda t, p: got.append(p.decode()))
        await wait_until(lambda: _delivered(pub, "x/b", "3", got), what="the other topic")
        assert "2" not in got[n:]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _delivered(pub: MqttBus, topic: str, text: str, got: list[str]) -> bool:
    """Publish ``text`` (again) until it has arrived: the SUBSCRIBE may still be on its way."""
    if text in got:
        return True
    asyncio.get_running_loop().create_task(pub.publish(topic, text.encode()))
    return False


async def test_postgresql_fences_a_table_taken_over_by_another_node_and_only_it_is_dropped(pg: str) -> None:
    """The database itself refuses the rows of a table whose lease moved on (the fencing trigger):
    the service drops that table, refuses its items and commits the other table's rows."""
    import psycopg

    from dealer.edge.journal_pg import PgJournal

    settings = _two_tables(Path("."), node_id="node-a", journal_url=pg)
    journal = PgJournal(pg, node_id="node-a", fsync=False)
    with psycopg.connect(pg, autocommit=True) as c:
        for t in ("T1", "T2"):
            c.execute("INSERT INTO leases (table_id, node, epoch, expires_at, acquired_at) VALUES "
                      "(%s, 'node-a', 1, clock_timestamp() + interval '1 hour', clock_timestamp())", (t,))
    own = ManualOwnership(["T1", "T2"], epoch=1)
    service = Service(settings, bus=LocalBus(), broker_link=False, journal=journal, ownership=own)  # type: ignore[arg-type]
    published: list[Any] = []
    service.add_observer(lambda kind, msg: published.append(msg))
    async with running(service):
        o1, o2 = service.open_round("T1"), service.open_round("T2")
        assert (await o1).accepted and (await o2).accepted
        with psycopg.connect(pg, autocommit=True) as c:  # node-b takes T1 over
            c.execute("UPDATE leases SET node = 'node-b', epoch = 2, acquired_at = clock_timestamp() "
                      "WHERE table_id = 'T1'")
        own.lose_on_check = {"T1"}
        published.clear()
        b1 = service.submit("T1", PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="5"))
        b2 = service.submit("T2", PlaceBet(bet_id="b2", player_id="p2", bet_type="player_a", stake="5"))
        s1, s2 = await b1, await b2
        assert s1.rejection.reason == TABLE_MOVED and s2.accepted
        assert "T1" not in service.tables and own.checks == 1
        assert service.metrics.journal_fenced.labels(table="T1")._value.get() == 1
        assert not [m for m in published if getattr(m, "table_id", None) == "T1"]
    with psycopg.connect(pg, autocommit=True) as c:
        rows = c.execute("SELECT table_id, node, epoch FROM events WHERE type = 'place_bet' ORDER BY id").fetchall()
    assert rows == [("T2", "node-a", 1)]


async def test_a_table_adopted_again_hears_its_scanner_gateway_again(tmp_path: Path) -> None:
    """The reader's session and link start over with the table: its next frame reports the link
    up (else the table, adopted again, would wait for a link it never hears of) and reads reach it."""
    from simulators.shoe import VirtualShoe
    from simulators.station import MqttShoeLink

    settings = _two_tables(tmp_path)
    bus = LocalBus()
    service = Service(settings, bus=bus, broker_link=False)
    task = asyncio.create_task(service.run())
    shoe, gateway = VirtualShoe("GWT1"), MqttShoeLink(bus, "T1")
    link = "scanner:GWT1"
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        await gateway.send([shoe.boot(), shoe.heartbeat()])
        await wait_until(lambda: service.links["T1"].up.get(link) is True, what="the reader heard")
        await service.drop("T1", "handover")
        await gateway.send([shoe.heartbeat()])  # nobody here takes it
        await service.adopt("T1", 0)
        assert service.links["T1"].up[link] is None
        await gateway.send([shoe.heartbeat()])
        await wait_until(lambda: service.links["T1"].up.get(link) is True, what="the reader heard again")
        assert (await service.open_round("T1")).accepted
        assert (await service.submit("T1", CloseBetting(by="dealer"))).accepted
        await gateway.send([shoe.scan("AS")])
        await wait_until(lambda: service.tables["T1"].current.cards, what="the card registered")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class StallingJournal(Journal):
    """The real SQLite journal, whose commits fail (as a journal server's do while it restarts)
    for as long as ``failing`` is set: the commit loop holds its batch and retries it."""

    failing = False

    def commit(self, batch: Batch) -> list[OutboxRow]:
        if self.failing:
            raise JournalWriteFailed("the database is restarting", "database_unreachable")
        return super().commit(batch)


async def test_input_queued_under_one_lease_is_never_applied_under_the_next(tmp_path: Path) -> None:
    """A node's commit hangs on a restarting database; meanwhile an input for T1 comes in under
    lease epoch 7, T1's lease lapses and the same node takes the table again at epoch 8 (drop,
    then adopt: a replay). When the commit goes through, the commit loop reaches the input: it
    was meant for the table as it was under epoch 7, so it is refused (table moved), never
    applied under epoch 8. An input sent after the retake is applied."""
    settings = _two_tables(tmp_path)
    journal = StallingJournal(settings.service.journal_path)
    own = ManualOwnership(["T1", "T2"], epoch=7)
    service = Service(settings, bus=LocalBus(), broker_link=False, journal=journal, ownership=own)
    service.commit_loop.commit_retry = (0.05, 0.05)
    async with running(service):
        journal.failing = True
        held = service.open_round("T2")  # its batch is held: the commit fails and is retried
        await wait_until(lambda: not service.journal_writable, what="the held batch")
        early = service.open_round("T1")  # came in under epoch 7, queued behind the held batch
        await service.drop("T1", "lease_lost")
        own.epochs["T1"] = 8
        await service.adopt("T1", 8)
        assert "T1" in service.tables and not early.done()
        journal.failing = False
        assert (await held).accepted
        step = await early
        assert not step.accepted and step.rejection.reason == TABLE_MOVED
        assert service.tables["T1"].current is None, "a round opened from input of the earlier lease"
        assert service.metrics.stale_inputs.labels(table="T1")._value.get() == 1
        assert (await service.open_round("T1")).accepted  # sent again, under epoch 8: applied
    j = Journal(tmp_path / "j.sqlite")
    try:
        opened = [r.table_id for r in j.rows() if r.type == "open_round"]
        assert sorted(opened) == ["T1", "T2"], opened
    finally:
        j.close()


class HangingJournal(Journal):
    """The real SQLite journal behind an async commit (as a journal server's) that hangs until
    ``gate`` opens and then fails once: a commit caught by a database restart."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = asyncio.Event()
        self.hang = False
        self.epochs_seen: list[dict[str, int]] = []

    async def commit_async(self, batch: Batch) -> list[OutboxRow]:
        if self.hang:
            await self.gate.wait()
            self.hang = False
            raise JournalWriteFailed("the database restarted under the commit", "database_unreachable")
        self.epochs_seen.append(dict(batch.epochs))
        return self.commit(batch)


async def test_a_batch_held_while_its_table_is_taken_again_is_never_written_under_the_new_epoch(
        tmp_path: Path) -> None:
    """T1's open_round is applied under lease epoch 7 and its commit hangs (the database
    restarts). The lease lapses, T1 is dropped and taken again by the same node at epoch 8
    (replayed: no round). When the commit fails and is retried, the held rows belong to the
    epoch-7 table that no longer exists: they are refused, never written under epoch 8 (which
    would open a round in the journal that the replayed table in memory does not have)."""
    settings = _two_tables(tmp_path)
    journal = HangingJournal(settings.service.journal_path)
    own = ManualOwnership(["T1", "T2"], epoch=7)
    service = Service(settings, bus=LocalBus(), broker_link=False, journal=journal, ownership=own)
    service.commit_loop.commit_retry = (0.05, 0.05)
    async with running(service):
        journal.hang = True
        opening = service.open_round("T1")
        await wait_until(lambda: "T1" in service.commit_loop.batch_tables, what="T1's batch in the commit")
        own.invalid.add("T1")  # its lease lapsed: the drop does not wait for the hanging commit
        await service.drop("T1", "lease_lost")
        own.invalid.discard("T1")
        own.epochs["T1"] = 8
        await service.adopt("T1", 8)
        assert service.tables["T1"].current is None
        journal.gate.set()
        step = await opening
        assert not step.accepted and step.rejection.reason == TABLE_MOVED
        assert service.tables["T1"].current is None
        assert (await service.open_round("T1")).accepted  # the table under epoch 8 deals on
        assert journal.epochs_seen[-1] == {"T1": 8}
    j = Journal(tmp_path / "j.sqlite")
    try:
        opened = [r.table_id for r in j.rows() if r.type == "open_round"]
        assert opened == ["T1"], f"rows of the epoch-7 table written: {opened}"
    finally:
        j.close()


async def test_a_table_waiting_to_be_handed_over_opens_no_new_round_until_the_hold_lapses(tmp_path: Path) -> None:
    """The lease manager asks ``idle`` while a handover waits; from then on the table opens no
    automatic round (the round in play ends and the table moves at once, instead of waiting for
    a pause between rounds to be seen). A handover called off lets the hold lapse: rounds again."""
    settings = load_settings(
        service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
        tables=[{"id": "T1", "game": "teen-patti", "auto_rounds": True, "pause_seconds": 0.1,
                 "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])
    service = Service(settings, bus=LocalBus(), broker_link=False, ownership=ManualOwnership(["T1"]))
    async with running(service):
        links = service.links["T1"]
        for link in links.up:
            links.up[link] = True
        assert service.tables["T1"].current is None and service.idle("T1")  # asked: held from now
        service.timers._auto_open("T1")
        await asyncio.sleep(0)
        assert service.tables["T1"].current is None, "a round opened on a table about to move"
        assert service.timers.armed["T1"][0][0] == "open"  # looked at again when the hold lapses
        service.tables.round_holds["T1"] = 0.0  # the handover was called off: nobody asks any more
        service.timers._auto_open("T1")
        await wait_until(lambda: service.tables["T1"].current is not None, what="the next round")
