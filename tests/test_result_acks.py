"""Settlement acknowledgements through the real service and a real Mosquitto: a result stays
in the outbox, and goes again, until settlement acknowledges its idempotency key on
``results/ack``; unknown and malformed acknowledgements are counted and ignored; an
acknowledged result is not sent again after a restart, an unacknowledged one is; and the
operations CLI (``dealer outbox list|resend``) reads and re-publishes without deleting."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.acks import Ack, BadAck, of_table, parse_ack, resend_delay
from dealer.edge.journal import Journal
from simulators.broker import MosquittoProcess
from simulators.settlement import SettlementConsumer
from tools.soak import write_config
from drivers.mqtt import MqttBus
from tests.conftest import Broker, wait_until
from tests.harness import DEAL, READER, TABLE, HandShoe, Recorder, settings_for, start_service, stop_service

# The broker scenarios run on Mosquitto, RabbitMQ and NATS (docs/brokers.md), except the broker without
# persistence: that one is Mosquitto's `persistence false` (RabbitMQ and NATS always persist QoS 1 messages).
pytestmark = pytest.mark.any_broker

POSITIONS = ["A1", "B1", "A2", "B2", "A3", "B3"]
ROOT = Path(__file__).resolve().parents[1]
FAST = {"result_resend_seconds": 0.2, "result_resend_max_seconds": 0.4}


def _settings(tmp: Path, url: str, shoe: HandShoe, *, service: dict[str, Any] | None = None, **table: Any):
    s = settings_for(tmp, url, shoe.path, **table)
    for k, v in (service or {}).items():
        setattr(s.service, k, v)
    return s


async def deal_round(rec: Recorder, shoe: HandShoe) -> None:
    """Deal one Teen Patti round card by card, as the prompts ask."""
    rid = None
    for code, pos in zip(DEAL, POSITIONS):
        await wait_until(lambda: rec.expects(pos, rid), what=f"prompt NEXT {pos}")
        rid = rid or rec.last_prompt()["round_id"]  # type: ignore[index]
        shoe.scan(code)


def counter(metric: Any, **labels: str) -> float:
    return float(metric.labels(**labels)._value.get())


async def ack(bus: Recorder, table: str, payload: bytes) -> None:
    await bus.bus.publish(topics.results_ack(table), payload)


# -- the pure part ------------------------------------------------------------------------------


def test_parse_ack_takes_a_bounded_object_with_a_key() -> None:
    assert parse_ack(b'{"idempotency_key": "T1:T1-000001", "by": "ledger-2"}') == Ack("T1:T1-000001")
    assert isinstance(parse_ack(b"not json"), BadAck)
    assert isinstance(parse_ack(b'["T1:T1-000001"]'), BadAck)
    assert isinstance(parse_ack(b'{"idempotency_key": 7}'), BadAck)
    big = json.dumps({"idempotency_key": "T1:T1-000001", "pad": "x" * 5000}).encode()
    assert isinstance(parse_ack(big), BadAck)


def test_an_ack_names_a_result_of_its_own_table_only() -> None:
    assert of_table("T1", "T1:T1-000001")
    assert not of_table("T1", "T2:T2-000001") and not of_table("T1", "T10:T10-000001")
    assert not of_table("T1", "T1:T1-000001#1/2")  # a part, not a result


def test_resend_delay_doubles_up_to_its_cap() -> None:
    assert [resend_delay(n, 10, 300) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert resend_delay(10_000, 10, 300) == 300


def test_an_old_journal_outbox_gets_created_at_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, topic TEXT NOT NULL,
                             payload BLOB NOT NULL, table_id TEXT NOT NULL, round_id TEXT NOT NULL);
        INSERT INTO outbox (key, topic, payload, table_id, round_id)
            VALUES ('T1:T1-000001', 'studio/v1/tables/T1/results', X'7B7D', 'T1', 'T1-000001');""")
    db.commit()
    db.close()
    j = Journal(path)
    try:
        [row] = j.pending()
        assert (row.key, row.payload) == ("T1:T1-000001", b"{}") and row.created_at > 0
    finally:
        j.close()


# -- through the service ------------------------------------------------------------------------


