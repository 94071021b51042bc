"""Matgo tables end to end: the real service, a real Mosquitto, the real PTY serial shoe, the
remote player on its own topic (the test itself, or :class:`MatgoPlayer`) and the house AI
inside the backend (:mod:`dealer.house.matgo_ai`, player ``house-ai``). The test is the dealer: it
scans the 28 dealt cards in deal order, then each stock card when the station asks for it.

Scripted decks force situations (a chongtong, a layout quad redeal, a choice between two
layout cards); whatever the AI decides, the tests follow the game to its end. Nothing here
asserts on time: timers are observed through what they did (``by: timeout``)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.messages import StationPrompt
from dealer.core.round import Phase
from drivers.mqtt import MqttBus
from simulators.matgo_players import MatgoDealer, MatgoPlayer, choose
from simulators.shoe import VirtualShoe
from simulators.station import DealerFaults
from tests.conftest import Broker, wait_until
from tests.harness import Recorder, RecordingReader, served_table, start_service, stop_service
from tests.harness_matgo import (ACT, AI, ALICE, DEAL, READER, STOCK, T, Table, deck, default_of, journal_agrees,
                                 matgo_settings, money_exact, replayed, secrets_kept, stopper)

@pytest.fixture
async def table(broker: Broker, tmp_path: Path, pty_dir: Path, request: pytest.FixtureRequest):
    extra = dict(getattr(request, "param", {}))
    async with served_table(Table, broker.url, pty_dir, READER,
                            lambda port: matgo_settings(tmp_path, broker.url, port, **extra)) as t:
        yield t  # a test may stop the service (t.task) and start another on the same journal


@pytest.fixture
def ai_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Hold the house AI's answer until the test opens the gate (the real AI still decides, in
    its worker process; the gate holds its move back before it is sent)."""
    from dealer.edge.house import HouseRunner

    real = HouseRunner.decide
    gate = threading.Event()

    async def gated(self: HouseRunner, request: object) -> Any:
        move = await real(self, request)
        await asyncio.to_thread(gate.wait, 60)
        return move

    monkeypatch.setattr(HouseRunner, "decide", gated)
    try:
        yield gate
    finally:
        gate.set()


# -- what every finished game must satisfy ------------------------------------------------------------


def asked(rec: Recorder, round_id: str) -> list[str]:
    """The positions and steps the station asked for, in order (a repeated prompt counts once)."""
    out: list[str] = []
    for p in rec.prompts():
        if p["round_id"] == round_id and p["kind"] in ("NEXT", "CONFIRM") and (not out or out[-1] != p["position"]):
            out.append(p["position"])
    return out


# -- (a) a whole game against the house AI ------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("table, first", [({"options": {"first_player": "PLAYER"}}, "PLAYER"),
                                          ({"options": {"first_player": "AI"}}, "AI")], indirect=["table"])
async def test_a_a_whole_game_between_the_player_bot_and_the_house_ai(table: Table, broker: Broker, first: str):
    t, rec = table, table.rec
    bus = MqttBus(broker.url, client_id="player-alice")
    bot = MatgoPlayer(T, ALICE, bus, "random", rng=random.Random(7))
    task = asyncio.create_task(bus.run())
    cards, stock = deck(seed=3 if first == "PLAYER" else 4)
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        await t.sit("100.00")
        hand = t.rnd.hand
        assert hand.seat_of == ({"F": ALICE, "O": AI} if first == "PLAYER" else {"F": AI, "O": ALICE})
        assert t.rnd.expected_position == "F.1"
        await t.deal(cards)
        res = await t.play_out(stock)
        await t.next_round()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(rec.results(table.key1)) == 1
    d = res["details"]
    assert d["seats"] == hand.seat_of and d["deals"] == 1 and d["kind"] in ("STOP", "NAGARI", "THREE_PPUK")
    # the deal in the rulebook's order, then one stock card after each hand card
    flips = [m for m in d["moves"] if m["action"] == "FLIP"]
    assert asked(rec, table.r1) == DEAL + [f"S{i}" for i in range(1, len(flips) + 1)]
    assert t.flipped == [f"S{i}" for i in range(1, len(flips) + 1)] and len(flips) >= 2
    played = {m["card"] for m in d["moves"] if m["action"] == "PLAY"}
    assert {p: c for p, c in res["cards"].items() if not STOCK.match(p)} == {
        p: c for p, c in cards if p.startswith("L") or c in played}  # hand cards kept: the journal only
    assert [res["cards"][f"S{i}"] for i in range(1, len(flips) + 1)] == stock[:len(flips)]
    # each move came from the player who had the turn; the AI's moves as house-ai player_actions
    acted = t.acted()
    assert [(p, a, c) for p, a, c, _ in acted] == [(m["player"], m["action"], m["card"]) for m in d["moves"]
                                                 if m["action"] != "FLIP"]
    assert {p for p, *_ in acted} == {ALICE, AI} and all(by == "player" for *_, by in acted)
    first_mover = [m["player"] for m in d["moves"]][0]
    assert first_mover == (ALICE if first == "PLAYER" else AI)
    replayed(res, t.settings)
    secrets_kept(rec, res, dict(cards))
    journal_agrees(t.settings, res)
    money_exact(res, Decimal("100.00"))
    # the bot played every turn it was given, with cards it held; nothing it sent was refused
    assert bot.rejected == [] and len(bot.sent) == sum(p == ALICE for p, *_ in acted)
    assert bot.cards(table.r1) == [c for p, c in cards if p.startswith(f"{t.letter}.")]
    assert {c for rid, _, a, c in bot.sent if a == "PLAY"} <= set(bot.cards(table.r1))
    # the matgo_move events tell the same story as the result
    assert [e["data"] for e in rec.events("matgo_move") if e["round_id"] == table.r1] == d["moves"]
    done = [p for p in rec.prompts("DONE") if p["round_id"] == table.r1]
    assert done and (d["kind"] == "NAGARI" or done[-1]["announce"].endswith(f"wins {d['payment_points']} points "
                                                                            f"({d['kind'].lower().replace('_', ' ')})"))


