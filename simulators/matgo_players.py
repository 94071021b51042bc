"""A simulated remote Matgo player (the house AI plays the other seat inside the backend),
and a virtual dealer for the 48 Hwatu cards.

It listens on its own topic as a player client would: its hand arrives as ``hole_card``
messages, and each ``your_turn`` lists the legal moves (``actions`` and, for PLAY and
CHOOSE, the ``cards``). Strategies: ``random`` picks any legal move (Go or Stop at random),
``stopper`` plays the lowest card and stops as soon as it may, ``disconnect`` goes silent
after a few moves so the backend's timer plays for it (the rulebook's defaults). Each move
names its round and turn and carries a ``command_id``; a turn given again after a reconnect
is answered with the same move and the same id (the backend answers it as a repeat).

:class:`MatgoDealer` is the :class:`~simulators.station.VirtualDealer` for Matgo: it deals
from the 48 Hwatu cards, turns the stock over one card at a time as the station asks
(``S1``, ``S2`` ...), gathers and reshuffles all 48 cards when a redeal asks for
``SHUFFLE``, and its mistakes are Matgo's: a foreign card is a 52-card code, a joker or a
bonus/service card; a duplicate is a card already dealt since the last shuffle.
"""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from dealer.edge import topics
from dealer.core.cards import HWATU_48
from dealer.core.events import PlaceBet, PlayerAction
from dealer.core.messages import PlayerMessage, RoundEvent, StationPrompt
from drivers.bus import Bus, BusError
from simulators.shoe import shuffled
from simulators.station import VirtualDealer

Strategy = Literal["random", "stopper", "disconnect"]
STRATEGIES: tuple[str, ...] = ("random", "stopper", "disconnect")


def deal_of(position: str) -> int:
    """``F.3`` -> 0 (the first deal), ``R1.O.2`` -> 1 (the first redeal)."""
    head = position.split(".", 1)[0]
    return int(head[1:]) if head.startswith("R") and head[1:].isdigit() else 0


def choose(strategy: str, turn: dict[str, Any], rng: random.Random) -> tuple[str, str | None]:
    """The answer of ``strategy`` to a ``your_turn`` message's data: (action, card). Pure."""
    actions = list(turn.get("actions") or [])
    cards = sorted(turn.get("cards") or [])
    if "STOP" in actions or "GO" in actions:
        if strategy == "stopper" or "GO" not in actions:
            return "STOP", None
        return rng.choice(sorted(actions)), None
    action = actions[0] if actions else "PLAY"
    if not cards:
        return action, None
    return action, cards[0] if strategy == "stopper" else rng.choice(cards)


