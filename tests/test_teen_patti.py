"""Teen Patti 20-20 (`teen-patti-2020.md`): ranking, Six Card Bonus, options, deal plan, settlement."""

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
from dealer.core.game_records import Face, Outcome, Position
from dealer.games.teen_patti import (
    SIX_CARD_CATEGORIES,
    Hand3,
    TeenPatti,
    TeenPattiOptions,
    compare3,
    evaluate3,
    hand_report,
    six_card_bonus,
)
from tests.harness_cards import hand3, rename, six_cards, suit_maps

RANK_VALUE = {c: 14 - i for i, c in enumerate("AKQJT98765432")}


def split(text: str) -> list[str]:
    return text.split()


def deal(a: str, b: str) -> dict[str, str]:
    """Positions A1..B3 from two space-separated hands."""
    return dict(zip(("A1", "A2", "A3"), split(a))) | dict(zip(("B1", "B2", "B3"), split(b)))


# --- §3.5 worked examples ----------------------------------------------------------------

MAIN_EXAMPLES = [
    # (#, hand A, hand B, [cat, *key] of A, [cat, *key] of B, winner)
    (1, "AS AD AC", "KS KH KC", [7, 14], [6, 13], "A"),
    (2, "2S 2H 2D", "AH KH QH", [6, 2], [5, 12], "A"),
    (3, "AC 2C 3C", "KD QD JD", [5, 11], [5, 10], "A"),
    (4, "AS KD QC", "AH 2S 3D", [4, 12], [4, 11], "A"),
    (5, "4S 3H 2D", "AH 9H 5H", [4, 1], [3, 14, 9, 5], "A"),
    (6, "KS KH QD", "KD KC 9S", [2, 13, 12], [2, 13, 9], "A"),
    (7, "9H 7H 5H", "9S 7S 4S", [3, 9, 7, 5], [3, 9, 7, 4], "A"),
    (8, "QH 9C 7S", "QD 9D 7C", [1, 12, 9, 7], [1, 12, 9, 7], "TIE"),
    (9, "AS KS QS", "AH KH QH", [5, 12], [5, 12], "TIE"),
    (10, "KS AD 2C", "3C 3D JH", [1, 14, 13, 2], [2, 3, 11], "B"),
    (11, "4D 4H 2S", "4C 4S 2H", [2, 4, 2], [2, 4, 2], "TIE"),
    (12, "AH AD 3C", "AS AC 2D", [2, 14, 3], [2, 14, 2], "A"),
    (13, "9H 7H 5H", "9S 7C 5D", [3, 9, 7, 5], [1, 9, 7, 5], "A"),
]


@pytest.mark.parametrize(("row", "a", "b", "key_a", "key_b", "winner"), MAIN_EXAMPLES)
def test_main_worked_examples(row: int, a: str, b: str, key_a: list[int], key_b: list[int], winner: str) -> None:
    ha, hb = evaluate3(split(a)), evaluate3(split(b))
    assert ha.rank_key == key_a
    assert hb.rank_key == key_b
    expected = {"A": 1, "B": -1, "TIE": 0}[winner]
    assert compare3(ha, hb) == expected
    assert compare3(split(a), split(b)) == expected  # codes accepted too
    outcome = TeenPatti().resolve(deal(a, b))
    assert outcome.winner == winner
    assert outcome.details["rank_keys"] == {"A": key_a, "B": key_b}


@pytest.mark.parametrize(
    ("codes", "category"),
    [
        ("AS AD AC", "trail_of_aces"),
        ("KS KH KC", "three_of_a_kind"),
        ("AC 2C 3C", "straight_flush"),
        ("AS KD QC", "straight"),
        ("AH 9H 5H", "flush"),
        ("KS KH QD", "pair"),
        ("KS AD 2C", "high_card"),
        ("QS KS AS", "straight_flush"),  # order inside the hand does not matter
        ("KH AH 2H", "flush"),  # K-A-2 is no sequence, even suited
        ("2D 3S 4H", "straight"),  # 4-3-2 is the lowest sequence
    ],
)
def test_categories(codes: str, category: str) -> None:
    assert evaluate3(split(codes)).category == category


