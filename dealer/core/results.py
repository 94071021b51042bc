"""How a round's result is assembled: the one place a :class:`RoundResult` is built.

A completed round resolves through its game (or its peer hand) into a
:class:`~dealer.core.game_records.GameOutcome`; :func:`completed` turns that into the result
settlement receives, cut to what the table has shown (:mod:`dealer.core.visibility`), and
the round events and prompt that announce it. A cancelled or voided round refunds every bet
(:func:`refunded`). Pure: no IO, no clock.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal, TypedDict

from dealer.core import visibility
from dealer.core.game_records import BetResolution, BetView, GameOutcome
from dealer.core.messages import BetsSummary, BetTypeResult, HandResult, MoneyRules, RoundResult
from dealer.core.round_state import Effect, RoundState


def bet_views(rnd: RoundState) -> list[BetView]:
    """The accepted bets as the games see them."""
    return [BetView(b.bet_id, b.player_id, b.bet_type, b.stake, b.seat) for b in rnd.bets.values()]


def outcome(rnd: RoundState) -> GameOutcome:
    """The completed deal resolved: by the peer hand, or by the game from the dealt cards, the
    accepted bets and the decisions."""
    if rnd.hand is not None:
        return rnd.hand.outcome()
    dealt = {p.name: rnd.cards[p.name] for p in rnd.plan if not p.burn and p.name in rnd.cards}
    return rnd.rules.game.resolve(dealt, bet_views(rnd), {p: d.action for p, d in rnd.decisions.items()})


def completed(rnd: RoundState, at: int) -> list[Effect]:
    """The round is complete (its phase is already RESULT): its result, what the table reveals
    now, the public ``round_result`` and the station's DONE. Folded hands, an uncontested
    winner and burns stay in the journal only."""
    resolved = outcome(rnd)
    revealed = visibility.revealed(rnd)
    cards, hands, details = visibility.shown(rnd, resolved.hands, resolved.details)
    rnd.result = RoundResult(
        **_header(rnd, at), outcome="COMPLETED", refund_all=False, cards=cards,
        hands={k: HandResult(cards=list(h.cards), category=h.category) for k, h in hands.items()},
        winner=resolved.winner,
        bets={k: bet_result(b) for k, b in resolved.bets.items()},
        player_bets={p: {k: bet_result(b) for k, b in res.items()} for p, res in resolved.player_bets.items()},
        decisions=dict(rnd.decisions), details=details,
    )
    reveal: list[Effect] = [rnd.event("cards_revealed", at, cards=revealed)] if revealed else []
    announce = resolved.details.get("announce") if rnd.hand is not None else None
    return reveal + [
        rnd.event("round_result", at, winner=resolved.winner, hands={k: h.category for k, h in resolved.hands.items()}),
        rnd.prompt("DONE", at, message=f"round complete: winner {resolved.winner}", announce=announce),
        rnd.result,
    ]


#: How a round that ends without a deal is written: its bets are refunded.
RefundOutcome = Literal["CANCELLED", "VOIDED"]


def refunded(rnd: RoundState, outcome: RefundOutcome, reason: str, at: int) -> list[Effect]:
    """The round is cancelled or voided (``outcome``: CANCELLED or VOIDED): every bet is
    refunded; the result carries the public cards only (the hole cards dealt so far stay in
    the journal)."""
    rnd.result = RoundResult(
        **_header(rnd, at), outcome=outcome, reason=reason, refund_all=True,
        cards=visibility.public_cards(rnd),
    )
    return [
        rnd.event(f"round_{outcome.lower()}", at, reason=reason),
        rnd.prompt("DONE", at, reason=reason, message=f"round {outcome.lower()}: every bet is refunded"),
        rnd.result,
    ]


def bets_summary(rnd: RoundState) -> BetsSummary:
    stakes: dict[str, Decimal] = {}
    for bet in rnd.bets.values():
        stakes[bet.bet_type] = stakes.get(bet.bet_type, Decimal(0)) + bet.stake
    return BetsSummary(count=len(rnd.bets), stakes=stakes, bet_ids=list(rnd.bets))


def bet_result(b: BetResolution) -> BetTypeResult:
    return BetTypeResult(outcome=b.outcome, ratio=b.ratio, category=b.category, bonus_ratio=b.bonus_ratio,
                         returned=b.returned)


class _Header(TypedDict):
    """The fields of :class:`RoundResult` that :func:`_header` fills."""

    idempotency_key: str
    table_id: str
    round_id: str
    game: str
    accepted_bets: BetsSummary
    money: MoneyRules
    opened_at: int
    closed_at: int | None
    finished_at: int
    rules_hash: str
    software_version: str
    dealers: list[str]


def _header(rnd: RoundState, at: int) -> _Header:
    """What every result of the round carries: who, when, under which rules."""
    r = rnd.rules
    return _Header(
        idempotency_key=f"{rnd.table_id}:{rnd.round_id}", table_id=rnd.table_id, round_id=rnd.round_id,
        game=r.game.name, accepted_bets=bets_summary(rnd), money=r.money,
        opened_at=rnd.opened_at, closed_at=rnd.closed_at, finished_at=at,
        rules_hash=r.rules_hash, software_version=r.software_version, dealers=list(rnd.dealers),
    )
