"""The betting engine for peer-to-peer games (Seven-Card Stud, Seotda): pure, exact money.

One :class:`Betting` lives for a whole hand. Each betting round is opened with the
player who acts first and the round's :class:`Limits` (what a bet or a raise may be);
players then act in seat order until the round is over. Like pokerkit, each action has
a *verify* (a reason, or None), a *can* (bool) and a *do* (:meth:`Betting.act`,
returning a typed :class:`ActionRecord`); and like h11 the engine's states and the
actions allowed in each read as a table (:data:`TRANSITIONS`):

    ============  ===========================================  ===================
    state         action                                       next state
    ============  ===========================================  ===================
    IDLE          open_round()                                 TO_ACT | ROUND_OVER
    TO_ACT        CHECK BET BRING_IN CALL RAISE ALL_IN FOLD    TO_ACT | ROUND_OVER
                                                               | HAND_OVER
    ROUND_OVER    close_round() (uncalled chips returned)      IDLE
    HAND_OVER     close_round()                                HAND_OVER
    ============  ===========================================  ===================

A round is over when every player still able to act (not folded, not all-in) has acted
since the last full raise and matched the highest contribution, or when at most one
such player is left and owes nothing. The hand is over when one player remains.

Games differ in what a bet or raise may be: a game supplies :class:`Limits` (stud's
spread limit is :class:`SpreadLimit`). Raising is reopened for players who already
acted only by a *full* raise, unless the limits say every raise reopens (Seotda).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, Callable, Literal, Protocol, overload

from dealer.core.pots import uncalled

ZERO = Decimal(0)


class BettingError(ValueError):
    """An action the engine refused; the message is the reason for the player."""


class State(StrEnum):
    IDLE = "IDLE"  # between betting rounds (cards are being dealt)
    TO_ACT = "TO_ACT"
    ROUND_OVER = "ROUND_OVER"
    HAND_OVER = "HAND_OVER"  # one player left: they win without a showdown


class Act(StrEnum):
    CHECK = "CHECK"
    BET = "BET"
    BRING_IN = "BRING_IN"  # the forced opening bet (stud's low card)
    CALL = "CALL"
    RAISE = "RAISE"
    ALL_IN = "ALL_IN"
    FOLD = "FOLD"


@dataclass(slots=True)
class Player:
    player_id: str
    seat: int
    stack: Decimal  # chips behind (not yet put in)
    total: Decimal = ZERO  # put in over the hand
    street: Decimal = ZERO  # put in during the current round
    folded: bool = False
    acted: bool = False  # acted since the last full raise
    may_raise: bool = True

    @property
    def all_in(self) -> bool:
        return not self.folded and self.stack == 0

    @property
    def able(self) -> bool:
        return not self.folded and self.stack > 0


@dataclass(frozen=True, slots=True)
class Range:
    min: Decimal
    max: Decimal

    def as_json(self) -> dict[str, str]:
        return {"min": str(self.min), "max": str(self.max)}


class Limits(Protocol):
    """What a bet or raise may be in one betting round (amounts are round totals, "make it")."""

    #: True: the first actor must open (stud's bring-in) and may neither check nor fold.
    forced_open: bool
    #: Bets plus raises allowed per round while ``cap_players`` or more can act; None: no cap.
    raise_cap: int | None
    cap_players: int
    #: True: any raise (even an all-in for less than a full raise) reopens raising.
    every_raise_reopens: bool

    def open_range(self, engine: "Betting", player: Player) -> Range | None:
        """Totals a first bet (or the forced bring-in) may make, or None."""

    def raise_range(self, engine: "Betting", player: Player) -> Range | None:
        """Totals a raise may make, or None when no raise fits."""

    def max_all_in(self, engine: "Betting", player: Player) -> Decimal | None:
        """The largest round total an all-in may reach (limit games); None: unlimited."""


@dataclass(frozen=True, slots=True)
class SpreadLimit:
    """Spread-limit betting (``seven-card-stud.md`` §4): every bet and every raise
    increment lies in ``[min_bet, max_bet]``; a raise makes at least double the current
    level (``DOUBLE_LEVEL``) or adds at least the previous increment
    (``PREVIOUS_INCREMENT``). An all-in may not exceed the largest legal total."""

    min_bet: Decimal
    max_bet: Decimal
    raise_rule: Literal["DOUBLE_LEVEL", "PREVIOUS_INCREMENT"] = "DOUBLE_LEVEL"
    forced_open: bool = False
    open_min: Decimal | None = None  # the bring-in's own range, when it differs from the street's
    open_max: Decimal | None = None
    raise_cap: int | None = 4  # a bet (or bring-in) plus three raises
    cap_players: int = 3
    every_raise_reopens: bool = False

    def open_range(self, engine: "Betting", player: Player) -> Range | None:
        lo = self.open_min if self.open_min is not None else self.min_bet
        hi = self.open_max if self.open_max is not None else self.max_bet
        return Range(lo, hi)

    def raise_range(self, engine: "Betting", player: Player) -> Range | None:
        level = engine.level
        if self.raise_rule == "DOUBLE_LEVEL":
            lo = max(2 * level, level + self.min_bet)
        else:
            lo = level + max(engine.last_increment, self.min_bet)
        hi = level + self.max_bet
        return Range(lo, hi) if lo <= hi else None

    def max_all_in(self, engine: "Betting", player: Player) -> Decimal | None:
        if engine.level == 0:
            r = self.open_range(engine, player)
            return r.max if r else ZERO
        r = self.raise_range(engine, player) if engine.can_raise_now(player) else None
        return r.max if r else engine.level


@dataclass(frozen=True, slots=True)
class Options:
    """What the player to act may do now (sent to them with their turn)."""

    player_id: str
    check: bool
    fold: bool
    call: Decimal | None  # chips a call adds
    bet: Range | None  # round totals for BET (or BRING_IN when ``forced``)
    raise_: Range | None  # round totals for RAISE
    all_in: Decimal | None  # round total an all-in makes, when allowed
    forced: bool

    def actions(self) -> list[str]:
        out = []
        if self.check:
            out.append(Act.CHECK)
        if self.bet is not None:
            out.append(Act.BRING_IN if self.forced else Act.BET)
        if self.call is not None:
            out.append(Act.CALL)
        if self.raise_ is not None:
            out.append(Act.RAISE)
        if self.all_in is not None:
            out.append(Act.ALL_IN)
        if self.fold:
            out.append(Act.FOLD)
        return [str(a) for a in out]

    def as_json(self) -> dict[str, Any]:
        return {"actions": self.actions(), "call": None if self.call is None else str(self.call),
                "bet": self.bet.as_json() if self.bet else None,
                "raise": self.raise_.as_json() if self.raise_ else None,
                "all_in": None if self.all_in is None else str(self.all_in)}


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action as executed. ``total`` is the player's round total after it ("make it"),
    ``increment`` how much it raised the level (the verbal "raise X")."""

    player_id: str
    seat: int
    action: Act
    added: Decimal
    total: Decimal
    level: Decimal
    increment: Decimal
    all_in: bool
    by: Literal["player", "timeout"]
    full_raise: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"player_id": self.player_id, "seat": self.seat, "action": str(self.action),
                "added": str(self.added), "total": str(self.total), "level": str(self.level),
                "increment": str(self.increment), "all_in": self.all_in, "by": self.by}


