"""A table's operating state and the supervisor's table operations. Pure: no IO, no clock.

A table is *open* (rounds open, by the timer with ``auto_rounds`` or by a supervisor's
``supervisor_open_round``), *paused* (no new round; the round in play is frozen: no bet,
card, decision or action is taken and no timer runs, until the resume gives every pending
window in full again) or *closed* (no new round until it is reopened). A close while a round
is in play takes effect at that round's end: the table is *closing* meanwhile, and the round
is played out as usual (or voided by the supervisor, which ends it at once).

The state is two flags changed only by journaled events (``dealer.core.events.SupervisorPause``,
``SupervisorResume``, ``SupervisorClose``, ``SupervisorReopen``), so a replay rebuilds it and a
restart keeps a paused or closed table paused or closed. Which operation applies in which
mode, and why the others are refused, is the one table :data:`TRANSITIONS` (h11-style):
anything not applicable is refused with a reason and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    """What a station, ops and the metrics see (``dealer_table_operating{state}``)."""

    OPEN = "open"
    PAUSED = "paused"
    CLOSING = "closing"  # closed while a round is in play: that round is the table's last
    CLOSING_PAUSED = "closing_paused"  # ... and paused too
    CLOSED = "closed"


#: Operation (the command type on the wire) -> its short name (metric label, event names).
OPERATIONS = {"supervisor_open_round": "open_round", "supervisor_pause": "pause", "supervisor_resume": "resume",
              "supervisor_close": "close", "supervisor_reopen": "reopen"}

#: The round-advancing events a paused table refuses for the round in play. Everything else
#: still applies: a supervisor's void, a link failure (a round still taking bets is cancelled
#: as ever), settlement's acknowledgement, rules, security events, the table operations.
FROZEN = frozenset({"place_bet", "close_betting", "scan_read", "read_failed", "player_decision", "decision_timeout",
                    "player_action", "action_timeout", "dealer_confirm", "card_exposed"})

_CLOSED = "the table is closed{by}: only a reopen is accepted"
_CLOSING = "the table is closing{by}: round {round} is its last round (reopen to cancel the close)"
_PAUSED = "the table is paused{by}: resume it first"

#: (mode, operation) -> the new (paused, closed) flags, or why the operation does not apply.
#: ``supervisor_open_round`` is judged by :meth:`OperatingState.why_no_round` (the table also
#: needs no round in play and every link up).
TRANSITIONS: dict[tuple[Mode, str], tuple[bool, bool] | str] = {
    (Mode.OPEN, "supervisor_pause"): (True, False),
    (Mode.OPEN, "supervisor_resume"): "the table is not paused",
    (Mode.OPEN, "supervisor_close"): (False, True),  # closing when a round is in play
    (Mode.OPEN, "supervisor_reopen"): "the table is not closed",
    (Mode.PAUSED, "supervisor_pause"): "the table is already paused{by}",
    (Mode.PAUSED, "supervisor_resume"): (False, False),
    (Mode.PAUSED, "supervisor_close"): (True, True),  # no round in play: closed (a closed table is not paused)
    (Mode.PAUSED, "supervisor_reopen"): "the table is not closed (it is paused{by}: resume it)",
    (Mode.CLOSING, "supervisor_pause"): (True, True),  # the last round may be paused like any other
    (Mode.CLOSING, "supervisor_resume"): "the table is not paused",
    (Mode.CLOSING, "supervisor_close"): "the table is already closing{by}: round {round} is its last round",
    (Mode.CLOSING, "supervisor_reopen"): (False, False),  # the close is cancelled
    (Mode.CLOSING_PAUSED, "supervisor_pause"): "the table is already paused{by}",
    (Mode.CLOSING_PAUSED, "supervisor_resume"): (False, True),
    (Mode.CLOSING_PAUSED, "supervisor_close"): "the table is already closing{by}: round {round} is its last round",
    (Mode.CLOSING_PAUSED, "supervisor_reopen"): (True, False),  # still paused
    (Mode.CLOSED, "supervisor_pause"): _CLOSED,
    (Mode.CLOSED, "supervisor_resume"): _CLOSED,
    (Mode.CLOSED, "supervisor_close"): "the table is already closed{by}",
    (Mode.CLOSED, "supervisor_reopen"): (False, False),
}

#: The public event each applied operation publishes, by the mode it leads to.
EVENT_NAMES = {"supervisor_pause": "table_paused", "supervisor_resume": "table_resumed",
               "supervisor_reopen": "table_reopened"}


@dataclass(frozen=True, slots=True)
class OperatingState:
    """The two flags, and who set them last (for reasons and prompts)."""

    paused: bool = False
    closed: bool = False
    by: str | None = None  # the supervisor of the last operation applied
    reason: str | None = None
    since: int | None = None  # ``at`` of the last operation applied

    def mode(self, in_play: bool) -> Mode:
        if self.closed:
            if not in_play:
                return Mode.CLOSED
            return Mode.CLOSING_PAUSED if self.paused else Mode.CLOSING
        return Mode.PAUSED if self.paused else Mode.OPEN

    def _by(self) -> str:
        return f" (by supervisor {self.by})" if self.by else ""

    def refusal(self, operation: str, in_play: bool, round_id: str | None) -> str | None:
        """Why ``operation`` (a key of ``OPERATIONS`` but the open request) does not apply now."""
        outcome = TRANSITIONS[(self.mode(in_play), operation)]
        return outcome.format(by=self._by(), round=round_id) if isinstance(outcome, str) else None

    def after(self, operation: str, in_play: bool, *, by: str, reason: str | None, at: int) -> "OperatingState":
        """The state once ``operation`` applied (call :meth:`refusal` first)."""
        outcome = TRANSITIONS[(self.mode(in_play), operation)]
        assert not isinstance(outcome, str), outcome
        paused, closed = outcome
        return OperatingState(paused and not (closed and not in_play), closed, by, reason, at)

    def why_no_round(self, in_play: bool, round_id: str | None) -> str | None:
        """Why the operating state allows no new round now (None: it allows one)."""
        mode = self.mode(in_play)
        if mode is Mode.CLOSED:
            return _CLOSED.format(by=self._by())
        if mode in (Mode.CLOSING, Mode.CLOSING_PAUSED):
            return _CLOSING.format(by=self._by(), round=round_id)
        if mode is Mode.PAUSED:
            return _PAUSED.format(by=self._by())
        return None

    def at_round_end(self) -> "OperatingState":
        """The round in play ended: a closing table is closed now (and no longer paused: a
        reopen gives an open table)."""
        return OperatingState(False, True, self.by, self.reason, self.since) if self.closed else self


__all__ = ["EVENT_NAMES", "FROZEN", "Mode", "OPERATIONS", "OperatingState", "TRANSITIONS"]
