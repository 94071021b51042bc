"""Test harness: a stud hand's checks shared by the stud tests: chips conserved by a result, and
the three-player deal (``DEAL_A``) whose pots split between a main and a side pot."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dealer.core.messages import RoundResult
from dealer.core.settlement import settle_bet


def conserved(result: dict[str, Any], stakes: dict[str, Decimal]) -> None:
    """Chips conservation, settled as any consumer would (:func:`settle_bet` with the chips
    each player brought): what goes back plus the rake is exactly what was brought, and each
    player gets back what they did not put in plus their shares of the pots."""
    res = RoundResult.model_validate(result)
    assert sum(stakes.values(), Decimal(0)) == res.accepted_bets.stakes.get("chips", Decimal(0))
    back = {p: settle_bet("chips", stake, res, p).returned for p, stake in stakes.items()}
    if res.refund_all:
        assert back == stakes and res.player_bets == {}
        return
    assert set(res.player_bets) == set(stakes)
    rake = Decimal(res.details["rake"])
    assert sum(back.values(), Decimal(0)) + rake == sum(stakes.values(), Decimal(0)), (back, rake, stakes)
    pots = res.details["pots"]
    assert sum((Decimal(p["amount"]) for p in pots), Decimal(0)) + rake == Decimal(res.details["total_pot"])
    won: dict[str, Decimal] = {}
    for pot in pots:
        assert sum((Decimal(a) for a in pot["shares"].values()), Decimal(0)) == Decimal(pot["amount"])
        for w, a in pot["shares"].items():
            won[w] = won.get(w, Decimal(0)) + Decimal(a)
    for p, stake in stakes.items():
        assert back[p] == stake - Decimal(res.details["contributions"][p]) + won.get(p, Decimal(0)), p
        assert back[p] == res.player_bets[p]["chips"].returned


# Seats 1, 2 and 4. Alice: A-A (down) K Q 7 3 | K (down) = aces and kings; Bob: 4 8 (down)
# 9 9 J 6 | 9 = three nines; Carol (2.00 chips, all-in on 4th): 5 6 (down) 2 5 T 5 | 5 = four
# fives. Carol wins the main pot, Bob the side pot.
DEAL_A = [
    ("P1.1", "AS"), ("P2.1", "4H"), ("P4.1", "5H"), ("P1.2", "AD"), ("P2.2", "8C"), ("P4.2", "6H"),
    ("P1.3", "KS"), ("P2.3", "9D"), ("P4.3", "2C"),
    ("BURN1", "2D"), ("P1.4", "QH"), ("P2.4", "9C"), ("P4.4", "5S"),
    ("BURN2", "3D"), ("P1.5", "7D"), ("P2.5", "JH"), ("P4.5", "TS"),
    ("BURN3", "4D"), ("P1.6", "3S"), ("P2.6", "6C"), ("P4.6", "5D"),
    ("BURN4", "8D"), ("P1.7", "KD"), ("P2.7", "9S"), ("P4.7", "5C"),
]
