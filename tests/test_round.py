"""The sans-IO round machine and table: plain calls, no IO, no clock."""

from __future__ import annotations

import pytest
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import STANDARD_52
from dealer.core.events import (
    CloseBetting,
    LinkDown,
    LinkUp,
    OpenRound,
    PlaceBet,
    ReadFailed,
    ResultDelivered,
    ScanRead,
    SupervisorVoid,
)
from dealer.games.teen_patti import TeenPatti
from dealer.core.messages import RoundResult, StationPrompt
from dealer.core.round import BetLimit, Phase, Rejection, TableRules
from dealer.core.settlement import settle_bet
from dealer.core.table import Table

DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]  # A: trail of aces, B: three kings


def rules(**kw) -> TableRules:
    return TableRules(table_id="T1", game=TeenPatti(), **kw)


def open_table(**kw) -> Table:
    t = Table(rules(**kw))
    assert t.handle(OpenRound(round_id="T1-000001", at=1)).accepted
    return t


def prompts(step, kind=None):
    return [e for e in step.effects if isinstance(e, StationPrompt) and (kind is None or e.kind == kind)]


def result_of(step) -> RoundResult | None:
    return next((e for e in step.effects if isinstance(e, RoundResult)), None)


def deal_all(t: Table, cards=DEAL):
    step = None
    for c in cards:
        step = t.handle(ScanRead(reader="R1", code=c, at=10))
        assert step.accepted and step.journal
    return step


def test_full_round_resolves_and_settles():
    t = open_table()
    assert t.handle(PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="15", at=2)).accepted
    assert t.handle(PlaceBet(bet_id="b2", player_id="p1", bet_type="pair_plus_b", stake="10", at=2)).accepted
    step = t.handle(CloseBetting(at=3))
    assert t.current.phase == Phase.BETTING_CLOSED
    assert prompts(step, "NEXT")[0].position == "A1"
    positions = []
    for c in DEAL:
        step = t.handle(ScanRead(reader="R1", code=c, at=4))
        positions += [p.position for p in prompts(step, "NEXT")]
    assert positions == ["B1", "A2", "B2", "A3", "B3"]
    res = result_of(step)
    assert res is not None and res.outcome == "COMPLETED" and res.winner == "A"
    assert res.idempotency_key == "T1:T1-000001"
    assert res.cards == dict(zip(["A1", "B1", "A2", "B2", "A3", "B3"], DEAL))
    assert res.accepted_bets.count == 2 and res.accepted_bets.stakes["player_a"] == Decimal(15)
    assert t.current.phase == Phase.RESULT and "T1-000001" in t.undelivered
    # settlement arithmetic: 15 at 0.95:1 rounds down to 14 (minor unit 0.01 -> 14.25)
    assert settle_bet("player_a", "15", res).returned == Decimal("29.25")
    assert settle_bet("pair_plus_b", "10", res).won == Decimal(400)  # three kings 40:1
    assert settle_bet("tie", "10", res).returned == 0
    step = t.handle(ResultDelivered(round_id="T1-000001", outbox_id=1, at=5))
    assert step.accepted and t.current.phase == Phase.SETTLED and not t.undelivered
    assert not t.handle(ResultDelivered(round_id="T1-000001", outbox_id=1, at=5)).accepted


def test_rounding_down_to_whole_units():
    t = open_table(minor_unit=Decimal(1))
    t.handle(CloseBetting(at=3))
    res = result_of(deal_all(t))
    assert settle_bet("player_a", 15, res).won == Decimal(14)


def test_card_while_betting_open_is_rejected_and_changes_nothing():
    t = open_table()
    step = t.handle(ScanRead(reader="R1", code="AS", at=2))
    assert not step.accepted and not step.journal
    assert "betting is open" in step.rejection.reason
    assert t.current.phase == Phase.BETTING_OPEN and t.current.cards == {}


