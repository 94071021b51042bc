"""What every simulated remote player (and every reshuffling virtual dealer) does, written once.

A game's players (its own module, registered in :mod:`simulators.game_players`) keep only
their strategies and what their game's turns carry; :class:`RemotePlayer` holds the rest:

* listening as a player client does: its own topic (``.../players/{player_id}``) and the
  table's public ``events`` topic, every private message kept, hole cards by round, the
  replies to what it sent sorted into accepted, repeated (a command delivered twice) and
  rejected;
* the turn boilerplate (:meth:`RemotePlayer._on_turn`): a turn answered once, a turn given
  again after a reconnect answered with the same answer (or not at all), a ``disconnect``
  player going silent after ``silent_after`` answers so that the backend's timer acts;
* sending: a fresh ``command_id`` per command, a link that is down swallowed (the timer acts),
  sitting down with a bet once per round.

:class:`ReshufflingDealer` is the :class:`~simulators.station.VirtualDealer` of a game whose
round may gather and reshuffle all its cards (a rematch, a redeal): its
duplicates come from the current shuffle only, its foreign cards from its ``FOREIGN`` list.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from dealer.core.events import PlaceBet
from dealer.core.messages import PlayerMessage, RoundEvent, StationPrompt
from dealer.edge import topics
from drivers.bus import Bus, BusError
from simulators.feed import events_of
from simulators.shoe import shuffled
from simulators.station import VirtualDealer


def deal_number(position: str) -> int:
    """Which deal of the round a position belongs to: ``S2.1`` / ``F.3`` -> 0 (the first deal),
    ``R2.S1.2`` / ``R1.O.2`` -> 2 / 1 (a rematch, a redeal)."""
    head = position.split(".", 1)[0]
    return int(head[1:]) if head.startswith("R") and head[1:].isdigit() else 0


class RemotePlayer:
    """A simulated player client of one table (see the module docstring).

    Subclasses set ``STRATEGIES`` (checked here) and implement :meth:`answer` (what the
    strategy answers to a turn) and :meth:`_send_answer` (the command that carries it); they
    add their game's handling in :meth:`_on_reply` and :meth:`_on_event`."""

    STRATEGIES: ClassVar[tuple[str, ...]] = ()
    #: A turn given again (a reconnect) is answered again with the same answer (and id).
    RESEND: ClassVar[bool] = True

    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: str,
                 rng: random.Random | None = None, think: float = 0.0, silent_after: int = 1) -> None:
        if self.STRATEGIES and strategy not in self.STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (expected one of {', '.join(self.STRATEGIES)})")
        self.table_id, self.player_id, self.bus, self.strategy = table_id, player_id, bus, strategy
        self.rng = rng or random.Random()
        self.think = think
        self.silent_after = silent_after
        self.messages: list[PlayerMessage] = []
        self.hole: dict[str, list[tuple[str, str]]] = {}  # round -> [(position, card)] seen only by me
        self.sent: list[tuple[Any, ...]] = []  # (round, turn, answer...) answered on my turns
        self.ignored: list[tuple[str, int]] = []  # turns left to the timer (disconnect)
        self.accepted: list[dict[str, Any]] = []
        self.repeated: list[dict[str, Any]] = []  # acceptances the backend sent again (a command re-sent)
        self.rejected: list[dict[str, Any]] = []  # refusals of what this player sent: never expected
        self._answers: dict[tuple[str, int], Any] = {}  # (round, turn) -> my answer (None: left to the timer)
        self._sat: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        bus.subscribe(topics.player(table_id, player_id), self._on_private)
        bus.subscribe(topics.state(table_id), events_of(self._on_public))

    # -- what the player sees ------------------------------------------------------------

    @property
    def silent(self) -> bool:
        return self.strategy == "disconnect" and len(self.sent) >= self.silent_after

    def _on_private(self, topic: str, payload: bytes) -> None:
        msg = PlayerMessage.model_validate_json(payload)
        self.messages.append(msg)
        if msg.kind == "hole_card":
            self.hole.setdefault(msg.round_id or "", []).append((str(msg.data["position"]), str(msg.data["card"])))
            self._on_hole_card(msg)
        elif msg.kind == "your_turn":
            self._on_turn(msg)
        else:
            self._on_reply(msg)

    def _on_hole_card(self, msg: PlayerMessage) -> None:
        """A card of mine arrived (kept in :attr:`hole` already)."""

    def _on_reply(self, msg: PlayerMessage) -> None:
        """Any other private message: by default, acceptances and refusals are kept."""
        if msg.kind == "action_accepted":
            (self.repeated if msg.data.get("repeat") else self.accepted).append(dict(msg.data))
        elif msg.kind == "rejected":
            self.rejected.append(dict(msg.data))

    def _on_public(self, topic: str, payload: bytes) -> None:
        self._on_event(RoundEvent.model_validate_json(payload))

    def _on_event(self, ev: RoundEvent) -> None:
        """A public event of the table (the default ignores them)."""

    # -- a turn ----------------------------------------------------------------------------

    def _on_turn(self, msg: PlayerMessage) -> None:
        rid = msg.round_id or ""
        key = (rid, int(msg.data.get("turn", 0)))
        if key in self._answers:  # the same turn given again (after a reconnect or a restart)
            again = self._answers[key]
            # the answer may have been lost: sent again with the same id; if it was not, the
            # backend answers the copy as a repeat and applies it once
            if again is not None and self.RESEND:
                self._spawn(self._send_answer(rid, key[1], again))
            return
        self._answers[key] = None
        if self.silent:
            self.ignored.append(key)
            return
        answer = self.answer(msg.data, rid)
        self._answers[key] = answer
        self.sent.append((rid, key[1], *(answer if isinstance(answer, tuple) else (answer,))))
        self._sending(answer)
        self._spawn(self._send_answer(rid, key[1], answer))

    def answer(self, turn: dict[str, Any], round_id: str) -> Any:
        """What this player's strategy answers to a ``your_turn`` message's data."""
        raise NotImplementedError

    def _sending(self, answer: Any) -> None:
        """Called just before an answer goes out (a game may count the replies it awaits)."""

    async def _send_answer(self, round_id: str, turn: int, answer: Any) -> None:
        raise NotImplementedError

    # -- what the player sends -----------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, payload: bytes) -> None:
        try:
            await self.bus.publish(topics.actions(self.table_id), payload)
        except BusError:
            pass  # the player's link is down: the turn timer acts for them

    def _new_id(self) -> str:
        return f"{self.player_id[:40]}-{uuid.uuid4().hex[:12]}"

    def _sit_once(self, round_id: str, bet_type: str, stake: str, seat: int, *, exclude_none: bool = True) -> None:
        """Sit down in ``round_id`` (once, however often its opening comes) with a bet of the
        chips (or the cover) this player brings."""
        if round_id in self._sat:
            return
        self._sat.add(round_id)
        bet = PlaceBet(bet_id=f"{round_id}-{self.player_id}", player_id=self.player_id, bet_type=bet_type,
                       stake=stake, seat=seat, round_id=round_id, command_id=self._new_id())  # type: ignore[arg-type]  # pydantic coerces the decimal text to the Decimal stake
        self._spawn(self._publish(bet.model_dump_json(exclude={"at"}, exclude_none=exclude_none).encode()))

    async def _pause(self) -> None:
        """The player's thinking time before it answers."""
        if self.think:
            await asyncio.sleep(self.think)


