"""Matgo's house options and the deal plan they choose (``matgo.md`` §2.2, §4.2, §7.4, §7.5,
§10): :class:`MatgoRules`, the 28 dealt positions in dealing order and the 20 stock positions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from dealer.games.base import GameOptions
from dealer.games.matgo_moves import SEATS, Seat

__all__ = ["MatgoRules", "STOCK_POSITIONS", "deal_positions", "split_deal"]


def _exact_int(value: Any) -> Any:
    """A multiplier is an int: refuse ``True`` and ``2.0``, which would compare equal to 1 and 2."""
    if type(value) is not int:
        raise ValueError(f"must be the integer 1 or 2, got {value!r}")
    return value


class MatgoRules(GameOptions):
    """The house options of ``matgo.md``, declared once: every default is the rulebook default.
    The table's options (``dealer.games.matgo.MatgoOptions``) extend this model with money."""

    deal_pattern: Literal["5_5_4", "ROUND_ROBIN"] = "5_5_4"
    ppuk_capture_steal: Literal["ANY_PPUK_2", "OWN_2_OTHER_1"] = "ANY_PPUK_2"
    immediate_win_multipliers: Literal["NONE", "APPLY"] = "NONE"
    nagari_next_multiplier: Annotated[Literal[1, 2], BeforeValidator(_exact_int)] = 1
    sseul_rule: Literal["LAYOUT_CLEARED", "TWO_MONTHS_CAPTURED"] = "LAYOUT_CLEARED"
    last_turn: Literal["DEAL_FINAL", "EACH_PLAYERS_FINAL"] = "DEAL_FINAL"

    @property
    def rules(self) -> MatgoRules:
        """The engine's rules alone (for a subclass such as the table options: without the money)."""
        if type(self) is MatgoRules:
            return self
        return MatgoRules(**{name: getattr(self, name) for name in MatgoRules.model_fields})


STOCK_POSITIONS: tuple[str, ...] = tuple(f"S{n}" for n in range(1, 21))


def deal_positions(rules: MatgoRules = MatgoRules()) -> list[tuple[str, str]]:
    """The deal plan of §2.2: ``(position, face)`` for the 28 dealt cards in dealing order.

    Hands are ``F.1``..``F.10`` / ``O.1``..``O.10`` (``DOWN``), the layout ``L1``..``L8``
    (``UP``). The stock positions :data:`STOCK_POSITIONS` (``S1``..``S20``) are not part of the
    deal: each is registered face up when the dealer turns it over (a :class:`Flip`).
    """
    if rules.deal_pattern == "5_5_4":
        plan = [(f"F.{i}", "DOWN") for i in range(1, 6)]
        plan += [(f"O.{i}", "DOWN") for i in range(1, 6)]
        plan += [(f"L{i}", "UP") for i in range(1, 5)]
        plan += [(f"F.{i}", "DOWN") for i in range(6, 11)]
        plan += [(f"O.{i}", "DOWN") for i in range(6, 11)]
        plan += [(f"L{i}", "UP") for i in range(5, 9)]
        return plan
    plan = []
    for i in range(1, 11):
        plan += [(f"F.{i}", "DOWN"), (f"O.{i}", "DOWN")]
    plan += [(f"L{i}", "UP") for i in range(1, 9)]
    return plan


def split_deal(cards: Mapping[str, str]) -> tuple[dict[Seat, list[str]], list[str]]:
    """``{position: code}`` of the 28 dealt positions -> ``(hands, layout)`` for :meth:`MatgoGame.start`."""
    hands: dict[Seat, list[str]] = {"F": [], "O": []}
    try:
        for seat in SEATS:
            hands[seat] = [cards[f"{seat}.{i}"] for i in range(1, 11)]
        layout = [cards[f"L{i}"] for i in range(1, 9)]
    except KeyError as exc:
        raise ValueError(f"deal position {exc.args[0]} is missing") from None
    return hands, layout

