"""Matgo (two-player Go-Stop) game machine, ``matgo.md``: moves, views and the deal itself.
Pure, fast, cloneable; the card tables are :mod:`dealer.games.matgo_cards`, scoring and
payment :mod:`dealer.games.matgo_scoring`.

The engine holds one deal: both hands, the layout (with its piles), both captured piles and
the Stop/Go state. It knows nothing of the stock: the stock card of step B is supplied by the
caller as a :class:`Flip` (the dealer turns it over and the scanner registers it). There is
no IO, no clock and no randomness here.

A turn is a short sequence of moves::

    PLAY      Play(hand card)               step A (§3.1)
    CHOOSE_A  Choose(layout card)           only when two layout cards match the hand card
    FLIP      Flip(stock card)              step B (§3.2), the registered stock card
    CHOOSE_B  Choose(layout card)           only when two layout cards match the stock card
    (step C, steals, the three-Ppuk check and the score check run automatically, §3.3)
    DECIDE    Decide(go)                    only at a decision point (§6), never on the last turn
    OVER                                    ``result`` is set

Every card is an index 0..47 into ``HWATU_48`` and every set of cards an ``int`` bit mask
(:mod:`dealer.games.matgo_cards`), so :meth:`MatgoGame.clone` is a handful of attribute
copies and scoring is a few ``bit_count`` calls. Accessors such as ``hands`` or ``captured``
convert to codes.

Seats: ``"F"`` and ``"O"`` (seat index 0 and 1). The ``first`` seat (``"F"`` by default)
takes the odd turns.

Events: :meth:`MatgoGame.apply` returns a list of ``(kind, data)`` tuples, in order:

``turn`` {turn, seat} (a new turn starts) · ``played`` {seat, card, matches} ·
``placed`` {seat, card, step} (left on the layout) · ``choice`` {seat, step, card, options}
(the seat must choose) · ``pending`` {seat, cards} (step-A pending pair) · ``flipped``
{seat, card} · ``paired`` {seat, cards} (step-B pair) · ``triple`` {seat, month, cards,
origin, maker, units} (all four of a month taken; ``units`` = junk units owed) · ``ppuk``
{seat, month, cards, count} · ``ttadak`` / ``chok`` / ``sseul`` {seat, units, applied}
(``applied`` is False on the last turn, units 0) · ``captured`` {seat, cards} (step C) ·
``steal`` {from, to, owed, cards, units} · ``score`` {seat, total, F, O} · ``decision``
{seat, score, go_count} · ``go`` {seat, go_count, score} · ``stop`` {seat, score, auto} ·
``immediate_win`` {kind, seat, payment_points} · ``nagari`` {} · ``result`` {kind, winner,
payment_points}. ``MatgoGame.setup_events`` holds the setup findings of §2.3: ``pile``
{month, cards, origin}, ``redeal`` {reason, ...}, ``immediate_win`` and ``result``.

Playout API
-----------

What search code (the house AI, :mod:`dealer.house.matgo_ai`; the arena,
``tools/matgo_arena.py``) may use; everything else with a leading underscore is the
engine's own and may change.

* Positions: :meth:`MatgoGame.clone` (an independent copy; cheap), :meth:`MatgoGame.determinize`
  (a clone in which the opponent holds a sampled hand), :meth:`MatgoGame.view` /
  :meth:`MatgoGame.unseen` (what one seat knows; never the opponent's hand). The engine is
  picklable, so a search may run in another process.
* Moves: :meth:`MatgoGame.legal` (the legal moves of the seat to act, ``to_move``),
  :meth:`MatgoGame.legal_moves` (the same for a named seat, ``[]`` when it is not its move),
  :meth:`MatgoGame.apply` (verified, returns the events) and :meth:`MatgoGame.step` (the
  unverified fast path for playouts: the move must come from ``legal()``). The move objects of
  every card are prebuilt: ``PLAY_MOVES[i]``, ``CHOOSE_MOVES[i]``, ``FLIP_MOVES[i]`` for card
  index ``i``, and ``STOP`` / ``GO``.
* State: ``phase`` (a :class:`Phase`), ``result`` (``None`` until the deal ends; also
  ``is_over``), ``turn`` (1..20), ``to_move`` (the seat) and ``mover`` (its index), and the
  bit masks ``hand_masks[p]``, ``captured_masks[p]``, ``layout_mask``, ``pending_mask`` (face-up
  cards of this turn not yet captured) and ``options_mask`` (the two cards of a pending
  choice). These are plain attributes, for speed: read them, never assign them (only
  ``apply`` / ``step`` change a game).
* Scores: :meth:`MatgoGame.score_total` (a seat's combination total),
  :func:`dealer.games.matgo_scoring.fast_total` (the same for any mask), :meth:`MatgoGame.scores`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator

from dealer.core.cards import CardError, parse_hwatu
from dealer.games.base import GameOptions
from dealer.games.matgo_cards import (
    ALL,
    CODES,
    DOUBLE_JUNK,
    INDEX,
    JUNK,
    MONTH,
    MONTH_MASK,
    VALUE,
    bits,
    byte_tables,
    card_value,
    codes,
    expand,
    low,
    strict_mask,
)
from dealer.games.matgo_scoring import (
    Payment,
    Score,
    fast_total,
    mask_multipliers,
    mask_payment,
    mask_score,
    payment,
    protection_units,
    score,
)

__all__ = [
    "SEATS", "Seat", "other", "MatgoRules", "deal_positions", "STOCK_POSITIONS", "split_deal",
    "Play", "Choose", "Flip", "Decide", "Move", "Phase", "Event", "LayoutStack", "Score",
    "Payment", "MatgoResult", "MatgoView", "MatgoGame", "score", "payment", "card_value", "protection_units",
    "PLAY_MOVES", "CHOOSE_MOVES", "FLIP_MOVES", "STOP", "GO",
]

Seat = Literal["F", "O"]
SEATS: tuple[Seat, Seat] = ("F", "O")
_SEAT_INDEX = {"F": 0, "O": 1}


def other(seat: Seat) -> Seat:
    """The other seat."""
    if seat == "F":
        return "O"
    if seat == "O":
        return "F"
    raise ValueError(f"unknown seat {seat!r} (expected 'F' or 'O')")


def _seat_index(seat: Any, what: str = "seat") -> int:
    try:
        return _SEAT_INDEX[seat]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be 'F' or 'O', got {seat!r}") from None


# --- house options (§2.2, §4.2, §7.4, §7.5, §10) --------------------------------------------


def _exact_int(value: Any) -> Any:
    """A multiplier is an int: refuse ``True`` and ``2.0``, which would compare equal to 1 and 2."""
    if type(value) is not int:
        raise ValueError(f"must be the integer 1 or 2, got {value!r}")
    return value


class MatgoRules(GameOptions):
    """The house options of ``matgo.md``, declared once: every default is the rulebook default.
    The table's options (``dealer.games.matgo.MatgoOptions``) extend this model with money."""

    deal_pattern: Literal["5_5_4", "ROUND_ROBIN"] = "5_5_4"
    ppuk_capture_steal: Literal["ANY_PPUK_2", "OWN_2_OTHER_1"] = "ANY_PPUK_2"
    immediate_win_multipliers: Literal["NONE", "APPLY"] = "NONE"
    nagari_next_multiplier: Annotated[Literal[1, 2], BeforeValidator(_exact_int)] = 1
    sseul_rule: Literal["LAYOUT_CLEARED", "TWO_MONTHS_CAPTURED"] = "LAYOUT_CLEARED"
    last_turn: Literal["DEAL_FINAL", "EACH_PLAYERS_FINAL"] = "DEAL_FINAL"

    @property
    def rules(self) -> MatgoRules:
        """The engine's rules alone (for a subclass such as the table options: without the money)."""
        if type(self) is MatgoRules:
            return self
        return MatgoRules(**{name: getattr(self, name) for name in MatgoRules.model_fields})


