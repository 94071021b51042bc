"""One table's simulated people: the dealer at the shoe and the remote players.

The demo (in one process), ``dealer simulate`` (against a running ``dealer run``) and the
soak wire the same parts; they take them from here. Each game brings its own (its dealer,
its players, their strategies) through :mod:`simulators.game_players`; nothing here names one.

* :func:`make_dealer`: the :class:`~simulators.station.VirtualDealer` that deals the game's
  deck (its own dealer when the game registered one, e.g. with a smaller deck reshuffled for
  a rematch or a redeal; else the plain one with the 52 cards).
* :func:`make_players`: the players who decide or act once the cards are out (a decision, the
  betting between the cards, a game's moves). Their bets (what they bring to a round) are
  placed by a :class:`~simulators.bettors.Bettor`, which also writes them into the bet book.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from dealer.core.cards import STANDARD_52
from drivers.bus import Bus
from simulators.game_players import DEALERS, DEFAULT_STRATEGIES, PLAYERS
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import ActionSender, DealerFaults, ShoeLink, Shuffler, VirtualDealer


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
    own drawn from ``rng``. Games where players only bet have none. The players
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


__all__ = ["make_dealer", "make_players"]
