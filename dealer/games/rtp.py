"""Exact return to player (RTP) of every bet type of a configured pay table.

``dealer rtp GAME`` (see :mod:`dealer.cli.main`) reports, for a table's house options and
pay tables, the RTP and house edge of each bet type, computed by **complete
enumeration** with exact rational arithmetic (:class:`fractions.Fraction`): no
sampling, no floating point until the percentages are printed.

How the enumeration stays fast (pure Python, a few seconds per game):

* **Main bets / player vs dealer** (every ordered pair of disjoint three-card hands,
  22,100 x 18,424 = 407,170,400 pairs). Every three-card hand gets a dense integer
  value that encodes the game's total order ``(cat, key)``. For one hand H, the number
  of hands disjoint from H with a value below x follows by inclusion-exclusion:
  all hands below x (a sorted array and ``bisect``), minus the hands holding each of
  H's three cards (a sorted array per card, C(51,2) = 1,275 hands each), plus the hands holding
  each two of H's cards (a sorted array per pair, 50 hands each), minus H itself.
  See :class:`DisjointCounter`.
* **Six Card Bonus** (best five of six cards, C(52,6) = 20,358,520 sets). Sets are
  counted by *class*: a rank multiset (each rank at most four times) and a suit
  pattern. With at most four distinct ranks no flush or straight is possible and the
  category follows from the ranks alone. With five distinct ranks (2+1+1+1+1), 12 of
  the 6 x 4^4 suit assignments put the five ranks in one suit; with six distinct
  ranks, 4 assignments are all one suit and 72 have exactly five in one suit (12 for
  each left-out rank). Every other assignment has no flush. See :func:`six_card_classes`.

The module does no IO; long loops report to an optional ``progress(stage, done, total)``
callback (the CLI draws a tqdm bar with it).
"""

from __future__ import annotations

import math
import os
import platform
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cache
from itertools import combinations
from math import comb, prod
from typing import Any

from dealer.core.cards import RANK_VALUE, STANDARD_52

#: ``progress(stage, done, total)``: called now and then during the long loops.
Progress = Callable[[str, int, int], None]

#: Games this module can report, by registry name.
RTP_GAMES: tuple[str, ...] = ("teen-patti", "sevenluck")
#: The bets of each game's report, as ``dealer rtp`` names them: the keys of a table's
#: ``rtp_bounds`` (Sevenluck's Ante/Play is reported per decision strategy).
RTP_BETS: dict[str, tuple[str, ...]] = {
    "teen-patti": ("player_a", "player_b", "tie", "pair_plus_a", "pair_plus_b", "six_card_bonus"),
    "sevenluck": ("pair_plus", "ante_play_q64", "ante_play_best"),
}
#: The advisory minimum (percent): a bet below it is reported so that it stands out (the
#: rulebook: "the report must make such a bet stand out"), but it is no declared bound, so it
#: fails neither ``--strict`` nor a table with ``rtp_policy = "strict"``.
DEFAULT_MIN_RTP = Decimal("90")
#: The maximum each game declares (percent, as written: its decimals are its precision).
DEFAULT_MAX_RTP: dict[str, Decimal | None] = {
    "teen-patti": Decimal("97.50"),  # the seed: "The maximum RTP of the game is 97.50%"
    "sevenluck": None,
}

HANDS3 = comb(52, 3)  # 22,100 three-card hands
DISJOINT3 = comb(49, 3)  # 18,424 hands disjoint from a given hand
SIX_CARD_SETS = comb(52, 6)  # 20,358,520

_PROGRESS_STEP = 1000


# --- Formatting helpers ---------------------------------------------------------------------


def pct(value: Fraction, places: int = 4) -> str:
    """``value`` (a ratio, 1 = 100 %) as a percentage string with ``places`` decimals.

    Exact rounding (half to even) of the rational value; never goes through a float.
    """
    scaled = round(Fraction(value) * 100 * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled), 10**places)
    return f"{sign}{whole}.{frac:0{places}d}" if places else f"{sign}{whole}"


