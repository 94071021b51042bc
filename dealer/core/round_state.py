"""What a round is made of, below the machine that changes it: its phases, the table rules it
plays under, the records a transition hands out (:class:`Step`, :class:`Transition`,
:class:`Rejection`), and :class:`RoundState`: the round's data and the messages it words
(prompts, round events, player messages). Pure: no IO, no clock.

The modules that read a round (:mod:`dealer.core.visibility`, :mod:`dealer.core.results`,
:mod:`dealer.core.shift`) take a :class:`RoundState`; the machine itself is
:class:`dealer.core.round.Round`, a :class:`RoundState` that handles events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Union

from dealer.core.events import ActionTimeout, ConfirmTimeout, DecisionTimeout, OpenRound, PlaceBet
from dealer.core.game_contract import Game, GameLookup, PeerHand
from dealer.core.game_records import Position
from dealer.core.messages import DecisionRecord, MoneyRules, PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.money import Rounding


class Phase(StrEnum):
    BETTING_OPEN = "BETTING_OPEN"
    BETTING_CLOSED = "BETTING_CLOSED"  # the round has started: no more bets
    DEALING = "DEALING"
    DECISION = "DECISION"  # the deal is complete; players decide (timer runs from here only)
    ACTION = "ACTION"  # peer games: a betting round between cards (the turn timer runs only here)
    RESULT = "RESULT"  # result computed, waiting in the outbox for settlement's acknowledgement
    SETTLED = "SETTLED"  # settlement acknowledged the result
    CANCELLED = "CANCELLED"  # failure before the round started: refund all
    VOID = "VOID"  # supervisor void: refund all


#: Phases in which the round is still being played.
ACTIVE = frozenset({Phase.BETTING_OPEN, Phase.BETTING_CLOSED, Phase.DEALING, Phase.DECISION, Phase.ACTION})


@dataclass(frozen=True, slots=True)
class BetLimit:
    min: Decimal
    max: Decimal


@dataclass(frozen=True)
class TableRules:
    """Everything the pure core needs to know about a table (built from configuration)."""

    table_id: str
    game: Game
    currency: str = "EUR"
    minor_unit: Decimal = Decimal("0.01")
    rounding: Rounding = Rounding.DOWN
    limits: Mapping[str, BetLimit] = field(default_factory=dict)
    alert_after: int = 3
    decision_ms: int = 15_000
    action_ms: int = 20_000  # peer games: the turn timer
    #: The canonical JSON these rules were built from (dealer.core.rules), its SHA-256 and the
    #: software version journaled with them: every result of a round played under them names both.
    canonical: str = ""
    rules_hash: str = ""
    software_version: str = ""
    #: The registry of games the rules were read with (:func:`dealer.core.rules.rules_from_canonical`):
    #: new rules journaled for the table are read with it too. None: rules built by hand, which
    #: know their own game only.
    games: GameLookup | None = field(default=None, compare=False, repr=False)

    @property
    def money(self) -> MoneyRules:
        return MoneyRules(currency=self.currency, minor_unit=self.minor_unit, rounding=self.rounding)


@dataclass(frozen=True, slots=True)
class Rejection:
    """An event the machine refused. Nothing changed; the reason is for the sender and the log."""

    event_type: str
    reason: str


Effect = Union[StationPrompt, RoundEvent, RoundResult, PlayerMessage, Rejection]


@dataclass(slots=True)
class Step:
    accepted: bool
    journal: bool = False
    effects: list[Effect] = field(default_factory=list)

    @property
    def rejection(self) -> Rejection | None:
        return next((e for e in self.effects if isinstance(e, Rejection)), None)


@dataclass(slots=True)
class Transition:
    """What a handler did: its effects and the phase the round goes to (None: it stays).

    Entering ``RESULT`` completes the round; entering ``CANCELLED`` or ``VOID`` refunds every
    bet for ``reason``: :meth:`Round.handle` adds the result once the phase is entered."""

    effects: list[Effect] = field(default_factory=list)
    next_phase: Phase | None = None
    accepted: bool = True
    journal: bool = True
    reason: str = ""

    @classmethod
    def refused(cls, event_type: str, reason: str, *also: Effect) -> "Transition":
        """Nothing changed: the reason goes back to the sender (and any prompt to the station)."""
        return cls([Rejection(event_type, reason), *also], accepted=False, journal=False)


def stale_timer(ev: DecisionTimeout | ActionTimeout | ConfirmTimeout, deadline: int | None,
                what: str) -> Transition | None:
    """A refusal for a timeout armed for another deadline than the one running now (a resume
    renewed it while the timeout was on its way), or None. A timeout journaled before timeouts
    named their deadline (``deadline`` None) is never stale."""
    if ev.deadline is None or ev.deadline == deadline:
        return None
    return Transition.refused(ev.type, f"timer for {what} closing at {ev.deadline} is stale (renewed to {deadline})")


@dataclass(slots=True)
class DealTally:
    """One dealer's part of a round (or, summed, of a shift: :mod:`dealer.core.shift`)."""

    cards: int = 0
    rescans: int = 0
    mistakes: int = 0


