"""Seotda tables end to end: the real service, a real Mosquitto, the real PTY serial shoe,
remote players on their own topics (the test itself, or :class:`SeotdaPlayer`), and the
dealer station (the test itself, or :class:`SeotdaDealer`)."""

from __future__ import annotations

import asyncio
import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.cards import SEOTDA_20
from dealer.edge.config import load_settings
from dealer.core.events import CloseBetting, DealerConfirm, OpenRound, PlaceBet, PlayerAction, ScanRead
from dealer.games.seotda import first_seat_drawn
from dealer.core.messages import PlayerMessage, RoundResult
from dealer.core.round import Phase
from dealer.edge.service import Service
from dealer.core.settlement import settle_bet
from dealer.core.table import Table as CoreTable
from drivers.mqtt import MqttBus
from simulators.pty_port import PtyPort
from simulators.seotda_players import SeotdaDealer, SeotdaPlayer, choose, position_game
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, PtyShoeLink
from tests.conftest import Broker, wait_until
from tests.harness import (HandShoe, PeerTable, Recorder, play_unattended, served_table, start_service, stop_service,
                           strings)

T = "SD1"
READER = "SC7"
ACT = topics.actions(T)
R1 = f"{T}-000001"  # pure core tests only: a running service names its rounds with its journal id


def seotda_settings(tmp: Path, url: str | None, port: str, **table: Any):
    cfg: dict[str, Any] = {
        "id": T, "game": "seotda", "currency": "KRW", "minor_unit": "1", "betting_seconds": 60,
        "pause_seconds": 0.1, "action_seconds": 60, "options": {"stake": 10},
        "scanner": {"kind": "serial", "port": port, "reader_id": READER, "heartbeat_timeout": 30},
    }
    cfg.update(table)
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"url": url, "client_id": "backend-seotda"}, tables=[cfg])



def conserved(result: dict[str, Any], stakes: dict[str, Decimal]) -> None:
    """Chips conservation, settled as any consumer would (:func:`settle_bet` with the chips each
    player brought): what goes back is exactly what was brought (no rake), every pot paid is
    shared out exactly, and nobody gets back less than nothing or more than the table holds."""
    res = RoundResult.model_validate(result)
    assert sum(stakes.values(), Decimal(0)) == res.accepted_bets.stakes.get("chips", Decimal(0))
    back = {p: settle_bet("chips", stake, res, p).returned for p, stake in stakes.items()}
    if res.refund_all:
        assert back == stakes and res.player_bets == {}
        return
    assert set(res.player_bets) == set(stakes)
    assert sum(back.values(), Decimal(0)) == sum(stakes.values(), Decimal(0)), (back, stakes)
    d = res.details
    assert d["rake"] == "0" and {p: Decimal(a) for p, a in d["returned"].items()} == back
    won: dict[str, Decimal] = {}
    for award in d["awards"]:
        if award["result"] in ("WIN", "SPLIT"):
            shares = {w: Decimal(a) for w, a in award["shares"].items()}
            assert sum(shares.values(), Decimal(0)) == Decimal(award["amount"]) and set(shares) == set(award["winners"])
            for w, a in shares.items():
                won[w] = won.get(w, Decimal(0)) + a
        else:  # a rematch pot is carried, not paid: its participants play on for it
            assert award["result"] in ("REMATCH_94", "REMATCH_DRAW") and len(award["participants"]) >= 2
    last = max((a["game"] for a in d["awards"]), default=0)
    assert d["rematches"] == last and all(a["result"] in ("WIN", "SPLIT") for a in d["awards"] if a["game"] == last)
    for p, stake in stakes.items():
        assert back[p] == res.player_bets[p]["chips"].returned
        assert Decimal(0) <= back[p] - won.get(p, Decimal(0)) <= stake - Decimal(d["antes"][p]), p
        assert Decimal(d["antes"][p]) > 0


def winner_seat(result: dict[str, Any]) -> int:
    """The seat of the previous game's winner as the next game's S1 (seotda.md §3.1): the
    winner of the first pot the last showdown decided (the main or carried pot, not a side pot:
    the rematch's, when there was one), else of any pot won outright."""
    d = result["details"]
    seat_of = {s["player"]: s["seat"] for s in d["seats"].values()}
    wins = [a for a in d["awards"] if a["result"] == "WIN"]
    last = [a for a in wins if a["game"] == max(a["game"] for a in d["awards"])]
    return seat_of[(last or wins)[0]["winners"][0]] if wins else d["first_seat"]


class Table(PeerTable):
    """The Seotda table: ``SHUFFLE`` confirmed on the actions topic, and the players press
    buttons (``press``) on their turns."""

    def __init__(self, service: Service, rec: Recorder, shoe: HandShoe) -> None:
        super().__init__(service, rec, shoe)
        self.S: dict[str, str] = {}  # "S1" -> player, once the hand is dealt

    async def sit(self, chips: dict[str, tuple[int, str]], round_id: str | None = None) -> None:
        await super().sit(chips, round_id)
        await wait_until(lambda: self.rnd.hand is not None, what="the hand dealt out")
        hand = self.rnd.hand
        self.S = {f"S{k}": hand.player_at[s] for s, k in hand.label.items()}

    async def drawn_first_seat(self, seats: list[int], round_id: str | None = None) -> int:
        """The seat the round's secret draw makes S1 in a table's first game (seotda.md §3.1).
        Only the backend knows the draw; the test reads it from the core to script a game."""
        round_id = round_id or self.r1
        await wait_until(lambda: any(e["round_id"] == round_id for e in self.rec.events("round_opened")),
                         what=f"round {round_id} opened")
        rnd = self.service.tables[T].current
        assert rnd is not None and rnd.round_id == round_id and rnd.draw is not None
        return first_seat_drawn(rnd.draw, 1, seats)

    def seat_label(self, player: str) -> str:
        return next(k for k, p in self.S.items() if p == player)

    async def press(self, player: str, button: str, *, turn: dict[str, Any] | None = None) -> dict[str, Any]:
        """The player presses ``button`` on their turn (no amount: the button names it)."""
        data = turn if turn is not None else await self.turn(player)
        assert button in data["buttons"], (player, button, data)
        n = len(self.mine(player, "action_accepted"))
        await self.rec.command(ACT, {"type": "player_action", "player_id": player, "action": button,
                                     "round_id": self.rnd.round_id if self.rnd else None})
        await wait_until(lambda: len(self.mine(player, "action_accepted")) > n, what=f"{player} {button} accepted")
        return data

    async def reserve(self, player: str, button: str) -> None:
        n = len(self.mine(player, "reservation_accepted"))
        await self.rec.command(ACT, {"type": "player_action", "player_id": player, "action": button,
                                     "reserve": True, "round_id": self.rnd.round_id if self.rnd else None})
        await wait_until(lambda: len(self.mine(player, "reservation_accepted")) > n, what=f"{player} reserved {button}")

    def acted(self, round_id: str | None = None) -> list[tuple[str, str, str, str | None, str]]:
        """(player, engine action, round total, button, by) of every action, in order."""
        round_id = round_id or self.r1
        return [(d["player_id"], d["action"], d["total"], d.get("button"), d["by"])
                for e in self.rec.events("player_acted") if e["round_id"] == round_id for d in [e["data"]]]


