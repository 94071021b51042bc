"""Simulated bettors: what players bring to each round, and the player platform that sends it.

A :class:`BetPlan` says what the simulated players of one table bet: by default a banking
game's random main and side bets; a game that asks for other bets (one per seat, the chips a
seated player brings to the hand) brings its own through :mod:`simulators.game_players`, as it
brings its own stakes. :func:`bet_plan` derives the plan from a table's configuration, so every
stake fits the table (its limits, its money unit, a game's own minimum).

A :class:`Bettor` is the player platform's betting side: when a round opens it places the
plan's bets once (each names its round; its ``command_id`` is its ``bet_id``, so a bet sent
twice is one command), and it writes every bet into the **bet book** (the ``bets`` table of
a settlement ledger, :func:`simulators.settlement.open_ledger`) before sending it. The
result does not repeat the bets (``docs/mqtt-topics.md`` §5): settlement settles from that
book, as an operator's wallet settles the bets its platform took.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

import structlog

from dealer.edge import topics
from dealer.core.events import PlaceBet
from drivers.bus import Bus, BusError
from simulators.feed import events_of
from simulators.game_players import BET_PLANS, DEFAULT_STAKES, SEAT_BETS, BetPlan

log = structlog.get_logger("simulators.bettors")

def random_bets(plan: BetPlan, rng: random.Random) -> list[tuple[str, str, int | None, str]]:
    """(player, bet type, seat, stake) for one round of ``plan``: each player's bets as its game
    has them (:data:`simulators.game_players.SEAT_BETS`), else :func:`banking_bets`."""
    seat_bets = SEAT_BETS.get(plan.game, banking_bets)
    out: list[tuple[str, str, int | None]] = []
    for p in range(1, plan.players + 1):
        out += seat_bets(plan, p, rng)
    return [(player, kind, seat, rng.choice(plan.stakes)) for player, kind, seat in out]


def banking_bets(plan: BetPlan, p: int, rng: random.Random) -> list[tuple[str, str, int | None]]:
    """Player ``p`` of a banking game: one to three of the plan's bet types, at no seat."""
    kinds = rng.sample(plan.bet_types, k=rng.randint(1, min(3, len(plan.bet_types))))
    return [(f"player{p}", k, None) for k in kinds]


def bet_plan(game: str, options: Mapping[str, Any] | None = None, *, limits: Mapping[str, Any] | None = None,
             minor_unit: Decimal = Decimal("0.01"), players: int | None = None) -> BetPlan:
    """The plan for a table of ``game`` with these house ``options`` (as configured) and
    ``limits`` (bet type -> object with ``min``/``max``): stakes the table accepts."""
    from dealer.games import game_class

    o = game_class(game).Options.model_validate(dict(options or {}))
    own = BET_PLANS.get(game)  # a game with its own stakes (simulators.game_players)
    if own is not None:
        return own(game, o, limits, minor_unit, players)
    return banking_plan(game, o, limits, minor_unit, players)


def banking_plan(game: str, options: Any, limits: Mapping[str, Any] | None, minor_unit: Decimal,
                 players: int | None, *, bet_types: Sequence[str] | None = None, seats: int = 3) -> BetPlan:
    """A banking game's plan: the default stakes that every bet type's ``limits`` allow, on its
    own bet types (or ``bet_types``), for up to ``seats`` players (three by default)."""
    from dealer.games import game_class

    stakes = [Decimal(s) for s in DEFAULT_STAKES]
    kinds = tuple(bet_types) if bet_types is not None else tuple(game_class(game).bet_types)
    if limits:  # every bet type's stake within its limits: the stakes all of them allow
        inside = [s for s in stakes if all(_within(s, lim) for lim in limits.values())]
        stakes = inside or [max(Decimal(str(lim.min)) for lim in limits.values())]
    return BetPlan(game, min(players or 3, seats), kinds, fit_stakes(stakes, minor_unit))


def table_plan(table: Any, players: int | None = None) -> BetPlan:
    """:func:`bet_plan` for a :class:`dealer.edge.config.TableConfig`."""
    return bet_plan(table.game, table.options, limits=table.limits, minor_unit=table.minor_unit, players=players)


def _within(stake: Decimal, limit: Any) -> bool:
    return Decimal(str(limit.min)) <= stake <= Decimal(str(limit.max))


