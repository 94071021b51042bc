"""Which house player decides which request: one line per request type.

:func:`decide` is what runs in a worker process (:mod:`dealer.edge.house`): it is importable
by name, and the worker finds the player from the request it is given. A game whose module
registers its own request type (:func:`register`, at import) needs no line here: the worker
imports that module when it unpickles the request.
"""

from __future__ import annotations

from typing import Any

from dealer.games.matgo import MatgoRequest
from dealer.house.matgo import MatgoHousePlayer
from dealer.house.player import HouseMove, HousePlayer

_PLAYERS: dict[type, HousePlayer] = {
    MatgoRequest: MatgoHousePlayer(),
}


def register(request_type: type, player: HousePlayer) -> None:
    """``player`` decides every request of ``request_type`` (and of its subclasses)."""
    _PLAYERS[request_type] = player


def player_for(request: Any) -> HousePlayer:
    for cls in type(request).__mro__:
        player = _PLAYERS.get(cls)
        if player is not None:
            return player
    known = ", ".join(sorted(t.__qualname__ for t in _PLAYERS))
    raise LookupError(f"no house player decides a {type(request).__qualname__} (registered: {known})")


def decide(request: Any) -> HouseMove:
    """The move for ``request``, by the house player registered for its type."""
    return player_for(request).decide(request)