@pytest.fixture
async def table(broker: Broker, tmp_path: Path, pty_dir: Path, request: pytest.FixtureRequest):
    extra = getattr(request, "param", {})
    async with served_table(lambda service, rec, shoe, _: Table(service, rec, shoe), broker.url, pty_dir, READER,
                            lambda port: seotda_settings(tmp_path, broker.url, port, **extra)) as t:
        yield t


def _buttons(turn: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """name -> (round total, chips added) of every button offered."""
    return {name: (b["total"], b["adds"]) for name, b in turn["buttons"].items()}


# -- (a) a scripted game to showdown: the rulebook's betting example (§6.1) ------------------

# S1 3·8 Bright Pair, S2 10·10 (Jang-ttaeng), S3 5+6 = 1 point (folds on BET_2, never shown).
DEAL_A = {"S1.1": "03G", "S2.1": "10A", "S3.1": "05A", "S1.2": "08G", "S2.2": "10R", "S3.2": "06R"}


@pytest.mark.timeout(120)
async def test_a_scripted_game_to_showdown_with_the_rulebook_button_amounts(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (1, "1000"), "bob": (2, "1000"), "carol": (4, "1000")})
    s1, s2, s3 = t.S["S1"], t.S["S2"], t.S["S3"]
    seat = {"alice": 1, "bob": 2, "carol": 4}
    await t.confirm("SHUFFLE", at=1)
    # the first cards: from S1 clockwise; each goes to its owner at once (before the next is dealt)
    for pos in ("S1.1", "S2.1", "S3.1"):
        await t.deal((pos, DEAL_A[pos]))
        owner = t.S[pos[:2]]
        await wait_until(lambda: [(m["data"]["position"], m["data"]["card"]) for m in t.mine(owner, "hole_card")]
                         == [(pos, DEAL_A[pos])], what=f"{pos} sent to {owner}")

    # BET_1, exactly the rulebook's example: pot 30 after the antes
    turn = await t.turn(s1)
    assert (turn["street"], turn["pot"], turn["stake"]) == ("BET_1", "30", "10")
    assert _buttons(turn) == {"FOLD": ("0", "0"), "CHECK": ("0", "0"), "BET": ("10", "10"), "QUARTER": ("7", "7"),
                              "HALF": ("15", "15"), "MAX": ("990", "990"), "ALL_IN": ("990", "990")}
    await t.press(s1, "BET", turn=turn)  # adds 10: level 10, pot 40
    turn = await t.turn(s2)
    assert turn["pot"] == "40" and "BET" not in turn["buttons"] and "CHECK" not in turn["buttons"]
    assert _buttons(turn)["X2_RAISE"] == ("20", "20") and _buttons(turn)["CALL"] == ("10", "10")
    await t.press(s2, "X2_RAISE", turn=turn)  # adds 20: level 20, pot 60
    turn = await t.turn(s3)
    assert turn["pot"] == "60" and _buttons(turn)["HALF"] == ("60", "60")  # call 20, (60 + 20) / 2 = 40
    await t.reserve(s1, "CALL")  # S1 reserves a call of 20 ...
    await t.press(s3, "HALF", turn=turn)  # adds 60: level 60, pot 120
    # ... which the raise cancels: S1 gets the turn, and calls 50 by hand
    await wait_until(lambda: t.mine(s1, "reservation_cancelled"), what="reservation cancelled")
    assert "level 20 -> 60" in t.mine(s1, "reservation_cancelled")[0]["data"]["reason"]
    turn = await t.turn(s1)
    assert turn["pot"] == "120" and _buttons(turn)["CALL"] == ("60", "50")
    await t.press(s1, "CALL", turn=turn)  # pot 170
    turn = await t.turn(s2)
    assert turn["pot"] == "170" and _buttons(turn)["QUARTER"] == ("112", "92")  # call 40, (170 + 40) / 4 = 52
    await t.press(s2, "QUARTER", turn=turn)  # level 112, pot 262
    turn = await t.turn(s3)
    assert turn["pot"] == "262" and _buttons(turn)["CALL"] == ("112", "52")
    await t.press(s3, "CALL", turn=turn)
    await t.press(s1, "CALL")  # pot 366

    # the second cards go to their owners only once all of them are registered
    await t.deal(("S1.2", DEAL_A["S1.2"]), ("S2.2", DEAL_A["S2.2"]))
    await wait_until(lambda: any(e["data"]["position"] == "S2.2" for e in rec.events("card_registered")),
                     what="S2.2 seen registered")
    assert not [m for p in seat for m in t.mine(p, "hole_card") if m["data"]["position"].endswith(".2")]
    await t.deal(("S3.2", DEAL_A["S3.2"]))

    # BET_2: S3 reserves FOLD while S1 is to act; it runs on her turn
    turn = await t.turn(s1)
    assert turn["street"] == "BET_2" and turn["pot"] == "366"
    await t.reserve(s3, "FOLD")
    await t.press(s1, "CHECK", turn=turn)
    turn = await t.turn(s2)
    assert _buttons(turn)["HALF"] == ("183", "183")
    await t.press(s2, "HALF", turn=turn)
    await t.press(s1, "CALL")
    await wait_until(lambda: rec.results(table.key1), what="result")
    await wait_until(lambda: t.service.tables[T].undelivered == {}, what="result delivered")
    await wait_until(lambda: any(e["round_id"] == table.r2 for e in rec.events("round_opened")), what="the next round")

    assert t.acted() == [
        (s1, "BET", "10", None, "player"), (s2, "RAISE", "20", "X2_RAISE", "player"),
        (s3, "RAISE", "60", "HALF", "player"), (s1, "CALL", "60", None, "player"),
        (s2, "RAISE", "112", "QUARTER", "player"), (s3, "CALL", "112", None, "player"),
        (s1, "CALL", "112", None, "player"),
        (s1, "CHECK", "0", None, "player"), (s2, "BET", "183", "HALF", "player"),
        (s3, "FOLD", "0", None, "reservation"), (s1, "CALL", "183", None, "player")]
    assert [e["data"]["player_id"] for e in rec.events("reservation_executed")] == [s3]
    # the deal order and the steps: SHUFFLE, S1.1 S2.1 S3.1, BET_1, S1.2 S2.2 S3.2
    asked = []
    for p in rec.prompts():
        if p["round_id"] == table.r1 and p["kind"] in ("NEXT", "CONFIRM") and (not asked or asked[-1] != p["position"]):
            asked.append(p["position"])
    assert asked == ["SHUFFLE", "S1.1", "S2.1", "S3.1", "S1.2", "S2.2", "S3.2"]
    opened = [(e["data"]["street"], e["data"]["first"]) for e in rec.events("betting_round_opened") if e["round_id"] == table.r1]
    assert opened == [("BET_1", s1), ("BET_2", s1)]

    # visibility: each card to its owner only, the second cards after the last second card;
    # nothing public before the showdown, and S3's folded hand is never shown
    for player in seat:
        me = t.seat_label(player)
        assert [(m["data"]["position"], m["data"]["card"]) for m in t.mine(player, "hole_card")] == [
            (f"{me}.1", DEAL_A[f"{me}.1"]), (f"{me}.2", DEAL_A[f"{me}.2"])]
    index = {(tp, m.get("event"), m.get("kind"), (m.get("data") or {}).get("position")): i
             for i, (tp, m) in enumerate(rec.messages)}
    # protocol 2: a batch's private messages go before the state carrying its events, so the second
    # cards (released with S3.2's batch) come after the registration of the card dealt before S3.2
    dealt = [e["data"]["position"] for e in rec.events("card_registered") if e["round_id"] == table.r1]
    assert dealt[dealt.index("S3.2") - 1].endswith(".2")  # S3.2 ends the second cards
    before_last = index[(topics.events(T), "card_registered", None, dealt[dealt.index("S3.2") - 1])]
    for player in seat:
        mine = f"{t.seat_label(player)}.2"
        assert index[(topics.player(T, player), None, "hole_card", mine)] > before_last
    # the showdown turns the hands still in over (the showdown event), then the result
    reveal = next(i for i, (tp, m) in enumerate(rec.messages) if tp == topics.events(T) and m["event"] == "showdown")
    assert {k: h["cards"] for k, h in rec.messages[reveal][1]["data"]["hands"].items()} == {
        "S1": [DEAL_A["S1.1"], DEAL_A["S1.2"]], "S2": [DEAL_A["S2.1"], DEAL_A["S2.2"]]}
    for i, (tp, m) in enumerate(rec.messages):
        seen = set(strings(m))
        if "/players/" in tp:
            me = tp.split("/")[5]  # .../players/{me} and its retained .../players/{me}/state
            others = {c for p, c in DEAL_A.items() if t.S[p[:2]] != me}
            assert not seen & others, (tp, m)
        elif tp in (topics.events(T), topics.table_topic(T, "prompts"), topics.state(T)):
            # the events and prompts as the recorder lists them; the state that carried them holds them too
            if i < reveal and tp != topics.state(T):
                assert not seen & set(DEAL_A.values()), (tp, m)
            assert not seen & {DEAL_A["S3.1"], DEAL_A["S3.2"]}, (tp, m)  # folded: never public
    assert rec.events("cards_revealed")[0]["data"]["cards"] == {p: c for p, c in DEAL_A.items() if not p.startswith("S3")}

    # one result: S1's 3·8 Bright Pair takes the whole pot of 732, chips conserved, no rake
    assert len(rec.results(table.key1)) == 1
    res = rec.results(table.key1)[0]
    d = res["details"]
    assert res["outcome"] == "COMPLETED" and res["winner"] == "S1" and res["money"]["minor_unit"] == "1"
    assert res["hands"] == {"S1": {"cards": ["03G", "08G"], "category": "bright_pair"},
                            "S2": {"cards": ["10A", "10R"], "category": "pair"}}
    assert d["names"] == {"S1": "3·8 Bright Pair (Sam-pal Gwang-ttaeng)", "S2": "10·10 Pair (Jang-ttaeng)"}
    assert d["first_seat"] == seat[s1] and d["seats"] == {k: {"seat": seat[p], "player": p} for k, p in t.S.items()}
    assert d["antes"] == {p: "10" for p in seat} and d["rematches"] == 0
    assert [(a["game"], a["amount"], a["result"], a["winners"], a["shares"]) for a in d["awards"]] == [
        (0, "732", "WIN", [s1], {s1: "732"})]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {s1: "1427", s2: "695", s3: "878"}
    assert {p: b["chips"]["outcome"] for p, b in res["player_bets"].items()} == {s1: "WIN", s2: "LOSE", s3: "LOSE"}
    conserved(res, t.stakes)
    done = [p for p in rec.prompts("DONE") if p["round_id"] == table.r1]
    assert done and "winner S1" in done[-1]["message"]


