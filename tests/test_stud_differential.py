"""Differential test of the Seven-Card Stud showdown against a peer implementation (pokerkit).

For thousands of seeded random showdowns (random seven-card hands, deliberate ties, random
stacks and no-limit betting that leaves several all-ins at different amounts and players who
folded after putting chips in) we settle the same hand twice:

* **pokerkit** (0.7.x) plays the hand: a no-limit seven-card stud ``State`` (the streets of
  ``pokerkit.games.SevenCardStud``: 2 down + 1 up, three up cards, one down card; low-card
  bring-in, high hand opens) with our chosen cards dealt with ``deal_hole``, antes, a
  bring-in and scripted random actions (``random.Random(seed)``), integer cents as chips;
* **ours**: a real :class:`dealer.games.stud.StudHand` whose betting engine is loaded with
  the contributions and folds pokerkit ended with (``p.total``, ``p.stack``, ``p.folded``)
  and whose cards are the same; :meth:`StudHand.outcome` then runs the production path
  (``build_pots`` -> ``rake_amount``/``take_rake`` -> ``evaluate``/``odd_chip_key`` -> ``award``).

Compared on every showdown (failures print the seed and the hand):

1. the pots: pokerkit's main and side pots (``State.pots``, amount and eligible players)
   against our ``build_pots(contributions, live)``;
2. the hand ordering: for every pair of live players, ``evaluate(...).rank_key`` orders them
   exactly as pokerkit's ``StandardHighHand`` does, and the best five has the same ranks;
3. the winners of every pot (pokerkit's best hands among the pot's eligible players) and the
   chips pokerkit pushes from every pot, against our per-pot records;
4. every player's final payoff (pokerkit ``payoffs``) against ours (``returned - brought``);
5. the rake: once with the rake off, once with our rake expressed in pokerkit (below).

Rule differences, all written down here and adjusted for explicitly (nowhere silently):

* **Odd chips** (``seven-card-stud.md`` §6.3). Ours: one indivisible unit at a time to the tied
  winners in order of the highest card by suit of their best five (S > H > D > C), wrapping
  around. pokerkit (``State.push_chips``): ``divmod(pot, winners)`` and the *whole* remainder
  to the tied winner with the lowest player index (seat order). So with a remainder of 1 the
  two rules pick possibly different players, with a remainder of 2+ (3+ way ties) pokerkit
  gives all of it to one player. The test maps our split onto pokerkit's rule per pot
  (:func:`pokerkit_split`), compares the pushes and payoffs after that adjustment, and checks
  our own split against §6.3 (:func:`our_split`) separately.
* **Rake** (§6.2). Ours: ``min(10 % of all pots, 3.00)`` for the *whole hand*, rounded down to the
  unit, taken from the main pot first, then the side pots in order. pokerkit's ``rake``
  (``utilities.rake``) is called *per pot*: ``round(amount * percentage)`` (Python's
  half-to-even rounding) then ``min(., cap)`` *per pot*; its ``no_flop_no_drop`` looks at
  board cards, which stud never has. So pokerkit's own function expresses ours only for a
  single pot whose 10 % rounds down (amount % 10 < 5 cents): there the test uses it
  (``functools.partial(rake, percentage=Fraction(1, 10), cap=300)``). Elsewhere the test plugs
  our rule into pokerkit's rake hook (:func:`whole_hand_rake`: the whole-hand amount,
  allocated main pot first over pokerkit's own pots); if two of pokerkit's pots have the
  same amount but would carry different rake, the hook (which only sees an amount) cannot
  tell them apart and the raked comparison of that hand is skipped (counted, must be rare).
  :func:`test_pokerkit_native_rake_differs_from_ours` pins the documented differences.
* **Hand killing**. After the showdown pokerkit kills every hand that cannot win any pot and
  then rebuilds the pots without those players, merging pots whose eligible players became
  the same; that changes odd chips (one merged pot has one remainder) and per-pot rake.
  Our pots keep every live player eligible (§6.1). The test disables the killing
  (:class:`NoKillState` answers ``can_win_now`` with ``True``), so pokerkit settles on the
  pots formed by the betting; a killed hand would have won nothing anyway.
* **Players**: at most 7 (7 x 7 = 49 cards). With 8 players still in on 7th street our §3.6
  deals one community card; pokerkit's stud has no such rule.
* **Betting** is pokerkit's no-limit betting, used only to produce realistic contributions;
  our spread-limit betting engine is not under test here. Uncalled chips: both return the
  excess of the largest bet of a round over the second largest (folded players' bets
  included) before pots are formed, so contributions agree by construction.
* **Suits** never decide a winner in either implementation (pokerkit: ``StandardHighHand``;
  ours: §5.2); they only order our odd chips.
* **Only showdowns** are compared (pokerkit's players never fold to fewer than two here), so
  the 7th card has always been dealt and our hand is always raked; a hand won before 7th
  street is not raked by us (§6.2, ``RAKE_EARLY_END``), which pokerkit cannot express either.

A failure message starts with the hand's seed; ``compare_hand(random_deal(random.Random(seed),
seed), Coverage())`` replays that hand alone.
"""

