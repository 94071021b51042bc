"""Sevenluck Poker tables end to end: real Mosquitto, real PTY or MQTT gateway, simulated
dealer, players and settlement."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.core.cards import STANDARD_52
from dealer.core.round import Phase
from dealer.edge.service import Service
from drivers.mqtt import MqttBus
from simulators.players import VirtualPlayer
from simulators.pty_port import PtyPort
from simulators.settlement import SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import MqttShoeLink, PtyShoeLink, VirtualDealer
from tests.conftest import Broker, wait_until
from tests.harness import HandShoe, Recorder, round_id, start_service, stop_service
from tests.harness_sevenluck import T, deal_cards, private, resumed, sevenluck_settings, two_antes

@pytest.mark.parametrize("transport", ["pty", "mqtt"])
@pytest.mark.timeout(180)
async def test_full_rounds_with_players_faults_and_a_disconnecting_player(broker: Broker, tmp_path: Path,
                                                                          pty_dir: Path, transport: str):
    port = PtyPort(pty_dir, "shoe") if transport == "pty" else None
    scanner = ({"kind": "serial", "port": port.path, "reader_id": "SC7", "heartbeat_timeout": 5} if port
               else {"kind": "mqtt", "reader_id": "SC7", "heartbeat_timeout": 5})
    service = Service(sevenluck_settings(tmp_path, broker.url, scanner), bus=MqttBus(broker.url, client_id="be"))
    sim = MqttBus(broker.url, client_id="sim")
    rec = await Recorder(broker.url).start()
    rng = random.Random(7)
    link = PtyShoeLink(port) if port else MqttShoeLink(sim, T)
    dealer = VirtualDealer(T, VirtualShoe("SC7"), link, deck=STANDARD_52, rng=rng,
                           faults=FaultPlan(noread=0.08, misread=0.03, drop=0.03, garbage=0.03),
                           deal_interval=0.01, heartbeat_interval=0.2, patience=0.5)
    dealer.subscribe(sim)
    consumer = SettlementConsumer(sim, [T], tmp_path / "ledger.sqlite", rng=random.Random(3), game="sevenluck")
    players = {"player1": VirtualPlayer(T, "player1", sim, "q64"),
               "player2": VirtualPlayer(T, "player2", sim, "random", rng=random.Random(5)),
               "player3": VirtualPlayer(T, "player3", sim, "disconnect")}
    tasks = [asyncio.create_task(service.run()), asyncio.create_task(sim.run())]
    await sim.wait_connected()
    await wait_until(lambda: service.bus.connected, what="backend connected")
    tasks.append(asyncio.create_task(dealer.run()))
    try:
        await wait_until(lambda: len(consumer.applied_keys()) >= 4, timeout=150, what="four settled rounds")
        # the recorder has their results too, so (one publisher's order) every event before them
        await wait_until(lambda: all(rec.results(k) for k in consumer.applied_keys()[:4]), what="recorded")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await rec.stop()
        if port:
            port.close()
    results = [json.loads(json.dumps(consumer.applied_result(k))) for k in consumer.applied_keys()[:4]]
    assert all(r["outcome"] == "COMPLETED" for r in results)
    assert consumer.mismatches == [] and consumer.duplicates == 0
    assert sum(dealer.faults_injected.values()) > 0
    # the silent player was folded by the timer whenever it had an Ante to decide on
    timed_out = [r["decisions"]["player3"] for r in results if "player3" in r["decisions"]]
    assert timed_out and all(d == {"action": "FOLD", "by": "timeout", "seat": 3, "play_stake": None} for d in timed_out)
    assert all(d["by"] == "player" for r in results for p, d in r["decisions"].items() if p != "player3")
    # visibility: hole cards only on their owner's topic; nothing face down on public topics
    for topic, msg in rec.messages:
        owner = topic.split("/")[5] if "/players/" in topic else ""
        if "/players/" in topic and msg.get("kind") == "hole_card":
            assert msg["player_id"] == owner and msg["data"]["position"].startswith(f"P{owner[-1]}.")
        if "/players/" in topic and topic.endswith("/state") and msg:  # the retained private state: its own only
            assert msg["player_id"] == owner and all(p.startswith(f"P{owner[-1]}.") for p in msg["cards"]), msg
        if topic.endswith("/events") and msg["event"] == "card_registered":
            assert msg["data"]["card"] is None
    # the dealer's cards are revealed only after every decision of the round
    for r in results:
        order = [m["event"] for t, m in rec.messages if t.endswith("/events") and m["round_id"] == r["round_id"]]
        assert order.index("cards_revealed") > max(i for i, e in enumerate(order) if e in ("decision_made", "decisions_open"))
    for p in ("player1", "player2"):
        assert all(m.data["position"].startswith(f"P{p[-1]}.") for m in players[p].messages if m.kind == "hole_card")


async def test_player_actions_are_answered_on_the_players_own_topic(broker: Broker, tmp_path: Path, pty_dir: Path):
    shoe = HandShoe(pty_dir, reader="SC7")
    rec = await Recorder(broker.url).start()
    scanner = {"kind": "serial", "port": shoe.path, "reader_id": "SC7", "heartbeat_timeout": 30}
    service, task = await start_service(sevenluck_settings(tmp_path, broker.url, scanner, betting_seconds=1.5,
                                                           decision_seconds=30))
    act = topics.actions(T)

    def replies(player: str, kind: str) -> list[dict]:
        return [m for t, m in rec.messages if t == topics.player(T, player) and m["kind"] == kind]

    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        await rec.command(act, {"type": "place_bet", "bet_id": "a1", "player_id": "p1", "bet_type": "ante",
                                "stake": "10", "seat": 1})
        await rec.command(act, {"type": "place_bet", "bet_id": "a2", "player_id": "p2", "bet_type": "ante",
                                "stake": "10", "seat": 1})  # the wrong seat: taken
        await rec.command(act, {"type": "player_decision", "player_id": "p1", "action": "PLAY"})  # wrong phase
        await rec.command(act, {"type": "player_decision", "player_id": "p1", "action": "play!"})  # malformed
        await wait_until(lambda: replies("p1", "bet_accepted") and replies("p2", "rejected")
                         and len(replies("p1", "rejected")) >= 2, what="replies")
        assert "seat 1 is taken" in replies("p2", "rejected")[0]["data"]["reason"]
        reasons = " | ".join(m["data"]["reason"] for m in replies("p1", "rejected"))
        assert "takes no decisions" in reasons and "malformed action" in reasons
        assert not replies("p1", "hole_card") and replies("p2", "bet_accepted") == []
        for code in ["7S", "QH", "7D", "JH", "7C", "TH"]:  # P1.1 D.1 P1.2 D.2 P1.3 D.3
            n = len(service.tables[T].current.cards)
            await wait_until(lambda: rec.last_prompt() and rec.last_prompt()["kind"] in ("NEXT", "RESCAN"),
                             what="deal prompt")
            shoe.scan(code)
            await wait_until(lambda: len(service.tables[T].current.cards) == n + 1, what="card registered")
        await wait_until(lambda: replies("p1", "decision_required"), what="decision required")
        assert [m["data"]["card"] for m in replies("p1", "hole_card")] == ["7S", "7D", "7C"]
        assert replies("p2", "hole_card") == []  # p2 has no seat, and never sees p1's cards
        await rec.command(act, {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        await rec.command(act, {"type": "player_decision", "player_id": "p1", "action": "FOLD"})  # duplicated
        key = f"{T}:{round_id(service, 1, T)}"
        await wait_until(lambda: rec.results(key), what="result")
        # p1 was the only decider, so PLAY completed the round: the repeat is refused either way
        await wait_until(lambda: any(("already chose PLAY" in m["data"]["reason"] or "takes no decisions while RESULT"
                                      in m["data"]["reason"]) for m in replies("p1", "rejected")),
                         what="duplicate decision rejected")
        res = rec.results(key)[0]
        assert res["decisions"]["p1"]["action"] == "PLAY" and res["player_bets"]["p1"]["ante"]["bonus_ratio"] == "4"
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_broker_lost_during_decisions_longer_than_the_window_nobody_is_folded(broker: Broker, tmp_path: Path,
                                                                                    pty_dir: Path):
    """Players cannot decide while the broker is down: the decision timer is paused, and when
    the broker returns every undecided player gets a full window, told on their own topic."""
    shoe = HandShoe(pty_dir, reader="SC7")
    rec = await Recorder(broker.url).start()
    scanner = {"kind": "serial", "port": shoe.path, "reader_id": "SC7", "heartbeat_timeout": 30}
    service, task = await start_service(sevenluck_settings(tmp_path, broker.url, scanner, betting_seconds=1.0,
                                                           decision_seconds=1.0))
    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        await two_antes(rec)
        await wait_until(lambda: service.tables[T].current.phase == Phase.BETTING_CLOSED, what="betting closed")
        await deal_cards(service, rec, shoe, ["AS", "2H", "2C", "AD", "5D", "3C", "AC", "9S", "4C"])  # P1 P3 D, x3
        first = await wait_until(lambda: private(rec, "p1", "decision_required"), what="decision required")
        first_p3 = await wait_until(lambda: private(rec, "p3", "decision_required"), what="p3 decision required")
        broker.kill()
        await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down")
        await asyncio.sleep(2.5)  # longer than the decision window
        rnd = service.tables[T].current
        assert rnd.phase == Phase.DECISION and rnd.decisions == {}, "somebody was decided for while the broker was down"
        armed = service.timers.armed.get(T)
        assert armed is None or armed[0][0] != "decide"
        seen = len(rec.messages)
        broker.start()
        await wait_until(lambda: service.bus.connected and rec.bus.connected, what="everyone reconnected")
        for player, before in (("p1", first), ("p3", first_p3)):
            again = await wait_until(lambda: resumed(rec, player, seen), what=f"{player}'s decision given again")
            assert again[-1]["data"]["closes_at"] > before[0]["data"]["closes_at"] + 2000
            assert again[-1]["data"]["actions"] == before[0]["data"]["actions"]
        # protocol 2: a player's own topic may arrive before the table's state carrying the batch's events
        opened = await wait_until(lambda: [e for e in rec.events("decisions_open") if e["data"].get("resumed")],
                                  what="the resumed decisions_open on the table's state")
        assert opened and opened[-1]["data"]["players"] == ["p1", "p3"]
        for p in ("p1", "p3"):  # besides the resume, at most the broker's redelivery of the first request
            assert all(m["data"].get("resumed") or m["at"] < again[-1]["at"] for m in private(rec, p, "decision_required"))
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        key = f"{T}:{round_id(service, 1, T)}"  # p3 stays silent: the new window's timer folds it
        await wait_until(lambda: rec.results(key), what="result")
        res = rec.results(key)[0]
        assert res["decisions"]["p1"] == {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "10"}
        assert res["decisions"]["p3"]["action"] == "FOLD" and res["decisions"]["p3"]["by"] == "timeout"
        # the result (outbox relay) may arrive before the table's state carrying the same batch's events
        made = await wait_until(lambda: [e for e in rec.events("decision_made") if e["data"]["player_id"] == "p3"],
                                what="p3's decision_made on the table's state")
        assert made and made[0]["at"] >= opened[-1]["data"]["closes_at"]  # only after the new window
        assert len(rec.results(key)) == 1
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_backend_down_longer_than_the_decision_window_gives_a_new_window(broker: Broker, tmp_path: Path,
                                                                               pty_dir: Path):
    """The backend stops while a player decides and stays down longer than the window: on
    restart the player is not folded, is told of a full new window, and can still PLAY. A player
    who had decided keeps the decision and is not asked again."""
    shoe = HandShoe(pty_dir, reader="SC7")
    rec = await Recorder(broker.url).start()
    scanner = {"kind": "serial", "port": shoe.path, "reader_id": "SC7", "heartbeat_timeout": 30}
    # a pause long enough that round 2 never opens between round 1's result and the stop below
    settings = sevenluck_settings(tmp_path, broker.url, scanner, betting_seconds=1.0, decision_seconds=1.5,
                                  pause_seconds=1.0)
    service, task = await start_service(settings)
    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        await two_antes(rec)
        await wait_until(lambda: service.tables[T].current.phase == Phase.BETTING_CLOSED, what="betting closed")
        await deal_cards(service, rec, shoe, ["AS", "2H", "QH", "AD", "5D", "JH", "AC", "9S", "3H"])  # p1: three aces
        first = await wait_until(lambda: private(rec, "p1", "decision_required"), what="decision required")
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p3", "action": "PLAY"})
        await wait_until(lambda: private(rec, "p3", "decision_accepted"), what="p3 decided")
        await stop_service(task)  # the backend goes down while p1 decides
        await asyncio.sleep(2.5)  # longer than the decision window
        seen = len(rec.messages)
        service, task = await start_service(settings)
        again = await wait_until(lambda: resumed(rec, "p1", seen), timeout=15, what="p1's decision given again")
        assert again[0]["data"]["resumed"] is True and again[0]["data"]["closes_at"] > first[0]["data"]["closes_at"] + 2000
        assert all(m["data"].get("resumed") or m["at"] < again[0]["at"] for m in private(rec, "p1", "decision_required"))
        rnd = service.tables[T].current
        assert rnd.phase == Phase.DECISION and set(rnd.decisions) == {"p3"}  # not folded at once
        assert not private(rec, "p3", "decision_required", seen)
        # the public decisions_open rides on the table's state, published after the batch's private messages
        opened = await wait_until(lambda: [m for t, m in rec.messages[seen:]
                                           if t == topics.events(T) and m["event"] == "decisions_open"],
                                  what="the resumed decisions_open on the table's state")
        assert opened[0]["data"] == {"players": ["p1"], "closes_at": again[0]["data"]["closes_at"], "resumed": True}
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        key = f"{T}:{round_id(service, 1, T)}"
        await wait_until(lambda: rec.results(key), what="result")
        res = rec.results(key)[0]
        assert res["decisions"]["p1"] == {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "10"}
        assert res["decisions"]["p3"]["by"] == "player"
        assert res["player_bets"]["p1"]["ante"]["outcome"] == "WIN"
        # the new deadline is journaled: a replay of the journal rebuilds the same round
        await stop_service(task)
        replayed = Service(settings, bus=MqttBus(broker.url, client_id="replay-only"))
        try:
            replayed.commit_loop.replay()
            assert replayed.tables[T].current.round_id == round_id(replayed, 1, T)
            assert replayed.tables[T].current.decisions == rnd.decisions
            assert replayed.tables[T].current.decision_deadline == again[0]["data"]["closes_at"]
        finally:
            replayed.writer.shutdown(wait=True)
            replayed.journal.close()
        service, task = await start_service(settings)
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()