# -- (b) a draw (Al-li vs Al-li) forces a rematch, played to its end over the wire --------------


@pytest.mark.timeout(150)
async def test_b_a_draw_is_rematched_with_the_carried_pot_and_the_same_twenty_cards(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (1, "1000"), "bob": (2, "1000"), "carol": (3, "1000")})
    s1, s2, s3 = t.S["S1"], t.S["S2"], t.S["S3"]
    await t.confirm("SHUFFLE", at=1)
    await t.deal(("S1.1", "01G"), ("S2.1", "01R"), ("S3.1", "05A"))
    await t.press(s1, "BET")
    await t.press(s2, "CALL")
    await t.press(s3, "FOLD")
    await t.deal(("S1.2", "02A"), ("S2.2", "02R"))  # nothing for the folded S3
    await t.press(s1, "CHECK")
    await t.press(s2, "CHECK")
    # two Al-li: a draw. The pot of 50 is carried; the same round goes on with a new SHUFFLE
    await t.confirm("SHUFFLE", at=7)
    assert t.rnd.phase != Phase.RESULT and rec.results(table.key1) == []
    # the rematch is dealt from the same 20 cards: the first deal's cards register again ...
    await t.deal(("R1.S1.1", "01R"))
    # ... but a card already dealt since this shuffle is a duplicate: RESCAN, the position stays
    await wait_until(lambda: rec.expects("R1.S2.1", table.r1), what="NEXT R1.S2.1")
    t.shoe.scan("01R")
    await wait_until(lambda: any(p["position"] == "R1.S2.1" for p in rec.prompts("RESCAN")), what="RESCAN R1.S2.1")
    rescan = next(p for p in rec.prompts("RESCAN") if p["position"] == "R1.S2.1")
    assert (rescan["reason"], rescan["step"]) == ("duplicate_card", 9) and "R1.S2.1" not in t.rnd.cards
    await t.deal(("R1.S2.1", "01G"))
    turn = await t.turn(s1)
    assert turn["street"] == "BET_1 (rematch 1)" and turn["pot"] == "50"  # the carried pot counts
    assert _buttons(turn)["BET"] == ("10", "10") and _buttons(turn)["HALF"] == ("25", "25")
    assert [m["data"]["street"] for m in t.mine(s3, "your_turn")] == ["BET_1"]  # folded: out of the rematch
    assert [m["data"]["position"] for m in t.mine(s3, "hole_card")] == ["S3.1"]
    await t.press(s1, "BET", turn=turn)
    await t.press(s2, "CALL")
    await t.deal(("R1.S1.2", "05A"), ("R1.S2.2", "08G"))  # S3's folded first card, dealt again
    turn = await t.turn(s1)
    assert turn["street"] == "BET_2 (rematch 1)" and turn["pot"] == "70" and _buttons(turn)["HALF"] == ("35", "35")
    await t.press(s1, "HALF", turn=turn)
    await t.press(s2, "CALL")
    await wait_until(lambda: rec.results(table.key1), what="result")
    await wait_until(lambda: t.service.tables[T].undelivered == {}, what="result delivered")

    confirms = [(p["position"], p["step"]) for p in rec.prompts("CONFIRM") if p["round_id"] == table.r1]
    assert sorted(set(confirms)) == [("SHUFFLE", 1), ("SHUFFLE", 7)]
    asked = []
    for p in rec.prompts():
        if p["round_id"] == table.r1 and p["kind"] in ("NEXT", "CONFIRM") and (not asked or asked[-1] != p["position"]):
            asked.append(p["position"])
    assert asked == ["SHUFFLE", "S1.1", "S2.1", "S3.1", "S1.2", "S2.2",
                     "SHUFFLE", "R1.S1.1", "R1.S2.1", "R1.S1.2", "R1.S2.2"]
    streets = [e["data"]["street"] for e in rec.events("betting_round_opened") if e["round_id"] == table.r1]
    assert streets == ["BET_1", "BET_2", "BET_1 (rematch 1)", "BET_2 (rematch 1)"]
    assert [(m["data"]["position"], m["data"]["card"]) for m in t.mine(s1, "hole_card")] == [
        ("S1.1", "01G"), ("S1.2", "02A"), ("R1.S1.1", "01R"), ("R1.S1.2", "05A")]
    assert [(m["data"]["position"], m["data"]["card"]) for m in t.mine(s2, "hole_card")] == [
        ("S2.1", "01R"), ("S2.2", "02R"), ("R1.S2.1", "01G"), ("R1.S2.2", "08G")]

    res = rec.results(table.key1)[0]
    d = res["details"]
    assert len(rec.results(table.key1)) == 1 and res["outcome"] == "COMPLETED"
    # both games' hands of the players still in are shown at the end; S3's folded card never is
    # (not in the result either: the journal keeps it)
    assert res["cards"] == {"S1.1": "01G", "S2.1": "01R", "S1.2": "02A", "S2.2": "02R",
                            "R1.S1.1": "01R", "R1.S2.1": "01G", "R1.S1.2": "05A", "R1.S2.2": "08G"}
    assert rec.events("cards_revealed")[0]["data"]["cards"] == res["cards"]
    assert d["rematches"] == 1 and res["winner"] == "S2"
    assert res["hands"] == {"S1": {"cards": ["01R", "05A"], "category": "points"},
                            "S2": {"cards": ["01G", "08G"], "category": "bright_pair"}}
    assert d["names"] == {"S1": "6 points (Yeoseot-kkeut)", "S2": "1·8 Bright Pair (Il-pal Gwang-ttaeng)"}
    awards = [(a["game"], a["amount"], a["result"], a.get("participants") or a.get("winners")) for a in d["awards"]]
    assert awards == [(0, "50", "REMATCH_DRAW", [s1, s2]), (1, "50", "WIN", [s2]), (1, "90", "WIN", [s2])]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {s1: "935", s2: "1075", s3: "990"}
    conserved(res, t.stakes)

    # the next game: the winner's seat is the first seat S1
    t.answered.clear()
    await t.sit({"alice": (1, "1000"), "bob": (2, "1000"), "carol": (3, "1000")}, round_id=table.r2)
    assert t.S["S1"] == s2 and t.rnd.hand.first_seat == {"alice": 1, "bob": 2, "carol": 3}[s2]
    await t.confirm("SHUFFLE", at=1)
    await t.deal(("S1.1", "07A"))
    await wait_until(lambda: [m["data"]["position"] for m in t.mine(s2, "hole_card") if m["round_id"] == table.r2] == ["S1.1"],
                     what="S1.1 to the previous winner")


