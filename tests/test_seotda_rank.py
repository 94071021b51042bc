"""Seotda ranking and one-pot showdown (`seotda.md` §4, §5, §7.2, §9) and ``dealer hand seotda``."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import SEOTDA_20, CardError
from dealer.cli.main import main
from dealer.games.seotda_rank import (
    RankRules,
    SeotdaHand,
    Showdown,
    all_hands,
    evaluate,
    hand_report,
    showdown,
)

ALWAYS = RankRules(rematch_94_mode="ALWAYS")
PROMPT = RankRules(rematch_94_mode="PROMPT")
SPLIT = RankRules(draw_resolution="SPLIT")


def seats(*hands: str) -> dict[str, list[str]]:
    """``seats("03G 08G", "10A 10R")`` -> {"S1": [...], "S2": [...]} in S1-first order."""
    return {f"S{i}": hand.split() for i, hand in enumerate(hands, start=1)}


def win(who: str, step: int):
    return lambda r: r.kind == "WIN" and r.winners == (who,) and r.participants == () and r.step == step


def rematch_94(*who: str, step: int):
    return lambda r: r.kind == "REMATCH_94" and r.participants == who and r.winners == () and r.step == step


def rematch_draw(*who: str):
    return lambda r: r.kind == "REMATCH_DRAW" and r.participants == who and r.winners == () and r.step == 5


# --- §4: the 190 hands -----------------------------------------------------------------


def test_all_190_hands_are_the_pairs_of_the_20_cards():
    hands = all_hands()
    assert len(hands) == 190 == len(set(map(frozenset, hands)))
    assert all(a != b and a in SEOTDA_20 and b in SEOTDA_20 for a, b in hands)


def _expected_counts() -> Counter:
    """Class counts by brute force over MONTHS with 2 cards each (not over codes, not via
    evaluate): same month -> 1 pair; two months -> 2 x 2 hands, minus the 3 bright pairs."""
    specials = {frozenset({1, 2}): "al-li", frozenset({1, 4}): "dok-sa", frozenset({1, 9}): "gu-bbing",
                frozenset({1, 10}): "jang-bbing", frozenset({4, 10}): "jang-sa", frozenset({4, 6}): "se-ryuk"}
    bright_months = [{1, 3}, {1, 8}, {3, 8}]  # one of the 4 hands of each is the bright pair
    counts: Counter = Counter()
    for m in range(1, 11):
        counts[f"pair {m}"] += 1
    for m1, m2 in combinations(range(1, 11), 2):
        key = frozenset({m1, m2})
        if key in specials:
            counts[specials[key]] += 4
            continue
        n = 4
        if {m1, m2} in bright_months:
            counts["bright"] += 1
            n = 3
        counts[f"points {(m1 + m2) % 10}"] += n
    return counts


def test_class_counts_over_all_190_hands():
    special_of = {306: "al-li", 305: "dok-sa", 304: "gu-bbing", 303: "jang-bbing", 302: "jang-sa", 301: "se-ryuk"}
    got: Counter = Counter()
    ranks: Counter = Counter()
    for cards in all_hands():
        h = evaluate(cards)
        ranks[h.rank] += 1
        if h.category == "bright_pair":
            got["bright"] += 1
        elif h.category == "pair":
            got[f"pair {h.rank - 400}"] += 1
        elif h.category == "special":
            got[special_of[h.rank]] += 1
        else:
            assert h.category == "points" and 200 <= h.rank <= 209
            got[f"points {h.rank - 200}"] += 1
    expected = _expected_counts()
    assert got == expected and sum(expected.values()) == 190
    assert ranks[503] == ranks[502] == ranks[501] == 1
    assert all(ranks[400 + m] == 1 for m in range(1, 11))
    assert all(ranks[r] == 4 for r in range(301, 307))
    assert sum(ranks[r] for r in range(200, 210)) == 190 - 3 - 10 - 24


def test_ranks_form_a_total_preorder_consistent_with_the_tiers():
    hands = [evaluate(c) for c in all_hands()]
    tier = {"points": 0, "special": 1, "pair": 2, "bright_pair": 3}
    for a in hands:
        for b in hands:
            # totality and tiers: a higher tier always has a higher rank
            assert (a.rank >= b.rank) or (b.rank >= a.rank)
            if tier[a.category] > tier[b.category]:
                assert a.rank > b.rank
    # equal rank <=> same name (except function hands, which carry their own name)
    by_rank: dict[int, set[str]] = {}
    for h in hands:
        if h.function is None:
            by_rank.setdefault(h.rank, set()).add(h.name)
    assert all(len(names) == 1 for names in by_rank.values())


def test_non_bright_versions_of_1_3_1_8_3_8_are_point_hands():
    bright = {frozenset({"03G", "08G"}), frozenset({"01G", "08G"}), frozenset({"01G", "03G"})}
    for a, b in all_hands():
        months = {int(a[:2]), int(b[:2])}
        if months in ({1, 3}, {1, 8}, {3, 8}) and frozenset({a, b}) not in bright:
            h = evaluate([a, b])
            assert h.category == "points" and h.rank == 200 + sum(months) % 10
    assert evaluate(["01G", "03R"]).rank == 204 and evaluate(["01R", "08A"]).rank == 209
    assert evaluate(["03G", "08A"]).rank == 201


@pytest.mark.parametrize("cards, rank, name, category, function", [
    (["08G", "03G"], 503, "3·8 Bright Pair (Sam-pal Gwang-ttaeng)", "bright_pair", None),
    (["01G", "08G"], 502, "1·8 Bright Pair (Il-pal Gwang-ttaeng)", "bright_pair", None),
    (["01G", "03G"], 501, "1·3 Bright Pair (Il-sam Gwang-ttaeng)", "bright_pair", None),
    (["10R", "10A"], 410, "10·10 Pair (Jang-ttaeng)", "pair", None),
    (["01G", "01R"], 401, "1·1 Pair (Bbing-ttaeng)", "pair", None),
    (["02A", "01G"], 306, "Al-li (1·2)", "special", None),
    (["10A", "04R"], 302, "Jang-sa (10·4)", "special", None),
    (["06R", "03R"], 209, "9 points (Gap-o)", "points", None),
    (["05R", "06A"], 201, "1 point (Han-kkeut)", "points", None),
    (["02A", "08A"], 200, "Mangtong (0 points)", "points", None),
    (["07A", "04A"], 201, "Bright Pair Hunter 4·7 (Am-haeng-eo-sa), 1 point", "points", "BRIGHT_PAIR_HUNTER"),
    (["04A", "09A"], 203, "Animal 9·4 (Meong-teong-gu-ri Gu-sa), 3 points", "points", "ANIMAL_94"),
    (["03G", "07A"], 200, "Pair Hunter 3·7 (Ttaeng-jab-i), Mangtong", "points", "PAIR_HUNTER"),
    (["09A", "04R"], 203, "9·4 (Gu-sa), 3 points", "points", "NINE_FOUR"),
    (["04R", "09R"], 203, "9·4 (Gu-sa), 3 points", "points", "NINE_FOUR"),
    (["04A", "07R"], 201, "1 point (Han-kkeut)", "points", None),  # not both animals
    (["03R", "07A"], 200, "Mangtong (0 points)", "points", None),  # 03G_07A only, by default
])
def test_evaluate_names_and_functions(cards, rank, name, category, function):
    h = evaluate(cards)
    assert (h.rank, h.name, h.category, h.function) == (rank, name, category, function)
    assert h.cards == tuple(sorted(cards))


def test_function_hands_are_exactly_those_of_section_4_2():
    functions = Counter(evaluate(c).function for c in all_hands())
    assert functions == {None: 190 - 1 - 1 - 1 - 3, "BRIGHT_PAIR_HUNTER": 1, "ANIMAL_94": 1,
                         "PAIR_HUNTER": 1, "NINE_FOUR": 3}
    any_37 = Counter(evaluate(c, RankRules(pair_hunter_cards="ANY_3_7")).function for c in all_hands())
    assert any_37["PAIR_HUNTER"] == 4


@pytest.mark.parametrize("cards, words", [
    (["11A", "01G"], ["11A", "November"]),
    (["11G", "01G"], ["11G", "month 11"]),
    (["12JD", "01G"], ["12JD", "junk"]),
    (["01J1", "01G"], ["01J1", "junk"]),
    (["AS", "01G"], ["AS", "52-card"]),
    (["1G", "01G"], ["1G"]),
    (["01G"], ["exactly 2 cards"]),
    (["01G", "02A", "03G"], ["exactly 2 cards"]),
    (["01G", "01G"], ["duplicate", "01G"]),
    ("01G02A", ["single string"]),
])
def test_evaluate_is_strict(cards, words):
    with pytest.raises(ValueError) as info:
        evaluate(cards)
    assert all(w in str(info.value) for w in words)


def test_bad_cards_are_card_errors():
    for bad in (["11G", "01G"], ["AS", "01G"], ["01G", "01G"]):
        with pytest.raises(CardError):
            evaluate(bad)


def test_rank_rules_refuse_unknown_values_and_keys():
    with pytest.raises(ValueError, match="rematch_94_mode"):
        RankRules(rematch_94_mode="SOMETIMES")  # type: ignore[arg-type]
    assert RankRules.from_options(["REMATCH_94_MODE=always", "draw_resolution=Split"]) == RankRules(
        rematch_94_mode="ALWAYS", draw_resolution="SPLIT")
    assert RankRules.from_options(["pair_hunter_cards=any_3_7"]).pair_hunter_cards == "ANY_3_7"
    with pytest.raises(ValueError, match="unknown seotda option 'max_rematches'"):
        RankRules.from_options(["max_rematches=3"])
    with pytest.raises(ValueError, match="key=value"):
        RankRules.from_options(["ALWAYS"])


# --- §5.1: the 19 worked examples ------------------------------------------------------

EXAMPLES = [
    (1, seats("03G 08G", "10A 10R"), RankRules(), win("S1", 5)),
    (2, seats("01G 08G", "04A 07A"), RankRules(), win("S2", 1)),
    (3, seats("03G 08G", "04A 07A"), RankRules(), win("S1", 5)),
    (4, seats("04A 07A", "05A 10R"), RankRules(), win("S2", 5)),
    (5, seats("03G 07A", "09A 09R"), RankRules(), win("S1", 3)),
    (6, seats("03G 07A", "10A 10R"), RankRules(), win("S2", 5)),
    (7, seats("03G 07A", "01R 02A"), RankRules(), win("S2", 5)),
    (8, seats("04A 09A", "08G 08A"), RankRules(), rematch_94("S1", "S2", step=2)),
    (9, seats("04A 09A", "10A 10R"), RankRules(), win("S2", 5)),
    (10, seats("04R 09R", "01G 02A"), RankRules(), rematch_94("S1", "S2", step=4)),
    (11, seats("04R 09A", "01G 01R"), RankRules(), win("S2", 5)),
    (12, seats("01R 02A", "01G 02R"), RankRules(), rematch_draw("S1", "S2")),
    (13, seats("03G 07A", "04A 09A", "05A 05R"), RankRules(), rematch_94("S1", "S2", "S3", step=2)),
    (14, seats("10A 04R", "04A 06R"), RankRules(), win("S1", 5)),
    (15, seats("02A 08A", "05R 06A"), RankRules(), win("S2", 5)),
    (16, seats("01G 03R", "02R 06R"), RankRules(), win("S2", 5)),
    (17, seats("04R 09R", "05A 07A", "06A 10R"), RankRules(), rematch_94("S1", "S2", "S3", step=4)),
    (17, seats("04R 09R", "05A 07A", "06A 10R"), ALWAYS, rematch_94("S1", "S2", "S3", step=4)),
    (18, seats("04R 09R", "05A 07A"), RankRules(), win("S1", 4)),
    (18, seats("04R 09R", "05A 07A"), ALWAYS, rematch_94("S1", "S2", step=4)),
    (19, seats("01R 09A", "06R 03R"), RankRules(), win("S1", 5)),
]


@pytest.mark.parametrize("number, contenders, rules, check", EXAMPLES,
                         ids=[f"ex{n}-{r.rematch_94_mode}" for n, _, r, _ in EXAMPLES])
def test_worked_examples_of_section_5_1(number, contenders, rules, check):
    result = showdown(contenders, rules)
    assert isinstance(result, Showdown) and check(result), result
    assert result.reason


def test_all_nineteen_examples_are_covered():
    assert sorted({n for n, *_ in EXAMPLES}) == list(range(1, 20))


def test_order_example_rematch_before_the_pair_hunter_catches_the_5_5():
    """§5: Pair Hunter + Animal 9·4 + 5·5 -> step 2 sees 405 and rematches all three, whatever
    the seat order."""
    for order in (("S1", "S2", "S3"), ("S3", "S1", "S2"), ("S2", "S3", "S1")):
        hands = {"S1": ["03G", "07A"], "S2": ["04A", "09A"], "S3": ["05A", "05R"]}
        result = showdown({s: hands[s] for s in order})
        assert result.kind == "REMATCH_94" and result.step == 2 and result.participants == order


def test_single_contender_wins_without_any_function():
    result = showdown(seats("04A 09A"))  # a lone Animal 9·4 must not rematch against nobody
    assert result == Showdown("WIN", ("S1",), (), 0, "S1 is the only contender")


def test_showdown_accepts_evaluated_hands_and_refuses_shared_cards():
    evaluated = {"S1": evaluate(["03G", "07A"]), "S2": evaluate(["09A", "09R"])}
    assert win("S1", 3)(showdown(evaluated))
    with pytest.raises(CardError, match="03G"):
        showdown(seats("03G 08G", "03G 07A"))
    with pytest.raises(CardError, match="S2"):
        showdown(seats("03G 08G", "11G 07A"))
    with pytest.raises(ValueError, match="at least one"):
        showdown({})
    with pytest.raises(ValueError, match="non-contenders"):
        showdown(seats("04R 09R", "05A 07A"), PROMPT, {"S9": True})


# --- house options ---------------------------------------------------------------------


def test_animal_94_threshold_nine_points():
    nine_points = RankRules(animal_94_threshold="NINE_POINTS")
    # vs 8·8: default rematches, NINE_POINTS does not (8·8 wins at step 5)
    assert rematch_94("S1", "S2", step=2)(showdown(seats("04A 09A", "08G 08A")))
    assert win("S2", 5)(showdown(seats("04A 09A", "08G 08A"), nine_points))
    # vs 9 points: both rematch; exactly at the NINE_POINTS threshold (209)
    assert rematch_94("S1", "S2", step=2)(showdown(seats("04A 09A", "06R 03R"), nine_points))
    # vs Al-li under NINE_POINTS: step 2 fails and the Animal 9·4 is not a plain 9·4 (step 4)
    assert win("S2", 5)(showdown(seats("04A 09A", "01G 02A"), nine_points))
    assert rematch_94("S1", "S2", step=2)(showdown(seats("04A 09A", "01G 02A")))


def test_pair_hunter_any_3_7():
    any_37 = RankRules(pair_hunter_cards="ANY_3_7")
    assert win("S2", 5)(showdown(seats("03R 07R", "05A 05R")))  # plain Mangtong by default
    assert win("S1", 3)(showdown(seats("03R 07R", "05A 05R"), any_37))
    assert win("S1", 3)(showdown(seats("03G 07A", "05A 05R"), any_37))
    # two Pair Hunters (03G+07R, 03R+07A) both catch the pair: equal hands, a draw at step 3
    two = seats("03G 07R", "03R 07A", "05A 05R")
    result = showdown(two, any_37)
    assert (result.kind, result.participants, result.step) == ("REMATCH_DRAW", ("S1", "S2"), 3)
    split = showdown(two, RankRules(pair_hunter_cards="ANY_3_7", draw_resolution="SPLIT"))
    assert (split.kind, split.winners, split.participants, split.step) == ("SPLIT", ("S1", "S2"), (), 3)


def test_prompt_mode():
    ex18 = seats("04R 09R", "05A 07A")  # S1 unique best with its 9·4
    assert win("S1", 4)(showdown(ex18, PROMPT))  # no answer (timeout) = AUTO_BEST
    assert rematch_94("S1", "S2", step=4)(showdown(ex18, PROMPT, {"S1": True}))
    assert win("S1", 5)(showdown(ex18, PROMPT, {"S1": False}))  # plays on: best hand wins
    ex10 = seats("04R 09R", "01G 02A")
    assert rematch_94("S1", "S2", step=4)(showdown(ex10, PROMPT))  # AUTO_BEST: rematch
    assert win("S2", 5)(showdown(ex10, PROMPT, {"S1": False}))  # plays on and loses to Al-li
    assert win("S2", 5)(showdown(ex10, PROMPT, {"S1": False, "S2": True}))  # S2 holds no 9·4
    # Animal 9·4 holder plays on: the Pair Hunter now catches the 5·5 (step 3)
    ex13 = seats("03G 07A", "04A 09A", "05A 05R")
    assert win("S1", 3)(showdown(ex13, PROMPT, {"S2": False}))
    assert rematch_94("S1", "S2", "S3", step=2)(showdown(ex13, PROMPT, {"S2": True}))
    # the choice is ignored outside PROMPT
    assert rematch_94("S1", "S2", step=4)(showdown(ex10, RankRules(), {"S1": False}))


def test_split_draw_resolution_keeps_seat_order():
    result = showdown({"S2": ["01G", "02R"], "S3": ["05A", "07A"], "S1": ["01R", "02A"]}, SPLIT)
    assert (result.kind, result.winners, result.participants, result.step) == ("SPLIT", ("S2", "S1"), (), 5)
    assert "S2" in result.reason  # odd chip to the first tied player in the given (S1-first) order
    assert showdown(seats("01R 02A", "01G 02R"), SPLIT).winners == ("S1", "S2")


def test_allow_rematch_false_ignores_9_4_and_splits_draws():
    assert win("S2", 5)(showdown(seats("04A 09A", "08G 08A"), allow_rematch=False))
    assert win("S2", 5)(showdown(seats("04R 09R", "01G 02A"), ALWAYS, allow_rematch=False))
    assert win("S1", 3)(showdown(seats("03G 07A", "04A 09A", "05A 05R"), allow_rematch=False))
    assert win("S1", 5)(showdown(seats("04R 09R", "05A 07A"), ALWAYS, allow_rematch=False))
    result = showdown(seats("01R 02A", "01G 02R"), allow_rematch=False)
    assert (result.kind, result.winners, result.participants) == ("SPLIT", ("S1", "S2"), ())
    assert "limit" in result.reason


# --- special-hand interactions ---------------------------------------------------------


def test_bright_pair_hunter():
    assert win("S2", 5)(showdown(seats("04A 07A", "03G 08G")))  # never beats 3·8
    assert win("S1", 1)(showdown(seats("04A 07A", "01G 03G")))  # beats 1·3
    assert win("S1", 1)(showdown(seats("04A 07A", "01G 08G", "10A 10R")))  # beats 1·8 (and all below)
    assert win("S1", 5)(showdown(seats("04A 07A", "02A 08A")))  # no bright pair: 1 point beats Mangtong
    assert win("S2", 5)(showdown(seats("04A 07A", "02R 10R")))  # 2 points beat its 1 point
    tie = showdown(seats("04A 07A", "05R 06A"))  # 1 point vs 1 point
    assert tie.kind == "REMATCH_DRAW" and tie.participants == ("S1", "S2")


def test_pair_hunter():
    assert win("S2", 5)(showdown(seats("03G 07A", "10A 10R")))  # never 10·10
    assert win("S2", 5)(showdown(seats("03G 07A", "01G 08G")))  # never a bright pair
    assert win("S1", 3)(showdown(seats("03G 07A", "01G 01R")))  # 1·1 is caught
    assert win("S1", 3)(showdown(seats("03G 07A", "09A 09R", "01G 02A")))  # the best other is 9·9
    assert win("S3", 5)(showdown(seats("03G 07A", "09A 09R", "10A 10R")))  # 10·10 is best other
    # no pair opposing: Mangtong, ties another Mangtong and loses to 1 point
    assert rematch_draw("S1", "S2")(showdown(seats("03G 07A", "02A 08A")))
    assert win("S2", 5)(showdown(seats("03G 07A", "05R 06A")))


def test_two_plain_9_4_hands_trigger_the_same_rematch():
    two_plain = seats("04R 09A", "05A 07A", "09R 04A")  # 04A+09R is plain (not both animals)
    assert [evaluate(h).function for h in two_plain.values()] == ["NINE_FOUR", None, "NINE_FOUR"]
    # neither is the unique best (both 203), so AUTO_BEST rematches all contenders
    assert rematch_94("S1", "S2", "S3", step=4)(showdown(two_plain))
    assert rematch_94("S1", "S2", step=4)(showdown(seats("04R 09A", "09R 04A")))
    # PROMPT: one holder asking is enough; both playing on -> they tie at step 5
    assert rematch_94("S1", "S2", "S3", step=4)(showdown(two_plain, PROMPT, {"S1": False, "S3": True}))
    assert rematch_94("S1", "S2", "S3", step=4)(showdown(two_plain, PROMPT, {"S1": False}))  # S3: AUTO_BEST
    result = showdown(two_plain, PROMPT, {"S1": False, "S3": False})
    assert (result.kind, result.participants, result.step) == ("REMATCH_DRAW", ("S1", "S3"), 5)


def test_9_4_exactly_at_the_al_li_threshold():
    assert rematch_94("S1", "S2", step=4)(showdown(seats("04R 09R", "01G 02A")))  # Al-li 306: rematch
    assert rematch_94("S1", "S2", step=4)(showdown(seats("04R 09R", "01G 04A")))  # Dok-sa 305 < 306
    assert win("S2", 5)(showdown(seats("04R 09R", "01G 01R")))  # 1·1 (401) is above Al-li
    # the Animal 9·4 against Al-li: inside 9·9 (default), outside 9 points
    assert rematch_94("S1", "S2", step=2)(showdown(seats("04A 09A", "01G 02A")))
    assert win("S2", 5)(showdown(seats("04A 09A", "01G 02A"), RankRules(animal_94_threshold="NINE_POINTS")))


def test_animal_9_4_against_pairs():
    assert rematch_94("S1", "S2", step=2)(showdown(seats("04A 09A", "08G 08A")))  # 8·8
    assert rematch_94("S1", "S2", "S3", step=2)(showdown(seats("04A 09A", "01G 01R", "02A 02R")))
    assert win("S2", 5)(showdown(seats("04A 09A", "10A 10R")))  # 10·10: no rematch
    assert win("S2", 5)(showdown(seats("04A 09A", "01G 03G")))  # bright pair: no rematch
    # 9·9 needs 09A, which the Animal 9·4 holds: the "9·9 or lower" edge cannot occur in a deal
    with pytest.raises(CardError, match="09A"):
        showdown(seats("04A 09A", "09A 09R"))


# --- properties (hypothesis) -------------------------------------------------------------

RULES = st.builds(
    RankRules,
    animal_94_threshold=st.sampled_from(["NINE_PAIR", "NINE_POINTS"]),
    pair_hunter_cards=st.sampled_from(["03G_07A", "ANY_3_7"]),
    rematch_94_mode=st.sampled_from(["AUTO_BEST", "ALWAYS", "PROMPT"]),
    draw_resolution=st.sampled_from(["REMATCH", "SPLIT"]),
)
FUNCTION_HANDS = [("04A", "07A"), ("04A", "09A"), ("03G", "07A"), ("04R", "09R"), ("03R", "07R")]


@st.composite
def deals(draw) -> dict[str, list[str]]:
    """2-10 contenders dealt from a shuffled deck; often one holds a function hand."""
    deck = list(draw(st.permutations(SEOTDA_20)))
    forced = draw(st.none() | st.sampled_from(FUNCTION_HANDS))
    if forced:
        deck = list(forced) + [c for c in deck if c not in forced]
    n = draw(st.integers(2, 10))
    return {f"S{i + 1}": deck[2 * i:2 * i + 2] for i in range(n)}


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(deal=deals(), rules=RULES, order=st.randoms(use_true_random=False),
       answers=st.dictionaries(st.sampled_from([f"S{i}" for i in range(1, 11)]), st.booleans()),
       allow=st.booleans())
def test_showdown_properties(deal, rules, order, answers, allow):
    choice = {k: v for k, v in answers.items() if k in deal}
    result = showdown(deal, rules, choice, allow_rematch=allow)
    names = list(deal)
    ranks = {p: evaluate(deal[p], rules).rank for p in names}

    shuffled = names[:]
    order.shuffle(shuffled)
    again = showdown({p: deal[p] for p in shuffled}, rules, choice, allow_rematch=allow)
    assert (again.kind, again.step, set(again.winners), set(again.participants)) == (
        result.kind, result.step, set(result.winners), set(result.participants))
    if result.kind != "SPLIT":
        assert again.winners == result.winners

    assert 1 <= result.step <= 5
    if result.kind == "WIN":
        assert len(result.winners) == 1 and result.winners[0] in deal and result.participants == ()
    elif result.kind == "SPLIT":
        assert len(result.winners) >= 2 and result.participants == ()
        assert list(result.winners) == [p for p in names if p in result.winners]  # seat order
        assert len({ranks[p] for p in result.winners}) == 1
    else:
        assert allow and result.winners == () and set(result.participants) <= set(deal)
        assert list(result.participants) == [p for p in names if p in result.participants]
        if result.kind == "REMATCH_94":
            assert result.participants == tuple(names) and result.step in (2, 4)
        else:
            assert len(result.participants) >= 2 and len({ranks[p] for p in result.participants}) == 1
            if result.step == 5:
                assert {ranks[p] for p in result.participants} == {max(ranks.values())}
    if result.step == 5 and result.kind == "WIN":
        assert ranks[result.winners[0]] > max(r for p, r in ranks.items() if p != result.winners[0])


@given(cards=st.permutations(SEOTDA_20), rules=RULES)
def test_evaluate_ignores_card_order(cards, rules):
    a, b = cards[:2]
    assert evaluate([a, b], rules) == evaluate([b, a], rules)
    assert isinstance(evaluate([a, b], rules), SeotdaHand)


# --- report and CLI --------------------------------------------------------------------


def test_hand_report_is_json_safe():
    report = hand_report(["03G", "07A"], [["04A", "09A"], ["05A", "05R"]])
    assert json.loads(json.dumps(report)) == report
    assert report["winner"] is None and report["split"] is None
    assert report["rematch"] == {"kind": "REMATCH_94", "participants": ["S1", "S2", "S3"]}
    assert [h["function"] for h in report["hands"]] == ["PAIR_HUNTER", "ANIMAL_94", None]
    with pytest.raises(ValueError, match="--vs"):
        hand_report(["03G", "07A"], [])


def test_cli_hand_seotda(capsys):
    assert main(["hand", "seotda", "03G", "08G", "--vs", "04A", "07A", "--vs", "01G", "02A"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["winner"] == "S1" and report["rematch"] is None and report["step"] == 5
    assert [h["rank"] for h in report["hands"]] == [503, 201, 306]
    assert report["hands"][0]["name"] == "3·8 Bright Pair (Sam-pal Gwang-ttaeng)"

    assert main(["hand", "seotda", "01G", "08G", "--vs", "04A", "07A"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["winner"] == "S2" and report["step"] == 1


def test_cli_hand_seotda_options(capsys):
    ex18 = ["hand", "seotda", "04R", "09R", "--vs", "05A", "07A"]
    assert main(ex18) == 0
    assert json.loads(capsys.readouterr().out)["winner"] == "S1"
    assert main([*ex18, "--option", "REMATCH_94_MODE=ALWAYS"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rematch"] == {"kind": "REMATCH_94", "participants": ["S1", "S2"]}
    assert report["rules"]["rematch_94_mode"] == "ALWAYS"
    assert main(["hand", "seotda", "01R", "02A", "--vs", "01G", "02R", "--option", "draw_resolution=SPLIT"]) == 0
    assert json.loads(capsys.readouterr().out)["split"] == ["S1", "S2"]
    assert main([*ex18, "--option", "max_rematches=2"]) == 2
    assert "unknown seotda option 'max_rematches'" in capsys.readouterr().err
    assert main([*ex18, "--option", "rematch_94_mode=SOMETIMES"]) == 2
    assert "AUTO_BEST, ALWAYS, PROMPT" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["11A", "08G", "--vs", "04A", "07A"], ["11A", "S1"]),
    (["03G", "08G", "--vs", "AS", "07A"], ["AS", "S2", "52-card"]),
    (["03G", "08G", "--vs", "04A", "07A", "09A"], ["exactly 2 cards"]),
    (["03G", "08G", "--vs", "03G", "07A"], ["03G", "held twice"]),
])
def test_cli_hand_seotda_refuses_bad_cards(capsys, argv, words):
    assert main(["hand", "seotda", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("dealer hand: ")
    assert all(w in captured.err for w in words) and "Traceback" not in captured.err
