"""Pay tables at start-up: every table's exact RTP, checked against what it declares.

``dealer run`` computes each table's RTP report (:mod:`dealer.games.rtp`, exact, by complete
enumeration; once per distinct pay table) before it opens anything, logs one JSON line per
table and bet type, and exports each RTP as the gauge ``dealer_table_rtp_ratio``. A bet's
declared bounds are the table's ``rtp_bounds`` for it, each side not given there falling back
to the game's declared maximum (Teen Patti: the seed's 97.50 %); a declared figure is
compared at its own precision. With ``rtp_policy = "strict"`` a table with a bet outside its
declared bounds does not open: ``dealer run`` exits 2 with one line naming it. The default
policy ("report") reports and opens. The advisory minimum (90 %) is reported only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dealer.edge.config import Settings, TableConfig
from dealer.games.rtp import (DEFAULT_MAX_RTP, DEFAULT_MIN_RTP, RTP_GAMES, RtpBound, RtpReport, fraction_str, game_report,
                        pct, percent_text)


@dataclass
class TableRtp:
    """One table's report with its bounds applied (``report`` None: no RTP report for the game)."""

    table_id: str
    game: str
    policy: str
    report: RtpReport | None

    def refusals(self) -> list[str]:
        """What keeps a strict table closed, one phrase per bet outside its declared bounds."""
        if self.policy != "strict" or self.report is None:
            return []
        return [f"table {self.table_id} ({self.game}, rtp_policy = \"strict\"): bet {r.bet}: {' and '.join(r.problems())}"
                for r in self.report.flagged]


def _options_key(game: str, options: Any) -> str:
    return game + json.dumps(options.model_dump(mode="json"), sort_keys=True)


def table_report(table: TableConfig, cache: dict[str, RtpReport] | None = None) -> TableRtp:
    """The table's RTP report with its declared bounds applied."""
    if table.game not in RTP_GAMES:
        return TableRtp(table.id, table.game, table.rtp_policy, None)
    from dealer.games import game_class

    options = game_class(table.game).Options.model_validate(dict(table.options))
    cache = {} if cache is None else cache
    key = _options_key(table.game, options)
    if key not in cache:
        cache[key] = game_report(table.game, options)
    report = copy.deepcopy(cache[key])  # each table flags its own rows
    per_bet = {bet: RtpBound(b.min, b.max) for bet, b in table.rtp_bounds.items()}
    report.apply_limits(None, DEFAULT_MAX_RTP[table.game], per_bet=per_bet, advisory_min=DEFAULT_MIN_RTP)
    return TableRtp(table.id, table.game, table.rtp_policy, report)


def table_reports(settings: Settings) -> list[TableRtp]:
    """Every configured table's report (pay tables shared by several tables computed once)."""
    cache: dict[str, RtpReport] = {}
    return [table_report(t, cache) for t in settings.tables]


def refusals(reports: Sequence[TableRtp]) -> list[str]:
    return [line for r in reports for line in r.refusals()]


def log_and_export(reports: Sequence[TableRtp], log: Any, metrics: Any | None = None) -> None:
    """One JSON log line per table for its bets within their bounds (each bet's RTP %), one
    warning per bet outside a declared bound or below the advisory minimum, and the
    ``dealer_table_rtp_ratio`` gauge per bet type."""
    for tr in reports:
        if tr.report is None:
            log.info("table rtp not computed", table=tr.table_id, game=tr.game, rtp_policy=tr.policy,
                     reason=f"no exact RTP report for {tr.game} (dealer rtp knows {', '.join(RTP_GAMES)})")
            continue
        within: dict[str, str] = {}
        for row in tr.report.rows:
            if metrics is not None:
                metrics.table_rtp.labels(table=tr.table_id, game=tr.game, bet_type=row.bet).set(float(row.rtp))
            if not (row.flags or row.advisories):
                within[row.bet] = pct(row.rtp)
                continue
            fields = {"table": tr.table_id, "game": tr.game, "bet_type": row.bet, "rtp_pct": pct(row.rtp),
                      "rtp_exact": fraction_str(row.rtp), "house_edge_pct": pct(row.house_edge),
                      "min_rtp_pct": percent_text(row.bounds.min), "max_rtp_pct": percent_text(row.bounds.max),
                      "flags": list(row.flags), "advisories": list(row.advisories), "rtp_policy": tr.policy}
            if row.flags:
                log.warning("table rtp outside its declared bounds", **fields,
                            refused=tr.policy == "strict", problem=" and ".join(row.problems()))
            else:
                log.warning("table rtp below the advisory minimum", **fields,
                            advisory_min_rtp_pct=percent_text(DEFAULT_MIN_RTP))
        if within:  # one line per table for the bets within their bounds (`dealer rtp` has the detail)
            log.info("table rtp", table=tr.table_id, game=tr.game, rtp_policy=tr.policy, rtp_pct=within)


__all__ = ["TableRtp", "log_and_export", "refusals", "table_report", "table_reports"]
