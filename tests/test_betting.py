"""The betting engine (`seven-card-stud.md` §3.4, §4, §6.2): the rulebook's worked examples,
the raise cap, check/fold/all-in rules, timeouts and refusals, plus property tests over random
legal action sequences. Plain calls on :class:`dealer.core.betting.Betting`, no round machine."""

from __future__ import annotations

import copy
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.betting import TRANSITIONS, Act, Betting, BettingError, Range, Returned, SpreadLimit, State

D = Decimal
UNIT = D("0.01")

# The stud streets as dealer.games.stud builds them (§2 table): 3rd street is opened by the
# forced bring-in; a bet plus three raises while 3+ players can act.
THIRD = SpreadLimit(min_bet=D("0.50"), max_bet=D("3.00"), forced_open=True, open_min=D("0.50"), open_max=D("3.00"))
THIRD_FIXED = SpreadLimit(min_bet=D("0.50"), max_bet=D("3.00"), forced_open=True, open_min=D("0.50"),
                          open_max=D("0.50"))
FOURTH = SpreadLimit(min_bet=D("1.00"), max_bet=D("3.00"))
SEVENTH = SpreadLimit(min_bet=D("1.00"), max_bet=D("6.00"))
# A wide spread, so that DOUBLE_LEVEL raises never run out of room and only the cap stops them.
WIDE = SpreadLimit(min_bet=D(1), max_bet=D(1000))


def engine(seats: dict[int, str | int], first: int | None = None, limits: SpreadLimit | None = None) -> Betting:
    """``seats``: seat -> stack; players are named ``s<seat>``. Opens a round when ``first`` is given."""
    b = Betting.seat([(f"s{seat}", seat, D(str(stack))) for seat, stack in seats.items()], UNIT)
    if first is not None:
        b.open_round(f"s{first}", limits or FOURTH)
    return b


def act(b: Betting, seat: int, action: Act, total: str | None = None):
    return b.act(f"s{seat}", action, None if total is None else D(total))


def actions(b: Betting) -> list[str]:
    return b.options().actions()


# -- §4 worked examples --------------------------------------------------------------------


def test_worked_example_third_street_bring_in_raise_reraise_then_call_or_fold_only():
    b = engine({4: 100, 5: 100, 6: 100, 7: 100}, first=4, limits=THIRD)
    assert b.to_act == "s4" and actions(b) == ["BRING_IN"]
    assert b.options().bet == Range(D("0.50"), D("3.00"))
    act(b, 4, Act.BRING_IN, "0.50")
    # seat 5: a raise makes it at least 2 x 0.50 and at most 0.50 + 3.00
    assert b.to_act == "s5" and b.options().raise_ == Range(D("1.00"), D("3.50"))
    rec = act(b, 5, Act.RAISE, "2.00")
    assert (rec.total, rec.increment, rec.level, rec.full_raise) == (D("2.00"), D("1.50"), D("2.00"), True)
    # seat 6: allowed totals $4.00-$5.00 (>= 2 x 2.00, increment <= 3.00)
    assert b.options().raise_ == Range(D("4.00"), D("5.00"))
    assert not b.can("s6", Act.RAISE, D("3.99")) and not b.can("s6", Act.RAISE, D("5.01"))
    assert b.can("s6", Act.RAISE, D("5.00"))
    act(b, 6, Act.RAISE, "4.00")
    # seat 7: a raise would need >= 8.00, an increment of 4.00 > 3.00: call $4.00 or fold
    o = b.options()
    assert o.raise_ is None and o.call == D("4.00") and o.all_in is None
    assert actions(b) == ["CALL", "FOLD"]
    assert "not allowed" in b.verify("s7", Act.RAISE, D("8.00"))


def test_worked_example_fourth_street_bet_raise_raise_then_call_or_fold_only():
    b = engine({2: 100, 3: 100, 5: 100}, first=2, limits=FOURTH)
    assert actions(b) == ["CHECK", "BET", "FOLD"] and b.options().bet == Range(D("1.00"), D("3.00"))
    act(b, 2, Act.BET, "1")
    assert b.options().raise_ == Range(D("2.00"), D("4.00"))
    act(b, 3, Act.RAISE, "2")
    assert b.options().raise_ == Range(D("4.00"), D("5.00"))
    rec = act(b, 5, Act.RAISE, "4")
    assert rec.increment == D(2)
    assert b.to_act == "s2" and actions(b) == ["CALL", "FOLD"] and b.options().call == D(3)