def test_sequence_order_a23_second_highest() -> None:
    order = ["A K Q", "A 2 3", "K Q J", "Q J T", "J T 9", "T 9 8", "9 8 7", "8 7 6", "7 6 5", "6 5 4", "5 4 3", "4 3 2"]
    keys = [evaluate3([r + s for r, s in zip(split(ranks), "SHD")]).key for ranks in order]
    assert keys == [(s,) for s in range(12, 0, -1)]


# --- §3.6 worked examples ----------------------------------------------------------------

SIX_CARD_EXAMPLES = [
    # (#, A, B, category, ranks of the best five, Six Card Bonus ratio or None)
    (1, "AS KS QS", "JS TS 2D", "royal_flush", "AKQJT", "1000"),
    (2, "5S 5H 5D", "5C KS KH", "four_of_a_kind", "K5555", "100"),
    (3, "KS KH 7D", "KC 7S 2H", "full_house", "KKK77", "20"),
    (4, "9H 8H 2H", "5H 3H KC", "flush", "98532", "15"),
    (5, "2H 3H 4H", "5H AS 9C", "straight", "A5432", "10"),
    (6, "QC QD 4S", "4H 9S QH", "full_house", "QQQ44", "20"),
    (7, "8S 8D 3C", "3D JS 2H", None, "J8833", None),
    (8, "7S 7H 7D", "2C 9S KD", "three_of_a_kind", "K9777", "7"),
    (9, "6D 7D 8D", "9D TD 2S", "straight_flush", "T9876", "200"),
]


def _ranks(codes: tuple[str, ...]) -> str:
    return "".join(sorted((c[0] for c in codes), key=lambda r: -RANK_VALUE[r]))


@pytest.mark.parametrize(("row", "a", "b", "category", "five", "ratio"), SIX_CARD_EXAMPLES)
def test_six_card_worked_examples(
    row: int, a: str, b: str, category: str | None, five: str, ratio: str | None
) -> None:
    six = six_card_bonus(split(a) + split(b))
    assert six.category == category
    assert _ranks(six.best_five) == five
    assert set(six.best_five) <= set(split(a) + split(b))
    bet = TeenPatti().resolve(deal(a, b)).bets["six_card_bonus"]
    if ratio is None:
        assert (bet.outcome, bet.category) == (Outcome.LOSE, None)
    else:
        assert (bet.outcome, bet.ratio, bet.category) == (Outcome.WIN, Decimal(ratio), category)


def test_six_card_exact_best_five() -> None:
    assert set(six_card_bonus(split("9H 8H 2H 5H 3H KC")).best_five) == set(split("9H 8H 2H 5H 3H"))
    assert set(six_card_bonus(split("2H 3H 4H 5H AS 9C")).best_five) == set(split("2H 3H 4H 5H AS"))


def test_wheel_not_allowed_examples() -> None:
    mixed = split("2H 3H 4H 5H AS 9C")
    assert six_card_bonus(mixed, wheel_allowed=False).category is None
    suited = split("AH 2H 3H 4H 5H 9C")
    assert six_card_bonus(suited).category == "straight_flush"
    assert six_card_bonus(suited, wheel_allowed=False).category == "flush"
    # 2-3-4-5-6 is not the wheel: still a straight when the wheel is refused
    assert six_card_bonus(split("AS 2H 3D 4C 5H 6S"), wheel_allowed=False).category == "straight"
    # K-A-2-3-4 never wraps
    assert six_card_bonus(split("KS AH 2D 3C 4H 9S")).category is None
    game = TeenPatti(TeenPattiOptions(six_card_wheel="NOT_ALLOWED"))
    assert game.resolve(deal("2H 3H 4H", "5H AS 9C")).bets["six_card_bonus"].outcome == Outcome.LOSE


