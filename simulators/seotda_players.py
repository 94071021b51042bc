"""Simulated remote players (and a dealer) for Seotda tables (``seotda.md``).

A :class:`SeotdaPlayer` listens exactly as a player client would: on its own topic
(``.../players/{player_id}``) it gets its cards (``hole_card``: the first card at once, the
second card once every second card of the game is registered), its turns (``your_turn``)
and the replies to what it sends (``action_accepted``, ``reservation_accepted``,
``reservation_cancelled``, ``rejected``); on the table's public ``events`` topic it sees
whose turn it is and what everyone did.

Seotda actions are **buttons** (§6.1): ``FOLD``, ``BET``, ``X2_RAISE``, ``CALL``,
``QUARTER``, ``HALF``, ``MAX``, ``ALL_IN``, ``CHECK``. A button names its own amount, so a
``player_action`` never carries one; the ``your_turn`` message lists the buttons legal now
(``buttons``: name -> ``{action, total, adds}``) with the ``pot`` and the ``stake``. The
player answers with a button of that list only:

* ``calling``: CHECK when free, else CALL (the backend turns a call that takes every chip
  into an all-in); never bets or raises, never folds while it can call.
* ``random``: a button drawn uniformly from ``buttons``. Before its turn it sometimes
  **reserves** a button (``"reserve": true``, §6.2): when another player's turn opens and it
  still has to act in this betting round.
* ``hand``: plays its own cards, ranked with :func:`dealer.games.seotda_rank.evaluate`: with
  two cards it raises with a pair or better or a special combination (HALF, else X2_RAISE,
  else BET), calls with 5 points or more (or a 9·4 / hunter hand, which may force a
  rematch), else checks or folds; with one card it checks, or calls a bet of at most the
  stake, else folds.
* ``disconnect``: plays like ``calling`` for its first ``silent_after`` actions, then goes
  silent: the backend's turn timer acts for it (CHECK if free, else FOLD).

A turn may also be a **choice** instead of a betting turn (its ``your_turn`` has ``choice``,
``actions`` and the timer's ``default`` instead of ``buttons``): ``REMATCH_94`` (the 9·4
holder under ``REMATCH_94_MODE = PROMPT``: ``REMATCH`` or ``PLAY_ON``) and ``REENTRY`` (a
folded player under ``REMATCH_REENTRY = HALF_POT``: ``REJOIN`` for ``fee`` or ``SIT_OUT``).
``calling`` answers what the timer would (AUTO_BEST; sits out), ``random`` draws one, ``hand``
answers as the timer on a 9·4 and rejoins a rematch; ``disconnect`` leaves it to the timer
once silent.

Given ``seat`` and ``buy_in`` the player also sits down in every round it sees opening,
by placing a ``chips`` bet (at least 60 x the stake).

Every command names its round (a turn's answer also its turn; a reservation is made before
the turn, so it names none) and carries a fresh ``command_id``. An acceptance the backend
sends again (``repeat: true``: a command delivered twice) answers nothing new.

:class:`SeotdaDealer` is the :class:`~simulators.station.VirtualDealer` for the 20-card
deck: it reshuffles all 20 cards when a rematch asks for ``SHUFFLE`` again, its foreign
cards are foreign to Seotda (a 52-card code, November and December cards), and its
duplicates come from the current shuffle only.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from dealer.core.cards import SEOTDA_20
from dealer.core.events import PlayerAction
from dealer.games.seotda_rank import evaluate
from dealer.core.messages import PlayerMessage, RoundEvent
from drivers.bus import Bus
from simulators.bettors import BetPlan, fit_stakes
from simulators.player_parts import RemotePlayer, ReshufflingDealer, deal_number

Strategy = Literal["calling", "random", "hand", "disconnect"]
STRATEGIES: tuple[str, ...] = ("calling", "random", "hand", "disconnect")
BUTTONS: tuple[str, ...] = ("FOLD", "BET", "X2_RAISE", "CALL", "QUARTER", "HALF", "MAX", "ALL_IN", "CHECK")
#: Why a reservation may be refused through no fault of the player: it crossed its own turn,
#: the betting round ended, or the player is not in the game being played (a rematch).
RESERVATION_RACES: tuple[str, ...] = ("it is your turn", "cannot act in this betting round", "no betting round",
                                      "takes no betting actions", "is not in this hand", "not in play",
                                      "action is for round")


#: ``S2.1`` -> 0 (the first deal), ``R2.S1.2`` -> 2 (the second rematch).
position_game = deal_number


def street_game(street: str | None) -> int:
    """``BET_1`` -> 0, ``BET_2 (rematch 1)`` -> 1."""
    if street and "(rematch " in street:
        tail = street.rsplit("(rematch ", 1)[1].rstrip(")")
        return int(tail) if tail.isdigit() else 0
    return 0


def choose(strategy: str, turn: Mapping[str, Any], rng: random.Random, cards: Sequence[str] = ()) -> str:
    """The button ``strategy`` presses for a ``your_turn`` message's ``data``. Pure.

    ``cards`` are the player's own cards in the game being played (``hand`` uses them)."""
    if turn.get("choice"):  # REMATCH / PLAY_ON, or REJOIN / SIT_OUT: no buttons
        actions = [str(a) for a in turn.get("actions") or ()]
        default = str(turn.get("default") or (actions[-1] if actions else "PLAY_ON"))
        if strategy == "random" and actions:
            return rng.choice(sorted(actions))
        if strategy == "hand" and turn["choice"] == "REENTRY" and "REJOIN" in actions:
            return "REJOIN"
        return default
    buttons: dict[str, Any] = dict(turn.get("buttons") or {})
    if not buttons:
        return "FOLD"
    if strategy == "random":
        return rng.choice(sorted(buttons))
    if strategy == "hand":
        return _by_hand(buttons, turn, list(cards))
    return _calling(buttons)


