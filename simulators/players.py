"""Simulated remote players for games with decisions (Sevenluck).

Each player listens on its own topic (``.../players/{player_id}``) exactly as a player
client would: it collects its hole cards, and when asked to decide it answers PLAY or
FOLD by its strategy. ``q64`` plays any hand at least Queen-6-4 (the classic Three Card
Poker rule), ``random`` flips a coin, and ``disconnect`` goes silent once the deal is
complete, so the backend's decision timer must decide for it (FOLD by default).

A decision names its round and carries a ``command_id`` (fresh per decision); if the
backend asks again for the same round (a reconnect), the player sends the same decision
with the same id, and the backend answers it as a repeat instead of applying it twice.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from dealer.edge import topics
from dealer.core.events import PlayerDecision
from dealer.games.sevenluck import evaluate3
from dealer.core.messages import PlayerMessage, RoundEvent
from drivers.bus import Bus, BusError
from simulators.bettors import BetPlan, banking_plan
from simulators.player_parts import RemotePlayer

Strategy = Literal["q64", "random", "disconnect"]
_Q64 = evaluate3(["QS", "6H", "4D"])


class VirtualPlayer(RemotePlayer):
    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "q64",
                 rng: random.Random | None = None, think: float = 0.0, retries: int = 0) -> None:
        super().__init__(table_id, player_id, bus, strategy, rng, think)
        self.retries = retries  # publishes of a decision tried again while the link is down
        self.hand: dict[str, list[str]] = {}  # round id -> cards seen (own hole cards or the shared hand)
        self.decided: dict[str, str] = {}
        self._decisions: dict[str, PlayerDecision] = {}  # round id -> the decision sent (re-sent as is)

    def _on_hole_card(self, msg: PlayerMessage) -> None:
        if msg.round_id:
            self.hand.setdefault(msg.round_id, []).append(msg.data["card"])

    def _on_reply(self, msg: PlayerMessage) -> None:
        if msg.kind == "decision_required" and msg.round_id and self.strategy != "disconnect":
            asyncio.get_running_loop().create_task(self._decide(msg.round_id))
        else:
            super()._on_reply(msg)

    def _on_event(self, ev: RoundEvent) -> None:
        # the SHARED-mode common hand ``P.n`` is dealt face up to every player
        shared = str(ev.data.get("position", "")).startswith("P.")
        if ev.event == "card_registered" and ev.round_id and shared and ev.data.get("card"):
            self.hand.setdefault(ev.round_id, []).append(ev.data["card"])

    def choose(self, cards: list[str]) -> str:
        if self.strategy == "random":
            return self.rng.choice(["PLAY", "FOLD"])
        return "PLAY" if len(cards) == 3 and evaluate3(cards) >= _Q64 else "FOLD"

    async def _decide(self, round_id: str) -> None:
        msg = self._decisions.get(round_id)  # asked again (a reconnect): the same decision, the same id
        if msg is None:
            await self._pause()
            fresh = PlayerDecision(player_id=self.player_id, action=self.choose(self.hand.get(round_id, [])),
                                   round_id=round_id, command_id=self._new_id())
            msg = self._decisions.setdefault(round_id, fresh)
            self.decided[round_id] = msg.action
        payload = msg.model_dump_json(exclude={"at"}).encode()
        for attempt in range(self.retries + 1):  # the same command id each time: applied once
            try:
                await self.bus.publish(topics.actions(self.table_id), payload)
                return
            except BusError:
                if attempt < self.retries:  # the player's link is down: send again once it is back
                    await asyncio.sleep(0.25)


# --- what the game brings to the shared parts (simulators.game_players) -----------------------


def make_player(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
                silent_after: int) -> VirtualPlayer:
    """A seated player (``silent_after`` does not apply: ``disconnect`` never answers)."""
    return VirtualPlayer(table_id, pid, bus, strategy, rng=rng, think=think)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows


def bet_plan(game: str, options: Any, limits: Mapping[str, Any] | None, minor_unit: Decimal,
             players: int | None) -> BetPlan:
    """A banking game's stakes, but its players bet an Ante and/or a Pair Plus (Play is their
    decision), one player per seat."""
    return banking_plan(game, options, limits, minor_unit, players, bet_types=("ante", "pair_plus"),
                        seats=getattr(options, "seats", 3))


def seat_bets(plan: BetPlan, p: int, rng: random.Random) -> list[tuple[str, str, int | None]]:
    """Player ``p`` in seat ``p``: an Ante, an Ante and a Pair Plus, or a Pair Plus alone (a
    decider always antes, so it is asked every round)."""
    kinds = rng.choice([["ante"], ["ante", "pair_plus"], ["ante", "pair_plus"], ["pair_plus"]])
    if "ante" not in kinds and f"player{p}" in plan.deciders:
        kinds = ["ante", *kinds]  # the same draws as without it: the others' bets do not change
    return [(f"player{p}", k, p) for k in kinds]