STOCK_POSITIONS: tuple[str, ...] = tuple(f"S{n}" for n in range(1, 21))


def deal_positions(rules: MatgoRules = MatgoRules()) -> list[tuple[str, str]]:
    """The deal plan of §2.2: ``(position, face)`` for the 28 dealt cards in dealing order.

    Hands are ``F.1``..``F.10`` / ``O.1``..``O.10`` (``DOWN``), the layout ``L1``..``L8``
    (``UP``). The stock positions :data:`STOCK_POSITIONS` (``S1``..``S20``) are not part of the
    deal: each is registered face up when the dealer turns it over (a :class:`Flip`).
    """
    if rules.deal_pattern == "5_5_4":
        plan = [(f"F.{i}", "DOWN") for i in range(1, 6)]
        plan += [(f"O.{i}", "DOWN") for i in range(1, 6)]
        plan += [(f"L{i}", "UP") for i in range(1, 5)]
        plan += [(f"F.{i}", "DOWN") for i in range(6, 11)]
        plan += [(f"O.{i}", "DOWN") for i in range(6, 11)]
        plan += [(f"L{i}", "UP") for i in range(5, 9)]
        return plan
    plan = []
    for i in range(1, 11):
        plan += [(f"F.{i}", "DOWN"), (f"O.{i}", "DOWN")]
    plan += [(f"L{i}", "UP") for i in range(1, 9)]
    return plan


def split_deal(cards: Mapping[str, str]) -> tuple[dict[Seat, list[str]], list[str]]:
    """``{position: code}`` of the 28 dealt positions -> ``(hands, layout)`` for :meth:`MatgoGame.start`."""
    hands: dict[Seat, list[str]] = {"F": [], "O": []}
    try:
        for seat in SEATS:
            hands[seat] = [cards[f"{seat}.{i}"] for i in range(1, 11)]
        layout = [cards[f"L{i}"] for i in range(1, 9)]
    except KeyError as exc:
        raise ValueError(f"deal position {exc.args[0]} is missing") from None
    return hands, layout


# --- moves ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CardMove:
    card: str


class Play(_CardMove):
    """Step A: play ``card`` from the hand of the seat to move."""

    __slots__ = ()


class Choose(_CardMove):
    """Choose which of the two layout cards of the month ``card`` is (step A or step B)."""

    __slots__ = ()