# -- (b2) PROMPT: the 9·4 holder chooses over the wire; HALF_POT: a folded player rejoins ----------


@pytest.mark.timeout(150)
@pytest.mark.parametrize("table", [{"options": {"stake": 10, "rematch_94_mode": "PROMPT",
                                                "rematch_reentry": "HALF_POT"}}], indirect=True)
async def test_b2_the_94_holder_chooses_a_rematch_and_a_folded_player_rejoins_it(table: Table):
    """seotda.md §5.2 PROMPT and §7.2 rule 3 HALF_POT through the real service: the showdown's
    hands are published when it happens, the holder of the 9·4 gets a REMATCH_CHOICE turn on
    their own topic and answers it with a command id and the turn; the player who folded is
    offered the rematch for half the carried pot and rejoins; the rematch event names its cause."""
    t, rec = table, table.rec
    await t.sit({"alice": (1, "1000"), "bob": (2, "1000"), "carol": (3, "1000")})
    s1, s2, s3 = t.S["S1"], t.S["S2"], t.S["S3"]
    await t.confirm("SHUFFLE", at=1)
    await t.deal(("S1.1", "04R"), ("S2.1", "01G"), ("S3.1", "05A"))
    await t.press(s1, "CHECK")
    await t.press(s2, "CHECK")
    await t.press(s3, "FOLD")
    await t.deal(("S1.2", "09R"), ("S2.2", "02A"))  # 9·4 against Al-li: the holder may call a rematch
    await t.press(s1, "CHECK")
    await t.press(s2, "CHECK")
    # the showdown is published as it happens, before anyone is asked anything
    shown = await wait_until(lambda: next((e for e in rec.events("showdown") if e["round_id"] == table.r1), None),
                             what="the showdown event")
    assert shown["data"]["game"] == 0 and {k: h["cards"] for k, h in shown["data"]["hands"].items()} == {
        "S1": ["04R", "09R"], "S2": ["01G", "02A"]}
    choice = await t.turn(s1)
    assert choice["choice"] == "REMATCH_94" and choice["actions"] == ["REMATCH", "PLAY_ON"]
    assert choice["default"] == "REMATCH" and choice["pot"] == "30" and choice["street"] == "REMATCH_CHOICE"
    public_turn = await wait_until(lambda: next((e["data"] for e in reversed(rec.events("turn")) if e["round_id"] == table.r1
                                                 and e["data"].get("turn") == choice["turn"]), None), what="the public turn")
    assert public_turn["player_id"] == s1 and public_turn["choice"] == "REMATCH_94" and "level" not in public_turn
    # a button is no answer, and nobody else may answer for the holder
    await t.refused(s1, {"type": "player_action", "player_id": s1, "action": "CHECK", "turn": choice["turn"]},
                    "CHECK is not a choice now")
    await t.refused(s2, {"type": "player_action", "player_id": s2, "action": "PLAY_ON", "turn": choice["turn"]},
                    f"waiting for {s1} to choose")
    sent = await rec.command(ACT, {"type": "player_action", "player_id": s1, "action": "REMATCH",
                                   "turn": choice["turn"]})
    await wait_until(lambda: t.mine(s1, "action_accepted"), what="REMATCH accepted")
    # the same command again (a duplicate delivery): answered again, not applied twice
    await rec.publish(topics.actions(T), sent)
    await wait_until(lambda: any(m["data"].get("repeat") for m in t.mine(s1, "action_accepted")), what="repeat")
    # the player who folded may rejoin for half the carried pot (30 / 2)
    offer = await t.turn(s3)
    assert offer["choice"] == "REENTRY" and offer["fee"] == "15" and offer["carried"] == "30"
    assert offer["actions"] == ["REJOIN", "SIT_OUT"] and offer["default"] == "SIT_OUT"
    await rec.command(ACT, {"type": "player_action", "player_id": s3, "action": "REJOIN", "turn": offer["turn"]})
    rematch = await wait_until(lambda: next((e for e in rec.events("rematch") if e["round_id"] == table.r1), None),
                               what="the rematch event")
    d = rematch["data"]
    assert d["rematch"] == 1 and d["participants"] == [s1, s2, s3]
    assert d["carried"] == [{"amount": "45", "participants": [s1, s2, s3], "cause": "NINE_FOUR", "by": [s1],
                             "step": 4, "reason": d["carried"][0]["reason"]}]
    assert d["hands"] == shown["data"]["hands"] and d["reentries"] == [
        {"game": 1, "player": s3, "paid": "15", "into": ["15"]}]
    # the rematch: all three, the same twenty cards
    await t.confirm("SHUFFLE", at=7)
    await t.deal(("R1.S1.1", "10A"), ("R1.S2.1", "05A"), ("R1.S3.1", "03G"))
    for p in (s1, s2, s3):
        await t.press(p, "CHECK")
    await t.deal(("R1.S1.2", "10R"), ("R1.S2.2", "06A"), ("R1.S3.2", "08G"))  # 10·10, 1 point, 3·8
    for p in (s1, s2, s3):
        await t.press(p, "CHECK")
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    det = res["details"]
    assert det["rematches"] == 1 and res["winner"] == "S3"
    assert [(c["player_id"], c["action"], c["choice"], c["by"]) for c in det["choices"]] == [
        (s1, "REMATCH", "REMATCH_94", "player"), (s3, "REJOIN", "REENTRY", "player")]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {s1: "990", s2: "990", s3: "1020"}
    conserved(res, t.stakes)
    # every showdown's hands were public from the moment they were shown, so the result shows them
    assert {k: res["cards"][k] for k in ("S1.1", "S1.2", "S2.1", "S2.2")} == {
        "S1.1": "04R", "S1.2": "09R", "S2.1": "01G", "S2.2": "02A"}
    assert "S3.1" not in res["cards"]  # folded in the first game: never shown


