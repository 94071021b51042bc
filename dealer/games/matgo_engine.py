"""Matgo (two-player Go-Stop) rules engine, ``matgo.md``: pure, fast, cloneable.

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

Internally every card is an index 0..47 into :data:`HWATU_48` (code order, ``decks.md`` §2.4)
and every set of cards is an ``int`` bit mask, so :meth:`MatgoGame.clone` is a handful of
attribute copies and scoring is a few ``bit_count`` calls. Public accessors convert to codes.

Seats: ``"F"`` and ``"O"``. The ``first`` seat (``"F"`` by default) takes the odd turns.

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

Speed: search code should use :meth:`MatgoGame.clone`, :meth:`MatgoGame.legal` and
:meth:`MatgoGame.apply` (or :meth:`MatgoGame.step`, the same without events or verification).
For information-set search use :meth:`MatgoGame.view` / :meth:`MatgoGame.unseen` and
:meth:`MatgoGame.determinize`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Union

from dealer.core.cards import HWATU_48, CardError, parse_hwatu

__all__ = [
    "SEATS", "Seat", "other", "MatgoRules", "deal_positions", "STOCK_POSITIONS", "split_deal",
    "Play", "Choose", "Flip", "Decide", "Move", "Phase", "Event", "LayoutStack", "Score",
    "Payment", "MatgoResult", "MatgoView", "MatgoGame", "score", "payment", "card_value", "protection_units",
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

_OPTION_VALUES: dict[str, tuple[Any, ...]] = {
    "deal_pattern": ("5_5_4", "ROUND_ROBIN"),
    "ppuk_capture_steal": ("ANY_PPUK_2", "OWN_2_OTHER_1"),
    "immediate_win_multipliers": ("NONE", "APPLY"),
    "nagari_next_multiplier": (1, 2),
    "sseul_rule": ("LAYOUT_CLEARED", "TWO_MONTHS_CAPTURED"),
    "last_turn": ("DEAL_FINAL", "EACH_PLAYERS_FINAL"),
}


@dataclass(frozen=True, slots=True)
class MatgoRules:
    """The house options of ``matgo.md``; every default is the rulebook default."""

    deal_pattern: Literal["5_5_4", "ROUND_ROBIN"] = "5_5_4"
    ppuk_capture_steal: Literal["ANY_PPUK_2", "OWN_2_OTHER_1"] = "ANY_PPUK_2"
    immediate_win_multipliers: Literal["NONE", "APPLY"] = "NONE"
    nagari_next_multiplier: Literal[1, 2] = 1
    sseul_rule: Literal["LAYOUT_CLEARED", "TWO_MONTHS_CAPTURED"] = "LAYOUT_CLEARED"
    last_turn: Literal["DEAL_FINAL", "EACH_PLAYERS_FINAL"] = "DEAL_FINAL"

    def __post_init__(self) -> None:
        for name, allowed in _OPTION_VALUES.items():
            value = getattr(self, name)
            if value not in allowed or type(value) is not type(allowed[0]):
                raise ValueError(f"MatgoRules.{name} must be one of {list(allowed)}, got {value!r}")


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


# --- card tables ----------------------------------------------------------------------------

_CODES: tuple[str, ...] = HWATU_48
_IDX: dict[str, int] = {c: i for i, c in enumerate(_CODES)}
_MONTH: tuple[int, ...] = tuple(int(c[:2]) for c in _CODES)
_ALL = (1 << 48) - 1


def _mask_of(pred: Any) -> int:
    m = 0
    for i, c in enumerate(_CODES):
        if pred(c):
            m |= 1 << i
    return m


def _mask(codes: Sequence[str]) -> int:
    m = 0
    for c in codes:
        m |= 1 << _IDX[c]
    return m


_MONTH_MASK: tuple[int, ...] = (0,) + tuple(_mask_of(lambda c, m=m: int(c[:2]) == m) for m in range(1, 13))
_G = _mask_of(lambda c: c[2] == "G")
_CUP = 1 << _IDX["09A"]
_A = _mask_of(lambda c: c[2] == "A") & ~_CUP  # animals without the cup
_R = _mask_of(lambda c: c[2] == "R")
_JD = _mask_of(lambda c: c.endswith("JD"))
_J1 = _mask_of(lambda c: c[2] == "J") & ~_JD
_JUNK = _J1 | _JD
_RAIN = 1 << _IDX["12G"]
_GODORI = _mask(["02A", "04A", "08A"])
_RED = _mask(["01R", "02R", "03R"])
_BLUE = _mask(["06R", "09R", "10R"])
_PLAIN = _mask(["04R", "05R", "07R"])
#: value order for auto-play (§1, §8): G > A > R > double junk > junk.
_VALUE: tuple[int, ...] = tuple(
    4 if c[2] == "G" else 3 if c[2] == "A" else 2 if c[2] == "R" else 1 if c.endswith("JD") else 0
    for c in _CODES
)


def card_value(code: str) -> int:
    """Auto-play value of a card (§1): G 4, A 3, R 2, double junk 1, junk 0."""
    return _VALUE[_IDX[parse_hwatu(code).code]]


def _byte_tables(items: Sequence[Any]) -> tuple[tuple[tuple[Any, ...], ...], ...]:
    """For each of the 6 bytes of a 48-bit mask: byte value -> the items of its set bits."""
    return tuple(
        tuple(tuple(items[8 * k + i] for i in range(8) if v >> i & 1) for v in range(256))
        for k in range(6)
    )


def _expand(m: int, tables: tuple[tuple[tuple[Any, ...], ...], ...]) -> list[Any]:
    """Items of the set bits of ``m``, in bit (= code) order."""
    t0, t1, t2, t3, t4, t5 = tables
    return [*t0[m & 255], *t1[m >> 8 & 255], *t2[m >> 16 & 255], *t3[m >> 24 & 255],
            *t4[m >> 32 & 255], *t5[m >> 40 & 255]]


_CODE_TABLES = _byte_tables(_CODES)


def _codes(m: int) -> list[str]:
    """Codes of a mask, in code order."""
    return _expand(m, _CODE_TABLES)


def _low(m: int) -> int:
    return (m & -m).bit_length() - 1


# --- moves ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Play:
    """Step A: play ``card`` from the hand of the seat to move."""

    card: str


@dataclass(frozen=True, slots=True)
class Choose:
    """Choose which of the two layout cards of the month ``card`` is (step A or step B)."""

    card: str


@dataclass(frozen=True, slots=True)
class Flip:
    """Step B: the stock card the dealer turned over and the scanner registered."""

    card: str


@dataclass(frozen=True, slots=True)
class Decide:
    """Stop (``go=False``) or Go (``go=True``) at a decision point (§6)."""

    go: bool


Move = Union[Play, Choose, Flip, Decide]
Event = tuple[str, dict[str, Any]]

_PLAY = tuple(Play(c) for c in _CODES)
_CHOOSE = tuple(Choose(c) for c in _CODES)
_FLIP = tuple(Flip(c) for c in _CODES)
_PLAY_TABLES = _byte_tables(_PLAY)
_FLIP_TABLES = _byte_tables(_FLIP)
_STOP = Decide(False)
_GO = Decide(True)


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


# --- scoring (§5) and payment (§7) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Score:
    """A combination score (§5). ``brights``/``animals``/``ribbons``/``junk`` are points
    (animals include Godori, ribbons the sets). ``cup_as`` is how ``09A`` was classified
    (§5.5), ``None`` when it is not among the cards. ``animal_count`` and ``junk_units``
    follow that classification."""

    brights: int
    animals: int
    ribbons: int
    junk: int
    total: int
    cup_as: Literal["animal", "junk"] | None
    junk_units: int
    animal_count: int
    bright_count: int
    ribbon_count: int
    godori: bool


def _bright_points(m: int) -> int:
    n = (m & _G).bit_count()
    if n == 5:
        return 15
    if n == 4:
        return 4
    if n == 3:
        return 2 if m & _RAIN else 3
    return 0


def _ribbon_points(m: int) -> int:
    r = (m & _R).bit_count()
    p = r - 4 if r >= 5 else 0
    if m & _RED == _RED:
        p += 3
    if m & _BLUE == _BLUE:
        p += 3
    if m & _PLAIN == _PLAIN:
        p += 3
    return p


def _total(m: int) -> int:
    """Combination score total of a captured mask (fast path of :func:`score`)."""
    n = (m & _G).bit_count()
    if n == 5:
        t = 15
    elif n == 4:
        t = 4
    elif n == 3:
        t = 2 if m & _RAIN else 3
    else:
        t = 0
    if m & _GODORI == _GODORI:
        t += 5
    r = (m & _R).bit_count()
    if r >= 5:
        t += r - 4
    if m & _RED == _RED:
        t += 3
    if m & _BLUE == _BLUE:
        t += 3
    if m & _PLAIN == _PLAIN:
        t += 3
    a = (m & _A).bit_count()
    u = (m & _J1).bit_count() + 2 * (m & _JD).bit_count()
    if m & _CUP:
        as_animal = (a - 3 if a >= 4 else 0) + (u - 9 if u >= 10 else 0)
        as_junk = (a - 4 if a >= 5 else 0) + (u - 7 if u >= 8 else 0)
        return t + (as_animal if as_animal >= as_junk else as_junk)
    return t + (a - 4 if a >= 5 else 0) + (u - 9 if u >= 10 else 0)


def _score(m: int) -> Score:
    b = _bright_points(m)
    a = (m & _A).bit_count()
    u = (m & _J1).bit_count() + 2 * (m & _JD).bit_count()
    god = m & _GODORI == _GODORI
    cup_as: Literal["animal", "junk"] | None = None
    if m & _CUP:
        as_animal = (a - 3 if a >= 4 else 0) + (u - 9 if u >= 10 else 0)
        as_junk = (a - 4 if a >= 5 else 0) + (u - 7 if u >= 8 else 0)
        if as_animal >= as_junk:
            cup_as, a = "animal", a + 1
        else:
            cup_as, u = "junk", u + 2
    ap = (a - 4 if a >= 5 else 0) + (5 if god else 0)
    rp = _ribbon_points(m)
    jp = u - 9 if u >= 10 else 0
    return Score(b, ap, rp, jp, b + ap + rp + jp, cup_as, u, a, (m & _G).bit_count(),
                 (m & _R).bit_count(), god)


def _strict_mask(cards: Sequence[str], what: str) -> int:
    if isinstance(cards, str):
        raise CardError(f"{what}: expected a sequence of card codes, got the single string {cards!r}")
    m = 0
    for c in cards:
        i = _IDX.get(c) if isinstance(c, str) else None
        if i is None:
            parse_hwatu(c)  # raises CardError with the reason
            raise CardError(f"{what}: {c!r} is not a Hwatu card")  # pragma: no cover
        if m >> i & 1:
            raise CardError(f"{what}: duplicate card {c}")
        m |= 1 << i
    return m


def score(captured: Sequence[str]) -> Score:
    """Combination score of a captured pile (§5), the cup classified by §5.5."""
    return _score(_strict_mask(captured, "score"))


@dataclass(frozen=True, slots=True)
class Payment:
    """Settlement of a Stop (§7): ``points`` = the stopper's combination score, ``go_adjusted``
    by §7.1, ``multipliers`` applied by §7.2 (``"bright"``, ``"animals"``, ``"junk"``),
    ``payment_points`` = go_adjusted × 2^len(multipliers)."""

    points: int
    go_adjusted: int
    multipliers: list[str]
    payment_points: int


def _loser_protection_units(m: int) -> int:
    """The loser's junk units for the junk multiplier: the cup always counts 2 (§7.2)."""
    return (m & _J1).bit_count() + 2 * (m & _JD).bit_count() + (2 if m & _CUP else 0)


