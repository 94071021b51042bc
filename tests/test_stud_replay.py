"""A stud hand replays from its journal into the same state, effect for effect.

The service journals every accepted event (with its ``at``) before releasing effects and
rebuilds a table after a restart by feeding them through the machine again. For a peer
game the machine's state includes the betting engine, the turn counter and the timer's
deadline, so this checks that nothing in that state depends on anything but the events.
"""

from __future__ import annotations

import random
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import STANDARD_52
from dealer.core.events import (
    ActionTimeout,
    CardExposed,
    CloseBetting,
    ConfirmTimeout,
    DealerConfirm,
    OpenRound,
    PlaceBet,
    PlayerAction,
    ReadFailed,
    ScanRead,
    SupervisorExpose,
)
from dealer.games.stud import Stud
from dealer.core.messages import RoundResult
from dealer.core.round import Phase, TableRules
from dealer.core.table import Table


def new_table() -> Table:
    return Table(TableRules(table_id="T1", game=Stud.from_options({}), action_ms=10_000))


def play(seed: int, players: int) -> tuple[list, list, Table]:
    """Play one hand with random legal (and some illegal) actions; return every event fed,
    the journaled ones, and the table."""
    rng = random.Random(seed)
    t = new_table()
    fed, journaled = [], []

    def feed(ev):
        step = t.handle(ev)
        fed.append(ev)
        if step.journal:
            journaled.append(ev)
        return step

    at = 1_000
    feed(OpenRound(round_id="T1-000004", at=at, betting_closes_at=at + 100))
    for i in range(players):
        feed(PlaceBet(bet_id=f"b{i}", player_id=f"p{i}", bet_type="chips",
                      stake=rng.choice(["0.30", "2.00", "7.50", "40.00"]), seat=i + 1, at=at + i))
    feed(CloseBetting(by="timer", at=at + 100))
    deck = list(STANDARD_52)
    rng.shuffle(deck)
    r = t.current
    while r.phase in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
        at += 7
        if r.phase == Phase.ACTION:
            o = r.hand.betting.options()
            choice = rng.random()
            if choice < 0.15:
                feed(ActionTimeout(turn=r.turn, at=at))
            elif choice < 0.2:  # an out-of-turn or malformed action: refused, changes nothing
                feed(PlayerAction(player_id="p0", action="RAISE", amount="999.00", at=at))
            else:
                action = rng.choice(o.actions())
                amount = None
                if action in ("BET", "BRING_IN"):
                    amount = o.bet.min if rng.random() < 0.5 else o.bet.max
                elif action == "RAISE":
                    amount = o.raise_.min if rng.random() < 0.5 else o.raise_.max
                feed(PlayerAction(player_id=o.player_id, action=action, amount=amount, at=at))
        elif r.plan[r.next_index].name == "LAST_CARD":  # §3.5: the window to report an exposed 7th card
            sevenths = [p.name for p in r.plan if p.name.endswith(".7") and p.name in r.cards]
            if rng.random() < 0.3:  # reported: it plays once the supervisor names it (the wrong card: refused)
                flashed = rng.choice(sevenths)
                feed(CardExposed(position=flashed, at=at))
                if rng.random() < 0.7:
                    card = r.cards[flashed] if rng.random() < 0.8 else deck[-1]
                    feed(SupervisorExpose(supervisor="sup", seat=int(flashed[1:-2]), card=card, at=at))
            if rng.random() < 0.1:
                feed(CardExposed(position="P1.3", at=at))  # refused: not a 7th card
            if rng.random() < 0.5 and r.confirm_deadline is not None:
                feed(ConfirmTimeout(step="LAST_CARD", at=r.confirm_deadline))
            else:
                feed(DealerConfirm(step="LAST_CARD", at=at))
        elif r.plan[r.next_index].confirm:
            feed(DealerConfirm(step=r.plan[r.next_index].name, at=at))
        else:
            if rng.random() < 0.1:
                feed(ReadFailed(reader="R", reason="noread", at=at))
            feed(ScanRead(reader="R", code=deck.pop(), at=at))
    return fed, journaled, t


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), players=st.integers(2, 8))
def test_a_stud_hand_replays_from_its_journal_into_the_same_result(seed, players):
    fed, journaled, live = play(seed, players)
    assert live.current.phase == Phase.RESULT
    replayed = new_table()
    for ev in journaled:
        assert replayed.handle(ev).accepted
    a, b = live.current, replayed.current
    assert a.result == b.result
    assert (a.turn, a.action_deadline, a.next_index, a.cards) == (b.turn, b.action_deadline, b.next_index, b.cards)
    assert a.hand.exposed == b.hand.exposed
    # the live run also saw refused events (not journaled): the same result without them
    # means they changed nothing


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), players=st.integers(2, 8))
def test_every_stud_result_conserves_chips_and_settles_exactly(seed, players):
    from dealer.core.settlement import settle_bet

    _, _, t = play(seed, players)
    result: RoundResult = t.current.result
    brought = sum(Decimal(str(s)) for s in result.accepted_bets.stakes.values())
    stakes = {b.player_id: b.stake for b in t.current.bets.values()}
    back = sum(settle_bet("chips", stakes[p], result, p).returned for p in stakes)
    assert back + Decimal(result.details["rake"]) == brought
    assert Decimal(result.details["rake"]) <= Decimal("3.00")