# -- (c) faults: foreign cards, no-reads, a player who disconnects --------------------------------


@pytest.mark.timeout(120)
async def test_c_foreign_cards_and_noreads_never_register_or_move_the_deal(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (1, "800"), "bob": (2, "800")})
    s1, s2 = t.S["S1"], t.S["S2"]
    await t.confirm("SHUFFLE", at=1)
    await wait_until(lambda: rec.expects("S1.1", table.r1), what="NEXT S1.1")
    # a 52-card code and November cards are foreign to the 20 Seotda cards
    for n, code in enumerate(("AS", "11A", "11G"), start=1):
        t.shoe.scan(code)
        await wait_until(lambda: len(rec.prompts("RESCAN")) == n, what=f"RESCAN for {code}")
        p = rec.prompts("RESCAN")[-1]
        assert (p["position"], p["reason"], p["step"]) == ("S1.1", "foreign_card", 2) and code in p["message"]
    assert [e["data"]["detail"] for e in rec.events("scan_rejected")] == ["AS", "11A", "11G"]
    assert t.rnd.cards == {} and t.rnd.expected_position == "S1.1"
    assert not t.mine(s1, "hole_card")
    await t.deal(("S1.1", "09A"), ("S2.1", "04R"))
    turn = await t.turn(s1)
    assert t.rnd.phase == Phase.ACTION
    # a no-read while the players bet: no card is expected, so no RESCAN; nothing changes
    rescans = len(rec.prompts("RESCAN"))
    t.shoe.write(t.shoe.shoe.noread())
    await wait_until(lambda: any(e["data"].get("type") == "read_failed" for e in rec.events("rejected")),
                     what="no-read refused")
    why = next(e["data"]["reason"] for e in rec.events("rejected") if e["data"].get("type") == "read_failed")
    assert "players are betting" in why
    # and a card passed while they bet is refused as not expected
    t.shoe.scan("10R")
    await wait_until(lambda: rec.prompts("REJECTED"), what="card refused")
    assert rec.prompts("REJECTED")[0]["reason"] == "not_expected"
    assert len(rec.prompts("RESCAN")) == rescans and len(t.rnd.cards) == 2 and t.rnd.phase == Phase.ACTION
    await t.press(s1, "CHECK", turn=turn)
    await t.press(s2, "CHECK")
    # a no-read during the deal: RESCAN, and the deal stays at that position
    await t.deal(("S1.2", "10R"))
    await wait_until(lambda: rec.expects("S2.2", table.r1), what="NEXT S2.2")
    t.shoe.write(t.shoe.shoe.noread())
    await wait_until(lambda: len(rec.prompts("RESCAN")) == rescans + 1, what="RESCAN S2.2")
    p = rec.prompts("RESCAN")[-1]
    assert (p["position"], p["reason"], p["count"], p["step"]) == ("S2.2", "noread", 1, 5)
    assert t.rnd.expected_position == "S2.2" and "S2.2" not in t.rnd.cards
    assert not [m for m in t.mine(s1, "hole_card") if m["data"]["position"] == "S1.2"]  # not all second cards yet
    await t.deal(("S2.2", "06R"))
    await t.press(s1, "CHECK")
    await t.press(s2, "CHECK")
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    # S2's 4·6 (Se-ryuk, a special combination) beats S1's 9 + 10 = 9 points (Gap-o)
    assert res["winner"] == "S2" and res["details"]["names"]["S2"] == "Se-ryuk (4·6)"
    assert res["cards"] == {"S1.1": "09A", "S2.1": "04R", "S1.2": "10R", "S2.2": "06R"}
    assert res["details"]["names"]["S1"] == "9 points (Gap-o)"
    conserved(res, t.stakes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("table", [{"action_seconds": 1.5}], indirect=True)
async def test_c_a_silent_player_is_checked_then_folded_and_the_game_finishes(table: Table, broker: Broker):
    t, rec = table, table.rec
    bus = MqttBus(broker.url, client_id="players")
    bots = {"bob": SeotdaPlayer(T, "bob", bus, "disconnect", silent_after=0),  # silent from the start
            "carol": SeotdaPlayer(T, "carol", bus, "calling")}
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        s1 = await t.drawn_first_seat([1, 2, 3])  # alice sits where the draw puts S1, bob and carol after her
        seats = [s1, s1 % 3 + 1, (s1 + 1) % 3 + 1]
        await t.sit({p: (s, "1000") for p, s in zip(("alice", "bob", "carol"), seats)})
        assert [t.S[k] for k in ("S1", "S2", "S3")] == ["alice", "bob", "carol"], t.S  # S1 drawn for game 1
        await t.confirm("SHUFFLE", at=1)
        await t.deal(("S1.1", "02A"), ("S2.1", "03R"), ("S3.1", "07A"))
        await t.press("alice", "CHECK")  # bob's timer checks; carol checks
        await t.deal(("S1.2", "02R"), ("S2.2", "08A"), ("S3.2", "09R"))
        await t.press("alice", "HALF")  # pot 30: makes it 15; bob's timer folds; carol calls
        await wait_until(lambda: rec.results(table.key1), what="result")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    res = rec.results(table.key1)[0]
    assert [(p, a, by) for p, a, _, _, by in t.acted()] == [
        ("alice", "CHECK", "player"), ("bob", "CHECK", "timeout"), ("carol", "CHECK", "player"),
        ("alice", "BET", "player"), ("bob", "FOLD", "timeout"), ("carol", "CALL", "player")]
    assert len(bots["bob"].ignored) == 2 and bots["bob"].sent == []
    assert bots["carol"].rejected == [] and bots["bob"].rejected == []
    assert bots["bob"].cards(table.r1) == ["03R", "08A"] and bots["carol"].cards(table.r1) == ["07A", "09R"]
    # S1 2·2 pair beats S3 7+9 = 6 points; bob's cards stay hidden
    assert res["outcome"] == "COMPLETED" and res["winner"] == "S1" and set(res["hands"]) == {"S1", "S3"}
    assert "S2.1" not in rec.events("cards_revealed")[0]["data"]["cards"]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {
        "alice": "1035", "bob": "990", "carol": "975"}
    conserved(res, t.stakes)


# -- (d) bad actions are refused with a reason and change nothing ----------------------------------


@pytest.mark.timeout(120)
async def test_d_bad_buttons_amounts_and_out_of_turn_actions_are_refused(table: Table):
    t, rec = table, table.rec
    await t.sit({"alice": (1, "700"), "bob": (2, "700")})
    s1, s2 = t.S["S1"], t.S["S2"]
    # a card passed before the shuffle is confirmed is not registered
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "CONFIRM", what="CONFIRM SHUFFLE")
    t.shoe.scan("01G")
    await wait_until(lambda: rec.prompts("REJECTED"), what="card refused")
    assert "SHUFFLE is to be confirmed" in rec.prompts("REJECTED")[0]["message"] and t.rnd.cards == {}
    await t.confirm("SHUFFLE", at=1)
    await t.deal(("S1.1", "05R"))
    await t.refused(s1, {"type": "player_action", "player_id": s1, "action": "CHECK"}, "no betting round is open")
    await t.refused(s2, {"type": "player_action", "player_id": s2, "action": "CALL", "reserve": True},
                    "no betting round is open")
    await t.deal(("S2.1", "06A"))
    turn = await t.turn(s1)
    before = (t.rnd.turn, t.rnd.hand.betting.to_act, len(t.rnd.hand.betting.history), t.rnd.action_deadline)
    acted = len(rec.events("player_acted"))

    def action(player: str, **fields: Any) -> dict[str, Any]:
        return {"type": "player_action", "player_id": player, **fields}

    bad = [
        (s2, action(s2, action="CALL"), f"it is not {s2}'s turn (waiting for {s1})"),
        (s1, action(s1, action="BET", amount="10"), "Seotda buttons name their own amount: send BET without an amount"),
        (s1, action(s1, action="HALF", amount="15"), "send HALF without an amount"),
        (s1, action(s1, action="SHOVE"), "malformed action"),
        (s1, action(s1, action="check"), "malformed action"),
        (s1, action(s1, action="X2_RAISE"), "X2_RAISE is not allowed now: nobody has bet this round yet"),
        (s1, action(s1, action="CALL"), "nothing to call"),
        (s1, action(s1, action="RAISE"), "RAISE is not a Seotda button"),  # stud's word, not a Seotda button
        (s1, action(s1, action="BRING_IN"), "BRING_IN is not a Seotda button"),
        (s1, action(s1, action="BET", amount=10.0), "never a float"),
        (s1, action(s1, action="BET", round_id=f"{T}-000042"), "action is for round"),
        (s1, action(s1, action="BET", extra=1), "malformed action"),
        (s1, action(s1, action="CHECK", reserve=True), "it is your turn: act instead of reserving"),
        (s2, action(s2, action="CALL", reserve=True, amount="10"), "a reservation names a button, not an amount"),
        (s2, action(s2, action="SHOVE", reserve=True), "malformed action"),
        ("mallory", action("mallory", action="CHECK"), "player mallory is not in this game"),
    ]
    for player, payload, why in bad:
        await t.refused(player, payload, why)
    assert (t.rnd.turn, t.rnd.hand.betting.to_act, len(t.rnd.hand.betting.history), t.rnd.action_deadline) == before
    assert len(rec.events("player_acted")) == acted and t.rnd.phase == Phase.ACTION
    assert len(t.mine(s1, "your_turn")) == 1 and not t.mine(s1, "action_accepted") and not t.mine(s2, "action_accepted")
    assert not rec.events("reservation_accepted") and not t.mine(s2, "reservation_accepted")
    await t.press(s1, "BET", turn=turn)
    bob = await t.turn(s2)
    assert set(bob["buttons"]) == {"FOLD", "X2_RAISE", "CALL", "QUARTER", "HALF", "MAX", "ALL_IN"}
    await t.refused(s2, action(s2, action="CHECK"), "CHECK is not allowed: 10 to call")  # a call of 10 is due
    await t.refused(s2, action(s2, action="BET"), "BET is not allowed now: someone has already bet this round")
    await t.refused(s1, action(s1, action="CALL"), f"it is not {s1}'s turn")
    await t.press(s2, "FOLD", turn=bob)
    await wait_until(lambda: rec.results(table.key1), what="result")
    res = rec.results(table.key1)[0]
    # S1's bet was not called: it goes back; S1 wins the antes; nobody's cards are shown
    # the result (outbox relay) may arrive before the table's state carrying the same batch's events
    returned = await wait_until(lambda: rec.events("uncalled_returned"), what="uncalled_returned on the state")
    assert [e["data"] for e in returned] == [{"player_id": s1, "amount": "10"}]
    assert res["hands"] == {} and res["winner"] == "S1"
    assert not rec.events("cards_revealed") and "S1.2" not in res["cards"]
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {s1: "710", s2: "690"}
    assert [(a["amount"], a["result"], a["winners"]) for a in res["details"]["awards"]] == [("20", "WIN", [s1])]
    conserved(res, t.stakes)