# --- resolve(): every bet type ---------------------------------------------------------


def _bets(a: str, b: str, options: TeenPattiOptions | None = None) -> dict[str, tuple]:
    outcome = TeenPatti(options).resolve(deal(a, b))
    return {k: (v.outcome, v.ratio, v.category) for k, v in outcome.bets.items()}


W, L, P = Outcome.WIN, Outcome.LOSE, Outcome.PUSH
D = Decimal


def test_resolve_a_wins() -> None:
    assert _bets("AS AD AC", "KS KH KC") == {
        "player_a": (W, D("0.95"), None),
        "player_b": (L, D(0), None),
        "tie": (L, D(0), None),
        "pair_plus_a": (W, D(50), "trail_of_aces"),
        "pair_plus_b": (W, D(40), "three_of_a_kind"),
        "six_card_bonus": (W, D(20), "full_house"),
    }


def test_resolve_b_wins_pair_plus_on_the_losing_hand() -> None:
    # A loses but still holds a straight: Pair Plus A pays 6:1 (§5.2)
    assert _bets("4S 3H 2D", "KS KH KD") == {
        "player_a": (L, D(0), None),
        "player_b": (W, D("0.95"), None),
        "tie": (L, D(0), None),
        "pair_plus_a": (W, D(6), "straight"),
        "pair_plus_b": (W, D(40), "three_of_a_kind"),
        "six_card_bonus": (W, D(7), "three_of_a_kind"),
    }


def test_resolve_b_wins_high_card_loses_pair_plus() -> None:
    bets = _bets("KS AD 2C", "3C 3D JH")
    assert bets["player_b"] == (W, D("0.95"), None)
    assert bets["pair_plus_a"] == (L, D(0), "high_card")
    assert bets["pair_plus_b"] == (W, D(1), "pair")
    assert bets["six_card_bonus"] == (L, D(0), None)


def test_resolve_tie_refunds_mains_and_leaves_side_bets_alone() -> None:
    bets = _bets("AS KS QS", "AH KH QH")
    assert bets["player_a"] == bets["player_b"] == (P, D(0), None)
    assert bets["tie"] == (W, D(50), None)
    assert bets["pair_plus_a"] == bets["pair_plus_b"] == (W, D(30), "straight_flush")
    assert bets["six_card_bonus"] == (L, D(0), None)  # A-A-K-K-Q: two pair


def test_resolve_high_card_tie() -> None:
    bets = _bets("QH 9C 7S", "QD 9D 7C")
    assert bets["tie"] == (W, D(50), None)
    assert bets["pair_plus_a"] == bets["pair_plus_b"] == (L, D(0), "high_card")


def test_resolve_uses_configured_pay_tables() -> None:
    table = {"trail_of_aces": "100", "three_of_a_kind": 35, "straight_flush": "25", "straight": "5.5",
             "flush": "2", "pair": "1"}
    options = TeenPattiOptions.model_validate({"main_ratio": "1", "tie_ratio": "45", "pair_plus": table})
    bets = _bets("AS KD QC", "2H 2D 9S", options)
    assert bets["player_a"] == (W, D(1), None)
    assert bets["pair_plus_a"] == (W, D("5.5"), "straight")
    assert bets["pair_plus_b"] == (W, D(1), "pair")
    assert _bets("4D 4H 2S", "4C 4S 2H", options)["tie"] == (W, D(45), None)


def test_resolve_outcome_shape_and_json_details() -> None:
    outcome = TeenPatti().resolve(deal("KS KH 7D", "KC 7S 2H"))
    assert outcome.hands["A"].cards == ("KS", "KH", "7D")
    assert outcome.hands["A"].category == "pair"
    assert outcome.hands["B"].cards == ("KC", "7S", "2H")
    assert tuple(outcome.bets) == TeenPatti.bet_types
    assert json.loads(json.dumps(outcome.details)) == outcome.details
    assert outcome.details["six_card"]["category"] == "full_house"
    assert sorted(outcome.details["six_card"]["best_five"]) == sorted(split("KS KH KC 7D 7S"))


