"""Each game's simulated parts, by game name: the registry the shared simulator parts look up.

A game brings its own: the players who act once the cards are out and the strategies
``dealer simulate`` seats (:data:`PLAYERS`, :data:`DEFAULT_STRATEGIES`), its virtual dealer when
the plain one dealing the 52 cards will not do (:data:`DEALERS`), the stakes its table accepts
(:data:`BET_PLANS`) and the bets each player brings to a round (:data:`SEAT_BETS`). The shared
parts (:mod:`simulators.rig`, :mod:`simulators.bettors`, :mod:`simulators.settlement`) read these
and name no game; a game missing from a registry gets the shared default (no players, the plain
dealer, a banking game's random bets within its limits).

The house's games are registered here; their parts live in their own modules
(:mod:`simulators.players`, :mod:`simulators.stud_players`, :mod:`simulators.seotda_players`,
:mod:`simulators.matgo_players`), imported on first use since those import the shared parts.
A new game registers with :func:`register_players`, :func:`register_dealer` and
:func:`register_bets` (``tools.games.register_kit`` does for a kit).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from dataclasses import dataclass
from typing import Any

from drivers.bus import Bus
from simulators.station import VirtualDealer

#: Makes one simulated player: (table id, player id, bus, strategy, rng, think, silent_after).
PlayerFactory = Callable[[str, str, Bus, str, random.Random, float, int], Any]
#: Makes a game's virtual dealer: (table id, shoe, link, **the common keyword arguments).
DealerFactory = Callable[..., VirtualDealer]
#: A table's bet plan: (game, its validated house options, limits, money unit, players or None).
PlanFactory = Callable[[str, Any, "Mapping[str, Any] | None", Decimal, "int | None"], "BetPlan"]
#: One player's bets in a round: (plan, player number N, rng) -> [(player, bet type, seat)].
SeatBets = Callable[["BetPlan", int, random.Random], "list[tuple[str, str, int | None]]"]

#: The game a plan or a settlement consumer is for when none is named, and its bet types.
DEFAULT_GAME = "teen-patti"
DEFAULT_BET_TYPES = ("player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus")


DEFAULT_STAKES = ("1.00", "5.00", "10.00", "15.00", "25.00")


@dataclass(frozen=True, slots=True)
class BetPlan:
    """What the simulated players of one table bet in every round.

    ``players`` players (``player1`` ...); in a seated game player N sits in seat N.
    ``stakes`` are drawn at random, one per bet. ``deciders``: players who always place the
    bet that asks them for a decision (e.g. an Ante, with or without a side bet), so a player
    who never answers is still asked every round and the decision timer acts for it."""

    game: str
    players: int = 3
    bet_types: tuple[str, ...] = DEFAULT_BET_TYPES
    stakes: tuple[str, ...] = DEFAULT_STAKES
    deciders: tuple[str, ...] = ()


def _later(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, called through and imported on the first call (the game modules import
    the shared parts, which import this registry)."""

    def call(*args: Any, **kw: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kw)

    call.__qualname__ = call.__name__ = f"{module}.{name}"
    return call


_SEVENLUCK, _STUD, _SEOTDA, _MATGO = ("simulators.players", "simulators.stud_players",
                                      "simulators.seotda_players", "simulators.matgo_players")

#: Each game's players: game -> factory (games where players only bet have none).
PLAYERS: dict[str, PlayerFactory] = {
    "sevenluck": _later(_SEVENLUCK, "make_player"),
    "stud": _later(_STUD, "make_player"),
    "seotda": _later(_SEOTDA, "make_player"),
    "matgo": _later(_MATGO, "make_player"),
}
#: Strategies of the players ``dealer simulate`` seats, by game (seat N takes the Nth, cycling):
#: players who always answer, some by their cards, some at random.
DEFAULT_STRATEGIES: dict[str, tuple[str, ...]] = {
    "sevenluck": ("q64", "random"),
    "stud": ("calling", "random", "aggressive"),
    "seotda": ("calling", "hand", "random"),
    "matgo": ("random",),
}
#: Games whose dealer is not the plain one dealing the 52 cards in the order prompted.
DEALERS: dict[str, DealerFactory] = {
    "seotda": _later(_SEOTDA, "SeotdaDealer"),
    "matgo": _later(_MATGO, "MatgoDealer"),
}
#: Games whose stakes are not a banking game's default stakes within the table's limits.
BET_PLANS: dict[str, PlanFactory] = {
    "sevenluck": _later(_SEVENLUCK, "bet_plan"),
    "stud": _later(_STUD, "bet_plan"),
    "seotda": _later(_SEOTDA, "bet_plan"),
    "matgo": _later(_MATGO, "bet_plan"),
}
#: Games whose players do not bring a banking game's random main and side bets.
SEAT_BETS: dict[str, SeatBets] = {
    "sevenluck": _later(_SEVENLUCK, "seat_bets"),
    "stud": _later(_STUD, "seat_bets"),
    "seotda": _later(_SEOTDA, "seat_bets"),
    "matgo": _later(_MATGO, "seat_bets"),
}


def register_players(game: str, factory: PlayerFactory, strategies: Sequence[str]) -> None:
    """A game's simulated players (and the strategies ``dealer simulate`` seats by default)."""
    PLAYERS[game] = factory
    DEFAULT_STRATEGIES[game] = tuple(strategies)


def register_dealer(game: str, factory: DealerFactory) -> None:
    """A game's own virtual dealer (default: :class:`VirtualDealer` with the 52 cards)."""
    DEALERS[game] = factory


def register_bets(game: str, plan: PlanFactory | None = None, seat_bets: SeatBets | None = None) -> None:
    """A game's own stakes (its bet plan) and/or the bets each of its players brings."""
    if plan is not None:
        BET_PLANS[game] = plan
    if seat_bets is not None:
        SEAT_BETS[game] = seat_bets


__all__ = ["BET_PLANS", "DEALERS", "DEFAULT_BET_TYPES", "DEFAULT_GAME", "DEFAULT_STAKES", "BetPlan", "DEFAULT_STRATEGIES", "PLAYERS", "SEAT_BETS",
           "DealerFactory", "PlanFactory", "PlayerFactory", "SeatBets", "register_bets", "register_dealer",
           "register_players"]
