"""The SQLite journal and outbox on a real file: atomic batches, replay range, outbox rules."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dealer.core.events import CloseBetting, LinkDown, LinkUp, OpenRound, ResultDelivered, ScanRead
from dealer.games.teen_patti import TeenPatti
from dealer.edge.journal import Batch, Journal
from dealer.core.round import Phase, TableRules
from dealer.core.table import Table
from tests.harness import DEAL, round_id
from tests.harness_journal import T, play, round_events

def rebuild(path: Path) -> Table:
    t = Table(TableRules(table_id=T, game=TeenPatti()))
    for ev in Journal(path).replay(T):
        step = t.handle(ev)
        assert step.accepted or ev.type == "result_delivered"
    return t


def test_outbox_rows_are_atomic_with_their_event_and_unique_per_key(tmp_path: Path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    table = Table(TableRules(table_id=T, game=TeenPatti()))
    (res,) = play(table, j, round_events(1))
    pending = j.pending()
    assert [r.key for r in pending] == ["T1:T1-000001"] and pending[0].payload == res.model_dump_json().encode()
    # the same key again (a replayed commit) creates nothing new and changes nothing
    assert j.commit(Batch(outbox=[(res.idempotency_key, "r", b"other", T, res.round_id)])) == []
    assert j.pending()[0].payload == res.model_dump_json().encode()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_failed_batch_leaves_nothing_behind(tmp_path: Path):
    j = Journal(tmp_path / "j.sqlite")
    bad = Batch(events=[(T, None, OpenRound(round_id="T1-000001"))],
                outbox=[("k", "t", b"p", T, "T1-000001"), ("k2", "t", None, T, "T1-000001")])  # NOT NULL payload
    try:
        j.commit(bad)
    except sqlite3.IntegrityError:
        pass
    else:
        raise AssertionError("the batch should have failed")
    assert j.count() == 0 and j.pending() == []


def test_replay_restarts_at_the_oldest_undelivered_round(tmp_path: Path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    table = Table(TableRules(table_id=T, game=TeenPatti()))
    play(table, j, round_events(1))  # result 1 stays undelivered (broker down)
    play(table, j, round_events(2)[:5])  # round 2 mid-deal
    t = rebuild(path)
    assert set(t.undelivered) == {"T1-000001"} and t.current.round_id == "T1-000002"
    assert t.current.expected_position == "B2" and t.last_seq == 2
    # round 1 delivered after round 2 opened; round 2 completes and is delivered; round 3 starts
    play(table, j, [ResultDelivered(round_id="T1-000001", outbox_id=1)])
    play(table, j, [ScanRead(reader="R", code=c) for c in DEAL[3:]])
    play(table, j, [ResultDelivered(round_id="T1-000002", outbox_id=2)])
    play(table, j, [OpenRound(round_id="T1-000003")])
    t = rebuild(path)  # the replay starts at round 3 and passes over nothing it needs
    assert t.current.round_id == "T1-000003" and t.current.phase == Phase.BETTING_OPEN
    assert t.undelivered == {} and j.pending() == []


def test_replay_across_a_link_outage_reaches_the_same_decisions(tmp_path: Path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    table = Table(TableRules(table_id=T, game=TeenPatti()))
    (cancelled,) = play(table, j, [OpenRound(round_id="T1-000001"), LinkDown(link="broker", reason="x")])
    play(table, j, [LinkUp(link="broker"), OpenRound(round_id="T1-000002")])
    t = rebuild(path)
    assert cancelled.outcome == "CANCELLED" and t.current.round_id == "T1-000002"


def test_checkpoint_runs_beside_the_writer(tmp_path: Path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    table = Table(TableRules(table_id=T, game=TeenPatti()))
    play(table, j, round_events(1))
    assert j.checkpoint() == 0  # everything copied into the database file
    play(table, j, [ResultDelivered(round_id="T1-000001", outbox_id=1)])
    assert j.pending() == [] and j.count(T) == 9


async def test_a_restart_after_a_link_outage_replays_every_later_round(tmp_path):
    """Soak finding: link state cleared after replay without journaling made the *next*
    replay refuse a journaled open_round (and its log call crashed the backend)."""
    import asyncio

    from dealer.edge.config import load_settings
    from dealer.edge.service import Service
    from drivers.bus import LocalBus

    settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": T, "game": "teen-patti", "auto_rounds": False,
                                      "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])

    async def instance(actions):
        service = Service(settings, bus=LocalBus(), broker_link=False)
        task = asyncio.create_task(service.run())
        await service.ready.wait()
        try:
            return await actions(service)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def first(service):
        assert (await service.open_round(T)).accepted
        await service.submit(T, CloseBetting())
        for c in DEAL[:3]:
            await service.submit(T, ScanRead(reader="SC1", code=c))
        await service.submit(T, LinkDown(link="broker", reason="gone"))  # after close: journaled, round goes on

    async def second(service):
        assert service.tables[T].links_down  # the journal says the broker link is down
        assert (await service.submit(T, LinkUp(link="broker"))).journal  # its recovery is journaled
        for c in DEAL[3:]:
            await service.submit(T, ScanRead(reader="SC1", code=c))
        assert (await service.open_round(T)).accepted

    async def third(service):
        return service.tables[T].current.round_id

    await instance(first)
    await instance(second)
    assert await instance(third) == round_id(settings, 2)
