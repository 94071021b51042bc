"""The RTP report of one game: exact figures, declared bounds and how they are compared.

Every percentage is computed from a :class:`fractions.Fraction` and rounded only when it is
printed; a declared bound (a Decimal) is compared at its own precision. No IO, no clock: the
caller that wants the wall time fills in :attr:`RtpReport.seconds` (``dealer rtp`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, overload

#: ``progress(stage, done, total)``: called now and then during the long loops.
Progress = Callable[[str, int, int], None]

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


@overload
def percent_text(bound: Decimal | Fraction) -> str: ...
@overload
def percent_text(bound: None) -> None: ...
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
    seconds: float = 0.0  # wall time, filled in by a caller with a clock (dealer rtp)
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