# -- (e) the room's minimum: 60 x the stake -----------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("table, stake", [({"options": {"stake": 10}}, 10), ({"options": {"stake": 50}}, 50)],
                         indirect=["table"])
async def test_e_a_player_needs_sixty_times_the_stake(table: Table, stake: int):
    t, rec = table, table.rec
    await wait_until(lambda: rec.events("round_opened"), what="round opened")
    least = 60 * stake

    def bet(player: str, stake_: Any, seat: int | None = 1, bet_id: str | None = None) -> dict[str, Any]:
        out = {"type": "place_bet", "bet_id": bet_id or f"{player}-{stake_}", "player_id": player,
               "bet_type": "chips", "stake": stake_, "round_id": table.r1}
        return out | ({"seat": seat} if seat is not None else {})

    await t.refused("alice", bet("alice", str(least - 1)),
                    f"a player needs at least {least} chips (60 x the stake {stake}) to play")
    await t.refused("alice", bet("alice", "1"), f"at least {least} chips")
    await t.refused("bob", bet("bob", f"{least}.5", seat=2), "not a whole number")
    await t.refused("bob", bet("bob", str(least), seat=6), "seat 6 does not exist at this table (seats 1..5)")
    await t.refused("bob", bet("bob", str(least), seat=None, bet_id="bob-noseat"), "must name a seat")
    await t.refused("bob", bet("bob", str(least), seat=2, bet_id="bob-ante") | {"bet_type": "ante"},
                    "unknown bet type 'ante' for seotda")
    await t.rec.command(ACT, bet("alice", str(least)))
    await wait_until(lambda: t.mine("alice", "bet_accepted"), what="exactly the minimum accepted")
    await t.refused("alice", bet("alice", str(least), bet_id="again"), "a player brings chips to a game once")
    # the public bet_rejected events may trail the players' own answers: wait for all of them
    await wait_until(lambda: len(rec.events("bet_rejected")) >= 7, what="every bet_rejected event")
    rejected = [e["data"]["reason"] for e in rec.events("bet_rejected")]
    assert len(rejected) == 7 and t.service.tables[T].current.bets.keys() == {f"alice-{least}"}
    # one player alone cannot play: the game is cancelled and the chips go back
    t.stakes = {"alice": Decimal(least)}
    await t.rec.command(ACT, {"type": "close_betting", "by": "dealer"})
    await wait_until(lambda: rec.results(table.key1), what="refund")
    res = rec.results(table.key1)[0]
    assert res["outcome"] == "CANCELLED" and res["refund_all"] is True
    assert "seotda needs at least 2 seated players, 1 sat down" in res["reason"]
    conserved(res, t.stakes)


# -- (f) unattended: the virtual dealer and players, game after game ------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("options", [{}, {"rematch_94_mode": "PROMPT", "rematch_reentry": "HALF_POT"}],
                         ids=["defaults", "prompt-half-pot"])
