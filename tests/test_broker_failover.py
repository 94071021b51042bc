"""Several broker URLs (issue 16 item 4): ``[mqtt] broker_urls`` lists brokers, and the bus
moves to the next one when the one it uses fails (a refused connect, a lost connection), in
turn. Two real Mosquitto processes: the first is killed, the bus, and a real service dealing a
round, carry on through the second; a bad URL in the list is refused in one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from dealer.edge import topics
from dealer.edge.config import ConfigError, load_settings
from drivers.mqtt import MqttBus, cancel_and_wait
from simulators.broker import MosquittoProcess
from tests.conftest import wait_until
from tests.harness import (DEAL, POSITIONS, TABLE, HandShoe, Recorder, dealer_env, key, settings_for, start_service,
                           stop_service)

pytestmark = pytest.mark.integration  # Mosquitto processes, a PTY, dealer run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[MosquittoProcess, MosquittoProcess]]:
    brokers = []
    for name in ("a", "b"):
        d = tmp_path / f"broker-{name}"
        d.mkdir()
        b = MosquittoProcess(d)
        b.start()
        brokers.append(b)
    yield brokers[0], brokers[1]
    for b in brokers:
        b.kill()


async def test_the_bus_moves_to_the_next_broker_when_its_broker_dies_and_back_in_turn(
        two_brokers: tuple[MosquittoProcess, MosquittoProcess]) -> None:
    a, b = two_brokers
    got: dict[str, list[bytes]] = {"a": [], "b": []}
    watchers = []
    for name, broker in (("a", a), ("b", b)):
        w = MqttBus(broker.url, client_id=f"watch-{name}-{uuid.uuid4().hex[:6]}")
        w.subscribe("t/x", lambda _t, p, name=name: got[name].append(p))
        watchers.append((w, asyncio.create_task(w.run())))
    bus = MqttBus([a.url, b.url], client_id=f"failover-{uuid.uuid4().hex[:6]}")
    changes: list[tuple[bool, int]] = []
    bus.on_connection(lambda up, _reason: changes.append((up, bus.url_index)))
    task = asyncio.create_task(bus.run())
    try:
        for w, _ in watchers:
            await asyncio.wait_for(w.wait_connected(), 10)
        await asyncio.wait_for(bus.wait_connected(), 10)
        assert (bus.url_index, bus.url) == (0, a.url)  # the first broker first
        await bus.publish("t/x", b"1")
        await wait_until(lambda: got["a"] == [b"1"], what="published through the first broker")

        a.kill()
        await wait_until(lambda: bus.connected and bus.url_index == 1, what="connected to the second broker")
        await bus.publish("t/x", b"2")
        await wait_until(lambda: got["b"] == [b"2"], what="published through the second broker")

        a.start()  # back, but the bus stays where it works ...
        b.kill()  # ... until that one fails: round-robin, to the first again
        await wait_until(lambda: bus.connected and bus.url_index == 0, what="back on the first broker")
        assert changes[:4] == [(True, 0), (False, 0), (True, 1), (False, 1)] and changes[-1] == (True, 0)
    finally:
        await cancel_and_wait(task)
        for _w, t in watchers:
            await cancel_and_wait(t)


async def test_a_broker_down_at_start_is_skipped(two_brokers: tuple[MosquittoProcess, MosquittoProcess]) -> None:
    a, b = two_brokers
    a.kill()
    bus = MqttBus([a.url, b.url], client_id=f"failover-{uuid.uuid4().hex[:6]}", backoff_max=0.2)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        assert bus.url == b.url
    finally:
        await cancel_and_wait(task)


async def test_a_service_deals_on_through_the_second_broker_when_the_first_dies(
        two_brokers: tuple[MosquittoProcess, MosquittoProcess], tmp_path: Path, pty_dir: Path) -> None:
    a, b = two_brokers
    shoe = HandShoe(pty_dir)
    rec = await Recorder(b.url).start()  # settlement and the station, on the second broker only
    base = settings_for(tmp_path, None, shoe.path)
    settings = load_settings(service={"journal_path": base.service.journal_path, "metrics_enabled": False},
                             mqtt={"broker_urls": [a.url, b.url], "client_id": base.mqtt.client_id},
                             tables=[t.model_dump() for t in base.tables])
    service, task = await start_service(settings)
    try:
        await wait_until(lambda: service.bus.connected, what="backend connected")
        assert service.metrics.broker_url_index._value.get() == 0
        a.kill()
        await wait_until(lambda: service.bus.connected and service.bus.url_index == 1,
                         what="backend on the second broker")
        await wait_until(lambda: service.metrics.broker_url_index._value.get() == 1, what="metric says broker 1")
        for code, pos in zip(DEAL, POSITIONS):  # a whole round, seen only through the second broker
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos} on the second broker")
            shoe.scan(code)
        await wait_until(lambda: rec.results(key(service, 1)), what="result on the second broker")
        assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))
        await wait_until(lambda: service.outbox_pending == 0, what="acknowledged through the second broker")
        assert [m for t, m in rec.messages if t == topics.events(TABLE) and m.get("event") == "round_opened"]
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


def test_a_bad_url_in_the_list_is_one_clear_line() -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(mqtt={"broker_urls": ["mqtt://127.0.0.1:1883", "http://mq2:1883"]})
    msg = str(exc.value)
    assert "\n" not in msg and "mqtt.broker_urls" in msg and "item 2 of 2" in msg and "'http://mq2:1883'" in msg
    with pytest.raises(ConfigError, match="keep one"):
        load_settings(mqtt={"broker_urls": ["mqtt://127.0.0.1:1883"], "url": "mqtt://127.0.0.1:1884"})
    with pytest.raises(ConfigError, match="empty"):
        load_settings(mqtt={"broker_urls": []})
    with pytest.raises(ConfigError, match="named twice"):
        load_settings(mqtt={"broker_urls": ["mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1883"]})
    s = load_settings(mqtt={"url": "mqtt://127.0.0.1:1883"})  # the single url as ever
    assert s.mqtt.urls == ["mqtt://127.0.0.1:1883"]
    s = load_settings(mqtt={"broker_urls": ["mqtt://127.0.0.1:1883", "mqtts://mq2:8883"]})
    assert s.mqtt.url == "mqtt://127.0.0.1:1883" and s.mqtt.urls == ["mqtt://127.0.0.1:1883", "mqtts://mq2:8883"]


def test_dealer_run_refuses_a_bad_url_in_the_list_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(f'[service]\njournal_path = "{tmp_path / "j.sqlite"}"\nmetrics_enabled = false\n'
                   '[mqtt]\nbroker_urls = ["mqtt://127.0.0.1:1883", "mqtt//oops"]\n')
    proc = subprocess.run([sys.executable, "-m", "dealer", "run", "--config", str(cfg)], cwd=ROOT, env=dealer_env(),
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and "mqtt.broker_urls" in lines[0] and "mqtt//oops" in lines[0], lines


def test_a_plain_url_to_another_host_in_the_list_is_refused_like_a_single_one(tmp_path: Path) -> None:
    from dealer.edge.security import check_deployment

    s = load_settings(service={"journal_path": tmp_path / "j.sqlite"},
                      mqtt={"broker_urls": ["mqtt://127.0.0.1:1883", "mqtt://mq2.studio:1883"]})
    problems = check_deployment(s, None)
    assert any("mqtt.broker_urls item 2" in p and "mq2.studio" in p and "plain MQTT" in p for p in problems), problems
    assert not any("item 1" in p for p in problems), problems
