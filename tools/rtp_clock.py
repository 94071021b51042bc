"""The clock around the exact RTP reports: their wall time, ``dealer bench rtp`` and the tqdm
progress bars of ``dealer rtp``. The reports themselves (:mod:`dealer.games.rtp`) are pure."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Iterable
from typing import Any

from dealer.games.rtp import RTP_GAMES, Progress, RtpReport, game_report


def timed_report(game: str, options: Any = None, progress: Progress | None = None) -> RtpReport:
    """The game's report with its wall time in :attr:`RtpReport.seconds`."""
    t0 = time.perf_counter()
    report = game_report(game, options, progress)
    report.seconds = time.perf_counter() - t0
    return report


def run_rtp_bench(games: Iterable[str] | None = None) -> dict[str, Any]:
    """``dealer bench rtp``: wall time of each game's full default report."""
    results: dict[str, Any] = {}
    for game in list(RTP_GAMES) if games is None else games:
        report = timed_report(game)
        results[game] = {"seconds": round(report.seconds, 3), "rows": len(report.rows)}
    return {
        "bench": "rtp",
        "games": results,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }


class TqdmProgress:
    """The rtp package's ``progress(stage, done, total)`` callback as tqdm bars on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bars: dict = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=stage, unit="hand" if total > 1 else "step",
                                          file=sys.stderr, leave=False)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
