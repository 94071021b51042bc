"""Whole-backend scenarios over a real Mosquitto and a real PTY serial line (no mocks)."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.core.round import Phase
from tests.conftest import Broker, wait_until
from tests.harness import (DEAL, POSITIONS, TABLE, HandShoe, Recorder, deal, key, round_id, settings_for, start_service,
                           stop_service)

# Every scenario here runs on Mosquitto, RabbitMQ's MQTT plugin and NATS's MQTT gateway (docs/brokers.md).
pytestmark = pytest.mark.any_broker

async def _studio(broker: Broker, tmp_path: Path, pty_dir: Path, **table):
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    service, task = await start_service(settings_for(tmp_path, broker.url, shoe.path, **table))
    yield service, rec, shoe
    await stop_service(task)
    await rec.stop()
    shoe.close()


@pytest.fixture
async def studio(broker: Broker, tmp_path: Path, pty_dir: Path):
    async for s in _studio(broker, tmp_path, pty_dir):
        yield s


@pytest.fixture
async def long_betting(broker: Broker, tmp_path: Path, pty_dir: Path):
    """A studio whose betting period outlasts the test: the round stays BETTING_OPEN."""
    async for s in _studio(broker, tmp_path, pty_dir, betting_seconds=60):
        yield s


async def test_rescan_after_noread(studio):
    service, rec, shoe = studio
    await deal(rec, shoe, DEAL[:2], POSITIONS[:2])
    await wait_until(lambda: rec.expects("A2"), what="NEXT A2")
    shoe.write(shoe.shoe.noread())
    await wait_until(lambda: rec.prompts("RESCAN"), what="RESCAN prompt")
    rescan = rec.prompts("RESCAN")[0]
    assert (rescan["position"], rescan["reason"], rescan["count"]) == ("A2", "noread", 1)
    assert service.tables[TABLE].current.expected_position == "A2"  # the deal did not advance
    await deal(rec, shoe, DEAL[2:], POSITIONS[2:])
    await wait_until(lambda: rec.results(key(service, 1)), what="result")
    res = rec.results(key(service, 1))[0]
    assert res["cards"] == dict(zip(POSITIONS, DEAL)) and res["winner"] == "A"
    assert res["hands"]["A"]["category"] == "trail_of_aces" and res["bets"]["six_card_bonus"]["outcome"] == "WIN"
    assert service.metrics.rescans.labels(table=TABLE, reason="noread")._value.get() == 1


async def test_duplicate_and_foreign_cards_prompt_rescan_then_alert(studio):
    service, rec, shoe = studio
    await deal(rec, shoe, DEAL[:1], POSITIONS[:1])
    await wait_until(lambda: rec.expects("B1"), what="NEXT B1")
    shoe.scan("AS")  # the card already registered at A1
    await wait_until(lambda: rec.prompts("RESCAN"), what="duplicate rescan")
    assert rec.prompts("RESCAN")[-1]["reason"] == "duplicate_card"
    for _ in range(3):
        shoe.scan("01G")  # a Hwatu card in a 52-card shoe
    await wait_until(lambda: rec.prompts("ALERT"), what="supervisor alert")
    alert = rec.prompts("ALERT")[0]
    assert (alert["position"], alert["reason"], alert["count"]) == ("B1", "foreign_card", 3)
    assert [p["reason"] for p in rec.prompts("RESCAN")] == ["duplicate_card"] + ["foreign_card"] * 3
    shoe.scan(DEAL[1])
    await deal(rec, shoe, DEAL[2:], POSITIONS[2:])
    await wait_until(lambda: rec.results(key(service, 1)), what="result")
    assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))


async def test_garbage_bytes_on_the_line_change_nothing(studio):
    service, rec, shoe = studio
    rng = random.Random(5)
    for i, (code, pos) in enumerate(zip(DEAL, POSITIONS)):
        await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
        noise = bytes(rng.randrange(256) for _ in range(40))
        shoe.write(noise + b"\r\n" + (b"$SC1,99,OK,AS*0000\r\n" if i == 2 else b""))  # and a frame with a bad CRC
        shoe.scan(code)
    await wait_until(lambda: rec.results(key(service, 1)), what="result")
    assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))
    assert service.links[TABLE].ready


async def test_broker_killed_after_betting_closed_result_arrives_once_after_restart(broker: Broker, studio):
    service, rec, shoe = studio
    await deal(rec, shoe, DEAL[:2], POSITIONS[:2])
    await wait_until(lambda: rec.expects("A2"), what="NEXT A2")
    broker.kill()
    await wait_until(lambda: service.links[TABLE].up["broker"] is False, what="broker link down")
    for code in DEAL[2:]:  # the physical game goes on; the scanner is on serial
        n = len(service.tables[TABLE].current.cards)
        shoe.scan(code)
        await wait_until(lambda: len(service.tables[TABLE].current.cards) == n + 1, what="card registered")
    assert service.tables[TABLE].current.phase == Phase.RESULT
    await wait_until(lambda: service.outbox_pending == 1, what="result committed to the outbox")
    assert rec.results() == []
    broker.start()
    await wait_until(lambda: rec.results(key(service, 1)), what="result after broker restart")
    await wait_until(lambda: service.outbox_pending == 0, what="outbox drained")
    await wait_until(lambda: service.tables[TABLE].undelivered == {}, what="round settled")
    assert len(rec.results(key(service, 1))) == 1
    assert rec.results(key(service, 1))[0]["outcome"] == "COMPLETED" and rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))


async def test_link_lost_while_betting_open_cancels_and_refunds(broker: Broker, long_betting):
    service, rec, _shoe = long_betting
    await wait_until(lambda: rec.events("round_opened"), what="round opened")
    await rec.command(topics.actions(TABLE), {"type": "place_bet", "bet_id": "b1", "player_id": "p1",
                                              "bet_type": "player_a", "stake": "10.00"})
    await wait_until(lambda: rec.events("bet_accepted"), what="bet accepted")
    broker.kill()
    await wait_until(lambda: service.tables[TABLE].current.phase == Phase.CANCELLED, what="round cancelled")
    assert service.tables[TABLE].can_open() is not None  # no new round while the link is down
    broker.start()
    await wait_until(lambda: rec.results(key(service, 1)), what="refund result")
    res = rec.results(key(service, 1))[0]
    assert res["outcome"] == "CANCELLED" and res["refund_all"] is True and res["bets"] == {}
    assert res["accepted_bets"] == {"count": 1, "stakes": {"player_a": "10.00"}, "bet_ids": ["b1"]}
    await wait_until(lambda: service.tables[TABLE].current.round_id == round_id(service, 2), what="next round")
    assert len(rec.results(key(service, 1))) == 1
    assert Decimal(res["accepted_bets"]["stakes"]["player_a"]) == Decimal("10.00")


async def test_serial_unplugged_and_replugged_mid_round(studio):
    service, rec, shoe = studio
    link = f"scanner:{shoe.shoe.reader}"
    await deal(rec, shoe, DEAL[:3], POSITIONS[:3])
    await wait_until(lambda: rec.expects("B2"), what="NEXT B2")
    shoe.port.unplug()
    await wait_until(lambda: service.links[TABLE].up[link] is False, what="scanner link down")
    assert service.tables[TABLE].current.phase == Phase.DEALING  # the round goes on
    shoe.port.replug()
    shoe.write(shoe.shoe.boot())  # a re-enumerated reader boots and restarts its sequence
    await wait_until(lambda: service.links[TABLE].up[link] is True, timeout=20, what="scanner link up")
    await deal(rec, shoe, DEAL[3:], POSITIONS[3:])
    await wait_until(lambda: rec.results(key(service, 1)), what="result")
    assert rec.results(key(service, 1))[0]["outcome"] == "COMPLETED"
    assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))
    assert [e["data"]["link"] for e in rec.events("link_down_round_continues")] == [link]


async def test_bad_actions_get_a_clear_rejection_and_change_nothing(long_betting):
    service, rec, _shoe = long_betting
    await wait_until(lambda: rec.events("round_opened"), what="round opened")
    await rec.bus.publish(topics.actions(TABLE), b"{not json")
    await rec.command(topics.actions(TABLE), {"type": "place_bet", "bet_id": "b1", "player_id": "p1",
                                              "bet_type": "player_a", "stake": 10.5})
    await rec.command(topics.actions(TABLE), {"type": "place_bet", "bet_id": "b2", "player_id": "p1",
                                              "bet_type": "banker", "stake": "1"})
    await wait_until(lambda: len(rec.events("rejected")) >= 3, what="three rejections")
    reasons = " | ".join(e["data"]["reason"] for e in rec.events("rejected"))
    assert "malformed action" in reasons and "float" in reasons and "unknown bet type" in reasons
    assert service.tables[TABLE].current.bets == {}
    assert service.metrics.bad_messages.labels(topic_kind="actions")._value.get() == 2
