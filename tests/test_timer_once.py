"""A timer's event is queued once, however far behind the commit loop is.

A betting timer fires and queues its ``close_betting``; while the commit loop is still busy with
an earlier batch of the table, that batch's end re-arms the table's timer. Before the fix, the
table, still in its betting period in memory, was armed again for the same (past) deadline and
queued a second ``close_betting``: refused ("betting is not open"), logged as a warning and
published as a rejection on the table's events. A saturated 1,000-table node did this hundreds
of times a run. Real service, real SQLite journal behind a gate that holds a commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dealer.core.events import PlaceBet
from dealer.core.round import Phase, Rejection
from dealer.edge.config import load_settings
from dealer.edge.journal import Journal
from dealer.edge.service import Service
from drivers.bus import LocalBus
from tests.conftest import wait_until
from tests.harness_moves import GatedJournal, ManualOwnership, running


async def test_a_timer_queues_its_event_once_while_the_commit_loop_is_behind(tmp_path: Path) -> None:
    settings = load_settings(
        service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
        tables=[{"id": "T1", "game": "teen-patti", "auto_rounds": False, "betting_seconds": 0.2,
                 "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])
    journal = GatedJournal(settings.service.journal_path)
    service = Service(settings, bus=LocalBus(), broker_link=False, journal=journal,
                      ownership=ManualOwnership(["T1"]))
    rejected: list[Any] = []
    service.publisher.observers.append(lambda kind, msg: rejected.append(msg) if kind == "rejection" else None)
    async with running(service):
        assert (await service.open_round("T1")).accepted
        rid = service.round_id("T1")
        journal.gate.clear()  # the commit loop is held in the next batch's commit
        bet = service.submit("T1", PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="5",
                                            round_id=rid))
        await wait_until(lambda: "T1" in service.commit_loop.batch_tables, what="the bet's batch in its commit")
        # the betting period ends meanwhile: the timer fires and queues its close_betting
        await wait_until(lambda: "T1" not in service.timers.armed, what="the betting timer fired")
        assert service.tables["T1"].current.phase == Phase.BETTING_OPEN  # not applied yet: queued
        journal.gate.set()  # the bet's batch commits; its end arms the table's timer again
        assert (await bet).accepted
        await wait_until(lambda: service.tables["T1"].current.phase == Phase.BETTING_CLOSED, what="betting closed")
        # a second close_betting, had one been queued, is applied once the queue has drained
        await wait_until(lambda: service.queue.items.empty() and not service.commit_loop.batch_tables,
                         what="the input queue drained")
    closes = [r for r in Journal(settings.service.journal_path).rows() if r.type == "close_betting"]
    assert len(closes) == 1, closes
    assert not [r for r in rejected if isinstance(r, Rejection) and r.event_type == "close_betting"], rejected
