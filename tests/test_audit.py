"""Game recall and the journal's hash chain, on a real SQLite journal written by the service."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tools.audit import recall, render_recall
from dealer.edge.config import load_settings
from dealer.core.events import CloseBetting, PlaceBet, ReadFailed, ScanRead, SupervisorVoid
from dealer.edge.journal import Journal
from dealer.edge.service import Service
from drivers.bus import LocalBus
from tests.harness import DEAL, round_id

pytestmark = pytest.mark.integration  # the CLI as a process

ROOT = Path(__file__).resolve().parent.parent
T = "T1"


def write_config(tmp: Path) -> Path:
    cfg = tmp / "dealer.toml"
    cfg.write_text(f"""
[service]
journal_path = "{tmp / 'journal.sqlite'}"
metrics_enabled = false

[[tables]]
id = "{T}"
game = "teen-patti"
auto_rounds = false

[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
""")
    return cfg


async def play_two_rounds(config: Path) -> None:
    settings = load_settings(config)
    service = Service(settings, bus=LocalBus(), broker_link=False)
    task = asyncio.create_task(service.run())
    await service.ready.wait()
    try:
        assert (await service.open_round(T)).accepted
        await service.submit(T, PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10"))
        await service.submit(T, CloseBetting())
        await service.submit(T, ScanRead(reader="SC1", code=DEAL[0], seq=1))
        await service.submit(T, ReadFailed(reader="SC1", reason="noread", detail=""))
        await service.submit(T, ScanRead(reader="SC1", code="01G", seq=3))  # a foreign card
        for i, code in enumerate(DEAL[1:], start=4):
            assert (await service.submit(T, ScanRead(reader="SC1", code=code, seq=i))).accepted
        assert (await service.open_round(T)).accepted
        await service.submit(T, CloseBetting())
        await service.submit(T, ScanRead(reader="SC1", code="2C", seq=20))
        assert (await service.submit(T, SupervisorVoid(supervisor="sup-ana", reason="shoe dropped"))).accepted
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_recall_shows_every_read_rescan_and_outcome(tmp_path: Path):
    config = write_config(tmp_path)
    await play_two_rounds(config)
    settings = load_settings(config)
    rounds = recall(settings, T, rounds=10)
    assert [r["round_id"] for r in rounds] == [round_id(settings, 1), round_id(settings, 2)]
    journal_id = round_id(settings, 1).split("-")[1]
    assert all(r["journal"]["id"] == journal_id for r in rounds)
    first = rounds[0]
    scans = [e for e in first["events"] if e["type"] == "scan_read"]
    assert [e["seq"] for e in scans] == [1, 3, 4, 5, 6, 7, 8]  # the device's sequence numbers
    assert all(e["received_at"].endswith("Z") and e["recorded_at"].endswith("Z") for e in first["events"])
    reasons = [eff["event"] and eff.get("reason") for e in first["events"] for eff in e["effects"]
               if eff.get("event") == "scan_rejected"]
    assert reasons == ["noread", "foreign_card"]
    assert first["result"]["outcome"] == "COMPLETED" and first["result"]["winner"] == "A"
    assert rounds[1]["result"]["reason"] == "voided by supervisor sup-ana: shoe dropped"
    text = render_recall(rounds)
    assert "RESCAN B1: the scanner could not read the card" in text and "VOIDED" in text
    assert text.splitlines()[0].endswith(f"id {journal_id}")  # the header names the journal
    only_last = recall(load_settings(config), T, rounds=1)
    assert [r["round_id"] for r in only_last] == [round_id(settings, 2)]


async def test_the_journal_is_append_only_and_tampering_is_found(tmp_path: Path):
    config = write_config(tmp_path)
    await play_two_rounds(config)
    path = tmp_path / "journal.sqlite"
    j = Journal(path)
    report = j.verify_chain()
    assert report.ok and report.rows == j.count() > 10
    j.close()
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE events SET body = body WHERE id = 3")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM events WHERE id = 3")
    # someone with the file drops the guard and edits a row: the chain shows where
    db.execute("DROP TRIGGER events_no_update")
    db.execute("UPDATE events SET body = replace(body, 'AS', 'KS') WHERE type = 'scan_read' AND id = "
               "(SELECT MIN(id) FROM events WHERE type = 'scan_read')")
    db.commit()
    broken = Journal(path).verify_chain()
    first_scan = db.execute("SELECT MIN(id) FROM events WHERE type = 'scan_read'").fetchone()[0]
    assert not broken.ok and broken.first_broken == first_scan and "altered" in broken.reason
    out = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--config", str(config)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 1 and json.loads(out.stdout)["first_broken"] == first_scan
    assert json.loads(out.stdout)["journal_id"] == Journal(path).journal_id  # the id every round id carries


async def test_a_deleted_row_is_found(tmp_path: Path):
    config = write_config(tmp_path)
    await play_two_rounds(config)
    path = tmp_path / "journal.sqlite"
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER events_no_delete")
    db.execute("DELETE FROM events WHERE id = 5")
    db.commit()
    report = Journal(path).verify_chain()
    assert not report.ok and report.first_broken == 6 and "row 5 is missing" in report.reason
    ok = subprocess.run([sys.executable, "-m", "dealer", "recall", T, "--config", str(config), "--json"],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)
