"""Test harness: a Sevenluck table (``T``, three seats) through the real service: its settings,
two antes placed, cards dealt prompt by prompt, and what one player was told in private."""

from __future__ import annotations

from pathlib import Path

from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.edge.service import Service
from tests.conftest import wait_until
from tests.harness import HandShoe, Recorder

T = "S1"


def sevenluck_settings(tmp: Path, url: str, scanner: dict, **table):
    cfg = {"id": T, "game": "sevenluck", "betting_seconds": 0.4, "pause_seconds": 0.1, "decision_seconds": 1.0,
           "options": {"seats": 3}, "scanner": scanner}
    cfg.update(table)
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"url": url, "client_id": "backend-sevenluck"}, tables=[cfg])


def private(rec: Recorder, player: str, kind: str, since: int = 0) -> list[dict]:
    return [m for t, m in rec.messages[since:] if t == topics.player(T, player) and m["kind"] == kind]


def resumed(rec: Recorder, player: str, since: int = 0) -> list[dict]:
    return [m for m in private(rec, player, "decision_required", since) if m["data"].get("resumed")]


async def two_antes(rec: Recorder) -> None:
    """Players p1 (seat 1) and p3 (seat 3) each place an Ante of 10, and both are accepted."""
    for bet, player, seat in (("a1", "p1", 1), ("a3", "p3", 3)):
        await rec.command(topics.actions(T), {"type": "place_bet", "bet_id": bet, "player_id": player,
                                              "bet_type": "ante", "stake": "10", "seat": seat})
    await wait_until(lambda: len(rec.events("bet_accepted")) == 2, what="bets accepted")


async def deal_cards(service: Service, rec: Recorder, shoe: HandShoe, codes: list[str]) -> None:
    for code in codes:
        n = len(service.tables[T].current.cards)
        await wait_until(lambda: rec.last_prompt() and rec.last_prompt()["kind"] in ("NEXT", "RESCAN"),
                         what="deal prompt")
        shoe.scan(code)
        await wait_until(lambda: len(service.tables[T].current.cards) == n + 1, what="card registered")