class RoundState:
    """One round's data: what :class:`dealer.core.round.Round` changes and the policy modules read,
    and the messages it words."""

    #: Where the round is: set by ``Round.__init__`` and changed only by ``Round.handle``.
    phase: Phase

    def __init__(self, rules: TableRules, opened: OpenRound) -> None:
        self.rules = rules
        self.round_id = opened.round_id
        self.context = dict(opened.context)
        #: The round's secret random draw (``OpenRound.draw``; None in rounds journaled before draws).
        self.draw = opened.draw
        self.opened_at = opened.at
        self.betting_closes_at = opened.betting_closes_at
        self.closed_at: int | None = None
        self.plan: tuple[Position, ...] = ()  # fixed when betting closes: it depends on the seats that bet
        self.next_index = 0
        self.cards: dict[str, str] = {}
        #: Cards the reader reported burned where the plan has no burn (code -> deck number): on no
        #: position, in no hand, never shown; a later read of one is a duplicate (docs/scanner-protocol.md §10.4).
        self.set_aside: dict[str, int] = {}
        self.bets: dict[str, PlaceBet] = {}
        self._held: dict[str, set[str]] = {}
        self.seat_owner: dict[int, str] = {}
        self.deciders: dict[str, int | None] = {}
        self.decisions: dict[str, DecisionRecord] = {}
        self.decision_deadline: int | None = None
        self._reject_key: tuple[str, str] | None = None
        self.reject_count = 0
        self.result: RoundResult | None = None
        self.delivered = False
        self.hand: PeerHand | None = None  # peer games: the hand, created when betting closes
        self.turn = 0  # peer games: numbers each turn, so a late timer cannot act on a newer one
        self.action_deadline: int | None = None
        self.street: str | None = None
        self.announce: str | None = None
        #: A timed confirmation is expected (a position with ``window_ms``): it is taken as given at this
        #: instant (epoch ms, journaled data like the other deadlines); None otherwise.
        self.confirm_deadline: int | None = None
        #: Exposed cards the dealer station reported that wait for a supervisor's corroboration
        #: (positions, in report order): shown to nobody, and the timed window stands still meanwhile.
        self.exposure_reports: list[str] = []
        #: Bumped before and after every event, so a cached visibility view is never stale.
        self.revision = 0
        #: Who dealt the round: the dealer logged on when it opened, then any who logged on while it
        #: was in play (``dealer_logon``), in order. Goes into the result.
        self.dealers: list[str] = [opened.dealer] if opened.dealer else []
        #: Per dealer ("" when nobody is logged on): cards registered, rescans, dealing mistakes
        #: refused (a duplicate or foreign card), counted as they happen (``dealer.core.shift``).
        self.tally: dict[str, DealTally] = {}

    # -- public -----------------------------------------------------------------------

    @property
    def table_id(self) -> str:
        return self.rules.table_id

    @property
    def expected_position(self) -> str | None:
        return self.plan[self.next_index].name if self.next_index < len(self.plan) else None

    # -- messages -------------------------------------------------------------------------

    def tell(self, player: str, kind: str, at: int, **data: object) -> PlayerMessage:
        return PlayerMessage(table_id=self.table_id, round_id=self.round_id, player_id=player,
                             kind=kind, at=at, data=data)  # type: ignore[arg-type]  # pydantic validates data against the field

    def event(self, name: str, at: int, **data: object) -> RoundEvent:
        return RoundEvent(table_id=self.table_id, round_id=self.round_id, event=name, at=at, data=data)

    def prompt(self, kind: str, at: int, *, message: str, reason: str | None = None,
               count: int | None = None, announce: str | None = None) -> StationPrompt:
        pos = self.expected_position if kind in ("NEXT", "RESCAN", "ALERT", "CONFIRM") else None
        return StationPrompt(
            table_id=self.table_id, round_id=self.round_id, kind=kind,  # type: ignore[arg-type]  # pydantic validates kind against the prompt kinds
            position=pos, step=self.next_index + 1 if pos else None, of=len(self.plan) if pos else None,
            reason=reason, count=count, message=message, at=at, announce=announce,
        )

    def _next_prompt(self, at: int) -> StationPrompt:
        pos = self.plan[self.next_index]
        if pos.confirm and pos.window_ms and self.exposure_reports:
            return self.prompt("CONFIRM", at, announce=self.announce,
                               message=f"{self._waiting()} (it stays face down until then); confirm {pos.name} "
                                       "to go on without it")
        if pos.confirm and pos.window_ms:
            return self.prompt("CONFIRM", at, announce=self.announce,
                               message=f"report an exposed card now (card_exposed), then confirm {pos.name}; "
                                       f"without a confirmation the deal goes on by itself in "
                                       f"{pos.window_ms / 1000:g} s")
        if pos.confirm:
            return self.prompt("CONFIRM", at, message=f"{pos.name} the cards, then confirm {pos.name}",
                               announce=self.announce)
        face = "burn card" if pos.burn else f"face {pos.face.lower()}"
        extra = " from the shuffled burn cards" if pos.from_burns else ""
        extra += f" ({self._waiting()})" if self.exposure_reports else ""
        return self.prompt("NEXT", at, message=f"deal {pos.name} ({face}){extra}", announce=self.announce)

    def _waiting(self) -> str:
        return f"{', '.join(self.exposure_reports)} reported exposed, waiting for a supervisor to confirm it"

    # -- the window of a timed confirmation ----------------------------------------------

    def _arm_window(self, at: int) -> None:
        """The window of a timed confirmation runs from ``at``; it stands still (no deadline)
        while a reported exposure waits for the supervisor."""
        pos = self.plan[self.next_index] if self.next_index < len(self.plan) else None
        timed = pos is not None and pos.confirm and pos.window_ms and not self.exposure_reports
        self.confirm_deadline = at + pos.window_ms if timed and pos is not None else None

    def _window_opened(self, at: int) -> list[Effect]:
        """The next step is a timed confirmation: its window starts now (public ``confirm_window``)."""
        self._arm_window(at)
        if self.confirm_deadline is None:
            return []
        return [self.event("confirm_window", at, step=self.plan[self.next_index].name,
                           closes_at=self.confirm_deadline)]
