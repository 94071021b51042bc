"""A scanner flooding the backend with garbage: counted, journaled as one fault per window,
and never in the way of the dealer's next valid card (real PTY, real Mosquitto)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dealer.core.events import LinkUp
from dealer.edge.service import Service
from tests.conftest import Broker, wait_until
from tests.harness import (DEAL, POSITIONS, READER, TABLE, HandShoe, Recorder, deal, key, settings_for, start_service,
                           stop_service)


FRAME = b"$GARBAGE\r\n"  # one CORRUPT input each (no such grammar)
FLOOD = FRAME * (200_000 // len(FRAME))  # 200 KB


def read_failed(service: Service) -> list[dict[str, Any]]:
    with sqlite3.connect(service.settings.service.journal_path) as db:
        return [json.loads(b) for (b,) in db.execute("SELECT body FROM events WHERE type = 'read_failed' ORDER BY id")]


def suppressed(service: Service, kind: str = "corrupt_frame") -> float:
    return service.metrics.flood_suppressed.labels(reader=READER, kind=kind)._value.get()


async def write_all(shoe: HandShoe, data: bytes) -> None:
    """Push every byte through the PTY (its kernel buffer takes a few KB at a time)."""
    while data:
        sent = shoe.port.write(data[:4096])
        data = data[sent:]
        if not sent:
            await asyncio.sleep(0.001)


async def studio(broker: Broker, tmp_path: Path, pty_dir: Path, **scanner: Any):
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    cfg = {"kind": "serial", "port": shoe.path, "reader_id": READER, "heartbeat_timeout": 30, **scanner}
    service, task = await start_service(settings_for(tmp_path, broker.url, shoe.path, scanner=cfg))
    return service, rec, shoe, task


async def test_200_kb_of_garbage_during_a_deal_is_a_bounded_number_of_journal_rows(
        broker: Broker, tmp_path: Path, pty_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    service, rec, shoe, task = await studio(broker, tmp_path, pty_dir)  # defaults: burst 20, window 10 s
    try:
        await deal(rec, shoe, DEAL[:2], POSITIONS[:2])
        await wait_until(lambda: rec.expects("A2"), what="NEXT A2")
        frames = len(FLOOD) // len(FRAME)
        await write_all(shoe, FLOOD)
        burst = service.configs[TABLE].scanner.flood_burst
        await wait_until(lambda: suppressed(service) == frames - burst, timeout=60, what="the flood counted")
        await wait_until(lambda: len(read_failed(service)) == burst, what="the burst journaled")
        assert service.tables[TABLE].current.expected_position == "A2"  # the deal waits where it was
        assert rec.expects("A2")
        shoe.scan(DEAL[2])  # the dealer's next valid card: the flood's summary goes first, then the card
        await wait_until(lambda: service.tables[TABLE].current.cards.get("A2") == DEAL[2], what="card at A2")
        await wait_until(lambda: len(read_failed(service)) >= burst + 1, what="the summary committed with the card")
        rows = read_failed(service)
        # the card came down the same line after the whole flood (the barrier): nothing else was
        # journaled for the rest of the window, only the burst and then the one summary
        assert len(rows) == burst + 1
        assert rows[-1]["reason"] == "corrupt_frame"
        assert rows[-1]["detail"].startswith(f"flood: {frames - burst} bad frames in the last ")
        await deal(rec, shoe, DEAL[3:], POSITIONS[3:])
        await wait_until(lambda: rec.results(key(service, 1)), what="result")
        assert rec.results(key(service, 1))[0]["cards"] == dict(zip(POSITIONS, DEAL))
        assert len(read_failed(service)) == burst + 1
        assert service.metrics.queue_dropped.labels(kind="scanner_failure")._value.get() == 0
        corrupt_lines = [r for r in caplog.records if "corrupt frame" in r.getMessage()]
        assert 0 < len(corrupt_lines) <= 10 + 2  # the serial link's own warnings are bounded too
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_a_flood_window_ends_on_its_own_with_one_summary(broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    service, rec, shoe, task = await studio(broker, tmp_path, pty_dir, flood_burst=3, flood_window=0.5)
    try:
        await deal(rec, shoe, DEAL[:1], POSITIONS[:1])
        await wait_until(lambda: rec.expects("B1"), what="NEXT B1")
        await write_all(shoe, FRAME * 500)
        await wait_until(lambda: len(read_failed(service)) == 3 + 1, what="burst and one summary, no card needed")
        rows = read_failed(service)
        assert rows[-1]["detail"].startswith("flood: 497 bad frames in the last ")
        assert suppressed(service) == 497
        assert service.tables[TABLE].current.expected_position == "B1"
        assert rec.prompts("RESCAN")[-1]["position"] == "B1" or rec.prompts("ALERT")[-1]["position"] == "B1"
        await asyncio.sleep(1.0)  # the flood is over: the budget refills, a single bad read gets its RESCAN again
        n = len(rec.prompts("RESCAN"))
        shoe.write(shoe.shoe.noread())
        await wait_until(lambda: len(rec.prompts("RESCAN")) > n, what="RESCAN for one bad read after the flood")
        await wait_until(lambda: read_failed(service)[-1]["reason"] == "noread", what="the noread journaled")
        shoe.scan(DEAL[1])
        await wait_until(lambda: service.tables[TABLE].current.cards.get("B1") == DEAL[1], what="card at B1")
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_an_mqtt_scanner_flood_is_counted_and_journaled_once_per_window(broker: Broker, tmp_path: Path) -> None:
    from tests.harness_mqtt import GATEWAY_READER as GW, Gateway, mqtt_settings

    rec = await Recorder(broker.url).start()
    settings = mqtt_settings(tmp_path, broker.url, scanner={"kind": "mqtt", "reader_id": GW, "heartbeat_timeout": 30,
                                                            "flood_burst": 5, "flood_window": 30})
    service, task = await start_service(settings)
    gw = Gateway(rec.bus.publish)
    try:
        await wait_until(lambda: service.bus.connected, what="backend subscribed")
        await gw.send("BOOT", "gw-1.0", advance=False, seq=0)
        await wait_until(lambda: rec.expects("A1"), what="NEXT A1")
        await gw.send("OK", DEAL[0])
        await wait_until(lambda: rec.expects("B1"), what="NEXT B1")
        for i in range(400):  # a gateway gone mad: misreads and faults as fast as it can
            await gw.send("MISREAD" if i % 4 else "FAULT", "??" if i % 4 else "JAM")
        count = service.metrics.flood_suppressed.labels
        await wait_until(lambda: count(reader=GW, kind="misread")._value.get()
                         + count(reader=GW, kind="device_fault")._value.get() == 400 - 5, what="flood counted")
        await wait_until(lambda: len(read_failed(service)) == 5, what="the burst journaled")
        assert service.tables[TABLE].current.expected_position == "B1"
        await gw.send("OK", DEAL[1])
        await wait_until(lambda: service.tables[TABLE].current.cards.get("B1") == DEAL[1], what="card at B1")
        await wait_until(lambda: len(read_failed(service)) == 6, what="the summary committed with the card")
        rows = read_failed(service)
        assert len(rows) == 6 and rows[-1]["reason"] == "misread"
        assert rows[-1]["detail"].startswith("flood: 395 failed reads in the last ")
        assert "misread 297" in rows[-1]["detail"] and "device_fault 98" in rows[-1]["detail"]
    finally:
        await stop_service(task)
        await rec.stop()


async def test_the_input_queue_drops_only_scanner_failures_beyond_its_cap(tmp_path: Path) -> None:
    from drivers.bus import LocalBus
    from drivers.scan import ScanInput, ScanKind
    from tests.harness_mqtt import GATEWAY_READER as GW, mqtt_settings

    settings = mqtt_settings(tmp_path, None, scanner={"kind": "mqtt", "reader_id": GW, "flood_burst": 10_000})
    service = Service(settings, bus=LocalBus(), broker_link=False)
    service.max_queue = 10
    task = asyncio.create_task(service.run())
    await service.ready.wait()
    try:
        service.links[TABLE].up[Service.scanner_link(service.configs[TABLE])] = True
        await service.open_round(TABLE)
        await wait_until(lambda: service.tables[TABLE].current.expected_position == "A1", what="dealing")
        # no await between these: the commit loop cannot drain the queue meanwhile
        for _ in range(50):
            service.inputs.on_scan_input(TABLE, ScanInput(GW, ScanKind.CORRUPT, detail="noise"))
        service.inputs.on_scan_input(TABLE, ScanInput(GW, ScanKind.OK, code=DEAL[0], seq=1))  # beyond the cap: kept
        fut = service.submit(TABLE, LinkUp(link="x"))  # an internal event: kept
        assert service.queue.items.qsize() == 12
        assert service.metrics.queue_dropped.labels(kind="scanner_failure")._value.get() == 40
        await fut
        await wait_until(lambda: service.tables[TABLE].current.cards.get("A1") == DEAL[0], what="card at A1")
        await wait_until(lambda: len(read_failed(service)) == 10, what="the failures under the cap journaled")
        assert service.metrics.queue_dropped.labels(kind="scanner_failure")._value.get() == 40
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