class Flip(_CardMove):
    """Step B: the stock card the dealer turned over and the scanner registered."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Decide:
    """Stop (``go=False``) or Go (``go=True``) at a decision point (§6)."""

    go: bool


Move = Union[Play, Choose, Flip, Decide]
Event = tuple[str, dict[str, Any]]

#: card index -> its move (prebuilt: playouts allocate no move objects)
PLAY_MOVES: tuple[Play, ...] = tuple(Play(c) for c in CODES)
CHOOSE_MOVES: tuple[Choose, ...] = tuple(Choose(c) for c in CODES)
FLIP_MOVES: tuple[Flip, ...] = tuple(Flip(c) for c in CODES)
STOP = Decide(False)
GO = Decide(True)
_PLAY_TABLES = byte_tables(PLAY_MOVES)
_FLIP_TABLES = byte_tables(FLIP_MOVES)


class Phase(StrEnum):
    PLAY = "PLAY"          # to_move must play a hand card
    CHOOSE_A = "CHOOSE_A"  # choose one of two layout cards for the hand card
    FLIP = "FLIP"          # waiting for the stock card (supplied by the caller)
    CHOOSE_B = "CHOOSE_B"  # choose one of two layout cards for the stock card
    DECIDE = "DECIDE"      # Stop / Go
    OVER = "OVER"


_P_PLAY, _P_CA, _P_FLIP, _P_CB, _P_DEC, _P_OVER = (
    Phase.PLAY, Phase.CHOOSE_A, Phase.FLIP, Phase.CHOOSE_B, Phase.DECIDE, Phase.OVER)
_MOVE_TYPES = frozenset((Play, Choose, Flip, Decide))
_EXPECTED: dict[Phase, type] = {_P_PLAY: Play, _P_CA: Choose, _P_FLIP: Flip, _P_CB: Choose, _P_DEC: Decide}


# --- results, layout, views -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatgoResult:
    """How the deal ended. ``kind``: STOP | CHONGTONG | THREE_PPUK | NAGARI | REDEAL."""

    kind: Literal["STOP", "CHONGTONG", "THREE_PPUK", "NAGARI", "REDEAL"]
    winner: Seat | None
    payment_points: int
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LayoutStack:
    """The layout cards of one month: loose (1 or 2 cards, ``origin="LOOSE"``, maker None) or a
    pile of three (``origin`` ``"INITIAL"`` with maker None, or ``"PPUK"`` with its maker)."""

    month: int
    cards: tuple[str, ...]
    origin: Literal["LOOSE", "INITIAL", "PPUK"]
    maker: Seat | None


@dataclass(frozen=True, slots=True)
class MatgoView:
    """What ``seat`` knows (never the opponent's hand). ``pending`` = face-up cards of the
    current turn not yet captured; ``options`` = the two cards of a pending choice;
    ``seen`` = every card this seat has seen; ``unseen`` = the rest (opponent hand + stock)."""

    seat: Seat
    hand: tuple[str, ...]
    opponent_hand_size: int
    layout: tuple[LayoutStack, ...]
    pending: tuple[str, ...]
    options: tuple[str, ...]
    captured: dict[Seat, tuple[str, ...]]
    seen: frozenset[str]
    unseen: tuple[str, ...]
    stock_left: int
    scores: dict[Seat, int]
    go_count: dict[Seat, int]
    score_at_last_go: dict[Seat, int]
    ppuks: dict[Seat, int]
    turn: int
    phase: Phase
    to_move: Seat
    first: Seat
    result: MatgoResult | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly plain data."""
        return {
            "seat": self.seat, "hand": list(self.hand), "opponent_hand_size": self.opponent_hand_size,
            "layout": [{"month": s.month, "cards": list(s.cards), "origin": s.origin, "maker": s.maker}
                       for s in self.layout],
            "pending": list(self.pending), "options": list(self.options),
            "captured": {k: list(v) for k, v in self.captured.items()},
            "seen": sorted(self.seen), "unseen": list(self.unseen), "stock_left": self.stock_left,
            "scores": dict(self.scores), "go_count": dict(self.go_count),
            "score_at_last_go": dict(self.score_at_last_go), "ppuks": dict(self.ppuks),
            "turn": self.turn, "phase": str(self.phase), "to_move": self.to_move, "first": self.first,
            "result": None if self.result is None else {
                "kind": self.result.kind, "winner": self.result.winner,
                "payment_points": self.result.payment_points, "details": self.result.details},
        }


# --- the game -------------------------------------------------------------------------------

_SLOTS = (
    "rules", "setup_events", "_first", "mover", "turn", "phase", "hand_masks", "captured_masks", "layout_mask",
    "_piles", "_ppuk", "_go", "_last_go", "_stock_left", "result", "_last_from", "_sseul_by_layout",
    # transient state of the current turn
    "_a", "_am", "_ak", "pending_mask", "options_mask", "_b", "_owed", "_lay0", "_capa", "_capb",
    "_made_ppuk", "_dscore",
)


class MatgoGame:
    """One Matgo deal. Build it with :meth:`start` (or :meth:`from_position`)."""

    __slots__ = _SLOTS

    # ---- construction ----

    def __init__(self) -> None:  # use start() / from_position()
        self.rules = MatgoRules()
        self.setup_events: list[Event] = []
        self._first = 0
        self.mover = 0
        self.turn = 1
        self.phase = _P_PLAY
        self.hand_masks = [0, 0]
        self.captured_masks = [0, 0]
        self.layout_mask = 0
        self._piles: dict[int, tuple[str, int]] = {}  # month -> (origin, maker index or -1); copy on write
        self._ppuk = [0, 0]
        self._go = [0, 0]
        self._last_go = [0, 0]
        self._stock_left = 20
        self.result: MatgoResult | None = None
        self._last_from = 20  # the turns from which bonuses are not applied and a decision is a Stop
        self._sseul_by_layout = True  # the Sseul rule, read on every turn (a slot is faster than the model)
        self._reset_turn()

    def _set_rules(self, rules: MatgoRules) -> None:
        if not isinstance(rules, MatgoRules):
            raise ValueError(f"rules must be a MatgoRules, got {type(rules).__name__}")
        self.rules = rules
        self._last_from = 19 if rules.last_turn == "EACH_PLAYERS_FINAL" else 20
        self._sseul_by_layout = rules.sseul_rule == "LAYOUT_CLEARED"

    def _reset_turn(self) -> None:
        self._a = -1
        self._am = 0
        self._ak = 0
        self.pending_mask = 0
        self.options_mask = 0
        self._b = -1
        self._owed = 0
        self._lay0 = False
        self._capa = 0
        self._capb = 0
        self._made_ppuk = False
        self._dscore = 0

    @classmethod
    def start(cls, hands: Mapping[Seat, Sequence[str]], layout: Sequence[str], first: Seat = "F",
              rules: MatgoRules = MatgoRules()) -> MatgoGame:
        """A new deal from the dealt cards, with the setup checks of §2.3 applied in order.

        A redeal or a chongtong ends the game at once (``phase == OVER``, see ``result``); the
        setup findings are in ``setup_events``.
        """
        g = cls()
        g._set_rules(rules)
        g._first = g.mover = _seat_index(first, "first")
        if not isinstance(hands, Mapping) or set(hands) != {"F", "O"}:
            keys = list(hands) if isinstance(hands, Mapping) else type(hands).__name__
            raise ValueError(f"hands must map exactly the seats 'F' and 'O', got {keys}")
        where: dict[str, str] = {}
        groups = [("F's hand", hands["F"], 10), ("O's hand", hands["O"], 10), ("the layout", layout, 8)]
        masks = []
        for what, cards, n in groups:
            if isinstance(cards, str) or not isinstance(cards, Sequence):
                raise CardError(f"{what}: expected a sequence of {n} card codes, got {type(cards).__name__} {cards!r}"
                                + (" (a single string)" if isinstance(cards, str) else ""))
            if len(cards) != n:
                raise ValueError(f"{what} must have exactly {n} cards, got {len(cards)}: {list(cards)}")
            m = 0
            for c in cards:
                code = parse_hwatu(c).code
                if code in where:
                    raise CardError(f"duplicate card {code}: in {where[code]} and in {what}")
                where[code] = what
                m |= 1 << INDEX[code]
            masks.append(m)
        g.hand_masks = [masks[0], masks[1]]
        lay = masks[2]
        g.layout_mask = lay
        ev = g.setup_events
        # 1. layout quad -> redeal
        for mo in range(1, 13):
            if lay & MONTH_MASK[mo] == MONTH_MASK[mo]:
                ev.append(("redeal", {"reason": "LAYOUT_QUAD", "month": mo}))
                g._end(MatgoResult("REDEAL", None, 0, {"reason": "LAYOUT_QUAD", "month": mo}), ev)
                return g
        quads = [[mo for mo in range(1, 13) if g.hand_masks[p] & MONTH_MASK[mo] == MONTH_MASK[mo]] for p in (0, 1)]
        # 2. both players quad -> redeal
        if quads[0] and quads[1]:
            det = {"reason": "BOTH_QUADS", "months": {"F": quads[0], "O": quads[1]}}
            ev.append(("redeal", det))
            g._end(MatgoResult("REDEAL", None, 0, det), ev)
            return g
        # 3. chongtong
        for p in (0, 1):
            if quads[p]:
                g._immediate_win("CHONGTONG", p, ev, {"months": quads[p]})
                return g
        # 4. layout triples -> INITIAL piles
        piles = {}
        for mo in range(1, 13):
            if (lay & MONTH_MASK[mo]).bit_count() == 3:
                piles[mo] = ("INITIAL", -1)
                ev.append(("pile", {"month": mo, "cards": codes(lay & MONTH_MASK[mo]), "origin": "INITIAL"}))
        g._piles = piles
        return g

    @classmethod
    def from_position(cls, *, hands: Mapping[Seat, Sequence[str]], layout: Sequence[str] = (),
                      piles: Sequence[tuple[Sequence[str], str, Seat | None]] = (),
                      captured: Mapping[Seat, Sequence[str]] | None = None, turn: int = 1,
                      first: Seat = "F", ppuks: Mapping[Seat, int] | None = None,
                      go_count: Mapping[Seat, int] | None = None,
                      score_at_last_go: Mapping[Seat, int] | None = None,
                      rules: MatgoRules = MatgoRules()) -> MatgoGame:
        """A position at the start of ``turn`` (phase PLAY), for tests, puzzles and analysis.

        ``layout`` = loose layout cards (at most two per month), ``piles`` = ``(three cards,
        "INITIAL" | "PPUK", maker)``. Every card not placed is in the stock: the counts must be
        consistent (``21 - turn`` stock cards, each seat's hand = 10 minus its turns taken).
        No setup check is applied.
        """
        if not isinstance(rules, MatgoRules):
            raise ValueError(f"rules must be a MatgoRules, got {type(rules).__name__}")
        if not isinstance(turn, int) or not 1 <= turn <= 20:
            raise ValueError(f"turn must be 1..20, got {turn!r}")
        g = cls()
        g._set_rules(rules)
        g._first = _seat_index(first, "first")
        g.turn = turn
        g.mover = g._first if turn % 2 == 1 else 1 - g._first
        g._stock_left = 21 - turn
        captured = captured or {}
        used = 0

        def take(cards: Sequence[str], what: str) -> int:
            nonlocal used
            m = strict_mask(cards, what)
            if m & used:
                raise CardError(f"{what}: card(s) placed twice: {', '.join(codes(m & used))}")
            used |= m
            return m

        for s in SEATS:
            p = _SEAT_INDEX[s]
            g.hand_masks[p] = take(hands.get(s, ()), f"{s}'s hand")
            g.captured_masks[p] = take(captured.get(s, ()), f"{s}'s captured")
            taken = (turn - 1 + (1 if p == g._first else 0)) // 2
            if g.hand_masks[p].bit_count() != 10 - taken:
                raise ValueError(f"{s}'s hand must have {10 - taken} cards at turn {turn}, "
                                 f"got {g.hand_masks[p].bit_count()}")
        lay = take(layout, "layout")
        for mo in range(1, 13):
            if (lay & MONTH_MASK[mo]).bit_count() > 2:
                raise ValueError(f"layout: three or more loose cards of month {mo} (use a pile)")
        pile_map: dict[int, tuple[str, int]] = {}
        for entry in piles:
            cards, origin, maker = entry
            m = take(cards, "pile")
            months = {MONTH[i] for i in bits(m)}
            if m.bit_count() != 3 or len(months) != 1:
                raise ValueError(f"a pile is three cards of one month, got {list(cards)}")
            mo = months.pop()
            if lay & MONTH_MASK[mo]:
                raise ValueError(f"month {mo} has both loose cards and a pile")
            if origin == "INITIAL":
                if maker is not None:
                    raise ValueError("an INITIAL pile has no maker")
                pile_map[mo] = ("INITIAL", -1)
            elif origin == "PPUK":
                pile_map[mo] = ("PPUK", _seat_index(maker, "pile maker"))
            else:
                raise ValueError(f"pile origin must be 'INITIAL' or 'PPUK', got {origin!r}")
            lay |= m
        g.layout_mask = lay
        g._piles = pile_map
        if (ALL & ~used).bit_count() != g._stock_left:
            raise ValueError(f"at turn {turn} the stock holds {g._stock_left} cards, but "
                             f"{(ALL & ~used).bit_count()} cards are not placed")
        for name, src, dst in (("ppuks", ppuks, g._ppuk), ("go_count", go_count, g._go),
                               ("score_at_last_go", score_at_last_go, g._last_go)):
            for s, v in (src or {}).items():
                if not isinstance(v, int) or v < 0:
                    raise ValueError(f"{name}[{s!r}] must be an int >= 0, got {v!r}")
                dst[_seat_index(s, name)] = v
        return g

    def clone(self) -> MatgoGame:
        """An independent copy (cheap: ints, tuples and three two-element lists)."""
        g = object.__new__(MatgoGame)
        g.rules = self.rules
        g.setup_events = self.setup_events
        g._first = self._first
        g.mover = self.mover
        g.turn = self.turn
        g.phase = self.phase
        g.hand_masks = self.hand_masks[:]
        g.captured_masks = self.captured_masks[:]
        g.layout_mask = self.layout_mask
        g._piles = self._piles  # never mutated in place (copy on write)
        g._ppuk = self._ppuk[:]
        g._go = self._go[:]
        g._last_go = self._last_go[:]
        g._stock_left = self._stock_left
        g.result = self.result
        g._last_from = self._last_from
        g._sseul_by_layout = self._sseul_by_layout
        g._a = self._a
        g._am = self._am
        g._ak = self._ak
        g.pending_mask = self.pending_mask
        g.options_mask = self.options_mask
        g._b = self._b
        g._owed = self._owed
        g._lay0 = self._lay0
        g._capa = self._capa
        g._capb = self._capb
        g._made_ppuk = self._made_ppuk
        g._dscore = self._dscore
        return g

    def determinize(self, seat: Seat, opponent_hand: Sequence[str]) -> MatgoGame:
        """A clone in which the opponent of ``seat`` holds ``opponent_hand`` (same size, drawn
        from ``unseen(seat)``): for information-set search. The stock is never stored, so
        nothing else changes; the remaining unseen cards are the stock."""
        p = _seat_index(seat)
        m = strict_mask(opponent_hand, "determinize")
        unseen = self._unseen_mask(p)
        if m & ~unseen:
            raise ValueError(f"determinize: {', '.join(codes(m & ~unseen))} already seen by {seat}")
        if m.bit_count() != self.hand_masks[1 - p].bit_count():
            raise ValueError(f"determinize: the opponent holds {self.hand_masks[1 - p].bit_count()} cards, "
                             f"got {m.bit_count()}")
        g = self.clone()
        g.hand_masks[1 - p] = m
        return g

    # ---- public state ----

    @property
    def to_move(self) -> Seat:
        """The seat to act (in DECIDE: the seat deciding; after the game: the last mover)."""
        return SEATS[self.mover]

    @property
    def first(self) -> Seat:
        return SEATS[self._first]

    @property
    def hands(self) -> dict[Seat, list[str]]:
        """Both hands (engine truth: never publish the opponent's)."""
        return {"F": codes(self.hand_masks[0]), "O": codes(self.hand_masks[1])}

    def hand(self, seat: Seat) -> list[str]:
        return codes(self.hand_masks[_seat_index(seat)])

    @property
    def layout(self) -> list[LayoutStack]:
        """The layout by month: loose cards of a month grouped, piles with origin and maker."""
        out = []
        lay = self.layout_mask
        for mo in range(1, 13):
            m = lay & MONTH_MASK[mo]
            if m:
                pile = self._piles.get(mo)
                if pile is None:
                    out.append(LayoutStack(mo, tuple(codes(m)), "LOOSE", None))
                else:
                    out.append(LayoutStack(mo, tuple(codes(m)), pile[0],  # type: ignore[arg-type]
                                           None if pile[1] < 0 else SEATS[pile[1]]))
        return out

    @property
    def layout_cards(self) -> list[str]:
        return codes(self.layout_mask)

    @property
    def pending(self) -> list[str]:
        """Face-up cards of the current turn not yet captured (pending pair, played card
        waiting for a choice, flipped card waiting for a choice)."""
        return codes(self.pending_mask)

    @property
    def options(self) -> list[str]:
        """The two layout cards to choose from (CHOOSE_A / CHOOSE_B), else []."""
        return codes(self.options_mask) if self.phase is _P_CA or self.phase is _P_CB else []

    @property
    def captured(self) -> dict[Seat, list[str]]:
        """Captured piles, in code order."""
        return {"F": codes(self.captured_masks[0]), "O": codes(self.captured_masks[1])}

    @property
    def ppuks(self) -> dict[Seat, int]:
        return {"F": self._ppuk[0], "O": self._ppuk[1]}

    @property
    def go_count(self) -> dict[Seat, int]:
        return {"F": self._go[0], "O": self._go[1]}

    @property
    def score_at_last_go(self) -> dict[Seat, int]:
        return {"F": self._last_go[0], "O": self._last_go[1]}

    @property
    def stock_left(self) -> int:
        """20 minus the stock cards flipped so far."""
        return self._stock_left

    @property
    def seen(self) -> set[str]:
        """Every card the engine has registered (hands, layout, in transit, captured)."""
        return set(codes(self._known()))

    @property
    def is_over(self) -> bool:
        return self.result is not None

    def scores(self) -> dict[Seat, int]:
        """Current combination totals of both captured piles."""
        return {"F": fast_total(self.captured_masks[0]), "O": fast_total(self.captured_masks[1])}

    def score_total(self, seat: Seat) -> int:
        """The combination total of ``seat``'s captured pile (fast: no :class:`Score` built)."""
        return fast_total(self.captured_masks[_seat_index(seat)])

    def score_of(self, seat: Seat) -> Score:
        return mask_score(self.captured_masks[_seat_index(seat)])

    def _known(self) -> int:
        return self.hand_masks[0] | self.hand_masks[1] | self.layout_mask | self.pending_mask | self.captured_masks[0] | self.captured_masks[1]

    def _unseen_mask(self, p: int) -> int:
        return ALL & ~(self.hand_masks[p] | self.layout_mask | self.pending_mask | self.captured_masks[0] | self.captured_masks[1])

    def unseen(self, seat: Seat) -> list[str]:
        """Cards ``seat`` has not seen: the opponent's hand plus the rest of the stock."""
        return codes(self._unseen_mask(_seat_index(seat)))

    def stock_candidates(self) -> list[str]:
        """Cards the engine has not registered: what the stock can hold."""
        return codes(ALL & ~self._known())

    def view(self, seat: Seat) -> MatgoView:
        """What ``seat`` knows. Never contains the opponent's hand."""
        p = _seat_index(seat)
        unseen = self._unseen_mask(p)
        return MatgoView(
            seat=SEATS[p], hand=tuple(codes(self.hand_masks[p])),
            opponent_hand_size=self.hand_masks[1 - p].bit_count(), layout=tuple(self.layout),
            pending=tuple(codes(self.pending_mask)), options=tuple(self.options),
            captured={"F": tuple(codes(self.captured_masks[0])), "O": tuple(codes(self.captured_masks[1]))},
            seen=frozenset(codes(ALL & ~unseen)), unseen=tuple(codes(unseen)),
            stock_left=self._stock_left, scores=self.scores(), go_count=self.go_count,
            score_at_last_go=self.score_at_last_go, ppuks=self.ppuks, turn=self.turn,
            phase=self.phase, to_move=SEATS[self.mover], first=SEATS[self._first],
            result=self.result,
        )

    def state_key(self) -> tuple:
        """A hashable snapshot of the whole state (equal keys = equal games)."""
        return (self.rules, self._first, self.mover, self.turn, self.phase, tuple(self.hand_masks),
                tuple(self.captured_masks), self.layout_mask, tuple(sorted(self._piles.items())), tuple(self._ppuk),
                tuple(self._go), tuple(self._last_go), self._stock_left, None if self.result is None
                else (self.result.kind, self.result.winner, self.result.payment_points),
                self._a, self._am, self._ak, self.pending_mask, self.options_mask, self._b, self._owed, self._lay0,
                self._capa, self._capb, self._made_ppuk, self._dscore)

    def __repr__(self) -> str:
        return (f"MatgoGame(turn={self.turn}, phase={self.phase}, to_move={SEATS[self.mover]}, "
                f"hands={self.hands}, layout={self.layout_cards}, pending={self.pending}, "
                f"captured={self.captured}, result={self.result})")

    # ---- moves ----

    def legal(self) -> list[Move]:
        """The legal moves. In FLIP: a :class:`Flip` for every card the engine has not
        registered (the cards that can be in the stock); the caller supplies the real one.
        In OVER: []."""
        ph = self.phase
        if ph is _P_PLAY:
            return expand(self.hand_masks[self.mover], _PLAY_TABLES)
        if ph is _P_FLIP:
            return expand(ALL & ~(self.hand_masks[0] | self.hand_masks[1] | self.layout_mask | self.pending_mask | self.captured_masks[0]
                                    | self.captured_masks[1]), _FLIP_TABLES)
        if ph is _P_CA or ph is _P_CB:
            m = self.options_mask
            low = m & -m
            return [CHOOSE_MOVES[low.bit_length() - 1], CHOOSE_MOVES[(m ^ low).bit_length() - 1]]
        if ph is _P_DEC:
            return [STOP, GO]
        return []

    def legal_moves(self, seat: Seat) -> list[Move]:
        """:meth:`legal` when ``seat`` is to act (and the game is not over), else ``[]``."""
        if self.result is not None or SEATS[self.mover] != seat:
            _seat_index(seat)  # an unknown seat is an error, not "not its move"
            return []
        return self.legal()

    def verify(self, move: Any, seat: Seat | None = None) -> str | None:
        """``None`` if ``move`` is legal now (for ``seat``, if given), else the reason."""
        if self.result is not None:
            return f"the game is over ({self.result.kind})"
        who = SEATS[self.mover]
        if seat is not None and seat != who:
            return f"it is {who}'s move, not {seat!r}'s"
        ph = self.phase
        t = type(move)
        if t not in _MOVE_TYPES:
            return f"not a Matgo move: {move!r}"
        if t is not _EXPECTED[ph]:
            wants = {_P_PLAY: f"{who} must play a hand card (Play)",
                     _P_CA: f"{who} must choose one of {', '.join(codes(self.options_mask))} (Choose)",
                     _P_FLIP: "waiting for the stock card (Flip)",
                     _P_CB: f"{who} must choose one of {', '.join(codes(self.options_mask))} (Choose)",
                     _P_DEC: f"{who} must decide Stop or Go (Decide)"}[ph]
            return f"{wants}, not {t.__name__}"
        if t is Decide:
            return None if type(move.go) is bool else f"Decide.go must be True or False, got {move.go!r}"
        card = move.card
        i = INDEX.get(card) if isinstance(card, str) else None
        if i is None:
            return f"{card!r} is not a Hwatu card code"
        bit = 1 << i
        if ph is _P_PLAY:
            return None if self.hand_masks[self.mover] & bit else f"{card} is not in {who}'s hand"
        if ph is _P_FLIP:
            if self._known() & bit:
                return f"{card} is already registered ({self._where(bit)}), it cannot be the stock card"
            return None
        if self.options_mask & bit:
            return None
        return f"choose one of {', '.join(codes(self.options_mask))}"

    def _where(self, bit: int) -> str:
        for s in (0, 1):
            if self.hand_masks[s] & bit:
                return f"in {SEATS[s]}'s hand"
            if self.captured_masks[s] & bit:
                return f"captured by {SEATS[s]}"
        if self.layout_mask & bit:
            return "on the layout"
        if self.pending_mask & bit:
            return "played this turn"
        return "unknown"

    def default_move(self) -> Move:
        """The timeout move (§8): the lowest hand card; the more valuable option (ties: lowest
        code); STOP. Not defined for FLIP (the dealer turns the card) nor after the game."""
        ph = self.phase
        if ph is _P_PLAY:
            return PLAY_MOVES[low(self.hand_masks[self.mover])]
        if ph is _P_CA or ph is _P_CB:
            m = self.options_mask
            a = low(m)
            b = low(m ^ (1 << a))
            return CHOOSE_MOVES[b if VALUE[b] > VALUE[a] else a]
        if ph is _P_DEC:
            return STOP
        if ph is _P_FLIP:
            raise ValueError("no default for FLIP: the stock card is turned over by the dealer")
        raise ValueError("the game is over")

    def apply(self, move: Move) -> list[Event]:
        """Apply a legal move; return the events. Raises ValueError(reason) if illegal
        (the game is unchanged)."""
        reason = self.verify(move)
        if reason is not None:
            raise ValueError(reason)
        ev: list[Event] = []
        self.step(move, ev)
        return ev

    # ---- rule implementation ----

    def step(self, move: Move, ev: list[Event] | None = None) -> None:
        """Fast path for search: apply ``move`` WITHOUT verification (``move`` must come from
        :meth:`legal`), appending the events to ``ev`` when given. :meth:`apply` is this after
        :meth:`verify`."""
        ph = self.phase
        if ph is _P_PLAY:
            self._play(INDEX[move.card], ev)  # type: ignore[union-attr]
        elif ph is _P_FLIP:
            self._flip(INDEX[move.card], ev)  # type: ignore[union-attr]
        elif ph is _P_CA:
            i = INDEX[move.card]  # type: ignore[union-attr]
            bit = 1 << i
            self.layout_mask &= ~bit
            self.pending_mask |= bit
            self._capa = self._am
            self.options_mask = 0
            self.phase = _P_FLIP
            if ev is not None:
                ev.append(("pending", {"seat": SEATS[self.mover], "cards": codes(self.pending_mask)}))
        elif ph is _P_CB:
            i = INDEX[move.card]  # type: ignore[union-attr]
            bit = 1 << i
            self.layout_mask &= ~bit
            if ev is not None:
                ev.append(("paired", {"seat": SEATS[self.mover], "cards": [CODES[self._b], CODES[i]]}))
            self.pending_mask |= bit
            self._capb = MONTH[i]
            self.options_mask = 0
            self._finish(ev)
        elif ph is _P_DEC:
            p = self.mover
            if move.go:  # type: ignore[union-attr]
                self._go[p] += 1
                self._last_go[p] = self._dscore
                if ev is not None:
                    ev.append(("go", {"seat": SEATS[p], "go_count": self._go[p], "score": self._dscore}))
                self._advance(ev)
            else:
                self._stop(p, False, ev)
        else:
            raise ValueError("the game is over")

    def _triple_units(self, mo: int, p: int) -> tuple[int, str, int]:
        pile = self._piles.get(mo)
        if pile is None:
            return 1, "LOOSE", -1
        piles = dict(self._piles)
        del piles[mo]
        self._piles = piles
        origin, maker = pile
        if origin == "PPUK":
            if self.rules.ppuk_capture_steal == "ANY_PPUK_2" or maker == p:
                return 2, origin, maker
            return 1, origin, maker
        return 1, origin, maker

    def _play(self, i: int, ev: list[Event] | None) -> None:
        p = self.mover
        bit = 1 << i
        self.hand_masks[p] &= ~bit
        mo = MONTH[i]
        self._a = i
        self._am = mo
        lay = self.layout_mask
        self._lay0 = lay != 0
        ml = lay & MONTH_MASK[mo]
        k = ml.bit_count()
        self._ak = k
        if ev is not None:
            ev.append(("played", {"seat": SEATS[p], "card": CODES[i], "matches": k}))
        if k == 0:
            self.layout_mask = lay | bit
            self.phase = _P_FLIP
            if ev is not None:
                ev.append(("placed", {"seat": SEATS[p], "card": CODES[i], "step": "A"}))
        elif k == 1:
            self.layout_mask = lay & ~ml
            self.pending_mask = bit | ml
            self._capa = mo
            self.phase = _P_FLIP
            if ev is not None:
                ev.append(("pending", {"seat": SEATS[p], "cards": codes(bit | ml)}))
        elif k == 2:
            self.pending_mask = bit
            self.options_mask = ml
            self.phase = _P_CA
            if ev is not None:
                ev.append(("choice", {"seat": SEATS[p], "step": "A", "card": CODES[i], "options": codes(ml)}))
        else:
            self.layout_mask = lay & ~ml
            self.pending_mask = bit | ml
            self._capa = mo
            units, origin, maker = self._triple_units(mo, p)
            self._owed += units
            self.phase = _P_FLIP
            if ev is not None:
                ev.append(("triple", {"seat": SEATS[p], "month": mo, "cards": codes(bit | ml), "origin": origin,
                                      "maker": None if maker < 0 else SEATS[maker], "units": units}))

    def _bonus(self, kind: str, ev: list[Event] | None) -> None:
        applied = self.turn < self._last_from
        if applied:
            self._owed += 1
        if ev is not None:
            ev.append((kind, {"seat": SEATS[self.mover], "units": 1 if applied else 0, "applied": applied}))

    def _flip(self, j: int, ev: list[Event] | None) -> None:
        p = self.mover
        bj = 1 << j
        self._b = j
        self._stock_left -= 1
        mo = MONTH[j]
        if ev is not None:
            ev.append(("flipped", {"seat": SEATS[p], "card": CODES[j]}))
        if mo == self._am:
            ak = self._ak
            if ak == 1:  # Ppuk: the three stay as a pile
                cards = self.pending_mask | bj
                self.layout_mask |= cards
                self.pending_mask = 0
                self._capa = 0
                piles = dict(self._piles)
                piles[mo] = ("PPUK", p)
                self._piles = piles
                self._ppuk[p] += 1
                self._made_ppuk = True
                if ev is not None:
                    ev.append(("ppuk", {"seat": SEATS[p], "month": mo, "cards": codes(cards), "count": self._ppuk[p]}))
            elif ak == 2:  # Ttadak: take all four
                ml = self.layout_mask & MONTH_MASK[mo]
                self.layout_mask &= ~ml
                self.pending_mask |= bj | ml
                self._capb = mo
                self._bonus("ttadak", ev)
            else:  # ak == 0, Chok
                ba = 1 << self._a
                self.layout_mask &= ~ba
                self.pending_mask |= bj | ba
                self._capb = mo
                self._bonus("chok", ev)
        else:
            ml = self.layout_mask & MONTH_MASK[mo]
            k = ml.bit_count()
            if k == 0:
                self.layout_mask |= bj
                if ev is not None:
                    ev.append(("placed", {"seat": SEATS[p], "card": CODES[j], "step": "B"}))
            elif k == 1:
                self.layout_mask &= ~ml
                self.pending_mask |= bj | ml
                self._capb = mo
                if ev is not None:
                    ev.append(("paired", {"seat": SEATS[p], "cards": codes(bj | ml)}))
            elif k == 2:
                self.pending_mask |= bj
                self.options_mask = ml
                self.phase = _P_CB
                if ev is not None:
                    ev.append(("choice", {"seat": SEATS[p], "step": "B", "card": CODES[j], "options": codes(ml)}))
                return
            else:
                self.layout_mask &= ~ml
                self.pending_mask |= bj | ml
                self._capb = mo
                units, origin, maker = self._triple_units(mo, p)
                self._owed += units
                if ev is not None:
                    ev.append(("triple", {"seat": SEATS[p], "month": mo, "cards": codes(bj | ml), "origin": origin,
                                          "maker": None if maker < 0 else SEATS[maker], "units": units}))
        self._finish(ev)

    def _finish(self, ev: list[Event] | None) -> None:
        """Step C (§3.3): captures, Sseul, steals, three Ppuks, score check."""
        p = self.mover
        o = 1 - p
        pend = self.pending_mask
        if pend:
            self.captured_masks[p] |= pend
            self.pending_mask = 0
            if ev is not None:
                ev.append(("captured", {"seat": SEATS[p], "cards": codes(pend)}))
        if self._sseul_by_layout:
            sseul = self._lay0 and not self.layout_mask
        else:
            sseul = bool(self._capa and self._capb and self._capa != self._capb)
        if sseul:
            self._bonus("sseul", ev)
        owed = total_owed = self._owed
        if owed:
            self._owed = 0
            src = self.captured_masks[o]
            moved = 0
            units = 0
            while owed > 0:
                pool = src & JUNK
                if pool:
                    low = pool & -pool
                    owed -= 1
                    units += 1
                else:
                    pool = src & DOUBLE_JUNK
                    if not pool:
                        break
                    low = pool & -pool
                    owed -= 2
                    units += 2
                src ^= low
                moved |= low
            self.captured_masks[o] = src
            self.captured_masks[p] |= moved
            if ev is not None:
                ev.append(("steal", {"from": SEATS[o], "to": SEATS[p], "owed": total_owed,
                                     "cards": codes(moved), "units": units}))
        if self._made_ppuk and self._ppuk[p] >= 3:
            self._immediate_win("THREE_PPUK", p, ev, {"ppuks": self._ppuk[p], "turn": self.turn})
            return
        s = fast_total(self.captured_masks[p])
        if ev is not None:
            ev.append(("score", {"seat": SEATS[p], "total": s, "F": s if p == 0 else fast_total(self.captured_masks[0]),
                                 "O": s if p == 1 else fast_total(self.captured_masks[1])}))
        if (s > self._last_go[p]) if self._go[p] else (s >= 7):
            self._dscore = s
            if ev is not None:
                ev.append(("decision", {"seat": SEATS[p], "score": s, "go_count": self._go[p]}))
            if self.turn >= self._last_from:
                self._stop(p, True, ev)
            else:
                self.phase = _P_DEC
            return
        self._advance(ev)

    def _advance(self, ev: list[Event] | None) -> None:
        if self.turn >= 20:
            det = {"scores": self.scores(), "go_count": self.go_count,
                   "next_multiplier": self.rules.nagari_next_multiplier}
            if ev is not None:
                ev.append(("nagari", {}))
            self._end(MatgoResult("NAGARI", None, 0, det), ev)
            return
        self.turn += 1
        self.mover = 1 - self.mover
        self.phase = _P_PLAY
        self._reset_turn()
        if ev is not None:
            ev.append(("turn", {"turn": self.turn, "seat": SEATS[self.mover]}))

    def _stop(self, p: int, auto: bool, ev: list[Event] | None) -> None:
        pay = mask_payment(self.captured_masks[p], self.captured_masks[1 - p], self._go[p])
        if ev is not None:
            ev.append(("stop", {"seat": SEATS[p], "score": pay.points, "auto": auto}))
        det = {"scores": self.scores(), "go_count": self.go_count, "points": pay.points,
               "go_adjusted": pay.go_adjusted, "multipliers": list(pay.multipliers),
               "loser": SEATS[1 - p], "turn": self.turn, "auto": auto}
        self._end(MatgoResult("STOP", SEATS[p], pay.payment_points, det), ev)

    def _immediate_win(self, kind: str, p: int, ev: list[Event] | None, extra: dict[str, Any]) -> None:
        mult: list[str] = []
        if self.rules.immediate_win_multipliers == "APPLY":
            mult = mask_multipliers(self.captured_masks[p], self.captured_masks[1 - p])
        pts = 5 << len(mult)
        if ev is not None:
            ev.append(("immediate_win", {"kind": kind, "seat": SEATS[p], "payment_points": pts}))
        det = {"points": 5, "multipliers": mult, "scores": self.scores(), "go_count": self.go_count,
               "turn": self.turn, **extra}
        self._end(MatgoResult(kind, SEATS[p], pts, det), ev)  # type: ignore[arg-type]

    def _end(self, result: MatgoResult, ev: list[Event] | None) -> None:
        self.result = result
        self.phase = _P_OVER
        self.options_mask = 0
        if ev is not None:
            ev.append(("result", {"kind": result.kind, "winner": result.winner,
                                  "payment_points": result.payment_points}))