def fraction_str(value: Fraction) -> str:
    """``n/d`` in lowest terms (``n/1`` for whole numbers, so the form is always the same)."""
    value = Fraction(value)
    return f"{value.numerator}/{value.denominator}"


def ratio(value: Decimal | int | str) -> Fraction:
    """An exact pay ratio (``Decimal("0.95")`` -> 19/20)."""
    return Fraction(Decimal(value)) if not isinstance(value, int) else Fraction(value)


# --- Declared bounds, compared at their own precision ---------------------------------------


def decimals(bound: Decimal) -> int:
    """How many decimals a declared percentage is written with (``97.50`` -> 2)."""
    exponent = bound.as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def at_precision(value: Fraction, bound: Decimal) -> Fraction:
    """``value`` (a ratio, 1 = 100 %) as a percentage rounded half up to ``bound``'s decimals.

    A declared figure is a rounded one: "97.50 %" stands for [97.495, 97.505), so an RTP of
    97.5028 % is within a maximum of 97.50 % and 97.505 % is not."""
    scale = 10 ** decimals(bound)
    return Fraction(math.floor(Fraction(value) * 100 * scale + Fraction(1, 2)), scale)


def _below(value: Fraction, bound: Decimal | Fraction) -> bool:
    if isinstance(bound, Decimal):
        return at_precision(value, bound) < Fraction(bound)
    return value * 100 < bound  # an exact bound (a Fraction) has no precision to round to


def _above(value: Fraction, bound: Decimal | Fraction) -> bool:
    if isinstance(bound, Decimal):
        return at_precision(value, bound) > Fraction(bound)
    return value * 100 > bound


def percent_text(bound: Decimal | Fraction | None) -> str | None:
    """A bound as declared (``"97.50"``); an exact Fraction with 4 decimals."""
    if bound is None:
        return None
    if isinstance(bound, Decimal):
        return f"{bound:f}"
    return pct(Fraction(bound) / 100)


@dataclass(frozen=True)
class RtpBound:
    """The RTP bounds declared for one bet, in percent as written (their decimals are their
    precision); None = not declared."""

    min: Decimal | Fraction | None = None
    max: Decimal | Fraction | None = None

    def over(self, fallback: "RtpBound") -> "RtpBound":
        """These bounds, each side not declared here taken from ``fallback``."""
        return RtpBound(self.min if self.min is not None else fallback.min,
                        self.max if self.max is not None else fallback.max)


# --- Report -------------------------------------------------------------------------------


@dataclass
class RtpRow:
    """One bet type: RTP = expected total returned / expected total wagered.

    ``house_edge`` is ``1 - rtp`` for a single bet; for Sevenluck's Ante/Play it is the
    customary house edge *per ante* (``-EV / ante``), and ``details`` carries the rest.
    ``flags`` holds ``LOW`` / ``HIGH`` when the RTP is outside the bet's declared ``bounds``
    (what ``--strict`` and ``rtp_policy = "strict"`` refuse); ``advisories`` holds ``LOW``
    when it is below the advisory minimum and no minimum is declared for it (reported only).
    """

    bet: str
    rtp: Fraction
    house_edge: Fraction
    note: str
    flags: list[str] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)
    advisories: list[str] = field(default_factory=list)
    bounds: RtpBound = field(default_factory=RtpBound)

    def to_json(self) -> dict[str, Any]:
        return {
            "bet": self.bet,
            "rtp_pct": pct(self.rtp),
            "rtp_exact": fraction_str(self.rtp),
            "house_edge_pct": pct(self.house_edge),
            "house_edge_exact": fraction_str(self.house_edge),
            "note": self.note,
            "bounds": {"min_rtp_pct": percent_text(self.bounds.min), "max_rtp_pct": percent_text(self.bounds.max)},
            "flags": list(self.flags),
            "advisories": list(self.advisories),
            "details": dict(self.details),
        }

    def problems(self) -> list[str]:
        """Why this bet is outside its declared bounds, one phrase per flag."""
        out = []
        if "LOW" in self.flags:
            out.append(f"RTP {pct(self.rtp)} % is below its declared minimum {percent_text(self.bounds.min)} %")
        if "HIGH" in self.flags:
            out.append(f"RTP {pct(self.rtp)} % is above its declared maximum {percent_text(self.bounds.max)} %")
        return out