def fit_stakes(stakes: Sequence[Decimal], unit: Decimal) -> tuple[str, ...]:
    """Stakes as decimal strings in the table's money unit (rounded up to a whole unit)."""
    out: list[str] = []
    for s in stakes:
        units = (s / unit).to_integral_value(rounding=ROUND_CEILING)  # never below a minimum
        text = str((units * unit).quantize(unit)) if unit < 1 else str(int(units * unit))
        if text not in out:
            out.append(text)
    return tuple(out)


class Bettor:
    """The player platform's betting side at some tables (see the module docstring).

    ``plans`` gives each table's plan (a mapping, or a function of the table id);
    ``book`` is the bet book (an open ledger connection). ``stop_betting(table)``: no bets
    in rounds that open from then on (``dealer simulate --rounds``)."""

    def __init__(self, bus: Bus, book: sqlite3.Connection, plans: Mapping[str, BetPlan] | Callable[[str], BetPlan],
                 rng: random.Random | None = None, *, subscribe: bool = True) -> None:
        self.bus, self.book = bus, book
        self._plans = plans
        self.rng = rng or random.Random()
        self.bets_sent = 0
        self.bets_failed = 0
        self._seq = 0
        self._opened: set[tuple[str, str]] = set()
        self._stopped: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        if subscribe and isinstance(plans, Mapping):
            for tid in plans:
                bus.subscribe(topics.state(tid), events_of(self.on_event))

    def plan(self, table_id: str) -> BetPlan:
        return self._plans[table_id] if isinstance(self._plans, Mapping) else self._plans(table_id)

    def stop_betting(self, table_id: str) -> None:
        self._stopped.add(table_id)

    def on_event(self, topic: str, payload: bytes) -> None:
        """``round_opened``: place this round's bets (once, however often the opening comes)."""
        if b'"round_opened"' not in payload:
            return
        try:
            ev = json.loads(payload)
        except ValueError:
            return
        if ev.get("event") == "round_opened" and isinstance(ev.get("round_id"), str) and isinstance(ev.get("table_id"), str):
            self.place(ev["table_id"], ev["round_id"])

    def place(self, table_id: str, round_id: str) -> int:
        """Place one round's bets (each in the bet book first); returns how many."""
        if (table_id, round_id) in self._opened or table_id in self._stopped:
            return 0
        self._opened.add((table_id, round_id))  # a redelivered opening must not bet twice
        bets = random_bets(self.plan(table_id), self.rng)
        for player, bet_type, seat, stake in bets:
            self._seq += 1
            bet_id = f"{round_id}-b{self._seq}"
            bet = PlaceBet(bet_id=bet_id, player_id=player, bet_type=bet_type, stake=stake,  # type: ignore[arg-type]  # pydantic coerces the decimal text to the Decimal stake
                           seat=seat, round_id=round_id, command_id=bet_id)
            try:
                self.book.execute("INSERT OR IGNORE INTO bets VALUES (?, ?, ?, ?, ?, ?)",
                                  (bet.bet_id, round_id, bet.player_id, bet.bet_type, str(bet.stake), seat))
            except sqlite3.Error as exc:  # a bet settlement could not know of is never sent
                self.bets_failed += 1
                log.error("bet not recorded in the bet book: not sent", bet_id=bet_id, reason=str(exc))
                continue
            payload = bet.model_dump_json(exclude={"at"}, exclude_none=True).encode()
            task = asyncio.get_running_loop().create_task(self._send(topics.actions(table_id), payload))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(bets)

    async def drain(self, timeout: float = 2.0) -> None:
        """Wait (up to ``timeout``) for the bets in flight to reach the broker."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def _send(self, topic: str, payload: bytes) -> None:
        try:
            await self.bus.publish(topic, payload, qos=1)
            self.bets_sent += 1
        except BusError as exc:  # never accepted: settlement returns the stake (NOT_ACCEPTED)
            self.bets_failed += 1
            log.info("bet not sent", topic=topic, reason=str(exc))


__all__ = ["DEFAULT_STAKES", "BetPlan", "Bettor", "banking_bets", "banking_plan", "bet_plan", "fit_stakes",
           "random_bets", "table_plan"]