class ReshufflingDealer(VirtualDealer):
    """A :class:`VirtualDealer` whose round may ask for ``SHUFFLE`` again: every card comes back
    and the dealer shuffles them (a ``scripted_shuffles`` deck first, if given, else a random
    order). Its mistakes: a foreign card from ``FOREIGN``, a duplicate from the current shuffle."""

    FOREIGN: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, deck: Sequence[str], scripted_shuffles: Sequence[Sequence[str]] = (),
                 **kw: Any) -> None:
        super().__init__(*args, deck=deck, **kw)
        self.scripted_shuffles = [list(d) for d in scripted_shuffles]
        self.reshuffles = 0
        self._since = 0  # index in ``dealt`` where the current shuffle starts

    async def _confirm_step(self, p: StationPrompt) -> None:
        if p.position == "SHUFFLE" and self.confirming is None and self.in_hand is None and self.dealt:
            # all the cards are gathered and shuffled again
            deck = self.scripted_shuffles.pop(0) if self.scripted_shuffles else shuffled(self.full_deck, self.rng)
            self.shoe.deck = list(deck)
            self._since = len(self.dealt)
            self.reshuffles += 1
        await super()._confirm_step(p)

    def _new_shoe(self) -> None:
        super()._new_shoe()
        self._since = 0

    def _wrong_card(self) -> str | None:
        """The wrong card a dealer mistake passes instead of the right one, or None."""
        kind = self.dealer_faults.choose(self.rng)
        if kind == "foreign":
            self._count("foreign_card")
            return self.rng.choice(self.FOREIGN)
        current = self.dealt[self._since:]
        if kind == "duplicate" and current:
            self._count("duplicate_card")
            return self.rng.choice(current)
        return None


__all__ = ["RemotePlayer", "ReshufflingDealer", "deal_number"]
