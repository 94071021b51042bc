"""Simulated remote players for Seven-Card Stud (peer-to-peer betting between cards).

A :class:`StudPlayer` listens exactly as a player client would: on its own topic
(``.../players/{player_id}``) it gets its down cards (``hole_card``), its turns
(``your_turn``) and the replies to its actions (``action_accepted``, ``rejected``); on
the table's public ``events`` topic it sees the up cards (``card_registered`` with a
card) and everything else that happens.

When its turn comes it answers with a ``player_action`` chosen by its strategy, using
only what the ``your_turn`` message offers (``actions``, ``call``, ``bet``, ``raise``,
``all_in``; amounts are decimal strings and stay :class:`~decimal.Decimal`, never floats):

* ``calling``: check when free, post the smallest bring-in, else call (all-in when a call
  takes every chip); never bets or raises, never folds while it can call.
* ``random``: a legal action drawn uniformly, with a legal amount drawn uniformly from the
  offered range (in the range's own money unit).
* ``aggressive``: raise the maximum when a raise is offered, else bet (or bring in) the
  maximum, else call, else check.
* ``disconnect``: plays like ``calling`` for its first ``silent_after`` actions, then goes
  silent: the backend's turn timer acts for it (check if free, else fold).

Given ``seat`` and ``buy_in`` the player also sits down in every round it sees opening,
by placing a ``chips`` bet (the chips it brings to the hand, table stakes).

Every command names its round (and an action its turn) and carries a fresh ``command_id``;
a turn given again after a reconnect is answered with the same action and the same id, so
the backend answers it as a repeat (``repeat: true``) instead of applying it twice.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from dealer.core.events import PlayerAction
from dealer.core.messages import PlayerMessage, RoundEvent
from drivers.bus import Bus
from simulators.bettors import BetPlan, fit_stakes
from simulators.player_parts import RemotePlayer

Strategy = Literal["calling", "random", "aggressive", "disconnect"]
STRATEGIES: tuple[str, ...] = ("calling", "random", "aggressive", "disconnect")


@dataclass(frozen=True, slots=True)
class Choice:
    """One answer to a turn: ``amount`` is the round total ("make it") or None."""

    action: str
    amount: Decimal | None = None


def _unit(*amounts: str) -> Decimal:
    """The money unit the amounts are written in ("0.50" -> 0.01, "3" -> 1)."""
    exponents = [Decimal(a).as_tuple().exponent for a in amounts]
    return Decimal(1).scaleb(min(e for e in exponents if isinstance(e, int)))


def _amounts(rng: Mapping[str, str]) -> tuple[Decimal, Decimal, Decimal]:
    return Decimal(rng["min"]), Decimal(rng["max"]), _unit(rng["min"], rng["max"])


def choose(strategy: str, turn: Mapping[str, Any], rng: random.Random) -> Choice:
    """What ``strategy`` answers to a ``your_turn`` message's ``data``. Pure."""
    actions: list[str] = list(turn.get("actions") or [])
    if not actions:
        return Choice("FOLD")
    bet, raise_ = turn.get("bet"), turn.get("raise")
    if strategy == "random":
        action = rng.choice(actions)
        if action in ("BET", "BRING_IN", "RAISE"):
            lo, hi, unit = _amounts(raise_ if action == "RAISE" else bet)
            steps = int((hi - lo) / unit)
            return Choice(action, lo + unit * rng.randint(0, steps))
        if action == "ALL_IN":
            return Choice(action, Decimal(turn["all_in"]) if turn.get("all_in") is not None else None)
        return Choice(action)
    if strategy == "aggressive":
        if "RAISE" in actions and raise_:
            return Choice("RAISE", Decimal(raise_["max"]))
        for act in ("BET", "BRING_IN"):
            if act in actions and bet:
                return Choice(act, Decimal(bet["max"]))
    # calling (and a disconnecting player before it goes silent); aggressive falls through here
    if "CHECK" in actions:
        return Choice("CHECK")
    if "BRING_IN" in actions and bet:
        return Choice("BRING_IN", Decimal(bet["min"]))
    if "CALL" in actions:
        return Choice("CALL")
    if "ALL_IN" in actions:  # the call (or the forced bring-in) takes every chip
        return Choice("ALL_IN")
    return Choice("FOLD")


