"""Round ids and idempotency keys are never reused: the journal id is part of every one.

A new, lost or re-installed journal starts its round sequence at 1 again; the journal id
(generated when the journal is created, kept in its append-only ``meta`` table) keeps its
round ids, and so its idempotency keys, apart from every earlier journal's, so settlement
applies the new rounds instead of ignoring them as duplicates.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from dealer.edge.config import load_settings
from dealer.core.events import LinkDown, LinkUp, OpenRound, ResultDelivered
from dealer.games.teen_patti import TeenPatti
from dealer.edge.journal import JOURNAL_ID, Batch, Journal, JournalError
from dealer.core.round import TableRules
from dealer.edge.service import Service
from dealer.core.table import Table
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from simulators.settlement import SettlementConsumer
from tests.conftest import Broker, wait_until
from tests.harness import (DEAL, POSITIONS, TABLE, HandShoe, Recorder, deal, key, round_id, settings_for, start_service,
                           stop_service)


def _drop_meta(path: Path) -> None:
    """Make a journal look as it did before journal ids (same schema, no meta table)."""
    db = sqlite3.connect(path)
    db.execute("DROP TABLE meta")
    db.commit()
    db.close()


def test_the_journal_id_is_created_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    first, source = j.journal_id, j.journal_id_source
    j.close()
    assert JOURNAL_ID.match(first) and source == "created"
    j = Journal(path)
    assert (j.journal_id, j.journal_id_source) == (first, "existing")
    j.close()
    other = Journal(tmp_path / "other.sqlite")
    assert other.journal_id != first  # 40 random bits: a clash here is a broken generator
    other.close()


def test_the_meta_table_is_append_only(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    db = sqlite3.connect(j.path)
    for sql in ("UPDATE meta SET value = 'aaaaaaaa'", "DELETE FROM meta"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute(sql)
    db.close()
    j.close()


@pytest.mark.parametrize("damage", ["UPDATE meta SET value = 'NOT-AN-ID'", "DELETE FROM meta"])
def test_a_damaged_or_missing_journal_id_is_refused(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    j.commit(Batch(events=[(TABLE, "T1-x", OpenRound(round_id=f"{TABLE}-{j.journal_id}-000001"))]))
    j.close()
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER meta_no_update")
    db.execute("DROP TRIGGER meta_no_delete")
    db.execute(damage)
    db.commit()
    db.close()
    with pytest.raises(JournalError) as err:
        Journal(path)
    assert "journal id" in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_series_table_accepts_its_own_and_older_round_ids_only() -> None:
    table = Table(TableRules(table_id=TABLE, game=TeenPatti()), series="abcdefgh")
    assert table.next_round_id() == "T1-abcdefgh-000001"
    assert table.round_seq("T1-000007") == 7  # a journal from before journal ids
    assert table.round_seq("T1-abcdefgh-000008") == 8
    assert table.round_seq("T1-zzzzzzzz-000009") is None  # another journal's series
    assert table.round_seq("T2-abcdefgh-000009") is None
    plain = Table(TableRules(table_id=TABLE, game=TeenPatti()))
    assert plain.next_round_id() == "T1-000001" and plain.round_seq("T1-abcdefgh-000001") is None
    assert not plain.handle(OpenRound(round_id="T1-abcdefgh-000001")).accepted


def test_the_longest_table_id_still_makes_a_valid_round_id() -> None:
    tid = "T" * 32  # TableConfig.id allows 1..32 characters of [A-Za-z0-9_]
    table = Table(TableRules(table_id=tid, game=TeenPatti()), series="abcdefgh")
    table.last_seq = 999_999_999  # far beyond six digits
    rid = table.next_round_id()
    assert OpenRound(round_id=rid).round_id == rid and len(rid) <= 64


def _old_journal(path: Path, rounds: int) -> list[str]:
    """A journal as the service wrote it before journal ids: ``rounds`` rounds, each cancelled
    (a link went down while betting was open) and delivered, then the meta table removed."""
    table, j = Table(TableRules(table_id=TABLE, game=TeenPatti())), Journal(path)
    ids = []
    for n in range(1, rounds + 1):
        rid = table.next_round_id()
        ids.append(rid)
        for ev in (OpenRound(round_id=rid), LinkDown(link="broker", reason="x"),
                   ResultDelivered(round_id=rid, outbox_id=n), LinkUp(link="broker")):
            step = table.handle(ev)
            assert step.accepted
            if step.journal:
                j.commit(Batch(events=[(TABLE, rid, ev)]))
    j.close()
    _drop_meta(path)
    return ids


async def test_a_journal_from_before_journal_ids_gets_one_and_its_sequence_continues(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    old = _old_journal(path, 2)
    assert old == [f"{TABLE}-000001", f"{TABLE}-000002"]
    settings = load_settings(service={"journal_path": path, "metrics_enabled": False},
                             tables=[{"id": TABLE, "game": "teen-patti", "auto_rounds": False,
                                      "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    service = Service(settings, bus=LocalBus(), broker_link=False)
    task = asyncio.create_task(service.run())
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        assert service.journal.journal_id_source == "migrated"
        assert service.tables[TABLE].last_seq == 2  # the old rounds are replayed as they were
        step = await service.open_round(TABLE)
        assert step.accepted and service.tables[TABLE].current.round_id == round_id(service, 3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    j = Journal(path)
    assert (j.journal_id, j.journal_id_source) == (service.journal.journal_id, "existing")
    assert [r.round_id for r in j.rows(TABLE) if r.type == "open_round"] == old + [round_id(service, 3)]
    j.close()


async def _one_round(broker: Broker, tmp: Path, pty_dir: Path, consumer: SettlementConsumer) -> str:
    """Install a backend on a fresh journal in ``tmp``, deal one round, return its key once
    settlement has applied it."""
    tmp.mkdir()
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    service, task = await start_service(settings_for(tmp, broker.url, shoe.path))
    try:
        await deal(rec, shoe, DEAL, POSITIONS)
        k = key(service, 1)
        await wait_until(lambda: k in consumer.applied_keys(), what=f"settlement applied {k}")
        return k
    finally:
        await stop_service(task)
        await rec.stop()
        shoe.close()


async def test_a_fresh_journal_for_a_settled_table_is_applied_by_settlement(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    """A re-install: the table's first journal settled round 1; a new, empty journal opens its
    round 1 again. Settlement (one durable ledger across both) applies it as a new round."""
    bus = MqttBus(broker.url, client_id="settlement", persistent_session=True)
    consumer = SettlementConsumer(bus, [TABLE], tmp_path / "ledger.sqlite", rng=random.Random(7))
    runner = asyncio.create_task(bus.run())
    await bus.wait_connected()
    try:
        first = await _one_round(broker, tmp_path / "install-1", pty_dir, consumer)
        second = await _one_round(broker, tmp_path / "install-2", pty_dir, consumer)
        assert first != second and first.endswith("-000001") and second.endswith("-000001")
        assert consumer.duplicates == 0  # nothing was ignored as an earlier round's result
        assert set(consumer.applied_keys()) >= {first, second}
        assert consumer.applied_result(second)["cards"] == dict(zip(POSITIONS, DEAL))
        assert consumer.mismatches == []
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        consumer.close()
