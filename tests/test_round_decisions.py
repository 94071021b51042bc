"""The round machine with player decisions (Sevenluck): plain calls, no IO, no clock."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.events import (
    CloseBetting,
    DecisionTimeout,
    LinkDown,
    LinkUp,
    OpenRound,
    PlaceBet,
    PlayerDecision,
    Resume,
    ScanRead,
    SupervisorVoid,
)
from dealer.games.sevenluck import Sevenluck
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult
from dealer.core.round import Phase, TableRules
from dealer.core.settlement import settle_bet
from dealer.core.table import Table

# plan for seats 1 and 3: P1.1 P3.1 D.1 P1.2 P3.2 D.2 P1.3 P3.3 D.3
# alice (seat 1): 7S 7D 7C trips; bob (seat 3): KD 4S 2H; dealer: QH JH TH straight flush
CARDS = ["7S", "KD", "QH", "7D", "4S", "JH", "7C", "2H", "TH"]


def table(**opts) -> Table:
    t = Table(TableRules(table_id="S1", game=Sevenluck.from_options(opts), decision_ms=10_000))
    assert t.handle(OpenRound(round_id="S1-000001", at=1)).accepted
    return t


def seated(t: Table) -> None:
    for bet in [PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1),
                PlaceBet(bet_id="pp1", player_id="alice", bet_type="pair_plus", stake="5", seat=1),
                PlaceBet(bet_id="a3", player_id="bob", bet_type="ante", stake="10", seat=3)]:
        assert t.handle(bet).accepted
    t.handle(CloseBetting(at=2))


def deal(t: Table, cards=CARDS, at=3):
    steps = [t.handle(ScanRead(reader="R", code=c, at=at)) for c in cards]
    assert all(s.accepted for s in steps)
    return steps


def effects(steps, kind):
    return [e for s in steps for e in s.effects if isinstance(e, kind)]


def test_plan_follows_the_betting_seats_and_hole_cards_go_to_their_owner_only():
    t = table()
    seated(t)
    assert [p.name for p in t.current.plan] == ["P1.1", "P3.1", "D.1", "P1.2", "P3.2", "D.2", "P1.3", "P3.3", "D.3"]
    steps = deal(t)
    private = effects(steps, PlayerMessage)
    holes = {(m.player_id, m.data["position"], m.data["card"]) for m in private if m.kind == "hole_card"}
    assert holes == {("alice", "P1.1", "7S"), ("alice", "P1.2", "7D"), ("alice", "P1.3", "7C"),
                     ("bob", "P3.1", "KD"), ("bob", "P3.2", "4S"), ("bob", "P3.3", "2H")}
    public = [e.data for e in effects(steps, RoundEvent) if e.event == "card_registered"]
    assert all(d["card"] is None for d in public)  # nothing face down is published to everybody
    assert t.current.phase == Phase.DECISION and t.current.decision_deadline == 3 + 10_000
    required = sorted(m.player_id for m in private if m.kind == "decision_required")
    assert required == ["alice", "bob"]


def test_decisions_are_validated_and_the_reveal_waits_for_all_of_them():
    t = table()
    assert t.handle(PlaceBet(bet_id="pp9", player_id="carol", bet_type="pair_plus", stake="5", seat=5)).accepted
    seated(t)
    step = t.handle(PlayerDecision(player_id="alice", action="PLAY", at=3))
    assert not step.accepted and "takes no decisions" in step.rejection.reason  # still dealing
    # seats 1, 3, 5: alice 7S 7D 7C, bob KD 4S 2H, carol 2C 2D 9S, dealer QH JH TH
    deal(t, ["7S", "KD", "2C", "QH", "7D", "4S", "2D", "JH", "7C", "2H", "9S", "TH"])
    for ev, why in [(PlayerDecision(player_id="carol", action="PLAY"), "no decision to make"),  # Pair Plus only
                    (PlayerDecision(player_id="mallory", action="PLAY"), "no decision to make"),
                    (PlayerDecision(player_id="alice", action="RAISE"), "unknown action"),
                    (ScanRead(reader="R", code="2C"), "no card is expected")]:
        step = t.handle(ev)
        assert not step.accepted and why in step.rejection.reason
    assert t.handle(PlayerDecision(player_id="alice", action="PLAY", at=4)).accepted
    step = t.handle(PlayerDecision(player_id="alice", action="FOLD", at=4))
    assert "already chose PLAY" in step.rejection.reason
    assert t.current.phase == Phase.DECISION  # bob has not decided: the dealer's cards stay hidden
    step = t.handle(PlayerDecision(player_id="bob", action="FOLD", at=5))
    revealed = next(e for e in step.effects if isinstance(e, RoundEvent) and e.event == "cards_revealed").data["cards"]
    # the dealer, the player who played and the Pair-Plus-only player show; bob folded: his stay hidden
    assert revealed == {"P1.1": "7S", "P5.1": "2C", "D.1": "QH", "P1.2": "7D", "P5.2": "2D", "D.2": "JH",
                        "P1.3": "7C", "P5.3": "9S", "D.3": "TH"}
    res = next(e for e in step.effects if isinstance(e, RoundResult))
    assert res.decisions["alice"].action == "PLAY" and res.decisions["alice"].play_stake == Decimal(10)
    # rulebook §5.4 example 1: trips vs a straight flush, a=10, pp=5 -> net +170
    net = sum(settle_bet(b, s, res, "alice").net for b, s in [("ante", 10), ("play", 10), ("pair_plus", 5)])
    assert net == Decimal(170)
    assert settle_bet("ante", 10, res, "bob").net == Decimal(-10) and "play" not in res.player_bets["bob"]
    assert settle_bet("pair_plus", 5, res, "carol").net == Decimal(5)  # §5.4 example 7: Pair-Plus-only pair


def test_timeout_applies_the_default_to_every_undecided_player():
    t = table()
    seated(t)
    deal(t)
    t.handle(PlayerDecision(player_id="bob", action="PLAY", at=4))
    step = t.handle(DecisionTimeout(at=10_003))
    res = next(e for e in step.effects if isinstance(e, RoundResult))
    assert res.decisions["alice"].model_dump() == {"action": "FOLD", "by": "timeout", "seat": 1, "play_stake": None}
    assert res.decisions["bob"].by == "player"
    assert settle_bet("pair_plus", 5, res, "alice").outcome == "LOSE"  # a folded Pair Plus loses
    t2 = table(decision_timeout_action="PLAY")
    seated(t2)
    deal(t2)
    res2 = next(e for e in t2.handle(DecisionTimeout(at=10_003)).effects if isinstance(e, RoundResult))
    assert {d.action for d in res2.decisions.values()} == {"PLAY"}


def test_links_and_voids_around_the_decision_phase():
    t = table()
    assert t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1)).accepted
    res = next(e for e in t.handle(LinkDown(link="broker")).effects if isinstance(e, RoundResult))
    assert res.outcome == "CANCELLED" and res.refund_all  # before betting closed: refund
    t = table()
    seated(t)
    deal(t)
    assert t.handle(LinkDown(link="broker")).accepted and t.current.phase == Phase.DECISION  # continues
    res = next(e for e in t.handle(SupervisorVoid(supervisor="s", reason="cards exposed")).effects
               if isinstance(e, RoundResult))
    assert res.outcome == "VOIDED" and settle_bet("ante", 10, res, "alice").returned == Decimal(10)


def test_the_decision_timer_pauses_while_the_broker_is_down_and_resumes_with_a_whole_window():
    t = table()
    seated(t)
    deal(t)
    assert t.handle(PlayerDecision(player_id="bob", action="PLAY", at=4)).accepted
    assert t.handle(LinkDown(link="broker", reason="gone", at=5)).journal
    refused = t.handle(DecisionTimeout(at=20_000))
    assert not refused.accepted and "paused while the broker link is down" in refused.rejection.reason
    assert t.current.phase == Phase.DECISION and set(t.current.decisions) == {"bob"}
    up = t.handle(LinkUp(link="broker", at=50_000))
    assert up.accepted and up.journal and t.current.decision_deadline == 60_000
    opened = [e for e in up.effects if isinstance(e, RoundEvent) and e.event == "decisions_open"]
    assert [o.data for o in opened] == [{"players": ["alice"], "closes_at": 60_000, "resumed": True}]
    told = [e for e in up.effects if isinstance(e, PlayerMessage)]
    assert [(m.player_id, m.kind, m.data["closes_at"], m.data["resumed"]) for m in told] == [
        ("alice", "decision_required", 60_000, True)]
    assert t.handle(PlayerDecision(player_id="alice", action="PLAY", at=55_000)).accepted
    assert t.current.phase == Phase.RESULT and t.current.decisions["alice"].by == "player"


def test_resume_after_a_restart_renews_the_window_and_counts_as_the_broker_coming_back():
    t = table()
    seated(t)
    deal(t)
    t.handle(LinkDown(link="broker", reason="gone", at=5))  # the journal may end with the broker down
    step = t.handle(Resume(at=90_000))
    assert step.accepted and step.journal and "broker" not in t.links_down
    assert [e.event for e in step.effects if isinstance(e, RoundEvent)] == ["link_up", "decisions_open"]
    assert t.current.decision_deadline == 100_000
    assert {m.player_id for m in step.effects if isinstance(m, PlayerMessage)} == {"alice", "bob"}
    # nothing pending: a resume changes nothing and is not journaled
    idle = Table(TableRules(table_id="S1", game=Sevenluck.from_options({}), decision_ms=10_000))
    assert idle.handle(Resume(at=1)).accepted and not idle.handle(Resume(at=1)).journal


def test_a_timer_armed_for_a_window_a_resume_renewed_changes_nothing():
    """The edge arms the decision timer for the journaled deadline; a resume (restart, broker
    back) renews it. A timeout that fired for the old deadline and lost the race to the core
    (queued behind the resume) must not fold the players who were given a new window."""
    t = table()
    seated(t)
    deal(t)
    old = t.current.decision_deadline
    assert t.handle(Resume(at=90_000)).journal and t.current.decision_deadline == 100_000
    stale = t.handle(DecisionTimeout(deadline=old, at=90_001))
    assert not stale.accepted and not stale.journal and "stale" in stale.rejection.reason
    assert t.current.phase == Phase.DECISION and t.current.decisions == {}
    due = t.handle(DecisionTimeout(deadline=100_000, at=100_000))
    assert due.accepted and due.journal and t.current.phase == Phase.RESULT
    assert {p: d.by for p, d in t.current.decisions.items()} == {"alice": "timeout", "bob": "timeout"}


def test_shared_hand_mode_has_no_seats_and_public_player_cards():
    t = table(hand_mode="SHARED")
    step = t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=2))
    assert "have no seat" in step.rejection.reason
    for i, p in enumerate(["alice", "bob"]):
        assert t.handle(PlaceBet(bet_id=f"a{i}", player_id=p, bet_type="ante", stake="10")).accepted
    t.handle(CloseBetting())
    steps = deal(t, ["7S", "QH", "7D", "JH", "7C", "TH"])
    shown = {e.data["position"]: e.data["card"] for e in effects(steps, RoundEvent) if e.event == "card_registered"}
    assert shown == {"P.1": "7S", "D.1": None, "P.2": "7D", "D.2": None, "P.3": "7C", "D.3": None}
    t.handle(PlayerDecision(player_id="alice", action="PLAY"))
    res = next(e for e in t.handle(PlayerDecision(player_id="bob", action="FOLD")).effects if isinstance(e, RoundResult))
    assert res.player_bets["alice"]["ante"].bonus_ratio == Decimal(4) and res.player_bets["bob"]["ante"].outcome == "LOSE"


_actions = st.one_of(
    st.builds(PlaceBet, bet_id=st.sampled_from(["b1", "b2", "b3", "b4"]), player_id=st.sampled_from(["p1", "p2"]),
              bet_type=st.sampled_from(["ante", "pair_plus", "play"]), stake=st.just("5"),
              seat=st.sampled_from([None, 1, 2, 8])),
    st.builds(CloseBetting),
    st.builds(ScanRead, reader=st.just("R"), code=st.sampled_from(["AS", "KS", "QS", "JS", "TS", "9S", "8S", "7S",
                                                                  "6S", "5S", "4S", "3S", "2S", "AS"])),
    st.builds(PlayerDecision, player_id=st.sampled_from(["p1", "p2", "p3"]), action=st.sampled_from(["PLAY", "FOLD", "X"])),
    st.builds(DecisionTimeout, deadline=st.sampled_from([None, 9_999, 10_000, 10_007])),
    st.builds(LinkDown, link=st.just("broker")),
    st.builds(Resume, at=st.sampled_from([0, 7])),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_actions, max_size=50))
def test_any_sequence_replays_to_the_same_result(events):
    t = table()
    journal, results = [OpenRound(round_id="S1-000001", at=1)], []
    for ev in events:
        step = t.handle(ev)
        if step.journal:
            journal.append(ev)
        results += [e.model_dump_json() for e in step.effects if isinstance(e, RoundResult)]
    t2 = Table(TableRules(table_id="S1", game=Sevenluck(), decision_ms=10_000))
    replayed = [e.model_dump_json() for ev in journal for e in t2.handle(ev).effects if isinstance(e, RoundResult)]
    assert replayed == results
    if t.current.phase == Phase.RESULT:
        res = RoundResult.model_validate_json(results[-1])
        assert set(res.decisions) == set(t.current.deciders)


def test_resume_without_a_broker_link_leaves_a_journaled_broker_outage_to_its_link_up():
    t = table()
    seated(t)
    deal(t)
    t.handle(LinkDown(link="broker", reason="gone", at=5))
    step = t.handle(Resume(link=None, at=90_000))
    assert step.accepted and not step.journal and step.effects == [] and "broker" in t.links_down
    up = t.handle(LinkUp(link="broker", at=95_000))
    assert up.journal and t.current.decision_deadline == 105_000
