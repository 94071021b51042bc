"""The small interface every game implements, so the round machine stays game-agnostic.

A game is built from its validated options (house options and pay tables, a
pydantic model) and answers a few questions: which cards exist (``deck``), in
which order they are dealt to the seats that bet (``deal_plan``), whether a bet is
allowed (``check_bet``), who must decide after the deal and what they may choose
(``deciders``, ``decision_actions``, ``default_decision``), and how a completed deal
and those decisions resolve every bet (``resolve``). Adding a game is one module with
a subclass of :class:`Game` plus a registry line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class Face(StrEnum):
    UP = "UP"
    DOWN = "DOWN"


@dataclass(frozen=True, slots=True)
class Position:
    """One step of a deal plan (`decks.md` §3): ``A1``, ``P3.2``, ``BURN1`` ...

    A ``DOWN`` card with a ``seat`` is that seat's hole card: only the seat's player may
    see it before the result. A ``DOWN`` card without a seat (the dealer's) is seen by
    nobody until the result reveals it; a burn card is never shown.
    """

    name: str
    face: Face = Face.UP
    burn: bool = False
    seat: int | None = None
    #: A step the dealer confirms instead of scanning (stud's ``WASH`` and ``SHUFFLE``).
    confirm: bool = False
    #: The card is dealt from the burn cards of this round (stud's ``RESHUFFLE_BURNS``).
    from_burns: bool = False
    #: Which shuffle of the deck the card comes from: a Seotda rematch reshuffles the same
    #: cards, so a card is a duplicate only against cards of the same shuffle.
    deck: int = 0
    #: A confirmation that is taken as given when this many ms pass without it (stud's
    #: ``LAST_CARD``: the window in which the station may report an exposed 7th card).
    window_ms: int = 0


@dataclass(frozen=True, slots=True)
class BetView:
    """What a game needs to know of an accepted bet."""

    bet_id: str
    player_id: str
    bet_type: str
    stake: Decimal
    seat: int | None = None


class Outcome(StrEnum):
    WIN = "WIN"
    LOSE = "LOSE"
    PUSH = "PUSH"  # the stake is returned, nothing won or lost


@dataclass(frozen=True, slots=True)
class BetResolution:
    """How one bet resolves: ``ratio`` is X in "X:1" and is only meaningful for WIN.

    ``bonus_ratio`` is an extra payout of X times the stake paid *whatever the outcome*
    (Sevenluck's Ante Bonus: "regardless of winning or losing"); it never returns the
    stake by itself.
    """

    outcome: Outcome
    ratio: Decimal = Decimal(0)
    category: str | None = None  # the hand category that decided a side bet, if any
    bonus_ratio: Decimal = Decimal(0)
    #: Peer games: the exact amount handed back for this bet (chips not put in, plus winnings).
    returned: Decimal | None = None


@dataclass(frozen=True, slots=True)
class HandInfo:
    cards: tuple[str, ...]
    category: str


@dataclass(frozen=True, slots=True)
class GameOutcome:
    """Everything settlement and the dealer station need to know about a completed deal.

    ``bets`` holds resolutions that are the same for every player (Teen Patti: by bet
    type); ``player_bets`` holds per-player ones (games where players decide):
    player id -> bet type -> resolution.
    """

    hands: dict[str, HandInfo]
    winner: str | None  # e.g. "A", "B", "TIE"; None where each player has their own result
    bets: dict[str, BetResolution]
    details: dict[str, Any] = field(default_factory=dict)  # game-specific, JSON-safe
    player_bets: dict[str, dict[str, BetResolution]] = field(default_factory=dict)


class GameOptions(BaseModel):
    """Base for per-game house options and pay tables: strict, unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Game(ABC):
    """One game's rules. Pure: no IO, no clock."""

    name: ClassVar[str]
    Options: ClassVar[type[GameOptions]]
    #: Every bet type a player may place, in the order they are reported.
    bet_types: ClassVar[tuple[str, ...]]

    def __init__(self, options: GameOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None) -> "Game":
        return cls(cls.Options.model_validate(dict(raw or {})))

    @property
    @abstractmethod
    def deck(self) -> frozenset[str]:
        """The card codes that belong to this game's deck; anything else is a foreign card."""

    #: What a decider may choose after the deal (e.g. ``("PLAY", "FOLD")``); empty: no decisions.
    decision_actions: ClassVar[tuple[str, ...]] = ()

    @property
    def seat_count(self) -> int:
        """Number of seats whose bets must name a seat; 0 where bets have no seat."""
        return 0

    @abstractmethod
    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        """The positions in the order the dealer deals them (burns included), for a round in
        which ``seats`` (sorted) hold bets. Games without seats ignore ``seats``."""

    def check_bet(self, bet_type: str, held: frozenset[str]) -> str | None:
        """Reason a player holding bets of types ``held`` may not add ``bet_type``, or None."""
        if bet_type not in self.bet_types:
            return f"unknown bet type {bet_type!r} for {self.name} (expected one of {', '.join(self.bet_types)})"
        return None

    def deciders(self, bets: Sequence[BetView]) -> dict[str, int | None]:
        """Players who must decide once the deal is complete (player id -> seat)."""
        return {}

    def default_decision(self) -> str | None:
        """The action applied when a decider's timer runs out (``decks.md`` §5.3)."""
        return None

    # -- peer-to-peer games (players bet against each other between cards) ---------------

    #: True for games whose betting happens between the cards (:class:`PeerHand`); their
    #: "bets" before the deal are the chips each player brings to the hand.
    peer: ClassVar[bool] = False
    #: The fewest seated players a hand needs; with fewer the round is cancelled (refund).
    min_players: ClassVar[int] = 1
    #: True where the round starts with its first registered card rather than at
    #: betting close (``decks.md`` §5.3: Seotda, Seven-Card Stud).
    starts_at_first_card: ClassVar[bool] = False

    def initial_memory(self) -> dict[str, Any]:
        """What a table of this game remembers before its first round (``OpenRound.context``)."""
        return {}

    def check_stake(self, stake: Decimal, player: str, context: Mapping[str, Any]) -> str | None:
        """Why a player may not bring ``stake`` to this game (Seotda's minimum chips), or None."""
        return None

    def check_unit(self, unit: Decimal) -> str | None:
        """Why the table's money unit cannot express this game's amounts, or None."""
        return None

    def start_hand(self, seats: Mapping[int, str], chips: Mapping[str, Decimal], hand_number: int,
                   unit: Decimal, context: Mapping[str, Any] | None = None, *,
                   draw: str | None = None) -> "PeerHand":
        """A peer game's hand for ``seats`` (seat -> player) bringing ``chips`` (player -> amount).
        ``draw`` is the round's secret random draw (:mod:`dealer.core.draws`): whatever the rulebook
        draws at random is derived from it, never from ``hand_number`` (None: a round journaled
        before draws, which keeps the derivation it was played with)."""
        raise NotImplementedError(f"{self.name} is not a peer-to-peer game")

    @abstractmethod
    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """Resolve a completed deal: ``cards`` maps every non-burn position name to its code;
        ``bets`` are the accepted bets and ``decisions`` each decider's action."""


# --- peer-to-peer hands --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DealStep:
    """Deal these positions next (in order); ``announce`` is what the dealer says while dealing."""

    positions: tuple[Position, ...]
    announce: str | None = None


@dataclass(frozen=True, slots=True)
class BetStep:
    """Open a betting round: ``first`` acts first under ``limits``; ``announce`` is what the
    dealer says (stud: "Two of clubs, low", "pair of sixes high")."""

    first: str
    limits: Any  # dealer.core.betting.Limits (kept untyped here so base.py has no import cycle)
    street: str
    announce: str | None = None


@dataclass(frozen=True, slots=True)
class EndStep:
    """No more cards and no more betting: resolve the hand."""


class PeerHand(ABC):
    """One hand of a peer-to-peer game, from the first card to the showdown. Pure.

    The round machine asks :meth:`next_step` whenever the previous step is complete
    (every position dealt, or the betting round over), reports each registered card with
    :meth:`register`, runs the betting through :attr:`betting` and finally asks
    :meth:`outcome`.
    """

    betting: Any  # dealer.core.betting.Betting

    @abstractmethod
    def next_step(self) -> DealStep | BetStep | EndStep: ...

    @abstractmethod
    def register(self, position: Position, code: str) -> None: ...

    # -- turns: betting games run them through the betting engine; other games override ------

    def open_turns(self, step: BetStep) -> bool:
        """Start the turns of ``step``; True when someone must act now."""
        from dealer.core.betting import State

        return bool(self.betting.open_round(step.first, step.limits) == State.TO_ACT)

    @property
    def to_act(self) -> str | None:
        """The player whose turn it is (None between turns)."""
        return self.betting.to_act  # type: ignore[no-any-return]

    def turn_summary(self) -> dict[str, Any]:
        """Public facts about the turn, for the ``turn`` event (stud: the bet level)."""
        return {"level": str(self.betting.level)}

    def turn_prompt(self, street: str | None) -> str:
        """What the dealer station shows while a player acts."""
        return f"{street} street betting: {self.to_act} to act (level {self.betting.level}); do not deal"

    def do_action(self, player: str, action: str, amount: Decimal | None, card: str | None,
                  by: str) -> tuple[dict[str, Any] | str, bool]:
        """Run one action: (its public record, whether someone must still act), or (the reason
        it is refused, False) with nothing changed."""
        from dealer.core.betting import State

        if card is not None:
            return f"{action} takes no card in this game", False
        reason = self.betting.verify(player, action, amount)
        if reason is not None:
            return reason, False
        record = self.betting.act(player, action, amount, by="timeout" if by == "timeout" else "player")
        return record.as_json(), self.betting.state == State.TO_ACT

    def default_action(self) -> tuple[str, Decimal | None, str | None]:
        """The timeout action of the player to act: (action, amount, card)."""
        action, amount = self.betting.default_action()
        return str(action), amount, None

    def close_turns(self) -> list[tuple[str, dict[str, Any]]]:
        """The turns are over: public notes (stud: chips nobody called, returned)."""
        back = self.betting.close_round()
        return [] if back is None else [("uncalled_returned", {"player_id": back.player_id,
                                                               "amount": str(back.amount)})]

    def expose(self, position: str) -> str | None:
        """The dealer exposed a face-down card: None if accepted, else why not."""
        return f"exposed card at {position}: call the supervisor (decks.md §5.4)"

    def translate(self, player: str, action: str, amount: Decimal | None) -> tuple[str, Decimal | None] | str:
        """A player's action as a betting-engine action and round total, or why it is refused
        (Seotda's buttons name amounts the engine does not know)."""
        return action, amount

    def turn_options(self) -> dict[str, Any]:
        """What the player to act may do, for their ``your_turn`` message."""
        return dict(self.betting.options().as_json())

    def reserve(self, player: str, action: str, amount: Decimal | None) -> str | None:
        """Reserve an action before the player's turn: None if accepted, else why not."""
        return "this game has no action reservation"

    def take_reservation(self, player: str) -> tuple[str, Decimal | None] | str | None:
        """On ``player``'s turn: a reserved action to run now, the reason it was cancelled, or None."""
        return None

    def notes(self) -> list[tuple[str, dict[str, Any]]]:
        """Public round events the hand produced since last asked (Seotda: a pot carried into
        a rematch), drained by the round machine."""
        return []

    def carry(self) -> dict[str, Any]:
        """What the table remembers of this hand for the next one (``OpenRound.context``)."""
        return {}

    def carry_unfinished(self) -> dict[str, Any]:
        """What a hand that was cancelled or voided adds to the table's memory (stud: a hand that
        was dealt still counts towards the next wash)."""
        return {}

    @abstractmethod
    def outcome(self) -> GameOutcome: ...
