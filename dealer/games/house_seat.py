"""The house-seat capability: a hand in which the house itself plays a seat (Matgo's AI).

A hand that has house seats says which players they are and, when one of them is to move,
describes the decision as a plain, picklable request. The service never looks inside the hand
or the request: it hands the request to the house player registered for its type
(:mod:`dealer.house.registry`), in another process, and sends the answer back as an ordinary,
journaled player action.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class HouseSeat(Protocol):
    """A hand with seats the house plays."""

    def house_players(self) -> frozenset[str]:
        """The player ids the house plays in this hand: their private messages go to the
        house player, never to a topic."""
        ...

    def house_request(self, player: str, turn: int, seed: int) -> object:
        """What ``player`` (one of :meth:`house_players`) needs to decide ``turn``: a picklable
        value holding its own copy of the game state, so the decision can run anywhere while
        the table goes on. ``seed`` (from the round's secret draw) makes the decision
        reproducible."""
        ...


def has_house_seats(game: object) -> bool:
    """Whether ``game``'s hands have house seats: a game says so with the class attribute
    ``house_seats = True``, so that the edge can have its house players ready (a worker process
    started) before the first hand asks them for a move."""
    return bool(getattr(game, "house_seats", False))