# -- (b) scanner faults -------------------------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("table", [{"options": {"ai_budget_ms": 20}}], indirect=True)
async def test_b_foreign_duplicate_and_unread_cards_never_register_nor_start_a_timer(table: Table):
    t, rec = table, table.rec
    cards, stock = deck(F=["03J1"], O=["03J2"], L=["03G", "03R"], seed=5)
    await t.sit("100.00")
    await wait_until(lambda: rec.expects("F.1", table.r1), what="NEXT F.1")
    # a 52-card code, a joker, a bonus/service card and a code no Hwatu card has: foreign
    for n, code in enumerate(("AS", "JK", "13B", "12J1"), start=1):
        t.shoe.scan(code)
        await wait_until(lambda: len(rec.prompts("RESCAN")) == n, what=f"RESCAN for {code}")
        p = rec.prompts("RESCAN")[-1]
        assert (p["position"], p["reason"], p["step"]) == ("F.1", "foreign_card", 1) and code in p["message"]
    assert [e["data"]["detail"] for e in rec.events("scan_rejected")] == ["AS", "JK", "13B", "12J1"]
    assert t.rnd.cards == {} and t.rnd.expected_position == "F.1" and not t.mine(ALICE, "hole_card")
    await t.deal(cards[:6])
    # the first card dealt again, at O.2: a duplicate, the deal stays at O.2
    await wait_until(lambda: rec.expects("O.2", table.r1), what="NEXT O.2")
    t.shoe.scan(cards[0][1])
    await wait_until(lambda: len(rec.prompts("RESCAN")) == 5, what="RESCAN duplicate")
    p = rec.prompts("RESCAN")[-1]
    assert (p["position"], p["reason"], p["step"]) == ("O.2", "duplicate_card", 7) and "O.2" not in t.rnd.cards
    await t.deal(cards[6:])
    turn = await t.turn()
    assert (turn["phase"], turn["actions"]) == ("PLAY", ["PLAY"]) and "03J1" in turn["cards"] and len(turn["cards"]) == 10
    # while the player is to move no card is expected: a no-read is refused, no RESCAN; a card too
    t.shoe.write(t.shoe.shoe.noread())
    await wait_until(lambda: any(e["data"].get("type") == "read_failed" for e in rec.events("rejected")),
                     what="no-read refused")
    t.shoe.scan(stock[0])
    await wait_until(lambda: rec.prompts("REJECTED"), what="card refused")
    assert rec.prompts("REJECTED")[0]["reason"] == "not_expected" and len(rec.prompts("RESCAN")) == 5
    assert t.rnd.phase == Phase.ACTION and len(t.rnd.cards) == 28
    # the player's 03J1 meets 03G and 03R on the layout: a choice, then the stock card
    await t.act("PLAY", "03J1", turn=turn)
    choice = await t.turn()
    assert (choice["phase"], choice["actions"], choice["cards"]) == ("CHOOSE_A", ["CHOOSE"], ["03G", "03R"])
    await t.act("CHOOSE", "03G", turn=choice)
    pos = await wait_until(t.stock_wanted, what="S1 asked for")
    assert pos == "S1"
    t.check_flip(pos)
    turns = len(t.mine(ALICE, "your_turn"))
    rescans = len(rec.prompts("RESCAN"))
    # three no-reads at S1: RESCAN each time, then the supervisor; the position stays
    for n in (1, 2, 3):
        t.shoe.write(t.shoe.shoe.noread())
        await wait_until(lambda: len(rec.prompts("RESCAN")) == rescans + n, what=f"RESCAN S1 #{n}")
        p = rec.prompts("RESCAN")[-1]
        assert (p["position"], p["reason"], p["count"], p["step"]) == ("S1", "noread", n, 29)
    await wait_until(lambda: rec.prompts("ALERT"), what="supervisor alert")
    assert rec.prompts("ALERT")[-1]["position"] == "S1"
    # a card that is no Hwatu card, the card just played, a card on the layout: RESCAN, no flip
    layout_card = next(c for p, c in cards if p.startswith("L") and c not in ("03G", "03R"))
    for n, (code, reason) in enumerate((("AS", "foreign_card"), ("03J1", "duplicate_card"),
                                        (layout_card, "duplicate_card")), start=4):
        t.shoe.scan(code)
        await wait_until(lambda: len(rec.prompts("RESCAN")) == rescans + n, what=f"RESCAN {code}")
        p = rec.prompts("RESCAN")[-1]
        assert (p["position"], p["reason"]) == ("S1", reason) and code in p["message"]
    # all along: the stock card is awaited, the player has no turn and no timer runs
    t.check_flip("S1")
    assert len(t.mine(ALICE, "your_turn")) == turns and "S1" not in t.rnd.cards
    assert not [e for e in rec.events("turn") if e["data"]["turn"] > turn["turn"] + 1]
    assert [m["action"] for m in t.rnd.hand.log] == ["PLAY", "CHOOSE"]
    await t.flip(stock[0], check=False)
    res = await t.play_out(stock[1:], stopper)
    assert res["cards"]["S1"] == stock[0] and len(rec.results(table.key1)) == 1
    assert [e["data"]["reason"] for e in rec.events("scan_rejected")] == (
        ["foreign_card"] * 4 + ["duplicate_card"] + ["noread"] * 3 + ["foreign_card"] + ["duplicate_card"] * 2)
    replayed(res, t.settings)
    money_exact(res, Decimal("100.00"))


