"""Exact return to player (RTP) of every bet type of a configured pay table.

``dealer rtp GAME`` (see :mod:`tools.cli`) and ``dealer run`` (:mod:`dealer.edge.rtp_policy`)
report, for a table's house options and pay tables, the RTP and house edge of each bet type,
computed by **complete enumeration** with exact rational arithmetic (:class:`fractions.Fraction`):
no sampling, no floating point until the percentages are printed.

Where things are:

* :mod:`~dealer.games.rtp.report`: the report, its rows, declared bounds and formatting.
* :mod:`~dealer.games.rtp.three_card`: three-card hands of a 52-card deck and the counting
  tricks that keep the enumeration fast (the disjoint-hand counter, six-card classes).
* one module per game with a report (:mod:`~dealer.games.rtp.teen_patti`,
  :mod:`~dealer.games.rtp.sevenluck`), registered here with :func:`register_rtp`.

The package does no IO and reads no clock; long loops report to an optional
``progress(stage, done, total)`` callback (the CLI draws a tqdm bar with it and times the report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from dealer.games.rtp import sevenluck as _sevenluck, teen_patti as _teen_patti
from dealer.games.rtp.report import (Progress, RtpBound, RtpReport, RtpRow, _above, _below, _json_safe,
                                     _simple_row, at_precision, decimals, fraction_str, pct, percent_text, ratio)
from dealer.games.rtp.sevenluck import (DealerCounts, SevenluckTables, StrategyResult, play_net,
                                        sevenluck_report, sevenluck_strategies, sevenluck_tables)
from dealer.games.rtp.teen_patti import teen_patti_category_counts, teen_patti_main_counts, teen_patti_report
from dealer.games.rtp.three_card import (DISJOINT3, HAND_CARDS, HANDS3, SIX_CARD_SETS, DisjointCounter,
                                         SixCardClass, category_counts, dense_values, hand_codes,
                                         six_card_category_counts, six_card_classes)


@dataclass(frozen=True)
class RtpGame:
    """What the backend knows of one game's RTP: its report's bets (a table's ``rtp_bounds``
    keys), the maximum the game declares (percent as written, None for none) and the report."""

    name: str
    bets: tuple[str, ...]
    report: Callable[[Any, Progress | None], RtpReport]  # (validated options or None, progress)
    default_max: Decimal | None = None


#: The advisory minimum (percent): a bet below it is reported so that it stands out (the
#: rulebook: "the report must make such a bet stand out"), but it is no declared bound, so it
#: fails neither ``--strict`` nor a table with ``rtp_policy = "strict"``.
DEFAULT_MIN_RTP = Decimal("90")

#: Games with an RTP report, by registry name (live: :func:`register_rtp` adds to it).
RTP_GAMES: dict[str, RtpGame] = {}
#: The bets of each game's report, as ``dealer rtp`` names them: the keys of a table's
#: ``rtp_bounds`` (Sevenluck's Ante/Play is reported per decision strategy).
RTP_BETS: dict[str, tuple[str, ...]] = {}
#: The maximum each game declares (percent, as written: its decimals are its precision).
DEFAULT_MAX_RTP: dict[str, Decimal | None] = {}


def register_rtp(game: RtpGame) -> RtpGame:
    """Make ``game``'s report known to ``dealer rtp``, ``dealer run`` and the config checks."""
    RTP_GAMES[game.name] = game
    RTP_BETS[game.name] = game.bets
    DEFAULT_MAX_RTP[game.name] = game.default_max
    return game


register_rtp(RtpGame("teen-patti", _teen_patti.BETS, teen_patti_report,
                     Decimal("97.50")))  # the seed: "The maximum RTP of the game is 97.50%"
register_rtp(RtpGame("sevenluck", _sevenluck.BETS, sevenluck_report))


def game_report(game: str, options: Any = None, progress: Progress | None = None) -> RtpReport:
    try:
        entry = RTP_GAMES[game]
    except KeyError:
        raise ValueError(f"no RTP report for game {game!r} (known: {', '.join(RTP_GAMES)})") from None
    return entry.report(options, progress)


__all__ = [
    "DEFAULT_MAX_RTP", "DEFAULT_MIN_RTP", "DISJOINT3", "HAND_CARDS", "HANDS3", "RTP_BETS", "RTP_GAMES",
    "SIX_CARD_SETS", "DealerCounts", "DisjointCounter", "Progress", "RtpBound", "RtpGame", "RtpReport", "RtpRow",
    "SevenluckTables", "SixCardClass", "StrategyResult", "_above", "_below", "_json_safe", "_simple_row",
    "at_precision", "category_counts", "decimals", "dense_values", "fraction_str", "game_report", "hand_codes",
    "pct", "percent_text", "play_net", "ratio", "register_rtp", "sevenluck_report", "sevenluck_strategies",
    "sevenluck_tables", "six_card_category_counts", "six_card_classes", "teen_patti_category_counts",
    "teen_patti_main_counts", "teen_patti_report",
]
