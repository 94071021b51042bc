"""Exact RTP of Sevenluck Poker's Pair Plus and of its Ante/Play (with the Ante Bonus) under
two decision strategies, by complete enumeration of the player and dealer hands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dealer.games.rtp.report import Progress, RtpReport, RtpRow, _simple_row, pct, ratio
from dealer.games.rtp.three_card import (DISJOINT3, HAND_CARDS, HANDS3, PROGRESS_STEP,
                                         DisjointCounter, category_counts, dense_values, hand_codes)

#: The bets of the report (Ante/Play per decision strategy): the keys of a table's ``rtp_bounds``.
BETS = ("pair_plus", "ante_play_q64", "ante_play_best")



@dataclass(frozen=True)
class DealerCounts:
    """For one player hand: the 18,424 disjoint dealer hands by outcome."""

    no_qualify: int
    player_wins: int  # dealer qualifies and ranks below the player
    tie: int  # dealer qualifies and ranks equal
    dealer_wins: int  # dealer qualifies and ranks above

    @property
    def total(self) -> int:
        return self.no_qualify + self.player_wins + self.tie + self.dealer_wins


class SevenluckTables:
    """The 22,100 hands ranked once with :mod:`dealer.games.sevenluck`, and the counter."""

    def __init__(self) -> None:
        from dealer.games.sevenluck import dealer_qualifies, evaluate3

        self.hands = [evaluate3(hand_codes(h)) for h in HAND_CARDS]
        self.values = dense_values(self.hands)
        self.counter = DisjointCounter(self.values)
        qualifying = [v for h, v in zip(self.hands, self.values) if dealer_qualifies(h)]
        self.qualify_min = min(qualifying)
        # Qualification must be an up-set of the order for the counting below to be exact.
        if len(qualifying) != sum(1 for v in self.values if v >= self.qualify_min):
            raise AssertionError("dealer qualification is not monotone in the hand order")

    def dealer_counts(self, index: int) -> DealerCounts:
        c, q, v = self.counter, self.qualify_min, self.values[index]
        no_qualify = c.below(index, q)
        if v < q:
            return DealerCounts(no_qualify, 0, 0, DISJOINT3 - no_qualify)
        less = c.below(index, v)
        equal = c.below(index, v + 1) - less
        wins = less - no_qualify
        return DealerCounts(no_qualify, wins, equal, DISJOINT3 - no_qualify - wins - equal)

    def index_of(self, codes: Sequence[str]) -> int:
        from dealer.core.cards import CARD_ID

        return HAND_CARDS.index(tuple(sorted(CARD_ID[c] for c in codes)))


_SEVENLUCK_TABLES: list[SevenluckTables] = []


def sevenluck_tables() -> SevenluckTables:
    """The ranked hands, built once per process (they do not depend on the pay table)."""
    if not _SEVENLUCK_TABLES:
        _SEVENLUCK_TABLES.append(SevenluckTables())
    return _SEVENLUCK_TABLES[0]


def play_net(counts: DealerCounts) -> int:
    """Net result of PLAY in ante units times 18,424, without the Ante Bonus (ante + play)."""
    ante = counts.no_qualify + counts.player_wins - counts.dealer_wins
    play = counts.player_wins - counts.dealer_wins
    return ante + play


@dataclass(frozen=True)
class StrategyResult:
    ev_per_ante: Fraction  # expected net result per unit of ante
    wagered_per_ante: Fraction  # expected total wagered (ante + play when played) per unit of ante
    played: Fraction  # fraction of hands played

    @property
    def rtp(self) -> Fraction:
        return (self.wagered_per_ante + self.ev_per_ante) / self.wagered_per_ante


def sevenluck_strategies(options: Any = None, tables: SevenluckTables | None = None,
                         progress: Progress | None = None) -> dict[str, StrategyResult]:
    """Ante/Play under the Q-6-4 rule and under the best (max-EV per hand) rule."""
    from dealer.games.sevenluck import SevenluckOptions, evaluate3

    opts = options if options is not None else SevenluckOptions()
    t = tables if tables is not None else sevenluck_tables()
    q64 = evaluate3(("QS", "6H", "4D"))
    bonus = {c: ratio(r) for c, r in opts.ante_bonus.items()}
    fold_ev = Fraction(-1)
    ev_sums = {name: Fraction(0) for name in ("q64", "best")}  # sum of EV
    played = {name: 0 for name in ev_sums}  # hands played
    for i, hand in enumerate(t.hands):
        b = bonus.get(hand.category, Fraction(0))
        ev_play = Fraction(play_net(t.dealer_counts(i)), DISJOINT3) + b
        ev_fold = fold_ev + (b if opts.ante_bonus_on_fold else 0)
        for name, plays in (("q64", hand >= q64), ("best", ev_play >= ev_fold)):
            if plays:
                ev_sums[name] += ev_play
                played[name] += 1
            else:
                ev_sums[name] += ev_fold
        if progress is not None and (i + 1) % PROGRESS_STEP == 0:
            progress("sevenluck ante/play", i + 1, HANDS3)
    if progress is not None:
        progress("sevenluck ante/play", HANDS3, HANDS3)
    out = {}
    for name, ev_sum in ev_sums.items():
        p_play = Fraction(played[name], HANDS3)
        out[name] = StrategyResult(ev_sum / HANDS3, 1 + p_play, p_play)
    return out


def sevenluck_report(options: Any = None, progress: Progress | None = None) -> RtpReport:
    """Exact RTP of Sevenluck's Pair Plus and of Ante/Play (+ Ante Bonus) under two strategies."""
    from dealer.games.sevenluck import SevenluckOptions

    opts = options if options is not None else SevenluckOptions()
    tables = sevenluck_tables()
    cats = category_counts([h.category for h in tables.hands])
    pp = sum((Fraction(n, HANDS3) * (1 + ratio(opts.pair_plus[c])) for c, n in cats.items()
              if c in opts.pair_plus), Fraction(0))
    rows = [_simple_row(
        "pair_plus", pp,
        "standalone Pair Plus (a hand that is never folded); pays "
        + "/".join(str(opts.pair_plus[c]) for c in opts.pair_plus),
    )]
    strategies = sevenluck_strategies(opts, tables, progress)
    bonus_table = "/".join(str(opts.ante_bonus[c]) for c in opts.ante_bonus)
    notes = {
        "q64": "Ante+Play, PLAY iff hand >= Q-6-4; RTP per total wagered, house edge per ante",
        "best": "Ante+Play, max-EV decision per hand (ties PLAY); RTP per total wagered, house edge per ante",
    }
    for name, res in strategies.items():
        rows.append(RtpRow(
            f"ante_play_{name}", res.rtp, -res.ev_per_ante,
            f"{notes[name]}; ante bonus {bonus_table}"
            + ("" if not opts.ante_bonus_on_fold else ", also on a fold"),
            details={
                "ev_per_ante_pct": pct(res.ev_per_ante),
                "house_edge_per_ante_pct": pct(-res.ev_per_ante),
                "element_of_risk_pct": pct(1 - res.rtp),
                "played_pct": pct(res.played),
                "wagered_per_ante": pct(res.wagered_per_ante / 100),  # a plain number, 4 decimals
            },
        ))
    return RtpReport(
        game="sevenluck",
        rows=rows,
        combinations={"player_dealer_hand_pairs": HANDS3 * DISJOINT3, "pair_plus_hands": HANDS3},
        options=opts.model_dump(),
    )