def test_previous_increment_rule_raise_adds_at_least_the_last_increment():
    lim = SpreadLimit(min_bet=D("0.50"), max_bet=D("3.00"), raise_rule="PREVIOUS_INCREMENT", forced_open=True,
                      open_min=D("0.50"), open_max=D("3.00"))
    b = engine({4: 100, 5: 100, 6: 100, 7: 100}, first=4, limits=lim)
    act(b, 4, Act.BRING_IN, "0.50")
    assert b.options().raise_ == Range(D("1.00"), D("3.50"))  # increment >= the bring-in's 0.50
    act(b, 5, Act.RAISE, "2.00")
    # §8.2: "Standard: a raise must be at least the previous increment ($3.50 here)"
    assert b.options().raise_ == Range(D("3.50"), D("5.00"))
    act(b, 6, Act.RAISE, "3.50")
    assert b.options().raise_ == Range(D("5.00"), D("6.50"))


def test_previous_increment_rule_never_goes_below_the_street_minimum():
    lim = SpreadLimit(min_bet=D(1), max_bet=D(3), raise_rule="PREVIOUS_INCREMENT")
    b = engine({1: 100, 2: 100}, first=1, limits=lim)
    act(b, 1, Act.BET, "1")
    assert b.options().raise_ == Range(D(2), D(4))


# -- raise cap (seed 6(14), §8.4) --------------------------------------------------------------


def test_raise_cap_bet_plus_three_raises_with_three_players():
    b = engine({1: 1000, 2: 1000, 3: 1000}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.RAISE, "2")
    act(b, 3, Act.RAISE, "4")
    assert b.options().raise_ is not None and not b.capped
    act(b, 1, Act.RAISE, "8")  # the third raise
    assert b.capped and b.bets == 4
    o = b.options()
    assert o.raise_ is None and o.all_in is None and actions(b) == ["CALL", "FOLD"]


def test_raise_cap_reached_with_stud_spread_under_previous_increment():
    lim = SpreadLimit(min_bet=D(1), max_bet=D(3), raise_rule="PREVIOUS_INCREMENT")
    b = engine({1: 100, 2: 100, 3: 100}, first=1, limits=lim)
    for seat, total in [(1, "1"), (2, "2"), (3, "3"), (1, "4")]:
        act(b, seat, Act.BET if total == "1" else Act.RAISE, total)
    assert b.capped and actions(b) == ["CALL", "FOLD"]


