"""The one pure function every consumer uses to turn (bet, result) into money.

Settlement systems hold the players' bets; the backend's :class:`RoundResult` says how
each bet type resolves. :func:`settle_bet` does the arithmetic with the table's minor
unit and rounding carried in the result, so every consumer computes the same amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from dealer.games.base import Outcome
from dealer.messages import RoundResult
from dealer.money import to_money, win_amount


class SettlementError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Settlement:
    """``returned`` is what goes back to the player (stake included); ``net`` is the player's gain."""

    outcome: str  # WIN, LOSE, PUSH or REFUND
    stake: Decimal
    won: Decimal
    returned: Decimal

    @property
    def net(self) -> Decimal:
        return self.returned - self.stake


def settle_bet(bet_type: str, stake: Decimal | str | int, result: RoundResult) -> Settlement:
    """Exact settlement of one bet of ``bet_type`` with ``stake`` against a round result."""
    amount = to_money(stake)
    zero = Decimal(0).quantize(result.money.minor_unit) if result.money.minor_unit < 1 else Decimal(0)
    if result.refund_all:
        return Settlement("REFUND", amount, zero, amount)
    try:
        res = result.bets[bet_type]
    except KeyError:
        raise SettlementError(f"result {result.idempotency_key} has no bet type {bet_type!r}") from None
    if res.outcome == Outcome.WIN:
        won = win_amount(amount, res.ratio, result.money.minor_unit, result.money.rounding)
        return Settlement("WIN", amount, won, amount + won)
    if res.outcome == Outcome.PUSH:
        return Settlement("PUSH", amount, zero, amount)
    return Settlement("LOSE", amount, zero, zero)
