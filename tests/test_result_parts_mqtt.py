"""10,000 bets in one round, through the real service and a real Mosquitto with the deploy's
``max_packet_size``: the result goes as a manifest plus parts, the reference settlement
consumer settles every accepted bet, and the backend's broker link never drops."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.edge.roles import Role, command_topic
from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.feed import prompts_of
from simulators.settlement import SettlementConsumer
from tests.conftest import wait_until
from tests.harness import DEAL, POSITIONS, TABLE, HandShoe, settings_for, start_service, stop_service

ROOT = Path(__file__).resolve().parent.parent
BETS = 10_000


def deploy_max_packet_size() -> int:
    conf = (ROOT / "deploy" / "mosquitto" / "mosquitto.conf").read_text()
    return int(re.search(r"^max_packet_size (\d+)$", conf, re.M).group(1))  # type: ignore[union-attr]


@pytest.fixture
def deploy_broker(tmp_path: Path) -> Iterator[MosquittoProcess]:
    d = tmp_path / "broker"
    d.mkdir()
    b = MosquittoProcess(d, persistence=False, max_packet_size=deploy_max_packet_size())
    b.start()
    yield b
    b.kill()


async def test_ten_thousand_bets_settle_through_a_broker_with_the_deploy_packet_limit(
        deploy_broker: MosquittoProcess, tmp_path: Path, pty_dir: Path):
    assert deploy_max_packet_size() == 262144
    shoe = HandShoe(pty_dir)
    settle_bus = MqttBus(deploy_broker.url, client_id=f"settlement-{uuid.uuid4().hex[:6]}")
    consumer = SettlementConsumer(settle_bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
    sizes: list[int] = []
    prompts: list[dict] = []
    settle_bus.subscribe(topics.results(TABLE), lambda t, p: sizes.append(len(p)))
    # protocol 2: the station prompts come in the table's state
    settle_bus.subscribe(topics.state(TABLE), prompts_of(lambda t, p: prompts.append(json.loads(p))))
    settle_task = asyncio.create_task(settle_bus.run())
    await asyncio.wait_for(settle_bus.wait_connected(), 10)
    settings = settings_for(tmp_path, deploy_broker.url, shoe.path, betting_seconds=3600)
    assert settings.service.max_message_bytes == 131072
    service, task = await start_service(settings)
    drops: list[str] = []
    service.bus.on_connection(lambda up, reason: None if up else drops.append(reason))
    player = MqttBus(deploy_broker.url, client_id=f"platform-{uuid.uuid4().hex[:6]}")
    player_task = asyncio.create_task(player.run())
    try:
        await asyncio.wait_for(player.wait_connected(), 10)
        await wait_until(lambda: service.tables[TABLE].current is not None, what="round opened")
        round_id = service.tables[TABLE].current.round_id
        key = f"{TABLE}:{round_id}"
        bets = [(f"{round_id}-bet{i:05d}-{uuid.uuid4().hex[:16]}", f"player{i:05d}", ("player_a", "player_b", "tie")[i % 3]) for i in range(BETS)]
        consumer.db.executemany("INSERT INTO bets VALUES (?, ?, ?, ?, ?, NULL)",
                                [(b, round_id, p, t, "1.00") for b, p, t in bets])
        for start in range(0, BETS, 500):  # what the player platform sends, 500 in flight at a time
            await asyncio.gather(*(player.publish(command_topic(Role.PLAYER_PLATFORM, TABLE), json.dumps({
                "type": "place_bet", "command_id": b, "bet_id": b, "player_id": p, "bet_type": t, "stake": "1.00",
                "round_id": round_id}).encode()) for b, p, t in bets[start:start + 500]))
        await wait_until(lambda: len(service.tables[TABLE].current.bets) == BETS, timeout=300, what="10,000 bets accepted")
        await player.publish(command_topic(Role.STATION, TABLE), json.dumps(
            {"type": "close_betting", "command_id": "close-1", "round_id": round_id}).encode())
        for code, pos in zip(DEAL, POSITIONS):
            await wait_until(lambda: any(p["kind"] == "NEXT" and p["position"] == pos for p in prompts[-3:]),
                             timeout=60, what=f"NEXT {pos}")
            shoe.scan(code)
        await wait_until(lambda: key in consumer.applied_keys(), timeout=120, what="result applied by settlement")
        await wait_until(lambda: service.outbox_pending == 0, timeout=60, what="every row of the result delivered")
        ledger = consumer.db.execute("SELECT outcome, COUNT(*) FROM ledger WHERE key = ? GROUP BY outcome",
                                     (key,)).fetchall()
        assert dict(ledger) == {"WIN": BETS // 3 + 1, "LOSE": 2 * BETS // 3}  # A (three aces) wins
        assert consumer.mismatches == [] and consumer.duplicates == 0
        applied = consumer.applied_result(key)  # the manifest, as delivered; the ledger has every bet
        assert applied is not None and applied["accepted_bets"]["parts"] == len(sizes) - 1 >= 2
        settled = [b for (b,) in consumer.db.execute("SELECT bet_id FROM ledger WHERE key = ?", (key,))]
        assert sorted(settled) == sorted(b for b, _, _ in bets)
        assert len(sizes) >= 3 and max(sizes) <= settings.service.max_message_bytes  # a manifest and parts
        assert sum(sizes) > deploy_max_packet_size()  # the whole result would not have passed the broker
        assert drops == [] and service.links[TABLE].up["broker"] is True
        assert service.metrics.messages_oversize.labels(kind="result")._value.get() == 0
        journal = sqlite3.connect(settings.service.journal_path)
        assert journal.execute("SELECT COUNT(*) FROM events WHERE type = 'link_down'").fetchone() == (0,)
        assert journal.execute("SELECT COUNT(*) FROM outbox").fetchone() == (0,)
        journal.close()
    finally:
        await stop_service(task)
        for t in (player_task, settle_task):
            t.cancel()
        await asyncio.gather(player_task, settle_task, return_exceptions=True)
        consumer.close()
        shoe.close()


async def test_the_deploy_broker_drops_a_client_that_publishes_a_whole_oversize_result(
        deploy_broker: MosquittoProcess):
    """The control: what the backend did before results came in parts (issue 13)."""
    bus = MqttBus(deploy_broker.url, client_id=f"whole-{uuid.uuid4().hex[:6]}")
    drops: list[str] = []
    bus.on_connection(lambda up, reason: None if up else drops.append(reason))
    run = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        publish = asyncio.create_task(bus.publish(topics.results(TABLE), b"x" * (deploy_max_packet_size() + 1)))
        await wait_until(lambda: drops, what="the broker dropping the connection")
        publish.cancel()
        await asyncio.gather(publish, return_exceptions=True)
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