async def test_dealer_and_players_play_games_in_a_row_unattended(broker: Broker, tmp_path: Path, pty_dir: Path,
                                                                 options: dict[str, str]):
    """The simulated players answer whatever turn they get: with PROMPT and HALF_POT a 9·4
    holder's REMATCH_CHOICE and a folded player's REENTRY too (the first game is dealt from a
    deck that gives S1 a 9·4 against hands no better than Al-li, as in the demo)."""
    from tools.demo import SEOTDA_REMATCH_DECK

    port = PtyPort(pty_dir, "shoe")
    # a choice variant gives players a longer turn: more turns per game, each answered in time under load
    settings = seotda_settings(tmp_path, broker.url, port.path, betting_seconds=0.8,
                               action_seconds=1.2 if options else 0.6, options={"stake": 10, **options})
    first = SEOTDA_REMATCH_DECK + [c for c in SEOTDA_20 if c not in SEOTDA_REMATCH_DECK]
    service = Service(settings, bus=MqttBus(broker.url, client_id="be"))
    sim = MqttBus(broker.url, client_id="sim")
    rec = await Recorder(broker.url).start()
    rng = random.Random(23)
    dealer = SeotdaDealer(T, VirtualShoe(READER), PtyShoeLink(port), rng=rng,
                          faults=FaultPlan(noread=0.04, garbage=0.03, drop=0.02),
                          dealer_faults=DealerFaults(foreign=0.03, duplicate=0.03), deal_interval=0.005,
                          heartbeat_interval=0.2, patience=0.5, scripted_rounds=[first] if options else ())
    dealer.subscribe(sim)
    players = [SeotdaPlayer(T, "p1", sim, "calling", seat=1, buy_in="600"),
               SeotdaPlayer(T, "p2", sim, "random", rng=random.Random(2), seat=2, buy_in="1000", reserve_rate=1.0),
               SeotdaPlayer(T, "p3", sim, "hand", seat=3, buy_in="2000"),
               SeotdaPlayer(T, "p4", sim, "disconnect", silent_after=3, seat=5, buy_in="800")]

    def completed() -> list[dict[str, Any]]:
        return [r for r in rec.results() if r["outcome"] == "COMPLETED"]

    await play_unattended(service, sim, dealer, rec, port, lambda: len(completed()) >= 6,
                          timeout=260, what="six games played")
    results = rec.results()
    keys = [r["idempotency_key"] for r in results]
    assert len(keys) == len(set(keys))  # each result once
    buy_in = {p.player_id: Decimal(p.buy_in or 0) for p in players}
    for r in results:
        rid = r["round_id"]
        conserved(r, {pid: buy_in[pid] for pid in buy_in if f"{rid}-{pid}" in r["accepted_bets"]["bet_ids"]})
    games = sorted(completed(), key=lambda r: r["round_id"])
    for prev, nxt in zip(games, games[1:]):
        # S1 of a game is the previous game's winner (the next seat clockwise if they did not sit)
        seats = sorted(s["seat"] for s in nxt["details"]["seats"].values())
        won = winner_seat(prev)
        want = next((s for s in seats if s >= won), seats[0])
        assert nxt["details"]["first_seat"] == want, (prev["details"]["awards"], nxt["details"]["seats"])
        assert nxt["details"]["seats"]["S1"]["seat"] == want
    for r in games:
        d = r["details"]
        for k in range(1, d["rematches"] + 1):  # a rematch deals the 20 cards again: R1.S1.1 ...
            decided = [a for a in d["awards"] if a["game"] == k]
            assert decided
            if any(a["result"] != "WIN" or "is the only one left" not in a["reason"] for a in decided):
                assert any(pos.startswith(f"R{k}.S") for pos in r["cards"])  # its showdown shows them
        deal0 = [c for pos, c in r["cards"].items() if position_game(pos) == 0]
        assert len(deal0) == len(set(deal0))
    assert dealer.confirms_sent >= 6 and dealer.faults_injected
    assert dealer.reshuffles >= sum(r["details"]["rematches"] for r in games)
    assert players[3].ignored  # the silent player's turns were left to the timer
    assert any(e["data"]["by"] == "timeout" and e["data"]["player_id"] == "p4" for e in rec.events("player_acted"))
    assert all(p.rejected == [] for p in players), [p.rejected for p in players]
    assert players[1].reserved  # the random player reserved buttons before its turn
    choices = [e["data"] for e in rec.events("player_acted") if e["data"].get("choice")]
    if not options:
        assert choices == []
    for c in choices:  # every choice answered with one of its actions, by the player or the timer
        assert c["action"] in {"REMATCH_94": ("REMATCH", "PLAY_ON"), "REENTRY": ("REJOIN", "SIT_OUT")}[c["choice"]]
    for r in games:  # and recorded in the result with the re-entries that were paid
        assert [c["action"] for c in r["details"].get("choices", [])] == [
            c["action"] for e in rec.events("player_acted") if e["round_id"] == r["round_id"]
            for c in [e["data"]] if c.get("choice")]
    # the players only ever saw their own cards
    for r in games:
        label = {s["player"]: k for k, s in r["details"]["seats"].items()}
        for p in players:
            for pos, _ in p.hole.get(r["round_id"], []):
                assert pos.rsplit(".", 1)[0].endswith(label[p.player_id]), (p.player_id, pos)


# -- the players' strategies, from the turn message only ------------------------------------------


def test_strategies_press_a_button_the_turn_offers():
    rng = random.Random(1)

    def b(total: str, adds: str, action: str = "BET") -> dict[str, str]:
        return {"action": action, "total": total, "adds": adds}

    free = {"stake": "10", "pot": "30", "buttons": {"FOLD": b("0", "0", "FOLD"), "CHECK": b("0", "0", "CHECK"),
                                                    "BET": b("10", "10"), "QUARTER": b("7", "7"),
                                                    "HALF": b("15", "15"), "MAX": b("990", "990", "ALL_IN"),
                                                    "ALL_IN": b("990", "990", "ALL_IN")}}
    facing = {"stake": "10", "pot": "60", "buttons": {"FOLD": b("0", "0", "FOLD"), "CALL": b("20", "20", "CALL"),
                                                      "X2_RAISE": b("40", "40", "RAISE"),
                                                      "QUARTER": b("40", "40", "RAISE"), "HALF": b("60", "60", "RAISE"),
                                                      "MAX": b("990", "990", "ALL_IN"),
                                                      "ALL_IN": b("990", "990", "ALL_IN")}}
    short = {"stake": "10", "pot": "600", "buttons": {"FOLD": b("0", "0", "FOLD"), "CALL": b("50", "50", "ALL_IN"),
                                                      "ALL_IN": b("50", "50", "ALL_IN")}}
    assert choose("calling", free, rng) == "CHECK" and choose("calling", facing, rng) == "CALL"
    assert choose("calling", short, rng) == "CALL" and choose("disconnect", facing, rng) == "CALL"
    # hand: one card stays in cheaply; two cards: raise with a pair or special, call 5+ points, else fold
    assert choose("hand", free, rng, ["03G"]) == "CHECK" and choose("hand", facing, rng, ["03G"]) == "FOLD"
    assert choose("hand", facing, rng, ["08G", "08A"]) == "HALF" and choose("hand", free, rng, ["01R", "02A"]) == "HALF"
    assert choose("hand", facing, rng, ["02A", "03R"]) == "CALL"  # 5 points
    assert choose("hand", facing, rng, ["04R", "09R"]) == "CALL"  # 9·4: may force a rematch
    assert choose("hand", facing, rng, ["02A", "08A"]) == "FOLD" and choose("hand", free, rng, ["02A", "08A"]) == "CHECK"
    seen = {choose("random", facing, rng) for _ in range(300)}
    assert seen == set(facing["buttons"])
    assert choose("calling", {"buttons": {}}, rng) == "FOLD"


