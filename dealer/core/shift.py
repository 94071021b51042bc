"""Who deals at a table, and what each dealer's rounds came to.

A pit boss and a regulator ask the same questions of a table: who is dealing, how did the last
rounds end, and, per dealer, how many rounds and cards, how many rescans, how many dealing
mistakes the backend refused (UKGC RTS 17A keeps such statistics "by game, staff member and
location"). The round counts its own cards and rescans per dealer as they happen
(:class:`DealTally`); when it ends, the table hands it to its :class:`Shift`, which keeps the
last rounds and the running figures per dealer. Pure: no IO, no clock; a replay of the journal
rebuilds exactly what the live run had from the replay's first round on (``since``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dealer.core.round_state import DealTally, RoundState

#: Rescan reasons that are the dealer's mistake (a card that may not go where it was passed),
#: not the reader's (a no-read, a torn frame, a jam).
MISTAKES = frozenset({"duplicate_card", "foreign_card"})
#: How many ended rounds a table keeps for its screens (``dealer recall`` has them all).
KEEP_ROUNDS = 20
#: How many dealers' figures a table keeps (the oldest off shift go first).
KEEP_DEALERS = 50


@dataclass(frozen=True, slots=True)
class RoundSummary:
    """An ended round for the screens' strip of last rounds. No card codes: a code shown in one
    round may be a hidden card of the next (the shoe is reshuffled), so the retained history
    could never pass the visibility check; the result and ``dealer recall`` have the cards."""

    round_id: str
    outcome: str
    winner: str | None
    reason: str | None
    dealers: tuple[str, ...]
    opened_at: int
    finished_at: int
    dealt: int
    rescans: int
    mistakes: int


@dataclass(slots=True)
class DealerFigures:
    """One dealer's figures at this table since ``since`` (their first round or log-on seen)."""

    dealer: str | None
    since: int
    rounds: int = 0
    tally: DealTally = field(default_factory=DealTally)


class Shift:
    """The table's dealer on shift, its last rounds and every dealer's figures."""

    def __init__(self) -> None:
        self.dealer: str | None = None
        self.since: int | None = None  # the first fact this shift log holds (epoch ms)
        self.rounds: deque[RoundSummary] = deque(maxlen=KEEP_ROUNDS)
        self.figures: dict[str | None, DealerFigures] = {}
        #: Bumped on every change, so the edge republishes only what changed.
        self.revision = 0

    def logon(self, dealer: str, at: int) -> str | None:
        """``dealer`` takes over the table; returns who dealt before (None: nobody)."""
        previous, self.dealer = self.dealer, dealer
        self._figures(dealer, at)
        self._touch(at)
        return previous

    def restore(self, dealer: str, at: int) -> None:
        """A replay starting at a round learns who was on shift from its opening."""
        if self.dealer is None:
            self.dealer = dealer
            self._figures(dealer, at)
            self._touch(at)

    def round_ended(self, rnd: RoundState) -> None:
        """A round has its result: remember it, and add each dealer's part to their figures. A
        round cancelled before any card counts for nobody's rounds."""
        res = rnd.result
        assert res is not None
        dealt = sum(t.cards for t in rnd.tally.values())
        for who, tally in rnd.tally.items():
            fig = self._figures(who or None, rnd.opened_at)
            fig.tally.cards += tally.cards
            fig.tally.rescans += tally.rescans
            fig.tally.mistakes += tally.mistakes
        if dealt:
            dealers: list[str | None] = [*rnd.dealers] or [None]  # nobody logged on: counted under None
            for dealer in dealers:
                self._figures(dealer, rnd.opened_at).rounds += 1
        self.rounds.appendleft(RoundSummary(
            round_id=rnd.round_id, outcome=res.outcome, winner=res.winner, reason=res.reason,
            dealers=tuple(rnd.dealers), opened_at=rnd.opened_at, finished_at=res.finished_at, dealt=dealt, rescans=sum(t.rescans for t in rnd.tally.values()),
            mistakes=sum(t.mistakes for t in rnd.tally.values())))
        self._touch(rnd.opened_at)

    def _figures(self, dealer: str | None, at: int) -> DealerFigures:
        fig = self.figures.get(dealer)
        if fig is None:
            if len(self.figures) >= KEEP_DEALERS:
                oldest = min((d for d in self.figures if d != self.dealer), key=lambda d: self.figures[d].since)
                del self.figures[oldest]
            fig = self.figures[dealer] = DealerFigures(dealer, at)
        return fig

    def _touch(self, at: int) -> None:
        self.revision += 1
        if self.since is None or at < self.since:
            self.since = at


__all__ = ["DealTally", "DealerFigures", "KEEP_DEALERS", "KEEP_ROUNDS", "MISTAKES", "RoundSummary", "Shift"]