# -- (c) the player disconnects: the timer plays the rulebook's defaults ------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("table", [{"action_seconds": 0.5, "options": {"ai_budget_ms": 20}}], indirect=True)
async def test_c_a_disconnected_player_is_played_by_the_timer_to_the_end(table: Table, broker: Broker):
    t, rec = table, table.rec
    bus = MqttBus(broker.url, client_id="player-alice")
    bot = MatgoPlayer(T, ALICE, bus, "disconnect", rng=random.Random(3), silent_after=2)
    task = asyncio.create_task(bus.run())
    cards, stock = deck(F=["03J1"], O=["03J2"], L=["03G", "03R"], seed=6)
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        await t.sit("100.00")
        await t.deal(cards)
        game = asyncio.create_task(t.play_out(stock))  # the dealer turns the stock over as asked
        # two moves, then the player's client goes silent and its connection drops
        await wait_until(lambda: bot.silent and sum(p == ALICE for p, *_ in t.acted()) >= 2, timeout=60,
                         what="the player's two moves")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        res = await game
        await t.next_round()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(rec.results(table.key1)) == 1
    mine = [(a, c, by) for p, a, c, by in t.acted() if p == ALICE]
    assert [by for *_, by in mine[:2]] == ["player", "player"] and mine[2:]
    assert all(by == "timeout" for *_, by in mine[2:]), mine
    # each move the timer made is the rulebook default for the turn the player was given
    # protocol 2: a batch's private messages (the next your_turn) go before the state carrying its
    # events (the timed-out move): a move answers the turn given before the batch, i.e. the latest
    # your_turn as of the state before the one that carries it
    last_turn: dict[str, Any] | None = None  # the latest your_turn
    committed: dict[str, Any] | None = None  # the latest your_turn as of the latest state
    answered: dict[str, Any] | None = None  # the turn the events of the latest state answer
    timed = 0
    for topic, msg in rec.messages:
        if msg.get("round_id") != table.r1:
            continue
        if topic == topics.state(T):
            answered, committed = committed, last_turn
        elif topic == topics.player(T, ALICE) and msg["kind"] == "your_turn":
            last_turn = msg["data"]
        elif topic.endswith("/events") and msg["event"] == "player_acted" and msg["data"]["player_id"] == ALICE \
                and msg["data"]["by"] == "timeout":
            assert answered is not None
            assert (msg["data"]["action"], msg["data"].get("card")) == default_of(answered), (answered, msg)
            timed += 1
    assert timed == len(mine) - 2
    assert [a for a, *_ in mine[2:]].count("GO") == 0  # the timer never says Go
    assert bot.rejected == []
    replayed(res, t.settings)
    money_exact(res, Decimal("100.00"))


