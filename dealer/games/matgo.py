"""Matgo at a live table (``matgo.md``): one remote player against the house AI, real cards.

The dealer deals both hands and the layout from a shuffled 48-card deck (every card is
scanned; the AI's hand goes to nobody), then plays the game card by card: the player's
moves arrive as actions, the AI's moves are computed at the edge (the service runs
:mod:`dealer.house.matgo_ai` with a time budget and sends the move like any player would, so it
is journaled and replays exactly), and every stock card is turned over by the dealer and
scanned before the turn goes on. The rules themselves are :mod:`dealer.games.matgo_engine`.

Money: the player escrows a **cover** (a ``cover`` bet on seat 1, at least
``min_cover_points`` × ``point_value``). The loser pays payment points × ``point_value``
(§7); a player's loss is limited to the cover. The result says exactly what goes back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from dealer.core import draws
from dealer.core.cards import HWATU_48
from dealer.core.game_contract import HouseSeat, PeerGame, PeerHand
from dealer.core.game_records import (
    BetResolution,
    BetStep,
    BetView,
    DealStep,
    EndStep,
    Face,
    GameOutcome,
    Outcome,
    Position,
)
from dealer.games.matgo_engine import MatgoGame, payment, protection_units, score
from dealer.games.matgo_moves import SEATS, Choose, Decide, Flip, Phase, Play
from dealer.games.matgo_rules import MatgoRules, deal_positions

COVER = "cover"
PLAYER_SEAT, AI_SEAT = 1, 2
AI_PLAYER = "house-ai"  # one of dealer.core.game_contract.HOUSE_PLAYERS
#: The ``hand`` of a layout position (L1..L8) and of a stock card turned over (S1..S20).
LAYOUT, STOCK = "L", "STOCK"
_ACTING = {"PLAY", "CHOOSE_A", "CHOOSE_B", "DECIDE"}
_HOUSE = frozenset({AI_PLAYER})


class MatgoOptions(MatgoRules):
    """Table options: the engine's house options (:class:`~dealer.games.matgo_rules.MatgoRules`,
    declared there once: ``deal_pattern``, ``ppuk_capture_steal``, ``immediate_win_multipliers``,
    ``nagari_next_multiplier``, ``sseul_rule``, ``last_turn``; ``rules`` gives them alone) and
    the table's own: money, first player and AI budget.

    * ``point_value``: money per payment point; ``min_cover_points``: the least cover a
      player escrows, in points (a loss is limited to the cover).
    * ``first_player``: ``RANDOM`` (§2.1: derived from the round's secret draw, see
      :mod:`dealer.core.draws`), ``PLAYER`` or ``AI``. A redeal keeps the same first player (§2.3).
    * ``ai_budget_ms``: the AI's thinking time per move (at most 100 ms on one core).
    """

    point_value: Decimal = Decimal("1.00")
    min_cover_points: Annotated[int, Field(strict=True, ge=1, le=100_000)] = 50
    first_player: Literal["RANDOM", "PLAYER", "AI"] = "RANDOM"
    ai_budget_ms: Annotated[int, Field(strict=True, ge=1, le=100)] = 100

    @field_validator("point_value", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Decimal:
        if isinstance(v, float):
            raise ValueError("point_value must be a decimal string or an integer, never a float")
        d = Decimal(str(v))
        if d <= 0:
            raise ValueError("point_value must be positive")
        return d

    @property
    def min_cover(self) -> Decimal:
        return self.point_value * self.min_cover_points


class Matgo(PeerGame):
    name = "matgo"
    Options = MatgoOptions
    chips_bet = COVER
    chips_once = "a player escrows one cover per game"
    min_players = 1  # the other seat is the house AI
    house_seats = True  # its hands are HouseSeats (dealer.core.game_contract.HouseSeat)
    house_seed_label = "matgo-ai"  # the AI's seeds: draws.ai_seed(draw, round, turn, "matgo-ai")

    options: MatgoOptions

    @property
    def deck(self) -> frozenset[str]:
        return frozenset(HWATU_48)

    @property
    def seat_count(self) -> int:
        return 1

    def check_stake(self, stake: Decimal, player: str, context: Mapping[str, Any]) -> str | None:
        if player == AI_PLAYER:
            return f"{AI_PLAYER} is the house AI's id"
        if stake < self.options.min_cover:
            return (f"the cover must be at least {self.options.min_cover} "
                    f"({self.options.min_cover_points} points of {self.options.point_value})")
        return None

    def check_unit(self, unit: Decimal) -> str | None:
        if self.options.point_value % unit != 0:
            return f"point_value {self.options.point_value} is not a whole number of the money unit {unit}"
        return None

    def deal_plan(self, seats: Sequence[int] = ()) -> tuple[Position, ...]:
        return tuple(_deal(self.options, first_is_player=True, deal=0))

    def start_hand(self, seats: Mapping[int, str], chips: Mapping[str, Decimal], hand_number: int,
                   unit: Decimal, context: Mapping[str, Any] | None = None, *,
                   draw: str | None = None) -> "MatgoHand":
        return MatgoHand(self.options, seats[PLAYER_SEAT], chips[seats[PLAYER_SEAT]], hand_number, unit, draw)

    def resolve(self, cards: Mapping[str, str], bets: Sequence[BetView] = (),
                decisions: Mapping[str, str] | None = None) -> GameOutcome:
        raise NotImplementedError("a Matgo game is resolved move by move (MatgoHand), not from a card list")


def first_player(draw: str | None, hand_number: int) -> Literal["PLAYER", "AI"]:
    """§2.1 "The first player is chosen at random": a fair coin from the round's secret draw.
    A round journaled before draws (``draw`` None) keeps the first player it was played with,
    which came from the public hand number."""
    if draw is None:
        digest = hashlib.sha256(f"matgo-first:{hand_number}".encode()).digest()
        return "PLAYER" if digest[0] % 2 == 0 else "AI"
    return draws.choice(draw, "matgo-first-player", ("PLAYER", "AI"))


def _deal(o: MatgoOptions, first_is_player: bool, deal: int) -> list[Position]:
    """The deal plan of §2.2 with F and O mapped to the player's and the AI's seats."""
    seat = {"F": PLAYER_SEAT if first_is_player else AI_SEAT, "O": AI_SEAT if first_is_player else PLAYER_SEAT}
    prefix = f"R{deal}." if deal else ""
    out = []
    for name, face in deal_positions(o.rules):
        # the engine's table names a hand card F.3 / O.3 and a layout card L3
        letter, dot, number = name.partition(".")
        hand, index = (letter, int(number)) if dot else (LAYOUT, int(name[len(LAYOUT):]))
        owner = seat.get(hand)
        out.append(Position(prefix + name, Face.DOWN if face == "DOWN" else Face.UP, seat=owner, deck=deal,
                            hand=hand, index=index, house=AI_PLAYER if owner == AI_SEAT else None))
    return out


@dataclass(frozen=True)
class MatgoRequest:
    """The house AI's decision for one turn (:meth:`MatgoHand.house_request`), picklable: its
    own clone of the engine (the AI reads only what its seat may know: ``engine.view(seat)``),
    the AI's seat letter, its thinking budget and the seed from the round's secret draw.
    ``playouts``: a fixed search size instead of the clock (None at the table: the budget
    rules; a number makes the move a function of the request alone, for tests and benches)."""

    engine: MatgoGame
    seat: Literal["F", "O"]
    budget_ms: int
    seed: int
    playouts: int | None = None


class MatgoHand(PeerHand, HouseSeat):
    """One game of Matgo at the table: the deal (and redeals), then the engine move by move.
    The house AI's seat is a :class:`~dealer.core.game_contract.HouseSeat`."""

    def __init__(self, options: MatgoOptions, player: str, cover: Decimal, hand_number: int, unit: Decimal,
                 draw: str | None = None) -> None:
        self.o = options
        self.unit = unit
        self.player = player
        self.cover = cover
        first = options.first_player
        if first == "RANDOM":
            first = first_player(draw, hand_number)
        self.seat_of: dict[str, str] = ({"F": player, "O": AI_PLAYER} if first == "PLAYER"
                                        else {"F": AI_PLAYER, "O": player})
        self.letter = {p: s for s, p in self.seat_of.items()}
        self.deals = 0
        self.cards: dict[str, str] = {}
        self.engine: MatgoGame | None = None
        self.flips = 0
        self.log: list[dict[str, Any]] = []
        self._dealt = False
        self._notes: list[tuple[str, dict[str, Any]]] = []

    # -- flow -----------------------------------------------------------------------------

    def next_step(self) -> DealStep | BetStep | EndStep:
        if self.engine is None:
            if self._dealt:  # the deal is complete: start the game (setup checks, §2.3)
                self._start()
                if self.engine is None:  # a redeal: all 48 cards again
                    return self._deal_step()
            else:
                self._dealt = True
                return self._deal_step()
        g = self.engine
        assert g is not None
        if g.result is not None:
            return EndStep()
        if g.phase == Phase.FLIP:
            self.flips += 1
            prefix = f"R{self.deals - 1}." if self.deals > 1 else ""
            return DealStep((Position(f"{prefix}S{self.flips}", Face.UP, deck=self.deals - 1, hand=STOCK,
                                      index=self.flips),),
                            "Turn the top stock card over")
        return BetStep(first=self.seat_of[g.to_move], limits=None, street=f"turn {g.turn}")

    def _deal_step(self) -> DealStep:
        deal = self.deals
        self.deals += 1
        positions = _deal(self.o, first_is_player=self.seat_of["F"] == self.player, deal=deal)
        if deal:
            positions = [Position("SHUFFLE", confirm=True, deck=deal)] + positions
        self._dealt = True
        return DealStep(tuple(positions), None if not deal else "Redeal: shuffle all 48 cards")

    def _start(self) -> None:
        prefix = f"R{self.deals - 1}." if self.deals > 1 else ""
        hands = {s: [self.cards[f"{prefix}{s}.{i}"] for i in range(1, 11)] for s in SEATS}
        layout = [self.cards[f"{prefix}L{i}"] for i in range(1, 9)]
        g = MatgoGame.start(hands=hands, layout=layout, first="F", rules=self.o.rules)
        if g.result is not None and g.result.kind == "REDEAL":
            self._notes.append(("redeal", {"deal": self.deals, "reason": str(g.result.details.get("reason", ""))}))
            self.engine = None
            self._dealt = False
            self.cards = {k: v for k, v in self.cards.items()}  # kept for the record
            return
        self.engine = g

    def register(self, position: Position, code: str) -> None:
        if position.confirm:
            return
        self.cards[position.name] = code
        if self.engine is not None and position.hand == STOCK:
            turn_of = self.seat_of[self.engine.to_move]
            self._record(turn_of, "FLIP", code, self.engine.apply(Flip(code)))

    def _record(self, player: str | None, action: str, card: str | None, events: Any) -> None:
        entry = {"player": player, "action": action, "card": card, "events": _jsonable(events)}
        self.log.append(entry)
        self._notes.append(("matgo_move", entry))

    # -- turns ------------------------------------------------------------------------------

    def open_turns(self, step: BetStep) -> bool:
        return self.to_act is not None

    @property
    def to_act(self) -> str | None:
        g = self.engine
        if g is None or g.result is not None or g.phase.value not in _ACTING:
            return None
        return self.seat_of[g.to_move]

    def turn_summary(self) -> dict[str, Any]:
        g = self.engine
        return {} if g is None else {"phase": g.phase.value, "turn_number": g.turn}

    def turn_prompt(self, street: str | None) -> str:
        return f"Matgo {street}: {self.to_act} to move; do not turn the stock over yet"

    def turn_options(self) -> dict[str, Any]:
        g = self.engine
        assert g is not None
        legal = g.legal()
        out: dict[str, Any] = {"phase": g.phase.value}
        if g.phase == Phase.DECIDE:
            out["actions"] = sorted({"GO" if m.go else "STOP" for m in legal if isinstance(m, Decide)})
        elif g.phase == Phase.PLAY:
            out["actions"] = ["PLAY"]
            out["cards"] = sorted(m.card for m in legal if isinstance(m, Play))
        else:
            out["actions"] = ["CHOOSE"]
            out["cards"] = sorted(m.card for m in legal if isinstance(m, Choose))
        return out

    def translate(self, player: str, action: str, amount: Decimal | None) -> tuple[str, Decimal | None] | str:
        if amount is not None:
            return f"Matgo moves take no amount ({action})"
        return action, None

    def do_action(self, player: str, action: str, amount: Decimal | None, card: str | None,
                  by: str) -> tuple[dict[str, Any] | str, bool]:
        g = self.engine
        if g is None or self.to_act is None:
            return "no Matgo move is expected now", False
        if player != self.to_act:
            return f"it is not {player}'s move (waiting for {self.to_act})", False
        move = _move(action, card)
        if isinstance(move, str):
            return move, False
        reason = g.verify(move)
        if reason is not None:
            return reason, False
        events = g.apply(move)
        self._record(player, action, card, events)
        record = {"player_id": player, "action": action, "card": card, "phase_after": g.phase.value}
        return record, self.to_act is not None

    def default_action(self) -> tuple[str, Decimal | None, str | None]:
        g = self.engine
        assert g is not None
        m = g.default_move()
        if isinstance(m, Decide):
            return ("GO" if m.go else "STOP"), None, None
        return ("PLAY" if isinstance(m, Play) else "CHOOSE"), None, m.card

    # -- the house seat ----------------------------------------------------------------------

    def house_players(self) -> frozenset[str]:
        return _HOUSE

    def house_request(self, player: str, turn: int, seed: int) -> MatgoRequest:
        if player != AI_PLAYER:
            raise ValueError(f"{player} is not a house player in Matgo (the house plays {AI_PLAYER})")
        if self.engine is None:
            raise ValueError("no Matgo game in play: the house AI has no move to decide")
        return MatgoRequest(engine=self.engine.clone(), seat=self.letter[AI_PLAYER],  # type: ignore[arg-type]  # letter holds the seat letters F and O
                            budget_ms=self.o.ai_budget_ms, seed=seed)

    def notes(self) -> list[tuple[str, dict[str, Any]]]:
        out, self._notes = self._notes, []
        return out

    # -- what the table sees ---------------------------------------------------------------

    def shows(self, position: Position, ended: bool) -> bool:
        """A hand card is shown when it is played; a chongtong winner shows the four cards that
        win (at the result)."""
        if self.engine is None or position.deck != self.deals - 1:
            return False
        code = self.cards[position.name]
        if any(m["action"] == "PLAY" and m["card"] == code for m in self.log):
            return True
        result = self.engine.result
        if ended and result is not None and result.kind == "CHONGTONG":
            return position.hand == result.winner and int(code[:2]) in result.details.get("months", ())
        return False

    def mucked(self, position: Position) -> bool:
        """The hand cards never played of a deal that was redealt are never shown."""
        return position.deck != self.deals - 1

    # -- result ----------------------------------------------------------------------------------

    def outcome(self) -> GameOutcome:
        g = self.engine
        result = g.result if g is not None else None
        points = result.payment_points if result is not None else 0
        winner = self.seat_of[result.winner] if result is not None and result.winner else None
        money = (self.o.point_value * points).quantize(self.unit)
        if winner == self.player:
            back, outcome = self.cover + money, Outcome.WIN
        elif winner == AI_PLAYER:
            back, outcome = self.cover - min(money, self.cover), Outcome.LOSE
        else:
            back, outcome = self.cover, Outcome.PUSH
        if money == 0 and outcome != Outcome.PUSH:
            outcome = Outcome.PUSH
        return GameOutcome(
            hands={}, winner=None if winner is None else ("PLAYER" if winner == self.player else "AI"),
            bets={}, player_bets={self.player: {COVER: BetResolution(outcome, returned=back.quantize(self.unit))}},
            details={"kind": result.kind if result is not None else None, "payment_points": points,
                     "point_value": str(self.o.point_value), "money": str(money),
                     "loss_capped": winner == AI_PLAYER and money > self.cover,
                     "seats": dict(self.seat_of), "deals": self.deals,
                     "result": _jsonable(result.details) if result is not None else {},
                     "moves": self.log, "rake": "0",
                     "announce": _announce(result, winner, self.player, points)})