def _calling(buttons: Mapping[str, Any]) -> str:
    for button in ("CHECK", "CALL", "ALL_IN"):
        if button in buttons:
            return button
    return "FOLD"


def _by_hand(buttons: Mapping[str, Any], turn: Mapping[str, Any], cards: list[str]) -> str:
    free = "CHECK" in buttons
    if len(cards) < 2:  # one card: stay in cheaply
        if free:
            return "CHECK"
        call = buttons.get("CALL")
        stake = Decimal(str(turn.get("stake") or 0))
        if call is not None and Decimal(call["adds"]) <= stake:
            return "CALL"
        return "FOLD"
    hand = evaluate(cards[:2])
    if hand.category in ("bright_pair", "pair", "special"):
        for button in ("HALF", "X2_RAISE", "BET", "CALL", "CHECK", "ALL_IN"):
            if button in buttons:
                return button
    if hand.rank >= 205 or hand.function is not None:  # 5 points or more, or a hand that may force a rematch
        return _calling(buttons)
    return "CHECK" if free else "FOLD"


class SeotdaPlayer(RemotePlayer):
    STRATEGIES = STRATEGIES
    RESEND = False  # a turn delivered again (after a reconnect) is not answered twice

    def __init__(self, table_id: str, player_id: str, bus: Bus, strategy: Strategy = "calling",
                 rng: random.Random | None = None, think: float = 0.0, silent_after: int = 1,
                 seat: int | None = None, buy_in: str | None = None, reserve_rate: float = 0.3) -> None:
        super().__init__(table_id, player_id, bus, strategy, rng, think, silent_after)
        self.seat, self.buy_in = seat, buy_in
        self.reserve_rate = reserve_rate
        self.seats: dict[str, int] = {}  # round -> my seat (from bet_accepted)
        self.reserved: list[tuple[str, str, str]] = []  # (round, street, button) reserved before my turn
        self.reservations_refused: list[str] = []  # reservations that raced the table (benign)
        self.reservations_cancelled: list[str] = []
        self._outstanding: deque[str] = deque()  # "act" / "reserve": what the next reply answers
        self._street: tuple[str, str] | None = None  # (round, street) of the betting round open
        self._level = Decimal(0)
        self._mine: dict[tuple[str, str], tuple[Decimal, bool]] = {}  # (round, street) -> (my total, all-in)
        self._out: set[tuple[str, int]] = set()  # (round, game) I folded in (or was dealt out of)
        self._reserved_in: set[tuple[str, str]] = set()

    # -- what the player sees ------------------------------------------------------------

    def cards(self, round_id: str, game: int | None = None) -> list[str]:
        """My cards in ``round_id``, of ``game`` (0 = the first deal, n = rematch n; default:
        the latest game I was dealt into), in deal order."""
        mine = self.hole.get(round_id, [])
        if not mine:
            return []
        g = max(position_game(p) for p, _ in mine) if game is None else game
        held = {p: c for p, c in mine if position_game(p) == g}  # a re-sent card replaces itself
        return [held[p] for p in sorted(held, key=lambda p: p.rsplit(".", 1)[1])]

    def _on_reply(self, msg: PlayerMessage) -> None:
        rid = msg.round_id or ""
        kind, data = msg.kind, msg.data
        if kind == "bet_accepted" and data.get("seat") is not None:
            self.seats[rid] = int(data["seat"])
        elif data.get("repeat"):
            self.repeated.append(dict(data))  # the answer to something answered already
        elif kind == "action_accepted":
            self.accepted.append(dict(data))
            if data.get("by") == "player":
                self._answer("act")
        elif kind == "reservation_accepted":
            self._answer("reserve")
        elif kind == "reservation_cancelled":
            self.reservations_cancelled.append(str(data.get("reason")))
        elif kind == "rejected":
            answers = self._answer(None) if data.get("type") == "player_action" else None
            if answers == "reserve" and any(r in str(data.get("reason")) for r in RESERVATION_RACES):
                self.reservations_refused.append(str(data.get("reason")))
            else:  # my own turn's action, or my chips bet: never expected
                self.rejected.append(dict(data))

    def answer(self, turn: dict[str, Any], round_id: str) -> str:
        return choose(self.strategy, turn, self.rng, self.cards(round_id, street_game(turn.get("street"))))

    def _sending(self, answer: Any) -> None:
        self._outstanding.append("act")

    def _answer(self, kind: str | None) -> str | None:
        """A reply arrived: it answers the oldest thing sent (the table replies in order)."""
        if not self._outstanding:
            return None
        if kind is not None and self._outstanding[0] != kind and kind in self._outstanding:
            self._outstanding.remove(kind)
            return kind
        return self._outstanding.popleft()

    def _on_event(self, ev: RoundEvent) -> None:
        rid, d = ev.round_id or "", ev.data
        if ev.event == "round_opened" and self.seat is not None and self.buy_in is not None:
            self._sit_once(rid, "chips", self.buy_in, self.seat)
        elif ev.event == "betting_round_opened":
            self._street, self._level = (rid, str(d.get("street"))), Decimal(0)
        elif ev.event == "player_acted":
            self._level = Decimal(str(d.get("level", self._level)))
            if d.get("player_id") == self.player_id:
                street = (rid, str(d.get("street")))
                self._mine[street] = (Decimal(str(d.get("total", 0))), bool(d.get("all_in")))
                if d.get("action") == "FOLD":
                    self._out.add((rid, street_game(street[1])))
        elif ev.event == "turn" and d.get("player_id") != self.player_id and not d.get("choice"):
            self._level = Decimal(str(d.get("level", self._level)))
            self._maybe_reserve(rid, str(d.get("street")))

    def _maybe_reserve(self, rid: str, street: str) -> None:
        """``random`` only: reserve a button while another player is to act, if this betting
        round still owes me a turn (I have not acted yet, or I am below the level)."""
        if self.strategy != "random" or self.rng.random() >= self.reserve_rate:
            return
        game = street_game(street)
        if (rid, game) in self._out or not any(position_game(p) == game for p, _ in self.hole.get(rid, [])):
            return  # folded, or not dealt into this game (a rematch between others)
        key = (rid, street)
        total, all_in = self._mine.get(key, (None, False))
        if all_in or (total is not None and total >= self._level) or key in self._reserved_in:
            return
        self._reserved_in.add(key)  # once per betting round: a later one would replace it anyway
        button = self.rng.choice(("CHECK", "BET", "QUARTER", "HALF", "FOLD") if self._level == 0
                                 else ("CALL", "X2_RAISE", "QUARTER", "HALF", "FOLD"))
        self.reserved.append((rid, street, button))
        self._outstanding.append("reserve")
        self._spawn(self._act(rid, button, reserve=True))

    # -- what the player sends -----------------------------------------------------------

    async def _send_answer(self, round_id: str, turn: int, button: str) -> None:
        await self._act(round_id or None, button, turn=turn or None)

    async def _act(self, round_id: str | None, button: str, reserve: bool = False, turn: int | None = None) -> None:
        if not reserve:
            await self._pause()
        msg = PlayerAction(player_id=self.player_id, action=button, reserve=reserve,  # type: ignore[arg-type]  # pydantic validates the action text against PlayerAction's literals
                           round_id=round_id, turn=None if reserve else turn, command_id=self._new_id())
        # a button names its own amount: the action carries none ("reserve" only when reserving,
        # "turn" only when answering one)
        drop = {"at", "amount"} | ({"turn"} if reserve else {"reserve"})
        await self._publish(msg.model_dump_json(exclude=drop).encode())


