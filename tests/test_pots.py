"""Pots, side pots, rake and splits (`seven-card-stud.md` §6.1-§6.3, `seotda.md` §7.2): pure
arithmetic in :mod:`dealer.core.pots`, the rulebooks' examples plus properties over random hands."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.pots import Pot, PotError, award, build_pots, rake_amount, split, take_rake, uncalled

D = Decimal
CENT = D("0.01")


def contributions(**amounts) -> dict[str, Decimal]:
    return {p: D(str(a)) for p, a in amounts.items()}


# -- build_pots (§6.1) ------------------------------------------------------------------------


def test_no_all_in_one_main_pot_for_every_live_player():
    assert build_pots(contributions(a=10, b=10, c=10), ["a", "b", "c"]) == [Pot(D(30), ("a", "b", "c"))]


def test_one_all_in_main_pot_and_side_pot():
    pots = build_pots(contributions(a=40, b=100, c=100), ["a", "b", "c"])
    assert pots == [Pot(D(120), ("a", "b", "c")), Pot(D(120), ("b", "c"))]


def test_seotda_side_pot_example_all_in_100_against_300_and_300():
    # seotda.md §7.2: A all-in 100; B and C 300 each -> main 300 {A,B,C}, side 400 {B,C}
    pots = build_pots(contributions(A=100, B=300, C=300), ["A", "B", "C"])
    assert pots == [Pot(D(300), ("A", "B", "C")), Pot(D(400), ("B", "C"))]


def test_several_all_ins_at_different_levels_give_one_side_pot_per_level():
    pots = build_pots(contributions(a=10, b=25, c=50, d=80, e=80), ["a", "b", "c", "d", "e"])
    assert pots == [
        Pot(D(50), ("a", "b", "c", "d", "e")),  # 10 x 5
        Pot(D(60), ("b", "c", "d", "e")),  # 15 x 4
        Pot(D(75), ("c", "d", "e")),  # 25 x 3
        Pot(D(60), ("d", "e")),  # 30 x 2
    ]


def test_folded_contributor_below_the_first_level_feeds_the_main_pot_only():
    pots = build_pots(contributions(a=40, b=100, c=100, f=15), ["a", "b", "c"])
    assert pots == [Pot(D(135), ("a", "b", "c")), Pot(D(120), ("b", "c"))]


def test_folded_contributor_between_levels_feeds_each_pot_up_to_what_they_put_in():
    pots = build_pots(contributions(a=40, b=100, c=100, f=70), ["a", "b", "c"])
    assert pots == [Pot(D(160), ("a", "b", "c")), Pot(D(150), ("b", "c"))]  # f: 40 + 30


def test_folded_contributor_above_the_top_level_feeds_the_last_pot():
    pots = build_pots(contributions(a=40, b=100, c=100, f=130), ["a", "b", "c"])
    assert pots == [Pot(D(160), ("a", "b", "c")), Pot(D(210), ("b", "c"))]  # f: 40 + 90


def test_same_eligible_players_form_one_pot():
    # three live players at one level, folded players at other levels: a single pot
    pots = build_pots(contributions(a=50, b=50, c=50, f=20, g=70), ["a", "b", "c"])
    assert pots == [Pot(D(240), ("a", "b", "c"))]


def test_eligible_players_are_listed_in_seat_order_not_by_amount():
    pots = build_pots(contributions(c=100, a=100, b=40), ["a", "b", "c"])
    assert pots == [Pot(D(120), ("a", "b", "c")), Pot(D(120), ("a", "c"))]


def test_last_player_standing_takes_a_single_pot():
    assert build_pots(contributions(a=5, b=3, c=0), ["a"]) == [Pot(D(8), ("a",))]


def test_build_pots_refuses_impossible_input():
    with pytest.raises(PotError, match="every player folded"):
        build_pots(contributions(a=1), [])
    with pytest.raises(PotError, match="no contribution"):
        build_pots(contributions(a=1), ["a", "z"])
    with pytest.raises(PotError, match="negative"):
        build_pots(contributions(a=1, b=-1), ["a"])


# -- uncalled chips (§6.2) ---------------------------------------------------------------------


def test_uncalled_excess_over_the_second_largest_goes_back_folded_chips_included():
    assert uncalled(contributions(a=2, b=6, c=4)) == ("b", D(2))
    assert uncalled(contributions(a=3, b=3)) is None
    assert uncalled(contributions(a=3, b=0)) == ("a", D(3))
    assert uncalled(contributions(a=0, b=0)) is None


# -- rake (§6.2) -------------------------------------------------------------------------------


def test_rake_examples_of_the_rulebook():
    assert rake_amount(D("25.00"), D("0.10"), D("3.00"), CENT) == D("2.50")
    assert rake_amount(D("48.00"), D("0.10"), D("3.00"), CENT) == D("3.00")


def test_rake_rounds_down_to_the_money_unit():
    assert rake_amount(D("1.09"), D("0.10"), D("3.00"), CENT) == D("0.10")
    assert rake_amount(D("0.09"), D("0.10"), D("3.00"), CENT) == D(0)
    assert rake_amount(D("19"), D("0.10"), D("3"), D(1)) == D(1)


def test_rake_comes_from_the_main_pot_first():
    pots = [Pot(D(30), ("a", "b", "c")), Pot(D(20), ("b", "c"))]
    assert take_rake(pots, D("3.00")) == [Pot(D(27), ("a", "b", "c")), Pot(D(20), ("b", "c"))]


def test_rake_larger_than_the_main_pot_continues_into_the_side_pots_in_order():
    pots = [Pot(D("1.20"), ("a", "b", "c")), Pot(D("0.50"), ("b", "c")), Pot(D(10), ("c", "d"))]
    assert take_rake(pots, D("3.00")) == [Pot(D(0), ("a", "b", "c")), Pot(D(0), ("b", "c")),
                                          Pot(D("8.70"), ("c", "d"))]


def test_rake_cannot_exceed_the_pots_or_be_negative():
    with pytest.raises(PotError):
        take_rake([Pot(D(1), ("a",))], D(2))
    with pytest.raises(PotError):
        take_rake([Pot(D(1), ("a",))], D(-1))


# -- split and award (§6.3) ---------------------------------------------------------------------


def test_split_evenly():
    assert split(D("10.00"), ["a", "b"], CENT) == {"a": D("5.00"), "b": D("5.00")}


def test_split_odd_unit_goes_to_the_first_winner_in_the_given_order():
    assert split(D("0.99"), ["b", "a"], CENT) == {"b": D("0.50"), "a": D("0.49")}


def test_split_several_odd_units_are_given_one_at_a_time_in_order():
    assert split(D("1.00"), ["c", "a", "b"], CENT) == {"c": D("0.34"), "a": D("0.33"), "b": D("0.33")}
    assert split(D("1.01"), ["c", "a", "b"], CENT) == {"c": D("0.34"), "a": D("0.34"), "b": D("0.33")}


def test_split_wraps_around_the_winners_only_as_far_as_the_units_go():
    # 7 units among 3: 2 each, the single leftover unit to the first winner
    assert split(D(7), ["x", "y", "z"], D(1)) == {"x": D(3), "y": D(2), "z": D(2)}
    # fewer units than winners: one unit each to the first ones, nothing to the rest
    assert split(D(2), ["x", "y", "z"], D(1)) == {"x": D(1), "y": D(1), "z": D(0)}


def test_split_refuses_amounts_not_in_units_and_no_winners():
    with pytest.raises(PotError, match="whole number"):
        split(D("1.005"), ["a"], CENT)
    with pytest.raises(PotError, match="at least one winner"):
        split(D(1), [], CENT)


def test_award_every_pot_goes_to_the_best_of_its_eligible_players():
    pots = build_pots(contributions(A=100, B=300, C=300), ["A", "B", "C"])
    strength = {"A": 3, "B": 1, "C": 2}
    won, records = award(pots, lambda eligible: [max(eligible, key=strength.get)], D(1))
    assert won == {"A": D(300), "C": D(400)}
    assert [(r["amount"], r["winners"], r["shares"]) for r in records] == [
        ("300", ["A"], {"A": "300"}), ("400", ["C"], {"C": "400"})]


def test_award_tie_splits_each_pot_in_the_games_odd_chip_order():
    pots = [Pot(D("0.99"), ("a", "b", "c")), Pot(D("0.51"), ("b", "c"))]
    won, _ = award(pots, lambda eligible: [p for p in ("c", "b") if p in eligible], CENT)
    assert won == {"c": D("0.76"), "b": D("0.74")}  # 0.50 + 0.26 and 0.49 + 0.25


def test_award_refuses_a_winner_who_is_not_eligible():
    with pytest.raises(PotError, match="not among its eligible"):
        award([Pot(D(1), ("a",))], lambda eligible: ["b"], D(1))
    with pytest.raises(PotError, match="not among its eligible"):
        award([Pot(D(1), ("a",))], lambda eligible: [], D(1))


# -- properties --------------------------------------------------------------------------------


hands = st.lists(st.tuples(st.integers(0, 500), st.booleans()), min_size=1, max_size=9).filter(
    lambda h: any(not folded for _, folded in h))


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(hands)
def test_pots_hold_exactly_the_contributions_and_only_live_players_are_eligible(hand):
    contrib = {f"p{i}": D(a) * CENT for i, (a, _) in enumerate(hand)}
    live = [f"p{i}" for i, (_, folded) in enumerate(hand) if not folded]
    pots = build_pots(contrib, live)
    assert sum(p.amount for p in pots) == sum(contrib.values())
    assert all(p.amount >= 0 and p.eligible for p in pots)
    for pot in pots:
        assert set(pot.eligible) <= set(live)
        assert list(pot.eligible) == [p for p in live if p in pot.eligible]  # seat order kept
    # every later pot is open to fewer players, and the top live contributors reach the last pot
    for earlier, later in zip(pots, pots[1:]):
        assert set(later.eligible) < set(earlier.eligible)
    top = max(contrib[p] for p in live)
    assert set(pots[-1].eligible) == {p for p in live if contrib[p] == top}
    # a live player can win from each opponent at most what they put in themselves
    for p in live:
        reachable = sum((pot.amount for pot in pots if p in pot.eligible), D(0))
        assert reachable == sum((min(c, contrib[p]) for q, c in contrib.items()), D(0)) + (
            sum((c - top for c in contrib.values() if c > top), D(0)) if contrib[p] == top else 0)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(hands, st.sampled_from(["0.05", "0.10", "0.25"]), st.integers(0, 500), st.data())
def test_rake_and_award_conserve_every_unit(hand, rate, cap_units, data):
    contrib = {f"p{i}": D(a) * CENT for i, (a, _) in enumerate(hand)}
    live = [f"p{i}" for i, (_, folded) in enumerate(hand) if not folded]
    pots = build_pots(contrib, live)
    total = sum(p.amount for p in pots)
    rake = rake_amount(total, D(rate), cap_units * CENT, CENT)
    assert 0 <= rake <= min(total * D(rate), cap_units * CENT) and rake % CENT == 0
    raked = take_rake(pots, rake)
    assert sum(p.amount for p in raked) == total - rake
    assert [p.eligible for p in raked] == [p.eligible for p in pots]

    def winners_of(eligible):
        return data.draw(st.lists(st.sampled_from(list(eligible)), min_size=1, unique=True))

    won, _ = award(raked, winners_of, CENT)
    assert sum(won.values()) == total - rake
    assert all(amount >= 0 and player in live for player, amount in won.items())


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9))
def test_split_shares_differ_by_at_most_one_unit_and_sum_to_the_pot(units, n):
    winners = [f"w{i}" for i in range(n)]
    shares = split(units * CENT, winners, CENT)
    assert sum(shares.values()) == units * CENT
    amounts = [shares[w] for w in winners]
    assert max(amounts) - min(amounts) <= CENT
    assert amounts == sorted(amounts, reverse=True)  # the odd units go first in the given order