def _move(action: str, card: str | None) -> Any:
    if action == "PLAY":
        return Play(card) if card else "PLAY needs the hand card"
    if action == "CHOOSE":
        return Choose(card) if card else "CHOOSE needs the layout card"
    if action in ("GO", "STOP"):
        return Decide(action == "GO") if card is None else f"{action} takes no card"
    return f"{action} is not a Matgo move (PLAY, CHOOSE, GO, STOP)"


def move_action(move: Any) -> tuple[str, str | None]:
    """An engine move as a ``player_action`` (action, card): how the AI sends its move."""
    if isinstance(move, Decide):
        return ("GO" if move.go else "STOP"), None
    if isinstance(move, Play):
        return "PLAY", move.card
    if isinstance(move, Choose):
        return "CHOOSE", move.card
    raise ValueError(f"{move!r} is not a player's move")


def _announce(result: Any, winner: str | None, player: str, points: int) -> str | None:
    if result is None:
        return None
    if winner is None:
        return "Nagari: a draw, nothing is paid" if result.kind == "NAGARI" else None
    who = "The player" if winner == player else "The house"
    return f"{who} wins {points} points ({result.kind.lower().replace('_', ' ')})"


def _jsonable(x: Any) -> Any:
    """Engine events and details as JSON-safe data (dataclasses, tuples, sets, enums)."""
    from dataclasses import asdict, is_dataclass
    from enum import Enum

    if is_dataclass(x) and not isinstance(x, type):
        return _jsonable(asdict(x))
    if isinstance(x, Enum):
        return x.value
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in x]
        return sorted(items, key=str) if isinstance(x, (set, frozenset)) else items
    if isinstance(x, Decimal):
        return str(x)
    return x


