"""Catching up (``dealer/edge/catchup.py``, ``docs/mqtt-topics.md`` §4.8): a client that subscribes
at any moment gets the table's round state with its current prompt (protocol 2: the state's
``prompt``) and (a player) its own private state at once, as retained messages, and can tell
from the retained messages alone whether they are current.

* Pure: which messages a round produces, only when they change or carry news (the events and
  prompts of their batch), numbered, cleared when the round is settled, marked stale on a stop;
  over random rounds of all five games, no catch-up message shows its audience a card it may
  not see (the visibility test's own oracle).
* The real service over a real Mosquitto: a station that connects mid-deal gets the prompt at
  once, a player that connects mid-decision gets its cards and its pending decision, a clean
  stop marks everything stale.
* The real ``dealer run`` process killed with SIGKILL: a fresh subscriber can tell the prompt
  it left is stale (the last will); after a restart the prompt is current again.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dealer.edge import topics

from dealer.core import visibility
from dealer.edge.catchup import STOPPED_REASON, Catchup, News, is_current
from dealer.edge.config import load_settings
from dealer.core.events import CloseBetting, Event, OpenRound, PlaceBet, PlayerDecision, ResultDelivered, ScanRead
from dealer.core.messages import PlayerState, RoundEvent, StationPrompt, TableHistory, TableState
from dealer.core.round import Step
from dealer.core.table import Table
from dealer.edge.runner import build_bus
from dealer.edge.service import Service
from drivers.mqtt import parse_broker_url
from tests.conftest import Broker, free_port, wait_until
from tests.harness import (DEAL, TABLE, DealerProcess, HandShoe, Recorder, dealer_config, round_id, serial_table,
                           settings_for, stop_service)
from tests.harness_visibility import GAMES, Run, Script

# The broker scenarios run on Mosquitto, RabbitMQ and NATS: catch-up reads retained messages by exact
# topic, which RabbitMQ 3.10 replays (not by wildcard, docs/brokers.md).
pytestmark = pytest.mark.any_broker

NODE = "n1"
ROOT = Path(__file__).resolve().parent.parent


# --- the staleness rule ---------------------------------------------------------------------------


def test_a_retained_message_is_current_only_while_its_session_is_online():
    msg = {"node_id": NODE, "session": "abcd0123.2", "stale": False, "version": 7}
    assert is_current(msg, {"online": True, "session": "abcd0123.2"})
    assert not is_current(msg, {"online": False, "session": "abcd0123.2"})  # the last will: the backend died
    assert not is_current(msg, {"online": True, "session": "abcd0123.3"})  # a newer connection, not resent yet
    assert not is_current(msg, {"online": True, "session": "99990000.1"})  # another instance (a restart)
    assert not is_current(msg | {"stale": True}, {"online": True, "session": "abcd0123.2"})  # a clean stop
    assert not is_current(msg, None) and not is_current(None, {"online": True, "session": "abcd0123.2"})
    assert not is_current({"stale": False}, {"online": True})  # a status from before sessions names none


# --- pure: what a round produces ------------------------------------------------------------------


def _sent(updates: list[tuple[str, Any]]) -> dict[str, Any]:
    return {topic: msg for topic, msg in updates}


def test_sevenluck_round_state_player_states_versions_and_the_clear_at_settlement():
    s = Script("sevenluck")
    c = Catchup(NODE, first_version=5_000)
    first = _sent(c.updates(s.t, session="i.1", at=1))
    state = first.pop(topics.state("T1"))
    hist = first.pop(topics.history("T1"))
    assert first == {} and isinstance(state, TableState) and isinstance(hist, TableHistory)
    assert (state.phase, state.round_id, state.node_id, state.session, state.version) == \
        ("BETTING_OPEN", "T1-000001", NODE, "i.1", 5_001)
    assert (hist.rounds, hist.dealers, hist.version) == ([], [], 5_002)  # no round has ended yet
    assert state.phase_since == 1 and state.dealt == [] and state.mode == "open" and state.unsettled == 0
    assert state.betting_closes_at == s.r.betting_closes_at and state.cards == {} and not state.stale
    assert c.updates(s.t, session="i.1", at=2) == []  # nothing changed: nothing sent
    s.bet("ann", "ante", "10", seat=1)
    s.bet("bob", "ante", "10", seat=2)
    got = _sent(c.updates(s.t, session="i.1", at=3))
    assert set(got) == {topics.player_state("T1", "ann"), topics.player_state("T1", "bob")}  # bets: the state is as it was
    ann = got[topics.player_state("T1", "ann")]
    assert isinstance(ann, PlayerState) and ann.seat == 1 and ann.cards == {}
    assert [(b.bet_id, b.stake) for b in ann.bets] == [("ann-ante", Decimal("10"))]
    s.close()
    s.deal("2C", "7D", "QS", "3C")
    got = _sent(c.updates(s.t, session="i.1", at=4))
    state = got[topics.state("T1")]
    assert (state.phase, state.position, state.cards) == ("DEALING", "P2.2", {})  # hole and dealer cards: not public
    assert state.dealt == ["P1.1", "P2.1", "D.1", "P1.2"] and state.phase_since == 4  # shown as backs
    assert got[topics.player_state("T1", "ann")].cards == {"P1.1": "2C", "P1.2": "3C"}
    assert got[topics.player_state("T1", "bob")].cards == {"P2.1": "7D"}
    versions = [m.version for _, m in c.updates(s.t, session="i.1", at=5)]
    assert versions == []
    s.deal("8D", "KS", "4C", "9D", "JS")
    got = _sent(c.updates(s.t, session="i.1", at=6))
    assert got[topics.state("T1")].decision_closes_at == s.r.decision_deadline is not None
    ann = got[topics.player_state("T1", "ann")]
    assert ann.decision == {"actions": ["PLAY", "FOLD"], "closes_at": s.r.decision_deadline, "seat": 1}
    assert ann.cards == {"P1.1": "2C", "P1.2": "3C", "P1.3": "4C"} and ann.decided is None
    assert sorted(m.version for m in got.values()) == list(range(5_008, 5_011))  # one counter per table
    s.step(PlayerDecision(player_id="bob", action="FOLD"))
    s.step(PlayerDecision(player_id="ann", action="PLAY"))
    got = _sent(c.updates(s.t, session="i.1", at=7))
    state = got[topics.state("T1")]
    assert state.phase == "RESULT" and state.outcome == "COMPLETED"
    assert set(state.cards) == {"P1.1", "P1.2", "P1.3", "D.1", "D.2", "D.3"}  # shown: ann's and the dealer's
    assert got[topics.player_state("T1", "bob")].decided.action == "FOLD"  # type: ignore[union-attr]
    assert got[topics.player_state("T1", "bob")].cards == {"P2.1": "7D", "P2.2": "8D", "P2.3": "9D"}  # its own
    assert state.unsettled == 1  # settlement has not acknowledged the result yet
    line = got[topics.history("T1")].rounds[0]  # the round ended: on the history, without card codes
    assert (line.round_id, line.outcome, line.dealt, line.rescans) == ("T1-000001", "COMPLETED", 9, 0)
    assert not any(code in got[topics.history("T1")].model_dump_json() for code in state.cards.values())
    # settlement acknowledges: the players' retained states are cleared (bounded retained topics)
    assert s.step(ResultDelivered(round_id="T1-000001", idempotency_key="T1:T1-000001")).accepted
    got = _sent(c.updates(s.t, session="i.1", at=8))
    assert got[topics.player_state("T1", "ann")] is None and got[topics.player_state("T1", "bob")] is None
    assert got[topics.state("T1")].phase == "SETTLED"
    assert c.updates(s.t, session="i.1", at=9) == []  # cleared once
    # a new session sends everything again; a stop marks it stale
    c.forget()
    assert [t for t, _ in c.updates(s.t, session="i.2", at=10)] == [topics.state("T1"), topics.history("T1")]
    stopped = _sent(c.stopped(s.t, session="i.2", at=11))
    state = stopped[topics.state("T1")]
    prompt = state.prompt
    assert isinstance(state, TableState) and state.stale and prompt is not None and prompt.kind == "WAIT"
    assert prompt.reason == STOPPED_REASON and "do not deal" in prompt.message
    assert state.prompts == [prompt] and state.events == []  # the stop's prompt is the news of the stale state


def test_the_current_prompt_is_the_latest_released_and_sent_only_when_it_changes():
    """Protocol 2: the state carries the latest prompt released (``prompt``) and the news of the
    batch it follows (``events``, ``prompts``, in order); a state goes when the table changed or
    when it has news, never twice for nothing new."""
    s = Script("sevenluck")
    c = Catchup(NODE, first_version=0)
    first = _sent(c.updates(s.t, session="i.1", at=1))[topics.state("T1")]
    assert (first.prompt, first.events, first.prompts, first.version) == (None, [], [], 1)  # history: 2
    p = StationPrompt(table_id="T1", round_id="T1-000001", kind="NEXT", position="A1", step=1, of=6,
                      message="deal A1 (face up)", at=10)
    c.set_prompt(p)
    assert c.prompts["T1"] == p
    state = _sent(c.updates(s.t, session="i.1", at=2, news=News(prompts=[p])))[topics.state("T1")]
    assert (state.prompt, state.prompts, state.events, state.version) == (p, [p], [], 3)
    assert c.updates(s.t, session="i.1", at=3) == []  # nothing new: nothing sent
    # the same prompt again: its copy goes only as news (the retained content does not change)
    c.set_prompt(p)
    assert c.updates(s.t, session="i.1", at=4) == []
    # two prompts and an event in one batch: all of them, in order; the prompt is the last
    q, r = (p.model_copy(update={"position": pos, "step": n, "at": 30}) for pos, n in (("B1", 2), ("C1", 3)))
    ev = RoundEvent(table_id="T1", round_id="T1-000001", event="card_registered", at=30,
                    data={"position": "A1", "step": 1, "card": "QH"})
    for x in (q, r):
        c.set_prompt(x)
    state = _sent(c.updates(s.t, session="i.1", at=5, news=News(events=[ev], prompts=[q, r])))[topics.state("T1")]
    assert (state.prompt, state.prompts, state.events, state.version) == (r, [q, r], [ev], 4)
    assert c.prompts["T1"].position == "C1"
    # an event alone, the table as it was: the state goes again, with it (a client misses nothing)
    state = _sent(c.updates(s.t, session="i.1", at=6, news=News(events=[ev])))[topics.state("T1")]
    assert (state.prompt, state.prompts, state.events, state.version) == (r, [], [ev], 5)
    assert c.updates(s.t, session="i.1", at=7) == []


def test_a_prompt_announced_at_once_is_the_last_state_again_with_it():
    """``Catchup.announce``: a prompt that cannot wait for a batch goes as a copy of the last
    state built, with the new prompt and a higher version (nothing before a first state)."""
    s = Script("sevenluck")
    c = Catchup(NODE, first_version=0)
    alert = StationPrompt(table_id="T1", round_id=None, kind="ALERT", reason="journal_unavailable",
                          message="stop dealing", at=20)
    c.set_prompt(alert)
    assert c.announce("T1", News(prompts=[alert]), at=20) is None  # no state built yet: the next one carries it
    first = _sent(c.updates(s.t, session="i.1", at=21))[topics.state("T1")]
    assert first.prompt == alert
    s.bet("ann", "ante", "10", seat=1)  # the table moves on in memory (a batch not journaled yet) ...
    again = alert.model_copy(update={"at": 30})
    c.set_prompt(again)
    msg = c.announce("T1", News(prompts=[again]), at=30)
    assert msg is not None and msg.version > first.version and msg.at == 30
    assert (msg.prompt, msg.prompts, msg.events) == (again, [again], [])
    # ... but the announced state is the one built before it, never a state of an unjournaled batch
    assert msg.model_dump(exclude={"version", "at", "prompt", "prompts", "events"}) == \
        first.model_dump(exclude={"version", "at", "prompt", "prompts", "events"})
    assert c.updates(s.t, session="i.1", at=31)[0][1].version > msg.version  # type: ignore[union-attr]


def test_a_player_state_names_the_newest_unsettled_round_and_teen_patti_bettors_have_none():
    s = Script("teen-patti")
    s.bet("ann", "player_a", "10")
    assert [t for t, _ in Catchup(NODE, 0).updates(s.t, session="i.1", at=1)] == [topics.state("T1"),
                                                                                  topics.history("T1")]


def test_the_examples_in_the_protocol_document_are_what_the_code_publishes():
    """docs/mqtt-topics.md §4.8: a Sevenluck round with two seats, replayed through the pure
    core; each example there must be exactly a message the catch-up builds for it."""
    s = load_settings(service={"metrics_enabled": False},
                      tables=[{"id": "SL1", "game": "sevenluck", "options": {"seats": 3},
                               "scanner": {"kind": "mqtt", "reader_id": "SC3"}}])
    t = Table(s.tables[0].rules(), series="h4k2x7qa")
    t.last_seq = 6
    at = 1767261600000
    rid = t.next_round_id()
    c = Catchup("studio-host-1", first_version=1767261540000000)
    made: list[str] = []

    def handle(ev: Event, keep: str | None = None) -> None:
        """One batch, as the service runs it: the event, then the states it leads to with its
        news; ``keep``: the topic whose message this batch sends is an example."""
        step = t.handle(ev.model_copy(update={"at": at}))
        assert step.accepted, step.effects
        news = News()
        for e in step.effects:
            if isinstance(e, StationPrompt):
                c.set_prompt(e)
                news.prompts.append(e)
            elif isinstance(e, RoundEvent):
                news.events.append(e)
        made.extend(m.model_dump_json() for topic, m in c.updates(t, session="5f3a9c1e.1", at=at + 3, news=news)
                    if topic == keep and m is not None)

    handle(OpenRound(round_id=rid, betting_closes_at=at + 15000))
    at += 2100
    handle(PlaceBet(bet_id="bet-9101", player_id="player-3", bet_type="ante", stake=Decimal("10.00"), seat=3,
                    round_id=rid))
    handle(PlaceBet(bet_id="bet-9102", player_id="player-5", bet_type="ante", stake=Decimal("10.00"), seat=1,
                    round_id=rid))
    at = 1767261615000
    handle(CloseBetting(by="timer"))
    cards = ["4H", "QC", "9S", "JH"]
    for i, code in enumerate(cards):  # the state after the 4th card's batch: what a station gets mid-deal
        at += 1700
        handle(ScanRead(reader="SC3", code=code), keep=topics.state("SL1") if i == len(cards) - 1 else None)
    cards = ["2S", "KD", "TC", "8D", "3S"]
    for i, code in enumerate(cards):  # player-3's state after the last card: what it gets while deciding
        at += 1700
        handle(ScanRead(reader="SC3", code=code),
               keep=topics.player_state("SL1", "player-3") if i == len(cards) - 1 else None)
    doc = (ROOT / "docs" / "mqtt-topics.md").read_text()
    section = doc[doc.index("### 4.8"):doc.index("## 5. Settlement")]
    assert re.findall(r"```json\n(.*?)\n```", section, re.S) == made


class CatchupRun(Run):
    """A random round (the visibility test's), with the catch-up messages taken after every
    event and checked against the oracle's own idea of who may know which card."""

    def __init__(self, game: str, seed: int) -> None:
        super().__init__(game, seed)
        self.catchup = Catchup(NODE, first_version=0)
        self.retained: dict[str, Any] = {}
        self.last_version = 0

    def feed(self, ev: Event) -> Step:
        step = super().feed(ev)
        self.take()
        return step

    def take(self) -> None:
        rnd = self.t.current
        for topic, msg in self.catchup.updates(self.t, session="i.1", at=self.at):
            self.retained[topic] = msg
            if msg is None:
                continue
            assert msg.version > self.last_version
            self.last_version = msg.version
            text = msg.model_dump_json()
            audience = topics.audience(topic)
            assert audience is not None
            who = audience[len("player:"):] if audience.startswith("player:") else None
            allowed = self.oracle.public | (self.oracle.told.get(who, set()) if who else set())
            assert rnd is not None
            leaked = self.oracle.named(text, rnd) - allowed
            assert not leaked, (topic, leaked, msg)
            assert visibility.leaks(rnd, audience, text) == [], (topic, msg)
            if isinstance(msg, PlayerState):
                assert who == msg.player_id != "house-ai"
                assert set(msg.cards.values()) == self.oracle.told.get(who, set()), (who, msg.cards)


@pytest.mark.slow
@pytest.mark.parametrize("game", GAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_property_catch_up_messages_show_no_card_their_audience_may_not_see(game: str, seed: int):
    run = CatchupRun(game, seed)
    run.play()
    r = run.r
    assert r.result is not None
    state = run.retained[topics.state("T1")]
    assert state.phase == r.phase.value and state.round_id == r.round_id and state.outcome == r.result.outcome
    assert set(state.cards.values()) == set(r.result.cards.values())  # what the result shows, the state shows
    run.feed(ResultDelivered(round_id=r.round_id, idempotency_key=f"T1:{r.round_id}"))
    players = {t: m for t, m in run.retained.items() if "/players/" in t}
    assert all(m is None for m in players.values()), "every player state is cleared once the round is settled"
    if r.seat_owner or r.deciders:  # not Teen Patti, nor a SHARED Sevenluck round cancelled before its deal
        assert players, "seated players had a private state"


# --- the real service over a real Mosquitto -------------------------------------------------------


async def catch_up(url: str, *filters: str, node: str) -> dict[str, Any]:
    """What a client that connects now gets at once: the retained messages on ``filters`` (topic
    -> decoded payload), and the node's retained status under ``"status"``. The status filter is
    subscribed last: once its retained message is here, so is every earlier filter's."""
    host, port, _ = parse_broker_url(url)
    got: dict[str, Any] = {}
    status = topics.backend_status(node)
    async with asyncio.timeout(15), aiomqtt.Client(host, port, identifier=f"late-{uuid.uuid4().hex[:8]}") as c:
        for f in filters:
            await c.subscribe(f, qos=1)
        await c.subscribe(status, qos=1)
        async for m in c.messages:
            payload = bytes(m.payload)  # type: ignore[arg-type]
            got["status" if str(m.topic) == status else str(m.topic)] = json.loads(payload) if payload else None
            if str(m.topic) == status:
                return got
    raise AssertionError("unreachable")


def _seven(tmp: Path, url: str, shoe: HandShoe) -> Any:
    cfg = settings_for(tmp, url, shoe.path, game="sevenluck", betting_seconds=600, decision_seconds=600,
                       options={"seats": 3})
    return cfg.model_copy(update={"service": cfg.service.model_copy(update={"node_id": NODE})})


@pytest.mark.timeout(90)
async def test_a_station_connecting_mid_deal_and_a_player_mid_decision_catch_up_at_once(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    cfg = _seven(tmp_path, broker.url, shoe)
    service = Service(cfg, bus=build_bus(cfg))  # as `dealer run` builds it: with its status and last will
    task = asyncio.create_task(service.run())
    await wait_until(lambda: service.bus.connected, what="backend connected")
    act, station = topics.actions(TABLE), topics.station(TABLE)
    deal = {"P1.1": "2C", "P2.1": "7D", "D.1": "QS", "P1.2": "3C", "P2.2": "8D", "D.2": "KS", "P1.3": "4C",
            "P2.3": "9D", "D.3": "JS"}
    stopped = False
    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        rid = round_id(service, 1)
        for seat, player in ((1, "ann"), (2, "bob")):
            await rec.command(act, {"type": "place_bet", "bet_id": f"ante-{player}", "player_id": player,
                                    "bet_type": "ante", "stake": "10", "seat": seat})
        await wait_until(lambda: len(rec.events("bet_accepted")) == 2, what="two antes")
        await rec.command(station, {"type": "close_betting"})
        for pos, code in list(deal.items())[:4]:
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        await wait_until(lambda: rec.expects("P2.2"), what="NEXT P2.2")

        # a station connects mid-deal: the prompt it must act on, at once, and it is current
        seen = await catch_up(broker.url, topics.state(TABLE), node=NODE)
        state, status = seen[topics.state(TABLE)], seen["status"]
        prompt = state["prompt"]  # protocol 2: the current prompt is the retained state's
        assert (prompt["kind"], prompt["position"], prompt["step"], prompt["round_id"]) == ("NEXT", "P2.2", 5, rid)
        assert prompt["schema_id"] == "studio.v1.prompt" and state["node_id"] == NODE
        StationPrompt.model_validate(prompt)
        assert prompt == rec.prompts()[-1]  # the latest prompt released, as a subscriber that stayed saw it
        assert status == {"online": True, "session": service.session} and is_current(state, status)
        assert (state["phase"], state["position"], state["round_id"], state["cards"]) == ("DEALING", "P2.2", rid, {})
        TableState.model_validate(state)

        for pos, code in list(deal.items())[4:]:
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        await wait_until(lambda: rec.events("decisions_open"), what="decisions open")
        closes_at = rec.events("decisions_open")[-1]["data"]["closes_at"]

        # a player connects mid-decision: its own cards, its bet, the decision pending with its deadline
        me = await catch_up(broker.url, topics.player_state(TABLE, "ann"), node=NODE)
        ann = me[topics.player_state(TABLE, "ann")]
        PlayerState.model_validate(ann)
        assert is_current(ann, me["status"]) and (ann["player_id"], ann["round_id"], ann["phase"]) == \
            ("ann", rid, "DECISION")
        assert ann["cards"] == {"P1.1": "2C", "P1.2": "3C", "P1.3": "4C"}
        assert ann["decision"] == {"actions": ["PLAY", "FOLD"], "closes_at": closes_at, "seat": 1}
        assert [b["bet_id"] for b in ann["bets"]] == ["ante-ann"] and ann["decided"] is None
        assert not {"7D", "8D", "9D", "QS", "KS", "JS"} & set(json.dumps(ann).replace('"', " ").split())
        # the station, meanwhile: players are deciding, nothing public yet
        seen = await catch_up(broker.url, topics.state(TABLE), node=NODE)
        assert seen[topics.state(TABLE)]["prompt"]["kind"] == "WAIT"
        assert (seen[topics.state(TABLE)]["phase"], seen[topics.state(TABLE)]["decision_closes_at"]) == \
            ("DECISION", closes_at)

        await rec.command(act, {"type": "player_decision", "player_id": "ann", "action": "PLAY"})
        await wait_until(lambda: [m for t, m in rec.messages if t == topics.player_state(TABLE, "ann")
                                  and m.get("decided")], what="ann's state: decided")
        await rec.command(act, {"type": "player_decision", "player_id": "bob", "action": "FOLD"})
        # the result is acknowledged (the recorder settles): the round is settled, the states cleared
        await wait_until(lambda: rec.events("round_settled"), what="round settled")
        for player in ("ann", "bob"):
            await wait_until(lambda: [m for t, m in rec.messages if t == topics.player_state(TABLE, player)][-1] == {},
                             what=f"{player}'s retained state cleared")
        late = await catch_up(broker.url, topics.player_state(TABLE, "ann"), topics.player_state(TABLE, "bob"),
                              topics.state(TABLE), node=NODE)
        assert topics.player_state(TABLE, "ann") not in late and topics.player_state(TABLE, "bob") not in late
        assert late[topics.state(TABLE)]["round_id"] in (rid, round_id(service, 2))  # the next may have opened

        # a clean stop: everything retained is marked stale before the status says offline
        await stop_service(task)
        stopped = True
        seen = await catch_up(broker.url, topics.state(TABLE), node=NODE)
        state, status = seen[topics.state(TABLE)], seen["status"]
        prompt = state["prompt"]
        assert status == {"online": False, "session": service.session}
        assert state["stale"] is True and prompt["kind"] == "WAIT" and prompt["reason"] == STOPPED_REASON
        assert not is_current(state, status)
    finally:
        if not stopped:
            await stop_service(task)
        await rec.stop()
        shoe.close()


# --- the real `dealer run`, killed -------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_a_killed_backend_leaves_a_prompt_anyone_can_tell_is_stale_and_a_restart_makes_it_current(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    log = tmp_path / "backend.log"
    cfg = dealer_config(tmp_path, broker_url=broker.url, node_id=NODE, client_id="backend-catchup",
                        metrics_port=free_port(), tables=[serial_table(shoe.path)])
    backend = DealerProcess(cfg, log).start()
    status_topic = topics.backend_status(NODE)
    prompt_topic = topics.state(TABLE)  # protocol 2: the current prompt is the retained state's
    try:
        await wait_until(lambda: rec.expects("A1"), what="NEXT A1")
        shoe.scan(DEAL[0])
        await wait_until(lambda: rec.expects("B1"), what="NEXT B1")
        seen = await catch_up(broker.url, prompt_topic, node=NODE)
        alive = seen[prompt_topic]
        assert (alive["prompt"]["kind"], alive["prompt"]["position"]) == ("NEXT", "B1")
        assert is_current(alive, seen["status"])

        backend.kill()
        # the broker publishes the connection's last will: the status goes offline, same session
        await wait_until(lambda: [m for t, m in rec.messages if t == status_topic][-1]["online"] is False,
                         what="the last will")
        seen = await catch_up(broker.url, prompt_topic, node=NODE)
        dead = seen[prompt_topic]
        assert dead == alive  # the prompt the dead backend left, as it was (nobody marked it) ...
        assert seen["status"] == {"online": False, "session": alive["session"]}
        assert not is_current(dead, seen["status"])  # ... and anyone can tell it is stale

        backend.start()
        await wait_until(lambda: (s := [m for t, m in rec.messages if t == status_topic][-1])["online"]
                         and s["session"] != alive["session"], timeout=60,  # a start on a loaded machine: a bound
                         what="the restarted backend online")
        await wait_until(lambda: (m := [m for t, m in rec.messages if t == prompt_topic][-1])["session"]
                         == [m for t, m in rec.messages if t == status_topic][-1]["session"] and m["prompt"],
                         what="the prompt sent again under the new session")
        seen = await catch_up(broker.url, prompt_topic, node=NODE)
        fresh = seen[prompt_topic]
        assert is_current(fresh, seen["status"]) and fresh["session"] != alive["session"]
        assert (fresh["prompt"]["kind"], fresh["prompt"]["position"], fresh["prompt"]["step"],
                fresh["prompt"]["round_id"]) == \
            ("NEXT", "B1", 2, round_id(tmp_path / "journal.sqlite", 1))  # the same deal, resumed
        shoe.scan(DEAL[1])
        await wait_until(lambda: rec.expects("A2"), what="NEXT A2 after the restart")
    finally:
        backend.stop()
        await rec.stop()
        shoe.close()
    assert "Traceback" not in log.read_text()
