"""Fair recovery, the clock side: deadlines are journaled as wall-clock epoch ms (data for the
pure core), but within a run the service's timers run on the loop's monotonic clock, so a
wall-clock step (NTP, an operator) never fires a timer early nor stalls it.

The outage side (a backend restart or a broker outage longer than a window) is tested through
the real service in test_sevenluck_table.py and test_stud_restart.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from dealer.edge.config import load_settings
from dealer.core.events import PlaceBet
from dealer.core.round import Phase
from dealer.edge.service import Service, wall_ms
from drivers.bus import LocalBus
from tests.conftest import wait_until

T = "T1"
HOUR = 3_600_000


class SteppedClock:
    """The wall clock the service reads, stepped by the test."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return wall_ms() + self.offset


async def _service(tmp: Path, clock: SteppedClock) -> tuple[Service, asyncio.Task[Any]]:
    settings = load_settings(service={"journal_path": tmp / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": T, "game": "teen-patti", "auto_rounds": False, "betting_seconds": 1.0,
                                      "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])
    service = Service(settings, bus=LocalBus(), broker_link=False, clock=clock)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    return service, task


def _rearm(service: Service) -> None:
    """Drop the armed timer and arm it again from the table's state, as any re-schedule does."""
    service.timers.armed.pop(T)[1].cancel()
    service.timers.schedule(T)


async def test_a_wall_clock_step_forward_and_back_neither_fires_nor_stalls_an_armed_timer(tmp_path: Path):
    clock = SteppedClock()
    service, task = await _service(tmp_path, clock)
    loop = asyncio.get_running_loop()
    try:
        assert (await service.open_round(T)).accepted
        rnd = service.tables[T].current
        assert rnd.phase == Phase.BETTING_OPEN
        (kind, _), handle = service.timers.armed[T]
        assert kind == "close"
        when = handle.when()  # the betting deadline on the loop's monotonic clock, computed once

        # an hour forward: the journaled deadline is "an hour ago" by the wall clock now
        clock.offset += HOUR
        assert (await service.submit(T, PlaceBet(bet_id="b1", player_id="p1", bet_type="tie", stake="1"))).accepted
        _rearm(service)
        assert service.timers.armed[T][1].when() == when, "re-armed at its first instant, not at once"
        assert rnd.phase == Phase.BETTING_OPEN

        # and back: an hour behind the start; the deadline is "an hour ahead" by the wall clock
        clock.offset -= 2 * HOUR
        assert (await service.submit(T, PlaceBet(bet_id="b2", player_id="p2", bet_type="tie", stake="1"))).accepted
        _rearm(service)
        assert service.timers.armed[T][1].when() == when
        assert rnd.phase == Phase.BETTING_OPEN

        # it fires at its monotonic instant: not before, and not an hour later
        await wait_until(lambda: rnd.phase != Phase.BETTING_OPEN, timeout=10, what="the betting timer")
        assert loop.time() >= when
        assert rnd.closed_at is not None and sorted(rnd.bets) == ["b1", "b2"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_new_deadline_reads_the_wall_clock_once_when_it_is_armed(tmp_path: Path):
    """A later step does not move an armed timer, but a deadline set after the step is
    measured from the clock as it then is (the journaled deadline and ``at`` agree)."""
    clock = SteppedClock()
    service, task = await _service(tmp_path, clock)
    loop = asyncio.get_running_loop()
    try:
        clock.offset -= HOUR
        before = loop.time()
        assert (await service.open_round(T)).accepted
        when = service.timers.armed[T][1].when()
        assert before + 0.5 < when < loop.time() + 1.0 + 0.5  # about betting_seconds away, not an hour
        clock.offset += 2 * HOUR
        _rearm(service)
        assert service.timers.armed[T][1].when() == when
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_step_between_an_events_stamp_and_its_timer_does_not_move_the_deadline(tmp_path: Path):
    """The soak found this: a Resume stamped just before a wall-clock step and armed just after
    it (its batch was waiting for the commit) timed every player out at once. A deadline is
    measured from the monotonic time its event was stamped at, not from the clock at arming."""
    clock = SteppedClock()
    service, task = await _service(tmp_path, clock)
    loop = asyncio.get_running_loop()
    try:
        before = loop.time()
        opened = service.open_round(T)  # stamped now, with betting closing 1 s from now ...
        clock.offset += HOUR  # ... and the clock steps an hour forward before the commit loop arms it
        assert (await opened).accepted
        rnd = service.tables[T].current
        when = service.timers.armed[T][1].when()
        assert before + 0.5 < when < loop.time() + 1.0 + 0.05, "the deadline moved with the step"
        assert rnd.phase == Phase.BETTING_OPEN
        clock.offset -= 2 * HOUR
        opened_again = service.submit(T, PlaceBet(bet_id="b1", player_id="p1", bet_type="tie", stake="1"))
        clock.offset += HOUR
        assert (await opened_again).accepted
        assert service.timers.armed[T][1].when() == when
        await wait_until(lambda: rnd.phase != Phase.BETTING_OPEN, timeout=10, what="the betting timer")
        assert loop.time() >= when and sorted(rnd.bets) == ["b1"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_restart_onto_a_clock_stepped_back_does_not_stall_the_betting_period(tmp_path: Path):
    """The target soak found this: a round opened while the wall clock ran 165 s ahead, the
    clock stepped back and the backend restarted; the replayed betting deadline was then
    165 s away by the new process's wall clock, and the table stood still that long. A
    replayed deadline is never further away than its whole window."""
    ahead = SteppedClock()
    ahead.offset = HOUR
    service, task = await _service(tmp_path, ahead)
    try:
        assert (await service.open_round(T)).accepted
        assert service.tables[T].current.phase == Phase.BETTING_OPEN
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        service.journal.close()

    service, task = await _service(tmp_path, SteppedClock())  # the clock back to the real time
    loop = asyncio.get_running_loop()
    try:
        rnd = service.tables[T].current
        assert rnd.phase == Phase.BETTING_OPEN and rnd.betting_closes_at > wall_ms() + HOUR // 2
        (kind, _), handle = service.timers.armed[T]
        assert kind == "close"
        assert handle.when() <= loop.time() + 1.0, "the replayed deadline lies an hour away"
        await wait_until(lambda: rnd.phase != Phase.BETTING_OPEN, timeout=10, what="the betting timer")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_input_held_through_a_journal_outage_opens_a_whole_window(tmp_path: Path):
    """The fault soak found this (stud, a disk-full window): a player's CHECK came in as the
    journal failed, waited in the queue through the 6 s outage and was applied after the
    Resume with its old stamp; the next player's turn, measured from that stamp, was over
    before it began, and the timer played it. Inputs held through an outage are stamped when
    they are applied: here the last card of a Sevenluck deal, read 5 s before the journal
    came back, still gives the players their whole decision window."""
    from dealer.core.events import CloseBetting, ScanRead
    from dealer.edge.input_queue import Item

    settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": T, "game": "sevenluck", "options": {"seats": 3}, "auto_rounds": False,
                                      "betting_seconds": 3600.0, "decision_seconds": 2.0,
                                      "scanner": {"kind": "mqtt", "reader_id": "GW1"}}])
    service = Service(settings, bus=LocalBus(), broker_link=False, clock=wall_ms)
    task = asyncio.create_task(service.run())
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        assert (await service.open_round(T)).accepted
        for bet, player, seat in (("a1", "p1", 1), ("a3", "p3", 3)):
            assert (await service.submit(T, PlaceBet(bet_id=bet, player_id=player, bet_type="ante", stake="10",
                                                     seat=seat))).accepted
        assert (await service.submit(T, CloseBetting(by="dealer"))).accepted
        deal = ["AS", "2H", "QH", "AD", "5D", "JH", "AC", "9S", "3H"]  # P1 P3 D, three times
        for code in deal[:-1]:
            assert (await service.submit(T, ScanRead(reader="GW1", code=code))).accepted
        rnd = service.tables[T].current
        # the last card came in 5 s ago, as the journal failed, and waited in the queue
        held: asyncio.Future[Any] = loop.create_future()
        service.queue.put(Item(T, ScanRead(reader="GW1", code=deal[-1], at=wall_ms() - 5_000), 0, held,
                               mono=time.monotonic() - 5.0))
        service.commit_loop.after_journal_outage()  # the journal commits again: the Resume first, then what waited
        assert (await held).accepted
        assert rnd.phase == Phase.DECISION
        assert rnd.decision_deadline is not None and rnd.decision_deadline >= wall_ms() + 1_500, \
            "the decision window was measured from when the card came in, not from when it was applied"
        await asyncio.sleep(0.3)
        assert rnd.phase == Phase.DECISION and not rnd.decisions, "the timer decided for the players at once"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