# --- dispute tool: ``dealer hand matgo`` -------------------------------------------------------

#: A Stop needs at least this combination score (§6).
STOP_POINTS = 7


def _go_text(points: int, go_count: int) -> str:
    if go_count == 0:
        return f"{points}"
    if go_count <= 2:
        return f"({points} + {go_count} for {go_count} Go)"
    return f"{points} x {1 << (go_count - 2)} ({go_count} Go)"


def hand_report(stopper: Sequence[str], loser: Sequence[str], go_count: int = 0,
                options: MatgoOptions | None = None) -> dict[str, Any]:
    """JSON-safe report for ``dealer hand matgo STOPPER-PILE --vs LOSER-PILE [--go N]``: both
    captured piles scored (§5, the cup classified by §5.5) and what the Stop pays (§7.1 Go
    adjustment, §7.2 multipliers), in payment points and in money at ``point_value``.

    Immediate wins (chongtong, three Ppuks: 5 points) and Nagari (0) do not depend on the
    piles and are not computed here. Raises :class:`~dealer.core.cards.CardError` for a code that is
    not a Hwatu card, a card twice or in both piles; ValueError for a bad Go count."""
    o = options or MatgoOptions()
    if isinstance(go_count, bool) or not isinstance(go_count, int) or not 0 <= go_count <= 10:
        raise ValueError(f"the Go count must be a whole number from 0 to 10, got {go_count!r}")
    from dealer.core.cards import CardError

    piles = {}
    for name, pile in (("the stopper's pile", stopper), ("the loser's pile (--vs)", loser)):
        try:
            piles[name] = score(pile)
        except CardError as exc:
            raise CardError(f"{name}: {str(exc).removeprefix('score: ')}") from None
    win, lose = piles.values()
    try:
        pay = payment(stopper, loser, go_count)
    except CardError as exc:
        raise CardError(str(exc).removeprefix("payment: ")) from None
    explain = _go_text(pay.points, go_count) + "".join(f" x 2 ({m})" for m in pay.multipliers)
    report: dict[str, Any] = {
        "game": "matgo",
        "stopper": {"cards": list(stopper), "count": len(stopper), "score": _jsonable(win)},
        "loser": {"cards": list(loser), "count": len(loser), "score": _jsonable(lose),
                  "junk_units_for_protection": protection_units(loser)},
        "go_count": go_count,
        "stop_allowed": win.total >= STOP_POINTS,
        "payment": {"points": pay.points, "go_adjusted": pay.go_adjusted, "multipliers": list(pay.multipliers),
                    "payment_points": pay.payment_points, "explain": f"{explain} = {pay.payment_points}"},
        "money": {"point_value": str(o.point_value), "amount": str(o.point_value * pay.payment_points),
                  "note": "paid by the loser to the stopper; a player's loss is limited to the cover"},
        "rules": "matgo.md §5 scoring, §6 Stop, §7.1 Go adjustment, §7.2 multipliers",
    }
    if win.total < STOP_POINTS:
        report["warning"] = (f"the stopper's pile scores {win.total}: a Stop needs at least {STOP_POINTS} points "
                             "(§6), so no Stop was possible with it")
    return report
