"""MQTT-specific behaviour over a real Mosquitto: scanner JSON ingest, retained messages,
backend status, and timers that bad traffic cannot postpone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.core.round import Phase
from dealer.edge.service import Service
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from drivers.scanner_json import ScannerMessage
from tests.conftest import Broker, wait_until
from tests.harness import DEAL, POSITIONS, TABLE, Recorder, key, round_id, start_service, stop_service
from tests.harness_mqtt import GATEWAY_READER as READER, Gateway, mqtt_settings

# The broker scenarios run on Mosquitto, RabbitMQ and NATS (docs/brokers.md).
pytestmark = pytest.mark.any_broker

async def test_mqtt_scanner_ingest_deals_a_round_and_rejects_bad_json(broker: Broker, tmp_path: Path):
    rec = await Recorder(broker.url).start()
    service, task = await start_service(mqtt_settings(tmp_path, broker.url))
    gw = Gateway(rec.bus.publish)
    try:
        await wait_until(lambda: service.bus.connected, what="backend subscribed")
        await gw.send("BOOT", "gw-1.0", advance=False, seq=0)
        await wait_until(lambda: rec.expects("A1"), what="NEXT A1 once the gateway is heard")
        # malformed input on the scanner topic changes nothing
        await rec.bus.publish(topics.scanner(TABLE), b"{oops")
        await rec.bus.publish(topics.scanner(TABLE), json.dumps({"reader": "OTHER", "seq": 1, "status": "OK",
                                                                  "payload": "AS"}).encode())
        await rec.bus.publish(topics.scanner(TABLE), json.dumps({"reader": READER, "seq": "1", "status": "OK",
                                                                  "payload": "AS"}).encode())
        await wait_until(lambda: service.metrics.bad_messages.labels(topic_kind="scanner")._value.get() == 3,
                         what="three bad scanner messages counted")
        assert service.tables[TABLE].current.cards == {}
        for code, pos in zip(DEAL[:2], POSITIONS[:2]):
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            await gw.send("OK", code)
        await wait_until(lambda: rec.expects("A2"), what="NEXT A2")
        gw.seq += 1  # a frame the gateway never delivered: the next one reveals the gap
        await gw.send("OK", DEAL[2])
        await wait_until(lambda: rec.prompts("RESCAN"), what="RESCAN after a lost frame")
        assert rec.prompts("RESCAN")[0]["reason"] == "frame_lost"
        assert service.tables[TABLE].current.cards == dict(zip(POSITIONS[:3], DEAL[:3]))  # the read itself counted
        for code, pos in zip(DEAL[3:], POSITIONS[3:]):
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            await gw.send("OK", code)
        await wait_until(lambda: rec.results(key(service, 1)), what="result")
        assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))
    finally:
        await stop_service(task)
        await rec.stop()


async def test_retained_actions_are_never_replayed_and_status_goes_offline_on_stop(broker: Broker, tmp_path: Path):
    rec = await Recorder(broker.url).start()
    settings = mqtt_settings(tmp_path, broker.url, betting_seconds=60)
    # a well-formed bet for the round about to open: only its being retained keeps it out
    # (reading the journal id creates the journal the service then opens)
    bet = {"type": "place_bet", "bet_id": "stale", "player_id": "p", "bet_type": "tie", "stake": "1",
           "round_id": round_id(settings, 1), "command_id": "stale"}
    await rec.bus._client.publish(topics.actions(TABLE), json.dumps(bet).encode(), qos=1, retain=True)  # type: ignore[union-attr]
    bus = MqttBus(broker.url, client_id="backend-status", status_topic=topics.backend_status("n1"))
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    gw = Gateway(rec.bus.publish)
    try:
        await wait_until(lambda: bus.connected, what="backend connected")
        await gw.send("HB", advance=False)
        await wait_until(lambda: service.tables[TABLE].current is not None, what="round opened")
        await wait_until(lambda: bus.retained_dropped >= 1, what="retained action dropped")
        assert service.tables[TABLE].current.bets == {}
        status = [m for t, m in rec.messages if t == topics.backend_status("n1")]
        assert status and status[-1] == {"online": True, "session": bus.session}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await wait_until(lambda: [m for t, m in rec.messages if t == topics.backend_status("n1")][-1]
                     == {"online": False, "session": bus.session},
                     what="offline status after a clean stop")
    await rec.stop()


async def test_a_stream_of_rejected_events_does_not_postpone_the_next_round(tmp_path: Path):
    """Between rounds, bets are refused; they must not re-arm the pause timer forever."""
    bus = LocalBus()
    settings = mqtt_settings(tmp_path, None, pause_seconds=0.4, betting_seconds=0.1)
    service = Service(settings, bus=bus, broker_link=False)
    task = asyncio.create_task(service.run())
    await service.ready.wait()
    seq = 0

    async def pass_card(code: str) -> None:
        nonlocal seq
        seq += 1
        await bus.publish(topics.scanner(TABLE), ScannerMessage(reader=READER, seq=seq, status="OK", payload=code)
                          .model_dump_json().encode())

    try:
        await bus.publish(topics.scanner(TABLE), ScannerMessage(reader=READER, seq=0, status="BOOT").model_dump_json().encode())
        await wait_until(lambda: service.tables[TABLE].current is not None
                         and service.tables[TABLE].current.phase == Phase.BETTING_CLOSED, what="betting closed")
        for code in DEAL:
            n = len(service.tables[TABLE].current.cards)
            await pass_card(code)
            await wait_until(lambda: len(service.tables[TABLE].current.cards) == n + 1, what="card registered")
        first = service.tables[TABLE].current.round_id

        async def spam() -> None:
            i = 0
            while True:
                i += 1
                # well-formed, for the round that just ended: refused by the table, not at the edge
                late = {"type": "place_bet", "bet_id": f"late{i}", "player_id": "p", "bet_type": "tie", "stake": "1",
                        "round_id": first, "command_id": f"late{i}"}
                await bus.publish(topics.actions(TABLE), json.dumps(late).encode())
                await asyncio.sleep(0.05)

        spammer = asyncio.create_task(spam())
        try:
            await wait_until(lambda: service.tables[TABLE].current.round_id != first, timeout=5, what="next round opened")
        finally:
            spammer.cancel()
        assert service.metrics.rejections.labels(table=TABLE, type="place_bet")._value.get() >= 1  # they reached the core
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
