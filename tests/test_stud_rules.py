"""Seven-Card Stud hand flow (`seven-card-stud.md` §1, §3, §6): :class:`StudHand` driven with plain
calls (no Round): the deal plan, wash/shuffle prompts, deck exhaustion, who opens each street,
the exposed 7th card, rake, showdown order, the odd chip and exact chip accounting."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.betting import Act, Betting, State
from dealer.core.cards import STANDARD_52
from dealer.core.game_records import BetStep, DealStep, EndStep, Face
from dealer.games.stud import CHIPS, Stud, StudHand, StudOptions, street_positions

D = Decimal
CENT = D("0.01")
STREET_NO = {"3rd": 3, "4th": 4, "5th": 5, "6th": 6, "7th": 7}

Script = Mapping[int, Sequence[tuple]]  # street -> actions: (action, total) or (player, action, total)


def new_hand(seats: Sequence[int], chips: Mapping[int, str | int] | int = 100, hand_number: int = 1,
             **options) -> StudHand:
    """Players are named ``p<seat>``."""
    stacks = chips if isinstance(chips, Mapping) else {s: chips for s in seats}
    return StudHand(StudOptions(**options), {s: f"p{s}" for s in seats},
                    {f"p{s}": D(str(stacks[s])) for s in seats}, hand_number, CENT)


def passive(b: Betting) -> tuple[Act, Decimal | None]:
    """Check if free, bring in the minimum, call, else all-in for less."""
    o = b.options()
    if o.check:
        return Act.CHECK, None
    if o.forced:
        return (Act.BRING_IN, o.bet.min) if o.bet is not None else (Act.ALL_IN, None)
    if o.call is not None:
        return Act.CALL, None
    return Act.ALL_IN, None


class Dealer:
    """Plays a hand: cards named in ``fixed`` go to their positions, the others come from the
    deck in order; betting follows ``script`` per street, then ``policy``."""

    def __init__(self, hand: StudHand, fixed: Mapping[str, str] | None = None, script: Script | None = None,
                 policy: Callable[[Betting], tuple[Act, Decimal | None]] = passive,
                 deck: Sequence[str] | None = None) -> None:
        self.hand = hand
        self.fixed = dict(fixed or {})
        self.deck = [c for c in (deck or STANDARD_52) if c not in self.fixed.values()]
        self.script = {street: list(actions) for street, actions in (script or {}).items()}
        self.policy = policy
        self.steps: list[DealStep | BetStep | EndStep] = []
        self.from_burns = 0

    def deal(self, step: DealStep) -> None:
        for pos in step.positions:
            if pos.confirm:
                self.hand.register(pos, "")
                continue
            if pos.from_burns:
                code = self.hand.burn_cards[self.from_burns]
                self.from_burns += 1
            else:
                code = self.fixed.get(pos.name) or self.deck.pop(0)
            self.hand.register(pos, code)

    def bet(self, step: BetStep) -> None:
        b = self.hand.betting
        b.open_round(step.first, step.limits)
        todo = self.script.get(STREET_NO[step.street], [])
        while b.state == State.TO_ACT:
            if todo:
                item = todo.pop(0)
                if len(item) == 3:
                    player, action, total = item
                    assert player == b.to_act, f"{step.street}: expected {player} to act, not {b.to_act}"
                else:
                    action, total = item
                total = None if total is None else D(str(total))
            else:
                action, total = self.policy(b)
            b.act(b.to_act, action, total)
        assert not todo, f"{step.street}: script left over {todo}"
        b.close_round()

    def step(self):
        step = self.hand.next_step()
        self.steps.append(step)
        if isinstance(step, DealStep):
            self.deal(step)
        elif isinstance(step, BetStep):
            self.bet(step)
        return step

    def until(self, street: int, kind: type) -> None:
        """Play up to and including the ``kind`` step of ``street``."""
        while True:
            step = self.step()
            assert not isinstance(step, EndStep), f"hand ended before street {street}"
            if isinstance(step, kind) and self.hand.street == street:
                return

    def play(self):
        while not isinstance(self.step(), EndStep):
            pass
        return self.hand.outcome()

    def bet_steps(self) -> dict[int, BetStep]:
        return {STREET_NO[s.street]: s for s in self.steps if isinstance(s, BetStep)}

    def deal_steps(self) -> list[list[str]]:
        return [[p.name for p in s.positions] for s in self.steps if isinstance(s, DealStep)]


def brought(hand: StudHand) -> Decimal:
    return sum((p.stack + p.total for p in hand.betting.players), D(0))


def returned(outcome) -> dict[str, Decimal]:
    return {p: bets[CHIPS].returned for p, bets in outcome.player_bets.items()}


def assert_conserved(hand: StudHand, outcome) -> None:
    back = returned(outcome)
    assert all(v >= 0 for v in back.values())
    assert {p: D(v) for p, v in outcome.details["returned"].items()} == back
    assert sum(back.values()) + D(outcome.details["rake"]) == brought(hand)


# Up cards for seats 1, 2, 4: seat 1 has the low card (3C); seat 2 shows a pair of aces from 4th street.
UPS_124 = {"P1.3": "3C", "P1.4": "7D", "P1.5": "9H", "P1.6": "JS",
           "P2.3": "AS", "P2.4": "AH", "P2.5": "5D", "P2.6": "6C",
           "P4.3": "4C", "P4.4": "8S", "P4.5": "TD", "P4.6": "QH"}


# -- §3.1 deal plan, §1 wash and shuffle -------------------------------------------------------


def test_deal_plan_of_the_rulebook_example_seats_1_2_4():
    d = Dealer(new_hand([1, 2, 4], hand_number=2), UPS_124)
    out = d.play()
    assert d.deal_steps() == [
        ["SHUFFLE", "P1.1", "P2.1", "P4.1", "P1.2", "P2.2", "P4.2", "P1.3", "P2.3", "P4.3"],
        ["BURN1", "P1.4", "P2.4", "P4.4"],
        ["BURN2", "P1.5", "P2.5", "P4.5"],
        ["BURN3", "P1.6", "P2.6", "P4.6"],
        ["BURN4", "P1.7", "P2.7", "P4.7", "LAST_CARD"],  # §3.5: the window to report an exposed 7th card
    ]
    kinds = [type(s).__name__ for s in d.steps]
    assert kinds == ["DealStep", "BetStep"] * 5 + ["EndStep"]
    assert [s.street for s in d.bet_steps().values()] == ["3rd", "4th", "5th", "6th", "7th"]
    faces = {p.name: p.face for s in d.steps if isinstance(s, DealStep) for p in s.positions}
    for seat in (1, 2, 4):
        assert [faces[f"P{seat}.{i}"] for i in range(1, 8)] == [Face.DOWN, Face.DOWN] + [Face.UP] * 4 + [Face.DOWN]
    burns = [p for s in d.steps if isinstance(s, DealStep) for p in s.positions if p.burn]
    assert [p.name for p in burns] == ["BURN1", "BURN2", "BURN3", "BURN4"] and len(d.hand.burn_cards) == 4
    # the whole plan without folds, as documented by the game
    names = [n for step in d.deal_steps() for n in step if n not in ("SHUFFLE", "LAST_CARD")]
    assert [p.name for p in Stud().deal_plan([1, 2, 4])] == names
    assert out.details["showdown"] and sorted(out.hands) == ["P1", "P2", "P4"]


@pytest.mark.parametrize("hand_number, wash", [(1, True), (2, False), (3, False), (4, True), (5, False),
                                               (6, False), (7, True), (8, False), (10, True)])
def test_wash_before_hands_1_4_7_and_shuffle_before_every_hand(hand_number, wash):
    step = new_hand([1, 2], hand_number=hand_number).next_step()
    confirms = [p.name for p in step.positions if p.confirm]
    assert confirms == (["WASH", "SHUFFLE"] if wash else ["SHUFFLE"])
    assert step.positions[len(confirms)].name == "P1.1"  # no burn before 3rd street


def test_wash_every_is_a_house_option():
    washed = [n for n in range(1, 8) if new_hand([1, 2], hand_number=n, wash_every=2).wash_due()]
    assert washed == [1, 3, 5, 7]


def test_folded_players_get_no_more_cards():
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script={3: [("p1", "BRING_IN", "0.50"), ("p2", "FOLD", None)]})
    out = d.play()
    assert d.deal_steps()[1:] == [["BURN1", "P1.4", "P4.4"], ["BURN2", "P1.5", "P4.5"],
                                  ["BURN3", "P1.6", "P4.6"], ["BURN4", "P1.7", "P4.7", "LAST_CARD"]]
    assert "P2" not in out.hands and out.player_bets["p2"][CHIPS].outcome == "PUSH"  # folded before paying


def test_no_more_cards_when_one_player_remains():
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script={3: [("p1", "BRING_IN", "0.50"), ("FOLD", None),
                                                         ("FOLD", None)]})
    out = d.play()
    assert isinstance(d.steps[-1], EndStep) and len(d.steps) == 3  # 3rd deal, 3rd betting, end
    assert out.winner == "P1" and not out.details["showdown"] and out.hands == {}
    assert returned(out) == {"p1": D(100), "p2": D(100), "p4": D(100)}  # the bring-in came back uncalled
    assert_conserved(d.hand, out)


# -- §3.6 deck exhaustion -----------------------------------------------------------------------

# Eight boards without pairs; only seat 5 holds a 2, so a community 2 pairs seat 5 alone.
UPS_8 = {}
for _seat, _ups in {1: "AS KS QS JS", 2: "AH KH QH JH", 3: "AD KD QD JD", 4: "AC KC QC JC",
                    5: "TS 9S 8S 2S", 6: "TH 9H 8H 7H", 7: "TD 9D 8D 7D", 8: "TC 9C 8C 7C"}.items():
    UPS_8.update({f"P{_seat}.{i}": code for i, code in zip((3, 4, 5, 6), _ups.split())})


def test_deck_exhaustion_eight_players_the_last_card_is_a_community_card_without_burn():
    d = Dealer(new_hand(range(1, 9)), {**UPS_8, "COMM": "2H"})
    d.until(7, DealStep)
    seventh = d.steps[-1].positions
    assert [(p.name, p.face, p.burn) for p in seventh] == [("COMM", Face.UP, False)]
    assert len(d.hand.cards) + len(d.hand.burn_cards) == 52
    d.until(7, BetStep)
    # 6th street: four boards tie A-K-Q-J, the first dealt opens; 7th: the community 2 pairs seat 5
    assert d.bet_steps()[6].first == "p1"
    assert d.bet_steps()[7].first == "p5" and d.bet_steps()[7].announce == "Pair of twos high"
    out = d.play()
    assert out.details["community"] == "2H"
    assert all(len(d.hand.seven(s)) == 7 and "2H" in d.hand.seven(s) for s in range(1, 9))
    assert_conserved(d.hand, out)


def test_deck_exhaustion_seven_players_burn_then_community_card():
    ups7 = {k: v for k, v in UPS_8.items() if not k.startswith("P8.")}
    d = Dealer(new_hand(range(1, 8)), {**ups7, "COMM": "2H"})
    d.until(6, BetStep)
    assert len(d.hand.cards) + len(d.hand.burn_cards) == 45
    d.until(7, DealStep)
    assert [p.name for p in d.steps[-1].positions] == ["BURN4", "COMM"]
    d.until(7, BetStep)
    assert d.steps[-1].first == "p5"
    assert_conserved(d.hand, d.play())


def test_deck_exhaustion_not_needed_with_six_players():
    d = Dealer(new_hand(range(1, 7)))
    d.until(7, DealStep)
    assert [p.name for p in d.steps[-1].positions] == ["BURN4"] + [f"P{s}.7" for s in range(1, 7)] + ["LAST_CARD"]


def test_reshuffle_burns_option_deals_the_short_cards_from_the_burns():
    d = Dealer(new_hand(range(1, 8), deck_exhaustion="RESHUFFLE_BURNS"))
    d.until(7, DealStep)
    seventh = d.steps[-1].positions
    assert [p.name for p in seventh] == ["BURN4"] + [f"P{s}.7" for s in range(1, 8)] + ["LAST_CARD"]
    assert [p.name for p in seventh if p.from_burns] == ["P7.7"]  # 6 cards left after BURN4
    assert all(p.face == Face.DOWN for p in seventh[1:-1])
    out = d.play()
    assert out.details["community"] is None and d.hand.cards["P7.7"] in d.hand.burn_cards
    assert_conserved(d.hand, out)


def test_reshuffle_burns_uses_the_community_card_when_still_short():
    d = Dealer(new_hand(range(1, 9), deck_exhaustion="RESHUFFLE_BURNS"))
    d.until(7, DealStep)
    assert [p.name for p in d.steps[-1].positions] == ["COMM"]  # 1 card + 3 burns < 8 players


def test_deck_exhaustion_counts_cards_left_not_players_eight_start_two_fold_on_sixth():
    # 8 players through 6th street use 51 cards: with only 6 still active, 1 card is left < 6 + 1
    d = Dealer(new_hand(range(1, 9)), UPS_8, script={6: [("FOLD", None), ("FOLD", None)]})
    d.until(7, DealStep)
    assert len(d.hand.betting.live) == 6 and [p.name for p in d.steps[-1].positions] == ["COMM"]
    assert_conserved(d.hand, d.play())


def test_street_positions_exhaustion_rule_is_r_at_least_m_plus_one():
    assert [p.name for p in street_positions(7, [1, 2, 3], 4)] == ["BURN4", "P1.7", "P2.7", "P3.7"]
    assert [p.name for p in street_positions(7, [1, 2, 3], 3)] == ["BURN4", "COMM"]
    assert [p.name for p in street_positions(7, [1, 2, 3], 1)] == ["COMM"]


# -- §3.2 bring-in, §3.3 high hand --------------------------------------------------------------


@pytest.mark.parametrize("ups, first, announce", [
    ({1: "2C", 3: "2H", 5: "KS"}, "p1", "Two of clubs, low"),  # §5.3: club lowest
    ({1: "2H", 3: "2D", 5: "3C"}, "p3", "Two of diamonds, low"),
    ({1: "AS", 3: "3D", 5: "KS"}, "p3", "Three of diamonds, low"),  # the ace is high
    ({1: "7S", 3: "7H", 5: "7D"}, "p5", "Seven of diamonds, low"),
])
def test_bring_in_by_the_low_card_with_suit_order(ups, first, announce):
    d = Dealer(new_hand(sorted(ups)), {f"P{s}.3": c for s, c in ups.items()})
    d.until(3, BetStep)
    step = d.steps[-1]
    assert (step.first, step.announce, step.street) == (first, announce, "3rd")


def _third_street_options(**house):
    h = new_hand([1, 2], **house)
    Dealer(h).deal(h.next_step())
    step = h.next_step()
    h.betting.open_round(step.first, step.limits)
    return h.betting.options()


def test_bring_in_amount_is_spread_or_fixed_by_house_option():
    spread = _third_street_options()
    assert spread.forced and (spread.bet.min, spread.bet.max) == (D("0.50"), D("3.00"))
    fixed = _third_street_options(bring_in="FIXED_0.50")
    assert fixed.forced and (fixed.bet.min, fixed.bet.max) == (D("0.50"), D("0.50"))


def test_high_hand_pair_beats_high_card():
    d = Dealer(new_hand([2, 5]), {"P2.3": "QS", "P2.4": "7D", "P5.3": "6C", "P5.4": "6H"})
    d.until(4, BetStep)
    assert (d.steps[-1].first, d.steps[-1].announce) == ("p5", "Pair of sixes high")


def test_high_hand_tie_goes_to_the_seat_dealt_first():
    d = Dealer(new_hand([1, 4]), {"P1.3": "KS", "P1.4": "9S", "P4.3": "KH", "P4.4": "9H"})
    d.until(4, BetStep)
    assert d.bet_steps()[3].first == "p4"  # K♥ is lower than K♠
    assert (d.steps[-1].first, d.steps[-1].announce) == ("p1", "King high")


def test_high_hand_two_pair_beats_one_pair_on_sixth_street():
    fixed = {"P3.3": "8S", "P3.4": "8H", "P3.5": "5D", "P3.6": "5C",
             "P6.3": "AS", "P6.4": "AH", "P6.5": "KD", "P6.6": "2C"}
    d = Dealer(new_hand([3, 6]), fixed)
    d.until(6, BetStep)
    assert d.bet_steps()[5].first == "p6"  # A-A-K beats 8-8-5
    assert (d.steps[-1].first, d.steps[-1].announce) == ("p3", "Two pair, eights and fives high")


def test_high_hand_only_among_active_players():
    # seat 2 shows the pair of aces but folds on 3rd street: seat 4 (queen) opens 4th street
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script={3: [("p1", "BRING_IN", "0.50"), ("p2", "FOLD", None)]})
    d.until(4, BetStep)
    assert d.steps[-1].first == "p4" and d.steps[-1].announce == "Eight high"  # 4C 8S beats 3C 7D


def test_high_hand_folding_first_passes_the_turn_to_the_next_player():
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script={4: [("p2", "FOLD", None), ("p4", "CHECK", None),
                                                         ("p1", "CHECK", None)]})
    d.until(4, BetStep)
    assert d.hand.betting.state == State.IDLE and [p.seat for p in d.hand.betting.live] == [1, 4]


# -- §3.5 exposed seventh card --------------------------------------------------------------------


def test_exposed_seventh_card_plays_and_its_player_acts_first():
    d = Dealer(new_hand([1, 2, 4]), UPS_124)
    d.until(7, DealStep)
    assert d.hand.expose("P4.7") is None
    d.until(7, BetStep)
    step = d.steps[-1]
    assert step.first == "p4" and "P4 exposed the last card" in step.announce
    assert d.hand.cards["P4.7"] in d.hand.up_cards(4)
    out = d.play()
    assert out.details["exposed"] == ["P4.7"] and len(out.hands["P4"].cards) == 5
    assert_conserved(d.hand, out)


def test_without_exposure_seventh_street_is_opened_by_the_high_hand_as_on_sixth():
    d = Dealer(new_hand([1, 2, 4]), UPS_124)
    d.until(7, BetStep)
    assert d.bet_steps()[6].first == d.bet_steps()[7].first == "p2"


def test_several_exposed_seventh_cards_first_in_deal_order_acts_first():
    d = Dealer(new_hand([1, 2, 4]), UPS_124)
    d.until(7, DealStep)
    assert d.hand.expose("P4.7") is None  # reported first, but dealt after P1.7
    assert d.hand.expose("P1.7") is None
    d.until(7, BetStep)
    assert d.steps[-1].first == "p1"


@pytest.mark.parametrize("position, reason", [
    ("P1.3", "only a 7th card may be exposed"),
    ("BURN4", "only a 7th card may be exposed"),
    ("P3.7", "has not been dealt"),
])
def test_exposing_other_cards_is_refused(position, reason):
    d = Dealer(new_hand([1, 2, 4]), UPS_124)
    d.until(7, DealStep)
    assert reason in d.hand.expose(position)
    assert d.hand.exposed == []


def test_exposure_is_refused_once_seventh_street_betting_opened():
    d = Dealer(new_hand([1, 2, 4]), UPS_124)
    d.until(7, BetStep)
    assert "before the 7th-street betting opens" in d.hand.expose("P4.7")


# -- §6.2 rake ------------------------------------------------------------------------------------


def _pot_25() -> Script:
    rounds = {3: [("BRING_IN", "2.50"), ("CALL", None)], 7: [("BET", "1"), ("CALL", None)]}
    rounds.update({s: [("BET", "3"), ("CALL", None)] for s in (4, 5, 6)})
    return rounds


def test_rake_example_pot_25_rake_2_50():
    d = Dealer(new_hand([1, 2]), script=_pot_25())
    out = d.play()
    assert D(out.details["total_pot"]) == D("25.00") and D(out.details["rake"]) == D("2.50")
    assert out.details["raked"]
    assert sum(D(r["amount"]) for r in out.details["pots"]) == D("22.50")
    assert_conserved(d.hand, out)


def test_rake_example_pot_48_rake_capped_at_3():
    script = {3: [("BRING_IN", "3"), ("CALL", None)], 7: [("BET", "3"), ("CALL", None)]}
    script.update({s: [("BET", "3"), ("RAISE", "6"), ("CALL", None)] for s in (4, 5, 6)})
    d = Dealer(new_hand([1, 2]), script=script)
    out = d.play()
    assert (D(out.details["total_pot"]), D(out.details["rake"])) == (D("48.00"), D("3.00"))
    assert_conserved(d.hand, out)


def test_rake_cap_is_a_house_option():
    d = Dealer(new_hand([1, 2], rake_cap="2.00"), script=_pot_25())
    out = d.play()
    assert D(out.details["rake"]) == D("2.00")
    assert_conserved(d.hand, out)


def test_no_rake_when_the_hand_ends_before_the_seventh_card():
    script = {3: [("BRING_IN", "1"), ("CALL", None), ("CALL", None)], 5: [("BET", "2"), ("FOLD", None),
                                                                           ("FOLD", None)]}
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script=script)
    out = d.play()
    assert not d.hand.seventh_dealt and D(out.details["rake"]) == 0 and not out.details["raked"]
    assert returned(out) == {"p1": D(99), "p2": D(102), "p4": D(99)}  # p2's 2 came back uncalled
    assert_conserved(d.hand, out)


def test_rake_early_end_option_rakes_a_hand_won_before_the_seventh_card():
    script = {3: [("BRING_IN", "1"), ("CALL", None), ("CALL", None)], 5: [("BET", "2"), ("FOLD", None),
                                                                           ("FOLD", None)]}
    d = Dealer(new_hand([1, 2, 4], rake_early_end="RAKE"), UPS_124, script=script)
    out = d.play()
    assert D(out.details["rake"]) == D("0.30") and out.details["raked"]
    assert returned(out) == {"p1": D(99), "p2": D("101.70"), "p4": D(99)}
    assert_conserved(d.hand, out)


def test_hand_won_by_folds_after_the_seventh_card_is_raked():
    script = {3: [("BRING_IN", "1"), ("CALL", None), ("CALL", None)], 7: [("BET", "2"), ("FOLD", None),
                                                                           ("FOLD", None)]}
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script=script)
    out = d.play()
    assert d.hand.seventh_dealt and D(out.details["rake"]) == D("0.30") and not out.details["showdown"]
    assert_conserved(d.hand, out)


# -- §6.3 showdown order, splits, returns ----------------------------------------------------------


def test_showdown_order_last_aggressor_on_seventh_street_shows_first():
    # 7th street: p2 (aces showing) checks, p4 bets, p1 raises, p2 and p4 call
    script = {7: [("p2", "CHECK", None), ("p4", "BET", "1"), ("p1", "RAISE", "2"), ("p2", "CALL", None),
                  ("p4", "CALL", None)]}
    d = Dealer(new_hand([1, 2, 4]), UPS_124, script=script)
    out = d.play()
    assert out.details["showdown_order"] == ["P1", "P2", "P4"]


def test_showdown_order_last_raise_counts_not_the_first():
    script = {7: [("p2", "BET", "1"), ("p4", "RAISE", "2"), ("p1", "CALL", None), ("p2", "RAISE", "4"),
                  ("p4", "CALL", None), ("p1", "CALL", None)]}
    out = Dealer(new_hand([1, 2, 4]), UPS_124, script=script).play()
    assert out.details["showdown_order"] == ["P2", "P4", "P1"]


def test_showdown_order_without_a_bet_on_seventh_starts_with_its_first_actor():
    # the 6th-street raise by p1 does not count: nobody bet on 7th street
    script = {6: [("p2", "BET", "1"), ("p4", "CALL", None), ("p1", "RAISE", "2"), ("p2", "CALL", None),
                  ("p4", "CALL", None)]}
    out = Dealer(new_hand([1, 2, 4]), UPS_124, script=script).play()
    assert out.details["showdown_order"] == ["P2", "P4", "P1"]


def test_showdown_order_skips_folded_players():
    script = {7: [("p2", "CHECK", None), ("p4", "BET", "1"), ("p1", "FOLD", None), ("p2", "CALL", None)]}
    out = Dealer(new_hand([1, 2, 4]), UPS_124, script=script).play()
    assert out.details["showdown_order"] == ["P4", "P2"]


def test_split_pot_odd_chip_to_the_highest_card_by_suit_rulebook_example_9():
    # §5.3 example 9: AS AH KD QC 9S 4D 2C (seat 2) vs AD AC KH QD 9H 3S 2S (seat 1): A-A-K-Q-9 both
    fixed = {"P1.1": "AD", "P1.2": "AC", "P1.3": "KH", "P1.4": "QD", "P1.5": "9H", "P1.6": "3S", "P1.7": "2S",
             "P2.1": "AS", "P2.2": "AH", "P2.3": "KD", "P2.4": "QC", "P2.5": "9S", "P2.6": "4D", "P2.7": "2C"}
    d = Dealer(new_hand([1, 2]), fixed, script={3: [("p2", "BRING_IN", "0.55"), ("p1", "CALL", None)]})
    out = d.play()
    assert (D(out.details["total_pot"]), D(out.details["rake"])) == (D("1.10"), D("0.11"))
    pot = out.details["pots"][0]
    assert pot["winners"] == ["p2", "p1"] and pot["shares"] == {"p2": "0.50", "p1": "0.49"}  # A♠ beats A♦
    assert out.winner == "P2,P1"
    assert [c[0] for c in out.hands["P1"].cards] == [c[0] for c in out.hands["P2"].cards] == list("AAKQ9")
    assert returned(out) == {"p1": D("99.94"), "p2": D("99.95")}
    assert out.player_bets["p1"][CHIPS].outcome == "LOSE"
    assert_conserved(d.hand, out)


def test_returned_amounts_with_a_side_pot_and_chip_conservation():
    # p1 quad aces with 2.00 only; p2 a pair of kings; p3 queen high
    fixed = {"P1.1": "AS", "P1.2": "AH", "P1.3": "AD", "P1.4": "AC", "P1.5": "7C", "P1.6": "8D", "P1.7": "2H",
             "P2.1": "KS", "P2.2": "KH", "P2.3": "3C", "P2.4": "9D", "P2.5": "TC", "P2.6": "JD", "P2.7": "4S",
             "P3.1": "QS", "P3.2": "JH", "P3.3": "6C", "P3.4": "2D", "P3.5": "8S", "P3.6": "3H", "P3.7": "9C"}
    script = {3: [("p2", "BRING_IN", "1"), ("p3", "CALL", None), ("p1", "CALL", None)],
              4: [("p1", "ALL_IN", None), ("p2", "RAISE", "3"), ("p3", "CALL", None)]}
    d = Dealer(new_hand([1, 2, 3], chips={1: 2, 2: 100, 3: 100}), fixed, script=script)
    out = d.play()
    assert {p: D(v) for p, v in out.details["contributions"].items()} == {"p1": 2, "p2": 4, "p3": 4}
    # main 6.00 {p1,p2,p3} minus the 1.00 rake, side 4.00 {p2,p3}
    assert [(D(r["amount"]), r["eligible"], r["winners"]) for r in out.details["pots"]] == [
        (D(5), ["p1", "p2", "p3"], ["p1"]), (D(4), ["p2", "p3"], ["p2"])]
    assert D(out.details["rake"]) == D(1) and out.winner == "P1"
    assert returned(out) == {"p1": D(5), "p2": D(100), "p3": D(96)}
    assert [out.player_bets[p][CHIPS].outcome for p in ("p1", "p2", "p3")] == ["WIN", "PUSH", "LOSE"]
    assert out.details["announce"] == "Four of a kind, aces, win"
    assert_conserved(d.hand, out)


def test_antes_are_posted_before_the_deal_and_accounted():
    d = Dealer(new_hand([1, 2], ante="0.25"), script={3: [("BRING_IN", "0.50"), ("CALL", None)]})
    out = d.play()
    assert out.details["antes"] == {"p1": "0.25", "p2": "0.25"} and D(out.details["total_pot"]) == D("1.50")
    assert_conserved(d.hand, out)


# -- properties: random hands ---------------------------------------------------------------------


def draw_legal(data, b: Betting) -> tuple[Act, Decimal | None]:
    o = b.options()
    moves: list[tuple[Act, object]] = [(Act.CHECK, None)] * o.check + [(Act.FOLD, None)] * o.fold
    moves += [(Act.CALL, None)] * (o.call is not None) + [(Act.ALL_IN, None)] * (o.all_in is not None)
    if o.bet is not None:
        moves.append((Act.BRING_IN if o.forced else Act.BET, o.bet))
    if o.raise_ is not None:
        moves.append((Act.RAISE, o.raise_))
    action, rng = data.draw(st.sampled_from(moves))
    if rng is None:
        return action, None
    return action, data.draw(st.integers(int(rng.min / CENT), int(rng.max / CENT))) * CENT


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(seats=st.lists(st.integers(1, 8), min_size=2, max_size=8, unique=True).map(sorted),
       deck=st.permutations(STANDARD_52),
       stacks=st.lists(st.sampled_from([D("0.30"), D("0.50"), D(2), D(7), D(30), D(500)]), min_size=8, max_size=8),
       options=st.fixed_dictionaries({
           "ante": st.sampled_from([D(0), D("0.25")]),
           "bring_in": st.sampled_from(["SPREAD_0.50_3.00", "FIXED_0.50"]),
           "min_raise_rule": st.sampled_from(["DOUBLE_LEVEL", "PREVIOUS_INCREMENT"]),
           "deck_exhaustion": st.sampled_from(["COMMUNITY_CARD", "RESHUFFLE_BURNS"]),
           "rake_early_end": st.sampled_from(["NONE", "RAKE"]),
       }),
       data=st.data())
def test_random_hands_conserve_chips_and_follow_the_deal_rules(seats, deck, stacks, options, data):
    hand = new_hand(seats, chips={s: stacks[s - 1] for s in seats}, **options)
    total = brought(hand)
    d = Dealer(hand, deck=deck, policy=lambda b: draw_legal(data, b))
    out = d.play()
    assert_conserved(hand, out)
    rake = D(out.details["rake"])
    assert 0 <= rake <= D("3.00")
    if not hand.seventh_dealt and options["rake_early_end"] == "NONE":
        assert rake == 0
    # cards: distinct except 7th cards dealt from the burns; folded players stop receiving
    dealt = [p for s in d.steps if isinstance(s, DealStep) for p in s.positions if not p.confirm]
    codes = [hand.cards.get(p.name) for p in dealt if not p.burn and not p.from_burns] + hand.burn_cards
    assert len(codes) == len(set(codes)) <= 52
    live = {p.seat for p in hand.betting.live}
    if len(live) > 1:
        assert hand.seventh_dealt and all(len(hand.seven(s)) == 7 for s in live)
        assert sorted(out.details["showdown_order"]) == sorted(f"P{s}" for s in live)
    else:
        assert list(out.hands) == [] and sum(returned(out).values()) == total - rake
