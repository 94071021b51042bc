"""A Seven-Card Stud table on the real ``dealer run`` process, SIGKILLed in the middle of a
hand and restarted with the same configuration and journal (journal replay).

Everything is observed from the outside, as the players, the dealer station and settlement
see it: a real Mosquitto, the serial shoe on a real PTY, players on their own topics."""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.cards import STANDARD_52
from drivers.mqtt import MqttBus
from simulators.pty_port import PtyPort
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import PtyShoeLink, VirtualDealer
from simulators.stud_players import StudPlayer
from tests.conftest import Broker, wait_until
from tests.harness import DealerProcess, HandShoe, Recorder, dealer_config, round_id, serial_table
from tests.harness_stud import DEAL_A, conserved

T = "ST1"
READER = "SC9"
ACT = topics.actions(T)
WAIT = 30.0  # generous: every wait is for real IO (a process start, a broker round trip)

# Seats 1, 2 and 4, the cards of test_stud_table's DEAL_A: Carol's 2 of clubs is low and
# brings in; Bob's nines open 4th street on; Carol makes four fives and wins at showdown.
DEAL = DEAL_A
SEATS = {"alice": 1, "bob": 2, "carol": 4}
CHIPS = {"alice": "20.00", "bob": "20.00", "carol": "20.00"}


def holes_of(player: str, upto: int = len(DEAL)) -> list[tuple[str, str]]:
    """The player's down cards among the first ``upto`` cards of the deal."""
    return [(p, c) for p, c in DEAL[:upto] if p.startswith(f"P{SEATS[player]}.") and p[-1] in "127"]


def write_config(tmp: Path, broker: Broker, port: str, *, betting: float = 60, action: float = 60,
                 pause: float = 0.1) -> Path:
    return dealer_config(tmp, broker_url=broker.url, node_id="test-host", client_id="backend-under-test",
                         tables=[serial_table(port, reader=READER, id=T, game="stud", betting_seconds=betting,
                                              action_seconds=action, pause_seconds=pause, options={"seats": 4})])


