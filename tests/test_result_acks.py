"""Settlement acknowledgements through the real service and a real Mosquitto: a result stays
in the outbox, and goes again, until settlement acknowledges it on ``results/ack`` with its
idempotency key and the SHA-256 of its bytes; an acknowledgement without that hash, or with
another one, is refused as a security event and changes nothing (the key alone is public);
unknown and malformed acknowledgements are counted and ignored; an
acknowledged result is not sent again after a restart, an unacknowledged one is; and the
operations CLI (``dealer outbox list|resend``) reads and re-publishes without deleting."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from dealer.edge import topics
from dealer.core.acks import Ack, BadAck, binds, of_table, parse_ack, resend_delay, result_sha256
from dealer.edge.journal import Journal
from simulators.broker import MosquittoProcess
from simulators.settlement import SettlementConsumer
from tools.soak import write_config
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from tests.conftest import Broker, wait_until
from tests.harness import DEAL, POSITIONS, READER, TABLE, HandShoe, Recorder, settings_for, start_service, stop_service
from tests.harness_cli import run_cli, with_checkout

# The broker scenarios run on Mosquitto, RabbitMQ and NATS (docs/brokers.md), except the broker without
# persistence: that one is Mosquitto's `persistence false` (RabbitMQ and NATS always persist QoS 1 messages).
pytestmark = pytest.mark.any_broker

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


def ack_of(rec: Recorder, key: str) -> bytes:
    """Settlement's acknowledgement of the result ``rec`` received under ``key``: the key and
    the SHA-256 of the bytes received."""
    return json.dumps({"idempotency_key": key, "result_sha256": hashlib.sha256(rec.result_bytes[key]).hexdigest()}
                      ).encode()


# -- the pure part ------------------------------------------------------------------------------


H = hashlib.sha256(b"the result").hexdigest()


def test_parse_ack_takes_a_bounded_object_with_a_key_and_the_results_hash() -> None:
    assert parse_ack(json.dumps({"idempotency_key": "T1:T1-000001", "result_sha256": H, "by": "ledger-2"}).encode()
                     ) == Ack("T1:T1-000001", H)
    assert parse_ack(json.dumps({"idempotency_key": "T1:T1-000001", "result_sha256": H.upper()}).encode()
                     ) == Ack("T1:T1-000001", H)  # hex in either case
    # the key alone (protocol 1.0, or a forgery from public data): well-formed, but binds nothing
    assert parse_ack(b'{"idempotency_key": "T1:T1-000001", "by": "ledger-2"}') == Ack("T1:T1-000001", None)
    for bad_hash in ("", "abc", H[:-1] + "g", H + "0", 7, None):
        assert isinstance(parse_ack(json.dumps({"idempotency_key": "T1:T1-000001", "result_sha256": bad_hash}).encode()),
                          BadAck), bad_hash
    assert isinstance(parse_ack(json.dumps({"result_sha256": H}).encode()), BadAck)
    assert isinstance(parse_ack(b"not json"), BadAck)
    assert isinstance(parse_ack(b'["T1:T1-000001"]'), BadAck)
    assert isinstance(parse_ack(b'{"idempotency_key": 7}'), BadAck)
    big = json.dumps({"idempotency_key": "T1:T1-000001", "pad": "x" * 5000}).encode()
    assert isinstance(parse_ack(big), BadAck)


def test_an_ack_binds_the_exact_bytes_of_the_result() -> None:
    payload = b'{"idempotency_key":"T1:T1-000001","outcome":"PLAYER_A"}'
    assert result_sha256(payload) == hashlib.sha256(payload).hexdigest()
    assert binds(Ack("T1:T1-000001", result_sha256(payload)), payload)
    assert not binds(Ack("T1:T1-000001", None), payload)
    assert not binds(Ack("T1:T1-000001", result_sha256(payload + b" ")), payload)  # one byte more is another result


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
        await ack(rec, TABLE, ack_of(rec, key))  # the real one, last
        # one publisher, one subscriber: the real ack is handled after the three before it
        await wait_until(lambda: service.outbox_pending == 0, what="the valid acknowledgement")
        assert counter(service.metrics.result_acks_unknown, table=TABLE) == 2
        assert counter(service.metrics.bad_messages, topic_kind="results_ack") == 2
        assert counter(service.metrics.result_acks, table=TABLE, outcome="applied") == 1
        await ack(rec, TABLE, ack_of(rec, key))  # settlement says it again
        await wait_until(lambda: counter(service.metrics.result_acks, table=TABLE, outcome="repeat") == 1,
                         what="the repeated acknowledgement")
        assert counter(service.metrics.result_acks_unknown, table=TABLE) == 2
        assert [r.type for r in service.journal.rows(TABLE)].count("result_delivered") == 1
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


@pytest.mark.any_broker(kinds=["mosquitto"], reason="the check is the backend's; acknowledgements cross every broker "
                       "in the tests above")
async def test_an_ack_with_the_key_alone_or_another_hash_is_refused_and_changes_nothing(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    """Re-audit finding (issue 29): with the settlement consumer offline, a client on settlement's
    topic acknowledged a result with ``{"idempotency_key": ...}``, a key built from public data
    (the table and the round id every event names), and the backend deleted the result from its
    outbox. Now an acknowledgement must carry the SHA-256 of the result's bytes: the key alone,
    or the key with the hash of other bytes, is refused (a security event, journaled) and changes
    nothing; the result goes again, and the real consumer applies and acknowledges it."""
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url, settles=False).start()
    service, task = await start_service(_settings(tmp_path, broker.url, shoe, service=FAST, auto_rounds=False))
    consumer_task = None
    try:
        service.open_round(TABLE)
        await deal_round(rec, shoe)
        await wait_until(lambda: rec.results(), what="the result")
        key = rec.results()[0]["idempotency_key"]
        assert key.split(":", 1)[1] in {e.get("round_id") for e in rec.events()}  # public: the events name the round
        other = hashlib.sha256(rec.result_bytes[key] + b" ").hexdigest()
        await ack(rec, TABLE, json.dumps({"idempotency_key": key}).encode())
        await ack(rec, TABLE, json.dumps({"idempotency_key": key, "result_sha256": other}).encode())
        await wait_until(lambda: counter(service.metrics.result_acks, table=TABLE, outcome="refused") == 2,
                         what="both forged acknowledgements refused")
        assert service.outbox_pending == 1 and [r.key for r in service.journal.pending()] == [key]
        assert counter(service.metrics.result_acks, table=TABLE, outcome="applied") == 0
        for kind in ("ack_without_hash", "ack_hash_mismatch"):
            assert counter(service.metrics.security_events, table=TABLE, kind=kind) == 1

        def journaled() -> list[str]:
            return sorted(json.loads(r.body)["kind"] for r in service.journal.rows(TABLE) if r.type == "security_event")

        await wait_until(lambda: journaled() == ["ack_hash_mismatch", "ack_without_hash"], what="both journaled")
        assert "result_delivered" not in [r.type for r in service.journal.rows(TABLE)]
        sent = len(rec.results(key))
        await wait_until(lambda: len(rec.results(key)) > sent, what="the result sent again")

        bus = MqttBus(broker.url, client_id=f"settlement-{uuid.uuid4().hex[:6]}", persistent_session=True)
        consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
        consumer_task = asyncio.create_task(bus.run())
        await wait_until(lambda: service.outbox_pending == 0, what="the real consumer's acknowledgement")
        assert consumer.applied_keys() == [key] and consumer.mismatches == []
        assert counter(service.metrics.result_acks, table=TABLE, outcome="applied") == 1
        assert counter(service.metrics.result_acks, table=TABLE, outcome="refused") == 2
        consumer.close()
    finally:
        if consumer_task is not None:
            consumer_task.cancel()
            await asyncio.gather(consumer_task, return_exceptions=True)
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_the_reference_consumer_acknowledges_the_bytes_it_applied(tmp_path: Path) -> None:
    """``SettlementConsumer`` acknowledges with the SHA-256 of the bytes it applied, also when a
    result comes again; other bytes under an applied key are a mismatch, never applied, and
    the acknowledgement still names the applied bytes (so a backend holding the other result
    refuses it and keeps it for a person)."""
    first, second = _result_bytes("b1"), _result_bytes("b2")  # one round id, two different results
    assert first != second
    bus = LocalBus()
    consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", place_bets=False)
    for bet_id in ("b1", "b2"):  # the bet book holds both bets
        consumer.db.execute("INSERT INTO bets VALUES (?, 'T1-000001', 'p1', 'player_a', '10.00', NULL)", (bet_id,))
    sent: list[dict[str, Any]] = []
    bus.subscribe(topics.results_ack(TABLE), lambda _t, p: sent.append(json.loads(p)))
    try:
        for payload in (first, first, second):
            await bus.publish(topics.results(TABLE), payload)
        await consumer.drain()
        await wait_until(lambda: len(sent) == 3, what="three acknowledgements")
        assert {a["result_sha256"] for a in sent} == {hashlib.sha256(first).hexdigest()}
        assert {a["idempotency_key"] for a in sent} == {f"{TABLE}:{TABLE}-000001"}
        assert consumer.applied_keys() == [f"{TABLE}:{TABLE}-000001"] and consumer.duplicates == 2
        assert [m for m in consumer.mismatches if "other content" in m] == consumer.mismatches
        assert len(consumer.mismatches) == 1
    finally:
        consumer.close()


def _result_bytes(bet_id: str) -> bytes:
    """The result of round T1-000001 of a Teen Patti table with one accepted bet, as published."""
    from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ScanRead
    from dealer.core.messages import RoundResult
    from dealer.core.round import TableRules
    from dealer.core.table import Table
    from dealer.games.teen_patti import TeenPatti

    table = Table(TableRules(table_id=TABLE, game=TeenPatti()))
    table.handle(OpenRound(round_id=f"{TABLE}-000001"))
    table.handle(PlaceBet(bet_id=bet_id, player_id="p1", bet_type="player_a", stake="10.00"))
    table.handle(CloseBetting())
    for code in DEAL:
        step = table.handle(ScanRead(reader="R", code=code))
    return next(e for e in step.effects if isinstance(e, RoundResult)).model_dump_json().encode()


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
        await ack(rec, TABLE, ack_of(rec, first))
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
        await ack(late, TABLE, ack_of(late, second))
        await wait_until(lambda: service.outbox_pending == 0, what="the second result acknowledged")
    finally:
        await stop_service(task)
        await late.stop()
        shoe.close()


# -- operations ---------------------------------------------------------------------------------


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
    proc = run_cli(*argv, env=with_checkout())
    assert proc.returncode == 2 and proc.stderr.startswith("dealer outbox")


@pytest.mark.integration
def test_resend_all_of_an_empty_outbox_is_not_a_failure(tmp_path: Path) -> None:
    """Nothing waits for settlement: ``resend --all`` says so on stdout and exits 0 (issue 28), it
    connects to nothing; a key that is not there stays exit 1."""
    Journal(tmp_path / "journal.sqlite").close()
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(f'[service]\njournal_path = "{tmp_path / "journal.sqlite"}"\n[mqtt]\nurl = "mqtt://127.0.0.1:1"\n')
    empty = run_cli("outbox", "resend", "--config", str(cfg), "--all", env=with_checkout())
    assert (empty.returncode, json.loads(empty.stdout), empty.stderr) == (0, {"resent": 0, "keys": []}, "")
    missing = run_cli("outbox", "resend", "--config", str(cfg), "--key", "T1:nope", env=with_checkout())
    assert missing.returncode == 1 and "not in the outbox" in missing.stderr
