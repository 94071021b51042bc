"""The one pure function every consumer uses to turn (bet, result) into money.

Settlement systems hold the players' bets; the backend's :class:`RoundResult` says how
each bet type resolves. :func:`settle_bet` does the arithmetic with the table's minor
unit and rounding carried in the result, so every consumer computes the same amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from dealer.core.game_records import Outcome
from dealer.core.messages import RoundResult
from dealer.core.money import to_money, win_amount


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


def settle_bet(bet_type: str, stake: Decimal | str | int, result: RoundResult,
               player_id: str | None = None) -> Settlement:
    """Exact settlement of one bet of ``bet_type`` with ``stake`` against a round result.

    Games where players decide (Sevenluck) resolve per player: pass ``player_id``. A Play
    bet is settled like any other, with the stake the decision created
    (``result.decisions[player_id].play_stake``). A ``bonus_ratio`` (Ante Bonus) adds
    X times the stake whatever the outcome.
    """
    amount = to_money(stake)
    unit, rounding = result.money.minor_unit, result.money.rounding
    zero = Decimal(0).quantize(unit) if unit < 1 else Decimal(0)
    if result.refund_all:
        return Settlement("REFUND", amount, zero, amount)
    table = result.bets
    if player_id is not None and player_id in result.player_bets:
        table = result.player_bets[player_id]
    try:
        res = table[bet_type]
    except KeyError:
        who = f" for player {player_id}" if player_id is not None else ""
        raise SettlementError(f"result {result.idempotency_key} has no bet type {bet_type!r}{who}") from None
    if res.returned is not None:  # peer games: the pot arithmetic was done by the backend, exactly
        back = res.returned
        outcome = "WIN" if back > amount else "LOSE" if back < amount else "PUSH"
        return Settlement(outcome, amount, max(back - amount, zero), back)
    bonus = win_amount(amount, res.bonus_ratio, unit, rounding) if res.bonus_ratio else zero
    if res.outcome == Outcome.WIN:
        won = win_amount(amount, res.ratio, unit, rounding) + bonus
        return Settlement("WIN", amount, won, amount + won)
    if res.outcome == Outcome.PUSH:
        return Settlement("PUSH", amount, bonus, amount + bonus)
    return Settlement("LOSE", amount, bonus, bonus)