class StudHand:
    """The test is the dealer (a PTY shoe scanned card by card, confirmations on the actions
    topic) and the players; it sees the backend only through MQTT, like everyone else."""

    def __init__(self, rec: Recorder, shoe: HandShoe, round_id: str) -> None:
        self.rec, self.shoe, self.round_id = rec, shoe, round_id
        self.answered: set[tuple[str, int]] = set()
        self.stakes: dict[str, Decimal] = {}

    def mine(self, player: str, kind: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        return [m for t, m in self.rec.messages[since:]
                if t == topics.player(T, player) and m["round_id"] == self.round_id
                and (kind is None or m["kind"] == kind)]

    def events(self, name: str, since: int = 0) -> list[dict[str, Any]]:
        return [m for t, m in self.rec.messages[since:]
                if t == topics.events(T) and m["event"] == name and m["round_id"] == self.round_id]

    def prompts(self, since: int = 0, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for t, m in self.rec.messages[since:]
                if t == topics.table_topic(T, "prompts") and m["round_id"] == self.round_id and (kind is None or m["kind"] == kind)]

    async def sit(self, chips: dict[str, str]) -> None:
        await wait_until(lambda: any(e["round_id"] == self.round_id for e in self.rec.events("round_opened")),
                         timeout=WAIT, what=f"round {self.round_id} opened")
        self.stakes = {p: Decimal(c) for p, c in chips.items()}
        for p, c in chips.items():
            await self.rec.command(ACT, {"type": "place_bet", "bet_id": f"{self.round_id}-{p}", "player_id": p,
                                         "bet_type": "chips", "stake": c, "seat": SEATS[p],
                                         "round_id": self.round_id})
        await wait_until(lambda: all(self.mine(p, "bet_accepted") for p in chips), timeout=WAIT,
                         what="every player seated")
        await self.rec.command(ACT, {"type": "close_betting", "by": "dealer"})

    async def confirm(self, step: str) -> None:
        await wait_until(lambda: (p := self.rec.last_prompt()) is not None and p["kind"] == "CONFIRM"
                         and p["position"] == step and p["round_id"] == self.round_id,
                         timeout=WAIT, what=f"CONFIRM {step}")
        await self.rec.command(ACT, {"type": "dealer_confirm", "step": step})

    async def deal(self, *cards: tuple[str, str]) -> None:
        """Scan each (position, code) once the station asks for it; wait until it registered."""
        for pos, code in cards:
            await wait_until(lambda: self.rec.expects(pos, self.round_id), timeout=WAIT, what=f"NEXT {pos}")
            self.shoe.scan(code)
            reg = await wait_until(lambda: [e["data"] for e in self.events("card_registered")
                                            if e["data"]["position"] == pos], timeout=WAIT, what=f"{pos} registered")
            assert reg[0]["card"] in (code, None)  # down and burn cards are not public

    def open_turn(self, player: str, since: int = 0) -> dict[str, Any] | None:
        return next((m["data"] for m in self.mine(player, "your_turn", since)
                     if (player, m["data"]["turn"]) not in self.answered), None)

    async def turn(self, player: str) -> dict[str, Any]:
        """Wait for the player's next ``your_turn`` (not yet answered); returns its data."""
        return await wait_until(lambda: self.open_turn(player), timeout=WAIT, what=f"{player}'s turn")

    async def act(self, player: str, action: str, amount: str | None = None) -> dict[str, Any]:
        data = await self.turn(player)
        assert action in data["actions"], (player, action, data)
        self.answered.add((player, data["turn"]))
        n = len(self.mine(player, "action_accepted"))
        await self.rec.command(ACT, {"type": "player_action", "player_id": player, "action": action,
                                     "amount": amount, "round_id": self.round_id})
        await wait_until(lambda: len(self.mine(player, "action_accepted")) > n, timeout=WAIT,
                         what=f"{player} {action} accepted")
        return data

    async def check_around(self, players: int) -> None:
        """A betting round where everyone still in checks (whoever is asked, in the backend's order)."""
        for _ in range(players):
            who = await wait_until(lambda: next((p for p in SEATS if self.open_turn(p)), None), timeout=WAIT,
                                   what="someone's turn")
            await self.act(who, "CHECK")

    async def result(self) -> dict[str, Any]:
        key = f"{T}:{self.round_id}"
        await wait_until(lambda: self.rec.results(key), timeout=WAIT, what=f"result of {self.round_id}")
        series, seq = self.round_id.rsplit("-", 1)
        nxt = f"{series}-{int(seq) + 1:06d}"
        await wait_until(lambda: any(e["round_id"] == nxt for e in self.rec.events("round_opened")),
                         timeout=WAIT, what="the next round")  # the result was delivered: the table moved on
        assert len(self.rec.results(key)) == 1
        return self.rec.results(key)[0]


def _clean_log(log: Path) -> None:
    text = log.read_text()
    assert "Traceback" not in text
    assert "journal replay rejected an event" not in text


@pytest.fixture
async def stud_table(broker: Broker, tmp_path: Path, pty_dir: Path):
    shoe = HandShoe(pty_dir, reader=READER)
    rec = await Recorder(broker.url).start()
    first = round_id(tmp_path / "journal.sqlite", 1, T)  # creates the journal the backend opens
    backend = DealerProcess(write_config(tmp_path, broker, shoe.path), tmp_path / "backend.log")
    backend.start()
    try:
        yield StudHand(rec, shoe, first), backend
    finally:
        backend.stop()
        await rec.stop()
        shoe.close()
    _clean_log(tmp_path / "backend.log")


@pytest.mark.timeout(90)
async def test_killed_during_a_betting_round_resumes_at_the_same_turn(stud_table: tuple[StudHand, DealerProcess]):
    h, backend = stud_table
    rec = h.rec
    await h.sit(CHIPS)
    await h.confirm("WASH")
    await h.confirm("SHUFFLE")
    await h.deal(*DEAL[:9])
    await h.act("carol", "BRING_IN", "0.50")  # the 2 of clubs is low
    await h.act("alice", "RAISE", "1.00")
    before = await h.turn("bob")
    await wait_until(lambda: (p := rec.last_prompt()) and p["kind"] == "WAIT" and "bob to act" in p["message"],
                     timeout=WAIT, what="station WAIT for bob")
    wait_before = rec.last_prompt()
    assert before["turn"] == 3 and before["street"] == "3rd" and before["call"] == "1.00"  # chips a call adds

    backend.kill()  # bob's turn is open: two actions are journaled, his is not
    seen = len(rec.messages)
    backend.start()

    # the player to act gets the same turn again, whole: same number and options, a new
    # deadline from the restart (journaled with the Resume), and told it is resumed
    again = await wait_until(lambda: [m for m in h.mine("bob", "your_turn", seen) if m["data"].get("resumed")],
                             timeout=WAIT, what="bob's turn re-sent")
    assert {k: v for k, v in again[0]["data"].items() if k not in ("closes_at", "resumed")} == \
           {k: v for k, v in before.items() if k != "closes_at"}
    assert again[0]["data"]["closes_at"] > before["closes_at"]
    # every seated player gets their hole cards again, and nobody else's
    for player in SEATS:
        await wait_until(lambda: len(h.mine(player, "hole_card", seen)) >= 2, timeout=WAIT,
                         what=f"{player}'s hole cards re-sent")
        assert sorted((m["data"]["position"], m["data"]["card"]) for m in h.mine(player, "hole_card", seen)) \
            == sorted(holes_of(player, 9))
    # the station: WAIT, bob to act, as before the kill
    prompt = await wait_until(lambda: h.prompts(seen), timeout=WAIT, what="prompt from the restarted backend")
    assert prompt[0]["kind"] == "WAIT" and "bob to act" in prompt[0]["message"]
    assert (prompt[0]["message"], prompt[0]["announce"]) == (wait_before["message"], wait_before["announce"])
    assert prompt[0]["announce"] == "Two of clubs, low"
    # nobody else was given a turn, nothing acted for bob; bob's turn was resumed, not renumbered
    assert not h.mine("alice", "your_turn", seen) and not h.mine("carol", "your_turn", seen)
    assert not h.events("player_acted", seen)
    assert [(e["data"]["turn"], e["data"]["player_id"], e["data"].get("resumed")) for e in h.events("turn", seen)] \
        == [(3, "bob", True)]

    await h.act("bob", "CALL")
    await h.act("carol", "CALL")
    for lo, hi in ((9, 13), (13, 17), (17, 21), (21, 25)):
        await h.deal(*DEAL[lo:hi])
        await h.check_around(3)
    res = await h.result()

    assert res["outcome"] == "COMPLETED" and res["winner"] == "P4"  # Carol: four fives
    assert res["cards"] == {p: c for p, c in DEAL if p.startswith("P")}
    d = res["details"]
    acts = [(a["player_id"], a["action"], a["total"], a["by"]) for a in d["actions"]]
    assert acts[:4] == [("carol", "BRING_IN", "0.50", "player"), ("alice", "RAISE", "1.00", "player"),
                        ("bob", "CALL", "1.00", "player"), ("carol", "CALL", "1.00", "player")]
    assert all(a[1] == "CHECK" and a[3] == "player" for a in acts[4:]) and len(acts) == 4 + 4 * 3
    assert d["contributions"] == {"alice": "1.00", "bob": "1.00", "carol": "1.00"}
    assert d["total_pot"] == "3.00" and d["rake"] == "0.30"
    assert {p: b["chips"]["returned"] for p, b in res["player_bets"].items()} == {
        "alice": "19.00", "bob": "19.00", "carol": "21.70"}
    conserved(res, h.stakes)
    # one turn per action: the restart neither renumbered nor added a turn (it resumed one)
    turns = [e["data"]["turn"] for e in h.events("turn") if not e["data"].get("resumed")]
    assert turns == list(range(1, len(acts) + 1))


@pytest.mark.timeout(90)
async def test_killed_and_down_longer_than_the_turn_the_player_is_not_folded(broker: Broker, tmp_path: Path,
                                                                            pty_dir: Path):
    """SIGKILL on a player's turn, down longer than action_seconds: on restart the turn is not
    timed out at once; it is given again, whole, and the player acts in it."""
    shoe = HandShoe(pty_dir, reader=READER)
    rec = await Recorder(broker.url).start()
    log = tmp_path / "backend.log"
    first = round_id(tmp_path / "journal.sqlite", 1, T)  # creates the journal the backend opens
    backend = DealerProcess(write_config(tmp_path, broker, shoe.path, action=3), log)
    backend.start()
    h = StudHand(rec, shoe, first)
    try:
        await h.sit(CHIPS)
        await h.confirm("WASH")
        await h.confirm("SHUFFLE")
        await h.deal(*DEAL[:9])
        await h.act("carol", "BRING_IN", "0.50")
        before = await h.turn("alice")
        backend.kill()
        await asyncio.sleep(4.5)  # longer than the turn
        seen = len(rec.messages)
        backend.start()
        again = await wait_until(lambda: [m for m in h.mine("alice", "your_turn", seen) if m["data"].get("resumed")],
                                 timeout=WAIT, what="alice's turn given again")
        assert again[0]["data"]["turn"] == before["turn"] and again[0]["data"]["actions"] == before["actions"]
        assert again[0]["data"]["closes_at"] > before["closes_at"] + 4000
        # protocol 2: the public events of the batch come in the state after its private messages
        given = next(i for i, (tp, m) in enumerate(rec.messages) if i >= seen and m is again[0])
        await wait_until(lambda: any(tp == topics.state(T) for tp, _ in rec.messages[given:]), timeout=WAIT,
                         what="the table's state after the turn given again")
        assert not h.events("player_acted", seen), "a player was acted for on restart"
        await h.act("alice", "CALL")
        acted = await wait_until(lambda: h.events("player_acted", seen), timeout=WAIT,
                                 what="alice's action in the table's state")
        assert [(e["data"]["player_id"], e["data"]["by"]) for e in acted][:1] == [("alice", "player")]
    finally:
        backend.stop()
        await rec.stop()
        shoe.close()
    _clean_log(log)


@pytest.mark.timeout(90)
async def test_killed_mid_street_resumes_the_deal_at_the_same_position(stud_table: tuple[StudHand, DealerProcess]):
    h, backend = stud_table
    rec = h.rec

    async def kill_at(pos: str) -> tuple[dict[str, Any], int]:
        """Kill while the station asks for ``pos``; return the restarted backend's first prompt
        and where its messages start in the recording."""
        await wait_until(lambda: rec.expects(pos, h.round_id), timeout=WAIT, what=f"NEXT {pos}")
        before = rec.last_prompt()
        backend.kill()
        seen = len(rec.messages)
        backend.start()
        first = await wait_until(lambda: h.prompts(seen), timeout=WAIT, what="prompt from the restarted backend")
        assert first[0]["kind"] == "NEXT"
        assert {k: first[0][k] for k in ("round_id", "position", "step", "of", "message")} == \
               {k: before[k] for k in ("round_id", "position", "step", "of", "message")}
        return first[0], seen

    await h.sit(CHIPS)
    await h.confirm("WASH")
    await h.confirm("SHUFFLE")
    # 3rd street: killed after four cards (Alice's two hole cards among them)
    await h.deal(*DEAL[:4])
    first, seen = await kill_at("P2.2")
    assert (first["step"], first["of"]) == (2 + 5, 2 + 9)  # WASH, SHUFFLE, four cards; 3rd street planned
    for player, n in (("alice", 2), ("bob", 1), ("carol", 1)):  # the hole cards so far, again
        await wait_until(lambda: len(h.mine(player, "hole_card", seen)) >= n, timeout=WAIT,
                         what=f"{player}'s hole cards re-sent")
        assert sorted((m["data"]["position"], m["data"]["card"]) for m in h.mine(player, "hole_card", seen)) \
            == sorted(holes_of(player, 4))
    await h.deal(*DEAL[4:9])
    await h.act("carol", "BRING_IN", "0.50")
    await h.act("alice", "CALL")
    await h.act("bob", "CALL")
    # 4th street: killed after the burn and Alice's card
    await h.deal(*DEAL[9:11])
    first, _ = await kill_at("P2.4")
    assert (first["step"], first["of"]) == (2 + 12, 2 + 13)
    # the cards registered before the kill are kept: Alice's 4th-street card is refused as a duplicate
    n = len(h.prompts(kind="RESCAN"))
    h.shoe.scan("QH")
    rescan = await wait_until(lambda: h.prompts(kind="RESCAN")[n:], timeout=WAIT, what="RESCAN")
    assert (rescan[0]["position"], rescan[0]["reason"], rescan[0]["step"]) == ("P2.4", "duplicate_card", 2 + 12)
    await h.deal(*DEAL[11:13])
    await h.check_around(3)
    for lo, hi in ((13, 17), (17, 21), (21, 25)):
        await h.deal(*DEAL[lo:hi])
        await h.check_around(3)
    res = await h.result()

    assert res["outcome"] == "COMPLETED" and res["winner"] == "P4"
    assert res["cards"] == {p: c for p, c in DEAL if p.startswith("P")}
    # every position registered exactly once, in the deal order, across both restarts
    registered = [e["data"]["position"] for e in h.events("card_registered")]
    assert registered == [p for p, _ in DEAL]
    steps = [e["data"]["step"] for e in h.events("card_registered")]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert res["details"]["contributions"] == {"alice": "0.50", "bob": "0.50", "carol": "0.50"}
    conserved(res, h.stakes)


@pytest.mark.timeout(120)
async def test_kill_at_random_instants_during_stud_hands(broker: Broker, tmp_path: Path, pty_dir: Path):
    """The virtual dealer and bots play stud hand after hand while the backend is SIGKILLed at
    random moments: no hand loses its result, no result changes, every result conserves chips.

    A bot's answer lost with the backend is not sent again (it answers each turn once): the
    backend's turn timer acts for it, as for any silent player."""
    rng = random.Random(7)
    port = PtyPort(pty_dir, "shoe")
    sim = MqttBus(broker.url, client_id="sim")
    rec = await Recorder(broker.url).start()
    dealer = VirtualDealer(T, VirtualShoe(READER), PtyShoeLink(port), deck=STANDARD_52, rng=rng,
                           faults=FaultPlan(noread=0.03), deal_interval=0.01, heartbeat_interval=0.2, patience=0.5)
    dealer.subscribe(sim)
    players = [StudPlayer(T, "p1", sim, "calling", seat=1, buy_in="40.00"),
               StudPlayer(T, "p2", sim, "random", rng=random.Random(3), seat=2, buy_in="8.00"),
               StudPlayer(T, "p3", sim, "aggressive", seat=3, buy_in="25.00")]
    buy_in = {p.player_id: Decimal(p.buy_in or 0) for p in players}
    tasks = [asyncio.create_task(sim.run())]
    await asyncio.wait_for(sim.wait_connected(), 10)
    tasks.append(asyncio.create_task(dealer.run()))
    log = tmp_path / "backend.log"
    backend = DealerProcess(write_config(tmp_path, broker, port.path, betting=0.5, action=1.0), log)
    backend.start()

    def seqs() -> set[int]:
        return {int(r["round_id"].rsplit("-", 1)[1]) for r in rec.results()}

    try:
        for _ in range(4):
            await asyncio.sleep(rng.uniform(1.0, 4.0))  # the chaos: a kill at an arbitrary instant
            backend.kill()
            backend.start()
        # every round opened so far, and a few more, end with a result
        opened = max((int(e["round_id"].rsplit("-", 1)[1]) for e in rec.events("round_opened")), default=1)
        await wait_until(lambda: (s := seqs()) and s >= set(range(1, max(opened, 1) + 3)), timeout=60,
                         what=f"results of rounds 1..{opened + 2}")
    finally:
        backend.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await rec.stop()
        port.close()

    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in rec.results():
        by_key.setdefault(r["idempotency_key"], []).append(r)
    assert all(all(r == rs[0] for r in rs) for rs in by_key.values()), "a result was published with different content"
    got = sorted(seqs())
    assert got == list(range(1, got[-1] + 1)), f"a round has no result: {got}"
    completed = 0
    for rs in by_key.values():
        r = rs[0]
        conserved(r, {pid: buy_in[pid] for pid in buy_in if f"{r['round_id']}-{pid}" in r["accepted_bets"]["bet_ids"]})
        if r["outcome"] == "COMPLETED":
            completed += 1
            assert len(set(r["cards"].values())) == len(r["cards"])
    assert completed >= 2, [(k, rs[0]["outcome"], rs[0]["reason"]) for k, rs in sorted(by_key.items())]
    _clean_log(log)
