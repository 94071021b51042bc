"""What the games' command fuzzer (:mod:`tools.fuzz_games`) shares with its command generator
(:mod:`tools.fuzz_game_commands`) and its players: the table's ids, the events it applied, and the
table's state pickled and compared (which fields an event changed)."""

from __future__ import annotations

import copyreg
import dataclasses
import io
import pickle
from decimal import Decimal
from typing import Any



TID = "G1"
READER = "R1"
#: The topic of an input that is a timer's event (submitted as the service's timers do).
TIMER = "timer"
#: Inputs on one service before it is stopped and started again on its journal (drawn in this range).
SESSION_INPUTS = (150, 500)
#: Services started on one journal before the next journal (and set of house options) begins.
SESSIONS_PER_JOURNAL = 3
#: Wall-clock seconds the service may take to go quiet after one input (a hang is a finding).
SETTLE_S = 30.0
#: Error log lines that are answers, not faults: a security refusal and a station alert.
BENIGN_ERRORS = frozenset({"security event", "supervisor alert", "scanner frame failed authentication"})
#: The Matgo AI's search size here: its move is a function of the request (and quick).
HOUSE_PLAYOUTS = 6
EPOCH_MS = 1_767_225_600_000
#: What a refusal says instead of a hidden card (dealer.core.visibility.HIDDEN_TEXT): an answer to
#: a command never says it, since whether a card the sender named is hidden is itself hidden.
HIDDEN_TEXT = "a hidden card"


@dataclasses.dataclass
class Applied:
    """One event the commit loop applied, as the harness saw it."""

    item: Any
    step: Any
    before: bytes
    after: bytes
    journaled: bool
    round_turn: tuple[str, int] | None

    @property
    def changed(self) -> str:
        """The fields the event changed, "" when none (compared only when asked: it costs)."""
        return ", ".join(differences(self.before, self.after)) if self.after != self.before else ""


def _position(pos: Any) -> tuple[Any, ...]:
    """A deal position (immutable, one per name and deck) pickles as its name: 4 times faster."""
    return str, (f"{pos.name}@{pos.deck}",)


def snapshot(table: Any) -> bytes:
    """The table's state as bytes: equal bytes, equal state (a counter of handled events aside)."""
    from dealer.core.game_records import Position

    cur = table.current
    rnd = None if cur is None else {k: v for k, v in vars(cur).items() if k not in ("revision", "rules")}
    tbl = {k: v for k, v in vars(table).items() if k not in ("current", "rules", "handle", "undelivered", "shift")}
    tbl["undelivered"] = sorted((rid, r.phase, r.delivered) for rid, r in table.undelivered.items())
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = {**copyreg.dispatch_table, Position: _position}
    pickler.dump((tbl, rnd))
    return out.getvalue()


def _same(a: Any, b: Any, seen: set[tuple[int, int]] | None = None) -> bool:
    """Structural equality: objects compare by their fields (a rebuilt table shares no object
    with the live one, and most of the hand's objects have no ``__eq__``); a cycle (the betting
    limits know their hand) is compared once."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (str, bytes, int, float, bool, Decimal, type(None), set, frozenset)):
        return bool(a == b)
    seen = set() if seen is None else seen
    pair = (id(a), id(b))
    if pair in seen:
        return True
    seen.add(pair)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k], seen) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, seen) for x, y in zip(a, b))
    fields = _fields(a)
    if fields is None:
        return bool(a == b)
    return _same(fields, _fields(b), seen)


def _where(a: Any, b: Any, path: str = "", depth: int = 0) -> str:
    """The path of the first difference between two structures (for a finding's message)."""
    if _same(a, b) or depth > 8:
        return path
    if type(a) is not type(b) or isinstance(a, (str, bytes, int, float, bool, Decimal, type(None), set, frozenset)):
        return f"{path}: {str(a)[:60]} != {str(b)[:60]}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(map(str, a.keys() ^ b.keys()))[:5]}"
        return next(_where(v, b[k], f"{path}.{k}", depth + 1) for k, v in a.items() if not _same(v, b[k]))
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return next(_where(x, y, f"{path}[{i}]", depth + 1) for i, (x, y) in enumerate(zip(a, b)) if not _same(x, y))
    fa, fb = _fields(a), _fields(b)
    return _where(fa, fb, path, depth + 1) if fa is not None else f"{path}: {a!r:.60} != {b!r:.60}"


def _fields(obj: Any) -> dict[str, Any] | None:
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    slots = [n for cls in type(obj).__mro__ for n in getattr(cls, "__slots__", ())]
    return {n: getattr(obj, n, None) for n in slots} if slots else None


def differences(a: bytes, b: bytes) -> list[str]:
    """Which fields of two snapshots differ, structurally (table fields, ``round.`` fields, the
    hand's ``hand.`` fields); none when only their pickles differ (shared objects, dict order)."""
    (ta, ra), (tb, rb) = pickle.loads(a), pickle.loads(b)
    out = [k for k in sorted(set(ta) | set(tb)) if not _same(ta.get(k), tb.get(k))]
    if (ra is None) != (rb is None):
        return out + ["round"]
    for k in sorted(set(ra or {}) | set(rb or {})):
        va, vb = (ra or {}).get(k), (rb or {}).get(k)
        if k == "hand" and va is not None and vb is not None:
            ha, hb = vars(va), vars(vb)
            out += [_where(ha.get(h), hb.get(h), f"hand.{h}") for h in sorted(set(ha) | set(hb))
                    if not _same(ha.get(h), hb.get(h))]
        elif not _same(va, vb):
            out.append(_where(va, vb, f"round.{k}"))
    return out


def as_money(value: Any) -> Decimal:
    return Decimal(str(value))


