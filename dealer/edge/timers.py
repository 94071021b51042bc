"""Timers: each table's one loop handle (betting period, decision, turn, confirmation window,
pause between rounds), which submits an event when it fires; the core never sees a clock.

Journaled deadlines are epoch ms; each is turned into an instant on the loop's monotonic clock
once, when first armed (:meth:`Timers.mono_deadline`), so a wall-clock step never fires or
stalls a timer. Decision and turn timers are paused while the broker link is down, while the
journal is unavailable, while a supervisor has the table paused and, after a restart, until the
first broker connect (whose :class:`~dealer.core.events.Resume` gives every pending decision and
turn a new window): :meth:`Timers.paused_reason` says which.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from dealer.core.events import ActionTimeout, CloseBetting, ConfirmTimeout, DecisionTimeout, Event
from dealer.core.round import Phase, Round
from dealer.core.table import BROKER
from dealer.edge.commit_state import CommitState
from dealer.edge.tables import Tables

#: What a timer is armed for: its kind ("close", "decide", "act", "window", "open") and what it guards.
Purpose = tuple[str, str | None]


class Timers:
    """Arms, re-arms and cancels each table's timer from the table's state. Reads the tables,
    their configuration and links, and the journal's availability (the commit loop); ``submit``
    queues the timer's event, ``open_round`` the next round's opening."""

    def __init__(self, tables: Tables, state: CommitState, *, now_ms: Callable[[], int],
                 submit: Callable[[str, Event], Any], open_round: Callable[[str], asyncio.Future[Any]]) -> None:
        self.tables = tables
        self.state = state
        self.now_ms = now_ms
        self.submit = submit
        self.open_round = open_round
        #: Per table, the purpose of its one armed timer and the loop handle.
        self.armed: dict[str, tuple[Purpose, asyncio.TimerHandle]] = {}
        #: Per table and timer kind: the journaled (wall-clock) deadline last armed and the loop's
        #: monotonic instant computed for it, once; a re-arm for the same deadline reuses it.
        self._mono: dict[tuple[str, str], tuple[int, float]] = {}
        #: Per table, the wall-clock ``at`` of the last event applied and the monotonic time it
        #: was stamped at: a deadline that event set is measured from there, not from the wall
        #: clock when the timer is armed (a step may come in between).
        self._clock_ref: dict[str, tuple[int, float]] = {}
        #: Tables whose pending decisions and turns wait for this run's first broker connect
        #: (a :class:`~dealer.core.events.Resume`): no decision or turn timer runs before it.
        self.resume_due: set[str] = set()
        #: Per table, the purpose of the timer that fired and the future of the event it queued,
        #: until the commit loop has applied that event: the table is not armed again for the same
        #: purpose meanwhile. A busy commit loop (a long queue) would otherwise arm the same, past
        #: deadline again at its next batch of the table and queue the timeout twice: the second
        #: one refused ("betting is not open"), logged and published as a rejection.
        self._queued: dict[str, tuple[Purpose, asyncio.Future[object]]] = {}

    def stamp(self, tid: str, at: int, mono: float) -> None:
        """The commit loop applies an event of ``tid`` stamped ``at`` (wall clock) at ``mono``."""
        self._clock_ref[tid] = (at, mono)

    def cancel_all(self) -> None:
        for _, handle in self.armed.values():
            handle.cancel()

    def forget(self, tid: str) -> None:
        """A table left this node: its timer is cancelled and its clocks forgotten (the next
        owner resumes its deadlines)."""
        armed = self.armed.pop(tid, None)
        if armed is not None:
            armed[1].cancel()
        self._queued.pop(tid, None)
        for key in [k for k in self._mono if k[0] == tid]:
            del self._mono[key]
        self._clock_ref.pop(tid, None)
        self.resume_due.discard(tid)

    def paused_reason(self, tid: str) -> str | None:
        """Why the table's clocks are stopped now (no decision or turn timer runs, no round
        opens), for its retained state; None when they run."""
        tables = self.tables
        if tid not in tables:
            return None
        ops = tables[tid].ops
        if ops.paused:
            return "paused by supervisor" + (f" {ops.by}" if ops.by else "") + (f": {ops.reason}" if ops.reason else "")
        if not self.state.writable:
            return "journal unavailable"
        if BROKER in tables[tid].links_down:
            return "broker link down"
        if tid in self.resume_due or tid in self.state.resume_queued:
            return "waiting to resume"
        return None

    def schedule(self, tid: str) -> None:
        """Arm the table's one timer: the betting deadline, or the pause before the next round.

        A timer that is already armed for the same purpose is kept: events that change
        nothing about it (a bet, a rejected scan, a heartbeat-driven link report) must
        not postpone the next round.
        """
        submit = self.submit
        table, cfg = self.tables.get(tid), self.tables.configs.get(tid)
        if table is None or cfg is None or tid in self.tables.leaving:
            return  # not (or no longer) this node's table: it has no timer here
        writable = self.state.writable
        cur = table.current
        want: Purpose | None = None
        if cur is not None and cur.phase == Phase.BETTING_OPEN:
            if cur.betting_closes_at is not None and not table.paused:  # a supervisor's resume renews it
                want = ("close", cur.round_id)
        elif cur is not None and (cur.phase in (Phase.DECISION, Phase.ACTION) or self.windowed(cur)) and (
                BROKER in table.links_down or tid in self.resume_due or not writable
                or tid in self.state.resume_queued or table.paused):
            want = None  # paused while players cannot reach us (or be heard); the resume gives a new window
        elif cur is not None and self.windowed(cur):
            assert cur.confirm_deadline is not None and cur.expected_position is not None
            want = ("window", f"{cur.round_id}:{cur.expected_position}@{cur.confirm_deadline}")
        elif cur is not None and cur.phase == Phase.DECISION:
            want = ("decide", f"{cur.round_id}@{cur.decision_deadline}")
        elif cur is not None and cur.phase == Phase.ACTION:
            want = ("act", f"{cur.round_id}#{cur.turn}@{cur.action_deadline}")
        elif cfg.auto_rounds and writable and table.can_open() is None and self.tables.links[tid].ready:
            want = ("open", cur.round_id if cur is not None else None)
        queued = self._queued.get(tid)
        if queued is not None:
            if queued[0] == want and not queued[1].done():
                return  # its event is on its way to the core: once is enough
            del self._queued[tid]
        armed = self.armed.get(tid)
        if armed is not None and armed[0] == want:
            return
        if armed is not None:
            armed[1].cancel()
            del self.armed[tid]
        if want is None:
            return
        loop = asyncio.get_running_loop()
        if want[0] == "close":
            assert cur is not None and cur.betting_closes_at is not None
            rid = cur.round_id
            window = cur.betting_closes_at - cur.opened_at
            handle = loop.call_at(self.mono_deadline(tid, "close", cur.betting_closes_at, window), self._fired, tid,
                                  want, lambda: submit(tid, CloseBetting(by="timer", round_id=rid)))
        elif want[0] == "decide":  # the deadline is journaled data
            assert cur is not None and cur.decision_deadline is not None
            deadline = cur.decision_deadline  # names the window: a timer that lost a race with a resume is refused
            handle = loop.call_at(self.mono_deadline(tid, "decide", deadline, cur.rules.decision_ms),
                                  self._fired, tid, want,
                                  lambda: submit(tid, DecisionTimeout(deadline=deadline)))
        elif want[0] == "act":  # the turn's deadline is journaled data too; the turn number guards a race
            assert cur is not None and cur.action_deadline is not None
            turn, deadline = cur.turn, cur.action_deadline
            handle = loop.call_at(self.mono_deadline(tid, "act", deadline, cur.rules.action_ms),
                                  self._fired, tid, want,
                                  lambda: submit(tid, ActionTimeout(turn=turn, deadline=deadline)))
        elif want[0] == "window":  # a timed confirmation: the station's window to report an exposed card
            assert cur is not None and cur.confirm_deadline is not None and cur.expected_position is not None
            step, deadline = cur.expected_position, cur.confirm_deadline
            window = cur.plan[cur.next_index].window_ms
            handle = loop.call_at(self.mono_deadline(tid, "window", deadline, window), self._fired, tid,
                                  want, lambda: submit(tid, ConfirmTimeout(step=step, deadline=deadline)))
        else:
            handle = loop.call_later(cfg.pause_seconds, self._fired, tid, want, lambda: self._auto_open(tid))
        self.armed[tid] = (want, handle)

    @staticmethod
    def windowed(cur: Round) -> bool:
        """A timed confirmation is open (the station's window to report an exposed card before betting)."""
        return cur.phase in (Phase.BETTING_CLOSED, Phase.DEALING) and cur.confirm_deadline is not None

    def mono_deadline(self, tid: str, kind: str, deadline_ms: int, window_ms: int) -> float:
        """The loop's monotonic instant for a journaled deadline (epoch ms).

        The wall clock is read once per deadline, when it is first armed: ``deadline - now``
        becomes an instant on the loop's monotonic clock, kept per table and timer kind, and
        any re-arm for the same deadline reuses it. So a wall-clock step (NTP, an operator)
        after that never fires a timer early nor stalls it: within a run deadlines run on the
        monotonic clock. Across a restart there is no monotonic clock to carry: the deadlines
        of pending decisions and turns are renewed by the start-up Resume instead.

        A deadline is measured from the event that set it (its ``at`` and the monotonic time
        it was stamped at, :meth:`stamp`), so a step between that stamp and the arming (a
        batch waiting for its commit) does not move it either; a deadline older than every
        event of this run (replayed) is measured from the wall clock now, and never lies
        further away than its whole window (``window_ms``): a restart onto a clock stepped back
        (the soak found a betting period stalled for the 165 s of such a step) gives the
        players a full window from now, not the size of the step on top."""
        kept = self._mono.get((tid, kind))
        if kept is not None and kept[0] == deadline_ms:
            return kept[1]
        ref = self._clock_ref.get(tid)
        if ref is not None and ref[0] <= deadline_ms:
            remaining = (deadline_ms - ref[0]) / 1000 - (time.monotonic() - ref[1])
        else:
            remaining = (deadline_ms - self.now_ms()) / 1000
        at = asyncio.get_running_loop().time() + min(max(0.0, remaining), max(0, window_ms) / 1000)
        self._mono[(tid, kind)] = (deadline_ms, at)
        return at

    def _fired(self, tid: str, purpose: Purpose, action: Callable[[], object]) -> None:
        self.armed.pop(tid, None)
        if not self.tables.may_publish(tid, "timer"):  # a lease not valid now: no timeout, no round opened
            return  # armed again when the lease is valid again (Releaser.revalidated) or never (dropped)
        queued = action()
        if isinstance(queued, asyncio.Future) and not queued.done():
            self._queued[tid] = (purpose, queued)

    def _auto_open(self, tid: str) -> asyncio.Future[object] | None:
        table = self.tables.get(tid)
        hold = self.tables.round_hold(tid)
        if hold > 0 and table is not None:  # the table is about to move: its next owner opens the round
            cur = table.current
            purpose: Purpose = ("open", cur.round_id if cur is not None else None)
            handle = asyncio.get_running_loop().call_later(hold, self._fired, tid, purpose,
                                                           lambda: self._auto_open(tid))
            self.armed[tid] = (purpose, handle)
            return None
        if table is not None and self.state.writable and table.can_open() is None and self.tables.links[tid].ready:
            return self.open_round(tid)
        return None
