"""The real ``dealer run`` process, killed with SIGKILL and restarted (journal replay)."""

from __future__ import annotations

import asyncio
import json
import random
import urllib.request
from pathlib import Path

import pytest

from dealer.edge import topics
from drivers.mqtt import MqttBus
from simulators.settlement import SettlementConsumer
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import PtyShoeLink, VirtualDealer
from simulators.pty_port import PtyPort
from tests.conftest import Broker, free_port, wait_until
from tests.harness import (DEAL, POSITIONS, READER, TABLE, DealerProcess, HandShoe, Recorder, dealer_config, round_id,
                           serial_table)

START = 60.0  # a `dealer run` start on a loaded machine (imports, the tables' RTP) is a bound, not a measure


def write_config(tmp: Path, broker: Broker, port: str, metrics_port: int, betting: float = 0.3) -> Path:
    return dealer_config(tmp, broker_url=broker.url, node_id="test-host", client_id="backend-under-test",
                         metrics_port=metrics_port, tables=[serial_table(port, betting_seconds=betting)])


@pytest.mark.any_broker  # on Mosquitto, RabbitMQ and NATS (docs/brokers.md)
async def test_backend_killed_mid_deal_resumes_at_the_same_position(broker: Broker, tmp_path: Path, pty_dir: Path):
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    mport = free_port()
    backend = DealerProcess(write_config(tmp_path, broker, shoe.path, mport), tmp_path / "backend.log")
    backend.start()
    try:
        for code, pos in zip(DEAL[:3], POSITIONS[:3]):
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        await wait_until(lambda: rec.expects("B2"), what="NEXT B2")  # A2 is journaled: its prompt went out
        backend.kill()
        seen = len(rec.messages)
        backend.start()
        await wait_until(lambda: any(t.endswith("/prompts") and m["kind"] == "NEXT" for t, m in rec.messages[seen:]),
                         timeout=START, what="prompt from the restarted backend")
        first = next(m for t, m in rec.messages[seen:] if t.endswith("/prompts"))
        assert (first["round_id"], first["position"], first["step"]) == (round_id(tmp_path / "journal.sqlite", 1), "B2", 4)
        for code, pos in zip(DEAL[3:], POSITIONS[3:]):
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        key = f"{TABLE}:{round_id(tmp_path / 'journal.sqlite', 1)}"
        await wait_until(lambda: rec.results(key), what="result")
        assert rec.results(key)[0]["cards"] == dict(zip(POSITIONS, DEAL))
        # metrics are served over HTTP by the running process
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
        for name in ("dealer_scan_reads_total", "dealer_rounds_total", "dealer_scan_to_publish_seconds_bucket",
                     "dealer_outbox_pending", "dealer_link_up"):
            assert name in body
        await wait_until(lambda: rec.events("round_opened") and rec.events("round_opened")[-1]["round_id"] == round_id(tmp_path / "journal.sqlite", 2),
                         what="next round opened")
        assert len(rec.results(key)) == 1
    finally:
        backend.stop()
        await rec.stop()
        shoe.close()
    assert "Traceback" not in (tmp_path / "backend.log").read_text()


@pytest.mark.timeout(240)
# Mosquitto only: the kill-anywhere property is the backend's, the broker path is the one above (on each broker).
async def test_kill_at_random_instants_never_loses_or_changes_a_result(broker: Broker, tmp_path: Path, pty_dir: Path):
    """A virtual dealer deals continuously while the backend is SIGKILLed at random moments."""
    rng = random.Random(2026)
    port = PtyPort(pty_dir, "shoe")
    sim = MqttBus(broker.url, client_id="sim", persistent_session=True)
    dealer = VirtualDealer(TABLE, VirtualShoe(READER), PtyShoeLink(port), deck=[c for c in _deck()], rng=rng,
                           faults=FaultPlan(noread=0.05), deal_interval=0.01, heartbeat_interval=0.2, patience=0.5)
    dealer.subscribe(sim)
    consumer = SettlementConsumer(sim, [TABLE], tmp_path / "ledger.sqlite", rng=random.Random(1))
    results: dict[str, set[bytes]] = {}
    sim.subscribe(topics.results(TABLE), lambda t, p: results.setdefault(json.loads(p)["idempotency_key"], set()).add(p))
    tasks = [asyncio.create_task(sim.run())]
    await sim.wait_connected()
    tasks.append(asyncio.create_task(dealer.run()))
    backend = DealerProcess(write_config(tmp_path, broker, port.path, 0, betting=0.2), tmp_path / "backend.log")
    backend.start()
    try:
        for _ in range(6):
            await asyncio.sleep(rng.uniform(0.3, 1.5))  # the chaos: a kill at an arbitrary instant
            backend.kill()
            backend.start()
        await wait_until(lambda: len(results) >= 8, timeout=120, what="eight rounds with results")
    finally:
        backend.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        port.close()
    keys = sorted(results)
    assert all(len(v) == 1 for v in results.values()), "a result was published with different content"
    seqs = [int(k.rsplit("-", 1)[1]) for k in keys]
    assert seqs[: len(seqs)] == list(range(1, len(seqs) + 1)), f"a round has no result: {keys}"
    for payloads in results.values():
        res = json.loads(next(iter(payloads)))
        if res["outcome"] == "COMPLETED":
            assert len(set(res["cards"].values())) == 6
    # the settlement consumer applied every result exactly once and its ledger agrees with the backend
    assert sorted(consumer.applied_keys()) == keys
    assert consumer.mismatches == []
    consumer.close()


def _deck() -> list[str]:
    from dealer.core.cards import STANDARD_52

    return list(STANDARD_52)