class StudPlayer(RemotePlayer):
    STRATEGIES = STRATEGIES

    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "calling",
                 rng: random.Random | None = None, think: float = 0.0, silent_after: int = 1,
                 seat: int | None = None, buy_in: str | None = None) -> None:
        super().__init__(table_id, player_id, bus, strategy, rng, think, silent_after)
        self.seat, self.buy_in = seat, buy_in
        self.up: dict[str, list[tuple[str, str]]] = {}  # round -> [(position, card)] my face-up cards
        self.board: dict[str, dict[str, str]] = {}  # round -> every face-up card on the table
        self.seats: dict[str, int] = {}  # round -> my seat (from bet_accepted)
        self._ids: dict[tuple[str, int], str] = {}  # (round, turn) -> the command id of my answer

    # -- what the player sees ------------------------------------------------------------

    def cards(self, round_id: str) -> list[str]:
        """Everything this player holds in ``round_id``, in deal order (down and up)."""
        mine = self.hole.get(round_id, []) + self.up.get(round_id, [])
        return [c for _, c in sorted(mine, key=lambda pc: _deal_index(pc[0]))]

    def _on_reply(self, msg: PlayerMessage) -> None:
        if msg.kind == "bet_accepted" and msg.data.get("seat") is not None:
            self.seats[msg.round_id or ""] = int(msg.data["seat"])
        else:
            super()._on_reply(msg)

    def answer(self, turn: dict[str, Any], round_id: str) -> Choice:
        return choose(self.strategy, turn, self.rng)

    def _on_event(self, ev: RoundEvent) -> None:
        rid = ev.round_id or ""
        if ev.event == "round_opened" and self.seat is not None and self.buy_in is not None:
            self._sit_once(rid, "chips", self.buy_in, self.seat)
        elif ev.event == "card_registered" and ev.data.get("card"):
            pos = str(ev.data.get("position", ""))
            self.board.setdefault(rid, {})[pos] = ev.data["card"]
            seat = self.seats.get(rid, self.seat)
            if seat is not None and pos.startswith(f"P{seat}."):
                self.up.setdefault(rid, []).append((pos, ev.data["card"]))

    # -- what the player sends -----------------------------------------------------------

    async def _send_answer(self, round_id: str, turn: int, choice: Choice) -> None:
        await self._pause()
        cid = self._ids.setdefault((round_id, turn), self._new_id())  # one id per turn answered
        msg = PlayerAction(player_id=self.player_id, action=choice.action, amount=choice.amount,  # type: ignore[arg-type]  # pydantic validates the action text against PlayerAction's literals
                           round_id=round_id or None, turn=turn or None, command_id=cid)
        await self._publish(msg.model_dump_json(exclude={"at"}).encode())


def _deal_index(position: str) -> int:
    """``P3.5`` -> 5 (the card's number in its owner's hand)."""
    try:
        return int(position.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return 99


# --- what the game brings to the shared parts (simulators.game_players) -----------------------


def make_player(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
                silent_after: int) -> StudPlayer:
    return StudPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows


def bet_plan(game: str, options: Any, limits: Mapping[str, Any] | None, minor_unit: Decimal,
             players: int | None) -> BetPlan:
    """Chips for the hand: 8 to 80 times the 3rd-street minimum; four players by default."""
    low = options.street_limits[3].min
    stakes = [low * k for k in (8, 20, 40, 80)]
    return BetPlan(game, min(players or 4, options.seats), ("chips",), fit_stakes(stakes, minor_unit))


def seat_bets(plan: BetPlan, p: int, rng: random.Random) -> list[tuple[str, str, int | None]]:
    """Player ``p`` brings its chips to seat ``p``."""
    return [(f"player{p}", "chips", p)]