# -- (d) illegal moves are refused with a reason, on the player's topic ---------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("table", [{"options": {"ai_budget_ms": 20}}], indirect=True)
async def test_d_illegal_moves_are_refused_and_change_nothing(table: Table, ai_gate: threading.Event):
    t, rec = table, table.rec
    cards, stock = deck(F=["03J1"], O=["05A", "03J2"], L=["03G", "03R"], seed=8)
    ai_card = "05A"
    await t.sit("100.00")
    await t.deal(cards[:3])
    await t.refused(t.action("PLAY", "03J1"), "the dealer is dealing")
    await t.deal(cards[3:])
    turn = await t.turn()
    rnd, hand = t.rnd, t.rnd.hand
    before = (rnd.turn, rnd.action_deadline, hand.engine.phase, len(hand.log))
    bad = [
        # a card the player named is "the card named", whoever holds it: "a hidden card" for the AI's
        # cards only would tell the player the AI's hand
        (t.action("PLAY", ai_card), "the card named is not in F's hand"),
        (t.action("PLAY", "03G"), "the card named is not in F's hand"),  # a layout card
        (t.action("PLAY", "13B"), "'13B' is not a Hwatu card code"),
        (t.action("PLAY"), "PLAY needs the hand card"),
        (t.action("CHOOSE", "03G"), "F must play a hand card (Play), not Choose"),  # not choosing
        (t.action("GO"), "F must play a hand card (Play), not Decide"),  # not at a decision point
        (t.action("STOP"), "not Decide"),
        (t.action("GO", "03J1"), "GO takes no card"),
        (t.action("PLAY", "03J1", amount="1.00"), "Matgo moves take no amount (PLAY)"),  # an amount
        (t.action("CALL"), "CALL is not a Matgo move (PLAY, CHOOSE, GO, STOP)"),
        (t.action("PLAY", "03j1"), "malformed action"),
        (t.action("PLAY", "03J1", amount=1.0), "never a float"),
        (t.action("PLAY", "03J1", round_id=f"{T}-000042"), "action is for round"),
        (t.action("PLAY", "03J1", reserve=True), "this game has no action reservation"),
        (t.action("PLAY", "03J1", extra=1), "malformed action"),
        (t.action("PLAY", "03J1", player="mallory"), f"it is not mallory's move (waiting for {ALICE})"),
    ]
    for payload, why in bad:
        reason = await t.refused(payload, why, player=payload["player_id"])
        assert "O's hand" not in reason
    # the house AI's id on the actions topic: refused before the table sees it, whatever it says
    await rec.command(ACT, t.action("PLAY", ai_card, player=AI))
    await wait_until(lambda: any("house AI" in e["data"]["reason"] for e in rec.events("rejected")),
                     what="house-ai action refused")
    assert (rnd.turn, rnd.action_deadline, hand.engine.phase, len(hand.log)) == before
    assert not rec.events("player_acted") and len(t.mine(ALICE, "your_turn")) == 1
    assert not t.mine(ALICE, "action_accepted")
    # a choice between 03G and 03R: only one of those two
    await t.act("PLAY", "03J1", turn=turn)
    choice = await t.turn()
    assert choice["phase"] == "CHOOSE_A" and choice["cards"] == ["03G", "03R"]
    for payload, why in [
        (t.action("CHOOSE", ai_card), "choose one of 03G, 03R"),
        (t.action("CHOOSE", "03J1"), "choose one of 03G, 03R"),
        (t.action("CHOOSE"), "CHOOSE needs the layout card"),
        (t.action("PLAY", turn["cards"][-1]), "F must choose one of 03G, 03R (Choose), not Play"),
        (t.action("GO"), "F must choose one of 03G, 03R (Choose), not Decide"),
    ]:
        await t.refused(payload, why)
    await t.act("CHOOSE", "03R", turn=choice)
    # the stock card is awaited: nobody may move
    await wait_until(t.stock_wanted, what="S1 asked for")
    await t.refused(t.action("PLAY", turn["cards"][-1]), "the dealer is dealing")
    await t.refused(t.action("STOP"), "the dealer is dealing")
    # the AI's turn (its answer held back): the player may not move, nor anyone speak for the AI
    await t.flip(stock[0])
    await wait_until(lambda: hand.to_act == AI, what="the AI's turn")
    await t.refused(t.action("PLAY", turn["cards"][-1]), f"it is not {ALICE}'s move (waiting for {AI})")
    rejected = len(rec.events("rejected"))
    await rec.command(ACT, t.action("PLAY", ai_card, player=AI))  # a legal move for the AI, but not from here
    await wait_until(lambda: len(rec.events("rejected")) > rejected, what="house-ai action refused")
    assert "house-ai is the house AI" in rec.events("rejected")[-1]["data"]["reason"]
    assert hand.to_act == AI and [m["player"] for m in hand.log] == [ALICE, ALICE, ALICE]
    ai_gate.set()
    await wait_until(lambda: any(p == AI for p, *_ in t.acted()), what="the AI moves")
    res = await t.play_out(stock[1:], stopper)
    assert all(by == "player" for *_, by in t.acted())
    assert not [m for m in t.mine(AI)]
    replayed(res, t.settings)
    journal_agrees(t.settings, res)
    money_exact(res, Decimal("100.00"))


