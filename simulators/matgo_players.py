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

import random
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from dealer.core.cards import HWATU_48
from dealer.core.events import PlayerAction
from dealer.core.messages import RoundEvent, StationPrompt
from drivers.bus import Bus
from simulators.bettors import BetPlan, fit_stakes
from simulators.player_parts import RemotePlayer, ReshufflingDealer, deal_number

Strategy = Literal["random", "stopper", "disconnect"]
STRATEGIES: tuple[str, ...] = ("random", "stopper", "disconnect")


#: ``F.3`` -> 0 (the first deal), ``R1.O.2`` -> 1 (the first redeal).
deal_of = deal_number


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


class MatgoPlayer(RemotePlayer):
    STRATEGIES = STRATEGIES

    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "random",
                 rng: random.Random | None = None, *, cover: str | None = None, silent_after: int = 3,
                 think: float = 0.0) -> None:
        super().__init__(table_id, player_id, bus, strategy, rng, think, silent_after)
        self.cover = cover
        self._ids: dict[tuple[str, int], str] = {}  # (round, turn) -> the command id of my move

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

    def answer(self, turn: dict[str, Any], round_id: str) -> tuple[str, str | None]:
        return choose(self.strategy, turn, self.rng)

    def _on_event(self, ev: RoundEvent) -> None:
        if ev.event == "round_opened" and self.cover is not None:
            # the cover bet is sent whole (exclude_none=False): the wire form it always had
            self._sit_once(ev.round_id or "", "cover", self.cover, 1, exclude_none=False)

    async def _send_answer(self, rid: str, turn: int, answer: tuple[str, str | None]) -> None:
        action, card = answer
        await self._pause()
        cid = self._ids.setdefault((rid, turn), self._new_id())  # the same id whenever this turn is answered
        msg = PlayerAction(player_id=self.player_id, action=action, card=card, round_id=rid or None,  # type: ignore[arg-type]  # pydantic validates the action text against PlayerAction's literals
                           turn=turn or None, command_id=cid)
        # a Matgo move never carries an amount (nor a reservation)
        await self._publish(msg.model_dump_json(exclude={"at", "amount", "reserve"}).encode())


class MatgoDealer(ReshufflingDealer):
    """A :class:`VirtualDealer` for the 48 Hwatu cards (``matgo.md`` §2.2, §9).

    The deal and the stock come off one shuffled deck: the station asks for the 28 dealt
    positions, then for each stock card as it is turned over, so the shoe's order is the
    deal order followed by the stock. A redeal (§2.3) asks for ``SHUFFLE`` again: every card
    comes back and the 48 are shuffled (a ``scripted_shuffles`` deck first, if given).
    """

    FOREIGN = ("AS", "JK", "13B")  # a 52-card code, a joker, a bonus/service card

    def __init__(self, *args: Any, deck: Sequence[str] = HWATU_48,
                 scripted_shuffles: Sequence[Sequence[str]] = (), **kw: Any) -> None:
        super().__init__(*args, deck=deck, scripted_shuffles=scripted_shuffles, **kw)
        self.stale_ignored = 0  # RESCANs for a card passed once too often, not for the card in hand
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

    def _maybe_wrong(self, right: str) -> str:
        self._wrong = self._wrong_card()
        return self._wrong or right


def _rejected_code(p: StationPrompt) -> str | None:
    """The card a foreign/duplicate RESCAN refused (its message ends with it in parentheses)."""
    if p.reason not in ("foreign_card", "duplicate_card"):
        return None
    m = re.search(r"\(([0-9A-Z]{2,4})\)$", p.message or "")
    return m.group(1) if m else None


# --- what the game brings to the shared parts (simulators.game_players) -----------------------


def make_player(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
                silent_after: int) -> MatgoPlayer:
    return MatgoPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows


def bet_plan(game: str, options: Any, limits: Mapping[str, Any] | None, minor_unit: Decimal,
             players: int | None) -> BetPlan:
    """One remote player against the house AI, covering 1 or 2 x the minimum."""
    least = options.min_cover
    return BetPlan(game, 1, ("cover",), fit_stakes([least, least * 2], minor_unit))


def seat_bets(plan: BetPlan, p: int, rng: random.Random) -> list[tuple[str, str, int | None]]:
    """Player ``p`` brings its cover to seat ``p``."""
    return [(f"player{p}", "cover", p)]
