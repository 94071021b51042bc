"""A result in parts through the service's outbox: every row is delivered before the round
counts as delivered, a delivery cut half-way goes again whole, and rows left in the outbox at
a restart are all sent by the next run (in-process bus, real SQLite journal and ledger)."""

from __future__ import annotations

import pytest
import asyncio
import sqlite3
from pathlib import Path

from dealer.edge import topics
from dealer.core.events import CloseBetting, PlaceBet, ScanRead
from dealer.edge.service import Service
from drivers.bus import LocalBus
from simulators.settlement import SettlementConsumer
from tests.conftest import wait_until
from tests.harness import DEAL, READER, TABLE, settings_for

BETS = 3000


def _settings(tmp_path: Path):
    s = settings_for(tmp_path, None, "", scanner={"kind": "mqtt", "reader_id": READER, "heartbeat_timeout": 30},
                     betting_seconds=3600, auto_rounds=False)
    s.service.max_message_bytes = 65536
    return s


async def _play_round(service: Service) -> tuple[str, list[str]]:
    """A round with BETS bets whose result is over the limit; returns its key and bet ids."""
    await service.open_round(TABLE)
    round_id = service.tables[TABLE].current.round_id
    ids = [f"{round_id}-bet{i:05d}-0123456789abcdef" for i in range(BETS)]
    steps = await asyncio.gather(*(service.submit(TABLE, PlaceBet(bet_id=b, player_id=f"p{i}", bet_type="player_a",
                                                                  stake="1.00", round_id=round_id))
                                   for i, b in enumerate(ids)))
    assert all(s.accepted for s in steps)
    await service.submit(TABLE, CloseBetting(round_id=round_id))
    for code in DEAL:
        assert (await service.submit(TABLE, ScanRead(reader=READER, code=code))).accepted
    return f"{TABLE}:{round_id}", ids


def _consumer(bus: LocalBus, ledger: Path, ids: list[str], round_id: str) -> SettlementConsumer:
    c = SettlementConsumer(bus, [TABLE], ledger, place_bets=False)
    c.db.executemany("INSERT OR IGNORE INTO bets VALUES (?, ?, 'p', 'player_a', '1.00', NULL)",
                     [(b, round_id) for b in ids])
    return c


def _outbox_rows(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [k for (k,) in db.execute("SELECT key FROM outbox ORDER BY id")]
    finally:
        db.close()


@pytest.mark.slow
async def test_a_delivery_cut_half_way_goes_again_whole_and_settles_once(tmp_path: Path):
    settings = _settings(tmp_path)
    bus = LocalBus()
    service = Service(settings, bus=bus)
    seen: list[str] = []

    def cut_after_the_first(topic: str, payload: bytes) -> None:  # the link drops mid-result, once
        seen.append(topic)
        if len(seen) == 1:
            bus.set_connected(False, "cut")

    bus.subscribe(topics.results(TABLE), cut_after_the_first)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    try:
        consumer = None
        key, ids = await _play_round(service)
        consumer = _consumer(bus, tmp_path / "ledger.sqlite", ids, key.split(":", 1)[1])
        await wait_until(lambda: not bus.connected, what="the link cut after the first message")
        rows = _outbox_rows(settings.service.journal_path)
        n = len(rows) - 1
        assert n >= 2 and rows == [key] + [f"{key}#{i}/{n}" for i in range(1, n + 1)]
        assert service.outbox_pending == 1 and service.tables[TABLE].undelivered  # not delivered yet
        bus.set_connected(True)
        await wait_until(lambda: key in consumer.applied_keys(), what="applied after the link came back")
        await wait_until(lambda: service.outbox_pending == 0, what="outbox drained")
        assert _outbox_rows(settings.service.journal_path) == [] and not service.tables[TABLE].undelivered
        assert consumer.mismatches == [] and len(seen) == 1 + n + 1  # the first once more, then every part
        assert consumer.db.execute("SELECT COUNT(*) FROM ledger WHERE key = ?", (key,)).fetchone() == (BETS,)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if consumer is not None:
            consumer.close()


@pytest.mark.slow
async def test_rows_left_in_the_outbox_are_all_sent_by_the_next_run(tmp_path: Path):
    settings = _settings(tmp_path)
    bus = LocalBus()
    bus.set_connected(False, "broker down")  # the result is committed but cannot go out
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    try:
        key, ids = await _play_round(service)
        await wait_until(lambda: service.outbox_pending == 1, what="result in the outbox")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(_outbox_rows(settings.service.journal_path)) >= 3
    bus = LocalBus()
    consumer = _consumer(bus, tmp_path / "ledger.sqlite", ids, key.split(":", 1)[1])
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    try:
        await wait_until(lambda: key in consumer.applied_keys(), what="applied after the restart")
        await wait_until(lambda: service.outbox_pending == 0, what="outbox drained")
        assert _outbox_rows(settings.service.journal_path) == [] and consumer.mismatches == []
        assert consumer.db.execute("SELECT COUNT(*) FROM ledger WHERE key = ?", (key,)).fetchone() == (BETS,)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        consumer.close()


@pytest.mark.slow
async def test_a_row_over_a_limit_lowered_across_a_restart_is_kept_and_never_sent(tmp_path: Path):
    settings = _settings(tmp_path)
    settings.service.max_message_bytes = 1 << 20  # the first run stores the result as one row
    bus = LocalBus()
    bus.set_connected(False, "broker down")
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    try:
        key, _ids = await _play_round(service)
        await wait_until(lambda: service.outbox_pending == 1, what="result in the outbox")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert _outbox_rows(settings.service.journal_path) == [key]
    settings.service.max_message_bytes = 65536  # the next run has a lower limit
    bus = LocalBus()
    heard: list[bytes] = []
    bus.subscribe(topics.results(TABLE), lambda t, p: heard.append(p))
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    try:
        await wait_until(lambda: service.metrics.messages_oversize.labels(kind="result")._value.get() == 1,
                         what="the oversize row refused")
        # the relay counts the row in the same pass that skips it, and skips it in every pass
        assert heard == [] and _outbox_rows(settings.service.journal_path) == [key]
        assert service.outbox_pending == 1 and bus.connected
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