@pytest.mark.parametrize(
    ("cards", "message"),
    [
        ({k: v for k, v in deal("AS AD AC", "KS KH KC").items() if k != "B3"}, "missing"),
        (deal("AS AD AC", "KS KH AS"), "AS"),
        (deal("AS AD AC", "KS KH KC") | {"BURN1": "2C"}, "unexpected"),
        (deal("AS AD AC", "KS KH 10C"), "10C"),
    ],
)
def test_resolve_rejects_bad_deals(cards: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TeenPatti().resolve(cards)


# --- Card errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("codes", [["XS", "2H", "3H"], ["AS", "2Z", "3H"], ["as", "2H", "3H"], ["A", "2H", "3H"]])
def test_bad_card_code(codes: list[str]) -> None:
    with pytest.raises(CardError):
        evaluate3(codes)


def test_ten_must_be_t() -> None:
    with pytest.raises(CardError, match="'T'"):
        evaluate3(["10S", "2H", "3H"])


def test_duplicate_card() -> None:
    with pytest.raises(CardError, match="duplicate"):
        evaluate3(["AS", "AS", "KD"])
    with pytest.raises(CardError, match="duplicate"):
        six_card_bonus(split("AS KS QS JS TS AS"))


@pytest.mark.parametrize("codes", [["AS", "KS"], ["AS", "KS", "QS", "JS"], []])
def test_three_cards_required(codes: list[str]) -> None:
    with pytest.raises(ValueError, match="exactly 3"):
        evaluate3(codes)


def test_single_string_refused() -> None:
    with pytest.raises(CardError, match="sequence"):
        evaluate3("ASK")  # type: ignore[arg-type]


def test_six_cards_required() -> None:
    with pytest.raises(ValueError, match="exactly 6"):
        six_card_bonus(split("AS KS QS JS TS"))


# --- Exhaustive three-card counts ------------------------------------------------------------


def test_exhaustive_three_card_category_counts() -> None:
    counts = Counter(evaluate3(hand).category for hand in combinations(STANDARD_52, 3))
    assert counts == {
        "trail_of_aces": 4,  # C(4,3)
        "three_of_a_kind": 48,  # 12 ranks x C(4,3)
        "straight_flush": 48,  # 12 sequences x 4 suits
        "straight": 720,  # 12 x 4^3 - 48
        "flush": 1096,  # 4 x C(13,3) - 48
        "pair": 3744,  # 13 x C(4,2) x 48
        "high_card": 16440,  # the rest of C(52,3) = 22100
    }
    assert sum(counts.values()) == 22100


# --- Hypothesis properties -----------------------------------------------------------------

def _sign(x: tuple, y: tuple) -> int:
    return (x > y) - (x < y)


@given(hand3, hand3)
def test_compare3_antisymmetric_and_matches_key_order(a: list[str], b: list[str]) -> None:
    ha, hb = evaluate3(a), evaluate3(b)
    assert compare3(a, b) == -compare3(b, a)
    assert compare3(a, b) == _sign((ha.cat, ha.key), (hb.cat, hb.key))
    assert compare3(a, a) == 0


@given(hand3, hand3, hand3)
def test_compare3_transitive(a: list[str], b: list[str], c: list[str]) -> None:
    hands = [evaluate3(h) for h in (a, b, c)]
    by_compare = sorted(hands, key=cmp_to_key(compare3))
    by_key = sorted(hands, key=lambda h: (h.cat, h.key))
    assert [(h.cat, h.key) for h in by_compare] == [(h.cat, h.key) for h in by_key]
    if compare3(a, b) >= 0 and compare3(b, c) >= 0:
        assert compare3(a, c) >= 0


@given(hand3, hand3, suit_maps)
def test_ranking_invariant_under_suit_renaming(a: list[str], b: list[str], suits: dict[str, str]) -> None:
    ra, rb = rename(a, suits), rename(b, suits)
    assert evaluate3(ra) == evaluate3(a)
    assert evaluate3(ra).category == evaluate3(a).category
    assert compare3(ra, rb) == compare3(a, b)


@settings(deadline=None)
@given(six_cards, suit_maps, st.booleans())
def test_six_card_invariant_under_suit_renaming(codes: list[str], suits: dict[str, str], wheel: bool) -> None:
    assert six_card_bonus(rename(codes, suits), wheel).category == six_card_bonus(codes, wheel).category


def _reference_category5(codes: tuple[str, ...], wheel_allowed: bool) -> int:
    """An independent five-card classifier (category value of §3.4 only) to check the library mapping."""
    ranks = sorted((RANK_VALUE[c[0]] for c in codes), reverse=True)
    shape = sorted(Counter(ranks).values(), reverse=True)
    flush = len({c[1] for c in codes}) == 1
    distinct = len(set(ranks)) == 5
    straight = distinct and (ranks[0] - ranks[4] == 4 or (wheel_allowed and ranks == [14, 5, 4, 3, 2]))
    if straight and flush:
        return 7 if ranks[0] == 14 and ranks[4] == 10 else 6
    if shape[0] == 4:
        return 5
    if shape[:2] == [3, 2]:
        return 4
    if flush:
        return 3
    if straight:
        return 2
    return 1 if shape[0] == 3 else 0


@settings(deadline=None)
@given(six_cards, st.booleans())
def test_six_card_is_the_best_five_card_subset(codes: list[str], wheel: bool) -> None:
    six = six_card_bonus(codes, wheel)
    subset_cats = [_reference_category5(five, wheel) for five in combinations(codes, 5)]
    assert all(six.cat >= cat for cat in subset_cats)
    assert six.cat == max(subset_cats)
    assert _reference_category5(six.best_five, wheel) == six.cat
    assert len(six.best_five) == 5 and set(six.best_five) <= set(codes)


@settings(deadline=None)
@given(six_cards)
def test_exactly_one_main_result(codes: list[str]) -> None:
    outcome = TeenPatti().resolve(dict(zip(("A1", "A2", "A3", "B1", "B2", "B3"), codes)))
    mains = [outcome.bets[b].outcome for b in ("player_a", "player_b", "tie")]
    if outcome.winner == "TIE":
        assert mains == [P, P, W]
    else:
        assert mains.count(W) == 1 and P not in mains
        assert mains[0 if outcome.winner == "A" else 1] == W


wheel_suits = st.lists(st.sampled_from("SHDC"), min_size=5, max_size=5).filter(lambda s: len(set(s)) > 1)


@settings(deadline=None)
@given(wheel_suits, st.data())
def test_wheel_not_allowed_mixed_suits_is_not_a_straight(suits: list[str], data: st.DataObject) -> None:
    wheel = [r + s for r, s in zip("A2345", suits)]
    # a sixth card that cannot complete any other straight (no 6)
    sixth = data.draw(st.sampled_from([c for c in STANDARD_52 if c not in wheel and c[0] != "6"]))
    refused = six_card_bonus(wheel + [sixth], wheel_allowed=False).category
    allowed = six_card_bonus(wheel + [sixth], wheel_allowed=True).category
    assert refused not in ("straight", "straight_flush")
    assert refused in (None, "flush")
    # the sixth card may complete a suited wheel (e.g. AS with 2S 3S 4S 5S) or a flush
    assert allowed in ("straight", "flush", "straight_flush")


# --- Options -----------------------------------------------------------------------------


def test_default_options_are_the_rulebook_pay_tables() -> None:
    o = TeenPattiOptions()
    assert (o.deal_order, o.burn_cards, o.six_card_wheel, o.allow_opposite_main_bets) == ("ALTERNATE", 0, "ALLOWED", True)
    assert (o.main_ratio, o.tie_ratio) == (Decimal("0.95"), Decimal(50))
    assert o.pair_plus == {k: Decimal(v) for k, v in
                           {"trail_of_aces": 50, "three_of_a_kind": 40, "straight_flush": 30, "straight": 6,
                            "flush": 3, "pair": 1}.items()}
    assert o.six_card_bonus == {k: Decimal(v) for k, v in
                                {"royal_flush": 1000, "straight_flush": 200, "four_of_a_kind": 100,
                                 "full_house": 20, "flush": 15, "straight": 10, "three_of_a_kind": 7}.items()}
    assert set(o.six_card_bonus) == set(SIX_CARD_CATEGORIES)


def test_ratios_accept_strings_and_ints_exactly() -> None:
    o = TeenPattiOptions.model_validate({"main_ratio": "0.97", "tie_ratio": 40})
    assert o.main_ratio == Decimal("0.97") and isinstance(o.main_ratio, Decimal)
    assert o.tie_ratio == Decimal(40)


@pytest.mark.parametrize(
    "raw",
    [
        {"main_ratio": 0.95},
        {"tie_ratio": 50.0},
        {"pair_plus": {"trail_of_aces": 50, "three_of_a_kind": 40, "straight_flush": 30.0, "straight": 6,
                       "flush": 3, "pair": 1}},
    ],
)
def test_float_ratio_refused(raw: dict) -> None:
    with pytest.raises(ValidationError, match="float"):
        TeenPattiOptions.model_validate(raw)


def test_unknown_pay_table_key_refused() -> None:
    table = dict(TeenPattiOptions().pair_plus) | {"two_pair": Decimal(2)}
    with pytest.raises(ValidationError, match="unknown categories \\['two_pair'\\]"):
        TeenPattiOptions.model_validate({"pair_plus": table})
    with pytest.raises(ValidationError, match="unknown categories \\['high_card'\\]"):
        TeenPattiOptions.model_validate({"pair_plus": dict(TeenPattiOptions().pair_plus) | {"high_card": 1}})


def test_missing_pay_table_key_refused() -> None:
    table = {k: v for k, v in TeenPattiOptions().six_card_bonus.items() if k != "royal_flush"}
    with pytest.raises(ValidationError, match="missing categories \\['royal_flush'\\]"):
        TeenPattiOptions.model_validate({"six_card_bonus": table})


@pytest.mark.parametrize("raw", [{"main_ratio": "-0.95"}, {"tie_ratio": "NaN"}, {"main_ratio": "abc"},
                                 {"main_ratio": True}])
def test_bad_ratio_refused(raw: dict) -> None:
    with pytest.raises(ValidationError):
        TeenPattiOptions.model_validate(raw)


@pytest.mark.parametrize("raw", [{"rounding": "DOWN"}, {"deal_order": "RANDOM"}, {"burn_cards": 2},
                                 {"six_card_wheel": "MAYBE"}])
def test_extra_or_invalid_option_refused(raw: dict) -> None:
    with pytest.raises(ValidationError):
        TeenPattiOptions.model_validate(raw)


def test_options_are_frozen() -> None:
    with pytest.raises(ValidationError):
        TeenPattiOptions().main_ratio = Decimal(1)  # type: ignore[misc]


# --- Deal plan, deck, bets, registry ----------------------------------------------------------


def test_default_deal_plan_alternates() -> None:
    assert TeenPatti().deal_plan() == tuple(Position(n, Face.UP) for n in split("A1 B1 A2 B2 A3 B3"))


def test_block_deal_order_with_burn_card() -> None:
    game = TeenPatti.from_options({"deal_order": "BLOCK", "burn_cards": 1})
    plan = game.deal_plan()
    assert plan[0] == Position("BURN1", Face.DOWN, burn=True)
    assert plan[1:] == tuple(Position(n, Face.UP) for n in split("A1 A2 A3 B1 B2 B3"))


def test_block_deal_order_without_burn() -> None:
    plan = TeenPatti(TeenPattiOptions(deal_order="BLOCK")).deal_plan()
    assert [p.name for p in plan] == split("A1 A2 A3 B1 B2 B3")
    assert not any(p.burn for p in plan)


def test_alternate_with_burn_card() -> None:
    plan = TeenPatti(TeenPattiOptions(burn_cards=1)).deal_plan()
    assert [p.name for p in plan] == split("BURN1 A1 B1 A2 B2 A3 B3")
    assert [p.burn for p in plan] == [True] + [False] * 6


def test_deck_is_the_standard_52() -> None:
    assert TeenPatti().deck == frozenset(STANDARD_52)
    assert len(TeenPatti().deck) == 52


def test_check_bet() -> None:
    game = TeenPatti()
    assert game.check_bet("player_a", frozenset({"player_b"})) is None
    assert "unknown bet type" in (game.check_bet("banker", frozenset()) or "")
    strict = TeenPatti(TeenPattiOptions(allow_opposite_main_bets=False))
    assert "player_b" in (strict.check_bet("player_a", frozenset({"player_b", "tie"})) or "")
    assert "player_a" in (strict.check_bet("player_b", frozenset({"player_a"})) or "")
    assert strict.check_bet("player_a", frozenset({"tie", "pair_plus_a", "six_card_bonus"})) is None
    assert strict.check_bet("tie", frozenset({"player_a", "player_b"})) is None
    assert "unknown bet type" in (strict.check_bet("player_c", frozenset({"player_a"})) or "")


def test_registry() -> None:
    assert game_class("teen-patti") is TeenPatti
    assert isinstance(TeenPatti.from_options(None).options, TeenPattiOptions)


def test_hand3_is_ordered_by_cat_and_key() -> None:
    assert Hand3("flush", 3, (9, 7, 5)) > Hand3("high_card", 1, (14, 13, 11))
    assert evaluate3(split("AS AD AC")) > evaluate3(split("KS KH KC")) > evaluate3(split("AH KH QH"))


# --- hand_report (supervisor CLI) ----------------------------------------------------------


def test_hand_report_cli_example() -> None:
    report = hand_report(split("AS KD QC"), split("2H 3H 4H"))
    assert json.loads(json.dumps(report)) == report
    assert report["hands"]["A"] == {"cards": ["AS", "KD", "QC"], "category": "straight", "rank_key": [4, 12]}
    assert report["hands"]["B"]["category"] == "straight_flush"
    assert report["winner"] == "B"
    assert report["pair_plus"] == {"A": "straight", "B": "straight_flush"}
    assert report["six_card_bonus"]["category"] is None
    assert len(report["six_card_bonus"]["best_five"]) == 5
    assert report["bets"]["player_b"] == {"outcome": "WIN", "ratio": "0.95", "category": None}
    assert report["bets"]["pair_plus_b"] == {"outcome": "WIN", "ratio": "30", "category": "straight_flush"}
    assert report["bets"]["player_a"]["outcome"] == "LOSE"
    assert list(report["bets"]) == list(TeenPatti.bet_types)


def test_hand_report_with_options_and_errors() -> None:
    options = TeenPattiOptions(six_card_wheel="NOT_ALLOWED")
    assert hand_report(split("2H 3H 4H"), split("5H AS 9C"))["six_card_bonus"]["category"] == "straight"
    assert hand_report(split("2H 3H 4H"), split("5H AS 9C"), options)["six_card_bonus"]["category"] is None
    with pytest.raises(ValueError, match="exactly 3"):
        hand_report(split("AS KD"), split("2H 3H 4H"))
    with pytest.raises(CardError):
        hand_report(split("AS KD QC"), split("2H 3H AS"))
