"""Seven-Card Stud evaluation (`seven-card-stud.md` §3.2, §3.3, §5, §6.3): the rulebook's worked
examples, the announcements, strict input, and agreement with pokerkit as an independent check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pokerkit import StandardHighHand

from dealer.core.cards import STANDARD_52, CardError
from dealer.cli.main import main
from dealer.games.stud_eval import (
    card_name,
    evaluate,
    first_to_act,
    hand_report,
    low_card,
    odd_chip_key,
    showing_key,
    showing_name,
)


def hand(cards: str):
    return evaluate(cards.split())


# §5.3 rows 1-7: seven cards -> best five (announcement order), category, name.
SINGLE_EXAMPLES = [
    ("AS KS QS JS TS 2C 2D", "AS KS QS JS TS", "ROYAL_FLUSH", "royal flush"),
    ("5H 4H 3H 2H AH KD KC", "5H 4H 3H 2H AH", "STRAIGHT_FLUSH", "straight flush, five high"),
    ("QS QH QD QC 3S 3H 2C", "QS QH QD QC 3S", "FOUR_OF_A_KIND", "four of a kind, queens"),
    ("KS KH KD 7C 7D 7H 2S", "KS KH KD 7H 7D", "FULL_HOUSE", "full house, kings full of sevens"),
    ("AH JH 9H 4H 2H KS KD", "AH JH 9H 4H 2H", "FLUSH", "flush, ace high"),
    ("AS 2D 3C 4H 5S 9D 9C", "5S 4H 3C 2D AS", "STRAIGHT", "straight, five high"),
    ("QS QH 9D 9C 4S 4H AD", "QS QH 9D 9C AD", "TWO_PAIR", "two pair, queens and nines"),
]


@pytest.mark.parametrize(("cards", "best", "category", "name"), SINGLE_EXAMPLES)
def test_rulebook_single_hand_examples(cards, best, category, name):
    h = hand(cards)
    assert (h.best_five, h.category, h.name) == (tuple(best.split()), category, name)
    assert h.cards == tuple(cards.split())


def test_rulebook_examples_are_in_category_order():
    hands = [hand(cards) for cards, *_ in SINGLE_EXAMPLES[:5]]
    assert hands == sorted(hands, reverse=True) and len({h.rank_key for h in hands}) == 5
    assert hand("AH JH 9H 4H 2H KS KD") > hand("KS KD 2C 3D 4H 8S 9C")  # row 5: flush beats the kings


def test_row_8_first_wins_on_the_fifth_card():
    a, b = hand("JS JD AC 9H 7S 4D 2C"), hand("JH JC AD 9S 6H 5D 3C")
    assert a.best_five == ("JS", "JD", "AC", "9H", "7S") and b.best_five == ("JH", "JC", "AD", "9S", "6H")
    assert a > b and a.name == b.name == "pair of jacks"


def test_row_9_equal_hands_split_and_the_odd_chip_goes_to_the_ace_of_spades():
    a, b = hand("AS AH KD QC 9S 4D 2C"), hand("AD AC KH QD 9H 3S 2S")
    assert a == b and not a < b and not b < a and a.rank_key == b.rank_key
    assert odd_chip_key(a.best_five) == (14, 3) > odd_chip_key(b.best_five) == (14, 1)
    report = hand_report("AS AH KD QC 9S 4D 2C".split(), ["AD AC KH QD 9H 3S 2S".split()])
    assert report["winner"] is None and report["split"] == [0, 1] and report["odd_chip_order"] == [0, 1]
    swapped = hand_report("AD AC KH QD 9H 3S 2S".split(), ["AS AH KD QC 9S 4D 2C".split()])
    assert swapped["odd_chip_order"] == [1, 0]


def test_row_10_six_high_straight_beats_the_wheel_and_the_wheel_is_the_lowest_straight():
    six, wheel = hand("6C 5D 4S 3H 2C KD KS"), hand("AC 2D 3S 4C 5H QD QH")
    assert six > wheel and six.name == "straight, six high" and wheel.name == "straight, five high"
    assert wheel.best_five == ("5H", "4C", "3S", "2D", "AC")
    assert wheel > hand("AS AD AH KC QD 3S 2C")  # any straight beats three of a kind
    assert odd_chip_key(wheel.best_five) == (5, 2)  # the ace plays low in a wheel


def test_names_of_the_remaining_categories():
    assert hand("JS JD JH 9C 4S 3D 2C").name == "three of a kind, jacks"
    assert hand("AS KD 9H 7C 4S 3D 2C").name == "high card, ace"
    assert hand("6S 6D 6H 2C 2S").name == "full house, sixes full of twos"
    assert hand("9H 8H 7H 6H 5H").name == "straight flush, nine high"


def test_suits_never_break_a_tie_and_five_and_six_cards_work():
    assert hand("AS KS QS JS TS") == hand("AH KH QH JH TH")
    assert hand("AS AD 9C 7H 4S 3D") == hand("AH AC 9D 7S 4C")
    assert hand("AS AD 9C 7H 4S 3D").best_five == ("AS", "AD", "9C", "7H", "4S")


@pytest.mark.parametrize(
    ("cards", "message"),
    [
        ("AS KS QS JS", "5 to 7 cards, got 4"),
        ("AS KS QS JS TS 9S 8S 7S", "5 to 7 cards, got 8"),
        ("AS KS QS JS TS AS", "duplicate card(s) AS"),
        ("AS KS QS JS 10S", "'T', never '10'"),
        ("AS KS QS JS TX", "unknown suit"),
        ("as KS QS JS TS", "unknown rank"),
    ],
)
def test_strict_input(cards, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(cards.split())


def test_strict_input_refuses_a_single_string_and_cards_in_two_hands():
    with pytest.raises(CardError):
        evaluate("AS KS QS JS TS")
    with pytest.raises(CardError, match="more than one hand"):
        hand_report("AS KS QS JS TS".split(), ["AS 2C 3C 4C 5C".split()])
    with pytest.raises(ValueError, match="at least one --vs"):
        hand_report("AS KS QS JS TS".split(), [])


# --- Up cards: bring-in and high hand ------------------------------------------------------


def test_bring_in_is_the_lowest_card_and_clubs_are_lowest():
    assert low_card([(1, "2C"), (3, "2H"), (5, "KS")]) == 1
    assert low_card([(1, "2H"), (3, "2C"), (5, "KS")]) == 3
    assert low_card([(2, "AC"), (4, "3S")]) == 4  # ace is high
    assert card_name("2H").capitalize() + ", low" == "Two of hearts, low"
    assert card_name("TS") == "ten of spades"
    with pytest.raises(CardError, match="duplicate"):
        low_card([(1, "2C"), (3, "2C")])


def test_high_hand_examples():
    assert first_to_act([(2, ["QS", "7D"]), (5, ["6H", "6C"])]) == 5  # pair beats high card
    assert first_to_act([(1, ["KS", "9D"]), (4, ["KH", "9C"])]) == 1  # K-9 vs K-9: dealt first
    assert first_to_act([(4, ["KH", "9C"]), (1, ["KS", "9D"])]) == 4  # the order given is the deal order
    assert first_to_act([(3, ["8S", "8H", "5D", "5C"]), (6, ["AS", "AD", "KH", "2C"])]) == 3  # 6th street


def test_showing_ignores_straights_flushes_and_suits():
    assert showing_key(["9H", "TH", "JH", "QH"]) == (0, 12, 11, 10, 9) < showing_key(["2C", "2D", "3S", "4H"])
    assert showing_key(["KS", "9D"]) == showing_key(["KH", "9C"])
    assert showing_key(["AS", "KD", "2C"]) > showing_key(["AH", "QD", "JC"])
    assert showing_key(["9S", "9H", "9D", "2C"]) > showing_key(["8S", "8H", "AD", "AC"])
    assert showing_key(["5S", "5H", "5D", "5C"]) > showing_key(["AS", "AH", "AD", "KC"])


def test_showing_names():
    assert showing_name(["QS", "7D"]) == "queen high"
    assert showing_name(["KS"]) == "king high"
    assert showing_name(["6S", "6D", "2C"]) == "pair of sixes"
    assert showing_name(["8S", "8H", "5D", "5C"]) == "two pair, eights and fives"
    assert showing_name(["9S", "9H", "9D", "2C"]) == "three of a kind, nines"
    assert showing_name(["9S", "9H", "9D", "9C"]) == "four of a kind, nines"


def test_showing_is_strict():
    for bad in ([], ["AS", "KS", "QS", "JS", "TS", "9S"], ["AS", "AS"]):
        with pytest.raises(ValueError):
            showing_key(bad)
    with pytest.raises(ValueError):
        first_to_act([])


# --- Independent check: pokerkit ---------------------------------------------------------


def _pokerkit(cards: tuple[str, ...]) -> StandardHighHand:
    return StandardHighHand.from_game("".join(c[0] + c[1].lower() for c in cards))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.permutations(STANDARD_52).map(lambda deck: (tuple(deck[:7]), tuple(deck[7:14]))))
def test_ordering_agrees_with_pokerkit(hands):
    a, b = hands
    ours, theirs = evaluate(a), evaluate(b)
    pa, pb = _pokerkit(a), _pokerkit(b)
    assert (ours < theirs, ours == theirs, ours > theirs) == (pa < pb, pa == pb, pa > pb)
    assert _pokerkit(ours.best_five) == pa  # our best five is a best five
    assert ours.category.replace("ROYAL", "STRAIGHT") == pa.entry.label.name  # pokerkit has no royal label


# --- CLI ---------------------------------------------------------------------------------


def test_hand_command_for_stud(capsys):
    code = main(["hand", "stud", "6C", "5D", "4S", "3H", "2C", "KD", "KS",
                 "--vs", "AC", "2D", "3S", "4C", "5H", "QD", "QH", "--vs", "JS", "JD", "AD", "9H", "7S"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["winner"] == 0 and report["split"] is None
    assert [h["name"] for h in report["hands"]] == ["straight, six high", "straight, five high", "pair of jacks"]
    assert report["hands"][1]["best_five"] == ["5H", "4C", "3S", "2D", "AC"]


def test_hand_command_for_stud_refuses_bad_input(capsys):
    assert main(["hand", "stud", "AS", "KS", "QS", "JS", "10S", "--vs", "2C", "3C", "4C", "5C", "7D"]) == 2
    assert "'T', never '10'" in capsys.readouterr().err
    assert main(["hand", "stud", "AS", "KS", "QS", "JS", "--vs", "2C", "3C", "4C", "5C", "7D"]) == 2
    assert "5 to 7 cards" in capsys.readouterr().err
    assert main(["hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H", "--vs", "5H", "6H", "7H"]) == 2
    assert "exactly one --vs" in capsys.readouterr().err
