"""Deterministic replay (issue 13 item 3), through a real Service on a real SQLite journal:
a round replays under the rules it opened with, a configuration change applies from the next
round, the rules are journaled once per change, a refused journal row stops start-up (exit 2),
and recall shows the journaled rules."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tools.audit import recall
from dealer.edge.config import load_settings
from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ScanRead
from dealer.edge.journal import Batch, Journal, ReplayError
from dealer.core.messages import RoundResult
from dealer.edge.service import Service
from drivers.bus import LocalBus
from tests.harness import DEAL, READER, TABLE, dealer_run, mqtt_table, refused_start, round_id, write_config

R1 = f"{TABLE}-000001"  # a round of a journal from before journal ids


def settings(tmp: Path, *, max_stake: str, deal_order: str, **extra: Any):
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
        tables=[{"id": TABLE, "game": "teen-patti", "auto_rounds": False, "betting_seconds": 600,
                 "limits": {"player_a": {"min": "1.00", "max": max_stake}},
                 "options": {"deal_order": deal_order}, "scanner": {"kind": "mqtt", "reader_id": READER}, **extra}])


OLD = dict(max_stake="100.00", deal_order="ALTERNATE")
NEW = dict(max_stake="10.00", deal_order="BLOCK")


class Running:
    def __init__(self, s) -> None:
        self.service = Service(s, bus=LocalBus(), broker_link=False)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Service:
        self.task = asyncio.create_task(self.service.run())
        await asyncio.wait_for(self.service.ready.wait(), 10)
        # the rules event (if any) is the first item of the queue: wait until it is committed
        await self.service.submit(TABLE, CloseBetting(round_id="nothing-open"))
        return self.service

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def rules_rows(path: Path) -> list[dict[str, Any]]:
    j = Journal(path)
    try:
        return [json.loads(r.body) | {"row": r.id} for r in j.rows(TABLE) if r.type == "table_rules"]
    finally:
        j.close()


def result_of(step) -> RoundResult:
    return next(e for e in step.effects if isinstance(e, RoundResult))


async def test_a_round_replays_under_the_rules_it_opened_with(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    old_s, new_s = settings(tmp_path, **OLD), settings(tmp_path, **NEW)
    old_hash, new_hash = old_s.tables[0].rules().rules_hash, new_s.tables[0].rules().rules_hash
    assert old_hash != new_hash
    R1, R2 = round_id(old_s, 1), round_id(old_s, 2)  # noqa: N806 (this journal's rounds)

    async with Running(old_s) as svc:
        assert (await svc.open_round(TABLE)).accepted
        bet = PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="50.00", round_id=R1)
        assert (await svc.submit(TABLE, bet)).accepted
        assert (await svc.submit(TABLE, CloseBetting(round_id=R1))).accepted
        for code in DEAL[:3]:  # ALTERNATE: A1, B1, A2
            assert (await svc.submit(TABLE, ScanRead(reader=READER, code=code))).accepted
        assert svc.tables[TABLE].current.cards == {"A1": "AS", "B1": "KS", "A2": "AD"}
    assert [r["rules_hash"] for r in rules_rows(journal)] == [old_hash]

    async with Running(old_s):  # same rules, same software: nothing journaled again
        pass
    assert len(rules_rows(journal)) == 1

    async with Running(new_s) as svc:  # max 10.00 < the accepted 50.00, BLOCK deal order
        table = svc.tables[TABLE]
        cur = table.current
        assert cur.round_id == R1 and cur.rules.rules_hash == old_hash
        assert set(cur.bets) == {"b1"} and cur.cards == {"A1": "AS", "B1": "KS", "A2": "AD"}
        assert cur.expected_position == "B2"  # ALTERNATE still, not BLOCK's A3
        assert table.rules.rules_hash == new_hash  # in force from the next round
        for code in DEAL[3:]:
            step = await svc.submit(TABLE, ScanRead(reader=READER, code=code))
            assert step.accepted
        res = result_of(step)
        assert res.round_id == R1 and res.rules_hash == old_hash and res.software_version
        assert res.accepted_bets.bet_ids == ["b1"] and res.winner == "A"
        assert res.cards == {"A1": "AS", "B1": "KS", "A2": "AD", "B2": "KH", "A3": "AC", "B3": "KC"}

        assert (await svc.open_round(TABLE)).accepted  # the next round: the new rules
        assert table.current.round_id == R2 and table.current.rules.rules_hash == new_hash
        refused = await svc.submit(TABLE, PlaceBet(bet_id="b2", player_id="p1", bet_type="player_a",
                                                   stake="50.00", round_id=R2))
        assert not refused.accepted and "10" in refused.rejection.reason
        assert (await svc.submit(TABLE, PlaceBet(bet_id="b3", player_id="p1", bet_type="player_a",
                                                 stake="10.00", round_id=R2))).accepted
        assert (await svc.submit(TABLE, CloseBetting(round_id=R2))).accepted
        for code in DEAL[:3]:
            assert (await svc.submit(TABLE, ScanRead(reader=READER, code=code))).accepted
        assert table.current.cards == {"A1": "AS", "A2": "KS", "A3": "AD"}  # BLOCK
    rows = rules_rows(journal)
    assert [r["rules_hash"] for r in rows] == [old_hash, new_hash]

    async with Running(new_s) as svc:  # restart again: R2 replays under the new rules, nothing journaled
        cur = svc.tables[TABLE].current
        assert cur.round_id == R2 and cur.rules.rules_hash == new_hash and cur.expected_position == "B1"
    assert len(rules_rows(journal)) == 2

    # recall replays with the journaled rules, even under a configuration with other rules
    rounds = recall(old_s, TABLE)
    assert [r["round_id"] for r in rounds] == [R1, R2]
    assert rounds[0]["rules"]["hash"] == old_hash and rounds[0]["result"]["rules_hash"] == old_hash
    assert rounds[0]["rules"]["source"] == f"journal row {rows[0]['row']}"
    assert rounds[0]["rules"]["canonical"]["options"]["deal_order"] == "ALTERNATE"
    assert rounds[1]["rules"]["hash"] == new_hash and rounds[1]["rules"]["canonical"]["limits"]["player_a"]["max"] == "10.00"
    assert [e["type"] for e in rounds[1]["events"]][:1] == ["open_round"]


async def test_a_new_software_version_is_journaled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings(tmp_path, **OLD)
    async with Running(s):
        pass
    monkeypatch.setattr("dealer.core.rules.software_version", lambda: "9.9.9")
    async with Running(s):
        pass
    async with Running(s):
        pass
    rows = rules_rows(tmp_path / "journal.sqlite")
    assert [r["software_version"] for r in rows][1:] == ["9.9.9"] and len(rows) == 2
    assert rows[0]["rules_hash"] == rows[1]["rules_hash"]


async def test_an_old_journal_without_rules_replays_under_todays_rules_and_journals_them(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    j = Journal(journal, fsync=False)
    j.commit(Batch(events=[(TABLE, R1, OpenRound(round_id=R1, at=1)),
                           (TABLE, R1, PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="5.00",
                                                round_id=R1, at=2))]))
    j.close()
    s = settings(tmp_path, **NEW)
    async with Running(s) as svc:
        cur = svc.tables[TABLE].current
        assert cur.round_id == R1 and set(cur.bets) == {"b1"} and cur.rules.rules_hash == s.tables[0].rules().rules_hash
    assert [r["rules_hash"] for r in rules_rows(journal)] == [s.tables[0].rules().rules_hash]


def _forge_illegal_row(journal: Path) -> int:
    """A valid event the core refuses: a card read while betting is still open."""
    j = Journal(journal, fsync=False)
    j.commit(Batch(events=[(TABLE, R1, OpenRound(round_id=R1, at=1)),
                           (TABLE, R1, ScanRead(reader=READER, code="AS", at=2))]))
    row = max(r.id for r in j.rows(TABLE))
    j.close()
    return row


async def test_a_refused_journal_row_stops_the_service_naming_it(tmp_path: Path) -> None:
    row = _forge_illegal_row(tmp_path / "journal.sqlite")
    service = Service(settings(tmp_path, **OLD), bus=LocalBus(), broker_link=False)
    with pytest.raises(ReplayError, match=f"refused row {row} \\(scan_read\\)"):
        await service.run()
    assert not service.ready.is_set()


@pytest.mark.integration
def test_dealer_run_exits_2_naming_the_refused_row(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    row = _forge_illegal_row(journal)
    last = refused_start(dealer_run(write_config(tmp_path, journal, log_level="warning", tables=[mqtt_table()])))
    assert last.startswith(f"dealer: refusing to start: journal {journal}: replay of table {TABLE} refused row "
                           f"{row} (scan_read):"), last


async def test_a_journal_row_that_is_not_a_valid_event_stops_the_service_naming_it(tmp_path: Path) -> None:
    import sqlite3

    from dealer.edge.journal import row_hash

    journal = tmp_path / "journal.sqlite"
    j = Journal(journal, fsync=False)
    j.commit(Batch(events=[(TABLE, R1, OpenRound(round_id=R1, at=1))]))
    last = list(j.rows())[-1]
    j.close()
    body = '{"type":"place_bet","at":2,"bet_id":"b1"}'  # hash-chained, but not a valid event
    h = row_hash(last.hash, last.id + 1, TABLE, R1, "place_bet", body, 3)
    with sqlite3.connect(journal) as db:
        db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (last.id + 1, TABLE, R1, "place_bet", body, 3, last.hash, h))
    db.close()
    service = Service(settings(tmp_path, **OLD), bus=LocalBus(), broker_link=False)
    with pytest.raises(ReplayError, match=f"row {last.id + 1} is not a valid event"):
        await service.run()