def test_raise_cap_does_not_apply_heads_up():
    b = engine({1: 10_000, 2: 10_000}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    total = D(1)
    for i in range(8):  # eight raises, far past the 3-player cap
        total *= 2
        b.act(f"s{2 - i % 2}", Act.RAISE, total)
    assert not b.capped and b.options().raise_ is not None


def test_raise_cap_once_reached_stays_reached_when_players_fold_to_heads_up():
    b = engine({1: 1000, 2: 1000, 3: 1000}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.RAISE, "2")
    act(b, 3, Act.RAISE, "4")
    act(b, 1, Act.RAISE, "8")
    assert b.capped
    act(b, 2, Act.FOLD)  # now heads-up
    assert b.to_act == "s3" and b.options().raise_ is None and b.capped


def test_raise_cap_heads_up_reached_before_the_cap_means_unlimited():
    b = engine({1: 1000, 2: 1000, 3: 1000}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.RAISE, "2")
    act(b, 3, Act.FOLD)  # heads-up after one raise
    for seat, total in [(1, "4"), (2, "8"), (1, "16"), (2, "32")]:
        act(b, seat, Act.RAISE, total)
    assert not b.capped and b.bets == 6 and b.options().raise_ is not None


def test_raise_cap_counts_only_players_able_to_act_all_in_players_do_not_count():
    b = engine({1: 1000, 2: 1000, 3: 3}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.RAISE, "2")
    act(b, 3, Act.ALL_IN)  # 3: short of a full raise (needs 4), seat 3 is all-in
    act(b, 1, Act.RAISE, "6")
    act(b, 2, Act.RAISE, "12")  # fourth full bet, but only two players can still act
    assert not b.capped and b.options().raise_ is not None


# -- check, bring-in, fold --------------------------------------------------------------------


def test_check_only_when_nothing_to_call():
    b = engine({1: 100, 2: 100, 3: 100}, first=1)
    assert b.options().check
    act(b, 1, Act.CHECK)
    act(b, 2, Act.BET, "2")
    assert not b.options().check and "CHECK is not allowed" in b.verify("s3", Act.CHECK)


def test_check_raise_is_allowed():
    b = engine({1: 100, 2: 100}, first=1)
    act(b, 1, Act.CHECK)
    act(b, 2, Act.BET, "1")
    assert b.can("s1", Act.RAISE, D(2))


def test_third_street_forced_bring_in_no_check_no_fold():
    b = engine({1: 100, 2: 100, 3: 100}, first=2, limits=THIRD)
    o = b.options()
    assert o.forced and not o.check and not o.fold and actions(b) == ["BRING_IN"]
    assert "CHECK is not allowed" in b.verify("s2", Act.CHECK)
    assert "FOLD is not allowed" in b.verify("s2", Act.FOLD)
    assert "BET is not allowed" in b.verify("s2", Act.BET, D(1))
    act(b, 2, Act.BRING_IN, "1.25")  # spread bring-in: any amount 0.50..3.00
    # after the bring-in nobody may check on 3rd street
    assert not b.options().check and actions(b) == ["CALL", "RAISE", "FOLD"]


def test_fixed_bring_in_is_exactly_the_minimum():
    b = engine({1: 100, 2: 100}, first=1, limits=THIRD_FIXED)
    assert b.options().bet == Range(D("0.50"), D("0.50"))
    assert "must make it 0.50..0.50" in b.verify("s1", Act.BRING_IN, D("1.00"))
    act(b, 1, Act.BRING_IN, "0.50")
    assert b.options().raise_ == Range(D("1.00"), D("3.50"))


def test_bring_in_with_less_than_the_minimum_is_all_in():
    b = engine({1: "0.30", 2: 100}, first=1, limits=THIRD)
    o = b.options()
    assert o.bet is None and o.all_in == D("0.30") and actions(b) == ["ALL_IN"]
    rec = act(b, 1, Act.ALL_IN)
    assert rec.all_in and rec.total == D("0.30") and not rec.full_raise and b.level == D("0.30")
    assert b.options().call == D("0.30")


def test_bring_in_with_exactly_the_minimum_is_all_in():
    b = engine({1: "0.50", 2: 100}, first=1, limits=THIRD)
    assert actions(b) == ["ALL_IN"] and b.options().all_in == D("0.50")


def test_high_hand_folding_as_first_action_passes_the_turn_to_the_next_player():
    b = engine({1: 100, 2: 100, 3: 100}, first=2)
    assert b.options().fold  # fold is legal on any turn
    act(b, 2, Act.FOLD)
    assert b.state == State.TO_ACT and b.to_act == "s3"
    assert actions(b) == ["CHECK", "BET", "FOLD"]  # the next player opens: check or bet
    act(b, 3, Act.CHECK)
    act(b, 1, Act.CHECK)
    assert b.state == State.ROUND_OVER


# -- all-in ------------------------------------------------------------------------------------


def test_all_in_for_less_than_a_call():
    b = engine({1: 100, 2: 2, 3: 100}, first=1)
    act(b, 1, Act.BET, "3")
    o = b.options()
    assert o.call is None and o.all_in == D(2) and actions(b) == ["ALL_IN", "FOLD"]
    rec = act(b, 2, Act.ALL_IN)
    assert (rec.added, rec.total, rec.level, rec.increment, rec.all_in) == (D(2), D(2), D(3), 0, True)
    assert b.level == D(3) and b.options().call == D(3)  # seat 3 still calls the full 3
    act(b, 3, Act.CALL)
    assert b.state == State.ROUND_OVER


def test_all_in_exactly_the_call_is_all_in_not_call():
    b = engine({1: 100, 2: 3}, first=1)
    act(b, 1, Act.BET, "3")
    assert b.options().call is None and b.options().all_in == D(3)


def test_short_all_in_raise_does_not_reopen_raising_for_players_who_acted():
    b = engine({1: 100, 2: 100, 3: "1.50"}, first=1)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.CALL)
    rec = act(b, 3, Act.ALL_IN)  # 1.50: a full raise needs 2.00
    assert rec.increment == D("0.50") and not rec.full_raise and b.bets == 1 and b.level == D("1.50")
    # seat 1 and seat 2 already acted: they must call the extra 0.50 or fold, no raise
    assert b.to_act == "s1" and actions(b) == ["CALL", "FOLD"] and b.options().call == D("0.50")
    act(b, 1, Act.CALL)
    assert actions(b) == ["CALL", "FOLD"]
    act(b, 2, Act.CALL)
    assert b.state == State.ROUND_OVER