def test_strategies_answer_a_choice_turn_with_one_of_its_actions():
    """A REMATCH_94 or REENTRY turn has no buttons: every strategy answers one of its actions."""
    rng = random.Random(4)
    prompt = {"choice": "REMATCH_94", "actions": ["REMATCH", "PLAY_ON"], "default": "PLAY_ON", "pot": "30"}
    offer = {"choice": "REENTRY", "actions": ["REJOIN", "SIT_OUT"], "default": "SIT_OUT", "fee": "15"}
    assert choose("calling", prompt, rng) == "PLAY_ON" and choose("calling", offer, rng) == "SIT_OUT"  # as the timer
    assert choose("disconnect", prompt, rng, ["04R", "09R"]) == "PLAY_ON"
    assert choose("hand", prompt, rng, ["04R", "09R"]) == "PLAY_ON" and choose("hand", offer, rng) == "REJOIN"
    assert {choose("random", prompt, rng) for _ in range(100)} == {"REMATCH", "PLAY_ON"}
    assert {choose("random", offer, rng) for _ in range(100)} == {"REJOIN", "SIT_OUT"}


# -- a reservation must not outlive its betting round (seotda.md §6.2) ----------------------------


def test_a_reservation_made_in_bet_1_does_not_run_in_bet_2():
    """A FOLD reserved in BET_1 by a player who then never gets a BET_1 turn (she had matched
    the level) must not fold her in BET_2, after she has seen her second card."""
    settings = seotda_settings(Path("/tmp"), None, "/dev/null")
    core = CoreTable(settings.tables[0].rules())
    msgs: list[PlayerMessage] = []

    def h(ev: Any) -> None:
        step = core.handle(ev.model_copy(update={"at": 1}))
        msgs.extend(e for e in step.effects if isinstance(e, PlayerMessage))

    h(OpenRound(round_id=R1, draw=bytes(range(32)).hex()))
    for p, seat in (("alice", 1), ("bob", 2), ("carol", 3)):
        h(PlaceBet(bet_id=p, player_id=p, bet_type="chips", stake=Decimal(1000), seat=seat))
    h(CloseBetting(by="dealer"))
    h(DealerConfirm(step="SHUFFLE"))
    label = {core.current.hand.player_at[s]: k for s, k in core.current.hand.label.items()}
    order = sorted(label, key=label.get)  # S1, S2, S3
    for code in ("01R", "02R", "03R"):
        h(ScanRead(reader=READER, code=code, seq=1))
    h(PlayerAction(player_id=order[0], action="BET"))
    h(PlayerAction(player_id=order[1], action="X2_RAISE"))
    h(PlayerAction(player_id=order[2], action="CALL"))
    h(PlayerAction(player_id=order[2], action="FOLD", reserve=True))  # S3 has matched: no more BET_1 turn
    h(PlayerAction(player_id=order[0], action="CALL"))  # BET_1 is over
    for code in ("04R", "05R", "06R"):
        h(ScanRead(reader=READER, code=code, seq=1))
    h(PlayerAction(player_id=order[0], action="CHECK"))
    h(PlayerAction(player_id=order[1], action="CHECK"))
    # S3 has seen her second card: she must get a BET_2 turn (or be told the reservation is void)
    mine = [m.kind for m in msgs if m.player_id == order[2] and m.kind in ("your_turn", "reservation_cancelled")]
    assert mine[-2:] == ["reservation_cancelled", "your_turn"] and core.current.phase == Phase.ACTION
    assert core.current.hand.betting.to_act == order[2]


# -- the demo --------------------------------------------------------------------------------------


@pytest.mark.integration
def test_demo_plays_seotda_with_antes_buttons_showdown_awards_and_a_rematch():
    from tests.harness_cli import run_cli

    out = run_cli("demo", "--game", "seotda", "--rounds", "3", "--seed", "5", timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "antes: 4 players x 10 = pot 40" in text and "dealer shuffles the 20 cards" in text
    assert "S1 = seat " in text and "face down -> player" in text
    assert "-- BET_1: " in text and "-- BET_2" in text and "to act (pot 40): FOLD | BET +10 | QUARTER +10" in text
    assert "second cards go to their owners: S1.2 -> " in text
    assert "showdown: " in text and "RESULT winner S" in text
    # game 1 is dealt from a stacked deck: S1's 9·4 against hands no better than Al-li is rematched
    game1 = re.split(r"=== T1-[a-z2-7]{8}-000002", text)[0]
    assert "REMATCH 1: the carried pot stays in; the dealer reshuffles the 20 cards" in game1
    assert "REMATCH_94: carried into a rematch among" in game1 and "-- BET_1 (rematch 1)" in game1
    assert "rematch 1: pot " in game1 and " WIN -> " in game1 and "rematches 1, rake 0" in game1
    summary = json.loads(text.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] >= 3 and summary["reconciliation_mismatches"] == []
    assert summary["faults_injected"].get("foreign_card") and summary["faults_injected"].get("duplicate_card")


@pytest.mark.timeout(120)
async def test_a_backend_down_longer_than_a_turn_gives_the_turn_again_whole(broker: Broker, tmp_path: Path,
                                                                           pty_dir: Path):
    """The backend stops on a player's turn and stays down longer than action_seconds; started
    again on the same journal it does not check or fold the player at once (a fold could
    forfeit a rematch pot): the turn is given again with a full window (resumed)."""
    shoe = HandShoe(pty_dir, reader=READER)
    rec = await Recorder(broker.url).start()
    settings = seotda_settings(tmp_path, broker.url, shoe.path, action_seconds=1.5)
    service, task = await start_service(settings)
    t = Table(service, rec, shoe)
    try:
        s1 = await t.drawn_first_seat([1, 2])
        await t.sit({"alice": (s1, "1000"), "bob": (s1 % 2 + 1, "1000")})
        await t.confirm("SHUFFLE", at=1)
        await t.deal(("S1.1", "02A"), ("S2.1", "03R"))
        turn = await t.turn("alice")
        await stop_service(task)
        await asyncio.sleep(2.5)  # longer than the turn
        seen = len(rec.messages)
        service, task = await start_service(settings)
        t.service, t.rnd = service, service.tables[T].current
        again = await wait_until(lambda: [m["data"] for tp, m in rec.messages[seen:] if tp == topics.player(T, "alice")
                                          and m["kind"] == "your_turn" and m["data"].get("resumed")],
                                 what="alice's turn given again")
        assert again[0]["turn"] == turn["turn"] and again[0]["closes_at"] > turn["closes_at"] + 2000
        assert again[0]["buttons"] == turn["buttons"]
        # protocol 2: the public events of the batch come in the state after its private messages
        given = next(i for i, (tp, m) in enumerate(rec.messages) if i >= seen and m.get("data") is again[0])
        await wait_until(lambda: any(tp == topics.state(T) for tp, _ in rec.messages[given:]),
                         what="the table's state after the turn given again")
        assert not t.acted(), "a player was acted for on restart"
        await t.press("alice", "CHECK", turn=again[0])
        acted = await wait_until(lambda: t.acted(), what="alice's action in the table's state")
        assert [(p, a, by) for p, a, _, _, by in acted][:1] == [("alice", "CHECK", "player")]
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()