async def test_a_result_goes_again_until_a_late_settlement_acknowledges_it(broker: Broker, tmp_path: Path,
                                                                           pty_dir: Path) -> None:
    """Nobody settles when the result is made (settlement subscribes late): the backend keeps
    re-sending it with backoff; the reference consumer, once it subscribes, applies it, then
    acknowledges it, and the result leaves the outbox."""
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(_settings(tmp_path, broker.url, shoe, service=FAST, auto_rounds=False))
    consumer_task = None
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        await wait_until(lambda: len(rec.results()) >= 3, what="the result published again (backoff)")
        key = rec.results()[0]["idempotency_key"]
        assert service.outbox_pending == 1 and key.startswith(f"{TABLE}:")
        assert counter(service.metrics.result_resends, table=TABLE, reason="backoff") >= 2
        assert service.metrics.registry.get_sample_value("dealer_outbox_oldest_age_seconds") >= 0

        bus = MqttBus(broker.url, client_id=f"settlement-{uuid.uuid4().hex[:6]}", persistent_session=True)
        consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
        consumer_task = asyncio.create_task(bus.run())
        await wait_until(lambda: service.outbox_pending == 0, what="the late consumer's acknowledgement")
        assert consumer.applied_keys() == [key] and consumer.acks_sent >= 1
        assert service.tables[TABLE].undelivered == {}
        assert counter(service.metrics.result_acks, table=TABLE, outcome="applied") == 1
        assert service.journal.pending() == []
        settled = [json.loads(r.body) for r in service.journal.rows(TABLE) if r.type == "result_delivered"]
        assert [(s["idempotency_key"], s["round_id"]) for s in settled] == [(key, key.split(":", 1)[1])]
        consumer.close()
    finally:
        if consumer_task is not None:
            consumer_task.cancel()
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_unknown_and_malformed_acks_are_counted_and_ignored(broker: Broker, tmp_path: Path,
                                                                 pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(_settings(tmp_path, broker.url, shoe, auto_rounds=False))
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        await wait_until(lambda: rec.results(), what="the result")
        key = rec.results()[0]["idempotency_key"]
        await ack(rec, TABLE, json.dumps({"idempotency_key": f"{TABLE}:{TABLE}-999999"}).encode())  # never produced
        await ack(rec, TABLE, json.dumps({"idempotency_key": f"T9:{key.split(':', 1)[1]}"}).encode())  # not T1's
        await ack(rec, TABLE, b'{"idem": "oops"}')  # malformed
        # the real key in an acknowledgement over the 4096-byte cap: refused unread, not applied
        await ack(rec, TABLE, json.dumps({"idempotency_key": key, "pad": "x" * 5000}).encode())
        await ack(rec, TABLE, json.dumps({"idempotency_key": key}).encode())  # the real one, last
        # one publisher, one subscriber: the real ack is handled after the three before it
        await wait_until(lambda: service.outbox_pending == 0, what="the valid acknowledgement")
        assert counter(service.metrics.result_acks_unknown, table=TABLE) == 2
        assert counter(service.metrics.bad_messages, topic_kind="results_ack") == 2
        assert counter(service.metrics.result_acks, table=TABLE, outcome="applied") == 1
        await ack(rec, TABLE, json.dumps({"idempotency_key": key}).encode())  # settlement says it again
        await wait_until(lambda: counter(service.metrics.result_acks, table=TABLE, outcome="repeat") == 1,
                         what="the repeated acknowledgement")
        assert counter(service.metrics.result_acks_unknown, table=TABLE) == 2
        assert [r.type for r in service.journal.rows(TABLE)].count("result_delivered") == 1
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_broker_restarted_without_persistence_the_result_goes_again(tmp_path: Path, pty_dir: Path) -> None:
    """The broker took the result (PUBACK) for a settlement that was away, then crashed without
    saving it: the backend still holds it and sends it again; settlement applies it once."""
    d = tmp_path / "broker"
    d.mkdir()
    broker = MosquittoProcess(d, persistence=False)
    broker.start()
    shoe = HandShoe(pty_dir)
    bus = MqttBus(broker.url, client_id="settlement-1", persistent_session=True)
    consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
    consumer_task = asyncio.create_task(bus.run())
    await asyncio.wait_for(bus.wait_connected(), 10)  # its session exists: the broker queues for it
    consumer_task.cancel()
    await asyncio.gather(consumer_task, return_exceptions=True)
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(_settings(tmp_path, broker.url, shoe, auto_rounds=False,
                                                  service={"result_resend_seconds": 1.0,
                                                           "result_resend_max_seconds": 1.0}))
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        await wait_until(lambda: rec.results(), what="the result, taken by the broker")
        broker.kill()
        broker.start()  # empty: the queued result for settlement is gone
        consumer_task = asyncio.create_task(bus.run())
        await wait_until(lambda: service.outbox_pending == 0, what="the result applied and acknowledged")
        assert len(consumer.applied_keys()) == 1 and consumer.mismatches == []
        assert sum(counter(service.metrics.result_resends, table=TABLE, reason=r) for r in ("backoff", "reconnect")) >= 1
    finally:
        consumer_task.cancel()
        await asyncio.gather(consumer_task, return_exceptions=True)
        consumer.close()
        await stop_service(task)
        await rec.stop()
        shoe.close()
        broker.kill()


async def test_every_pending_result_goes_again_when_the_broker_link_comes_back(broker: Broker, tmp_path: Path,
                                                                              pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(_settings(tmp_path, broker.url, shoe, auto_rounds=False,
                                                  service={"result_resend_seconds": 0.2,
                                                           "result_resend_max_seconds": 3600}))
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        # a second copy is only scheduled after the first one's PUBACK: it has been sent once
        await wait_until(lambda: len(rec.results()) >= 2, what="the result and one resend")
        assert counter(service.metrics.result_resends, table=TABLE, reason="reconnect") == 0
        broker.kill()
        await wait_until(lambda: service.links[TABLE].up["broker"] is False, what="broker link down")
        n = len(rec.results())
        broker.start()
        await wait_until(lambda: counter(service.metrics.result_resends, table=TABLE, reason="reconnect") == 1,
                         what="the resend on reconnect")
        await wait_until(lambda: len(rec.results()) > n, what="the result again after the reconnect")
        assert service.outbox_pending == 1  # still not acknowledged
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_an_acknowledged_result_is_not_sent_after_a_restart_an_unacknowledged_one_is(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    settings = _settings(tmp_path, broker.url, shoe, auto_rounds=False)
    service, task = await start_service(settings)
    try:
        for n in (1, 2):
            service.open_round(TABLE)
            await deal_round(rec, shoe)
            await wait_until(lambda: len({r["idempotency_key"] for r in rec.results()}) == n, what=f"result {n}")
            await wait_until(lambda: service.tables[TABLE].can_open() is None, what="round over")
        first, second = list(dict.fromkeys(r["idempotency_key"] for r in rec.results()))
        await ack(rec, TABLE, json.dumps({"idempotency_key": first}).encode())
        await wait_until(lambda: service.outbox_pending == 1, what="the first result acknowledged")
    finally:
        await stop_service(task)
        await rec.stop()
    late = await Recorder(broker.url, settles=False).start()  # a new subscriber: sees only what is sent now
    service, task = await start_service(settings)
    try:
        assert [r.key for r in service.journal.pending()] == [second] and service.outbox_pending == 1
        await wait_until(lambda: late.results(second), what="the unacknowledged result sent again")
        assert late.results(first) == []  # the relay sends in outbox order: the first would have come before
        assert set(service.tables[TABLE].undelivered) == {second.split(":", 1)[1]}
        await ack(late, TABLE, json.dumps({"idempotency_key": second}).encode())
        await wait_until(lambda: service.outbox_pending == 0, what="the second result acknowledged")
    finally:
        await stop_service(task)
        await late.stop()
        shoe.close()


# -- operations ---------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dealer", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env)


@pytest.mark.any_broker(kinds=["mosquitto"], reason="the outbox CLI's own behaviour; the broker path of a "
                       "resend is the backend's, covered on every broker above")
async def test_outbox_list_and_resend_never_delete(broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    settings = _settings(tmp_path, broker.url, shoe, auto_rounds=False)
    service, task = await start_service(settings)
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        await wait_until(lambda: rec.results(), what="the result")
        key = rec.results()[0]["idempotency_key"]
    finally:
        await stop_service(task)
    journal = settings.service.journal_path
    listed = await asyncio.to_thread(run_cli, "outbox", "list", "--journal", str(journal), "--json")
    assert listed.returncode == 0, listed.stderr
    out = json.loads(listed.stdout)
    assert out["pending"] == 1 and out["rows"][0]["key"] == key and out["rows"][0]["age_seconds"] >= 0

    config = write_config(tmp_path / "dealer.toml", broker_url=broker.url, journal=journal,
                          tables=[(TABLE, READER, shoe.path, "teen-patti")], betting_seconds=1, pause_seconds=1)
    before = len(rec.results(key))
    sent = await asyncio.to_thread(run_cli, "outbox", "resend", "--config", str(config), "--key", key)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) == {"resent": 1, "keys": [key]}
    await wait_until(lambda: len(rec.results(key)) == before + 1, what="the result published by the CLI")
    assert rec.results(key)[-1] == rec.results(key)[0]  # the stored bytes, unchanged
    again = await asyncio.to_thread(run_cli, "outbox", "list", "--config", str(config), "--json")
    assert json.loads(again.stdout)["pending"] == 1  # only an acknowledgement deletes

    missing = await asyncio.to_thread(run_cli, "outbox", "resend", "--config", str(config), "--key", "T1:nope")
    assert missing.returncode == 1 and "not in the outbox" in missing.stderr
    await rec.stop()
    shoe.close()


@pytest.mark.integration
@pytest.mark.parametrize("argv", [["outbox", "list"], ["outbox", "resend", "--config", "/nonexistent.toml", "--all"]])
def test_outbox_cli_refuses_without_a_journal(argv: list[str]) -> None:
    proc = run_cli(*argv)
    assert proc.returncode == 2 and proc.stderr.startswith("dealer outbox")


@pytest.mark.integration
def test_resend_all_of_an_empty_outbox_is_not_a_failure(tmp_path: Path) -> None:
    """Nothing waits for settlement: ``resend --all`` says so on stdout and exits 0 (issue 28), it
    connects to nothing; a key that is not there stays exit 1."""
    Journal(tmp_path / "journal.sqlite").close()
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(f'[service]\njournal_path = "{tmp_path / "journal.sqlite"}"\n[mqtt]\nurl = "mqtt://127.0.0.1:1"\n')
    empty = run_cli("outbox", "resend", "--config", str(cfg), "--all")
    assert (empty.returncode, json.loads(empty.stdout), empty.stderr) == (0, {"resent": 0, "keys": []}, "")
    missing = run_cli("outbox", "resend", "--config", str(cfg), "--key", "T1:nope")
    assert missing.returncode == 1 and "not in the outbox" in missing.stderr
