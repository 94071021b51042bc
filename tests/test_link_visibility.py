"""Every link is visible from the start (issue 14, item 3), through the real service: a real
Mosquitto, real PTYs, real scanner JSON. ``dealer_link_up`` exists at 0 for every configured
reader and the broker before anything is heard; a reader with heartbeats is up only once heard;
a table waiting on a silent reader says so on its station prompt."""

from __future__ import annotations

from pathlib import Path

from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.edge.service import Service
from drivers.mqtt import MqttBus
from drivers.scanner_json import ScannerMessage
from simulators.pty_port import PtyPort
from simulators.shoe import VirtualShoe
from tests.conftest import Broker, wait_until
from tests.harness import READER, TABLE, Recorder, settings_for, start_service, stop_service

GW = "GW1"


def link_up(service: Service, link: str) -> float | None:
    """The sample of ``dealer_link_up{link}`` as /metrics would show it (None: no such series)."""
    return service.metrics.registry.get_sample_value("dealer_link_up", {"link": link})


def waits(rec: Recorder) -> list[str]:
    return [p["message"] for p in rec.prompts("WAIT") if p["round_id"] is None]


async def test_every_link_series_exists_at_zero_before_anything_is_heard(broker: Broker, tmp_path: Path,
                                                                        pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")
    settings = load_settings(
        service={"journal_path": tmp_path / "journal.sqlite", "metrics_enabled": False},
        mqtt={"url": broker.url, "client_id": "backend-links"},
        tables=[{"id": "T1", "game": "teen-patti", "scanner": {"kind": "serial", "port": port.path, "reader_id": "SC1"}},
                {"id": "T2", "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": GW}}])
    service = Service(settings, bus=MqttBus(broker.url, client_id="backend-links"))
    try:  # built, not started: no port opened, no broker connected, nothing heard
        assert link_up(service, "scanner:SC1") == 0
        assert link_up(service, f"scanner:{GW}") == 0
        assert link_up(service, "broker") == 0
    finally:
        service.journal.close()
        port.close()


async def test_a_silent_serial_reader_is_not_up_and_its_table_says_so(broker: Broker, tmp_path: Path,
                                                                     pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")  # plugged in, but the reader behind it says nothing
    shoe = VirtualShoe(READER)
    rec = await Recorder(broker.url).start()
    service, task = await start_service(settings_for(tmp_path, broker.url, port.path))
    link = f"scanner:{READER}"
    try:
        await wait_until(lambda: service.inputs.serial_links and service.inputs.serial_links[0].port_open, what="port open")
        await wait_until(lambda: link_up(service, "broker") == 1, what="broker link up")
        await wait_until(lambda: f"waiting for reader {READER}: not heard since start" in waits(rec),
                         what="the station told which reader the table waits for")
        assert link_up(service, link) == 0  # an open port proves nothing about the reader behind it
        assert service.links[TABLE].up[link] is None and not rec.events("round_opened")
        # the reader's first heartbeat (without even a BOOT before it) brings the link up
        port.write(shoe.heartbeat())
        await wait_until(lambda: link_up(service, link) == 1, what="reader up after its first heartbeat")
        await wait_until(lambda: rec.events("round_opened"), what="a round opens once every link is up")
        await wait_until(lambda: "waiting for the next round" in waits(rec), what="the idle prompt once all is up")
        assert not [m for m in waits(rec) if m.startswith("waiting for reader") and "down" in m]
    finally:
        await stop_service(task)
        await rec.stop()
        port.close()


async def test_an_mqtt_reader_that_never_connects_is_down_after_its_timeout(broker: Broker, tmp_path: Path) -> None:
    rec = await Recorder(broker.url).start()
    settings = load_settings(
        service={"journal_path": tmp_path / "journal.sqlite", "metrics_enabled": False},
        mqtt={"url": broker.url, "client_id": "backend-gw"},
        tables=[{"id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1,
                 "scanner": {"kind": "mqtt", "reader_id": GW, "heartbeat_timeout": 0.5}}])
    service, task = await start_service(settings)
    link = f"scanner:{GW}"
    try:
        await wait_until(lambda: f"waiting for reader {GW}: not heard since start" in waits(rec),
                         what="prompt naming the silent gateway")
        assert link_up(service, link) == 0
        # a gateway that never says anything is down once its heartbeat timeout has passed: the
        # "reader down" alert (dealer_link_up == 0) and the link_down event both see it
        await wait_until(lambda: any(e["data"] == {"link": link, "reason": "not heard since start"}
                                     for e in rec.events("link_down")), what="link_down for the silent gateway")
        await wait_until(lambda: f"waiting for reader {GW}: down (not heard since start)" in waits(rec),
                         what="prompt saying the gateway is down")
        assert link_up(service, link) == 0 and not rec.events("round_opened")
        hb = ScannerMessage(reader=GW, seq=0, status="HB")
        await rec.bus.publish(topics.scanner(TABLE), hb.model_dump_json().encode())
        await wait_until(lambda: link_up(service, link) == 1, what="gateway up after its first heartbeat")
        await wait_until(lambda: rec.events("link_up"), what="link_up event")
        await wait_until(lambda: rec.events("round_opened"), what="a round opens once the gateway is heard")
    finally:
        await stop_service(task)
        await rec.stop()


async def test_a_table_between_rounds_says_when_its_reader_goes_down(broker: Broker, tmp_path: Path,
                                                                    pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")
    shoe = VirtualShoe(READER)
    rec = await Recorder(broker.url).start()
    service, task = await start_service(settings_for(tmp_path, broker.url, port.path, auto_rounds=False))
    try:
        await wait_until(lambda: service.inputs.serial_links and service.inputs.serial_links[0].port_open, what="port open")
        port.write(shoe.boot())
        await wait_until(lambda: waits(rec) and waits(rec)[-1] == "waiting for the next round",
                         what="idle prompt once the reader is heard")
        port.unplug()
        await wait_until(lambda: waits(rec)[-1].startswith(f"waiting for reader {READER}: down ("),
                         what="idle prompt naming the reader that went down")
        assert link_up(service, f"scanner:{READER}") == 0
    finally:
        await stop_service(task)
        await rec.stop()
        port.close()
