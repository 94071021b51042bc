"""Exact RTP of Teen Patti 20-20's six bet types (player A, player B, tie, the two Pair
Plus bets and the Six Card Bonus), by complete enumeration."""

from __future__ import annotations

from collections import Counter
from functools import cache
from fractions import Fraction
from typing import Any

from dealer.games.rtp.report import Progress, RtpReport, _simple_row, pct, ratio
from dealer.games.rtp.three_card import (DISJOINT3, HAND_CARDS, HANDS3, PROGRESS_STEP,
                                         SIX_CARD_SETS, DisjointCounter, category_counts, dense_values,
                                         hand_codes, six_card_classes)

#: The bets of the report, as ``dealer rtp`` names them: the keys of a table's ``rtp_bounds``.
BETS = ("player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus")



_MAIN_COUNTS: dict[str, int] = {}


def teen_patti_main_counts(progress: Progress | None = None) -> dict[str, int]:
    """Ordered pairs (A, B) of disjoint hands: how many A wins, B wins, ties. They do not
    depend on the pay table: counted once per process (``dealer run`` reports every table)."""
    if _MAIN_COUNTS:
        if progress is not None:
            progress("teen-patti main bets", HANDS3, HANDS3)
        return dict(_MAIN_COUNTS)
    from dealer.games.teen_patti import evaluate3

    hands = [evaluate3(hand_codes(h)) for h in HAND_CARDS]
    counter = DisjointCounter(dense_values(hands))
    a_wins = ties = 0
    for i in range(HANDS3):
        less, equal = counter.less_equal(i)
        a_wins += less
        ties += equal
        if progress is not None and (i + 1) % PROGRESS_STEP == 0:
            progress("teen-patti main bets", i + 1, HANDS3)
    if progress is not None:
        progress("teen-patti main bets", HANDS3, HANDS3)
    total = HANDS3 * DISJOINT3
    _MAIN_COUNTS.update({"a_wins": a_wins, "b_wins": total - a_wins - ties, "ties": ties, "total": total})
    return dict(_MAIN_COUNTS)


def teen_patti_category_counts() -> dict[str, int]:
    return dict(_teen_patti_category_counts())


@cache
def _teen_patti_category_counts() -> dict[str, int]:
    from dealer.games.teen_patti import evaluate3

    return category_counts([evaluate3(hand_codes(h)).category for h in HAND_CARDS])


def teen_patti_report(options: Any = None, progress: Progress | None = None) -> RtpReport:
    """Exact RTP of the six Teen Patti bet types for ``options`` (a TeenPattiOptions)."""
    from dealer.games.teen_patti import TeenPattiOptions

    opts = options if options is not None else TeenPattiOptions()
    main = teen_patti_main_counts(progress)
    total = main["total"]
    p_a, p_b, p_tie = (Fraction(main[k], total) for k in ("a_wins", "b_wins", "ties"))
    main_ratio, tie_ratio = ratio(opts.main_ratio), ratio(opts.tie_ratio)
    rows = [
        _simple_row("player_a", p_a * (1 + main_ratio) + p_tie,
                    f"pays {opts.main_ratio}:1, refunded on a tie",
                    p_win=pct(p_a), p_tie=pct(p_tie), p_lose=pct(p_b)),
        _simple_row("player_b", p_b * (1 + main_ratio) + p_tie,
                    f"pays {opts.main_ratio}:1, refunded on a tie",
                    p_win=pct(p_b), p_tie=pct(p_tie), p_lose=pct(p_a)),
        _simple_row("tie", p_tie * (1 + tie_ratio), f"pays {opts.tie_ratio}:1", p_win=pct(p_tie)),
    ]
    cats = teen_patti_category_counts()
    pp = sum((Fraction(n, HANDS3) * (1 + ratio(opts.pair_plus[c])) for c, n in cats.items()
              if c in opts.pair_plus), Fraction(0))
    table = "/".join(str(opts.pair_plus[c]) for c in opts.pair_plus)
    for hand in ("a", "b"):
        rows.append(_simple_row(f"pair_plus_{hand}", pp, f"hand {hand.upper()}'s own category, pays {table}"))
    if progress is not None:
        progress("teen-patti six card bonus", 0, 1)
    wheel = opts.six_card_wheel == "ALLOWED"
    classes = six_card_classes(wheel)
    six = Counter[str | None]()
    for cls in classes:
        six[cls.category] += cls.sets
    six_total = sum(six.values())
    if six_total != SIX_CARD_SETS:  # pragma: no cover - a broken class enumeration
        raise AssertionError(f"six-card classes count {six_total} sets, expected {SIX_CARD_SETS}")
    six_rtp = sum((Fraction(n, six_total) * (1 + ratio(opts.six_card_bonus[c])) for c, n in six.items()
                   if c is not None), Fraction(0))
    if progress is not None:
        progress("teen-patti six card bonus", 1, 1)
    rows.append(_simple_row(
        "six_card_bonus", six_rtp,
        f"best five of six, wheel {'allowed' if wheel else 'not allowed'}, pays "
        + "/".join(str(opts.six_card_bonus[c]) for c in opts.six_card_bonus),
    ))
    return RtpReport(
        game="teen-patti",
        rows=rows,
        combinations={
            "main_bet_hand_pairs": total,
            "pair_plus_hands": HANDS3,
            "six_card_sets": six_total,
            "six_card_classes": len(classes),
        },
        options=opts.model_dump(),
    )