@dataclass(frozen=True, slots=True)
class Returned:
    """Chips nobody called, given back to their owner when a round closes."""

    player_id: str
    amount: Decimal


@dataclass
class Betting:
    """The betting of one hand: players in seat order with the chips they brought."""

    players: list[Player]
    unit: Decimal = Decimal("0.01")
    state: State = State.IDLE
    to_act: str | None = None
    level: Decimal = ZERO  # the highest round total
    last_increment: Decimal = ZERO  # the last full bet/raise increment
    bets: int = 0  # bets (or bring-in) plus full raises this round
    capped: bool = False
    limits: Limits | None = None
    rounds: int = 0
    history: list[ActionRecord] = field(default_factory=list)

    @classmethod
    def seat(cls, players: Sequence[tuple[str, int, Decimal]], unit: Decimal = Decimal("0.01"),
             allow_empty: bool = False) -> "Betting":
        seats = sorted(players, key=lambda p: p[1])
        if len({p for p, _, _ in seats}) != len(seats) or len({s for _, s, _ in seats}) != len(seats):
            raise BettingError("one seat per player and one player per seat")
        if any(stack < 0 or (stack == 0 and not allow_empty) for _, _, stack in seats):
            raise BettingError("every player must bring chips")  # a Seotda rematch may seat an all-in player
        return cls([Player(p, s, stack.quantize(unit)) for p, s, stack in seats], unit)

    # -- queries ----------------------------------------------------------------------

    def player(self, player_id: str) -> Player:
        for p in self.players:
            if p.player_id == player_id:
                return p
        raise BettingError(f"player {player_id} is not in this hand")

    @property
    def live(self) -> list[Player]:
        return [p for p in self.players if not p.folded]

    @property
    def able(self) -> list[Player]:
        return [p for p in self.players if p.able]

    @property
    def betting_possible(self) -> bool:
        """Whether a new round could see any action: two players able to act, or one who owes."""
        able = self.able
        return len(self.live) > 1 and (len(able) > 1 or any(p.street < self.level for p in able))

    def contributions(self) -> dict[str, Decimal]:
        return {p.player_id: p.total for p in self.players}

    def can_raise_now(self, p: Player) -> bool:
        return p.may_raise and not self.capped and self.level > 0

    def options(self, player_id: str | None = None) -> Options:
        """The legal actions of the player to act (``player_id`` defaults to them)."""
        pid = player_id if player_id is not None else self.to_act
        if pid is None or self.state != State.TO_ACT or pid != self.to_act:
            return Options(pid or "", False, False, None, None, None, None, False)
        p = self.player(pid)
        lim = self._limits
        owe = self.level - p.street
        forced = lim.forced_open and self.level == 0 and self.bets == 0
        reach = p.street + p.stack  # the round total if every chip goes in
        bet = raise_ = None
        if self.level == 0:
            r = lim.open_range(self, p)
            if r is not None and reach > r.min:  # with no more than the minimum, the bet is an all-in
                bet = Range(r.min, min(r.max, reach - self.unit)) if reach - self.unit >= r.min else None
        elif self.can_raise_now(p):
            r = lim.raise_range(self, p)
            if r is not None and reach > r.min:
                raise_ = Range(r.min, min(r.max, reach - self.unit)) if reach - self.unit >= r.min else None
        cap = lim.max_all_in(self, p)
        all_in = reach if (cap is None or reach <= cap) else None
        call = min(owe, p.stack) if owe > 0 and p.stack > owe else None
        if owe > 0 and p.stack <= owe:
            all_in = reach  # calling for less (or exactly all) is an all-in
        q = self._q
        return Options(pid, check=owe == 0 and not forced, fold=not forced, call=q(call),
                       bet=Range(q(bet.min), q(bet.max)) if bet else None,
                       raise_=Range(q(raise_.min), q(raise_.max)) if raise_ else None,
                       all_in=q(all_in), forced=forced)

    @overload
    def _q(self, amount: Decimal) -> Decimal: ...
    @overload
    def _q(self, amount: None) -> None: ...
    @overload
    def _q(self, amount: Decimal | None) -> Decimal | None: ...
    def _q(self, amount: Decimal | None) -> Decimal | None:
        return None if amount is None else amount.quantize(self.unit)

    # -- verify / can / do --------------------------------------------------------------

    def verify(self, player_id: str, action: Act | str, total: Decimal | None = None) -> str | None:
        """Why ``player_id`` may not take ``action`` (making their round total ``total``), or None."""
        try:
            act = Act(action)
        except ValueError:
            return f"unknown action {action!r} (expected one of {', '.join(a.value for a in Act)})"
        if (self.state, act) not in TRANSITIONS:
            return f"no betting round is waiting for an action ({self.state.value})"
        if player_id != self.to_act:
            if all(p.player_id != player_id for p in self.players):
                return f"player {player_id} is not in this hand"
            return f"it is not {player_id}'s turn (waiting for {self.to_act})"
        o = self.options(player_id)
        if act.value not in o.actions():
            return f"{act.value} is not allowed now (allowed: {', '.join(o.actions())})"
        if act in (Act.BET, Act.BRING_IN, Act.RAISE):
            rng = o.raise_ if act == Act.RAISE else o.bet
            assert rng is not None
            if total is None:
                return f"{act.value} needs an amount: the round total to make ({rng.min}..{rng.max})"
            if total % self.unit != 0:
                return f"amount {total} is not a whole number of {self.unit}"
            if not rng.min <= total <= rng.max:
                return f"{act.value} must make it {rng.min}..{rng.max}, not {total}"
        elif total is not None and act != Act.ALL_IN:
            return f"{act.value} takes no amount"
        elif act == Act.ALL_IN and total is not None and total != o.all_in:
            return f"all-in makes it {o.all_in}, not {total}"
        return None

    def can(self, player_id: str, action: Act | str, total: Decimal | None = None) -> bool:
        return self.verify(player_id, action, total) is None

    def act(self, player_id: str, action: Act | str, total: Decimal | None = None,
            by: Literal["player", "timeout"] = "player") -> ActionRecord:
        reason = self.verify(player_id, action, total)
        if reason is not None:
            raise BettingError(reason)
        act = Act(action)
        if total is not None:
            total = total.quantize(self.unit)  # "2" and "2.00" are the same amount: report it one way
        return TRANSITIONS[(self.state, act)](self, self.player(player_id), act, total, by)

    def default_action(self) -> tuple[Act, Decimal | None]:
        """The timeout action (rulebooks): check if free, the smallest forced bet, else fold."""
        o = self.options()
        if o.check:
            return Act.CHECK, None
        if o.forced:
            return (Act.BRING_IN, o.bet.min) if o.bet is not None else (Act.ALL_IN, None)
        return Act.FOLD, None

    # -- rounds -------------------------------------------------------------------------

    def open_round(self, first: str, limits: Limits) -> State:
        """Start a betting round with ``first`` to act (or the next able player after them)."""
        if self.state not in (State.IDLE,):
            raise BettingError(f"cannot open a betting round while {self.state.value}")
        self.limits, self.level, self.last_increment, self.bets, self.capped = limits, ZERO, ZERO, 0, False
        self.rounds += 1
        for p in self.players:
            p.street, p.acted, p.may_raise = ZERO, False, True
        self.state = State.TO_ACT
        start = self.player(first)
        self.to_act = None
        if not self.betting_possible:
            self.state = State.ROUND_OVER
            return self.state
        self.to_act = start.player_id if start.able else self._next_after(start)
        return self.state

    def close_round(self) -> Returned | None:
        """End the round: return uncalled chips; IDLE again unless the hand is over."""
        if self.state not in (State.ROUND_OVER, State.HAND_OVER):
            raise BettingError(f"the betting round is not over ({self.state.value})")
        back = uncalled({p.player_id: p.street for p in self.players})
        returned = None
        if back is not None:
            p = self.player(back[0])
            p.stack += back[1]
            p.total -= back[1]
            p.street -= back[1]
            returned = Returned(p.player_id, back[1])
        self.to_act = None
        if self.state == State.ROUND_OVER:
            self.state = State.IDLE
        return returned

    # -- transitions ----------------------------------------------------------------------

    def _check(self, p: Player, act: Act, total: Decimal | None, by: Any) -> ActionRecord:
        return self._done(p, act, ZERO, by)

    def _fold(self, p: Player, act: Act, total: Decimal | None, by: Any) -> ActionRecord:
        p.folded = True
        return self._done(p, act, ZERO, by)

    def _call(self, p: Player, act: Act, total: Decimal | None, by: Any) -> ActionRecord:
        return self._done(p, act, self._put(p, self.level), by)

    def _bet(self, p: Player, act: Act, total: Decimal | None, by: Any) -> ActionRecord:
        assert total is not None
        return self._done(p, act, self._put(p, total), by, raising=True)

    def _all_in(self, p: Player, act: Act, total: Decimal | None, by: Any) -> ActionRecord:
        return self._done(p, act, self._put(p, p.street + p.stack), by, raising=p.street + p.stack > self.level)

    # -- helpers ----------------------------------------------------------------------------

    @property
    def _limits(self) -> Limits:
        if self.limits is None:
            raise BettingError("no betting round is open")
        return self.limits

    def _put(self, p: Player, total: Decimal) -> Decimal:
        add = min(total - p.street, p.stack)
        p.stack -= add
        p.street += add
        p.total += add
        return add

    def _done(self, p: Player, act: Act, added: Decimal, by: Any, raising: bool = False) -> ActionRecord:
        lim = self._limits
        before = self.level
        increment = ZERO
        full = False
        if raising and p.street > before:
            increment = p.street - before
            if before == 0:
                r = lim.open_range(self, p)
                full = r is None or p.street >= r.min
            else:
                r = lim.raise_range(self, p)
                full = r is not None and p.street >= r.min
            full = full or lim.every_raise_reopens
            self.level = p.street
            for q in self.players:
                if q is not p and q.able:
                    q.acted = False
                    if full:
                        q.may_raise = True
            if full:
                self.last_increment = increment
                self.bets += 1
                if lim.raise_cap is not None and self.bets >= lim.raise_cap and len(self.able) >= lim.cap_players:
                    self.capped = True
        p.acted, p.may_raise = True, False
        record = ActionRecord(p.player_id, p.seat, act, added, p.street, self.level, increment, p.all_in, by, full)
        self.history.append(record)
        self._advance(p)
        return record

    def _advance(self, p: Player) -> None:
        if len(self.live) == 1:
            self.state, self.to_act = State.HAND_OVER, None
            return
        able = self.able
        pending = [q for q in able if q.street < self.level or (not q.acted and len(able) > 1)]
        if not pending:
            self.state, self.to_act = State.ROUND_OVER, None
            return
        self.to_act = self._next_after(p, pending)

    def _next_after(self, p: Player, among: Sequence[Player] | None = None) -> str | None:
        wanted = {q.player_id for q in (among if among is not None else self.able)}
        i = self.players.index(p)
        n = len(self.players)
        for k in range(1, n + 1):
            q = self.players[(i + k) % n]
            if q.player_id in wanted:
                return q.player_id
        return None


_Handler = Callable[[Betting, Player, Act, "Decimal | None", Any], ActionRecord]

#: (state, action) -> transition; anything else is refused by :meth:`Betting.verify`.
TRANSITIONS: dict[tuple[State, Act], _Handler] = {
    (State.TO_ACT, Act.CHECK): Betting._check,
    (State.TO_ACT, Act.BET): Betting._bet,
    (State.TO_ACT, Act.BRING_IN): Betting._bet,
    (State.TO_ACT, Act.CALL): Betting._call,
    (State.TO_ACT, Act.RAISE): Betting._bet,
    (State.TO_ACT, Act.ALL_IN): Betting._all_in,
    (State.TO_ACT, Act.FOLD): Betting._fold,
}
