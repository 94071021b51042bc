"""The command line, the committed schemas, and service behaviour seen from outside."""

from __future__ import annotations

import pytest
import asyncio
import io
import json
import sqlite3
import random
from decimal import Decimal
from pathlib import Path

from dealer.edge import topics
from dealer.core.cards import STANDARD_52
from dealer.edge.config import load_settings
from dealer.core.events import PlaceBet
from dealer.edge.logs import configure_logging
from tools.schemas import SCHEMAS, check_schemas
from dealer.edge.service import Service
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from simulators.settlement import SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import MqttShoeLink, VirtualDealer
from tests.conftest import Broker, wait_until
from tests.harness import DEAL, TABLE, round_id
from tests.harness_cli import run_cli

ROOT = Path(__file__).resolve().parent.parent


def test_committed_json_schemas_match_the_models():
    assert check_schemas(ROOT / "docs" / "schemas") == []
    for name in SCHEMAS:
        schema = json.loads((ROOT / "docs" / "schemas" / name).read_text())
        assert schema["$schema"].endswith("2020-12/schema")
    result = json.loads((ROOT / "docs" / "schemas" / "round-result.json").read_text())
    assert {"idempotency_key", "table_id", "round_id", "cards", "hands", "winner", "bets", "refund_all",
            "accepted_bets"} <= set(result["properties"])


