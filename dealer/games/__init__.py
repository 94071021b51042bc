"""Game registry: the name used in configuration and on the wire -> the game's class."""

from __future__ import annotations

from dealer.games.base import Game
from dealer.games.matgo import Matgo
from dealer.games.seotda import Seotda
from dealer.games.sevenluck import Sevenluck
from dealer.games.stud import Stud
from dealer.games.teen_patti import TeenPatti

GAMES: dict[str, type[Game]] = {
    TeenPatti.name: TeenPatti,
    Sevenluck.name: Sevenluck,
    Seotda.name: Seotda,
    Matgo.name: Matgo,
    Stud.name: Stud,
}


def game_class(name: str) -> type[Game]:
    try:
        return GAMES[name]
    except KeyError:
        raise ValueError(f"unknown game {name!r} (known: {', '.join(sorted(GAMES))})") from None
