"""Pots, side pots, rake and splits for peer-to-peer games: pure arithmetic on exact money.

The betting engine (:mod:`dealer.core.betting`) records what every player put in over the
whole hand. When the hand ends, :func:`build_pots` turns those contributions into a main
pot and side pots (``seven-card-stud.md`` §6.1, ``seotda.md`` §6.3), :func:`take_rake`
takes the house's share from them (§6.2), and :func:`split` divides a pot among tied
winners, giving indivisible units out one at a time in the order the game decides
(stud: the highest card by suit, §6.3). Nothing here knows a game's hand ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Any, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


class PotError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Pot:
    """One pot: ``amount`` can be won only by ``eligible`` (players still in, seat order)."""

    amount: Decimal
    eligible: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"amount": str(self.amount), "eligible": list(self.eligible)}


def uncalled(round_bets: Mapping[str, Decimal]) -> tuple[str, Decimal] | None:
    """The part of the largest contribution of a betting round that nobody matched.

    ``seven-card-stud.md`` §6.2: the excess of the largest contribution over the
    second-largest (folded players' chips included) goes back to its owner.
    """
    live = [(amount, player) for player, amount in round_bets.items() if amount > 0]
    if not live:
        return None
    live.sort(key=lambda x: x[0], reverse=True)
    top_amount, top_player = live[0]
    second = live[1][0] if len(live) > 1 else Decimal(0)
    excess = top_amount - second
    return (top_player, excess) if excess > 0 else None


def build_pots(contributions: Mapping[str, Decimal], live: Sequence[str]) -> list[Pot]:
    """Main pot first, then side pots in the order they were formed.

    ``contributions`` is what each player put in over the hand (uncalled chips already
    returned); ``live`` the players who have not folded, in seat order. Each distinct
    contribution level of a live player closes a pot holding, from every player, what
    they put in between the previous level and this one; the live players who reached
    the level are eligible. Chips a folded player put in above the highest live level go
    to the last pot. Adjacent pots with the same eligible players are merged.
    """
    if not live:
        raise PotError("a hand cannot end with every player folded")
    unknown = [p for p in live if p not in contributions]
    if unknown:
        raise PotError(f"live player(s) {unknown} have no contribution")
    if any(a < 0 for a in contributions.values()):
        raise PotError("a contribution cannot be negative")
    levels = sorted({contributions[p] for p in live})
    pots: list[Pot] = []
    below = Decimal(0)
    for i, level in enumerate(levels):
        top = i == len(levels) - 1
        amount = sum((min(c, level) - min(c, below) if not top else max(Decimal(0), c - below)
                      for c in contributions.values()), Decimal(0))
        eligible = tuple(p for p in live if contributions[p] >= level)
        if pots and pots[-1].eligible == eligible:
            pots[-1] = Pot(pots[-1].amount + amount, eligible)
        elif amount > 0 or not pots:
            pots.append(Pot(amount, eligible))
        below = level
    return pots


def rake_amount(total: Decimal, rate: Decimal, cap: Decimal, unit: Decimal) -> Decimal:
    """``min(rate × total, cap)`` rounded down to the table's money unit (§6.2)."""
    raw = min(total * rate, cap)
    return (raw / unit).to_integral_value(rounding=ROUND_DOWN) * unit


def take_rake(pots: Sequence[Pot], rake: Decimal) -> list[Pot]:
    """Take ``rake`` from the main pot, then from the side pots in the order they were formed."""
    if rake < 0 or rake > sum((p.amount for p in pots), Decimal(0)):
        raise PotError(f"rake {rake} is not within the pots")
    out: list[Pot] = []
    left = rake
    for pot in pots:
        take = min(left, pot.amount)
        left -= take
        out.append(Pot(pot.amount - take, pot.eligible))
    return out


def split(amount: Decimal, winners: Sequence[K], unit: Decimal) -> dict[K, Decimal]:
    """Divide ``amount`` equally; indivisible units go one at a time to ``winners`` in the
    given order (the game's odd-chip order), wrapping around."""
    if not winners:
        raise PotError("a pot needs at least one winner")
    units = amount / unit
    if units != units.to_integral_value():
        raise PotError(f"pot {amount} is not a whole number of units {unit}")
    n = int(units)
    share, odd = divmod(n, len(winners))
    return {w: (share + (1 if i < odd else 0)) * unit for i, w in enumerate(winners)}


def award(pots: Sequence[Pot], winners_of: Callable[[Sequence[str]], Sequence[str]],
          unit: Decimal) -> tuple[dict[str, Decimal], list[dict[str, Any]]]:
    """Award every pot to the best of its eligible players.

    ``winners_of(eligible)`` returns the winners of a pot *in odd-chip order*. Returns
    what each player wins in total and, per pot, a JSON-safe record for the result.
    """
    won: dict[str, Decimal] = {}
    records: list[dict[str, Any]] = []
    for i, pot in enumerate(pots):
        winners = list(winners_of(pot.eligible))
        if not winners or any(w not in pot.eligible for w in winners):
            raise PotError(f"pot {i} winners {winners} are not among its eligible players {list(pot.eligible)}")
        shares = split(pot.amount, winners, unit)
        for w, amount in shares.items():
            won[w] = won.get(w, Decimal(0)) + amount
        records.append({"pot": i, "amount": str(pot.amount), "eligible": list(pot.eligible),
                        "winners": winners, "shares": {w: str(a) for w, a in shares.items()}})
    return won, records
