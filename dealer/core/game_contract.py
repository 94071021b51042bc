"""The small interface every game implements, so the round machine stays game-agnostic.

A game is built from its validated options (house options and pay tables, a
pydantic model) and answers a few questions: which cards exist (``deck``), in
which order they are dealt to the seats that bet (``deal_plan``), whether a bet is
allowed (``check_bet``), and how a completed deal resolves every bet (``resolve``).
What only some games do is a small capability protocol they opt into:

* :class:`Decisions`: players decide after the deal (e.g. sevenluck);
* :class:`PeerGame`: players bet against each other between the cards, in a
  :class:`PeerHand` (e.g. stud, seotda, matgo), whose hand may offer more:
  :class:`BettingRounds` (its turns run through ``dealer.core.betting``),
  :class:`Reservations` (an action reserved before one's turn),
  :class:`Exposures` (an exposed card that plays),
  :class:`Reveals` (which face-down cards its rules turn over),
  :class:`Remembers` (what the table carries into the next hand),
  :class:`HouseSeat` (a seat the house plays).

The core asks :func:`offers` whether a game or hand has a capability and then uses only
that capability's methods. The contract lives in the core, which never imports a game: the
games import it, and whoever builds tables (the edge, the tools) hands the core the registry
of games (:data:`GameLookup`). Adding a game is one module with a subclass of :class:`Game`
plus a registry line (:mod:`dealer.games`); the records the two exchange are
:mod:`dealer.core.game_records`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar, Protocol, TypeGuard, TypeVar, runtime_checkable

from pydantic import BaseModel

from dealer.core.game_records import BetStep, BetView, GameOutcome, HandStep, Position


class Game(ABC):
    """One game's rules. Pure: no IO, no clock.

    Every game answers the questions below. What only some games do is a capability they opt
    into: :class:`Decisions` (players decide after the deal), or :class:`PeerGame` (players bet
    against each other between the cards, in a :class:`PeerHand` that may add
    :class:`Reservations`, :class:`Exposures`, :class:`HouseSeat` ...). The round machine
    checks for a capability with ``isinstance`` and uses only its methods.
    """

    name: ClassVar[str]
    #: The game's house options and pay tables: a strict pydantic model (``dealer.games.base.GameOptions``).
    Options: ClassVar[type[BaseModel]]
    #: Every bet type a player may place, in the order they are reported.
    bet_types: ClassVar[tuple[str, ...]]
    #: The fewest seated players a hand needs; with fewer the round is cancelled (refund).
    min_players: ClassVar[int] = 1
    #: True where the round starts with its first registered card rather than at
    #: betting close (``decks.md`` §5.3: Seotda, Seven-Card Stud).
    starts_at_first_card: ClassVar[bool] = False
    #: Options added after rules were first journaled: option -> what a rules text written before
    #: the option existed means (the behaviour it was played with). Such a text is still canonical
    #: without the key, keeps its bytes and hash, and is read with that value (:mod:`dealer.core.rules`).
    legacy_options: ClassVar[Mapping[str, Any]] = {}
    #: The smallest ``service.max_message_bytes`` a backend with a table of this game needs (its
    #: results are that big); 0: the default is enough.
    min_message_bytes: ClassVar[int] = 0
    #: What makes its results that big, and the game's full name: the refusal of a smaller limit
    #: says "which a {min_message_title} result needs ({min_message_why}; ...)".
    min_message_why: ClassVar[str] = ""
    min_message_title: ClassVar[str] = ""
    #: The label the house players' seeds of this game are drawn under (:func:`dealer.core.draws.ai_seed`).
    house_seed_label: ClassVar[str] = "house-ai"

    def __init__(self, options: BaseModel | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None) -> "Game":
        return cls(cls.Options.model_validate(dict(raw or {})))

    @property
    @abstractmethod
    def deck(self) -> frozenset[str]:
        """The card codes that belong to this game's deck; anything else is a foreign card."""

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

    def check_stake(self, stake: Decimal, player: str, context: Mapping[str, Any]) -> str | None:
        """Why a player may not bring ``stake`` to this game (Seotda's minimum chips), or None."""
        return None

    def check_unit(self, unit: Decimal) -> str | None:
        """Why the table's money unit cannot express this game's amounts, or None."""
        return None

    def check_config(self) -> str | None:
        """Why a table's configuration may not ask for these options, or None: some values are
        kept only so that rules journaled before an option existed replay as they were played."""
        return None

    def initial_memory(self) -> dict[str, Any]:
        """What a table of this game remembers before its first round (``OpenRound.context``)."""
        return {}

    @abstractmethod
    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        """Resolve a completed deal: ``cards`` maps every non-burn position name to its code;
        ``bets`` are the accepted bets and ``decisions`` each decider's action."""


#: The registry of games handed in from outside (the edge passes :func:`dealer.games.game_class`):
#: a game's name -> its class; an unknown name raises ValueError naming the known ones.
GameLookup = Callable[[str], type[Game]]