def test_bet_after_close_and_bad_bets_are_rejected():
    t = open_table(limits={"tie": BetLimit(Decimal(1), Decimal(100))})
    for bet, why in [
        (PlaceBet(bet_id="x", player_id="p", bet_type="banker", stake="1"), "unknown bet type"),
        (PlaceBet(bet_id="x", player_id="p", bet_type="tie", stake="1000"), "outside the table limits"),
        (PlaceBet(bet_id="x", player_id="p", bet_type="tie", stake="1.001"), "minor unit"),
        (PlaceBet(bet_id="x", player_id="p", bet_type="tie", stake="-1"), "positive"),
    ]:
        step = t.handle(bet)
        assert not step.accepted and why in step.rejection.reason
    assert t.handle(PlaceBet(bet_id="x", player_id="p", bet_type="tie", stake="5")).accepted
    assert "duplicate bet id" in t.handle(PlaceBet(bet_id="x", player_id="p", bet_type="tie", stake="5")).rejection.reason
    t.handle(CloseBetting(at=3))
    step = t.handle(PlaceBet(bet_id="y", player_id="p", bet_type="tie", stake="5"))
    assert not step.accepted and "betting is closed" in step.rejection.reason
    assert len(t.current.bets) == 1


def test_noread_prompts_rescan_and_alerts_after_three_identical():
    t = open_table()
    t.handle(CloseBetting(at=3))
    t.handle(ScanRead(reader="R1", code="AS", at=4))
    kinds = []
    for _ in range(3):
        step = t.handle(ReadFailed(reader="R1", reason="noread", at=5))
        assert step.accepted and step.journal
        kinds.append([(p.kind, p.position, p.count) for p in prompts(step)])
    assert kinds[0] == [("RESCAN", "B1", 1)]
    assert kinds[2] == [("RESCAN", "B1", 3), ("ALERT", "B1", 3)]
    assert t.current.expected_position == "B1"
    # a different rejection restarts the count; a registration resets it
    step = t.handle(ReadFailed(reader="R1", reason="misread", at=5))
    assert prompts(step)[0].count == 1
    t.handle(ScanRead(reader="R1", code="KS", at=6))
    assert t.current.reject_count == 0 and t.current.expected_position == "A2"


def test_duplicate_and_foreign_cards_never_advance():
    t = open_table()
    t.handle(CloseBetting(at=3))
    t.handle(ScanRead(reader="R1", code="AS", at=4))
    for code, reason in [("AS", "duplicate_card"), ("01G", "foreign_card"), ("XX", "foreign_card")]:
        step = t.handle(ScanRead(reader="R1", code=code, at=5))
        assert prompts(step, "RESCAN")[0].reason == reason
        assert t.current.expected_position == "B1" and list(t.current.cards) == ["A1"]


def test_link_down_while_betting_open_cancels_with_refund_all():
    t = open_table()
    t.handle(PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="5"))
    step = t.handle(LinkDown(link="broker", reason="connection lost", at=7))
    res = result_of(step)
    assert step.journal and res.outcome == "CANCELLED" and res.refund_all and res.bets == {}
    assert settle_bet("tie", "5", res).returned == Decimal(5)
    assert t.current.phase == Phase.CANCELLED
    # no new round while the link is down
    assert "link(s) down" in t.handle(OpenRound(round_id="T1-000002")).rejection.reason
    t.handle(LinkUp(link="broker"))
    assert t.handle(OpenRound(round_id="T1-000002")).accepted


def test_link_down_after_close_lets_the_round_finish():
    t = open_table()
    t.handle(CloseBetting(at=3))
    step = t.handle(LinkDown(link="broker", at=4))
    assert step.accepted and t.current.phase == Phase.BETTING_CLOSED
    assert result_of(deal_all(t)).outcome == "COMPLETED"


def test_supervisor_void_refunds_and_cannot_void_a_result():
    t = open_table()
    t.handle(CloseBetting(at=3))
    t.handle(ScanRead(reader="R1", code="AS", at=4))
    res = result_of(t.handle(SupervisorVoid(supervisor="sup1", reason="shoe dropped", at=5)))
    assert res.outcome == "VOIDED" and res.refund_all and res.cards == {"A1": "AS"}
    t2 = open_table()
    t2.handle(CloseBetting(at=3))
    deal_all(t2)
    step = t2.handle(SupervisorVoid(supervisor="sup1", reason="late", at=5))
    assert not step.accepted and "cannot be voided" in step.rejection.reason