from __future__ import annotations

import copy
import random
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cached_property, partial
from itertools import combinations
from typing import Any

import pytest
from pokerkit import (
    Automation,
    BettingStructure,
    Card,
    Deck,
    Mode,
    Opening,
    StandardHighHand,
    State,
    Street,
)
from pokerkit.utilities import rake as pokerkit_rake

from dealer.core import pots as pots_module
from dealer.core.cards import STANDARD_52
from dealer.games import stud as stud_module
from dealer.games.stud import CHIPS, StudHand, StudOptions
from dealer.games.stud_eval import evaluate, odd_chip_key

UNIT = Decimal("0.01")
SHOWDOWNS = 3000
MAX_PLAYERS = 7
BRING_IN = 25  # cents; pokerkit needs it below the minimum bet
SMALL_BET, BIG_BET = 50, 100  # no-limit minimum bets, 3rd/4th and 5th-7th street
RAKE_CAP = 300
NO_RAKE = StudOptions(rake_rate=Decimal(0))
OUR_RAKE = StudOptions()  # 10 %, cap 3.00 (§6.2)
assert OUR_RAKE.rake_rate == Decimal("0.10") and OUR_RAKE.rake_cap == Decimal("3.00")

SEED = 20240531


# --- money -----------------------------------------------------------------------------------