# --- capabilities ---------------------------------------------------------------------------

_Cap = TypeVar("_Cap")
_OFFERS: dict[tuple[type, type], bool] = {}


def offers(obj: object, capability: type[_Cap]) -> TypeGuard[_Cap]:
    """Whether ``obj`` (a game or a hand) offers ``capability``, one of the protocols below.

    A capability is declared by a class (its methods), so the answer is kept per class: a
    runtime-checkable protocol's ``isinstance`` looks at every member each time, which the
    visibility policy, asking for every card of every message, cannot afford."""
    key = (type(obj), capability)
    known = _OFFERS.get(key)
    if known is None:
        known = _OFFERS[key] = isinstance(obj, capability)
    return known


# --- capabilities of a game -----------------------------------------------------------------


@runtime_checkable
class Decisions(Protocol):
    """Players decide once the deal is complete (Sevenluck's Play or Fold, ``decks.md`` §5.3).

    The round machine opens a decision window after the last card, records each choice (or
    :meth:`default_decision` when the timer runs out) and resolves when all are in. A card
    of a seat whose decision :meth:`folds` is never shown; the others are at the result.
    """

    #: What a decider may choose after the deal (e.g. ``("PLAY", "FOLD")``).
    decision_actions: tuple[str, ...]

    def deciders(self, bets: Sequence[BetView]) -> dict[str, int | None]:
        """Players who must decide once the deal is complete (player id -> seat)."""

    def default_decision(self) -> str | None:
        """The action applied when a decider's timer runs out (``decks.md`` §5.3)."""

    def decision_stake(self, action: str, bets: Sequence[BetView]) -> Decimal | None:
        """The stake ``action`` commits for a player holding ``bets`` (Sevenluck's Play equals
        the Ante), recorded with the decision; None where it commits none."""

    def folds(self, action: str) -> bool:
        """Whether ``action`` gives the hand up (its cards go to the muck unseen)."""


# --- peer-to-peer games ---------------------------------------------------------------------


class PeerHand(ABC):
    """One hand of a peer-to-peer game, from the first card to the showdown. Pure.

    The round machine asks :meth:`next_step` whenever the previous step is complete
    (every position dealt, or the turns over), reports each registered card with
    :meth:`register`, runs the turns and finally asks :meth:`outcome`. Hands whose turns
    are betting rounds inherit them from :class:`BettingTurns`; anything more is a
    capability (:class:`Reservations`, :class:`Exposures`, :class:`Reveals`,
    :class:`Remembers`, :class:`HouseSeat`).
    """

    @abstractmethod
    def next_step(self) -> HandStep: ...

    @abstractmethod
    def register(self, position: Position, code: str) -> None: ...

    @abstractmethod
    def outcome(self) -> GameOutcome: ...

    # -- turns --------------------------------------------------------------------------------

    @abstractmethod
    def open_turns(self, step: BetStep) -> bool:
        """Start the turns of ``step``; True when someone must act now."""

    @property
    @abstractmethod
    def to_act(self) -> str | None:
        """The player whose turn it is (None between turns)."""

    @abstractmethod
    def turn_summary(self) -> dict[str, Any]:
        """Public facts about the turn, for the ``turn`` event (stud: the bet level)."""

    @abstractmethod
    def turn_prompt(self, street: str | None) -> str:
        """What the dealer station shows while a player acts."""

    @abstractmethod
    def turn_options(self) -> dict[str, Any]:
        """What the player to act may do, for their ``your_turn`` message."""

    @abstractmethod
    def do_action(self, player: str, action: str, amount: Decimal | None, card: str | None,
                  by: str) -> tuple[dict[str, Any] | str, bool]:
        """Run one action: (its public record, whether someone must still act), or (the reason
        it is refused, False) with nothing changed."""

    @abstractmethod
    def default_action(self) -> tuple[str, Decimal | None, str | None]:
        """The timeout action of the player to act: (action, amount, card)."""

    def close_turns(self) -> list[tuple[str, dict[str, Any]]]:
        """The turns are over: public notes (stud: chips nobody called, returned)."""
        return []

    def translate(self, player: str, action: str, amount: Decimal | None) -> tuple[str, Decimal | None] | str:
        """A player's action as the action :meth:`do_action` runs, or why it is refused
        (Seotda's buttons name amounts the betting engine does not know)."""
        return action, amount

    def notes(self) -> list[tuple[str, dict[str, Any]]]:
        """Public round events the hand produced since last asked (Seotda: a pot carried into
        a rematch), drained by the round machine."""
        return []