def test_table_rejects_overlapping_and_stale_rounds():
    t = open_table()
    assert "still in play" in t.handle(OpenRound(round_id="T1-000002")).rejection.reason
    t.handle(SupervisorVoid(supervisor="s", reason="r"))
    assert "not new" in t.handle(OpenRound(round_id="T1-000001")).rejection.reason
    assert t.next_round_id() == "T1-000002"
    assert not Table(rules()).handle(ScanRead(reader="R1", code="AS")).accepted


def test_burn_card_is_registered_but_never_published():
    t = Table(TableRules(table_id="T1", game=TeenPatti.from_options({"burn_cards": 1})))
    t.handle(OpenRound(round_id="T1-000001"))
    t.handle(CloseBetting())
    step = t.handle(ScanRead(reader="R1", code="2C"))
    ev = next(e for e in step.effects if getattr(e, "event", "") == "card_registered")
    assert ev.data["position"] == "BURN1" and ev.data["card"] is None
    assert prompts(t.handle(ScanRead(reader="R1", code="2C")), "RESCAN")[0].reason == "duplicate_card"
    res = result_of(deal_all(t))
    assert "BURN1" not in res.cards and "2C" not in res.model_dump_json()


# --- property tests -----------------------------------------------------------------

_events = st.one_of(
    st.builds(ScanRead, reader=st.just("R1"), code=st.sampled_from(list(STANDARD_52[:12]) + ["01G", "ZZ"])),
    st.builds(ReadFailed, reader=st.just("R1"),
              reason=st.sampled_from(["noread", "misread", "corrupt_frame", "frame_lost", "device_fault"])),
    st.builds(PlaceBet, bet_id=st.sampled_from(["b1", "b2", "b3"]), player_id=st.just("p"),
              bet_type=st.sampled_from(TeenPatti.bet_types + ("bogus",)), stake=st.sampled_from(["1", "2.50", "0"])),
    st.builds(CloseBetting),
    st.builds(LinkDown, link=st.just("broker")),
    st.builds(LinkUp, link=st.just("broker")),
    st.builds(SupervisorVoid, supervisor=st.just("s"), reason=st.just("r")),
    st.builds(OpenRound, round_id=st.sampled_from(["T1-000001", "T1-000002", "T1-000003"])),
    st.builds(ResultDelivered, round_id=st.sampled_from(["T1-000001", "T1-000002"]), outbox_id=st.just(1)),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_events, max_size=60))
def test_any_event_sequence_keeps_invariants_and_replays_identically(events):
    t = Table(rules())
    journal, results = [], []
    for ev in events:
        step = t.handle(ev)  # never raises
        if not step.accepted:
            assert not step.journal and all(isinstance(e, Rejection) or getattr(e, "event", "") in ("bet_rejected", "rejected") for e in step.effects)
        if step.journal:
            journal.append(ev)
        results += [r.model_dump_json() for r in step.effects if isinstance(r, RoundResult)]
        cur = t.current
        if cur is not None:
            names = [p.name for p in cur.plan]
            assert list(cur.cards) == names[: cur.next_index]  # registered positions are a prefix of the plan
            assert len(set(cur.cards.values())) == len(cur.cards)
            assert set(cur.cards.values()) <= set(STANDARD_52)
    # replaying only the journaled events rebuilds the same state and the same result bytes
    t2 = Table(rules())
    replayed = []
    for ev in journal:
        step = t2.handle(ev)
        assert step.accepted
        replayed += [r.model_dump_json() for r in step.effects if isinstance(r, RoundResult)]
    assert replayed == results
    if t.current is not None:
        assert (t2.current.phase, t2.current.cards, t2.current.reject_count) == (t.current.phase, t.current.cards, t.current.reject_count)


def test_a_bet_meant_for_another_round_is_refused():
    t = open_table()
    step = t.handle(PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="5", round_id="T1-000000"))
    assert not step.accepted and "is for round T1-000000" in step.rejection.reason
    assert t.handle(PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="5", round_id="T1-000001")).accepted