def test_short_all_in_lets_players_who_have_not_acted_raise():
    b = engine({1: 100, 2: "1.50", 3: 100}, first=1)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.ALL_IN)
    assert b.to_act == "s3" and b.options().raise_ == Range(D(3), D("4.50"))


def test_short_all_in_does_not_count_toward_the_raise_cap():
    b = engine({1: 1000, 2: 1000, 3: 1000, 4: 5}, first=1, limits=WIDE)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.RAISE, "2")
    act(b, 3, Act.RAISE, "4")
    act(b, 4, Act.ALL_IN)  # 5: a full raise needs 8
    assert b.bets == 3 and not b.capped
    # seat 1 faced the full raise to 4 and may still make the third raise
    assert b.options().raise_ is not None
    act(b, 1, Act.RAISE, "10")
    assert b.capped and b.options().raise_ is None


def test_full_all_in_raise_reopens_raising():
    b = engine({1: 100, 2: 100, 3: 2}, first=1)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.CALL)
    rec = act(b, 3, Act.ALL_IN)  # 2 = 2 x 1: a full raise
    assert rec.full_raise and b.bets == 2
    assert b.options().raise_ == Range(D(4), D(5))


def test_all_in_may_not_exceed_the_largest_legal_total():
    b = engine({1: 100, 2: 4}, first=1)
    act(b, 1, Act.BET, "1")
    assert b.options().all_in == D(4)  # within the raise range 2..4
    b2 = engine({1: 100, 2: 50}, first=1)
    act(b2, 1, Act.BET, "1")
    assert b2.options().all_in is None and "ALL_IN is not allowed" in b2.verify("s2", Act.ALL_IN)


# -- round end (§3.4) and uncalled chips (§6.2) -------------------------------------------------


def test_round_ends_when_everyone_checks():
    b = engine({1: 100, 2: 100, 3: 100}, first=2)
    act(b, 2, Act.CHECK)
    act(b, 3, Act.CHECK)
    assert b.state == State.TO_ACT and b.to_act == "s1"
    act(b, 1, Act.CHECK)
    assert b.state == State.ROUND_OVER and b.to_act is None
    assert b.close_round() is None and b.state == State.IDLE


def test_round_ends_only_when_everyone_acted_and_matched():
    b = engine({1: 100, 2: 100, 3: 100}, first=1)
    act(b, 1, Act.BET, "1")
    act(b, 2, Act.CALL)
    assert b.state == State.TO_ACT
    act(b, 3, Act.RAISE, "2")
    assert b.to_act == "s1"  # the raise reopens the action
    act(b, 1, Act.CALL)
    assert b.state == State.TO_ACT and b.to_act == "s2"
    act(b, 2, Act.CALL)
    assert b.state == State.ROUND_OVER


def test_round_ends_when_everyone_else_is_all_in_and_the_last_player_matched():
    b = engine({1: 100, 2: 2, 3: 100}, first=1)
    act(b, 1, Act.BET, "3")
    act(b, 2, Act.ALL_IN)
    act(b, 3, Act.FOLD)
    assert b.state == State.ROUND_OVER
    assert b.close_round() == Returned("s1", D(1))  # 3 - 2: nobody called the last chip
    assert b.contributions() == {"s1": D(2), "s2": D(2), "s3": D(0)}


