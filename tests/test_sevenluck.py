"""Sevenluck Poker (`sevenluck-poker.md`): ranking, qualification, options, deal plan, decisions, settlement."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from functools import cmp_to_key
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dealer.core.cards import STANDARD_52, CardError
from dealer.games import game_class
from dealer.core.game_records import BetResolution, BetView, Face, Outcome, Position
from dealer.games.sevenluck import (
    QUALIFYING_MIN,
    SLHand,
    Sevenluck,
    SevenluckOptions,
    compare3,
    dealer_qualifies,
    evaluate3,
    hand_report,
)
from tests.harness_cards import hand3, rename, six_cards, suit_maps

W, L, P = Outcome.WIN, Outcome.LOSE, Outcome.PUSH
D = Decimal


def split(text: str) -> list[str]:
    return text.split()


def seated(seat_hands: dict[int, str], dealer: str) -> dict[str, str]:
    """Positions P<s>.1..3 and D.1..3 from space-separated hands."""
    cards: dict[str, str] = {}
    for seat, hand in seat_hands.items():
        cards |= {f"P{seat}.{r}": c for r, c in zip((1, 2, 3), split(hand))}
    return cards | {f"D.{r}": c for r, c in zip((1, 2, 3), split(dealer))}


def shared(player: str, dealer: str) -> dict[str, str]:
    return {f"P.{r}": c for r, c in zip((1, 2, 3), split(player))} | {
        f"D.{r}": c for r, c in zip((1, 2, 3), split(dealer))
    }


def bet(player: str, bet_type: str, stake: str | int = 10, seat: int | None = 1) -> BetView:
    return BetView(f"{player}-{bet_type}", player, bet_type, D(stake), seat)


# --- §3.5 worked examples ----------------------------------------------------------------

WORKED = [
    # (#, player, dealer, player [cat,*key], dealer [cat,*key], compare, dealer qualifies)
    (1, "4S 3S 2S", "AH 2H 3H", [6, 4], [6, 3], 1, True),
    (2, "AC AD 5S", "AS AH 9C", [2, 14, 5], [2, 14, 9], -1, True),
    (3, "7S 7D 7C", "QH JH TH", [5, 7], [6, 12], -1, True),
    (4, "8C 8D 2S", "JS 9D 4C", [2, 8, 2], [1, 11, 9, 4], 1, False),
    (5, "KD 4S 2H", "QS 5D 3C", [1, 13, 4, 2], [1, 12, 5, 3], 1, True),
    (6, "AS KD 9C", "3D 2C 4S", [1, 14, 13, 9], [4, 4], -1, True),
    (7, "KS JD 7C", "KH JC 7D", [1, 13, 11, 7], [1, 13, 11, 7], 0, True),
    (8, "9H 6H 2H", "5C 6D 7S", [3, 9, 6, 2], [4, 7], -1, True),
    (9, "AS KD QC", "AH 2C 3D", [4, 14], [4, 3], 1, True),
    (10, "QH QS 2D", "QD QC 2C", [2, 12, 2], [2, 12, 2], 0, True),
]

# Expected (ante outcome, play outcome) for a player who PLAYs each worked example.
WORKED_MAIN = {
    1: (W, W), 2: (L, L), 3: (L, L), 4: (W, P), 5: (W, W),
    6: (L, L), 7: (P, P), 8: (L, L), 9: (W, W), 10: (P, P),
}


@pytest.mark.parametrize(("row", "player", "dealer", "key_p", "key_d", "result", "qualifies"), WORKED)
def test_worked_examples(row: int, player: str, dealer: str, key_p: list[int], key_d: list[int],
                         result: int, qualifies: bool) -> None:
    hp, hd = evaluate3(split(player)), evaluate3(split(dealer))
    assert hp.rank_key == key_p
    assert hd.rank_key == key_d
    assert compare3(hp, hd) == result
    assert compare3(split(player), split(dealer)) == result  # codes accepted too
    assert dealer_qualifies(hd) is qualifies
    outcome = Sevenluck().resolve(seated({1: player}, dealer), [bet("u", "ante")], {"u": "PLAY"})
    ante, play = outcome.player_bets["u"]["ante"], outcome.player_bets["u"]["play"]
    assert (ante.outcome, play.outcome) == WORKED_MAIN[row]
    assert outcome.details["dealer_qualifies"] is qualifies
    assert outcome.details["rank_keys"] == {"P1": key_p, "D": key_d}


def test_worked_example_3_bonus_and_pair_plus_despite_losing() -> None:
    outcome = Sevenluck().resolve(
        seated({1: "7S 7D 7C"}, "QH JH TH"), [bet("u", "ante"), bet("u", "pair_plus", 5)], {"u": "PLAY"}
    )
    res = outcome.player_bets["u"]
    assert res["ante"] == BetResolution(L, D(0), "three_of_a_kind", D(4))
    assert res["play"] == BetResolution(L)
    assert res["pair_plus"] == BetResolution(W, D(30), "three_of_a_kind")


def test_worked_example_11_folded_trips() -> None:
    outcome = Sevenluck().resolve(
        seated({1: "AS AH AD"}, "2C 5D 9H"), [bet("u", "ante"), bet("u", "pair_plus", 5)], {"u": "FOLD"}
    )
    res = outcome.player_bets["u"]
    assert set(res) == {"ante", "pair_plus"}  # no Play bet when folded
    assert res["ante"] == BetResolution(L, D(0), "three_of_a_kind", D(0))  # no Ante Bonus
    assert res["pair_plus"] == BetResolution(L, D(0), "three_of_a_kind")  # no payout when folded


def test_worked_example_12_lowest_qualifying_hand() -> None:
    q32 = evaluate3(split("QC 3D 2H"))
    assert dealer_qualifies(q32)
    assert q32 == QUALIFYING_MIN
    assert QUALIFYING_MIN.rank_key == [1, 12, 3, 2]
    assert not dealer_qualifies(evaluate3(split("JS TD 8C")))  # the best non-qualifying hand
    assert dealer_qualifies(split("4C 3D 2H"))  # any straight qualifies
    assert dealer_qualifies(split("3C 3D 2H"))  # any pair qualifies
    assert dealer_qualifies(split("7C 4C 2C"))  # any flush qualifies


@pytest.mark.parametrize(
    ("codes", "category"),
    [
        ("4S 3S 2S", "straight_flush"),
        ("AS 2S 3S", "straight_flush"),
        ("QS KS AS", "straight_flush"),  # order inside the hand does not matter
        ("7S 7D 7C", "three_of_a_kind"),
        ("AS AD AC", "three_of_a_kind"),  # no "trail of aces" here
        ("AS KD QC", "straight"),
        ("AH 2C 3D", "straight"),
        ("KH AD 2C", "high_card"),  # K-A-2 is no sequence
        ("KH AH 2H", "flush"),  # ... even suited
        ("9H 6H 2H", "flush"),
        ("QH QS 2D", "pair"),
        ("KD 4S 2H", "high_card"),
        ("9S 7S 4D", "high_card"),  # two suited cards: still high card (§7.7)
    ],
)
def test_categories(codes: str, category: str) -> None:
    assert evaluate3(split(codes)).category == category


def test_sequence_order_a23_lowest() -> None:
    order = ["A K Q", "K Q J", "Q J T", "J T 9", "T 9 8", "9 8 7", "8 7 6", "7 6 5", "6 5 4", "5 4 3", "4 3 2", "A 2 3"]
    keys = [evaluate3([r + s for r, s in zip(split(ranks), "SHD")]).key for ranks in order]
    assert keys == [(t,) for t in range(14, 2, -1)]
    flushes = [evaluate3([r + "C" for r in split(ranks)]) for ranks in order]
    assert all(h.category == "straight_flush" for h in flushes)
    assert flushes == sorted(flushes, reverse=True)


def test_straight_flush_beats_trips_and_straight_beats_flush() -> None:
    assert compare3(split("2C 3C 4C"), split("AS AH AD")) == 1
    assert compare3(split("AC 2C 3C"), split("AS AH AD")) == 1
    assert compare3(split("AH 2C 3D"), split("AS KS JS")) == 1


# --- §5.4 settlement examples --------------------------------------------------------------

ANTE, PAIR_PLUS = D(10), D(5)

SETTLEMENT = [
    # (#, player, dealer, decision or None (Pair-Plus-only), ante, play, ante bonus, pair plus, net)
    (1, "7S 7D 7C", "QH JH TH", "PLAY", "-10", "-10", "40", "150", "170"),
    (2, "8C 8D 2S", "JS 9D 4C", "PLAY", "10", "0", "0", "5", "15"),
    (3, "KD 4S 2H", "QS 5D 3C", "PLAY", "10", "10", "0", "-5", "15"),
    (4, "5H 6H 7H", "9S 9C AD", "PLAY", "10", "10", "50", "200", "270"),
    (5, "KS JD 7C", "KH JC 7D", "PLAY", "0", "0", "0", "-5", "-5"),
    (6, "AS AH AD", "KC 8D 3H", "FOLD", "-10", None, "0", "-5", "-15"),
    (7, "2C 2D 9S", "AH 7C 4D", None, None, None, None, "5", "5"),
]


def _returned(stake: Decimal, res: BetResolution) -> Decimal:
    """Settlement arithmetic (`decks.md` §4): WIN stake*(1+ratio), PUSH stake, LOSE 0; bonus on top."""
    base = {W: stake * (1 + res.ratio), P: stake, L: D(0)}[res.outcome]
    return base + stake * res.bonus_ratio


def _net_without_bonus(stake: Decimal, res: BetResolution) -> Decimal:
    return _returned(stake, res) - stake * res.bonus_ratio - stake


@pytest.mark.parametrize(
    ("row", "player", "dealer", "decision", "ante", "play", "bonus", "pair_plus", "net"), SETTLEMENT
)
def test_settlement_examples(row: int, player: str, dealer: str, decision: str | None, ante: str | None,
                             play: str | None, bonus: str | None, pair_plus: str, net: str) -> None:
    bets = [bet("u", "pair_plus", PAIR_PLUS)]
    if decision is not None:
        bets.insert(0, bet("u", "ante", ANTE))
    game = Sevenluck()
    assert game.deciders(bets) == ({"u": 1} if decision else {})
    outcome = game.resolve(seated({1: player}, dealer), bets, {"u": decision} if decision else {})
    res = outcome.player_bets["u"]
    stakes = {"ante": ANTE, "play": ANTE, "pair_plus": PAIR_PLUS}
    assert set(res) == {k for k, v in (("ante", ante), ("play", play), ("pair_plus", pair_plus)) if v is not None}
    total = sum((_returned(stakes[k], r) - stakes[k] for k, r in res.items()), D(0))
    assert total == D(net)
    assert _net_without_bonus(PAIR_PLUS, res["pair_plus"]) == D(pair_plus)
    if ante is not None:
        assert _net_without_bonus(ANTE, res["ante"]) == D(ante)
        assert ANTE * res["ante"].bonus_ratio == D(bonus)
    if play is not None:
        assert _net_without_bonus(ANTE, res["play"]) == D(play)


# --- Exhaustive counts and qualification ---------------------------------------------------

ALL_HANDS = list(combinations(STANDARD_52, 3))


def test_exhaustive_category_counts() -> None:
    counts = Counter(evaluate3(hand).category for hand in ALL_HANDS)
    assert counts == {
        "straight_flush": 48,  # 12 sequences x 4 suits
        "three_of_a_kind": 52,  # 13 ranks x C(4,3)
        "straight": 720,  # 12 x 4^3 - 48
        "flush": 1096,  # 4 x C(13,3) - 48
        "pair": 3744,  # 13 x C(4,2) x 48
        "high_card": 16440,  # the rest of C(52,3)
    }
    assert sum(counts.values()) == 22100


def test_qualification_equals_qualifying_min_for_every_hand() -> None:
    qualifying = 0
    for hand in ALL_HANDS:
        h = evaluate3(hand)
        assert dealer_qualifies(h) == (h >= QUALIFYING_MIN), hand
        qualifying += dealer_qualifies(h)
    # non-qualifying = high-card hands headed by J or lower: (C(10,3) rank sets - 8 sequences) x (4^3 - 4 flushes)
    non_qualifying_ranks = sum(1 for r in combinations(range(2, 12), 3)) - 8  # J-T-9 .. 4-3-2
    non_q = non_qualifying_ranks * (64 - 4)
    assert qualifying == 22100 - non_q


# --- Hypothesis properties -----------------------------------------------------------------

@given(hand3, hand3)
def test_compare3_antisymmetric(a: list[str], b: list[str]) -> None:
    ha, hb = evaluate3(a), evaluate3(b)
    assert compare3(a, b) == -compare3(b, a)
    assert compare3(a, b) == ((ha.cat, ha.key) > (hb.cat, hb.key)) - ((ha.cat, ha.key) < (hb.cat, hb.key))
    assert compare3(a, a) == 0


@given(hand3, hand3, hand3)
def test_compare3_transitive(a: list[str], b: list[str], c: list[str]) -> None:
    hands = [evaluate3(h) for h in (a, b, c)]
    by_compare = sorted(hands, key=cmp_to_key(compare3))
    assert [(h.cat, h.key) for h in by_compare] == sorted((h.cat, h.key) for h in hands)


@given(hand3, hand3, suit_maps)
def test_ranking_invariant_under_suit_renaming(a: list[str], b: list[str], suits: dict[str, str]) -> None:
    ra, rb = rename(a, suits), rename(b, suits)
    assert evaluate3(ra) == evaluate3(a)
    assert evaluate3(ra).category == evaluate3(a).category
    assert compare3(ra, rb) == compare3(a, b)
    assert dealer_qualifies(ra) == dealer_qualifies(a)


@settings(deadline=None)
@given(six_cards, st.sampled_from(["PLAY", "FOLD"]))
def test_seated_and_shared_settle_alike(codes: list[str], action: str) -> None:
    player, dealer = " ".join(codes[:3]), " ".join(codes[3:])
    seated_out = Sevenluck().resolve(
        seated({4: player}, dealer), [bet("u", "ante", seat=4), bet("u", "pair_plus", seat=4)], {"u": action}
    )
    shared_game = Sevenluck(SevenluckOptions(hand_mode="SHARED"))
    shared_out = shared_game.resolve(
        shared(player, dealer), [bet("u", "ante", seat=None), bet("u", "pair_plus", seat=None)], {"u": action}
    )
    assert seated_out.player_bets == shared_out.player_bets
    res = seated_out.player_bets["u"]
    if action == "PLAY":
        if seated_out.details["dealer_qualifies"]:
            assert res["ante"].outcome == res["play"].outcome
        else:
            assert (res["ante"].outcome, res["play"].outcome) == (W, P)
    else:
        assert "play" not in res and res["ante"].outcome == L and res["pair_plus"].outcome == L


# --- Deal plan -------------------------------------------------------------------------------


def test_deal_plan_rulebook_example() -> None:
    plan = Sevenluck().deal_plan((1, 3, 4))
    assert [p.name for p in plan] == split("P1.1 P3.1 P4.1 D.1 P1.2 P3.2 P4.2 D.2 P1.3 P3.3 P4.3 D.3")
    assert all(p.face == Face.DOWN and not p.burn for p in plan)
    assert [p.seat for p in plan] == [1, 3, 4, None] * 3
    assert Sevenluck().deal_plan((4, 1, 3)) == plan  # seat order is always increasing


def test_deal_plan_shared() -> None:
    plan = Sevenluck(SevenluckOptions(hand_mode="SHARED")).deal_plan()
    assert plan == (
        Position("P.1", Face.UP), Position("D.1", Face.DOWN),
        Position("P.2", Face.UP), Position("D.2", Face.DOWN),
        Position("P.3", Face.UP), Position("D.3", Face.DOWN),
    )


def test_deal_plan_no_seats() -> None:
    assert Sevenluck().deal_plan() == tuple(Position(f"D.{r}", Face.DOWN) for r in (1, 2, 3))


@pytest.mark.parametrize("seats", [(0,), (8,), (1, 10)])
def test_deal_plan_seat_out_of_range(seats: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Sevenluck().deal_plan(seats)


def test_seat_count_and_deck() -> None:
    assert Sevenluck().seat_count == 7
    assert Sevenluck(SevenluckOptions(seats=9)).seat_count == 9
    assert Sevenluck(SevenluckOptions(hand_mode="SHARED")).seat_count == 0
    assert Sevenluck().deck == frozenset(STANDARD_52)
    assert game_class("sevenluck") is Sevenluck


# --- Bets and decisions ------------------------------------------------------------------------


def test_check_bet() -> None:
    game = Sevenluck()
    assert game.check_bet("ante", frozenset()) is None
    assert game.check_bet("pair_plus", frozenset({"ante"})) is None
    assert game.check_bet("ante", frozenset({"pair_plus"})) is None
    assert "already holds an ante" in (game.check_bet("ante", frozenset({"ante"})) or "")
    assert "already holds a pair plus" in (game.check_bet("pair_plus", frozenset({"pair_plus", "ante"})) or "")
    assert "unknown bet type" in (game.check_bet("play", frozenset({"ante"})) or "")


def test_deciders_and_default_decision() -> None:
    bets = [bet("a", "ante", seat=2), bet("a", "pair_plus", seat=2), bet("b", "pair_plus", seat=5),
            bet("c", "ante", seat=6)]
    assert Sevenluck().deciders(bets) == {"a": 2, "c": 6}
    shared_bets = [bet("a", "ante", seat=None), bet("b", "pair_plus", seat=None)]
    assert Sevenluck(SevenluckOptions(hand_mode="SHARED")).deciders(shared_bets) == {"a": None}
    assert Sevenluck().default_decision() == "FOLD"
    assert Sevenluck(SevenluckOptions(decision_timeout_action="PLAY")).default_decision() == "PLAY"
    assert Sevenluck.decision_actions == ("PLAY", "FOLD")
    assert Sevenluck.bet_types == ("ante", "pair_plus")


# --- Options -------------------------------------------------------------------------------------


def test_default_options() -> None:
    o = SevenluckOptions()
    assert (o.hand_mode, o.seats, o.decision_timeout_action) == ("SEATED", 7, "FOLD")
    assert (o.ante_bonus_on_fold, o.reserve_play_funds, o.reshuffle_every_round) == (False, True, True)
    assert o.ante_bonus == {"straight_flush": D(5), "three_of_a_kind": D(4), "straight": D(1)}
    assert o.pair_plus == {"straight_flush": D(40), "three_of_a_kind": D(30), "straight": D(6),
                           "flush": D(4), "pair": D(1)}
    assert all(isinstance(v, Decimal) for v in [*o.ante_bonus.values(), *o.pair_plus.values()])


PP = {"straight_flush": "40", "three_of_a_kind": "30", "straight": "6", "flush": "4", "pair": "1"}
AB = {"straight_flush": "5", "three_of_a_kind": "4", "straight": "1"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"pair_plus": PP | {"pair": 1.0}}, "float"),
        ({"ante_bonus": AB | {"straight": 1.5}}, "float"),
        ({"pair_plus": PP | {"high_card": "0"}}, "unknown categories"),
        ({"ante_bonus": AB | {"flush": "1"}}, "unknown categories"),
        ({"ante_bonus": {k: v for k, v in AB.items() if k != "straight"}}, "missing categories"),
        ({"pair_plus": PP | {"pair": "-1"}}, ">= 0"),
        ({"pair_plus": PP | {"pair": "abc"}}, "plain decimal"),
        ({"pair_plus": [1, 2]}, "mapping"),
        ({"seats": 0}, "greater than or equal"),
        ({"seats": 10}, "less than or equal"),
        ({"seats": 7.0}, "int"),
        ({"hand_mode": "TEAM"}, "hand_mode"),
        ({"decision_timeout_action": "CHECK"}, "decision_timeout_action"),
        ({"rake": "1"}, "Extra inputs"),
    ],
)
def test_options_validation(raw: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SevenluckOptions.model_validate(raw)
    with pytest.raises(ValidationError):
        Sevenluck.from_options(raw)


def test_custom_pay_tables_are_used() -> None:
    game = Sevenluck.from_options({"ante_bonus": AB | {"straight": "2.5"}, "pair_plus": PP | {"straight": 7}})
    out = game.resolve(seated({1: "AS KD QC"}, "2H 2D 9S"), [bet("u", "ante"), bet("u", "pair_plus")],
                       {"u": "PLAY"})
    assert out.player_bets["u"]["ante"] == BetResolution(W, D(1), "straight", D("2.5"))
    assert out.player_bets["u"]["pair_plus"] == BetResolution(W, D(7), "straight")


# --- resolve(): modes, timeouts, options -----------------------------------------------------


def test_resolve_shared_two_players_play_and_fold() -> None:
    game = Sevenluck(SevenluckOptions(hand_mode="SHARED"))
    bets = [bet("p", "ante", 10, None), bet("p", "pair_plus", 5, None),
            bet("f", "ante", 20, None), bet("f", "pair_plus", 5, None), bet("pp", "pair_plus", 5, None)]
    assert game.deciders(bets) == {"p": None, "f": None}
    out = game.resolve(shared("5H 6H 7H", "9S 9C AD"), bets, {"p": "PLAY", "f": "FOLD"})
    assert out.winner is None and out.bets == {}
    assert set(out.hands) == {"P", "D"}
    assert out.hands["P"].cards == ("5H", "6H", "7H") and out.hands["P"].category == "straight_flush"
    assert out.hands["D"].category == "pair"
    assert out.player_bets["p"] == {
        "ante": BetResolution(W, D(1), "straight_flush", D(5)),
        "play": BetResolution(W, D(1)),
        "pair_plus": BetResolution(W, D(40), "straight_flush"),
    }
    assert out.player_bets["f"] == {
        "ante": BetResolution(L, D(0), "straight_flush", D(0)),
        "pair_plus": BetResolution(L, D(0), "straight_flush"),
    }
    assert out.player_bets["pp"] == {"pair_plus": BetResolution(W, D(40), "straight_flush")}
    assert out.details == {"dealer_qualifies": True, "rank_keys": {"P": [6, 7], "D": [2, 9, 14]},
                           "comparison": {"P": "PLAYER"}}
    assert json.loads(json.dumps(out.details)) == out.details


def test_resolve_seated_timeout_fold() -> None:
    game = Sevenluck()
    bets = [bet("a", "ante", seat=2), bet("a", "pair_plus", seat=2), bet("b", "ante", seat=5)]
    decisions = {"a": "PLAY", "b": game.default_decision()}  # b timed out
    out = game.resolve(seated({2: "QH QS 2D", 5: "3C 4C 5C"}, "JS 9D 4H"), bets, decisions)
    assert set(out.hands) == {"P2", "P5", "D"}
    assert out.details["dealer_qualifies"] is False
    assert out.details["comparison"] == {"P2": "PLAYER", "P5": "PLAYER"}
    assert out.player_bets["a"] == {
        "ante": BetResolution(W, D(1), "pair", D(0)),
        "play": BetResolution(P),
        "pair_plus": BetResolution(W, D(1), "pair"),
    }
    assert out.player_bets["b"] == {"ante": BetResolution(L, D(0), "straight_flush", D(0))}


def test_resolve_timeout_play_option() -> None:
    game = Sevenluck(SevenluckOptions(decision_timeout_action="PLAY"))
    out = game.resolve(seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante")], {"u": game.default_decision()})
    assert out.player_bets["u"] == {"ante": BetResolution(L, D(0), "high_card"), "play": BetResolution(L)}


def test_resolve_ante_bonus_on_fold() -> None:
    game = Sevenluck(SevenluckOptions(ante_bonus_on_fold=True))
    bets = [bet("u", "ante"), bet("u", "pair_plus", 5)]
    out = game.resolve(seated({1: "AS AH AD"}, "KC 8D 3H"), bets, {"u": "FOLD"})
    res = out.player_bets["u"]
    assert res["ante"] == BetResolution(L, D(0), "three_of_a_kind", D(4))
    assert res["pair_plus"] == BetResolution(L, D(0), "three_of_a_kind")  # Pair Plus still lost
    net = sum((_returned(s, r) - s for s, r in ((D(10), res["ante"]), (D(5), res["pair_plus"]))), D(0))
    assert net == D(25)  # -10 + 40 - 5


def test_resolve_no_bets_deals_dealer_only() -> None:
    out = Sevenluck().resolve(seated({}, "QC 3D 2H"))
    assert set(out.hands) == {"D"} and out.player_bets == {}
    assert out.details["dealer_qualifies"] is True


@pytest.mark.parametrize(
    ("cards", "bets", "decisions", "error", "message"),
    [
        ({k: v for k, v in seated({1: "AS KD 9C"}, "3D 2C 4S").items() if k != "D.3"},
         [bet("u", "ante")], {"u": "PLAY"}, ValueError, "missing position"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante", seat=2)], {"u": "PLAY"},
         ValueError, "missing position"),
        (seated({1: "AS KD 9C", 2: "2H 3H 4H"}, "3D 2C 4S"), [bet("u", "ante")], {"u": "PLAY"},
         ValueError, "unexpected position"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante")], {}, ValueError, "missing decision"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante")], None, ValueError, "missing decision"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante")], {"u": "CHECK"}, ValueError, "invalid decision"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "pair_plus")], {"u": "PLAY"}, ValueError, "hold no ante"),
        (seated({1: "AS KD 9C"}, "3D 2C AS"), [bet("u", "ante")], {"u": "PLAY"}, CardError, "AS"),
        (seated({1: "AS KD 9C"}, "3D 2C 10S"), [bet("u", "ante")], {"u": "PLAY"}, CardError, "10S"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante", seat=None)], {"u": "PLAY"}, ValueError, "no seat"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante", seat=8)], {"u": "PLAY"}, ValueError, "out of range"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante"), bet("u", "ante")], {"u": "PLAY"},
         ValueError, "two ante"),
        (seated({1: "AS KD 9C", 2: "2H 3H 4H"}, "3D 2C 4S"), [bet("u", "ante"), bet("u", "pair_plus", seat=2)],
         {"u": "PLAY"}, ValueError, "one seat per player"),
        (seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "play")], {}, ValueError, "unknown bet type"),
    ],
)
def test_resolve_rejects_bad_input(cards: dict, bets: list, decisions: dict | None, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Sevenluck().resolve(cards, bets, decisions)


def test_resolve_shared_rejects_seated_positions() -> None:
    game = Sevenluck(SevenluckOptions(hand_mode="SHARED"))
    with pytest.raises(ValueError, match="missing position"):
        game.resolve(seated({1: "AS KD 9C"}, "3D 2C 4S"), [bet("u", "ante", seat=None)], {"u": "PLAY"})


# --- Evaluator input errors ------------------------------------------------------------------


def test_evaluator_input_errors() -> None:
    with pytest.raises(CardError, match="duplicate"):
        evaluate3(["AS", "AS", "KD"])
    with pytest.raises(ValueError, match="exactly 3"):
        evaluate3(["AS", "KD"])
    with pytest.raises(CardError, match="sequence"):
        evaluate3("ASK")  # type: ignore[arg-type]
    with pytest.raises(CardError, match="'T'"):
        evaluate3(["10S", "2H", "3H"])


def test_slhand_ordering_ignores_category_name() -> None:
    assert SLHand("x", 2, (5, 3)) == SLHand("y", 2, (5, 3))
    assert SLHand("pair", 2, (5, 3)) < SLHand("straight", 4, (3,))


# --- Supervisor report -----------------------------------------------------------------------


def test_hand_report_example_5() -> None:
    report = hand_report(split("KD 4S 2H"), split("QS 5D 3C"))
    assert json.loads(json.dumps(report)) == report
    assert report["game"] == "sevenluck"
    assert report["hands"]["player"] == {"cards": ["KD", "4S", "2H"], "category": "high_card",
                                         "rank_key": [1, 13, 4, 2]}
    assert report["hands"]["dealer"]["rank_key"] == [1, 12, 5, 3]
    assert report["dealer_qualifies"] is True
    assert report["comparison"] == "PLAYER"
    assert report["bets"]["ante"] == {"outcome": "WIN", "ratio": "1", "bonus_ratio": "0", "category": "high_card"}
    assert report["bets"]["play"]["outcome"] == "WIN"
    assert report["bets"]["pair_plus"] == {"outcome": "LOSE", "ratio": "0", "bonus_ratio": "0",
                                           "category": "high_card"}
    assert report["net_per_unit"] == {"ante_and_play": "2", "pair_plus": "-1"}


@pytest.mark.parametrize(
    ("player", "dealer", "comparison", "qualifies", "ante_and_play", "pair_plus"),
    [
        ("7S 7D 7C", "QH JH TH", "DEALER", True, "2", "30"),  # -1 -1 + bonus 4
        ("8C 8D 2S", "JS 9D 4C", "PLAYER", False, "1", "1"),
        ("5H 6H 7H", "9S 9C AD", "PLAYER", True, "7", "40"),
        ("KS JD 7C", "KH JC 7D", "TIE", True, "0", "-1"),
    ],
)
def test_hand_report_nets(player: str, dealer: str, comparison: str, qualifies: bool,
                          ante_and_play: str, pair_plus: str) -> None:
    for options in (None, SevenluckOptions(hand_mode="SHARED")):
        report = hand_report(split(player), split(dealer), options)
        assert report["comparison"] == comparison
        assert report["dealer_qualifies"] is qualifies
        assert report["net_per_unit"] == {"ante_and_play": ante_and_play, "pair_plus": pair_plus}


def test_hand_report_errors() -> None:
    with pytest.raises(ValueError, match="exactly 3"):
        hand_report(split("KD 4S"), split("QS 5D 3C"))
    with pytest.raises(CardError, match="KD"):
        hand_report(split("KD 4S 2H"), split("KD 5D 3C"))