# -- (e) the broker restarts mid-game ---------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("table", [{"options": {"ai_budget_ms": 20}}], indirect=True)
async def test_e_a_broker_restart_mid_game_gives_the_turn_again_and_one_result(table: Table, broker: Broker):
    t, rec, service = table, table.rec, table.service
    cards, stock = deck(seed=9)
    await t.sit("100.00")
    await t.deal(cards)
    turn = await t.turn()
    # the broker dies on the player's turn: the turn waits, its timer paused
    broker.kill()
    await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down")
    assert t.rnd.phase == Phase.ACTION and t.rnd.hand.to_act == ALICE
    broker.start()
    await wait_until(lambda: service.bus.connected and rec.bus.connected, what="everyone reconnected")
    again = await wait_until(lambda: [m["data"] for m in t.mine(ALICE, "your_turn")
                                      if m["data"]["turn"] == turn["turn"] and m["data"]["closes_at"] > turn["closes_at"]],
                             what="the player's turn given again")
    assert (again[-1]["phase"], again[-1]["actions"], again[-1]["cards"]) == (turn["phase"], turn["actions"], turn["cards"])
    holes = [m["data"]["position"] for m in t.mine(ALICE, "hole_card")]
    assert holes.count("F.1") >= 2 and holes.count("F.10") >= 2  # the hand is sent again too
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "WAIT" and f"{ALICE} to move" in p["message"],
                     what="station resynced")
    await t.act(*stopper(turn), turn=turn)
    # the broker dies again while the stock card is awaited: the dealer goes on (the scanner is
    # on serial), the AI moves while the broker is down, and the player's next turn waits
    if t.rnd.hand.to_act == ALICE:  # a choice first
        await t.act(*stopper(choice := await t.turn()), turn=choice)
    await wait_until(t.stock_wanted, what="S1 asked for")
    broker.kill()
    await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down again")
    flips = 0
    while not (t.rnd.phase == Phase.ACTION and t.rnd.hand.to_act == ALICE):
        pos = f"S{flips + 1}"
        await wait_until(lambda: (t.rnd.expected_position == pos and t.rnd.phase == Phase.DEALING)
                         or (t.rnd.phase == Phase.ACTION and t.rnd.hand.to_act == ALICE), what=f"{pos} or the turn")
        if t.rnd.phase == Phase.DEALING:
            await t.deal_blind([(pos, stock[flips])])
            flips += 1
    # the AI played while the broker was down (journaled like any move); the player's turn waits
    assert flips >= 2 and [m for m in t.rnd.hand.log if m["player"] == AI and m["action"] != "FLIP"]
    armed = service.timers.armed.get(T)
    assert armed is None or armed[0][0] != "act"  # nobody is timed out while players cannot reach us
    waiting = t.rnd.turn
    broker.start()
    await wait_until(lambda: service.bus.connected and rec.bus.connected, what="everyone reconnected again")
    resumed = await wait_until(lambda: [e for e in rec.events("turn") if e["data"]["turn"] == waiting
                                        and e["data"].get("resumed")], what="the turn resumed")
    assert resumed[-1]["data"]["player_id"] == ALICE
    res = await t.play_out(stock[flips:], stopper)
    await t.next_round()
    assert len(rec.results(table.key1)) == 1
    assert not [a for a in t.acted() if a[3] == "timeout"]
    replayed(res, t.settings)
    journal_agrees(t.settings, res)
    money_exact(res, Decimal("100.00"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table", [{"action_seconds": 1.5}], indirect=True)
async def test_e_a_backend_down_longer_than_a_turn_gives_the_turn_again_whole(table: Table):
    """The backend stops on the player's turn and stays down longer than action_seconds; started
    again on the same journal it does not play the timer's default at once: the player's turn
    is given again with a full window (resumed) and the player moves in it."""
    t, rec = table, table.rec
    cards, stock = deck(seed=9)
    await t.sit("100.00")
    await t.deal(cards)
    turn = await t.turn()
    waiting = t.rnd.turn
    await stop_service(t.task)
    await asyncio.sleep(2.5)  # longer than the turn
    seen = len(rec.messages)
    service, t.task = await start_service(t.settings)
    t.service, t.rnd = service, service.tables[T].current
    again = await wait_until(lambda: [m["data"] for tp, m in rec.messages[seen:] if tp == topics.player(T, ALICE)
                                      and m["kind"] == "your_turn" and m["data"].get("resumed")],
                             what="the player's turn given again")
    assert again[0]["turn"] == waiting and again[0]["closes_at"] > turn["closes_at"] + 2000
    assert (again[0]["phase"], again[0]["actions"], again[0]["cards"]) == (turn["phase"], turn["actions"], turn["cards"])
    assert not [a for a in t.acted() if a[3] == "timeout"], "the player was timed out on restart"
    await t.act(*stopper(turn), turn=again[0])
    assert [a[3] for a in t.acted() if a[0] == ALICE][:1] == ["player"]


@pytest.mark.timeout(120)
async def test_e_a_chongtong_dealt_while_the_broker_is_down_is_paid_once_it_returns(table: Table, broker: Broker):
    t, rec, service = table, table.rec, table.service
    cards, _ = deck(F=["07A", "07R", "07J1", "07J2"], seed=10, setup="CHONGTONG")
    await t.sit("50.00")  # exactly the minimum cover
    await t.deal(cards[:3])
    broker.kill()
    await wait_until(lambda: service.links[T].up["broker"] is False, what="broker link down")
    await t.deal_blind(cards[3:])
    await wait_until(lambda: t.rnd.phase == Phase.RESULT, what="game over")
    await wait_until(lambda: service.outbox_pending == 1, what="result in the outbox")
    assert rec.results(table.key1) == []
    broker.start()
    await wait_until(lambda: rec.results(table.key1), what="the result after the broker returns")
    await t.next_round()
    assert len(rec.results(table.key1)) == 1
    res = rec.results(table.key1)[0]
    d = res["details"]
    assert (res["winner"], d["kind"], d["payment_points"], d["money"], d["moves"]) == ("PLAYER", "CHONGTONG", 5, "5.00", [])
    assert res["player_bets"][ALICE]["cover"]["returned"] == "55.00" and d["result"]["months"] == [7]
    replayed(res, t.settings)
    money_exact(res, Decimal("50.00"))


# -- (f) the cover ------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table, least", [({}, "50.00"),
                                          ({"options": {"point_value": "20.00", "min_cover_points": 2}}, "40.00")],
                         indirect=["table"])