def protection_units(loser_captured: Sequence[str]) -> int:
    """The loser's junk units as the junk multiplier counts them (§7.2: the cup counts 2)."""
    return _loser_protection_units(_strict_mask(loser_captured, "protection_units"))


def _multipliers(win: int, lose: int, s: Score | None = None) -> list[str]:
    s = s or _score(win)
    out = []
    if s.brights > 0 and not lose & _G:
        out.append("bright")
    if s.animal_count >= 7:
        out.append("animals")
    if s.junk > 0 and _loser_protection_units(lose) < 5:
        out.append("junk")
    return out


def _go_adjusted(points: int, go_count: int) -> int:
    if go_count <= 0:
        return points
    if go_count <= 2:
        return points + go_count
    return points << (go_count - 2)


def _payment(win: int, lose: int, go_count: int) -> Payment:
    s = _score(win)
    mult = _multipliers(win, lose, s)
    adj = _go_adjusted(s.total, go_count)
    return Payment(s.total, adj, mult, adj << len(mult))


def payment(stopper_captured: Sequence[str], loser_captured: Sequence[str], go_count: int) -> Payment:
    """Payment points of a Stop (§7.1, §7.2)."""
    w = _strict_mask(stopper_captured, "payment: stopper")
    lo = _strict_mask(loser_captured, "payment: loser")
    if w & lo:
        raise CardError(f"payment: cards in both piles: {', '.join(_codes(w & lo))}")
    if not isinstance(go_count, int) or isinstance(go_count, bool) or go_count < 0:
        raise ValueError(f"payment: go_count must be an int >= 0, got {go_count!r}")
    return _payment(w, lo, go_count)


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
    "rules", "setup_events", "_first", "_mover", "_turn", "_phase", "_hand", "_cap", "_lay",
    "_piles", "_ppuk", "_go", "_last_go", "_stock_left", "_result", "_last_from",
    # transient state of the current turn
    "_a", "_am", "_ak", "_pend", "_opts", "_b", "_owed", "_lay0", "_capa", "_capb",
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
        self._mover = 0
        self._turn = 1
        self._phase = _P_PLAY
        self._hand = [0, 0]
        self._cap = [0, 0]
        self._lay = 0
        self._piles: dict[int, tuple[str, int]] = {}  # month -> (origin, maker index or -1); copy on write
        self._ppuk = [0, 0]
        self._go = [0, 0]
        self._last_go = [0, 0]
        self._stock_left = 20
        self._result: MatgoResult | None = None
        self._last_from = 20
        self._reset_turn()

    def _reset_turn(self) -> None:
        self._a = -1
        self._am = 0
        self._ak = 0
        self._pend = 0
        self._opts = 0
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
        if not isinstance(rules, MatgoRules):
            raise ValueError(f"rules must be a MatgoRules, got {type(rules).__name__}")
        g = cls()
        g.rules = rules
        g._last_from = 19 if rules.last_turn == "EACH_PLAYERS_FINAL" else 20
        g._first = g._mover = _seat_index(first, "first")
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
                m |= 1 << _IDX[code]
            masks.append(m)
        g._hand = [masks[0], masks[1]]
        lay = masks[2]
        g._lay = lay
        ev = g.setup_events
        # 1. layout quad -> redeal
        for mo in range(1, 13):
            if lay & _MONTH_MASK[mo] == _MONTH_MASK[mo]:
                ev.append(("redeal", {"reason": "LAYOUT_QUAD", "month": mo}))
                g._end(MatgoResult("REDEAL", None, 0, {"reason": "LAYOUT_QUAD", "month": mo}), ev)
                return g
        quads = [[mo for mo in range(1, 13) if g._hand[p] & _MONTH_MASK[mo] == _MONTH_MASK[mo]] for p in (0, 1)]
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
            if (lay & _MONTH_MASK[mo]).bit_count() == 3:
                piles[mo] = ("INITIAL", -1)
                ev.append(("pile", {"month": mo, "cards": _codes(lay & _MONTH_MASK[mo]), "origin": "INITIAL"}))
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
        g.rules = rules
        g._last_from = 19 if rules.last_turn == "EACH_PLAYERS_FINAL" else 20
        g._first = _seat_index(first, "first")
        g._turn = turn
        g._mover = g._first if turn % 2 == 1 else 1 - g._first
        g._stock_left = 21 - turn
        captured = captured or {}
        used = 0

        def take(cards: Sequence[str], what: str) -> int:
            nonlocal used
            m = _strict_mask(cards, what)
            if m & used:
                raise CardError(f"{what}: card(s) placed twice: {', '.join(_codes(m & used))}")
            used |= m
            return m

        for s in SEATS:
            p = _SEAT_INDEX[s]
            g._hand[p] = take(hands.get(s, ()), f"{s}'s hand")
            g._cap[p] = take(captured.get(s, ()), f"{s}'s captured")
            taken = (turn - 1 + (1 if p == g._first else 0)) // 2
            if g._hand[p].bit_count() != 10 - taken:
                raise ValueError(f"{s}'s hand must have {10 - taken} cards at turn {turn}, "
                                 f"got {g._hand[p].bit_count()}")
        lay = take(layout, "layout")
        for mo in range(1, 13):
            if (lay & _MONTH_MASK[mo]).bit_count() > 2:
                raise ValueError(f"layout: three or more loose cards of month {mo} (use a pile)")
        pile_map: dict[int, tuple[str, int]] = {}
        for entry in piles:
            cards, origin, maker = entry
            m = take(cards, "pile")
            months = {_MONTH[_low(x)] for x in _bits_list(m)}
            if m.bit_count() != 3 or len(months) != 1:
                raise ValueError(f"a pile is three cards of one month, got {list(cards)}")
            mo = months.pop()
            if lay & _MONTH_MASK[mo]:
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
        g._lay = lay
        g._piles = pile_map
        if (_ALL & ~used).bit_count() != g._stock_left:
            raise ValueError(f"at turn {turn} the stock holds {g._stock_left} cards, but "
                             f"{(_ALL & ~used).bit_count()} cards are not placed")
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
        g._mover = self._mover
        g._turn = self._turn
        g._phase = self._phase
        g._hand = self._hand[:]
        g._cap = self._cap[:]
        g._lay = self._lay
        g._piles = self._piles  # never mutated in place (copy on write)
        g._ppuk = self._ppuk[:]
        g._go = self._go[:]
        g._last_go = self._last_go[:]
        g._stock_left = self._stock_left
        g._result = self._result
        g._last_from = self._last_from
        g._a = self._a
        g._am = self._am
        g._ak = self._ak
        g._pend = self._pend
        g._opts = self._opts
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
        m = _strict_mask(opponent_hand, "determinize")
        unseen = self._unseen_mask(p)
        if m & ~unseen:
            raise ValueError(f"determinize: {', '.join(_codes(m & ~unseen))} already seen by {seat}")
        if m.bit_count() != self._hand[1 - p].bit_count():
            raise ValueError(f"determinize: the opponent holds {self._hand[1 - p].bit_count()} cards, "
                             f"got {m.bit_count()}")
        g = self.clone()
        g._hand[1 - p] = m
        return g

    # ---- public state ----

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def to_move(self) -> Seat:
        """The seat to act (in DECIDE: the seat deciding; after the game: the last mover)."""
        return SEATS[self._mover]

    @property
    def first(self) -> Seat:
        return SEATS[self._first]

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def hands(self) -> dict[Seat, list[str]]:
        """Both hands (engine truth: never publish the opponent's)."""
        return {"F": _codes(self._hand[0]), "O": _codes(self._hand[1])}

    def hand(self, seat: Seat) -> list[str]:
        return _codes(self._hand[_seat_index(seat)])

    @property
    def layout(self) -> list[LayoutStack]:
        """The layout by month: loose cards of a month grouped, piles with origin and maker."""
        out = []
        lay = self._lay
        for mo in range(1, 13):
            m = lay & _MONTH_MASK[mo]
            if m:
                pile = self._piles.get(mo)
                if pile is None:
                    out.append(LayoutStack(mo, tuple(_codes(m)), "LOOSE", None))
                else:
                    out.append(LayoutStack(mo, tuple(_codes(m)), pile[0],  # type: ignore[arg-type]
                                           None if pile[1] < 0 else SEATS[pile[1]]))
        return out

    @property
    def layout_cards(self) -> list[str]:
        return _codes(self._lay)

    @property
    def pending(self) -> list[str]:
        """Face-up cards of the current turn not yet captured (pending pair, played card
        waiting for a choice, flipped card waiting for a choice)."""
        return _codes(self._pend)

    @property
    def options(self) -> list[str]:
        """The two layout cards to choose from (CHOOSE_A / CHOOSE_B), else []."""
        return _codes(self._opts) if self._phase is _P_CA or self._phase is _P_CB else []

    @property
    def captured(self) -> dict[Seat, list[str]]:
        """Captured piles, in code order."""
        return {"F": _codes(self._cap[0]), "O": _codes(self._cap[1])}

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
        return set(_codes(self._known()))

    @property
    def result(self) -> MatgoResult | None:
        return self._result

    @property
    def is_over(self) -> bool:
        return self._result is not None

    def scores(self) -> dict[Seat, int]:
        """Current combination totals of both captured piles."""
        return {"F": _total(self._cap[0]), "O": _total(self._cap[1])}

    def score_of(self, seat: Seat) -> Score:
        return _score(self._cap[_seat_index(seat)])

    def _known(self) -> int:
        return self._hand[0] | self._hand[1] | self._lay | self._pend | self._cap[0] | self._cap[1]

    def _unseen_mask(self, p: int) -> int:
        return _ALL & ~(self._hand[p] | self._lay | self._pend | self._cap[0] | self._cap[1])

    def unseen(self, seat: Seat) -> list[str]:
        """Cards ``seat`` has not seen: the opponent's hand plus the rest of the stock."""
        return _codes(self._unseen_mask(_seat_index(seat)))

    def stock_candidates(self) -> list[str]:
        """Cards the engine has not registered: what the stock can hold."""
        return _codes(_ALL & ~self._known())

    def view(self, seat: Seat) -> MatgoView:
        """What ``seat`` knows. Never contains the opponent's hand."""
        p = _seat_index(seat)
        unseen = self._unseen_mask(p)
        return MatgoView(
            seat=SEATS[p], hand=tuple(_codes(self._hand[p])),
            opponent_hand_size=self._hand[1 - p].bit_count(), layout=tuple(self.layout),
            pending=tuple(_codes(self._pend)), options=tuple(self.options),
            captured={"F": tuple(_codes(self._cap[0])), "O": tuple(_codes(self._cap[1]))},
            seen=frozenset(_codes(_ALL & ~unseen)), unseen=tuple(_codes(unseen)),
            stock_left=self._stock_left, scores=self.scores(), go_count=self.go_count,
            score_at_last_go=self.score_at_last_go, ppuks=self.ppuks, turn=self._turn,
            phase=self._phase, to_move=SEATS[self._mover], first=SEATS[self._first],
            result=self._result,
        )

    def state_key(self) -> tuple:
        """A hashable snapshot of the whole state (equal keys = equal games)."""
        return (self.rules, self._first, self._mover, self._turn, self._phase, tuple(self._hand),
                tuple(self._cap), self._lay, tuple(sorted(self._piles.items())), tuple(self._ppuk),
                tuple(self._go), tuple(self._last_go), self._stock_left, None if self._result is None
                else (self._result.kind, self._result.winner, self._result.payment_points),
                self._a, self._am, self._ak, self._pend, self._opts, self._b, self._owed, self._lay0,
                self._capa, self._capb, self._made_ppuk, self._dscore)

    def __repr__(self) -> str:
        return (f"MatgoGame(turn={self._turn}, phase={self._phase}, to_move={SEATS[self._mover]}, "
                f"hands={self.hands}, layout={self.layout_cards}, pending={self.pending}, "
                f"captured={self.captured}, result={self._result})")

    # ---- moves ----

    def legal(self) -> list[Move]:
        """The legal moves. In FLIP: a :class:`Flip` for every card the engine has not
        registered (the cards that can be in the stock); the caller supplies the real one.
        In OVER: []."""
        ph = self._phase
        if ph is _P_PLAY:
            return _expand(self._hand[self._mover], _PLAY_TABLES)
        if ph is _P_FLIP:
            return _expand(_ALL & ~(self._hand[0] | self._hand[1] | self._lay | self._pend | self._cap[0]
                                    | self._cap[1]), _FLIP_TABLES)
        if ph is _P_CA or ph is _P_CB:
            m = self._opts
            low = m & -m
            return [_CHOOSE[low.bit_length() - 1], _CHOOSE[(m ^ low).bit_length() - 1]]
        if ph is _P_DEC:
            return [_STOP, _GO]
        return []

    def verify(self, move: Any, seat: Seat | None = None) -> str | None:
        """``None`` if ``move`` is legal now (for ``seat``, if given), else the reason."""
        if self._result is not None:
            return f"the game is over ({self._result.kind})"
        who = SEATS[self._mover]
        if seat is not None and seat != who:
            return f"it is {who}'s move, not {seat!r}'s"
        ph = self._phase
        t = type(move)
        if t not in _MOVE_TYPES:
            return f"not a Matgo move: {move!r}"
        if t is not _EXPECTED[ph]:
            wants = {_P_PLAY: f"{who} must play a hand card (Play)",
                     _P_CA: f"{who} must choose one of {', '.join(_codes(self._opts))} (Choose)",
                     _P_FLIP: "waiting for the stock card (Flip)",
                     _P_CB: f"{who} must choose one of {', '.join(_codes(self._opts))} (Choose)",
                     _P_DEC: f"{who} must decide Stop or Go (Decide)"}[ph]
            return f"{wants}, not {t.__name__}"
        if t is Decide:
            return None if type(move.go) is bool else f"Decide.go must be True or False, got {move.go!r}"
        card = move.card
        i = _IDX.get(card) if isinstance(card, str) else None
        if i is None:
            return f"{card!r} is not a Hwatu card code"
        bit = 1 << i
        if ph is _P_PLAY:
            return None if self._hand[self._mover] & bit else f"{card} is not in {who}'s hand"
        if ph is _P_FLIP:
            if self._known() & bit:
                return f"{card} is already registered ({self._where(bit)}), it cannot be the stock card"
            return None
        if self._opts & bit:
            return None
        return f"choose one of {', '.join(_codes(self._opts))}"

    def _where(self, bit: int) -> str:
        for s in (0, 1):
            if self._hand[s] & bit:
                return f"in {SEATS[s]}'s hand"
            if self._cap[s] & bit:
                return f"captured by {SEATS[s]}"
        if self._lay & bit:
            return "on the layout"
        if self._pend & bit:
            return "played this turn"
        return "unknown"

    def default_move(self) -> Move:
        """The timeout move (§8): the lowest hand card; the more valuable option (ties: lowest
        code); STOP. Not defined for FLIP (the dealer turns the card) nor after the game."""
        ph = self._phase
        if ph is _P_PLAY:
            return _PLAY[_low(self._hand[self._mover])]
        if ph is _P_CA or ph is _P_CB:
            m = self._opts
            a = _low(m)
            b = _low(m ^ (1 << a))
            return _CHOOSE[b if _VALUE[b] > _VALUE[a] else a]
        if ph is _P_DEC:
            return _STOP
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
        self._do(move, ev)
        return ev

    def step(self, move: Move) -> None:
        """Fast path for search: apply ``move`` without events and WITHOUT verification
        (``move`` must come from :meth:`legal`)."""
        self._do(move, None)

    # ---- rule implementation ----

    def _do(self, move: Move, ev: list[Event] | None) -> None:
        ph = self._phase
        if ph is _P_PLAY:
            self._play(_IDX[move.card], ev)  # type: ignore[union-attr]
        elif ph is _P_FLIP:
            self._flip(_IDX[move.card], ev)  # type: ignore[union-attr]
        elif ph is _P_CA:
            i = _IDX[move.card]  # type: ignore[union-attr]
            bit = 1 << i
            self._lay &= ~bit
            self._pend |= bit
            self._capa = self._am
            self._opts = 0
            self._phase = _P_FLIP
            if ev is not None:
                ev.append(("pending", {"seat": SEATS[self._mover], "cards": _codes(self._pend)}))
        elif ph is _P_CB:
            i = _IDX[move.card]  # type: ignore[union-attr]
            bit = 1 << i
            self._lay &= ~bit
            if ev is not None:
                ev.append(("paired", {"seat": SEATS[self._mover], "cards": [_CODES[self._b], _CODES[i]]}))
            self._pend |= bit
            self._capb = _MONTH[i]
            self._opts = 0
            self._finish(ev)
        elif ph is _P_DEC:
            p = self._mover
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
        p = self._mover
        bit = 1 << i
        self._hand[p] &= ~bit
        mo = _MONTH[i]
        self._a = i
        self._am = mo
        lay = self._lay
        self._lay0 = lay != 0
        ml = lay & _MONTH_MASK[mo]
        k = ml.bit_count()
        self._ak = k
        if ev is not None:
            ev.append(("played", {"seat": SEATS[p], "card": _CODES[i], "matches": k}))
        if k == 0:
            self._lay = lay | bit
            self._phase = _P_FLIP
            if ev is not None:
                ev.append(("placed", {"seat": SEATS[p], "card": _CODES[i], "step": "A"}))
        elif k == 1:
            self._lay = lay & ~ml
            self._pend = bit | ml
            self._capa = mo
            self._phase = _P_FLIP
            if ev is not None:
                ev.append(("pending", {"seat": SEATS[p], "cards": _codes(bit | ml)}))
        elif k == 2:
            self._pend = bit
            self._opts = ml
            self._phase = _P_CA
            if ev is not None:
                ev.append(("choice", {"seat": SEATS[p], "step": "A", "card": _CODES[i], "options": _codes(ml)}))
        else:
            self._lay = lay & ~ml
            self._pend = bit | ml
            self._capa = mo
            units, origin, maker = self._triple_units(mo, p)
            self._owed += units
            self._phase = _P_FLIP
            if ev is not None:
                ev.append(("triple", {"seat": SEATS[p], "month": mo, "cards": _codes(bit | ml), "origin": origin,
                                      "maker": None if maker < 0 else SEATS[maker], "units": units}))

    def _bonus(self, kind: str, ev: list[Event] | None) -> None:
        applied = self._turn < self._last_from
        if applied:
            self._owed += 1
        if ev is not None:
            ev.append((kind, {"seat": SEATS[self._mover], "units": 1 if applied else 0, "applied": applied}))

    def _flip(self, j: int, ev: list[Event] | None) -> None:
        p = self._mover
        bj = 1 << j
        self._b = j
        self._stock_left -= 1
        mo = _MONTH[j]
        if ev is not None:
            ev.append(("flipped", {"seat": SEATS[p], "card": _CODES[j]}))
        if mo == self._am:
            ak = self._ak
            if ak == 1:  # Ppuk: the three stay as a pile
                cards = self._pend | bj
                self._lay |= cards
                self._pend = 0
                self._capa = 0
                piles = dict(self._piles)
                piles[mo] = ("PPUK", p)
                self._piles = piles
                self._ppuk[p] += 1
                self._made_ppuk = True
                if ev is not None:
                    ev.append(("ppuk", {"seat": SEATS[p], "month": mo, "cards": _codes(cards), "count": self._ppuk[p]}))
            elif ak == 2:  # Ttadak: take all four
                ml = self._lay & _MONTH_MASK[mo]
                self._lay &= ~ml
                self._pend |= bj | ml
                self._capb = mo
                self._bonus("ttadak", ev)
            else:  # ak == 0, Chok
                ba = 1 << self._a
                self._lay &= ~ba
                self._pend |= bj | ba
                self._capb = mo
                self._bonus("chok", ev)
        else:
            ml = self._lay & _MONTH_MASK[mo]
            k = ml.bit_count()
            if k == 0:
                self._lay |= bj
                if ev is not None:
                    ev.append(("placed", {"seat": SEATS[p], "card": _CODES[j], "step": "B"}))
            elif k == 1:
                self._lay &= ~ml
                self._pend |= bj | ml
                self._capb = mo
                if ev is not None:
                    ev.append(("paired", {"seat": SEATS[p], "cards": _codes(bj | ml)}))
            elif k == 2:
                self._pend |= bj
                self._opts = ml
                self._phase = _P_CB
                if ev is not None:
                    ev.append(("choice", {"seat": SEATS[p], "step": "B", "card": _CODES[j], "options": _codes(ml)}))
                return
            else:
                self._lay &= ~ml
                self._pend |= bj | ml
                self._capb = mo
                units, origin, maker = self._triple_units(mo, p)
                self._owed += units
                if ev is not None:
                    ev.append(("triple", {"seat": SEATS[p], "month": mo, "cards": _codes(bj | ml), "origin": origin,
                                          "maker": None if maker < 0 else SEATS[maker], "units": units}))
        self._finish(ev)

    def _finish(self, ev: list[Event] | None) -> None:
        """Step C (§3.3): captures, Sseul, steals, three Ppuks, score check."""
        p = self._mover
        o = 1 - p
        pend = self._pend
        if pend:
            self._cap[p] |= pend
            self._pend = 0
            if ev is not None:
                ev.append(("captured", {"seat": SEATS[p], "cards": _codes(pend)}))
        if self.rules.sseul_rule == "LAYOUT_CLEARED":
            sseul = self._lay0 and not self._lay
        else:
            sseul = bool(self._capa and self._capb and self._capa != self._capb)
        if sseul:
            self._bonus("sseul", ev)
        owed = total_owed = self._owed
        if owed:
            self._owed = 0
            src = self._cap[o]
            moved = 0
            units = 0
            while owed > 0:
                pool = src & _J1
                if pool:
                    low = pool & -pool
                    owed -= 1
                    units += 1
                else:
                    pool = src & _JD
                    if not pool:
                        break
                    low = pool & -pool
                    owed -= 2
                    units += 2
                src ^= low
                moved |= low
            self._cap[o] = src
            self._cap[p] |= moved
            if ev is not None:
                ev.append(("steal", {"from": SEATS[o], "to": SEATS[p], "owed": total_owed,
                                     "cards": _codes(moved), "units": units}))
        if self._made_ppuk and self._ppuk[p] >= 3:
            self._immediate_win("THREE_PPUK", p, ev, {"ppuks": self._ppuk[p], "turn": self._turn})
            return
        s = _total(self._cap[p])
        if ev is not None:
            ev.append(("score", {"seat": SEATS[p], "total": s, "F": s if p == 0 else _total(self._cap[0]),
                                 "O": s if p == 1 else _total(self._cap[1])}))
        if (s > self._last_go[p]) if self._go[p] else (s >= 7):
            self._dscore = s
            if ev is not None:
                ev.append(("decision", {"seat": SEATS[p], "score": s, "go_count": self._go[p]}))
            if self._turn >= self._last_from:
                self._stop(p, True, ev)
            else:
                self._phase = _P_DEC
            return
        self._advance(ev)

    def _advance(self, ev: list[Event] | None) -> None:
        if self._turn >= 20:
            det = {"scores": self.scores(), "go_count": self.go_count,
                   "next_multiplier": self.rules.nagari_next_multiplier}
            if ev is not None:
                ev.append(("nagari", {}))
            self._end(MatgoResult("NAGARI", None, 0, det), ev)
            return
        self._turn += 1
        self._mover = 1 - self._mover
        self._phase = _P_PLAY
        self._a = -1
        self._am = 0
        self._ak = 0
        self._pend = 0
        self._opts = 0
        self._b = -1
        self._owed = 0
        self._lay0 = False
        self._capa = 0
        self._capb = 0
        self._made_ppuk = False
        self._dscore = 0
        if ev is not None:
            ev.append(("turn", {"turn": self._turn, "seat": SEATS[self._mover]}))

    def _stop(self, p: int, auto: bool, ev: list[Event] | None) -> None:
        pay = _payment(self._cap[p], self._cap[1 - p], self._go[p])
        if ev is not None:
            ev.append(("stop", {"seat": SEATS[p], "score": pay.points, "auto": auto}))
        det = {"scores": self.scores(), "go_count": self.go_count, "points": pay.points,
               "go_adjusted": pay.go_adjusted, "multipliers": list(pay.multipliers),
               "loser": SEATS[1 - p], "turn": self._turn, "auto": auto}
        self._end(MatgoResult("STOP", SEATS[p], pay.payment_points, det), ev)

    def _immediate_win(self, kind: str, p: int, ev: list[Event] | None, extra: dict[str, Any]) -> None:
        mult: list[str] = []
        if self.rules.immediate_win_multipliers == "APPLY":
            mult = _multipliers(self._cap[p], self._cap[1 - p])
        pts = 5 << len(mult)
        if ev is not None:
            ev.append(("immediate_win", {"kind": kind, "seat": SEATS[p], "payment_points": pts}))
        det = {"points": 5, "multipliers": mult, "scores": self.scores(), "go_count": self.go_count,
               "turn": self._turn, **extra}
        self._end(MatgoResult(kind, SEATS[p], pts, det), ev)  # type: ignore[arg-type]

    def _end(self, result: MatgoResult, ev: list[Event] | None) -> None:
        self._result = result
        self._phase = _P_OVER
        self._opts = 0
        if ev is not None:
            ev.append(("result", {"kind": result.kind, "winner": result.winner,
                                  "payment_points": result.payment_points}))


def _bits_list(m: int) -> list[int]:
    out = []
    while m:
        low = m & -m
        out.append(low)
        m ^= low
    return out
