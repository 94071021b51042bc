"""Exact money: stakes and payouts as :class:`~decimal.Decimal`, never floats.

``decks.md`` §4: "X:1" pays X times the stake *and* returns the stake; a
payout that is not a whole number of the table's minor unit is rounded
(HOUSE OPTION ``ROUNDING``: ``DOWN`` by default, or ``HALF_UP``).
"""

from __future__ import annotations

import re
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, InvalidOperation
from enum import StrEnum


class Rounding(StrEnum):
    DOWN = "DOWN"
    HALF_UP = "HALF_UP"


_MODES = {Rounding.DOWN: ROUND_DOWN, Rounding.HALF_UP: ROUND_HALF_UP}


class MoneyError(ValueError):
    """An amount that is not exact money in the table's units."""


#: Bounds that keep every money computation exact within the decimal context (28 digits):
#: no table takes a stake of a thousand trillion, and no currency has a 1e-9 minor unit.
MAX_AMOUNT = Decimal("1e15")
MAX_DECIMALS = 8
_CANONICAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,8})?")


def to_money(value: str | int | Decimal) -> Decimal:
    """Parse an amount given as a string, int or Decimal. Floats are refused: they are not exact."""
    if isinstance(value, bool) or isinstance(value, float):
        raise MoneyError(f"amount {value!r} must be a decimal string or integer, never a float")
    if isinstance(value, str) and not _CANONICAL.fullmatch(value):
        # Money on the wire is canonical: no exponents, signs, separators or non-ASCII digits.
        raise MoneyError(f"amount {value[:40]!r} must be a plain decimal such as \"10.50\"")
    try:
        d = Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise MoneyError(f"amount {str(value)[:40]!r} is not a number") from None
    if not d.is_finite():
        raise MoneyError(f"amount {str(value)[:40]!r} is not finite")
    if d.copy_abs() >= MAX_AMOUNT:  # copy_abs: no context, so no Overflow on 1E+999999999
        raise MoneyError(f"amount {str(value)[:40]!r} is too large (limit {MAX_AMOUNT:,.0f})")
    exponent = d.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_DECIMALS and d != d.quantize(Decimal(1).scaleb(-MAX_DECIMALS)):
        raise MoneyError(f"amount {str(value)[:40]!r} has more than {MAX_DECIMALS} decimal places")
    return d


def check_stake(stake: Decimal, minor_unit: Decimal) -> None:
    """A stake must be positive and a whole number of minor units."""
    if stake <= 0:
        raise MoneyError(f"stake {stake} must be positive")
    try:
        whole = stake % minor_unit == 0
    except InvalidOperation:  # beyond the decimal context: certainly not a sane stake
        raise MoneyError(f"stake {stake} cannot be expressed in minor units of {minor_unit}") from None
    if not whole:
        raise MoneyError(f"stake {stake} is not a whole number of the minor unit {minor_unit}")


def quantize(amount: Decimal, minor_unit: Decimal, rounding: Rounding = Rounding.DOWN) -> Decimal:
    """Round ``amount`` to a whole number of ``minor_unit`` with the table's rounding mode."""
    units = (amount / minor_unit).to_integral_value(rounding=_MODES[Rounding(rounding)])
    return (units * minor_unit).quantize(minor_unit) if minor_unit < 1 else units * minor_unit


def win_amount(stake: Decimal, ratio: Decimal, minor_unit: Decimal, rounding: Rounding = Rounding.DOWN) -> Decimal:
    """What a winning bet wins at ``ratio``:1 (the stake comes back on top of this)."""
    return quantize(stake * ratio, minor_unit, rounding)