async def test_f_a_cover_below_the_minimum_is_refused(table: Table, least: str):
    t, rec = table, table.rec
    await wait_until(lambda: rec.events("round_opened"), what="round opened")
    low = str(Decimal(least) - Decimal("0.01"))
    opts = t.settings.tables[0].options

    def bet(stake: Any, seat: int | None = 1, player: str = ALICE, bet_id: str | None = None, **kw: Any) -> dict[str, Any]:
        out = {"type": "place_bet", "bet_id": bet_id or f"{player}-{stake}", "player_id": player, "bet_type": "cover",
               "stake": stake, "round_id": table.r1} | kw
        return out | ({"seat": seat} if seat is not None else {})

    points, value = opts.get("min_cover_points", 50), opts.get("point_value", "1.00")
    await t.refused(bet(low), f"the cover must be at least {least} ({points} points of {value})")
    await t.refused(bet("1.00"), f"at least {least}")
    await t.refused(bet("0"), "")
    await t.refused(bet(f"{least}5"), "")  # e.g. 50.005: not a whole number of cents
    await t.refused(bet(60.0), "never a float")
    await t.refused(bet(least, seat=2), "seat 2 does not exist at this table (seats 1..1)")
    await t.refused(bet(least, seat=None, bet_id="noseat"), "must name a seat")
    await t.refused(bet(least, bet_id="chips", bet_type="chips"), "unknown bet type 'chips' for matgo")
    rejected = len(rec.events("rejected"))
    await rec.command(ACT, bet(least, player=AI))  # nobody bets as the house AI
    await wait_until(lambda: len(rec.events("rejected")) > rejected, what="house-ai bet refused")
    assert "house-ai is the house AI" in rec.events("rejected")[-1]["data"]["reason"]
    assert t.service.tables[T].current.bets == {}
    await rec.command(ACT, bet(least))
    await wait_until(lambda: t.mine(ALICE, "bet_accepted"), what="exactly the minimum accepted")
    await t.refused(bet(least, bet_id="again"), "a player escrows one cover per game")
    await t.refused(bet(least, player="bob"), "seat 1 is taken by another player", player="bob")
    assert t.service.tables[T].current.bets.keys() == {f"{ALICE}-{least}"}
    # the AI is dealt a chongtong: it wins 5 points, the player's loss limited to the cover
    t.rnd, t.cover = t.service.tables[T].current, Decimal(least)
    await rec.command(ACT, {"type": "close_betting", "by": "dealer"})
    cards, _ = deck(O=["11G", "11J1", "11J2", "11JD"], seed=11, setup="CHONGTONG")
    await t.deal(cards)
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    d = res["details"]
    money = Decimal(value) * 5
    assert (res["winner"], d["kind"], d["payment_points"], Decimal(d["money"])) == ("AI", "CHONGTONG", 5, money)
    assert Decimal(res["player_bets"][ALICE]["cover"]["returned"]) == max(Decimal(least) - money, Decimal(0))
    assert d["loss_capped"] is (money > Decimal(least))
    assert res["player_bets"][ALICE]["cover"]["outcome"] == "LOSE"
    # the game is over: the AI's hand is shown now, never before
    assert not [m for topic, m in rec.messages if topic.endswith(f"/players/{AI}")]
    revealed = rec.events("cards_revealed")[0]["data"]["cards"]
    assert {revealed[f"O.{i}"] for i in range(1, 5)} == {"11G", "11J1", "11J2", "11JD"}
    money_exact(res, Decimal(least))


