"""Seven-Card Stud tables end to end: the real service, a real Mosquitto, the real PTY serial
shoe, remote players on their own topics (the test itself, or :class:`StudPlayer`), and the
dealer station (the test itself, or :class:`VirtualDealer`)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.cards import STANDARD_52
from dealer.edge.config import load_settings
from dealer.core.messages import RoundResult, StationPrompt
from dealer.core.round import Phase
from dealer.edge.service import Service
from dealer.core.settlement import settle_bet
from drivers.mqtt import MqttBus
from simulators.pty_port import PtyPort
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import PtyShoeLink, VirtualDealer
from simulators.stud_players import StudPlayer, choose
from tests.conftest import Broker, wait_until
from dealer.edge.signing import sign_command
from tests.harness import PeerTable, Recorder, RecordingReader, play_unattended, secret_file, served_table, strings
from tests.harness_cli import run_cli, supervisor_cli
from tests.harness_stud import DEAL_A, conserved

T = "ST1"
READER = "SC9"
ACT = topics.actions(T)


#: The supervisor sup-ana's signing key at every stud table here (``tmp/sup-ana.key``).
SUP_KEY = bytes(range(100, 132))


def stud_settings(tmp: Path, url: str, port: str, **table: Any):
    cfg: dict[str, Any] = {
        "id": T, "game": "stud", "betting_seconds": 60, "pause_seconds": 0.1, "action_seconds": 60,
        "options": {"seats": 4},
        "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 30},
    }
    cfg.update(table)
    key = secret_file(tmp / "sup-ana.key", SUP_KEY.hex())
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"url": url, "client_id": "backend-stud"}, tables=[cfg],
                         security={"supervisors": [{"id": "sup-ana", "key_files": [str(key)]}]})



class Table(PeerTable):
    """The stud table: the players bet amounts (``act``)."""

    async def act(self, player: str, action: str, amount: str | None = None, *,
                  turn: dict[str, Any] | None = None) -> dict[str, Any]:
        data = turn if turn is not None else await self.turn(player)
        assert action in data["actions"], (player, action, data)
        n = len(self.mine(player, "action_accepted"))
        await self.rec.command(ACT, {"type": "player_action", "player_id": player, "action": action,
                                     "amount": amount, "round_id": self.rnd.round_id if self.rnd else None})
        await wait_until(lambda: len(self.mine(player, "action_accepted")) > n, what=f"{player} {action} accepted")
        return data


@pytest.fixture
async def table(broker: Broker, tmp_path: Path, pty_dir: Path, request: pytest.FixtureRequest):
    extra = getattr(request, "param", {})
    async with served_table(lambda service, rec, shoe, _: Table(service, rec, shoe), broker.url, pty_dir, READER,
                            lambda port: stud_settings(tmp_path, broker.url, port, **extra)) as t:
        yield t


# -- (a) a full hand to showdown -------------------------------------------------------------

DOWN_A = {code for pos, code in DEAL_A if pos.endswith((".1", ".2", ".7"))}
BURNS_A = {code for pos, code in DEAL_A if pos.startswith("BURN")}


@pytest.mark.timeout(120)
async def test_a_scripted_hand_to_showdown_with_a_side_pot(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (1, "20.00"), "bob": (2, "20.00"), "carol": (4, "2.00")})
    await t.confirm("WASH")  # hand 1: wash, then shuffle
    await t.confirm("SHUFFLE")
    await t.deal(*DEAL_A[:9])
    # 3rd street: the low card (2 of clubs, seat 4) must bring in: no check, no fold
    bring = await t.turn("carol")
    assert "BRING_IN" in bring["actions"] and "CHECK" not in bring["actions"] and "FOLD" not in bring["actions"]
    assert bring["street"] == "3rd" and bring["bet"] == {"min": "0.50", "max": "1.99"}  # 2.00 is her all-in
    await t.act("carol", "BRING_IN", "0.50", turn=bring)
    await t.act("alice", "RAISE", "1.00")
    await t.act("bob", "CALL")
    await t.act("carol", "CALL")
    await t.deal(*DEAL_A[9:13])
    # 4th street: Bob's pair of nines showing opens
    await t.act("bob", "BET", "1.00")
    short = await t.turn("carol")
    assert short["call"] is None and short["all_in"] == "1.00"  # calling takes her last chip: all-in (round total)
    await t.act("carol", "ALL_IN", turn=short)
    await t.act("alice", "RAISE", "2.00")
    await t.act("bob", "CALL")
    await t.deal(*DEAL_A[13:17])
    await t.act("bob", "CHECK")
    await t.act("alice", "BET", "3.00")
    await t.act("bob", "CALL")
    await t.deal(*DEAL_A[17:21])
    await t.act("bob", "CHECK")
    await t.act("alice", "CHECK")
    await t.deal(*DEAL_A[21:])
    await t.confirm("LAST_CARD")  # §3.5: no 7th card was exposed; betting opens at once
    seventh = await t.turn("bob")
    assert seventh["bet"] == {"min": "1.00", "max": "6.00"}  # the last bet: the limit is raised
    await t.act("bob", "BET", "2.00", turn=seventh)
    await t.act("alice", "RAISE", "4.00")
    await t.act("bob", "CALL")
    await wait_until(lambda: rec.results(table.key1), what="result")
    await wait_until(lambda: t.service.tables[T].undelivered == {}, what="result delivered")
    await wait_until(lambda: any(e["round_id"] == table.r2 for e in rec.events("round_opened")),
                     what="the next round")

    # the deal order: seat order street by street, a burn before 4th to 7th
    asked = []
    for p in rec.prompts():
        if p["round_id"] == table.r1 and p["kind"] in ("NEXT", "CONFIRM") and (not asked or asked[-1] != p["position"]):
            asked.append(p["position"])
    assert asked == ["WASH", "SHUFFLE"] + [pos for pos, _ in DEAL_A] + ["LAST_CARD"]
    steps = [p["step"] for p in rec.prompts() if p["round_id"] == table.r1 and p["kind"] in ("NEXT", "CONFIRM")]
    assert steps == sorted(steps) and steps[0] == 1 and steps[-1] == 2 + len(DEAL_A) + 1

    # bring-in and high hands, as the dealer announces them
    opened = [e["data"] for e in rec.events("betting_round_opened") if e["round_id"] == table.r1]
    assert [(o["street"], o["first"], o["announce"]) for o in opened] == [
        ("3rd", "carol", "Two of clubs, low"), ("4th", "bob", "Pair of nines high"),
        ("5th", "bob", "Pair of nines high"), ("6th", "bob", "Pair of nines high"),
        ("7th", "bob", "Pair of nines high")]
    waits = {p["announce"] for p in rec.prompts("WAIT") if p["round_id"] == table.r1}
    assert {"Two of clubs, low", "Pair of nines high"} <= waits

    # visibility: down cards to their owner only; nobody else, nothing public before the reveal
    owner = {"alice": 1, "bob": 2, "carol": 4}
    for player, seat in owner.items():
        holes = [(m["data"]["position"], m["data"]["card"]) for m in t.mine(player, "hole_card")]
        assert holes == [(p, c) for p, c in DEAL_A if p.startswith(f"P{seat}.") and p[-1] in "127"]
    reveal = next(i for i, (tp, m) in enumerate(rec.messages) if tp == topics.events(T) and m["event"] == "cards_revealed")
    for i, (tp, m) in enumerate(rec.messages):
        seen = set(strings(m))
        assert not seen & BURNS_A, (tp, m)  # burns: nobody, ever (the result excludes them too)
        if "/players/" in tp:
            me = tp.split("/")[5]  # .../players/{me} and its retained .../players/{me}/state
            others = {c for p, c in DEAL_A if p[-1] in "127" and p.startswith("P") and p[1] != str(owner.get(me, 0))}
            assert not seen & others, (tp, m)
        elif tp in (topics.events(T), topics.table_topic(T, "prompts")) and i < reveal:  # as the recorder lists them
            assert not seen & DOWN_A, (tp, m)
    ups = {e["data"]["position"]: e["data"]["card"] for e in rec.events("card_registered") if e["round_id"] == table.r1}
    assert {p: c for p, c in ups.items() if c} == {p: c for p, c in DEAL_A if p.startswith("P") and p[-1] in "3456"}
    assert rec.events("cards_revealed")[0]["data"]["cards"] == {p: c for p, c in DEAL_A if p.startswith("P")
                                                                and p[-1] in "127"}

    # the result: two pots, the rake from the main pot, exact returns, exactly one delivery
    assert len(rec.results(table.key1)) == 1
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "COMPLETED" and res["winner"] == "P4"
    d = res["details"]
    assert d["contributions"] == {"alice": "10.00", "bob": "10.00", "carol": "2.00"}
    assert d["total_pot"] == "22.00" and d["rake"] == "2.20" and d["raked"] is True
    assert [(p["amount"], p["eligible"], p["winners"]) for p in d["pots"]] == [
        ("3.80", ["alice", "bob", "carol"], ["carol"]), ("16.00", ["alice", "bob"], ["bob"])]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {
        "alice": "10.00", "bob": "26.00", "carol": "3.80"}
    assert {p: b["chips"]["outcome"] for p, b in res["player_bets"].items()} == {
        "alice": "LOSE", "bob": "WIN", "carol": "WIN"}
    best = {k: sorted(h["cards"]) for k, h in res["hands"].items()}  # every hand still in is shown
    assert best == {"P1": sorted(["AS", "AD", "KS", "KD", "QH"]), "P2": sorted(["9D", "9C", "9S", "JH", "8C"]),
                    "P4": sorted(["5H", "5S", "5D", "5C", "TS"])}
    assert d["showdown_order"] == ["P1", "P2", "P4"]  # Alice made the last raise: she shows first
    result = RoundResult.model_validate(res)
    assert settle_bet("chips", "20.00", result, "bob").returned == Decimal("26.00")
    assert settle_bet("chips", "2.00", result, "carol").net == Decimal("1.80")
    conserved(res, t.stakes)
    done = [p for p in rec.prompts("DONE") if p["round_id"] == table.r1]
    assert done and done[-1]["announce"].lower().startswith("four of a kind") and done[-1]["announce"].endswith("win")
    acted = [(e["data"]["player_id"], e["data"]["action"], e["data"]["total"]) for e in rec.events("player_acted")
             if e["round_id"] == table.r1]
    assert acted[:4] == [("carol", "BRING_IN", "0.50"), ("alice", "RAISE", "1.00"), ("bob", "CALL", "1.00"),
                         ("carol", "CALL", "1.00")]


# -- (b) a player goes silent mid-hand: the turn timer acts for them --------------------------

DEAL_B = [
    ("P1.1", "AH"), ("P2.1", "7S"), ("P4.1", "2S"), ("P1.2", "KH"), ("P2.2", "8S"), ("P4.2", "3S"),
    ("P1.3", "QC"), ("P2.3", "TD"), ("P4.3", "2H"),
    ("BURN1", "6C"), ("P1.4", "JD"), ("P2.4", "TH"), ("P4.4", "5D"),
    # Bob has folded: no more cards for seat 2
    ("BURN2", "6D"), ("P1.5", "3C"), ("P4.5", "9C"),
    ("BURN3", "6H"), ("P1.6", "4S"), ("P4.6", "9D"),
    ("BURN4", "6S"), ("P1.7", "8H"), ("P4.7", "JS"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table", [{"action_seconds": 1.0}], indirect=True)
async def test_b_a_silent_player_is_checked_then_folded_by_the_timer(table: Table, broker: Broker):
    t, rec = table, table.rec
    bus = MqttBus(broker.url, client_id="players")
    alice = StudPlayer(T, "alice", bus, "aggressive")
    bob = StudPlayer(T, "bob", bus, "disconnect", silent_after=1)
    carol = StudPlayer(T, "carol", bus, "calling")
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        await t.sit({"alice": (1, "30.00"), "bob": (2, "30.00"), "carol": (4, "30.00")})
        await t.confirm("WASH")
        await t.confirm("SHUFFLE")
        await t.deal(*DEAL_B[:13])
        await t.deal(*DEAL_B[13:])
        await wait_until(lambda: rec.results(table.key1), what="result")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    res = rec.results(table.key1)[0]
    acts = [(a["player_id"], a["action"], a["by"]) for a in res["details"]["actions"]]
    # 3rd: Carol (2 of hearts) brings in, Alice raises the most, Bob calls and then goes silent
    assert acts[:4] == [("carol", "BRING_IN", "player"), ("alice", "RAISE", "player"), ("bob", "CALL", "player"),
                        ("carol", "CALL", "player")]
    # 4th: Bob's tens open: the timer checks for him; Alice bets; the timer folds him
    assert acts[4:8] == [("bob", "CHECK", "timeout"), ("carol", "CHECK", "player"), ("alice", "BET", "player"),
                         ("bob", "FOLD", "timeout")]
    assert [a for a in acts if a[0] == "bob"][1:] == [("bob", "CHECK", "timeout"), ("bob", "FOLD", "timeout")]
    assert bob.ignored and len(bob.sent) == 1
    assert alice.rejected == [] and carol.rejected == [] and bob.rejected == []
    assert res["outcome"] == "COMPLETED" and "P2" not in res["hands"] and res["player_bets"]["bob"]["chips"]["outcome"] == "LOSE"
    assert res["player_bets"]["bob"]["chips"]["returned"] == "26.50"  # 30.00 less the 3.50 he called
    timeouts = [e["data"] for e in rec.events("player_acted") if e["data"]["by"] == "timeout"]
    assert [(d["player_id"], d["action"]) for d in timeouts] == [("bob", "CHECK"), ("bob", "FOLD")]
    # what the players saw of their own hands
    assert alice.cards(table.r1) == ["AH", "KH", "QC", "JD", "3C", "4S", "8H"]
    assert carol.cards(table.r1) == ["2S", "3S", "2H", "5D", "9C", "9D", "JS"]
    assert bob.cards(table.r1) == ["7S", "8S", "TD", "TH"]
    conserved(res, t.stakes)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("table", [{"action_seconds": 0.3}], indirect=True)
async def test_b_a_silent_bring_in_posts_the_minimum_then_is_folded(table: Table, broker: Broker):
    t, rec = table, table.rec
    bus = MqttBus(broker.url, client_id="players")
    StudPlayer(T, "alice", bus, "aggressive")
    bob = StudPlayer(T, "bob", bus, "disconnect", silent_after=0)  # silent from the start
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        await t.sit({"alice": (1, "10.00"), "bob": (2, "10.00")})
        await t.confirm("WASH")
        await t.confirm("SHUFFLE")
        await t.deal(("P1.1", "AH"), ("P2.1", "7S"), ("P1.2", "KH"), ("P2.2", "8S"), ("P1.3", "QC"), ("P2.3", "2D"))
        await wait_until(lambda: rec.results(table.key1), what="result")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    res = rec.results(table.key1)[0]
    assert [(a["player_id"], a["action"], a["total"], a["by"]) for a in res["details"]["actions"]] == [
        ("bob", "BRING_IN", "0.50", "timeout"), ("alice", "RAISE", "3.50", "player"), ("bob", "FOLD", "0.50", "timeout")]
    assert len(bob.ignored) == 2 and bob.sent == []
    assert [e["data"] for e in rec.events("uncalled_returned")] == [{"player_id": "alice", "amount": "3.00"}]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {"alice": "10.50", "bob": "9.50"}
    assert res["details"]["rake"] == "0" and res["hands"] == {} and res["winner"] == "P1"
    conserved(res, t.stakes)


# -- (c) faults: a no-read mid-street, the broker restarting mid-hand --------------------------

DEAL_C = [
    ("P1.1", "AS"), ("P2.1", "KS"), ("P4.1", "QS"), ("P1.2", "AH"), ("P2.2", "KH"), ("P4.2", "QH"),
    ("P1.3", "7C"), ("P2.3", "8C"), ("P4.3", "2C"),
    ("BURN1", "3D"), ("P1.4", "7D"), ("P2.4", "8D"), ("P4.4", "2D"),
    ("BURN2", "4D"), ("P1.5", "TC"), ("P2.5", "JC"), ("P4.5", "QC"),
    ("BURN3", "5D"), ("P1.6", "TD"), ("P2.6", "JD"), ("P4.6", "QD"),
    ("BURN4", "6D"), ("P1.7", "9H"), ("P2.7", "9S"), ("P4.7", "9D"),
]


@pytest.mark.timeout(150)
async def test_c_noread_and_a_broker_restart_during_a_betting_round(table: Table, broker: Broker):
    t, rec, service = table, table.rec, table.service
    await t.sit({"alice": (1, "20.00"), "bob": (2, "20.00"), "carol": (4, "1.00")})
    await t.confirm("WASH")
    await t.confirm("SHUFFLE")
    await t.deal(*DEAL_C[:9])
    await t.act("carol", "ALL_IN")  # the low card brings in all-in with her only chip
    await t.act("alice", "CALL")
    await t.act("bob", "CALL")
    await t.deal(*DEAL_C[9:11])
    # a no-read at P2.4: RESCAN, the deal stays there until the card registers
    await wait_until(lambda: rec.expects("P2.4", table.r1), what="NEXT P2.4")
    t.shoe.write(t.shoe.shoe.noread())
    await wait_until(lambda: any(p["position"] == "P2.4" for p in rec.prompts("RESCAN")), what="RESCAN P2.4")
    rescan = next(p for p in rec.prompts("RESCAN") if p["position"] == "P2.4")
    assert (rescan["reason"], rescan["count"], rescan["step"]) == ("noread", 1, 2 + 12)  # WASH, SHUFFLE, 11 cards, then P2.4
    assert t.rnd.expected_position == "P2.4" and "P2.4" not in t.rnd.cards
    await t.deal(*DEAL_C[11:13])
    # 4th street: Bob's eights open; the broker dies while it is his turn
    turn = await t.turn("bob")
    broker.kill()
    await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down")
    assert t.rnd.phase == Phase.ACTION and t.rnd.hand.betting.to_act == "bob"
    broker.start()
    await wait_until(lambda: service.bus.connected and rec.bus.connected, what="everyone reconnected")
    # the station is told again where the hand stands; the turn is still Bob's
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "WAIT" and "bob to act" in p["message"],
                     what="station resynced")
    # Bob could not act while the broker was down: his turn is given again, whole (same turn,
    # a fresh deadline), and the paused timer never folded him; his hole cards are re-sent too
    again = await wait_until(lambda: [m["data"] for m in t.mine("bob", "your_turn")
                                      if m["data"]["turn"] == turn["turn"] and m["data"]["closes_at"] > turn["closes_at"]],
                             what="bob's turn given again")
    assert again[-1]["actions"] == turn["actions"]
    assert not [e for e in rec.events("player_acted") if e["round_id"] == table.r1 and e["data"]["by"] == "timeout"]
    holes = [m["data"]["position"] for m in t.mine("bob", "hole_card")]
    assert holes.count("P2.1") >= 2 and holes.count("P2.2") >= 2
    await t.act("bob", "BET", "1.00", turn=turn)
    await t.act("alice", "CALL")
    await t.deal(*DEAL_C[13:17])
    await t.act("bob", "CHECK")  # 5th: Bob's pair of eights beats Alice's sevens and Carol's twos
    await t.act("alice", "CHECK")
    await t.deal(*DEAL_C[17:21])
    # 6th and 7th: Carol shows queens and twos, but she is all-in: the next seat (Alice) opens
    await t.act("alice", "CHECK")
    await t.act("bob", "CHECK")
    await t.deal(*DEAL_C[21:])
    await t.act("alice", "CHECK")
    await t.act("bob", "CHECK")
    await wait_until(lambda: rec.results(table.key1), what="result")
    await wait_until(lambda: service.tables[T].undelivered == {}, what="delivered")
    await wait_until(lambda: any(e["round_id"] == table.r2 for e in rec.events("round_opened")),
                     what="the next round")
    assert len(rec.results(table.key1)) == 1
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "COMPLETED" and res["details"]["contributions"] == {
        "alice": "2.00", "bob": "2.00", "carol": "1.00"}
    opened = [(e["data"]["street"], e["data"]["designated"], e["data"]["first"], e["data"]["announce"])
              for e in rec.events("betting_round_opened") if e["round_id"] == table.r1]
    assert opened[-2:] == [("6th", "carol", "alice", "Two pair, queens and twos high"),
                           ("7th", "carol", "alice", "Two pair, queens and twos high")]
    acted = [(e["data"]["player_id"], e["data"]["action"]) for e in rec.events("player_acted") if e["round_id"] == table.r1]
    assert ("bob", "BET") in acted and all(p != "carol" for p, _ in acted[1:])
    conserved(res, t.stakes)


@pytest.mark.timeout(150)
async def test_c_broker_down_at_the_end_the_result_waits_and_arrives_once(table: Table, broker: Broker):
    """Heads-up, one player all-in on 3rd: the rest is dealt without betting, so the hand ends
    on a scanned card, here while the broker is down."""
    t, rec, service = table, table.rec, table.service
    deal = [(p, c) for p, c in DEAL_C if not p.startswith("P4")]
    await t.sit({"alice": (1, "20.00"), "bob": (2, "1.00")})
    await t.confirm("WASH")
    await t.confirm("SHUFFLE")
    await t.deal(*deal[:6])
    await t.act("alice", "BRING_IN", "0.50")  # 7 of clubs is lower than the 8
    await t.act("bob", "ALL_IN")
    await t.act("alice", "CALL")
    await t.deal(*deal[6:9])
    # a no-read on 5th street, then the broker dies
    await wait_until(lambda: rec.expects("BURN2", table.r1), what="NEXT BURN2")
    t.shoe.write(t.shoe.shoe.noread())
    await wait_until(lambda: any(p["position"] == "BURN2" for p in rec.prompts("RESCAN")), what="RESCAN BURN2")
    await t.deal(*deal[9:10])
    broker.kill()
    await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down")
    await t.deal_blind(*deal[10:])  # the physical game goes on; the scanner is on serial
    await wait_until(lambda: t.rnd.phase == Phase.RESULT, what="hand over")
    await wait_until(lambda: service.outbox_pending == 1, what="result committed to the outbox")
    assert rec.results(table.key1) == []
    broker.start()
    await wait_until(lambda: rec.results(table.key1), what="result after the broker returns")
    await wait_until(lambda: service.tables[T].undelivered == {}, what="delivered")
    await wait_until(lambda: any(e["round_id"] == table.r2 for e in rec.events("round_opened")),
                     what="the next round")
    assert len(rec.results(table.key1)) == 1
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "COMPLETED" and res["cards"] == {p: c for p, c in deal if p.startswith("P")}
    assert res["details"]["total_pot"] == "2.00" and res["details"]["rake"] == "0.20"
    # Alice: aces and tens (three pairs: the best two) beat Bob's kings and jacks
    assert res["winner"] == "P1" and sorted(res["hands"]["P1"]["cards"]) == ["9H", "AH", "AS", "TC", "TD"]
    assert res["player_bets"] == {"alice": {"chips": {"outcome": "WIN", "ratio": "0", "category": None,
                                                      "bonus_ratio": "0", "returned": "20.80"}},
                                  "bob": {"chips": {"outcome": "LOSE", "ratio": "0", "category": None,
                                                    "bonus_ratio": "0", "returned": "0.00"}}}
    conserved(res, t.stakes)


# -- (d) bad actions are refused with a reason and change nothing ------------------------------


@pytest.mark.timeout(120)
async def test_d_malformed_out_of_turn_and_wrong_amount_actions_are_refused(table: Table):
    t, rec = table, table.rec
    deal = [(p, c) for p, c in DEAL_C if not p.startswith("P4")]
    await t.sit({"alice": (1, "20.00"), "bob": (2, "20.00")})
    await t.confirm("WASH")
    # a card passed before the shuffle is confirmed is not registered
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "CONFIRM" and p["position"] == "SHUFFLE",
                     what="CONFIRM SHUFFLE")
    t.shoe.scan("AS")
    await wait_until(lambda: rec.prompts("REJECTED"), what="card refused")
    assert "SHUFFLE is to be confirmed" in rec.prompts("REJECTED")[0]["message"] and t.rnd.cards == {}
    await t.confirm("SHUFFLE")
    await t.deal(*deal[:2])
    await t.refused("alice", {"type": "player_action", "player_id": "alice", "action": "CHECK"},
                    "no betting round is open")
    await t.deal(*deal[2:6])
    turn = await t.turn("alice")  # 7 of clubs: Alice brings in
    # spread limit: an all-in may not go past the largest legal bring-in, so with 20.00 there is none
    assert turn["actions"] == ["BRING_IN"] and turn["bet"] == {"min": "0.50", "max": "3.00"} and turn["all_in"] is None
    before = (t.rnd.turn, t.rnd.hand.betting.to_act, len(t.rnd.hand.betting.history), t.rnd.action_deadline)
    acted = len(rec.events("player_acted"))
    bad = [
        ("bob", {"action": "CALL"}, "it is not bob's turn (waiting for alice)"),
        ("alice", {"action": "CHECK"}, "CHECK is not allowed now (allowed: BRING_IN)"),
        ("alice", {"action": "FOLD"}, "FOLD is not allowed now"),
        ("alice", {"action": "BRING_IN"}, "BRING_IN needs an amount"),
        ("alice", {"action": "BRING_IN", "amount": "5.00"}, "BRING_IN must make it 0.50..3.00, not 5.00"),
        ("alice", {"action": "BRING_IN", "amount": "0.25"}, "must make it 0.50..3.00"),
        ("alice", {"action": "BRING_IN", "amount": "0.505"}, "not a whole number of 0.01"),
        ("alice", {"action": "BRING_IN", "amount": 0.5}, "never a float"),
        ("alice", {"action": "BRING_IN", "amount": "1e0"}, "malformed action"),
        ("alice", {"action": "ALL_IN"}, "ALL_IN is not allowed now"),
        ("alice", {"action": "SHOVE"}, "malformed action"),
        ("alice", {"action": "BRING_IN", "amount": "0.50", "round_id": f"{T}-000042"}, "action is for round"),
        ("alice", {"action": "BRING_IN", "amount": "0.50", "extra": 1}, "malformed action"),
        ("mallory", {"action": "BRING_IN", "amount": "0.50"}, "player mallory is not in this hand"),
    ]
    for player, fields, why in bad:
        await t.refused(player, {"type": "player_action", "player_id": player, **fields}, why)
    assert (t.rnd.turn, t.rnd.hand.betting.to_act, len(t.rnd.hand.betting.history), t.rnd.action_deadline) == before
    assert len(rec.events("player_acted")) == acted and t.rnd.phase == Phase.ACTION
    assert len(t.mine("alice", "your_turn")) == 1  # no new turn was opened
    assert t.mine("bob", "action_accepted") == [] and t.mine("alice", "action_accepted") == []
    await t.act("alice", "BRING_IN", "0.50", turn=turn)
    # a client names the running turn once it has heard of it (protocol 2: bob's your_turn or the
    # state carrying the public turn event may come a moment after alice's acceptance)
    await wait_until(lambda: rec.current_turn(T) > turn["turn"], what="the next turn heard of")
    await t.refused("alice", {"type": "player_action", "player_id": "alice", "action": "CALL"},
                    "it is not alice's turn")
    bob = await t.turn("bob")
    assert bob["raise"] == {"min": "1.00", "max": "3.50"} and bob["call"] == "0.50"
    await t.refused("bob", {"type": "player_action", "player_id": "bob", "action": "RAISE", "amount": "0.75"},
                    "RAISE must make it 1.00..3.50, not 0.75")
    await t.act("bob", "RAISE", "3.50", turn=bob)
    await t.act("alice", "FOLD")
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    # Bob's raise was not called: the 3.00 above Alice's 0.50 goes back to him; no rake before 7th
    # the result (outbox relay) may arrive before the table's state carrying the same batch's events
    returned = await wait_until(lambda: rec.events("uncalled_returned"), what="uncalled_returned on the state")
    assert [e["data"] for e in returned] == [{"player_id": "bob", "amount": "3.00"}]
    assert res["details"]["rake"] == "0" and res["details"]["raked"] is False and res["hands"] == {}
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {"alice": "19.50", "bob": "20.50"}
    assert "cards_revealed" not in [e["event"] for e in rec.events() if e["round_id"] == table.r1]
    conserved(res, t.stakes)


# -- (e) fewer than two players --------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_e_fewer_than_two_players_cancels_the_hand_with_a_refund(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (3, "25.00")})
    await wait_until(lambda: rec.results(table.key1), what="refund")
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "CANCELLED" and res["refund_all"] is True
    assert "at least 2 seated players, 1 sat down" in res["reason"]
    assert res["accepted_bets"] == {"count": 1, "stakes": {"chips": "25.00"}, "bet_ids": [f"{table.r1}-alice"]}
    s = settle_bet("chips", "25.00", RoundResult.model_validate(res), "alice")
    assert (s.outcome, s.returned) == ("REFUND", Decimal("25.00"))
    conserved(res, t.stakes)
    assert not [p for p in rec.prompts() if p["round_id"] == table.r1 and p["kind"] in ("CONFIRM", "NEXT")]
    assert t.mine("alice", "hole_card") == [] and t.mine("alice", "your_turn") == []
    assert [e["data"]["reason"] for e in rec.events("round_cancelled")] == [res["reason"]]
    await wait_until(lambda: any(e["round_id"] == table.r2 for e in rec.events("round_opened")),
                     what="the next round")
    assert len(rec.results(table.key1)) == 1
    # §1: a round cancelled before its first card is no hand: the next hand is still the table's
    # first, so the cards are washed before it (counted by round number it would be hand 2: no wash)
    await t.sit({"alice": (3, "25.00"), "bob": (1, "25.00")}, round_id=table.r2)
    await t.confirm("WASH")
    await t.confirm("SHUFFLE")


# -- (f) 7th cards reported exposed: only the one a supervisor confirms plays up ----------------

DEAL_F = [
    ("P1.1", "AS"), ("P2.1", "4H"), ("P4.1", "5H"), ("P1.2", "AD"), ("P2.2", "8C"), ("P4.2", "6H"),
    ("P1.3", "KS"), ("P2.3", "9D"), ("P4.3", "2C"),
    ("BURN1", "2D"), ("P1.4", "QH"), ("P2.4", "9C"), ("P4.4", "5S"),
    ("BURN2", "3D"), ("P1.5", "7D"), ("P2.5", "JH"), ("P4.5", "TS"),
    ("BURN3", "4D"), ("P1.6", "3S"), ("P2.6", "6C"), ("P4.6", "5D"),
    ("BURN4", "8D"), ("P1.7", "KD"), ("P2.7", "9S"), ("P4.7", "5C"),
]


async def supervisor_expose(rec: Recorder, round_id: str, seat: int, card: str) -> str:
    """sup-ana's signed ``supervisor_expose`` on the table's supervisor topic; its command id."""
    cid = f"expose-{seat}-{card}"
    body = {"type": "supervisor_expose", "command_id": cid, "supervisor": "sup-ana", "table_id": T,
            "round_id": round_id, "issued_at": time.time_ns() // 1_000_000, "seat": seat, "card": card}
    await rec.bus.publish(topics.supervisor(T), json.dumps(sign_command(SUP_KEY, body)).encode())
    return cid


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table", [{"options": {"seats": 4, "exposure_window_seconds": 30}}], indirect=True)
async def test_f_a_station_reporting_every_7th_card_exposed_shows_only_the_one_a_supervisor_confirms(
        table: Table, broker: Broker, tmp_path: Path):
    """seven-card-stud.md §3.5, issue 29: the station reports every seat's 7th card exposed in
    the LAST_CARD window. Its word alone publishes none of them: each waits, shown to nobody,
    the window standing still. The supervisor's signed act naming seat 4 and the card seen (5C)
    exposes that one: it plays face up and carol opens 7th street; naming the wrong card is
    refused. The station goes on without the rest: they stay down until the showdown."""
    t, rec = table, table.rec
    await t.sit({"alice": (1, "20.00"), "bob": (2, "20.00"), "carol": (4, "20.00")})
    await t.confirm("WASH")
    await t.confirm("SHUFFLE")
    await t.deal(*DEAL_F[:9])
    await t.act("carol", "BRING_IN", "0.50")
    await t.act("alice", "CALL")
    await t.act("bob", "CALL")
    for street in (DEAL_F[9:13], DEAL_F[13:17], DEAL_F[17:21]):
        await t.deal(*street)
        await t.act("bob", "CHECK")  # a pair of nines showing opens 4th to 6th street
        await t.act("carol", "CHECK")
        await t.act("alice", "CHECK")
    await t.deal(*DEAL_F[21:])
    window = await wait_until(lambda: next((e for e in rec.events("confirm_window") if e["round_id"] == table.r1),
                                           None), what="the LAST_CARD window")
    assert window["data"]["step"] == "LAST_CARD"
    # the station reports all three 7th cards exposed (and a 3rd-street card: not the rule's)
    sent = [await rec.command(ACT, {"type": "card_exposed", "position": pos}) for pos in ("P1.7", "P2.7", "P4.7")]
    reports = await wait_until(lambda: len(r := [e for e in rec.events("exposure_reported")
                                                 if e["round_id"] == table.r1]) == 3 and r, what="three reports")
    assert [e["data"] for e in reports] == [{"position": p, "waiting_for": "supervisor"} for p in ("P1.7", "P2.7", "P4.7")]
    late = await rec.command(ACT, {"type": "card_exposed", "position": "P1.3"})
    refused = await wait_until(lambda: next((e for e in rec.events("rejected")
                                             if e["data"].get("command_id") == late["command_id"]), None),
                               what="the 3rd-street card refused")
    assert "only a 7th card may be exposed" in refused["data"]["reason"]
    assert not rec.events("card_exposed") and t.rnd.exposure_reports == ["P1.7", "P2.7", "P4.7"]
    alerts = [p for p in rec.prompts("ALERT") if p.get("reason") == "exposure_reported"]
    assert len(alerts) == 3 and f"dealer supervisor expose {T} {table.r1} --seat 4" in alerts[-1]["message"]
    # the window stands still: no deadline, no timer armed (nothing can close it by itself)
    assert t.rnd.confirm_deadline is None and t.service.timers.armed.get(T) is None
    assert rec.last_prompt()["kind"] == "CONFIRM" and "waiting for a supervisor" in rec.last_prompt()["message"]
    assert not [m for m in t.mine("bob", "your_turn") if m["data"]["street"] == "7th"]
    # the supervisor names the wrong card for seat 2: refused, and the card is not named
    wrong = await supervisor_expose(rec, table.r1, 2, "AC")
    refused = await wait_until(lambda: next((e for e in rec.events("rejected") if e["data"].get("command_id") == wrong),
                                            None), what="the wrong card refused")
    assert "not the card registered at P2.7" in refused["data"]["reason"] and "9S" not in json.dumps(refused)
    # ... and the card it sees at seat 4, with `dealer supervisor expose` (a real process): it plays face up
    code, out, err = await supervisor_cli("expose", T, table.r1, "--seat", "4", "--card", "5c", "--supervisor", "sup-ana",
                                   "--key-file", str(tmp_path / "sup-ana.key"), "--broker", broker.url)
    assert (code, err) == (0, ""), (code, out, err)
    right = json.loads(out)
    assert (right["type"], right["seat"], right["card"]) == ("supervisor_expose", 4, "5C")
    exposed = await wait_until(lambda: next((e for e in rec.events("card_exposed") if e["round_id"] == table.r1),
                                            None), what="card_exposed")
    assert exposed["data"] == {"position": "P4.7", "card": "5C", "supervisor": "sup-ana"}
    assert {"type": "supervisor_expose", "command_id": right["command_id"]} in [
        e["data"] for e in rec.events("command_accepted")]
    # the station goes on without the two nobody confirmed: they stay down, carol (exposed) opens
    await rec.command(ACT, {"type": "dealer_confirm", "step": "LAST_CARD"})
    seventh = await t.turn("carol")
    assert seventh["street"] == "7th"
    # protocol 2: the turn (a player's own topic) may arrive before the state carrying the batch's events
    confirmed = await wait_until(lambda: [d for e in rec.events("dealer_confirmed") if e["round_id"] == table.r1
                                          and (d := e["data"])["step"] == "LAST_CARD"], what="LAST_CARD confirmed")
    assert confirmed == [{"step": "LAST_CARD", "unconfirmed": ["P1.7", "P2.7"]}]
    opened = [e["data"] for e in rec.events("betting_round_opened") if e["round_id"] == table.r1][-1]
    assert opened["first"] == "carol" and "P4 exposed the last card" in opened["announce"]
    assert [e["data"]["position"] for e in rec.events("card_exposed")] == ["P4.7"]
    # reported again once the betting is open: refused, nothing changes
    again = await rec.command(ACT, {"type": "card_exposed", "position": "P2.7"})
    refused = await wait_until(lambda: next((e for e in rec.events("rejected")
                                             if e["data"].get("command_id") == again["command_id"]), None),
                               what="the late report refused")
    assert "before the 7th-street betting opens" in refused["data"]["reason"]
    assert not [e for e in rec.events("rejected") if e["data"].get("command_id") in {m["command_id"] for m in sent}]
    before_showdown = len(rec.messages)
    await t.act("carol", "CHECK", turn=seventh)
    await t.act("alice", "CHECK")
    await t.act("bob", "CHECK")
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    assert res["details"]["exposed"] == ["P4.7"] and res["winner"] == "P4"  # four fives
    assert res["details"]["showdown_order"][0] == "P4"  # nobody bet on 7th street: the first to act shows first
    conserved(res, t.stakes)
    # journaled: the three reports and the supervisor's act, so a restart replays the same hand
    journaled = [ev for ev in t.service.journal.replay(T) if getattr(ev, "round_id", table.r1) == table.r1]
    assert [ev.type for ev in journaled if ev.type in ("card_exposed", "supervisor_expose", "dealer_confirm")][-5:] == [
        "card_exposed", "card_exposed", "card_exposed", "supervisor_expose", "dealer_confirm"]
    # before the supervisor's act, P4.7 was on no public topic; P1.7 and P2.7 on none before the showdown
    # protocol 2: the first public message naming it is the state carrying the card_exposed event
    first = next(i for i, (tp, m) in enumerate(rec.messages) if tp == topics.state(T)
                 and any(e["event"] == "card_exposed" for e in m.get("events") or []))
    for i, (tp, m) in enumerate(rec.messages[:before_showdown]):
        if tp == topics.supervisor(T):
            continue  # the supervisor's own act names the card it saw: only the backend reads that topic
        codes = set(strings(m))
        assert "/players/alice" in tp or "KD" not in codes, (tp, m)
        assert "/players/bob" in tp or "9S" not in codes, (tp, m)
        assert i >= first or "/players/carol" in tp or "5C" not in codes, (tp, m)


# -- unattended: the virtual dealer and players, hand after hand ------------------------------


@pytest.mark.timeout(240)
async def test_dealer_and_players_play_hands_in_a_row_unattended(broker: Broker, tmp_path: Path, pty_dir: Path):
    port = PtyPort(pty_dir, "shoe")
    settings = stud_settings(tmp_path, broker.url, port.path, betting_seconds=0.8, action_seconds=0.6)
    service = Service(settings, bus=MqttBus(broker.url, client_id="be"))
    sim = MqttBus(broker.url, client_id="sim")
    rec = await Recorder(broker.url).start()
    rng = random.Random(11)
    dealer = VirtualDealer(T, VirtualShoe(READER), PtyShoeLink(port), deck=STANDARD_52, rng=rng,
                           faults=FaultPlan(noread=0.04, garbage=0.03, drop=0.02), deal_interval=0.005,
                           heartbeat_interval=0.2, patience=0.5)
    dealer.subscribe(sim)
    players = [StudPlayer(T, "p1", sim, "calling", seat=1, buy_in="40.00"),
               StudPlayer(T, "p2", sim, "random", rng=random.Random(2), seat=2, buy_in="6.00"),
               StudPlayer(T, "p3", sim, "aggressive", seat=3, buy_in="25.00"),
               StudPlayer(T, "p4", sim, "disconnect", silent_after=3, seat=4, buy_in="10.00")]

    def completed() -> list[dict[str, Any]]:
        return [r for r in rec.results() if r["outcome"] == "COMPLETED"]

    await play_unattended(service, sim, dealer, rec, port, lambda: len(completed()) >= 5,
                          timeout=200, what="five hands played")
    results = rec.results()
    keys = [r["idempotency_key"] for r in results]
    assert len(keys) == len(set(keys))  # each result once
    for r in results:
        rid = r["round_id"]
        buy_in = {p.player_id: Decimal(p.buy_in or 0) for p in players}
        conserved(r, {pid: buy_in[pid] for pid in buy_in if f"{rid}-{pid}" in r["accepted_bets"]["bet_ids"]})
        if r["outcome"] == "COMPLETED":
            confirms = [p["position"] for p in rec.prompts("CONFIRM") if p["round_id"] == rid]
            wash = (int(rid.rsplit("-", 1)[1]) - 1) % 3 == 0
            assert ("WASH" in confirms) == wash and "SHUFFLE" in confirms
            assert set(r["player_bets"]) <= {"p1", "p2", "p3", "p4"}
    assert dealer.confirms_sent >= 5 and dealer.faults_injected
    assert players[3].ignored  # the silent player's turns were left to the timer
    assert any(e["data"]["by"] == "timeout" and e["data"]["player_id"] == "p4" for e in rec.events("player_acted"))
    assert all(p.rejected == [] for p in players), [p.rejected for p in players]
    # the players only ever saw their own down cards
    for p in players:
        for rid, holes in p.hole.items():
            seat = p.seats.get(rid)
            assert all(pos.startswith(f"P{seat}.") for pos, _ in holes)



async def test_virtual_dealer_confirms_and_counts_confirmations_as_steps():
    sent: list[dict[str, Any]] = []

    async def actions(payload: bytes) -> None:
        sent.append(json.loads(payload))

    reader = RecordingReader()
    deck = ["AS", "KS", "QS", "JS", "TS", "9S"]
    dealer = VirtualDealer("X", VirtualShoe("R"), reader, deck=STANDARD_52, deal_interval=0,
                           scripted_rounds=[deck], actions=actions)

    def prompt(kind: str, position: str | None = None, step: int | None = None) -> StationPrompt:
        return StationPrompt(table_id="X", round_id="X-000001", kind=kind, position=position, step=step,  # type: ignore[arg-type]
                             message="", at=0)

    await dealer._follow(prompt("WAIT"))  # betting open: nothing to do
    await dealer._follow(prompt("CONFIRM", "WASH", 1))
    await dealer._follow(prompt("CONFIRM", "SHUFFLE", 2))
    assert [{k: m[k] for k in ("type", "step", "round_id")} for m in sent] == [
        {"type": "dealer_confirm", "step": "WASH", "round_id": "X-000001"},
        {"type": "dealer_confirm", "step": "SHUFFLE", "round_id": "X-000001"}]
    assert len({m["command_id"] for m in sent}) == 2  # two confirmations, two command ids
    assert dealer.confirmed == ["WASH"] and dealer.confirming == "SHUFFLE"
    await dealer._follow(prompt("NEXT", "P1.1", 3))  # the shuffle was accepted; first card
    assert dealer.confirmed == ["WASH", "SHUFFLE"] and reader.cards == ["AS"] and sent[2:] == []
    # NEXT P2.1 (step 4) is lost; the re-passed card is refused as a duplicate: RESCAN step 4
    await dealer._follow(prompt("RESCAN", "P2.1", 4))
    assert dealer.dealt == ["AS"] and reader.cards == ["AS", "KS"]
    await dealer._follow(prompt("NEXT", "P1.3", 5))
    await dealer._follow(prompt("WAIT"))  # players bet: the card in hand registered
    assert dealer.waiting and dealer.in_hand == "QS"
    await dealer._follow(prompt("NEXT", "BURN1", 6))  # burns and the community card like any card
    assert not dealer.waiting
    await dealer._follow(prompt("NEXT", "COMM", 7))
    await dealer._follow(prompt("DONE"))
    assert dealer.dealt == ["AS", "KS", "QS", "JS", "TS"] and reader.cards == dealer.dealt
    assert dealer.steps_done == 7 and dealer.in_hand is None and dealer.confirming is None
    # the next round, joined late (its first two steps are done): like a dealer reading the
    # screen, it takes the station's count and deals the step asked for
    await dealer._follow(StationPrompt(table_id="X", round_id="X-000002", kind="NEXT", position="P1.1", step=3,
                                       message="", at=0))
    assert dealer.resyncs == 1 and dealer.steps_done == 2 and dealer.in_hand is not None
    assert len(reader.cards) == 6 and reader.cards[-1] == dealer.in_hand


def test_strategies_answer_from_the_turn_message_only():
    rng = random.Random(1)
    bring = {"actions": ["BRING_IN", "ALL_IN"], "call": None, "bet": {"min": "0.50", "max": "3.00"},
             "raise": None, "all_in": "20.00"}
    facing = {"actions": ["CALL", "RAISE", "FOLD"], "call": "0.50", "bet": None,
              "raise": {"min": "1.00", "max": "3.50"}, "all_in": None}
    free = {"actions": ["CHECK", "BET", "FOLD"], "call": None, "bet": {"min": "1.00", "max": "6.00"},
            "raise": None, "all_in": None}
    short = {"actions": ["ALL_IN", "FOLD"], "call": None, "bet": None, "raise": None, "all_in": "0.40"}
    assert choose("calling", bring, rng) == choose("disconnect", bring, rng)
    assert (choose("calling", bring, rng).action, str(choose("calling", bring, rng).amount)) == ("BRING_IN", "0.50")
    assert choose("calling", facing, rng).action == "CALL" and choose("calling", free, rng).action == "CHECK"
    assert choose("calling", short, rng).action == "ALL_IN"
    assert (choose("aggressive", facing, rng).action, str(choose("aggressive", facing, rng).amount)) == ("RAISE", "3.50")
    assert (choose("aggressive", free, rng).action, str(choose("aggressive", free, rng).amount)) == ("BET", "6.00")
    assert str(choose("aggressive", bring, rng).amount) == "3.00"
    seen: dict[str, set[str]] = {}
    for _ in range(400):
        c = choose("random", facing, rng)
        seen.setdefault(c.action, set()).add(str(c.amount))
        if c.action == "RAISE":
            assert Decimal("1.00") <= c.amount <= Decimal("3.50") and c.amount % Decimal("0.01") == 0
            assert isinstance(c.amount, Decimal)
    assert set(seen) == {"CALL", "RAISE", "FOLD"} and len(seen["RAISE"]) > 20


@pytest.mark.integration
def test_demo_plays_stud_with_bring_in_streets_showdown_pots_and_rake():
    out = run_cli("demo", "--game", "stud", "--rounds", "3", "--seed", "5", timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert ", low" in text and "brings in" in text
    for street in ("3rd", "4th"):
        assert f"{street} street" in text
    assert "showdown" in text and ", win" in text and "pot " in text and "rake " in text
    summary = json.loads(text.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] >= 3 and summary["reconciliation_mismatches"] == []