@pytest.mark.integration
def test_hand_command_settles_a_dispute():
    out = run_cli("hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["winner"] == "B"
    assert report["hands"]["A"]["category"] == "straight" and report["hands"]["B"]["category"] == "straight_flush"
    assert report["bets"]["player_b"] == {"outcome": "WIN", "ratio": "0.95", "category": None}


@pytest.mark.integration
def test_hand_command_refuses_bad_cards_clearly():
    out = run_cli("hand", "teen-patti", "AS", "KD", "10C", "--vs", "2H", "3H", "4H")
    assert out.returncode == 2 and "'T', never '10'" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("hand", "teen-patti", "AS", "KD", "QC", "--vs", "AS", "3H", "4H")
    assert out.returncode == 2 and "AS" in out.stderr


@pytest.mark.integration
def test_demo_runs_self_contained_with_faults_visible():
    out = run_cli("demo", "--rounds", "4", "--seed", "11", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "RESCAN" in text and "SUPERVISOR" in text and "CANCELLED" in text and "settlement T" in text
    summary = json.loads(text.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] == 4 and summary["reconciliation_mismatches"] == []


async def test_unknown_table_is_rejected_and_logs_carry_table_and_round(tmp_path: Path):
    stream = io.StringIO()
    configure_logging("info", stream=stream, uncaught=False)
    try:
        settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                                 tables=[{"id": TABLE, "game": "teen-patti", "auto_rounds": False,
                                          "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])
        service = Service(settings, bus=LocalBus(), broker_link=False)
        task = asyncio.create_task(service.run())
        await service.ready.wait()
        step = await service.submit("NOPE", PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="1"))
        assert not step.accepted and "unknown table 'NOPE'" in step.rejection.reason
        assert (await service.open_round(TABLE)).accepted
        assert (await service.submit(TABLE, PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="1"))).accepted
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        configure_logging("warning", uncaught=False)
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    accepted = [rec for rec in lines if rec.get("event") == "bet_accepted"]
    assert accepted and accepted[0]["table_id"] == TABLE and accepted[0]["round_id"] == round_id(service, 1)
    opened = [rec for rec in lines if rec.get("event") == "journal opened"]
    assert [rec["journal_id"] for rec in opened] == [service.journal.journal_id]
    assert any(rec.get("event") == "event rejected" and rec.get("table_id") == "NOPE" for rec in lines)


async def test_settlement_consumer_applies_a_result_once_even_if_delivered_twice(tmp_path: Path):
    from dealer.games.teen_patti import TeenPatti
    from dealer.core.round import TableRules
    from dealer.core.table import Table
    from dealer.core.events import CloseBetting, OpenRound, ScanRead

    bus = LocalBus()
    consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
    consumer.db.execute("INSERT INTO bets VALUES ('b1', 'T1-000001', 'p1', 'player_a', '15.00', NULL)")
    consumer.db.execute("INSERT INTO bets VALUES ('b2', 'T1-000001', 'p1', 'tie', '5.00', NULL)")  # never accepted
    table = Table(TableRules(table_id=TABLE, game=TeenPatti()))
    table.handle(OpenRound(round_id="T1-000001"))
    table.handle(PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="15.00"))
    table.handle(CloseBetting())
    for code in DEAL:
        step = table.handle(ScanRead(reader="R", code=code))
    result = next(e for e in step.effects if e.__class__.__name__ == "RoundResult")
    payload = result.model_dump_json().encode()
    acks: list[bytes] = []

    def on_ack(_topic: str, ack: bytes) -> None:  # the result is on the ledger (committed) before its ack
        other = sqlite3.connect(tmp_path / "ledger.sqlite")
        assert other.execute("SELECT COUNT(*) FROM applied").fetchone()[0] == 1
        other.close()
        acks.append(ack)

    bus.subscribe(topics.results_ack(TABLE), on_ack)
    await bus.publish(topics.results(TABLE), payload)
    await bus.publish(topics.results(TABLE), payload)
    assert consumer.duplicates == 1 and consumer.applied_keys() == [f"{TABLE}:{TABLE}-000001"]
    await wait_until(lambda: len(acks) == 2, what="both deliveries acknowledged")  # the redelivery too
    assert {json.loads(a)["idempotency_key"] for a in acks} == {f"{TABLE}:{TABLE}-000001"}
    assert consumer.balances() == {"p1": Decimal("14.25")}  # 15 at 0.95:1; the tie bet was never accepted
    assert consumer.mismatches == []
    consumer.close()


async def test_virtual_dealer_over_an_mqtt_gateway_with_faults(broker: Broker, tmp_path: Path):
    settings = load_settings(
        service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
        mqtt={"url": broker.url, "client_id": "backend-gw"},
        tables=[{"id": TABLE, "game": "teen-patti", "betting_seconds": 0.2, "pause_seconds": 0.1,
                 "scanner": {"kind": "mqtt", "reader_id": "GW1", "heartbeat_timeout": 5}}])
    service = Service(settings, bus=MqttBus(broker.url, client_id="backend-gw"))
    sim = MqttBus(broker.url, client_id="sim-gw")
    dealer = VirtualDealer(TABLE, VirtualShoe("GW1"), MqttShoeLink(sim, TABLE), deck=STANDARD_52,
                           rng=random.Random(4), faults=FaultPlan(noread=0.15, drop=0.1, misread=0.05),
                           deal_interval=0.01, heartbeat_interval=0.2, patience=0.5)
    dealer.subscribe(sim)
    results: list[dict] = []
    sim.subscribe(topics.results(TABLE), lambda t, p: results.append(json.loads(p)))
    tasks = [asyncio.create_task(service.run()), asyncio.create_task(sim.run())]
    await sim.wait_connected()
    await wait_until(lambda: service.bus.connected, what="backend connected")
    tasks.append(asyncio.create_task(dealer.run()))
    try:
        await wait_until(lambda: len(results) >= 3, timeout=60, what="three rounds over the MQTT gateway")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert sum(dealer.faults_injected.values()) > 0
    assert service.metrics.rescans.labels(table=TABLE, reason="noread")._value.get() >= 1
    for res in results[:3]:
        assert res["outcome"] == "COMPLETED" and len(set(res["cards"].values())) == 6


def test_demo_can_also_publish_over_a_real_broker(broker: Broker):
    out = run_cli("demo", "--rounds", "2", "--broker", broker.url, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] == 2 and summary["reconciliation_mismatches"] == []


@pytest.mark.integration
def test_hand_command_for_sevenluck_shows_qualification_and_each_bet():
    out = run_cli("hand", "sevenluck", "8C", "8D", "2S", "--vs", "JS", "9D", "4C")  # rulebook §5.4 example 2
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["dealer_qualifies"] is False
    assert report["bets"]["ante"]["outcome"] == "WIN" and report["bets"]["play"]["outcome"] == "PUSH"
    assert report["bets"]["pair_plus"] == {"outcome": "WIN", "ratio": "1", "bonus_ratio": "0", "category": "pair"}
    out = run_cli("hand", "seotda", "01G", "03G", "--vs", "08G", "10A", "02A")
    assert out.returncode != 0


@pytest.mark.integration
def test_demo_plays_sevenluck_with_decisions_and_a_silent_player():
    out = run_cli("demo", "--game", "sevenluck", "--rounds", "2", "--seed", "5", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "players decide" in out.stdout and "(timer: no answer)" in out.stdout
    assert any(line.startswith("  reveal ") and " D.1=" in line for line in out.stdout.splitlines())
    summary = json.loads(out.stdout.rsplit("summary ", 1)[1])
    assert summary["rounds_settled"] == 2 and summary["reconciliation_mismatches"] == []