@pytest.mark.timeout(60)
async def test_f_nobody_sits_down_the_game_is_cancelled(table: Table):
    rec = table.rec
    await wait_until(lambda: rec.events("round_opened"), what="round opened")
    await rec.command(ACT, {"type": "close_betting", "by": "dealer"})
    await wait_until(lambda: rec.results(table.key1), what="cancelled")
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "CANCELLED" and res["refund_all"] is True
    assert "matgo needs at least 1 seated players, 0 sat down" in res["reason"]


# -- scripted deals: a redeal, chongtong ----------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table", [{"options": {"first_player": "AI"}}], indirect=True)
async def test_a_layout_quad_is_redealt_with_all_48_cards_then_a_chongtong_wins(table: Table):
    t, rec = table, table.rec
    first, _ = deck(L=["01G", "01J1", "01J2", "01R"], seed=12, setup="LAYOUT_QUAD")
    # the redeal: the player (O, the AI plays first) holds four Augusts
    second, _ = deck(O=["08G", "08A", "08J1", "08J2"], seed=13, setup="CHONGTONG", prefix="R1.")
    await t.sit("100.00")
    assert t.letter == "O"
    await t.deal(first)
    await wait_until(lambda: rec.events("redeal"), what="redeal")
    assert rec.events("redeal")[0]["data"] == {"deal": 1, "reason": "LAYOUT_QUAD"}
    # the cards are gathered and shuffled: nothing registers before SHUFFLE is confirmed
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "CONFIRM", what="CONFIRM SHUFFLE")
    t.shoe.scan(second[0][1])
    await wait_until(lambda: rec.prompts("REJECTED"), what="card refused")
    assert "SHUFFLE is to be confirmed" in rec.prompts("REJECTED")[0]["message"]
    await t.confirm("SHUFFLE")
    await t.deal(second[:7])
    # within the redeal a card dealt twice is a duplicate (the first deal's cards are back in)
    await wait_until(lambda: rec.expects("R1.O.3", table.r1), what="NEXT R1.O.3")
    t.shoe.scan(second[5][1])
    await wait_until(lambda: rec.prompts("RESCAN"), what="RESCAN duplicate")
    assert (rec.prompts("RESCAN")[-1]["position"], rec.prompts("RESCAN")[-1]["reason"]) == ("R1.O.3", "duplicate_card")
    await t.deal(second[7:])
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    d = res["details"]
    assert asked(rec, table.r1) == DEAL + ["SHUFFLE"] + [f"R1.{p}" for p in DEAL]
    assert (res["winner"], d["kind"], d["payment_points"], d["deals"], d["seats"]) == (
        "PLAYER", "CHONGTONG", 5, 2, {"F": AI, "O": ALICE})
    # the first deal's hands are never shown; the redeal's: only the four Augusts that win
    assert res["cards"] == {p: c for p, c in first + second
                            if "L" in p or (p.startswith("R1.") and c in ("08G", "08A", "08J1", "08J2"))}
    assert d["moves"] == []
    assert res["player_bets"][ALICE]["cover"]["returned"] == "105.00"
    # both deals' hands went to the player, nothing of the AI's anywhere
    assert [(m["data"]["position"], m["data"]["card"]) for m in t.mine(ALICE, "hole_card")] == [
        (p, c) for p, c in first + second if ".O." in f".{p}"]
    assert not [m for topic, m in rec.messages if topic.endswith(f"/players/{AI}")]
    assert not any(e["data"]["card"] for e in rec.events("card_registered") if ".F." in f".{e['data']['position']}")
    replayed(res, t.settings)
    money_exact(res, Decimal("100.00"))


@pytest.mark.timeout(120)
async def test_both_players_holding_a_quad_is_a_redeal_too(table: Table):
    t, rec = table, table.rec
    first, _ = deck(F=["02A", "02R", "02J1", "02J2"], O=["09A", "09R", "09J1", "09J2"], seed=14, setup="BOTH_QUADS")
    second, _ = deck(F=["12G", "12A", "12R", "12JD"], seed=15, setup="CHONGTONG", prefix="R1.")
    await t.sit("100.00")
    await t.deal(first)
    await t.confirm("SHUFFLE")
    await t.deal(second)
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    assert rec.events("redeal")[0]["data"]["reason"] == "BOTH_QUADS"
    assert (res["winner"], res["details"]["kind"], res["details"]["deals"]) == ("PLAYER", "CHONGTONG", 2)
    assert res["details"]["result"]["months"] == [12]
    money_exact(res, Decimal("100.00"))


# -- the player bot, from the turn message only ----------------------------------------------------------------


