"""The Matgo house AI as a house player: :class:`~dealer.house.matgo_ai.SearchPlayer` on the
request's own engine clone, seeded from the round's secret draw, its move as a player action."""

from __future__ import annotations

import random

from dealer.games.matgo import MatgoRequest, move_action
from dealer.house.matgo_ai import SearchPlayer
from dealer.house.player import HouseMove


class MatgoHousePlayer:
    """Searches for ``request.budget_ms`` (or exactly ``request.playouts`` sampled deals, which
    makes the move a function of the request alone)."""

    def decide(self, request: MatgoRequest) -> HouseMove:
        player = SearchPlayer(budget_ms=request.budget_ms, playouts=request.playouts)
        action, card = move_action(player.choose(request.engine, request.seat, random.Random(request.seed)))
        return HouseMove(action, card)
