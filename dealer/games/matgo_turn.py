"""The rules of a Matgo turn (``matgo.md`` §3, §6, §9): step A (the hand card), step B (the stock
card), step C (captures, Sseul, steals, three Ppuks, the score check), Go/Stop and the end of
the deal, on the bit-mask state of one deal.

:class:`MatgoTurns` holds that state (its slots are the game's) and the transitions: the
unverified :meth:`MatgoTurns.step` and what it calls. :class:`dealer.games.matgo_engine.MatgoGame`
builds on it (construction, queries, verification), and is what callers use."""

from __future__ import annotations

from typing import Any

from dealer.games.matgo_cards import CODES, DOUBLE_JUNK, INDEX, JUNK, MONTH, MONTH_MASK, codes
from dealer.games.matgo_moves import SEATS, Event, MatgoResult, Move, Phase, Seat
from dealer.games.matgo_rules import MatgoRules
from dealer.games.matgo_scoring import fast_total, mask_multipliers, mask_payment

__all__ = ["MatgoTurns"]

_P_PLAY, _P_CA, _P_FLIP, _P_CB, _P_DEC, _P_OVER = (
    Phase.PLAY, Phase.CHOOSE_A, Phase.FLIP, Phase.CHOOSE_B, Phase.DECIDE, Phase.OVER)

_SLOTS = (
    "rules", "setup_events", "_first", "mover", "turn", "phase", "hand_masks", "captured_masks", "layout_mask",
    "_piles", "_ppuk", "_go", "_last_go", "_stock_left", "result", "_last_from", "_sseul_by_layout",
    # transient state of the current turn
    "_a", "_am", "_ak", "pending_mask", "options_mask", "_b", "_owed", "_lay0", "_capa", "_capb",
    "_made_ppuk", "_dscore",
)


class MatgoTurns:
    """One deal's state and the rules that move it; :class:`~dealer.games.matgo_engine.MatgoGame`
    is the game built on it."""

    __slots__ = _SLOTS

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

    @property
    def go_count(self) -> dict[Seat, int]:
        return {"F": self._go[0], "O": self._go[1]}

    def scores(self) -> dict[Seat, int]:
        """Current combination totals of both captured piles."""
        return {"F": fast_total(self.captured_masks[0]), "O": fast_total(self.captured_masks[1])}

    # ---- rule implementation ----

    def step(self, move: Move, ev: list[Event] | None = None) -> None:
        """Fast path for search: apply ``move`` WITHOUT verification (``move`` must come from
        :meth:`legal`), appending the events to ``ev`` when given. :meth:`apply` is this after
        :meth:`verify`."""
        ph = self.phase
        if ph is _P_PLAY:
            self._play(INDEX[move.card], ev)  # type: ignore[union-attr]  # the phase says which move legal() made
        elif ph is _P_FLIP:
            self._flip(INDEX[move.card], ev)  # type: ignore[union-attr]  # the phase says which move legal() made
        elif ph is _P_CA:
            i = INDEX[move.card]  # type: ignore[union-attr]  # the phase says which move legal() made
            bit = 1 << i
            self.layout_mask &= ~bit
            self.pending_mask |= bit
            self._capa = self._am
            self.options_mask = 0
            self.phase = _P_FLIP
            if ev is not None:
                ev.append(("pending", {"seat": SEATS[self.mover], "cards": codes(self.pending_mask)}))
        elif ph is _P_CB:
            i = INDEX[move.card]  # type: ignore[union-attr]  # the phase says which move legal() made
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
            if move.go:  # type: ignore[union-attr]  # the phase says which move legal() made
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
        self._end(MatgoResult(kind, SEATS[p], pts, det), ev)  # type: ignore[arg-type]  # kind is one of MatgoResult's kinds

    def _end(self, result: MatgoResult, ev: list[Event] | None) -> None:
        self.result = result
        self.phase = _P_OVER
        self.options_mask = 0
        if ev is not None:
            ev.append(("result", {"kind": result.kind, "winner": result.winner,
                                  "payment_points": result.payment_points}))
