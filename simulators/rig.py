"""One table's simulated people, per game: the dealer at the shoe and the remote players.

The demo (in one process), ``dealer simulate`` (against a running ``dealer run``) and the
soak wire the same parts; they take them from here:

* :func:`make_dealer`: the :class:`~simulators.station.VirtualDealer` that deals the game's
  deck (52 cards; Seotda's 20 with its reshuffled rematches; Matgo's 48 with its redeals).
* :func:`make_players`: the players who decide or act once the cards are out (Sevenluck's
  PLAY/FOLD, Seven-Card Stud's and Seotda's betting between the cards, Matgo's moves).
  Their bets (the chips or cover they bring) are placed by a
  :class:`~simulators.bettors.Bettor`, which also writes them into the bet book.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from dealer.core.cards import STANDARD_52
from drivers.bus import Bus
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import ActionSender, DealerFaults, ShoeLink, Shuffler, VirtualDealer

#: Makes one simulated player: (table id, player id, bus, strategy, rng, think, silent_after).
PlayerFactory = Callable[[str, str, Bus, str, random.Random, float, int], Any]
#: Makes a game's virtual dealer: (table id, shoe, link, **the common keyword arguments).
DealerFactory = Callable[..., VirtualDealer]


def _sevenluck(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
               silent_after: int) -> Any:
    from simulators.players import VirtualPlayer

    return VirtualPlayer(table_id, pid, bus, strategy, rng=rng, think=think)  # type: ignore[arg-type]


def _stud(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
          silent_after: int) -> Any:
    from simulators.stud_players import StudPlayer

    return StudPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]


def _seotda(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
            silent_after: int) -> Any:
    from simulators.seotda_players import SeotdaPlayer

    return SeotdaPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]


def _matgo(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
           silent_after: int) -> Any:
    from simulators.matgo_players import MatgoPlayer

    return MatgoPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]


def _seotda_dealer(table_id: str, shoe: VirtualShoe, link: ShoeLink, **kw: Any) -> VirtualDealer:
    from simulators.seotda_players import SeotdaDealer

    return SeotdaDealer(table_id, shoe, link, **kw)


def _matgo_dealer(table_id: str, shoe: VirtualShoe, link: ShoeLink, **kw: Any) -> VirtualDealer:
    from simulators.matgo_players import MatgoDealer

    return MatgoDealer(table_id, shoe, link, **kw)


#: Each game's players: game -> factory (games where players only bet have none).
PLAYERS: dict[str, PlayerFactory] = {"sevenluck": _sevenluck, "stud": _stud, "seotda": _seotda, "matgo": _matgo}
#: Strategies of the players ``dealer simulate`` seats, by game (seat N takes the Nth, cycling):
#: players who always answer, some by their cards, some at random.
DEFAULT_STRATEGIES: dict[str, tuple[str, ...]] = {
    "sevenluck": ("q64", "random"),
    "stud": ("calling", "random", "aggressive"),
    "seotda": ("calling", "hand", "random"),
    "matgo": ("random",),
}
#: Games whose dealer is not the plain one dealing the 52 cards in the order prompted.
DEALERS: dict[str, DealerFactory] = {"seotda": _seotda_dealer, "matgo": _matgo_dealer}
#: Games whose players do something after betting (the others only bet).
PLAYING_GAMES = PLAYERS.keys()


def register_players(game: str, factory: PlayerFactory, strategies: Sequence[str]) -> None:
    """A game's simulated players (and the strategies ``dealer simulate`` seats by default)."""
    PLAYERS[game] = factory
    DEFAULT_STRATEGIES[game] = tuple(strategies)


def register_dealer(game: str, factory: DealerFactory) -> None:
    """A game's own virtual dealer (default: :class:`VirtualDealer` with the 52 cards)."""
    DEALERS[game] = factory


def make_dealer(game: str, table_id: str, shoe: VirtualShoe, link: ShoeLink, *, rng: random.Random,
                faults: FaultPlan | None = None, dealer_faults: DealerFaults | None = None,
                deal_interval: float = 0.05, heartbeat_interval: float = 0.5, patience: float = 2.0,
                scripted_rounds: Sequence[Sequence[str]] = (), actions: ActionSender | None = None,
                shuffler: Shuffler | None = None) -> VirtualDealer:
    """The virtual dealer for ``game``, passing cards over ``link`` (a PTY or a scanner gateway);
    ``shuffler`` orders each round's new deck (default: a random shuffle of the game's deck)."""
    kw: dict[str, Any] = dict(rng=rng, faults=faults, dealer_faults=dealer_faults, deal_interval=deal_interval,
                              heartbeat_interval=heartbeat_interval, patience=patience,
                              scripted_rounds=scripted_rounds, actions=actions, shuffler=shuffler)
    factory = DEALERS.get(game)
    if factory is not None:
        return factory(table_id, shoe, link, **kw)
    return VirtualDealer(table_id, shoe, link, deck=STANDARD_52, **kw)


def make_players(game: str, table_id: str, bus: Bus, players: int, *, rng: random.Random,
                 strategies: Sequence[str] | None = None, silent_after: int = 2, think: float = 0.0) -> list[Any]:
    """``player1`` .. ``playerN`` of a ``game`` table (player N in seat N), each with the Nth of
    ``strategies`` (cycling; default :data:`DEFAULT_STRATEGIES`) and a random generator of its
    own drawn from ``rng``. Games where players only bet (Teen Patti) have none. The players
    subscribe on ``bus`` as they are made."""
    chosen = list(strategies or DEFAULT_STRATEGIES.get(game, ()))
    factory = PLAYERS.get(game)
    if factory is None or not chosen:
        return []
    out: list[Any] = []
    for n in range(1, players + 1):
        pid, strategy, prng = f"player{n}", chosen[(n - 1) % len(chosen)], random.Random(rng.random())
        out.append(factory(table_id, pid, bus, strategy, prng, think, silent_after))
    return out


__all__ = ["DEALERS", "DEFAULT_STRATEGIES", "PLAYERS", "PLAYING_GAMES", "make_dealer", "make_players",
           "register_dealer", "register_players"]