def test_no_betting_round_when_at_most_one_player_can_act():
    b = engine({1: 100, 2: 2}, first=1)
    act(b, 1, Act.BET, "2")
    act(b, 2, Act.ALL_IN)
    assert b.state == State.ROUND_OVER
    b.close_round()
    assert b.open_round("s1", FOURTH) == State.ROUND_OVER and b.to_act is None


def test_open_round_skips_an_all_in_first_player():
    b = engine({1: 2, 2: 100, 3: 100}, first=2)
    act(b, 2, Act.BET, "2")
    act(b, 3, Act.CALL)
    act(b, 1, Act.ALL_IN)
    b.close_round()
    assert b.open_round("s1", FOURTH) == State.TO_ACT and b.to_act == "s2"


def test_uncalled_chips_are_returned_at_round_end():
    b = engine({1: 100, 2: 100, 3: 100}, first=1)
    act(b, 1, Act.BET, "2")
    act(b, 2, Act.RAISE, "4")
    act(b, 3, Act.FOLD)
    act(b, 1, Act.FOLD)
    assert b.state == State.HAND_OVER
    assert b.close_round() == Returned("s2", D(2))  # 4 - 2 (folded seat 1's 2 included)
    assert b.player("s2").stack == D(98) and b.contributions() == {"s1": D(2), "s2": D(2), "s3": D(0)}
    assert b.state == State.HAND_OVER


def test_hand_over_when_all_but_one_fold():
    b = engine({1: 100, 2: 100, 3: 100}, first=1, limits=THIRD)
    act(b, 1, Act.BRING_IN, "0.50")
    act(b, 2, Act.FOLD)
    assert b.state == State.TO_ACT
    act(b, 3, Act.FOLD)
    assert b.state == State.HAND_OVER and b.to_act is None and [p.player_id for p in b.live] == ["s1"]
    assert "no betting round is waiting" in b.verify("s1", Act.CHECK)
    assert b.close_round() == Returned("s1", D("0.50"))
    with pytest.raises(BettingError, match="cannot open"):
        b.open_round("s1", FOURTH)


def test_close_round_refused_while_players_must_act():
    b = engine({1: 100, 2: 100}, first=1)
    with pytest.raises(BettingError, match="not over"):
        b.close_round()


# -- timeout (§4, §7) ---------------------------------------------------------------------------


def test_timeout_checks_when_free():
    b = engine({1: 100, 2: 100}, first=1)
    assert b.default_action() == (Act.CHECK, None)


def test_timeout_folds_when_facing_a_bet():
    b = engine({1: 100, 2: 100}, first=1)
    act(b, 1, Act.BET, "1")
    assert b.default_action() == (Act.FOLD, None)


def test_timeout_bring_in_posts_the_minimum():
    b = engine({1: 100, 2: 100}, first=1, limits=THIRD)
    assert b.default_action() == (Act.BRING_IN, D("0.50"))
    rec = b.act("s1", *b.default_action(), by="timeout")
    assert rec.by == "timeout" and rec.total == D("0.50")


def test_timeout_bring_in_with_less_than_the_minimum_goes_all_in():
    b = engine({1: "0.20", 2: 100}, first=1, limits=THIRD)
    assert b.default_action() == (Act.ALL_IN, None)
    assert b.act("s1", *b.default_action(), by="timeout").total == D("0.20")


# -- refusals: a reason, nothing changed ------------------------------------------------------


def _refused(b: Betting, player: str, action, total, reason: str) -> None:
    before = copy.deepcopy(b)
    why = b.verify(player, action, total)
    assert why is not None and reason in why, why
    assert not b.can(player, action, total)
    with pytest.raises(BettingError, match=re.escape(reason)):
        b.act(player, action, total)
    assert b == before