@dataclass
class RtpReport:
    game: str
    rows: list[RtpRow]
    combinations: dict[str, int]
    seconds: float
    options: dict[str, Any] = field(default_factory=dict)
    min_rtp: Decimal | Fraction | None = None
    max_rtp: Decimal | Fraction | None = None
    advisory_min: Decimal | Fraction | None = None

    def row(self, bet: str) -> RtpRow:
        for r in self.rows:
            if r.bet == bet:
                return r
        raise KeyError(bet)

    def apply_limits(self, min_rtp: Decimal | Fraction | None, max_rtp: Decimal | Fraction | None,
                     per_bet: Mapping[str, RtpBound] | None = None,
                     advisory_min: Decimal | Fraction | None = None) -> "RtpReport":
        """Flag rows outside their declared bounds: ``per_bet[bet]``, each side not declared there
        taken from ``min_rtp`` / ``max_rtp`` (every bet). Percent values; a Decimal is compared at
        its own precision (:func:`at_precision`), a Fraction exactly. A row below
        ``advisory_min`` without a declared minimum gets an advisory, not a flag."""
        self.min_rtp, self.max_rtp, self.advisory_min = min_rtp, max_rtp, advisory_min
        default = RtpBound(min_rtp, max_rtp)
        for r in self.rows:
            r.bounds = (per_bet or {}).get(r.bet, RtpBound()).over(default)
            r.flags, r.advisories = [], []
            if r.bounds.min is not None and _below(r.rtp, r.bounds.min):
                r.flags.append("LOW")
            if r.bounds.max is not None and _above(r.rtp, r.bounds.max):
                r.flags.append("HIGH")
            if r.bounds.min is None and advisory_min is not None and _below(r.rtp, advisory_min):
                r.advisories.append("LOW")
        return self

    @property
    def flagged(self) -> list[RtpRow]:
        return [r for r in self.rows if r.flags]

    @property
    def advised(self) -> list[RtpRow]:
        return [r for r in self.rows if r.advisories]

    def to_json(self) -> dict[str, Any]:
        """JSON-safe and stable: percentages as 4-decimal strings, exact values as ``n/d``,
        declared bounds as written."""
        return {
            "game": self.game,
            "rows": [r.to_json() for r in self.rows],
            "combinations": dict(sorted(self.combinations.items())),
            "seconds": round(self.seconds, 3),
            "options": _json_safe(self.options),
            "limits": {
                "min_rtp_pct": percent_text(self.min_rtp),
                "max_rtp_pct": percent_text(self.max_rtp),
                "advisory_min_rtp_pct": percent_text(self.advisory_min),
            },
            "flagged": [r.bet for r in self.flagged],
            "advised": [r.bet for r in self.advised],
        }

    def render(self) -> str:
        """A readable table; a flagged row is marked so that it cannot be missed, and a row
        below the advisory minimum stands out too."""
        lo = "none" if self.min_rtp is None else percent_text(self.min_rtp) + " %"
        hi = "none" if self.max_rtp is None else percent_text(self.max_rtp) + " %"
        advisory = "" if self.advisory_min is None else f", advisory min {percent_text(self.advisory_min)} %"
        head = ("bet", "RTP %", "house edge %", "flag", "note")
        body = []
        for r in self.rows:
            flag = " ".join([f"!! {f}" for f in r.flags] + [f"! {f} (advisory)" for f in r.advisories])
            body.append((r.bet, pct(r.rtp), pct(r.house_edge), flag, r.note))
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(4)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(
                [cells[0].ljust(widths[0]), cells[1].rjust(widths[1]), cells[2].rjust(widths[2]),
                 cells[3].ljust(widths[3]), cells[4]]
            ).rstrip()

        out = [f"{self.game}: exact RTP by complete enumeration (declared: min {lo}, max {hi}{advisory}; "
               "a declared bound is compared at its own precision)", line(head),
               line(["-" * w for w in widths] + ["-" * 4])]
        out += [line(cells) for cells in body]
        for r in self.rows:
            for key, value in r.details.items():
                out.append(f"  {r.bet}.{key} = {value}")
        out.append("enumerated: " + ", ".join(f"{k} {v:,}" for k, v in sorted(self.combinations.items())))
        out.append(f"computed in {self.seconds:.2f} s")
        for r in self.flagged:
            out.append(f"!! {r.bet}: {' and '.join(r.problems())}")
        for r in self.advised:
            out.append(f"! {r.bet}: RTP {pct(r.rtp)} % is below the advisory minimum "
                       f"{percent_text(self.advisory_min)} % (reported, not refused)")
        return "\n".join(out)


