"""What a house player is: a pure function of a decision request to a move.

``decide`` reads nothing but the request (no clock unless the request's budget says so, no
global state) and is deterministic for the request's seed, so the same decision can be made in
a thread, in a worker process or in a test, and a move is reproducible from what was asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol


@dataclass(frozen=True)
class HouseMove:
    """A house player's answer, as the fields of an ordinary ``player_action``: the action,
    and the card (Matgo's PLAY or CHOOSE) or amount (a betting game's total) it names."""

    action: str
    card: str | None = None
    amount: Decimal | None = None


class HousePlayer(Protocol):
    """Decides one kind of request (:mod:`dealer.house.registry` maps request types to players)."""

    def decide(self, request: Any) -> HouseMove: ...
