"""The fault soak's players of the turn games (Seven-Card Stud, Seotda, Matgo): the simulators'
players (:mod:`simulators.stud_players`, :mod:`simulators.seotda_players`,
:mod:`simulators.matgo_players`) made steady, so that a move the timer makes in the soak has a
known cause.

A steady player:

* answers every turn it is given, within its thinking time (well inside the turn window), and
  keeps sending its answer while its own link is down (the same command id: applied once);
* answers a turn again, with the same answer and id, whenever the backend gives it again (a
  resume after an outage renews the window: ``your_turn`` with ``resumed``);
* reads its retained private state (``players/{player}/state``), as a real client does after a
  reconnect, and answers a turn it never heard of (its ``your_turn`` was lost with a crashed
  broker's queue), or sends its answer again when the state shows a renewed window;
* leaves a turn to the timer on purpose only at ``silent_rate`` (each such turn is recorded in
  :attr:`ignored`): the soak counts those timer moves as ``player_silent``; any other timer
  move on a player's turn is a discrepancy (the house was down, or the timer acted too early).
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from dealer.core.events import PlayerAction
from dealer.core.messages import PlayerMessage
from dealer.edge import topics
from drivers.bus import Bus, BusError
from simulators.matgo_players import MatgoPlayer
from simulators.seotda_players import SeotdaPlayer
from simulators.stud_players import StudPlayer

#: A steady player thinks 0.02 s up to this long before each answer (far inside the turn window).
THINK_MAX_SECONDS = 0.2
#: Sends of one command tried while the player's own link is down (every RETRY_SECONDS).
RETRIES = 20
RETRY_SECONDS = 0.25


class _Steady:
    """Mixed into a :class:`~simulators.player_parts.RemotePlayer` subclass (see the module docstring)."""

    RESEND = True
    silent_rate: float
    rng: random.Random
    table_id: str
    player_id: str
    bus: Bus
    ignored: list[tuple[str, int]]
    _answers: dict[tuple[str, int], Any]

    def _steady(self, silent_rate: float) -> None:
        self.silent_rate = silent_rate
        self.from_state = 0  # turns answered from the retained state (their your_turn was lost)
        self.resent_from_state = 0
        self._windows: dict[tuple[str, int], Any] = {}  # (round, turn) -> the window's closes_at last seen
        self.bus.subscribe(topics.player_state(self.table_id, self.player_id), self._on_state)

    def _on_turn(self, msg: PlayerMessage) -> None:
        key = (msg.round_id or "", int(msg.data.get("turn", 0)))
        self._windows[key] = msg.data.get("closes_at")
        if key not in self._answers and self.silent_rate and self.rng.random() < self.silent_rate:
            self._answers[key] = None  # left to the timer, on purpose (counted: player_silent)
            self.ignored.append(key)
            return
        super()._on_turn(msg)  # type: ignore[misc]  # a mixin: the player class it is mixed into defines _on_turn

    def _on_state(self, topic: str, payload: bytes) -> None:
        """The retained private state: a turn open for me that I never answered, or whose window
        was renewed since I last heard of it, is answered (again) from it."""
        if not payload:
            return  # cleared: the round is settled
        try:
            state = json.loads(payload)
            turn = state.get("turn")
            if state.get("stale") or not isinstance(turn, dict) or not isinstance(state.get("round_id"), str):
                return
            key = (state["round_id"], int(turn.get("turn", 0)))
        except (ValueError, TypeError, AttributeError):
            return
        if key in self._answers and self._windows.get(key) == turn.get("closes_at"):
            return  # nothing new: the turn I already answered, the window I already know
        if key not in self._answers:
            self.from_state += 1
        else:
            self.resent_from_state += 1
        self._on_turn(PlayerMessage(table_id=self.table_id, round_id=key[0], player_id=self.player_id,
                                    kind="your_turn", at=int(state.get("at") or 0), data=turn))

    async def _publish(self, payload: bytes) -> None:
        for attempt in range(RETRIES + 1):  # the same payload (and command id) each time: applied once
            try:
                await self.bus.publish(topics.actions(self.table_id), payload)
                return
            except BusError:
                if attempt < RETRIES:
                    await asyncio.sleep(RETRY_SECONDS)


class SoakStudPlayer(_Steady, StudPlayer):
    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: str, rng: random.Random,
                 think: float, silent_rate: float = 0.0) -> None:
        StudPlayer.__init__(self, table_id, player_id, bus, strategy, rng=rng, think=think)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows
        self._steady(silent_rate)


class SoakSeotdaPlayer(_Steady, SeotdaPlayer):
    """A turn given again is answered again, with the same button and the same command id (the
    simulator's Seotda player answers a turn once and sends every command with a new id)."""

    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: str, rng: random.Random,
                 think: float, silent_rate: float = 0.0) -> None:
        SeotdaPlayer.__init__(self, table_id, player_id, bus, strategy, rng=rng, think=think)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows
        self._turn_ids: dict[tuple[str, int], str] = {}
        self._steady(silent_rate)

    async def _send_answer(self, round_id: str, turn: int, button: str) -> None:
        await self._pause()
        cid = self._turn_ids.setdefault((round_id, turn), self._new_id())
        msg = PlayerAction(player_id=self.player_id, action=button, round_id=round_id or None,  # type: ignore[arg-type]  # pydantic validates the action text against PlayerAction's literals
                           turn=turn or None, command_id=cid)
        await self._publish(msg.model_dump_json(exclude={"at", "amount", "reserve"}).encode())


class SoakMatgoPlayer(_Steady, MatgoPlayer):
    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: str, rng: random.Random,
                 think: float, silent_rate: float = 0.0) -> None:
        MatgoPlayer.__init__(self, table_id, player_id, bus, strategy, rng=rng, think=think)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows
        self._steady(silent_rate)


#: The soak's strategies per game, seat N taking the Nth (cycling): every one always answers.
STRATEGIES: dict[str, tuple[str, ...]] = {
    "stud": ("aggressive", "calling", "random", "calling"),
    "seotda": ("random", "hand", "random", "calling"),
    "matgo": ("random", "stopper"),
}
_CLASSES: dict[str, type] = {"stud": SoakStudPlayer, "seotda": SoakSeotdaPlayer, "matgo": SoakMatgoPlayer}


def make_soak_players(game: str, table_id: str, bus: Bus, players: int, *, rng: random.Random, table_index: int,
                      silent_rate: float) -> list[Any]:
    """``player1`` .. ``playerN`` of a turn game's table (player N in seat N, as the bettor seats
    them). A Matgo table's one player plays ``random`` or ``stopper`` by the table's index."""
    cls = _CLASSES[game]
    chosen = STRATEGIES[game]
    out = []
    for n in range(1, players + 1):
        strategy = chosen[(n - 1 + (table_index if game == "matgo" else 0)) % len(chosen)]
        out.append(cls(table_id, f"player{n}", bus, strategy, random.Random(rng.random()),
                       round(rng.uniform(0.02, THINK_MAX_SECONDS), 3), silent_rate))
    return out


def turns_left_to_timer(players: list[Any]) -> set[tuple[str, str, str, int]]:
    """(table, player, round, turn) of every turn a steady player left to the timer on purpose."""
    return {(p.table_id, p.player_id, rid, turn) for p in players for rid, turn in getattr(p, "ignored", ())}


__all__ = ["SoakMatgoPlayer", "SoakSeotdaPlayer", "SoakStudPlayer", "STRATEGIES", "make_soak_players",
           "turns_left_to_timer"]