class SeotdaDealer(ReshufflingDealer):
    """A :class:`VirtualDealer` for the 20 Seotda cards.

    A rematch is dealt from the same 20 cards, reshuffled (§7.2 rule 5): when ``SHUFFLE`` is
    asked for again in a round, every card comes back and the dealer shuffles them (a
    ``scripted_shuffles`` deck first, if given, else a random order). Dealer mistakes are
    Seotda's: a foreign card is a 52-card code or a November/December Hwatu card; a
    duplicate is a card already dealt since the last shuffle.
    """

    FOREIGN = ("AS", "11G", "12JD", "11J1")

    def __init__(self, *args: Any, deck: Sequence[str] = SEOTDA_20,
                 scripted_shuffles: Sequence[Sequence[str]] = (), **kw: Any) -> None:
        super().__init__(*args, deck=deck, scripted_shuffles=scripted_shuffles, **kw)

    def _maybe_wrong(self, right: str) -> str:
        return self._wrong_card() or right


# --- what the game brings to the shared parts (simulators.game_players) -----------------------


def make_player(table_id: str, pid: str, bus: Bus, strategy: str, rng: random.Random, think: float,
                silent_after: int) -> SeotdaPlayer:
    return SeotdaPlayer(table_id, pid, bus, strategy, rng=rng, think=think, silent_after=silent_after)  # type: ignore[arg-type]  # the caller's strategy name: the player's Literal lists the ones it knows


def bet_plan(game: str, options: Any, limits: Mapping[str, Any] | None, minor_unit: Decimal,
             players: int | None) -> BetPlan:
    """At least the minimum chips (60 x the stake by default); four players by default."""
    least = options.min_chips
    stakes = sorted({least, max(least, options.stake * 100), max(least, options.stake * 200)})
    return BetPlan(game, min(players or 4, options.seats), ("chips",), fit_stakes(stakes, minor_unit))


def seat_bets(plan: BetPlan, p: int, rng: random.Random) -> list[tuple[str, str, int | None]]:
    """Player ``p`` brings its chips to seat ``p``."""
    return [(f"player{p}", "chips", p)]
