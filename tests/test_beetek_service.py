"""A Bee-Tek shoe through the real service (issue 14, item 4): the virtual shoe writes the
vendor's ASCII elements into a real PTY, the backend reads them with ``protocol = "beetek"``,
a real Mosquitto carries prompts and events. Every fault the shoe and its line can have is
played: what the backend sees, and what it cannot see (docs/scanner-protocol.md §10)."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from tools.audit import recall, render_recall
from dealer.edge.config import load_settings
from dealer.edge.service import Service
from simulators.beetek import BeeTekShoe
from simulators.pty_port import PtyPort
from tests.conftest import Broker, wait_until
from tests.harness import READER, TABLE, Recorder, start_service, stop_service

LINK = f"scanner:{READER}"


def beetek_settings(tmp: Path, url: str, port: str, **table: Any):
    cfg = {"id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1,
           "scanner": {"kind": "serial", "port": port, "reader_id": READER, "protocol": "beetek"}}
    cfg.update(table)
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"url": url, "client_id": "backend-beetek"}, tables=[cfg])


def journaled_reads(service: Service) -> list[dict[str, Any]]:
    with sqlite3.connect(service.settings.service.journal_path) as db:
        return [json.loads(b) for (b,) in db.execute("SELECT body FROM events WHERE type = 'scan_read' ORDER BY id")]


def notices(service: Service, kind: str) -> float:
    return service.metrics.scanner_notices.labels(reader=READER, kind=kind)._value.get()


class Dealer:
    """The test deals by hand: bytes into the PTY, one write per read of the backend."""

    def __init__(self, port: PtyPort, rec: Recorder, service: Service) -> None:
        self.port, self.rec, self.service = port, rec, service

    async def send(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.port.write(chunk)
            await asyncio.sleep(0.02)  # separate writes, so the backend reads them apart (split frames)

    def cards(self) -> dict[str, str]:
        cur = self.service.tables[TABLE].current
        return dict(cur.cards) if cur is not None else {}

    def rescans(self, position: str) -> list[dict[str, Any]]:
        return [p for p in self.rec.prompts("RESCAN") if p["position"] == position]


async def test_a_beetek_shoe_deals_a_round_through_every_fault(broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")
    shoe, rng = BeeTekShoe(), random.Random(14)
    rec = await Recorder(broker.url).start()
    service, task = await start_service(beetek_settings(tmp_path, broker.url, port.path))
    d = Dealer(port, rec, service)
    try:
        # No heartbeat in this protocol: the open port is all there is, and a round opens with
        # nothing ever sent by the shoe.
        await wait_until(lambda: rec.expects("A1"), what="NEXT A1 without a byte from the shoe")
        assert service.links[TABLE].up[LINK] is True
        link = service.inputs.serial_links[0]
        assert link.baudrate == 9600 and not link.capabilities.heartbeats

        # A1: line noise and a hardware warning change nothing; a read split over three reads registers
        await d.send(shoe.garbage(60, rng))
        await wait_until(lambda: link.garbage_bytes > 0, what="noise counted")
        await d.send(shoe.warning(1))
        await wait_until(lambda: notices(service, "device_warning") == 1, what="warning counted")
        assert rec.expects("A1") and not rec.events("scan_rejected") and d.cards() == {}
        await d.send(*shoe.split(shoe.card("AS"), rng, 3))
        await wait_until(lambda: d.cards() == {"A1": "AS"}, what="AS at A1")

        # B1: a failed read makes the dealer rescan; then a read joined with two warnings in one write
        await d.send(shoe.failed())
        await wait_until(lambda: [p["reason"] for p in d.rescans("B1")] == ["noread"], what="RESCAN B1 (noread)")
        await d.send(shoe.warning(2) + shoe.card("KS") + shoe.warning(3))
        await wait_until(lambda: d.cards().get("B1") == "KS", what="KS at B1")
        assert notices(service, "device_warning") == 3

        # A2: an alarm, in both of its forms, makes the dealer rescan
        await d.send(shoe.alarm("E3 Card Not Read"))
        await wait_until(lambda: len(d.rescans("A2")) == 1, what="RESCAN A2 (alarm)")
        await d.send(shoe.alarm("E1 Cover Open", tag="GameAlarm"))
        await wait_until(lambda: len(d.rescans("A2")) == 2, what="RESCAN A2 (GameAlarm)")
        assert [(p["reason"], p["message"]) for p in d.rescans("A2")] == [
            ("device_fault", "RESCAN A2: the scanner reported a fault (shoe alarm: E3 Card Not Read)"),
            ("device_fault", "RESCAN A2: the scanner reported a fault (shoe alarm: E1 Cover Open)")]
        await d.send(shoe.card("AD"))
        await wait_until(lambda: d.cards().get("A2") == "AD", what="AD at A2")

        # B2: the same read twice (line trouble, or a card passed twice): nothing in the protocol
        # tells a repeat from a second read, so the table refuses the copy as a duplicate
        read = shoe.card("KH")
        await d.send(read + shoe.repeated())
        await wait_until(lambda: [p["reason"] for p in d.rescans("A3")] == ["duplicate_card"], what="duplicate refused")
        assert d.cards() == {"A1": "AS", "B1": "KS", "A2": "AD", "B2": "KH"}
        # face up: the card may be named
        assert d.rescans("A3")[0]["message"] == "RESCAN A3: the card was already registered in this round (KH)"

        # A3: a manual burn where the plan has none is set aside: no position, never shown, and a
        # later read of that card is a duplicate
        await d.send(shoe.burn("9D"))
        await wait_until(lambda: rec.events("card_burned"), what="card_burned event")
        [burned] = rec.events("card_burned")
        assert burned["data"] == {"expected": "A3", "count": 1} and "9D" not in json.dumps(burned)
        await wait_until(lambda: rec.prompts("NEXT")[-1]["message"] == "burn card set aside, not dealt: deal A3 (face up)",
                         what="the station still asks for A3, saying why")
        assert rec.prompts("NEXT")[-1]["position"] == "A3"
        await d.send(shoe.card("9D"))
        await wait_until(lambda: len(d.rescans("A3")) == 2, what="the burned card refused")
        assert d.rescans("A3")[1]["message"] == ("RESCAN A3: the card was already registered in this round "
                                                 "(a card already burned)")
        assert not [m for t, m in rec.messages if "9D" in json.dumps(m)]  # a burn is never published
        await d.send(shoe.card("AC"))
        await wait_until(lambda: d.cards().get("A3") == "AC", what="AC at A3")

        # B3: the shoe reads KC and the line loses it. Nothing in the protocol can tell (no sequence
        # number, no heartbeat to reveal a gap): the backend still waits for B3 and the dealer, not
        # looking at the station, deals the next card from the shoe: that card becomes B3.
        await wait_until(lambda: rec.expects("B3"), what="NEXT B3")
        await d.send(shoe.dropped("KC"))
        assert rec.expects("B3") and service.links[TABLE].up[LINK] is True
        await d.send(shoe.card("QC"))
        key = f"{TABLE}:{service.tables[TABLE].current.round_id}"
        await wait_until(lambda: rec.results(key), what="the round's result")
        [result] = rec.results(key)
        assert result["cards"] == {"A1": "AS", "B1": "KS", "A2": "AD", "B2": "KH", "A3": "AC", "B3": "QC"}
        # what compensates: the station and ops see every registered face-up card as it registers
        await wait_until(lambda: [(e["data"]["position"], e["data"]["card"]) for e in rec.events("card_registered")][-1]
                         == ("B3", "QC"), what="QC shown at B3")

        # the journal holds the burn (and only the burn carries the flag)
        reads = journaled_reads(service)
        assert [(r["code"], r.get("burn", False)) for r in reads] == [
            ("AS", False), ("KS", False), ("AD", False), ("KH", False), ("KH", False), ("9D", True), ("9D", False),
            ("AC", False), ("QC", False)]
        assert link.frames_bad == 0 and notices(service, "corrupt") == 0
        assert service.metrics.scan_reads.labels(table=TABLE, result="burned")._value.get() == 1
    finally:
        await stop_service(task)
        await rec.stop()
        port.close()
    # recall (journal only, for auditors) shows the burn: the read with its flag and the set-aside
    text = render_recall(recall(service.settings, TABLE, 1))
    assert '"burn": true' in text and '"code": "9D"' in text and "card_burned" in text


async def test_a_burn_where_the_plan_has_one_registers_there_and_damage_means_rescan(broker: Broker, tmp_path: Path,
                                                                                   pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")
    shoe = BeeTekShoe(ten="T")
    rec = await Recorder(broker.url).start()
    service, task = await start_service(beetek_settings(tmp_path, broker.url, port.path,
                                                        options={"burn_cards": 1}))
    d = Dealer(port, rec, service)
    try:
        await wait_until(lambda: rec.expects("BURN1"), what="NEXT BURN1")
        await d.send(shoe.burn("2C"))  # the shoe's burn mode, where the rulebook burns
        await wait_until(lambda: d.cards() == {"BURN1": "2C"}, what="2C at BURN1")
        await wait_until(lambda: rec.events("card_registered"), what="card_registered for BURN1")
        assert not rec.events("card_burned")
        burn_event = rec.events("card_registered")[-1]
        assert burn_event["data"]["position"] == "BURN1" and burn_event["data"]["card"] is None  # never shown
        # a damaged element that still looks like one is CORRUPT: the dealer rescans
        await d.send(b" [Game]<Card:1H> ")
        await wait_until(lambda: [p["reason"] for p in d.rescans("A1")] == ["corrupt_frame"], what="RESCAN A1")
        await d.send(shoe.card("TH"))  # the shoe spells the ten 'T' here; the rulebook's code is TH
        await wait_until(lambda: d.cards().get("A1") == "TH", what="TH at A1")
        assert notices(service, "corrupt") == 1
    finally:
        await stop_service(task)
        await rec.stop()
        port.close()


async def test_an_unplugged_shoe_takes_the_link_down_and_the_replug_brings_it_back(broker: Broker, tmp_path: Path,
                                                                                 pty_dir: Path) -> None:
    port = PtyPort(pty_dir, "shoe")
    rec = await Recorder(broker.url).start()
    service, task = await start_service(beetek_settings(tmp_path, broker.url, port.path, auto_rounds=False))
    try:
        await wait_until(lambda: service.links[TABLE].up.get(LINK) is True, what="link up on open")
        port.unplug()  # an open, readable port is all this protocol has: losing it is a link down
        await wait_until(lambda: service.links[TABLE].up.get(LINK) is False, what="link down")
        await wait_until(lambda: any(p["message"].startswith(f"waiting for reader {READER}: down")
                                     for p in rec.prompts("WAIT")), what="the station is told")
        port.replug()
        await wait_until(lambda: service.links[TABLE].up.get(LINK) is True, what="link up again")
    finally:
        await stop_service(task)
        await rec.stop()
        port.close()


async def test_a_virtual_dealer_with_a_beetek_shoe_plays_rounds_through_its_faults(broker: Broker, tmp_path: Path,
                                                                                  pty_dir: Path) -> None:
    """The simulator's virtual dealer drives the Bee-Tek shoe as it drives the native one: it
    follows the station, and a read lost on the line (undetectable) costs only its patience,
    after which it passes the card again, as a dealer who watches the station does."""
    from dealer.core.cards import STANDARD_52
    from drivers.mqtt import MqttBus
    from simulators.beetek import BeeTekFaultPlan
    from simulators.station import PtyShoeLink, VirtualDealer

    port = PtyPort(pty_dir, "shoe")
    rec = await Recorder(broker.url).start()
    sim = MqttBus(broker.url, client_id="sim-beetek")
    service, task = await start_service(beetek_settings(tmp_path, broker.url, port.path))
    plan = BeeTekFaultPlan(script=["failed", "alarm", "warning", "garbage", "split", "joined", "drop"])
    dealer = VirtualDealer(TABLE, BeeTekShoe(), PtyShoeLink(port), deck=STANDARD_52, rng=random.Random(5),
                           faults=plan, deal_interval=0.01, patience=0.5)  # type: ignore[arg-type]
    dealer.subscribe(sim)
    tasks = [asyncio.create_task(sim.run())]
    await sim.wait_connected()
    tasks.append(asyncio.create_task(dealer.run()))
    try:
        await wait_until(lambda: len(rec.results()) >= 2, timeout=60, what="two rounds dealt")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await stop_service(task)
        await rec.stop()
        port.close()
    assert dealer.faults_injected == {f: 1 for f in plan.script}
    assert all(r["outcome"] == "COMPLETED" and len(r["cards"]) == 6 for r in rec.results()[:2])
    assert {p["reason"] for p in rec.prompts("RESCAN")} == {"noread", "device_fault"}