class MatgoPlayer:
    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "random",
                 rng: random.Random | None = None, *, cover: str | None = None, silent_after: int = 3,
                 think: float = 0.0) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
        self.table_id, self.player_id, self.bus, self.strategy = table_id, player_id, bus, strategy
        self.rng = rng or random.Random()
        self.cover, self.silent_after, self.think = cover, silent_after, think
        self.hole: dict[str, list[tuple[str, str]]] = {}  # round -> [(position, card)] as they arrived
        self.messages: list[PlayerMessage] = []
        self.sent: list[tuple[str, int, str, str | None]] = []  # (round, turn, action, card) answered
        self.ignored: list[tuple[str, int]] = []  # turns left to the timer (disconnect)
        self.accepted: list[dict[str, Any]] = []
        self.repeated: list[dict[str, Any]] = []  # acceptances the backend sent again (a move re-sent)
        self.rejected: list[dict[str, Any]] = []  # refusals of what this player sent: never expected
        self._answered: dict[tuple[str, int], tuple[str, str | None]] = {}
        self._ids: dict[tuple[str, int], str] = {}  # (round, turn) -> the command id of my move
        self._sat: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        bus.subscribe(topics.player(table_id, player_id), self._on_private)
        bus.subscribe(topics.events(table_id), self._on_public)

    def cards(self, round_id: str, deal: int | None = None) -> list[str]:
        """My cards as dealt in ``round_id`` (``deal`` 0 = the first deal, n = redeal n; default
        the latest), in deal order; a card sent again (after a reconnect) counts once."""
        mine = self.hole.get(round_id, [])
        if not mine:
            return []
        d = max(deal_of(p) for p, _ in mine) if deal is None else deal
        held = {p: c for p, c in mine if deal_of(p) == d}
        return [held[p] for p in sorted(held, key=lambda p: int(p.rsplit(".", 1)[1]))]

    @property
    def hand(self) -> dict[str, list[str]]:
        """round -> my cards of the latest deal (played ones included)."""
        return {rid: self.cards(rid) for rid in self.hole}

    @property
    def silent(self) -> bool:
        return self.strategy == "disconnect" and len(self.sent) >= self.silent_after

    def _on_private(self, topic: str, payload: bytes) -> None:
        msg = PlayerMessage.model_validate_json(payload)
        self.messages.append(msg)
        rid = msg.round_id or ""
        if msg.kind == "hole_card":
            self.hole.setdefault(rid, []).append((str(msg.data["position"]), str(msg.data["card"])))
        elif msg.kind == "action_accepted":
            (self.repeated if msg.data.get("repeat") else self.accepted).append(dict(msg.data))
        elif msg.kind == "rejected":
            self.rejected.append(dict(msg.data))
        elif msg.kind == "your_turn":
            key = (rid, int(msg.data.get("turn", 0)))
            if key in self._answered:  # given again after a reconnect: the answer may have been lost
                self._spawn(self._send(rid, key[1], *self._answered[key]))
                return
            if self.silent:
                self.ignored.append(key)
                return
            answer = choose(self.strategy, msg.data, self.rng)
            self._answered[key] = answer
            self.sent.append((rid, key[1], *answer))
            self._spawn(self._send(rid, key[1], *answer))

    def _on_public(self, topic: str, payload: bytes) -> None:
        ev = RoundEvent.model_validate_json(payload)
        rid = ev.round_id or ""
        if ev.event == "round_opened" and self.cover is not None and rid not in self._sat:
            self._sat.add(rid)
            bet = PlaceBet(bet_id=f"{rid}-{self.player_id}", player_id=self.player_id, bet_type="cover",
                           stake=self.cover, seat=1, round_id=rid, command_id=self._new_id())  # type: ignore[arg-type]
            self._spawn(self._publish(bet.model_dump_json(exclude={"at"}).encode()))

    def _new_id(self) -> str:
        return f"{self.player_id[:40]}-{uuid.uuid4().hex[:12]}"

    async def _send(self, rid: str, turn: int, action: str, card: str | None) -> None:
        if self.think:
            await asyncio.sleep(self.think)
        cid = self._ids.setdefault((rid, turn), self._new_id())  # the same id whenever this turn is answered
        msg = PlayerAction(player_id=self.player_id, action=action, card=card, round_id=rid or None,  # type: ignore[arg-type]
                           turn=turn or None, command_id=cid)
        # a Matgo move never carries an amount (nor a reservation)
        await self._publish(msg.model_dump_json(exclude={"at", "amount", "reserve"}).encode())

    async def _publish(self, payload: bytes) -> None:
        try:
            await self.bus.publish(topics.actions(self.table_id), payload)
        except BusError:
            pass  # the player's link is down: the timer plays for it

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class MatgoDealer(VirtualDealer):
    """A :class:`VirtualDealer` for the 48 Hwatu cards (``matgo.md`` §2.2, §9).

    The deal and the stock come off one shuffled deck: the station asks for the 28 dealt
    positions, then for each stock card as it is turned over, so the shoe's order is the
    deal order followed by the stock. A redeal (§2.3) asks for ``SHUFFLE`` again: every card
    comes back and the 48 are shuffled (a ``scripted_shuffles`` deck first, if given).
    """

    FOREIGN: tuple[str, ...] = ("AS", "JK", "13B")  # a 52-card code, a joker, a bonus/service card

    def __init__(self, *args: Any, deck: Sequence[str] = HWATU_48,
                 scripted_shuffles: Sequence[Sequence[str]] = (), **kw: Any) -> None:
        super().__init__(*args, deck=deck, **kw)
        self.scripted_shuffles = [list(d) for d in scripted_shuffles]
        self.reshuffles = 0
        self.stale_ignored = 0  # RESCANs for a card passed once too often, not for the card in hand
        self._since = 0  # index in ``dealt`` where the current shuffle starts
        self._wrong: str | None = None  # a wrong card passed on purpose, not yet refused

    async def _deal_step(self, p: StationPrompt) -> None:
        # A RESCAN saying a card is foreign or a duplicate names the card. If it is not the wrong
        # card passed on purpose, it is an extra pass of a card that did register (a torn frame is
        # reported twice: damaged, then its sequence number missing, and each report asks for a
        # pass): the card in hand is on its way already, passing it again would make the next
        # position refuse it too, and so on through the whole deal. Like a dealer reading the
        # screen, let the next prompt say where the deal is.
        rejected = _rejected_code(p)
        if p.kind == "RESCAN" and rejected is not None and self.in_hand is not None:
            if rejected != self._wrong:
                self.stale_ignored += 1
                return
            self._wrong = None
        await super()._deal_step(p)

    async def _confirm_step(self, p: StationPrompt) -> None:
        if p.position == "SHUFFLE" and self.confirming is None and self.in_hand is None and self.dealt:
            deck = self.scripted_shuffles.pop(0) if self.scripted_shuffles else shuffled(self.full_deck, self.rng)
            self.shoe.deck = list(deck)
            self._since = len(self.dealt)
            self.reshuffles += 1
        await super()._confirm_step(p)

    def _new_shoe(self) -> None:
        super()._new_shoe()
        self._since = 0

    def _maybe_wrong(self, right: str) -> str:
        kind = self.dealer_faults.choose(self.rng)
        self._wrong = None
        if kind == "foreign":
            self._count("foreign_card")
            self._wrong = self.rng.choice(self.FOREIGN)
        current = self.dealt[self._since:]
        if kind == "duplicate" and current:
            self._count("duplicate_card")
            self._wrong = self.rng.choice(current)
        return self._wrong or right


def _rejected_code(p: StationPrompt) -> str | None:
    """The card a foreign/duplicate RESCAN refused (its message ends with it in parentheses)."""
    if p.reason not in ("foreign_card", "duplicate_card"):
        return None
    m = re.search(r"\(([0-9A-Z]{2,4})\)$", p.message or "")
    return m.group(1) if m else None