def dollars(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


def cents(amount: Decimal | str) -> int:
    value = Decimal(amount) * 100
    assert value == value.to_integral_value(), f"{amount} is not a whole number of cents"
    return int(value)


# --- pokerkit side -----------------------------------------------------------------------------


class PeerHand(StandardHighHand):
    """pokerkit's standard high hand (its own lookup decides the order), memoised per seven
    cards: pokerkit evaluates every player again for every pot, which dominates the runtime."""

    _memo: dict[tuple[Any, ...], StandardHighHand] = {}

    @classmethod
    def from_game(cls, hole_cards: Any, board_cards: Any = ()) -> Any:
        key = (tuple(Card.clean(hole_cards)), tuple(Card.clean(board_cards)))
        hand = cls._memo.get(key)
        if hand is None:
            if len(cls._memo) > 50_000:
                cls._memo.clear()
            hand = cls._memo[key] = super().from_game(*key)
        return hand

    @cached_property
    def entry(self) -> Any:  # pokerkit looks the entry up again on every comparison
        return super().entry


class NoKillState(State):
    """pokerkit's state without hand killing (see the module docstring): every shown hand
    stays eligible, so the pots pokerkit settles are the ones the betting formed."""

    def can_win_now(self, player_index: int) -> bool:
        return True


def stud_streets() -> tuple[Street, ...]:
    """pokerkit.games.SevenCardStud's streets, no raise cap (no-limit)."""
    return (
        Street(False, (False, False, True), 0, False, Opening.LOW_CARD, SMALL_BET, None),
        Street(True, (True,), 0, False, Opening.HIGH_HAND, SMALL_BET, None),
        Street(True, (True,), 0, False, Opening.HIGH_HAND, BIG_BET, None),
        Street(True, (True,), 0, False, Opening.HIGH_HAND, BIG_BET, None),
        Street(True, (False,), 0, False, Opening.HIGH_HAND, BIG_BET, None),
    )


AUTOMATIONS = (
    Automation.ANTE_POSTING,
    Automation.BET_COLLECTION,
    Automation.BLIND_OR_STRADDLE_POSTING,
    Automation.HAND_KILLING,
    Automation.CHIPS_PULLING,
)


def peer_code(code: str) -> str:
    """Our ``TD`` is pokerkit's ``Td``."""
    return code[0] + code[1].lower()


RakeHook = Callable[[int, State], tuple[int, int]]


@dataclass
class Deal:
    """One random showdown: who sits, with what, holding which seven cards."""

    seed: int
    stacks: tuple[int, ...]  # cents, player index i = seat i + 1 = "p<i>"
    ante: int
    cards: tuple[tuple[str, ...], ...]  # our codes, seven per player, in dealing order
    actions_seed: int

    @property
    def n(self) -> int:
        return len(self.stacks)

    @cached_property
    def peer_cards(self) -> tuple[tuple[Card, ...], ...]:
        return tuple(tuple(Card.clean("".join(map(peer_code, seven)))) for seven in self.cards)

    def player(self, i: int) -> str:
        return f"p{i}"


@dataclass
class PeerResult:
    contributions: list[int]
    live: list[int]
    pots: list[tuple[int, int, tuple[int, ...]]]  # (raked, unraked, eligible indices) before pushing
    pushed: dict[int, list[int]]  # pot index -> chips pushed to each player
    payoffs: list[int]


def choose_amount(rng: random.Random, lo: int, hi: int) -> int:
    r = rng.random()
    if r < 0.35:
        return lo
    if r < 0.55:
        return hi  # all in
    return rng.randint(lo, min(hi, max(lo, 4 * lo)) if r < 0.85 else hi)


def act(state: State, rng: random.Random) -> None:
    """One random but legal action that never leaves fewer than two players in the hand."""
    if state.can_post_bring_in():
        if rng.random() < 0.6 or not state.can_complete_bet_or_raise_to():
            state.post_bring_in()
        else:
            lo = state.min_completion_betting_or_raising_to_amount
            hi = state.max_completion_betting_or_raising_to_amount
            state.complete_bet_or_raise_to(choose_amount(rng, lo, hi))
        return
    facing = bool(state.checking_or_calling_amount)
    r = rng.random()
    if facing and r < 0.22 and sum(state.statuses) > 2:
        state.fold()
    elif r < (0.37 if facing else 0.45) and state.can_complete_bet_or_raise_to():
        lo = state.min_completion_betting_or_raising_to_amount
        hi = state.max_completion_betting_or_raising_to_amount
        state.complete_bet_or_raise_to(choose_amount(rng, lo, hi))
    else:
        state.check_or_call()


def play_peer(deal: Deal, rake_for: Callable[[list[int]], RakeHook | None] | None = None,
              ) -> tuple[PeerResult, PeerResult | None]:
    """Play ``deal`` in pokerkit to the end with the rake off. With ``rake_for``, the state is
    also forked when the betting is over (pots final) and the fork, whose rake hook is
    ``rake_for(pot amounts)``, is settled too; ``None`` from ``rake_for`` means no fork."""
    rng = random.Random(deal.actions_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "some chips will be burned", an unexpected card
        state = NoKillState(
            AUTOMATIONS, Deck.STANDARD, (PeerHand,), stud_streets(), BettingStructure.NO_LIMIT,
            True, deal.ante, 0, BRING_IN, deal.stacks, deal.n, mode=Mode.TOURNAMENT, rake=pokerkit_rake)
        dealt = [0] * deal.n
        while not (state.can_show_or_muck_hole_cards() or state.can_push_chips()):
            if not deal_next(state, deal, dealt):
                assert state.actor_index is not None, f"pokerkit is stuck: {state}"
                act(state, rng)
    fork = None
    if rake_for is not None and (hook := rake_for([p.amount for p in state.pots])) is not None:
        fork = copy.deepcopy(state)
        fork.rake = hook
    return settle_peer(state, deal, list(dealt)), (settle_peer(fork, deal, list(dealt)) if fork else None)


def deal_next(state: State, deal: Deal, dealt: list[int]) -> bool:
    """Burn (an unknown card) or deal the next hole cards of ``deal``, if that is pending."""
    if state.can_burn_card("??"):
        state.burn_card("??")
    elif (i := state.hole_dealee_index) is not None:
        k = len(state.hole_dealing_statuses[i])
        state.deal_hole(deal.peer_cards[i][dealt[i]:dealt[i] + k], i)
        dealt[i] += k
    else:
        return False
    return True


def settle_peer(state: State, deal: Deal, dealt: list[int]) -> PeerResult:
    """From the end of the betting: the rest of the cards, every live hand shown, the pots pushed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        while not state.can_push_chips():
            if not deal_next(state, deal, dealt):
                assert state.can_show_or_muck_hole_cards(), f"pokerkit is stuck: {state}"
                state.show_or_muck_hole_cards(True)
        assert all(b == 0 for b in state.bets)
        contributions = [s - t for s, t in zip(state.starting_stacks, state.stacks)]
        live = [i for i in range(deal.n) if state.statuses[i]]
        assert len(live) >= 2 and all(dealt[i] == 7 for i in live)
        pots = [(p.raked_amount, p.unraked_amount, p.player_indices) for p in state.pots]
        pushed: dict[int, list[int]] = {}
        while state.can_push_chips():
            op = state.push_chips()
            got = pushed.setdefault(op.pot_index, [0] * deal.n)
            for i, a in enumerate(op.amounts):
                got[i] += a
        assert not state.status, "pokerkit should have finished the hand"
    return PeerResult(contributions, live, pots, pushed, list(state.payoffs))


def whole_hand_rake(pot_amounts: Sequence[int]) -> RakeHook | None:
    """Our §6.2 rake in pokerkit's per-pot hook: ``min(10 %, 3.00)`` of the whole hand, rounded
    down, allocated main pot first over pokerkit's own pots. The hook only sees an amount;
    ``None`` when two pots of the same amount would carry different rake."""
    rake = min(sum(pot_amounts) // 10, RAKE_CAP)
    table: dict[int, int] = {}
    for amount in pot_amounts:
        take = min(rake, amount)
        rake -= take
        if table.setdefault(amount, take) != take:
            return None

    def hook(amount: int, state: State | None = None) -> tuple[int, int]:
        take = table.get(amount, 0)  # amounts of pots pokerkit merges right after are irrelevant
        return take, amount - take

    return hook


NATIVE_RAKE = partial(pokerkit_rake, percentage=Fraction(1, 10), cap=RAKE_CAP)


# --- our side --------------------------------------------------------------------------------


def play_ours(deal: Deal, peer: PeerResult, options: StudOptions) -> dict[str, Any]:
    """Our production settlement (``StudHand.outcome``) over pokerkit's contributions and folds."""
    seats = {i + 1: deal.player(i) for i in range(deal.n)}
    chips = {deal.player(i): dollars(deal.stacks[i]) for i in range(deal.n)}
    hand = StudHand(options, seats, chips, hand_number=1, unit=UNIT)
    for i, p in enumerate(hand.betting.players):  # seat order
        assert p.player_id == deal.player(i)
        p.total = dollars(peer.contributions[i])
        p.stack = dollars(deal.stacks[i] - peer.contributions[i])
        p.folded = i not in peer.live
    for i in peer.live:
        for k, code in enumerate(deal.cards[i], start=1):
            hand.cards[f"P{i + 1}.{k}"] = code
    hand.seventh_dealt = True
    out = hand.outcome()
    payoffs = [cents(out.player_bets[deal.player(i)][CHIPS].returned) - deal.stacks[i] for i in range(deal.n)]
    return {"details": out.details, "payoffs": payoffs}


# --- the two odd-chip rules --------------------------------------------------------------------


def our_split(amount: int, tied: Sequence[str], best_five: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """§6.3: equal shares; odd units one at a time by highest card by suit, wrapping."""
    order = sorted(tied, key=lambda p: odd_chip_key(best_five[p]), reverse=True)
    q, r = divmod(amount, len(order))
    return {p: q + (1 if k < r else 0) for k, p in enumerate(order)}


def pokerkit_split(amount: int, tied_indices: Sequence[int], n: int) -> list[int]:
    """pokerkit ``push_chips``: equal shares, the whole remainder to the lowest index."""
    q, r = divmod(amount, len(tied_indices))
    out = [0] * n
    for i in tied_indices:
        out[i] = q
    out[min(tied_indices)] += r
    return out


# --- random deals ------------------------------------------------------------------------------

SUITS = "CDHS"


def shifted(cards: Sequence[str], shift: int) -> list[str]:
    return [c[0] + SUITS[(SUITS.index(c[1]) + shift) % 4] for c in cards]


def tie_group(rng: random.Random, deck: list[str], n: int) -> dict[int, list[str]]:
    """Two to four players with the same ranks in other suits (suits shifted cyclically, so
    flushes stay flushes): hands of equal strength. Half of the copies also get their two
    cards outside the best five replaced, which usually keeps the tie (only five cards play)."""
    for _ in range(20):
        base = max((rng.sample(deck, 7) for _ in range(3)), key=lambda c: evaluate(c).rank_key)  # strongish
        k = rng.randint(2, min(4, n))
        shifts = [0, *rng.sample((1, 2, 3), k - 1)]
        hands = [shifted(base, s) for s in shifts]
        if len({c for h in hands for c in h}) == 7 * k:
            break
    else:
        return {}
    used = {c for h in hands for c in h}
    spare = [c for c in deck if c not in used]
    rng.shuffle(spare)
    for h in hands[1:]:
        if rng.random() < 0.5:
            five = set(evaluate(h).best_five)
            for j, c in enumerate(h):
                if c not in five:
                    h[j] = spare.pop()
    return dict(zip(rng.sample(range(n), k), hands))


def random_deal(rng: random.Random, seed: int) -> Deal:
    n = rng.randint(2, MAX_PLAYERS)
    deck = list(STANDARD_52)
    rng.shuffle(deck)
    hands: dict[int, list[str]] = tie_group(rng, deck, n) if rng.random() < 0.45 else {}
    used = {c for h in hands.values() for c in h}
    rest = iter(c for c in deck if c not in used)
    for i in range(n):
        if i not in hands:
            hands[i] = [next(rest) for _ in range(7)]
    if rng.random() < 0.5:  # deal the seven cards in another order (down/up cards vary)
        for h in hands.values():
            rng.shuffle(h)
    stacks = tuple(rng.choice((rng.randint(1, 400), rng.randint(400, 2000), rng.randint(2000, 8000)))
                   for _ in range(n))
    return Deal(seed, stacks, rng.choice((0, 0, 5, 10, 25, 50)), tuple(tuple(hands[i]) for i in range(n)),
                rng.getrandbits(32))


# --- the comparison ------------------------------------------------------------------------------


@dataclass
class Coverage:
    hands: int = 0
    side_pots: int = 0
    three_plus_pots: int = 0
    folded_contributors: int = 0
    all_in_levels_2plus: int = 0
    split_pots: int = 0
    odd_unit_splits: int = 0
    multi_unit_remainders: int = 0
    odd_chip_rules_differ: int = 0
    native_rake_hands: int = 0
    hook_rake_hands: int = 0
    rake_skipped: int = 0
    rake_capped: int = 0
    rake_from_side_pot: int = 0
    categories: Counter[str] = field(default_factory=Counter)


def choose_rake(amounts: list[int], cov: Coverage) -> RakeHook | None:
    """pokerkit's own rake function where it expresses ours (one pot, 10 % rounds down),
    else our rule in pokerkit's hook; ``None`` (skip) where the hook cannot express it."""
    if len(amounts) == 1 and amounts[0] % 10 < 5:
        cov.native_rake_hands += 1
        return NATIVE_RAKE
    hook = whole_hand_rake(amounts)
    if hook is None:
        cov.rake_skipped += 1
    else:
        cov.hook_rake_hands += 1
    return hook


def compare_hand(deal: Deal, cov: Coverage) -> None:
    where = f"seed={deal.seed} deal={deal}"
    n = deal.n
    ids = [deal.player(i) for i in range(n)]

    # 1. rake off: pots, hand order, winners, pushes, payoffs
    peer, peer_raked = play_peer(deal, rake_for=lambda amounts: choose_rake(amounts, cov))
    ours = play_ours(deal, peer, NO_RAKE)
    live = peer.live
    contributions = {ids[i]: dollars(peer.contributions[i]) for i in range(n)}
    our_pots = stud_module.build_pots(contributions, [ids[i] for i in live])
    assert [(cents(p.amount), p.eligible) for p in our_pots] == \
        [(raked + unraked, tuple(ids[i] for i in eligible)) for raked, unraked, eligible in peer.pots], where
    assert all(raked == 0 for raked, _, _ in peer.pots), where

    hands = {i: evaluate(deal.cards[i]) for i in live}
    peer_hands = {i: PeerHand.from_game(deal.peer_cards[i]) for i in live}
    for i, j in combinations(live, 2):
        ours_cmp = (hands[i].rank_key > hands[j].rank_key) - (hands[i].rank_key < hands[j].rank_key)
        peer_cmp = (peer_hands[i] > peer_hands[j]) - (peer_hands[i] < peer_hands[j])
        assert ours_cmp == peer_cmp, f"{where}: {deal.cards[i]} vs {deal.cards[j]}"
    for i in live:
        assert sorted(c[0] for c in hands[i].best_five) == sorted(c.rank.value for c in peer_hands[i].cards), where
        cov.categories[hands[i].category] += 1

    check_settlement(deal, peer, ours, hands, peer_hands, cov, where)
    assert sum(ours["payoffs"]) == 0 and sum(peer.payoffs) == 0, where

    # 2. our rake, in pokerkit's hook (pokerkit's own function where it expresses ours)
    if peer_raked is None:
        return
    amounts = [raked + unraked for raked, unraked, _ in peer.pots]
    total = sum(amounts)
    ours_raked = play_ours(deal, peer_raked, OUR_RAKE)
    assert peer_raked.contributions == peer.contributions and peer_raked.live == live, where
    rake = cents(ours_raked["details"]["rake"])
    assert rake == min(total // 10, RAKE_CAP), where
    assert sum(raked for raked, _, _ in peer_raked.pots) == rake, where
    assert [unraked for _, unraked, _ in peer_raked.pots] == \
        [cents(r["amount"]) for r in ours_raked["details"]["pots"]], where
    check_settlement(deal, peer_raked, ours_raked, hands, peer_hands, cov, where, count=False)
    assert sum(ours_raked["payoffs"]) == -rake and sum(peer_raked.payoffs) == -rake, where
    cov.rake_capped += rake == RAKE_CAP
    cov.rake_from_side_pot += rake > amounts[0]


def check_settlement(deal: Deal, peer: PeerResult, ours: dict[str, Any], hands: dict[int, Any],
                     peer_hands: dict[int, Any], cov: Coverage, where: str, count: bool = True) -> None:
    n = deal.n
    ids = [deal.player(i) for i in range(n)]
    index = {p: i for i, p in enumerate(ids)}
    records = ours["details"]["pots"]
    assert len(records) == len(peer.pots), where
    expected_peer_payoffs = list(ours["payoffs"])
    for k, (record, (_, unraked, eligible)) in enumerate(zip(records, peer.pots)):
        assert record["eligible"] == [ids[i] for i in eligible], where
        amount = cents(record["amount"])
        assert amount == unraked, where
        # winners: pokerkit's best hands among the eligible players
        best = max(peer_hands[i] for i in eligible)
        peer_winners = sorted(i for i in eligible if peer_hands[i] == best)
        assert sorted(index[p] for p in record["winners"]) == peer_winners, f"{where} pot {k}"
        # our split follows §6.3 (highest card by suit of the best five first)
        shares = {p: cents(a) for p, a in record["shares"].items()}
        best_five = {p: hands[index[p]].best_five for p in record["winners"]}
        assert shares == our_split(amount, record["winners"], best_five), f"{where} pot {k}"
        # pokerkit pushes the same pot with its own odd-chip rule
        expected = pokerkit_split(amount, peer_winners, n)
        assert peer.pushed.get(k, [0] * n) == expected, f"{where} pot {k}: {peer.pushed.get(k)} != {expected}"
        for p, a in shares.items():
            expected_peer_payoffs[index[p]] += expected[index[p]] - a
        if count and len(peer_winners) > 1:
            cov.split_pots += 1
            remainder = amount % len(peer_winners)
            cov.odd_unit_splits += remainder > 0
            cov.multi_unit_remainders += remainder > 1
            cov.odd_chip_rules_differ += any(expected[index[p]] != a for p, a in shares.items())
    assert peer.payoffs == expected_peer_payoffs, \
        f"{where}: pokerkit {peer.payoffs} != ours mapped to pokerkit's odd chips {expected_peer_payoffs}"
    if count:
        live = set(peer.live)
        cov.hands += 1
        cov.side_pots += len(peer.pots) > 1
        cov.three_plus_pots += len(peer.pots) > 2
        cov.folded_contributors += any(i not in live and peer.contributions[i] > 0 for i in range(n))
        all_in = {peer.contributions[i] for i in live if peer.contributions[i] == deal.stacks[i]}
        cov.all_in_levels_2plus += len(all_in) >= 2


def run_differential(count: int, seed: int) -> Coverage:
    rng = random.Random(seed)
    cov = Coverage()
    for _k in range(count):
        hand_seed = rng.getrandbits(48)
        compare_hand(random_deal(random.Random(hand_seed), hand_seed), cov)
    return cov


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_showdowns_agree_with_pokerkit():
    cov = run_differential(SHOWDOWNS, SEED)
    # the random hands really exercise what the comparison is about
    assert cov.hands == SHOWDOWNS
    assert cov.side_pots > SHOWDOWNS // 5, cov
    assert cov.three_plus_pots > SHOWDOWNS // 20, cov
    assert cov.all_in_levels_2plus > SHOWDOWNS // 20, cov
    assert cov.folded_contributors > SHOWDOWNS // 5, cov
    assert cov.split_pots > SHOWDOWNS // 10, cov
    assert cov.odd_unit_splits > 50 and cov.multi_unit_remainders > 5 and cov.odd_chip_rules_differ > 20, cov
    assert cov.native_rake_hands > 100 and cov.hook_rake_hands > SHOWDOWNS // 2, cov
    assert cov.rake_skipped < SHOWDOWNS // 100, cov
    assert cov.rake_capped > 100 and cov.rake_from_side_pot > 0, cov
    assert len(cov.categories) >= 8, cov


def test_pokerkit_native_rake_differs_from_ours():
    """The documented rake differences, on pokerkit's own ``rake`` function."""
    # per pot, half-to-even rounding: 10 % of 25 cents is 2 (ours 2), of 35 cents 4 (ours 3)
    assert NATIVE_RAKE(25, None) == (2, 23) and NATIVE_RAKE(35, None) == (4, 31)
    assert stud_module.rake_amount(dollars(35), Decimal("0.10"), Decimal("3.00"), UNIT) == dollars(3)
    # the cap applies per pot in pokerkit: main 60.00 and side 40.00 -> 3.00 + 3.00; ours 3.00 for the hand
    assert NATIVE_RAKE(6000, None)[0] + NATIVE_RAKE(4000, None)[0] == 600
    assert stud_module.rake_amount(dollars(10000), Decimal("0.10"), Decimal("3.00"), UNIT) == dollars(300)
    # no-flop-no-drop looks at board cards: a stud hand (no board) is never raked that way
    state = NoKillState(AUTOMATIONS, Deck.STANDARD, (PeerHand,), stud_streets(), BettingStructure.NO_LIMIT,
                        True, 0, 0, BRING_IN, (1000, 1000), 2)
    assert pokerkit_rake(1000, state, percentage=0.1, no_flop_no_drop=True) == (0, 1000)


def test_odd_chip_rules_differ_on_a_three_way_tie():
    """The same three-way tie of 1.00 (remainder 1) and 1.01 (remainder 2) under both rules."""
    best_five = {"p0": ("AC", "KC", "QD", "9C", "4D"), "p1": ("AS", "KS", "QH", "9S", "4H"),
                 "p2": ("AD", "KD", "QC", "9D", "4C")}
    assert our_split(100, ["p0", "p1", "p2"], best_five) == {"p1": 34, "p2": 33, "p0": 33}
    assert pokerkit_split(100, [0, 1, 2], 3) == [34, 33, 33]
    assert our_split(101, ["p0", "p1", "p2"], best_five) == {"p1": 34, "p2": 34, "p0": 33}
    assert pokerkit_split(101, [0, 1, 2], 3) == [35, 33, 33]


# The comparison must be able to fail: each mutant below is a plausible bug in the code under
# test (patched where the production path looks it up), and the differential run must catch
# it with a comparison failure, whose message starts with the seed of the hand.

_REAL_BUILD_POTS = stud_module.build_pots
_REAL_TAKE_RAKE = stud_module.take_rake
_REAL_EVALUATE = stud_module.evaluate
_REAL_SPLIT = pots_module.split


def _side_pots_open_to_all(contributions, live):
    """Eligibility bug: an all-in player could win chips they did not match."""
    return [type(p)(p.amount, tuple(live)) for p in _REAL_BUILD_POTS(contributions, live)]


def _rake_from_last_pot(pots, rake):
    """§6.2 bug: the rake taken from the last side pot first."""
    return list(reversed(_REAL_TAKE_RAKE(list(reversed(pots)), rake)))


def _odd_chip_in_seat_order(amount, winners, unit):
    """§6.3 bug: odd units by seat order instead of the highest card by suit."""
    return _REAL_SPLIT(amount, sorted(winners), unit)


def _suits_break_ties(cards):
    """§5.2 bug: suits decide between equal hands."""
    hand = _REAL_EVALUATE(cards)
    return type(hand)(hand.rank_key + odd_chip_key(hand.best_five), hand.category, hand.best_five, hand.name,
                      hand.cards)


@pytest.mark.parametrize(("target", "name", "mutant"), [
    (stud_module, "build_pots", _side_pots_open_to_all),
    (stud_module, "take_rake", _rake_from_last_pot),
    (pots_module, "split", _odd_chip_in_seat_order),
    (stud_module, "evaluate", _suits_break_ties),
])
def test_the_comparison_catches_a_planted_bug(monkeypatch, target, name, mutant):
    monkeypatch.setattr(target, name, mutant)
    with pytest.raises(AssertionError, match=r"^seed=\d+"):
        run_differential(400, SEED + 1)