@pytest.mark.parametrize("player, action, total, reason", [
    ("s3", Act.CALL, None, "not s3's turn (waiting for s2)"),
    ("s1", Act.FOLD, None, "not s1's turn"),
    ("mallory", Act.CALL, None, "not in this hand"),
    ("s2", "SHOVE", None, "unknown action"),
    ("s2", Act.RAISE, D("1.50"), "must make it 2.00..4.00"),
    ("s2", Act.RAISE, D("4.01"), "must make it 2.00..4.00"),
    ("s2", Act.RAISE, D("2.005"), "not a whole number of 0.01"),
    ("s2", Act.RAISE, None, "needs an amount"),
    ("s2", Act.CALL, D("1"), "takes no amount"),
    ("s2", Act.CHECK, None, "CHECK is not allowed"),
    ("s2", Act.BET, D("2"), "BET is not allowed"),
    ("s2", Act.ALL_IN, None, "ALL_IN is not allowed"),
])
def test_illegal_actions_are_refused_with_a_reason_and_change_nothing(player, action, total, reason):
    b = engine({1: 100, 2: 100, 3: 100}, first=1)
    act(b, 1, Act.BET, "1.00")
    _refused(b, player, action, total, reason)


def test_wrong_all_in_amount_is_refused():
    b = engine({1: 100, 2: 3}, first=1)
    act(b, 1, Act.BET, "1")
    _refused(b, "s2", Act.ALL_IN, D(2), "all-in makes it 3")


def test_actions_between_rounds_are_refused():
    b = engine({1: 100, 2: 100})
    _refused(b, "s1", Act.CHECK, None, "no betting round is waiting")


def test_seating_rules():
    with pytest.raises(BettingError, match="one seat per player"):
        Betting.seat([("a", 1, D(1)), ("a", 2, D(1))])
    with pytest.raises(BettingError, match="one seat per player"):
        Betting.seat([("a", 1, D(1)), ("b", 1, D(1))])
    with pytest.raises(BettingError, match="must bring chips"):
        Betting.seat([("a", 1, D(1)), ("b", 2, D(0))])
    b = Betting.seat([("b", 5, D(1)), ("a", 2, D(1))])
    assert [p.seat for p in b.players] == [2, 5]


def test_transitions_table_lists_every_action_only_while_a_player_is_to_act():
    assert {state for state, _ in TRANSITIONS} == {State.TO_ACT}
    assert {a for _, a in TRANSITIONS} == set(Act)


# -- properties over random legal play ------------------------------------------------------------


LIMITS = [
    THIRD, THIRD_FIXED, FOURTH, SEVENTH, WIDE,
    SpreadLimit(min_bet=D(1), max_bet=D(3), raise_rule="PREVIOUS_INCREMENT"),
    SpreadLimit(min_bet=D("0.50"), max_bet=D(3), raise_rule="PREVIOUS_INCREMENT", forced_open=True,
                open_min=D("0.50"), open_max=D(3)),
    SpreadLimit(min_bet=D(1), max_bet=D(100), every_raise_reopens=True, raise_cap=None),
]

stacks = st.lists(st.one_of(st.integers(1, 120), st.integers(1, 5000)), min_size=2, max_size=7)


def draw_legal(data, b: Betting) -> tuple[Act, Decimal | None]:
    o = b.options()
    moves: list[tuple[Act, Range | None]] = []
    if o.check:
        moves.append((Act.CHECK, None))
    if o.bet is not None:
        moves.append((Act.BRING_IN if o.forced else Act.BET, o.bet))
    if o.call is not None:
        moves.append((Act.CALL, None))
    if o.raise_ is not None:
        moves.append((Act.RAISE, o.raise_))
    if o.all_in is not None:
        moves.append((Act.ALL_IN, None))
    if o.fold:
        moves.append((Act.FOLD, None))
    assert moves, f"{b.to_act} is to act but has no legal action"
    action, rng = data.draw(st.sampled_from(moves))
    if rng is None:
        return action, None
    units = data.draw(st.integers(int(rng.min / UNIT), int(rng.max / UNIT)))
    return action, units * UNIT