class PeerGame(Game):
    """Base of the games whose players bet against each other between the cards (stud, Seotda,
    Matgo): each brings chips to the hand once (a ``chips_bet`` naming their seat, table
    stakes), the round starts at its first card, and :meth:`start_hand` plays it."""

    #: The bet type that brings a player's chips, and why a second one is refused.
    chips_bet: ClassVar[str]
    chips_once: ClassVar[str]
    min_players: ClassVar[int] = 2
    starts_at_first_card: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "chips_bet" in cls.__dict__:
            cls.bet_types = (cls.chips_bet,)

    @property
    def seat_count(self) -> int:
        return int(self.options.seats)  # type: ignore[attr-defined]  # a peer game's options declare its seats

    def check_bet(self, bet_type: str, held: frozenset[str]) -> str | None:
        reason = super().check_bet(bet_type, held)
        if reason is None and self.chips_bet in held:
            return self.chips_once
        return reason

    @abstractmethod
    def start_hand(self, seats: Mapping[int, str], chips: Mapping[str, Decimal], hand_number: int,
                   unit: Decimal, context: Mapping[str, Any] | None = None, *,
                   draw: str | None = None) -> PeerHand:
        """The hand for ``seats`` (seat -> player) bringing ``chips`` (player -> amount).
        ``draw`` is the round's secret random draw (:mod:`dealer.core.draws`): whatever the rulebook
        draws at random is derived from it, never from ``hand_number`` (None: a round journaled
        before draws, which keeps the derivation it was played with)."""


# --- capabilities of a peer hand ------------------------------------------------------------


@runtime_checkable
class BettingRounds(Protocol):
    """The hand's turns are betting rounds of :mod:`dealer.core.betting` (:class:`BettingTurns`)."""

    betting: Any  # dealer.core.betting.Betting


@runtime_checkable
class Reservations(Protocol):
    """A player may reserve an action before their turn (Seotda, ``seotda.md`` §6.2)."""

    def reserve(self, player: str, action: str, amount: Decimal | None) -> str | None:
        """Reserve an action before the player's turn: None if accepted, else why not."""

    def take_reservation(self, player: str) -> tuple[str, Decimal | None] | str | None:
        """On ``player``'s turn: a reserved action to run now, the reason it was cancelled, or None."""


@runtime_checkable
class Exposures(Protocol):
    """A card the dealer exposed by mistake may play (stud's 7th card, §3.5). The station's
    report alone shows nothing: the round machine holds it until a supervisor corroborates it
    (seat and card), and only cards the rules let play exposed are ever taken."""

    def corroborated(self) -> bool:
        """Whether an exposure needs the supervisor's corroboration (False only under rules
        journaled before it did: they replay the station's word as they were played)."""

    def exposure_position(self, seat: int) -> str:
        """The position of ``seat``'s card the exposure rule concerns (stud: ``P4.7``)."""

    def exposable(self, position: str) -> str | None:
        """Why the card at ``position`` may not play exposed now (None: the rules allow it)."""

    def expose(self, position: str) -> str | None:
        """The card at ``position`` plays exposed: None if done, else why not (nothing changed)."""


@runtime_checkable
class Reveals(Protocol):
    """Which face-down cards the hand's rules turn over, and which they never will: the facts
    :mod:`dealer.core.visibility` applies its one policy to."""

    def shows(self, position: Position, ended: bool) -> bool:
        """Whether the registered face-down card at ``position`` is shown to everybody now
        (a showdown, an exposed card, a card played); ``ended``: the round has its result."""

    def mucked(self, position: Position) -> bool:
        """Whether the card will never be shown (its hand folded, an earlier deal)."""


@runtime_checkable
class Remembers(Protocol):
    """The table remembers something of each hand for the next (``OpenRound.context``)."""

    def carry(self) -> dict[str, Any]:
        """What the table remembers of this finished hand."""

    def carry_unfinished(self) -> dict[str, Any]:
        """What a hand that was cancelled or voided adds to the table's memory (stud: a hand
        that was dealt still counts towards the next wash)."""


#: The player ids reserved for the house's own seats: no player platform may act as one
#: (dealer/edge/ingress.py refuses it), and their private messages go to the house players.
HOUSE_PLAYERS = frozenset({"house-ai"})


@runtime_checkable
class HouseSeat(Protocol):
    """The house plays a seat (Matgo's AI). When one of the house's players is to move, the hand
    describes the decision as a plain, picklable request; the edge hands it to the house player
    registered for its type (:mod:`dealer.house.registry`) in another process and sends the
    answer back as an ordinary, journaled player action. The edge never looks inside the hand."""

    def house_players(self) -> frozenset[str]:
        """The player ids the house plays in this hand: their private messages go to the
        house player, never to a topic."""

    def house_request(self, player: str, turn: int, seed: int) -> object:
        """What ``player`` (one of :meth:`house_players`) needs to decide ``turn``: a picklable
        value holding its own copy of the game state, so the decision can run anywhere while
        the table goes on. ``seed`` (from the round's secret draw) makes it reproducible."""


def has_house_seats(game: object) -> bool:
    """Whether ``game``'s hands have house seats: a game says so with the class attribute
    ``house_seats = True``, so the edge can have its house players ready (a worker process
    started) before the first hand asks them for a move."""
    return bool(getattr(game, "house_seats", False))
