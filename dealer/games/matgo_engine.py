"""Matgo (two-player Go-Stop) game machine, ``matgo.md``: moves, views and the deal itself.
Pure, fast, cloneable. Its parts: the card tables are :mod:`dealer.games.matgo_cards`; the
seats, moves, phases and records :mod:`dealer.games.matgo_moves`; the house options and the
deal plan :mod:`dealer.games.matgo_rules`; the rules of a turn (steps A to C, Go/Stop)
:mod:`dealer.games.matgo_turn`; scoring and payment :mod:`dealer.games.matgo_scoring`. This
module is the game itself, :class:`MatgoGame`: building a deal, what it shows, what is legal.

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
  every card are prebuilt (:mod:`dealer.games.matgo_moves`): ``PLAY_MOVES[i]``, ``CHOOSE_MOVES[i]``,
  ``FLIP_MOVES[i]`` for card index ``i``, and ``STOP`` / ``GO``.
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

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dealer.core.cards import CardError, parse_hwatu
from dealer.games.matgo_cards import (
    ALL,
    INDEX,
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
from dealer.games.matgo_moves import (
    CHOOSE_MOVES,
    FLIP_MOVES,
    PLAY_MOVES,
    GO,
    SEAT_INDEX,
    SEATS,
    STOP,
    Choose,
    Decide,
    Event,
    Flip,
    LayoutStack,
    MatgoResult,
    MatgoView,
    Move,
    Phase,
    Play,
    Seat,
    seat_index,
)
from dealer.games.matgo_rules import MatgoRules
from dealer.games.matgo_scoring import Score, fast_total, mask_score, payment, protection_units, score
from dealer.games.matgo_turn import MatgoTurns

#: The engine's face: the game, and the scoring functions its callers read from it.
__all__ = ["MatgoGame", "score", "payment", "card_value", "protection_units"]

_PLAY_TABLES = byte_tables(PLAY_MOVES)
_FLIP_TABLES = byte_tables(FLIP_MOVES)

_P_PLAY, _P_CA, _P_FLIP, _P_CB, _P_DEC, _P_OVER = (
    Phase.PLAY, Phase.CHOOSE_A, Phase.FLIP, Phase.CHOOSE_B, Phase.DECIDE, Phase.OVER)
_MOVE_TYPES = frozenset((Play, Choose, Flip, Decide))
_EXPECTED: dict[Phase, type] = {_P_PLAY: Play, _P_CA: Choose, _P_FLIP: Flip, _P_CB: Choose, _P_DEC: Decide}


class MatgoGame(MatgoTurns):
    """One Matgo deal. Build it with :meth:`start` (or :meth:`from_position`); the rules of a
    turn are :class:`~dealer.games.matgo_turn.MatgoTurns`."""

    __slots__ = ()

    # ---- construction ----

    @classmethod
    def start(cls, hands: Mapping[Seat, Sequence[str]], layout: Sequence[str], first: Seat = "F",
              rules: MatgoRules = MatgoRules()) -> MatgoGame:
        """A new deal from the dealt cards, with the setup checks of §2.3 applied in order.

        A redeal or a chongtong ends the game at once (``phase == OVER``, see ``result``); the
        setup findings are in ``setup_events``.
        """
        g = cls()
        g._set_rules(rules)
        g._first = g.mover = seat_index(first, "first")
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
        g._first = seat_index(first, "first")
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
            p = SEAT_INDEX[s]
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
                pile_map[mo] = ("PPUK", seat_index(maker, "pile maker"))
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
                dst[seat_index(s, name)] = v
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
        p = seat_index(seat)
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
        return codes(self.hand_masks[seat_index(seat)])

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
                    out.append(LayoutStack(mo, tuple(codes(m)), pile[0],  # type: ignore[arg-type]  # a pile's kind is one of LayoutStack's
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

    def score_total(self, seat: Seat) -> int:
        """The combination total of ``seat``'s captured pile (fast: no :class:`Score` built)."""
        return fast_total(self.captured_masks[seat_index(seat)])

    def score_of(self, seat: Seat) -> Score:
        return mask_score(self.captured_masks[seat_index(seat)])

    def _known(self) -> int:
        return self.hand_masks[0] | self.hand_masks[1] | self.layout_mask | self.pending_mask | self.captured_masks[0] | self.captured_masks[1]

    def _unseen_mask(self, p: int) -> int:
        return ALL & ~(self.hand_masks[p] | self.layout_mask | self.pending_mask | self.captured_masks[0] | self.captured_masks[1])

    def unseen(self, seat: Seat) -> list[str]:
        """Cards ``seat`` has not seen: the opponent's hand plus the rest of the stock."""
        return codes(self._unseen_mask(seat_index(seat)))

    def stock_candidates(self) -> list[str]:
        """Cards the engine has not registered: what the stock can hold."""
        return codes(ALL & ~self._known())

    def view(self, seat: Seat) -> MatgoView:
        """What ``seat`` knows. Never contains the opponent's hand."""
        p = seat_index(seat)
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

    def state_key(self) -> tuple[Hashable, ...]:
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
            seat_index(seat)  # an unknown seat is an error, not "not its move"
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

