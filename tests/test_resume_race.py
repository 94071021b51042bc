"""A restart gives every pending decision a whole new window, and no timer of the old one folds
a player meanwhile.

After a restart the first broker connect queues the table's ``Resume``. Before the fix, a batch
of the table still in its commit ended in the timer being armed for the journaled deadline,
long past: it fired at once and queued a ``decision_timeout`` behind the ``Resume``, which
renewed the window and was then overruled: every undecided player folded the moment the
backend came back (the small soak found it twice in 20 runs). Now the table counts as resuming
from the connect, and a timeout names the deadline it was armed for, so a stale one is refused.
Real services, a real SQLite journal (the second one's commits behind a gate), no broker: the
connect is the local bus's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dealer.core.events import CloseBetting, LinkDown, PlaceBet, PlayerDecision, ScanRead
from dealer.core.round import Phase
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Journal
from dealer.edge.service import Service
from drivers.bus import LocalBus
from tests.conftest import wait_until
from tests.harness_moves import GatedJournal, ManualOwnership, running

CARDS = ["AS", "QD", "AH", "6S", "AD", "4H"]  # P1.1 D.1 P1.2 D.2 P1.3 D.3, one player at seat 1


class StartingBus(LocalBus):
    """The local bus as the MQTT bus starts: not connected, and silent until its first connect
    (the local bus's ``run`` reports its state at once, which a broker's client cannot)."""

    def __init__(self) -> None:
        super().__init__()
        self._connected = False

    async def run(self) -> None:
        await asyncio.Event().wait()


def settings(tmp: Path) -> Settings:
    return load_settings(
        service={"journal_path": tmp / "j.sqlite", "metrics_enabled": False},
        tables=[{"id": "S1", "game": "sevenluck", "auto_rounds": False, "betting_seconds": 30.0,
                 "decision_seconds": 0.5, "options": {"seats": 3},
                 "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])


async def test_a_timer_of_the_journaled_deadline_does_not_fold_a_player_the_restart_resumes(tmp_path: Path) -> None:
    s = settings(tmp_path)
    # a round dealt to its decision, then the backend stops before the player decides
    first = Service(s, bus=LocalBus(), broker_link=False, ownership=ManualOwnership(["S1"]))
    async with running(first):
        assert (await first.open_round("S1")).accepted
        rid = first.round_id("S1")
        assert (await first.submit("S1", PlaceBet(bet_id="a1", player_id="p1", bet_type="ante", stake="10", seat=1,
                                                  round_id=rid, command_id="a1"))).accepted
        assert (await first.submit("S1", CloseBetting(round_id=rid))).accepted
        for code in CARDS:
            assert (await first.submit("S1", ScanRead(reader="GW1", code=code))).accepted
        assert first.tables["S1"].current.phase == Phase.DECISION
        old_deadline = first.tables["S1"].current.decision_deadline
    # the journaled decision deadline passes while the backend is down
    await wait_until(lambda: first.now_ms() > old_deadline, what="the journaled decision deadline passed")

    bus = StartingBus()  # the broker is not there yet: the table waits for its first connect to resume
    journal = GatedJournal(s.service.journal_path)
    second = Service(s, bus=bus, broker_link=True, journal=journal, ownership=ManualOwnership(["S1"]))
    async with running(second):
        table = second.tables["S1"]
        assert table.current is not None and table.current.phase == Phase.DECISION
        assert "S1" in second.timers.resume_due and "S1" not in second.timers.armed
        journal.gate.clear()  # a batch of the table is in its commit when the broker connects
        noted = second.submit("S1", LinkDown(link="scanner:GW1", reason="test"))
        await wait_until(lambda: "S1" in second.commit_loop.batch_tables, what="the table's batch in its commit")
        bus.set_connected(True)  # the first connect: the Resume is queued behind that batch
        journal.gate.set()
        await noted
        await wait_until(lambda: "S1" not in second.state.resume_queued and not second.commit_loop.batch_tables,
                         what="the Resume applied")
        cur = table.current
        assert cur is not None and cur.phase == Phase.DECISION and cur.decisions == {}, cur.decisions
        assert cur.decision_deadline is not None and cur.decision_deadline > old_deadline
        step = await second.submit("S1", PlayerDecision(player_id="p1", action="PLAY", round_id=rid,
                                                        command_id="d1"))
        assert step.accepted, step
        assert cur.decisions["p1"].by == "player"
    types = [r.type for r in Journal(s.service.journal_path).rows()]
    assert "decision_timeout" not in types, types
