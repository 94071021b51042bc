"""Game registry: the name used in configuration and on the wire -> the game's class.

A game defined elsewhere (a plug-in, a test) joins with :func:`register_game`; its tools (the
``dealer hand`` report, demo players, an RTP report) register in :mod:`tools.games`."""

from __future__ import annotations

from dealer.core.game_contract import Game
from dealer.games.matgo import Matgo
from dealer.games.seotda import Seotda
from dealer.games.sevenluck import Sevenluck
from dealer.games.stud import Stud
from dealer.games.teen_patti import TeenPatti

GAMES: dict[str, type[Game]] = {}


def register_game(cls: type[Game]) -> type[Game]:
    """Make ``cls`` playable under ``cls.name`` (configuration, rules, the service). Usable as a
    class decorator. A name already taken by another class is refused: a game is never replaced
    behind the back of tables that play it."""
    if not (isinstance(cls, type) and issubclass(cls, Game)):
        raise ValueError(f"{cls!r} is not a Game")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__} has no game name (a class attribute name = \"...\")")
    known = GAMES.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"game {name!r} is already registered ({known.__module__}.{known.__qualname__})")
    GAMES[name] = cls
    return cls


for _cls in (TeenPatti, Sevenluck, Seotda, Matgo, Stud):
    register_game(_cls)


def game_class(name: str) -> type[Game]:
    try:
        return GAMES[name]
    except KeyError:
        raise ValueError(f"unknown game {name!r} (known: {', '.join(sorted(GAMES))})") from None
