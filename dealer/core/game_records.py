"""The plain records a game and the round machine hand each other: positions of a deal plan,
bets as a game sees them, how each bet resolves, a hand's next step. Frozen data, no behaviour:
the contract itself (what a game answers, what a capability adds) is :mod:`dealer.core.game_contract`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

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
    #: The hand the card belongs to, as the game names it (``P3``, ``S1``, Matgo's ``F``, its
    #: layout ``L`` and stock ``STOCK``), and its number in that hand (stud's 7th card is
    #: ``index`` 7): games and the visibility policy read these, never the name.
    hand: str | None = None
    index: int = 0
    #: A hole card given to its owner only once every ``together`` card of the same deal and
    #: ``index`` has registered (Seotda's second cards, §3.2).
    together: bool = False
    #: The house player who holds this card (Matgo's AI): it owns the card, which is never
    #: delivered to a player topic (the house reads its hand from the game).
    house: str | None = None


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


# --- what a peer hand says comes next -------------------------------------------------------


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


#: What a hand says comes next: the round machine runs it until it must wait for a card or a turn.
HandStep = DealStep | BetStep | EndStep