def draw_illegal(data, b: Betting) -> tuple[str, str, Decimal | None]:
    player = data.draw(st.sampled_from([p.player_id for p in b.players] + ["nobody"]))
    action = data.draw(st.sampled_from([a.value for a in Act] + ["SHOVE"]))
    total = data.draw(st.one_of(st.none(), st.decimals(min_value=-5, max_value=200, places=3)))
    return player, action, total


def check_record(rec, before_street: Decimal, before_stack: Decimal, before_level: Decimal, b: Betting) -> None:
    p = b.player(rec.player_id)
    assert rec.added >= 0 and rec.added == before_stack - p.stack
    assert rec.total == before_street + rec.added == p.street
    assert rec.level == b.level == max(before_level, rec.total)
    assert rec.all_in == (p.stack == 0 and not p.folded)
    assert rec.increment == (rec.total - before_level if rec.total > before_level else 0)
    if rec.action in (Act.CHECK, Act.FOLD):
        assert rec.added == 0
    if rec.action == Act.CALL:
        assert rec.total == rec.level and rec.added > 0 and not rec.all_in
    if rec.action in (Act.BET, Act.BRING_IN, Act.RAISE):
        assert rec.increment > 0 and rec.total == rec.level and not rec.all_in
    if rec.action == Act.ALL_IN:
        assert rec.all_in


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(stacks=stacks, data=st.data())
def test_random_legal_play_conserves_chips_and_always_ends(stacks, data):
    b = Betting.seat([(f"s{i}", i + 1, D(s)) for i, s in enumerate(stacks)], UNIT)
    chips = sum(D(s) for s in stacks)
    rounds = data.draw(st.integers(1, 5))
    for _ in range(rounds):
        if b.state == State.HAND_OVER:
            break
        first = data.draw(st.sampled_from([p.player_id for p in b.live]))
        b.open_round(first, data.draw(st.sampled_from(LIMITS)))
        for _step in range(2000):
            if b.state != State.TO_ACT:
                break
            # an illegal attempt: refused, state untouched
            player, action, total = draw_illegal(data, b)
            if b.verify(player, action, total) is not None:
                before = copy.deepcopy(b)
                with pytest.raises(BettingError):
                    b.act(player, action, total)
                assert b == before
            p = b.player(b.to_act)
            street, stack, level = p.street, p.stack, b.level
            action, total = draw_legal(data, b)
            assert b.verify(p.player_id, action, total) is None
            rec = b.act(p.player_id, action, total)
            check_record(rec, street, stack, level, b)
            assert sum(q.stack + q.total for q in b.players) == chips
            assert all(q.stack >= 0 for q in b.players)
        assert b.state in (State.ROUND_OVER, State.HAND_OVER), "betting round never ended"
        back = b.close_round()
        if back is not None:
            assert back.amount > 0
        streets = sorted((q.street for q in b.players), reverse=True)
        assert len(streets) < 2 or streets[0] == streets[1]  # nothing uncalled remains
        assert sum(q.stack + q.total for q in b.players) == chips
        assert all(q.stack >= 0 and q.total >= 0 for q in b.players)
        live = b.live
        assert live
        # matched: every live player who is not all-in put in as much as the most anyone put in
        top = max(q.street for q in b.players)
        assert all(q.street == top for q in live if not q.all_in)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(stacks=stacks, data=st.data())
def test_options_are_exactly_what_verify_accepts(stacks, data):
    b = Betting.seat([(f"s{i}", i + 1, D(s)) for i, s in enumerate(stacks)], UNIT)
    b.open_round("s0", data.draw(st.sampled_from(LIMITS)))
    for _ in range(data.draw(st.integers(0, 12))):
        if b.state != State.TO_ACT:
            return
        b.act(b.to_act, *draw_legal(data, b))
    if b.state != State.TO_ACT:
        return
    o = b.options()
    allowed = set(o.actions())
    for a in Act:
        amount = None
        if a in (Act.BET, Act.BRING_IN) and o.bet is not None:
            amount = o.bet.min
        if a == Act.RAISE and o.raise_ is not None:
            amount = o.raise_.max
        assert b.can(b.to_act, a, amount) == (a.value in allowed)
    assert not (o.check and o.call is not None)
    assert not (o.bet is not None and o.raise_ is not None)