def test_the_bot_answers_with_a_move_the_turn_offers():
    rng = random.Random(1)
    play = {"phase": "PLAY", "actions": ["PLAY"], "cards": ["05A", "01R", "12JD"]}
    pick = {"phase": "CHOOSE_B", "actions": ["CHOOSE"], "cards": ["07J1", "07A"]}
    decide = {"phase": "DECIDE", "actions": ["GO", "STOP"]}
    last = {"phase": "DECIDE", "actions": ["STOP"]}
    assert choose("stopper", play, rng) == ("PLAY", "01R") and choose("stopper", pick, rng) == ("CHOOSE", "07A")
    assert choose("stopper", decide, rng) == ("STOP", None) and choose("random", last, rng) == ("STOP", None)
    assert {choose("random", play, rng) for _ in range(200)} == {("PLAY", c) for c in play["cards"]}
    assert {choose("random", decide, rng) for _ in range(200)} == {("GO", None), ("STOP", None)}
    assert default_of(pick) == ("CHOOSE", "07A") and default_of(play) == ("PLAY", "01R")
    assert default_of({"phase": "CHOOSE_A", "cards": ["03J2", "03J1"]}) == ("CHOOSE", "03J1")



async def test_the_virtual_dealer_follows_a_matgo_deal_redeal_and_stock():
    sent: list[dict[str, Any]] = []

    async def actions(payload: bytes) -> None:
        sent.append(json.loads(payload))

    reader = RecordingReader()
    first = ["01G", "02A", "03G", "04A", "05A"]
    again = ["12G", "12A", "12R", "12JD"]
    dealer = MatgoDealer("X", VirtualShoe("R"), reader, deal_interval=0, scripted_rounds=[first],
                         scripted_shuffles=[again], dealer_faults=DealerFaults(script=["", "", "foreign", ""]),
                         actions=actions)

    def prompt(kind: str, position: str, step: int, reason: str | None = None, message: str = "") -> StationPrompt:
        return StationPrompt(table_id="X", round_id="X-000001", kind=kind, position=position, step=step,  # type: ignore[arg-type]
                             reason=reason, message=message, at=0)

    await dealer._follow(prompt("NEXT", "F.1", 1))
    # a torn frame is reported twice (damaged, then its seq missing): two passes, one extra
    await dealer._follow(prompt("RESCAN", "F.1", 1, "corrupt_frame"))
    await dealer._follow(prompt("RESCAN", "F.1", 1, "frame_lost"))
    assert reader.cards == ["01G", "01G", "01G"]
    await dealer._follow(prompt("NEXT", "F.2", 2))
    # the extra pass is refused at F.2: the card in hand is on its way already, no pass
    await dealer._follow(prompt("RESCAN", "F.2", 2, "duplicate_card", "RESCAN F.2: already registered (01G)"))
    assert reader.cards == ["01G", "01G", "01G", "02A"] and dealer.stale_ignored == 1
    # a wrong card passed on purpose is refused: the right one follows
    await dealer._follow(prompt("NEXT", "F.3", 3))
    wrong = reader.cards[-1]
    assert wrong in MatgoDealer.FOREIGN and dealer.faults_injected == {"foreign_card": 1}
    await dealer._follow(prompt("RESCAN", "F.3", 3, "foreign_card", f"RESCAN F.3: not in this deck ({wrong})"))
    assert reader.cards[-1] == "03G" and dealer.in_hand == "03G"
    # a redeal: every card comes back, the 48 are shuffled again, the deal starts over
    await dealer._follow(prompt("CONFIRM", "SHUFFLE", 4))
    assert dealer.reshuffles == 1 and [{k: m[k] for k in ("type", "step", "round_id")} for m in sent] == [
        {"type": "dealer_confirm", "step": "SHUFFLE", "round_id": "X-000001"}]
    assert sent[0]["command_id"]
    await dealer._follow(prompt("NEXT", "R1.F.1", 5))
    await dealer._follow(prompt("NEXT", "R1.S1", 6))  # the stock, one card at a time
    assert reader.cards[-2:] == ["12G", "12A"] and dealer.dealt == ["01G", "02A", "03G", "12G"]


# -- the demo -----------------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_demo_plays_matgo_against_the_house_ai():
    from tests.harness_cli import run_cli

    out = run_cli("demo", "--game", "matgo", "--rounds", "2", "--seed", "5", timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    game1 = re.split(r"=== T1-[a-z2-7]{8}-000002", text)[0]
    assert "REDEAL (four cards of one month on the layout)" in game1 and "dealer shuffles all 48 cards" in game1
    assert "face down, to player1 only" in text and "holds 10 cards face down: nobody sees them" in text
    assert "layout: " in text and " plays " in text and "turns over" in text and "captures" in text
    assert "-- turn 1: " in text and "house-ai" in text
    assert "RESULT " in text and "payment: " in text and "cover " in text
    summary = json.loads(text.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] >= 2 and summary["reconciliation_mismatches"] == []
    assert summary["faults_injected"].get("foreign_card") and summary["faults_injected"].get("duplicate_card")
