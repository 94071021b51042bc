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

import asyncio
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from dealer.edge import topics
from dealer.core.events import PlaceBet, PlayerAction
from dealer.core.messages import PlayerMessage, RoundEvent
from drivers.bus import Bus, BusError

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


class StudPlayer:
    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "calling",
                 rng: random.Random | None = None, think: float = 0.0, silent_after: int = 1,
                 seat: int | None = None, buy_in: str | None = None) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
        self.table_id, self.player_id, self.bus, self.strategy = table_id, player_id, bus, strategy
        self.rng = rng or random.Random()
        self.think = think
        self.silent_after = silent_after
        self.seat, self.buy_in = seat, buy_in
        self.messages: list[PlayerMessage] = []
        self.hole: dict[str, list[tuple[str, str]]] = {}  # round -> [(position, card)] seen only by me
        self.up: dict[str, list[tuple[str, str]]] = {}  # round -> [(position, card)] my face-up cards
        self.board: dict[str, dict[str, str]] = {}  # round -> every face-up card on the table
        self.seats: dict[str, int] = {}  # round -> my seat (from bet_accepted)
        self.sent: list[tuple[str, int, Choice]] = []  # (round, turn, choice)
        self.ignored: list[tuple[str, int]] = []  # turns left to the timer (disconnect)
        self.accepted: list[dict[str, Any]] = []
        self.repeated: list[dict[str, Any]] = []  # acceptances the backend sent again (a command re-sent)
        self.rejected: list[dict[str, Any]] = []
        self._answered: set[tuple[str | None, int]] = set()
        self._ids: dict[tuple[str, int], str] = {}  # (round, turn) -> the command id of my answer
        self._sat: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        bus.subscribe(topics.player(table_id, player_id), self._on_private)
        bus.subscribe(topics.events(table_id), self._on_public)

    # -- what the player sees ------------------------------------------------------------

    def cards(self, round_id: str) -> list[str]:
        """Everything this player holds in ``round_id``, in deal order (down and up)."""
        mine = self.hole.get(round_id, []) + self.up.get(round_id, [])
        return [c for _, c in sorted(mine, key=lambda pc: _deal_index(pc[0]))]

    @property
    def silent(self) -> bool:
        return self.strategy == "disconnect" and len(self.sent) >= self.silent_after

    def _on_private(self, topic: str, payload: bytes) -> None:
        msg = PlayerMessage.model_validate_json(payload)
        self.messages.append(msg)
        rid = msg.round_id or ""
        if msg.kind == "hole_card":
            self.hole.setdefault(rid, []).append((msg.data["position"], msg.data["card"]))
        elif msg.kind == "bet_accepted" and msg.data.get("seat") is not None:
            self.seats[rid] = int(msg.data["seat"])
        elif msg.kind == "action_accepted":
            (self.repeated if msg.data.get("repeat") else self.accepted).append(dict(msg.data))
        elif msg.kind == "rejected":
            self.rejected.append(dict(msg.data))
        elif msg.kind == "your_turn":
            key = (msg.round_id, int(msg.data.get("turn", 0)))
            if key in self._answered:
                # the same turn given again (after a reconnect or a restart): the answer may
                # have been lost, so send it again, with the same id; if it was not, the
                # backend answers the copy as a repeat and applies it once
                again = next((c for r, t, c in reversed(self.sent) if (r, t) == (rid, key[1])), None)
                if again is not None:
                    self._spawn(self._act(msg.round_id, key[1], again))
                return
            self._answered.add(key)
            if self.silent:
                self.ignored.append((rid, key[1]))
                return
            choice = choose(self.strategy, msg.data, self.rng)
            self.sent.append((rid, key[1], choice))  # counted now: a silent player stops at once
            self._spawn(self._act(msg.round_id, key[1], choice))

    def _on_public(self, topic: str, payload: bytes) -> None:
        ev = RoundEvent.model_validate_json(payload)
        rid = ev.round_id or ""
        if ev.event == "round_opened" and self.seat is not None and self.buy_in is not None and rid not in self._sat:
            self._sat.add(rid)
            self._spawn(self._sit(rid))
        elif ev.event == "card_registered" and ev.data.get("card"):
            pos = str(ev.data.get("position", ""))
            self.board.setdefault(rid, {})[pos] = ev.data["card"]
            seat = self.seats.get(rid, self.seat)
            if seat is not None and pos.startswith(f"P{seat}."):
                self.up.setdefault(rid, []).append((pos, ev.data["card"]))

    # -- what the player sends -----------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, payload: bytes) -> None:
        try:
            await self.bus.publish(topics.actions(self.table_id), payload)
        except BusError:
            pass  # the player's link is down: the turn timer acts for them

    def _new_id(self) -> str:
        return f"{self.player_id[:40]}-{uuid.uuid4().hex[:12]}"

    async def _act(self, round_id: str | None, turn: int, choice: Choice) -> None:
        if self.think:
            await asyncio.sleep(self.think)
        cid = self._ids.setdefault((round_id or "", turn), self._new_id())  # one id per turn answered
        msg = PlayerAction(player_id=self.player_id, action=choice.action, amount=choice.amount,  # type: ignore[arg-type]
                           round_id=round_id, turn=turn or None, command_id=cid)
        await self._send(msg.model_dump_json(exclude={"at"}).encode())

    async def _sit(self, round_id: str) -> None:
        assert self.seat is not None and self.buy_in is not None
        bet = PlaceBet(bet_id=f"{round_id}-{self.player_id}", player_id=self.player_id, bet_type="chips",
                       stake=self.buy_in, seat=self.seat, round_id=round_id,  # type: ignore[arg-type]
                       command_id=self._new_id())
        await self._send(bet.model_dump_json(exclude={"at"}, exclude_none=True).encode())


def _deal_index(position: str) -> int:
    """``P3.5`` -> 5 (the card's number in its owner's hand)."""
    try:
        return int(position.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return 99