def _json_safe(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    return value


def _simple_row(bet: str, rtp: Fraction, note: str, **details: str) -> RtpRow:
    return RtpRow(bet, rtp, 1 - rtp, note, details=dict(details))


# --- Three-card hands and the disjoint-hand counter ----------------------------------------

#: All 22,100 three-card hands as sorted card-index triples (indices into STANDARD_52).
HAND_CARDS: tuple[tuple[int, int, int], ...] = tuple(combinations(range(52), 3))


def hand_codes(hand: Sequence[int]) -> tuple[str, ...]:
    return tuple(STANDARD_52[i] for i in hand)


def dense_values(hands: Sequence[Any]) -> list[int]:
    """Ranked hands (ordered objects) -> dense integer values with the same total order."""
    order = {h: i for i, h in enumerate(sorted(set(hands)))}
    return [order[h] for h in hands]


class DisjointCounter:
    """Counts three-card hands disjoint from a given hand with a value below a bound.

    ``values[i]`` is the (dense, totally ordered) value of ``HAND_CARDS[i]``.
    :meth:`below` is inclusion-exclusion over the three cards of the given hand:
    all - (holding card 1, 2 or 3) + (holding two of them) - (the hand itself).
    """

    def __init__(self, values: Sequence[int]) -> None:
        if len(values) != HANDS3:
            raise ValueError(f"need {HANDS3} hand values, got {len(values)}")
        self.values = list(values)
        per_card: list[list[int]] = [[] for _ in range(52)]
        per_pair: dict[tuple[int, int], list[int]] = {}
        for (a, b, c), v in zip(HAND_CARDS, self.values):
            per_card[a].append(v)
            per_card[b].append(v)
            per_card[c].append(v)
            for pair in ((a, b), (a, c), (b, c)):
                per_pair.setdefault(pair, []).append(v)
        self.all = sorted(self.values)
        self.per_card = [sorted(lst) for lst in per_card]
        self.per_pair = {k: sorted(lst) for k, lst in per_pair.items()}

    def below(self, index: int, bound: int) -> int:
        """Hands disjoint from ``HAND_CARDS[index]`` whose value is < ``bound``."""
        a, b, c = HAND_CARDS[index]
        pc, pp = self.per_card, self.per_pair
        n = (
            bisect_left(self.all, bound)
            - bisect_left(pc[a], bound) - bisect_left(pc[b], bound) - bisect_left(pc[c], bound)
            + bisect_left(pp[a, b], bound) + bisect_left(pp[a, c], bound) + bisect_left(pp[b, c], bound)
        )
        return n - (self.values[index] < bound)

    def less_equal(self, index: int) -> tuple[int, int]:
        """(disjoint hands ranked below this hand, disjoint hands ranked equal to it)."""
        v = self.values[index]
        less = self.below(index, v)
        return less, self.below(index, v + 1) - less


def category_counts(categories: Sequence[str]) -> dict[str, int]:
    return dict(Counter(categories))


# --- Six Card Bonus classes -----------------------------------------------------------------

_RANKS = tuple(range(2, 15))
_ROYAL = frozenset({10, 11, 12, 13, 14})


def _straights(wheel_allowed: bool) -> tuple[frozenset[int], ...]:
    runs = [frozenset(range(top - 4, top + 1)) for top in range(6, 15)]
    if wheel_allowed:
        runs.append(frozenset({14, 2, 3, 4, 5}))
    return tuple(runs)


@dataclass(frozen=True)
class SixCardClass:
    """A rank multiset with a suit pattern, the number of 6-card sets in it and their category.

    ``counts`` maps rank (2..14) -> multiplicity. ``pattern`` is ``any`` (category from
    ranks alone), ``suited6`` (all six cards one suit), ``suited5`` (the five distinct
    ranks one suit, 2+1+1+1+1), ``suited5-R`` (six distinct ranks, all but rank R one
    suit) or ``offsuit`` (no five cards share a suit).
    """

    counts: tuple[tuple[int, int], ...]
    pattern: str
    sets: int
    category: str | None

    def example(self) -> tuple[str, ...]:
        """One concrete 6-card hand of this class (chosen to come as close to a flush as the
        pattern allows, so that a wrong class would show in a check)."""
        code = {r: c for c, r in RANK_VALUE.items()}
        ranks = [r for r, n in self.counts for _ in range(n)]
        distinct = [r for r, _ in self.counts]
        cards: list[str] = []
        if self.pattern == "any":
            used: Counter[int] = Counter()
            for r in ranks:
                cards.append(code[r] + "SHDC"[used[r]])
                used[r] += 1
        elif self.pattern == "suited6":
            cards = [code[r] + "S" for r in ranks]
        elif self.pattern.startswith("suited5-"):
            out = int(self.pattern.split("-")[1])
            cards = [code[r] + ("H" if r == out else "S") for r in ranks]
        elif self.pattern == "suited5":  # 2+1+1+1+1: every rank in spades, the pair's second card in hearts
            pair = next(r for r, n in self.counts if n == 2)
            cards = [code[r] + "S" for r in distinct] + [code[pair] + "H"]
        elif self.pattern == "offsuit":
            if len(distinct) == 6:  # four spades and two hearts
                cards = [code[r] + ("S" if i < 4 else "H") for i, r in enumerate(distinct)]
            else:  # 2+1+1+1+1: the four single ranks in spades, the pair in hearts and diamonds
                pair = next(r for r, n in self.counts if n == 2)
                cards = [code[r] + "S" for r in distinct if r != pair] + [code[pair] + "H", code[pair] + "D"]
        else:  # pragma: no cover - constructed only here
            raise ValueError(self.pattern)
        return tuple(cards)


def _rank_multisets(size: int = 6, ranks: Sequence[int] = _RANKS) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every multiset of ``size`` ranks with each rank at most 4 times, as ((rank, count), ...)."""

    def rec(i: int, left: int, acc: list[tuple[int, int]]) -> Iterator[tuple[tuple[int, int], ...]]:
        if left == 0:
            yield tuple(acc)
            return
        if i == len(ranks):
            return
        for n in range(min(4, left), -1, -1):
            if n:
                acc.append((ranks[i], n))
            yield from rec(i + 1, left - n, acc)
            if n:
                acc.pop()

    yield from rec(0, size, [])


def _suited_category(suited: frozenset[int], straights: Sequence[frozenset[int]]) -> str:
    """Five or six ranks all of one suit: royal flush, straight flush or flush."""
    if _ROYAL <= suited:
        return "royal_flush"
    return "straight_flush" if any(s <= suited for s in straights) else "flush"


def six_card_classes(wheel_allowed: bool = True) -> list[SixCardClass]:
    """Every class of 6-card sets with its set count and best-five-of-six category (§3.4).
    Built once per process for each wheel rule (``dealer run`` reports every table)."""
    return list(_six_card_classes(bool(wheel_allowed)))


@cache
def _six_card_classes(wheel_allowed: bool) -> tuple[SixCardClass, ...]:
    straights = _straights(wheel_allowed)
    out: list[SixCardClass] = []
    for counts in _rank_multisets():
        shape = sorted((n for _, n in counts), reverse=True)
        ranks = frozenset(r for r, _ in counts)
        total = prod(comb(4, n) for _, n in counts)
        has_straight = any(s <= ranks for s in straights)
        if len(counts) <= 4:
            if shape[0] == 4:
                cat: str | None = "four_of_a_kind"
            elif shape[0] == 3 and shape[1] >= 2:
                cat = "full_house"  # 3+3 and 3+2+1
            elif shape[0] == 3:
                cat = "three_of_a_kind"  # 3+1+1+1
            else:
                cat = None  # 2+2+2, 2+2+1+1: two pair
            out.append(SixCardClass(counts, "any", total, cat))
        elif len(counts) == 5:  # 2+1+1+1+1: 6 * 4^4 = 1536 suit assignments
            out.append(SixCardClass(counts, "suited5", 12, _suited_category(ranks, straights)))
            out.append(SixCardClass(counts, "offsuit", total - 12, "straight" if has_straight else None))
        else:  # six distinct ranks: 4^6 = 4096 suit assignments
            out.append(SixCardClass(counts, "suited6", 4, _suited_category(ranks, straights)))
            for r in sorted(ranks):
                out.append(SixCardClass(counts, f"suited5-{r}", 12, _suited_category(ranks - {r}, straights)))
            out.append(SixCardClass(counts, "offsuit", total - 4 - 72, "straight" if has_straight else None))
    return tuple(out)


def six_card_category_counts(wheel_allowed: bool = True) -> dict[str | None, int]:
    counts: Counter[str | None] = Counter()
    for cls in six_card_classes(wheel_allowed):
        counts[cls.category] += cls.sets
    return dict(counts)


# --- Teen Patti 20-20 -------------------------------------------------------------------


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
        if progress is not None and (i + 1) % _PROGRESS_STEP == 0:
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
    t0 = time.perf_counter()
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
        seconds=time.perf_counter() - t0,
        options=opts.model_dump(),
    )


# --- Sevenluck Poker ------------------------------------------------------------------------


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
    totals = {name: [Fraction(0), 0] for name in ("q64", "best")}  # sum of EV, hands played
    for i, hand in enumerate(t.hands):
        b = bonus.get(hand.category, Fraction(0))
        ev_play = Fraction(play_net(t.dealer_counts(i)), DISJOINT3) + b
        ev_fold = fold_ev + (b if opts.ante_bonus_on_fold else 0)
        for name, plays in (("q64", hand >= q64), ("best", ev_play >= ev_fold)):
            acc = totals[name]
            if plays:
                acc[0] += ev_play
                acc[1] += 1
            else:
                acc[0] += ev_fold
        if progress is not None and (i + 1) % _PROGRESS_STEP == 0:
            progress("sevenluck ante/play", i + 1, HANDS3)
    if progress is not None:
        progress("sevenluck ante/play", HANDS3, HANDS3)
    out = {}
    for name, (ev_sum, played) in totals.items():
        p_play = Fraction(played, HANDS3)
        out[name] = StrategyResult(ev_sum / HANDS3, 1 + p_play, p_play)
    return out


def sevenluck_report(options: Any = None, progress: Progress | None = None) -> RtpReport:
    """Exact RTP of Sevenluck's Pair Plus and of Ante/Play (+ Ante Bonus) under two strategies."""
    from dealer.games.sevenluck import SevenluckOptions

    opts = options if options is not None else SevenluckOptions()
    t0 = time.perf_counter()
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
        seconds=time.perf_counter() - t0,
        options=opts.model_dump(),
    )


# --- Entry points ----------------------------------------------------------------------


def game_report(game: str, options: Any = None, progress: Progress | None = None) -> RtpReport:
    if game == "teen-patti":
        return teen_patti_report(options, progress)
    if game == "sevenluck":
        return sevenluck_report(options, progress)
    raise ValueError(f"no RTP report for game {game!r} (known: {', '.join(RTP_GAMES)})")


def run_rtp_bench(games: Sequence[str] = RTP_GAMES) -> dict[str, Any]:
    """``dealer bench rtp``: wall time of each game's full default report."""
    results: dict[str, Any] = {}
    for game in games:
        t0 = time.perf_counter()
        report = game_report(game)
        results[game] = {"seconds": round(time.perf_counter() - t0, 3), "rows": len(report.rows)}
    return {
        "bench": "rtp",
        "games": results,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
