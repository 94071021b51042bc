"""Who may see each card of a round, and when: the one visibility policy (``decks.md`` §3).

Every registered card of a round is, at any moment, one of:

* ``PUBLIC``: face up, or shown by the rules (a showdown, the dealer's reveal, an exposed
  7th card, a Matgo card played): every audience may see it;
* ``OWNER``: a hole card, seen by its seat's player only;
* ``HIDDEN``: nobody sees it yet, the rules will show it (Sevenluck's dealer cards until the
  decisions are final, Seotda's second cards until all of them are dealt, a stud down card
  for everybody but its owner until the showdown);
* ``JOURNAL_ONLY``: nobody will ever see it: burn cards, folded hands, an uncontested winner,
  Matgo hand cards never played, the hole cards of a cancelled or voided round. Only the
  journal (and ``dealer recall``, which replays it) holds them; a hole card keeps its
  ``owner``, who saw it when it was dealt.

The round machine asks this module which cards go to whom (:func:`deliveries`,
:func:`owner_cards`), what a refusal may name (:func:`safe_code`, :func:`redact`) and what
a result may carry (:func:`shown`). The service asks :func:`leaks` for every message it is
about to publish: the registered card codes the message names that its audience may not
see now. Pure: no IO, no clock.

Audiences: ``public`` (the events topic and the retained table state: player platform,
stations, ops), ``station`` (prompts, the retained current prompt), ``ops``, ``settlement``
(results), and one player (:func:`player`: its topic and its retained state). Stations,
ops and settlement see what the public sees: nobody but a card's owner sees a hidden card.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from dealer.games.base import Face, HandInfo, Position

if TYPE_CHECKING:
    from dealer.core.round import Round


class Visibility(StrEnum):
    PUBLIC = "PUBLIC"
    OWNER = "OWNER"
    HIDDEN = "HIDDEN"
    JOURNAL_ONLY = "JOURNAL_ONLY"


PUBLIC = "public"
STATION = "station"
OPS = "ops"
SETTLEMENT = "settlement"
_PLAYER = "player:"

#: What a refusal or a rescan says instead of a hidden card's code.
HIDDEN_TEXT = "a hidden card"

# Round phases (``dealer.core.round.Phase`` values; a StrEnum compares equal to its value).
_ACTIVE = frozenset({"BETTING_OPEN", "BETTING_CLOSED", "DEALING", "DECISION", "ACTION"})
_COMPLETED = frozenset({"RESULT", "SETTLED"})  # the round ended with a result: its reveals happened


def player(player_id: str) -> str:
    """The audience of one player's topic (kept apart from the role names: a player may be
    called ``ops``)."""
    return _PLAYER + player_id


#: Table topic leaves (after ``studio/v1/tables/{table}/``) and their audiences.
_LEAF_AUDIENCE = {"events": PUBLIC, "state": PUBLIC, "prompts": STATION, "prompts/current": STATION,
                  "results": SETTLEMENT}


def audience_of(topic: str) -> str | None:
    """The audience of a table topic (``.../events`` and the retained ``.../state`` -> public,
    ``.../prompts`` and ``.../prompts/current`` -> station, ``.../players/p`` and
    ``.../players/p/state`` -> player p), or None for a topic that carries no round messages."""
    parts = topic.split("/")
    if len(parts) >= 6 and parts[4] == "players":  # a player id never holds a "/"
        return player(parts[5])
    return _LEAF_AUDIENCE.get("/".join(parts[4:]))


@dataclass(frozen=True, slots=True)
class Seen:
    """One registered card as the policy sees it now. ``owner``: the player who sees it besides
    the public (its hole card's player, also after a fold)."""

    position: str
    code: str
    visibility: Visibility
    owner: str | None = None

    def visible_to(self, audience: str) -> bool:
        return self.visibility == Visibility.PUBLIC or (self.owner is not None and audience == _PLAYER + self.owner)


# --- per-game rules ---------------------------------------------------------------------------


class _Rules:
    """The default: a face-down seat card goes to its seat's player as it registers and is
    never shown to anyone else; a face-down card without a seat is seen by nobody."""

    def owner(self, rnd: Round, pos: Position) -> str | None:
        return rnd.seat_owner.get(pos.seat) if pos.seat is not None else None

    def told(self, rnd: Round, pos: Position) -> bool:
        """Whether the owner has been given the card (it is registered)."""
        return True

    def shown(self, rnd: Round, pos: Position) -> bool:
        """Whether a registered face-down card is shown to everybody now."""
        return False

    def dead(self, rnd: Round, pos: Position) -> bool:
        """Whether a face-down card will never be shown (its hand folded) while the round goes on."""
        return False

    def deliveries(self, rnd: Round, pos: Position) -> list[Position]:
        """The face-down cards that go to their owners now that ``pos`` registered."""
        return [pos] if self.told(rnd, pos) else []


class _Sevenluck(_Rules):
    """§4-§5: the dealer's cards and the hands of players who did not fold are shown once every
    decision is final; a folded hand goes to the muck unseen."""

    @staticmethod
    def _folded(rnd: Round) -> set[int | None]:
        return {d.seat for d in rnd.decisions.values() if d.action == "FOLD" and d.seat is not None}

    def shown(self, rnd: Round, pos: Position) -> bool:
        return rnd.phase in _COMPLETED and pos.seat not in self._folded(rnd)

    def dead(self, rnd: Round, pos: Position) -> bool:
        return pos.seat in self._folded(rnd)


class _Stud(_Rules):
    """§3.5 and §6: an exposed 7th card plays face up; at a showdown every hand still in shows
    all its cards; a folded hand and an uncontested winner never show."""

    def shown(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        if hand is None:
            return False
        if pos.name.endswith(".7") and pos.seat in hand.exposed:
            return True
        live = hand.betting.live
        return rnd.phase in _COMPLETED and len(live) > 1 and pos.seat in {p.seat for p in live}

    def dead(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        return hand is not None and any(p.seat == pos.seat and p.folded for p in hand.betting.players)


class _Seotda(_Rules):
    """§3.2: a first card goes to its owner at once, the second cards only when all of them are
    dealt; the contenders' cards of every showdown are shown when that showdown happens (§3.2
    "players reveal their hands"), a showdown that leads to a rematch included (its ``showdown``
    and ``rematch`` events carry them, before the rematch is dealt); the rest never show (a
    folded hand, a card of an earlier game that no showdown turned over)."""

    def told(self, rnd: Round, pos: Position) -> bool:
        if not pos.name.endswith(".2"):
            return True
        return all(p.name in rnd.cards for p in rnd.plan if p.deck == pos.deck and p.name.endswith(".2"))

    def deliveries(self, rnd: Round, pos: Position) -> list[Position]:
        if not pos.name.endswith(".2"):
            return [pos]
        if not self.told(rnd, pos):
            return []
        return [p for p in rnd.plan if p.deck == pos.deck and p.name.endswith(".2")]

    def shown(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        return hand is not None and pos.name in hand.shown  # from its showdown on

    def dead(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        if hand is None:
            return False
        game = hand.game
        if pos.deck < game.number:  # an earlier game: shown at the end if a showdown turned it over
            return pos.name not in hand.shown
        return any(p.seat == pos.seat and p.folded for p in game.betting.players)


class _Matgo(_Rules):
    """A hand card is shown when it is played; a chongtong winner shows the four cards that win;
    the hand cards never played (and both hands of a deal that was redealt) are never shown.
    The house AI owns its hand (it plays it; the service never publishes it)."""

    def owner(self, rnd: Round, pos: Position) -> str | None:
        from dealer.games.matgo import AI_PLAYER, AI_SEAT

        return AI_PLAYER if pos.seat == AI_SEAT else super().owner(rnd, pos)

    def deliveries(self, rnd: Round, pos: Position) -> list[Position]:
        from dealer.games.matgo import AI_SEAT

        return [] if pos.seat == AI_SEAT else [pos]  # the AI reads its hand from the engine

    @staticmethod
    def _current(hand: Any, pos: Position) -> bool:
        return pos.deck == hand.deals - 1

    def shown(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        if hand is None or hand.engine is None or not self._current(hand, pos):
            return False
        code = rnd.cards[pos.name]
        if any(m["action"] == "PLAY" and m["card"] == code for m in hand.log):
            return True
        result = hand.engine.result
        if rnd.phase in _COMPLETED and result is not None and result.kind == "CHONGTONG":
            seat = pos.name.split(".")[-2]  # F or O
            return seat == result.winner and int(code[:2]) in result.details.get("months", ())
        return False

    def dead(self, rnd: Round, pos: Position) -> bool:
        hand: Any = rnd.hand
        return hand is not None and not self._current(hand, pos)


_DEFAULT = _Rules()
_RULES: dict[str, _Rules] = {"sevenluck": _Sevenluck(), "stud": _Stud(), "seotda": _Seotda(), "matgo": _Matgo()}


def _rules(rnd: Round) -> _Rules:
    return _RULES.get(rnd.rules.game.name, _DEFAULT)


# --- the view of a round ----------------------------------------------------------------------


def seen(rnd: Round, pos: Position) -> Seen:
    """How a registered position is seen now."""
    code = rnd.cards[pos.name]
    if pos.burn:
        return Seen(pos.name, code, Visibility.JOURNAL_ONLY)
    r = _rules(rnd)
    if pos.face == Face.UP or r.shown(rnd, pos):
        return Seen(pos.name, code, Visibility.PUBLIC)
    owner = r.owner(rnd, pos) if r.told(rnd, pos) else None
    if rnd.phase not in _ACTIVE or r.dead(rnd, pos):
        return Seen(pos.name, code, Visibility.JOURNAL_ONLY, owner)
    return Seen(pos.name, code, Visibility.OWNER if owner is not None else Visibility.HIDDEN, owner)


def view(rnd: Round) -> dict[str, Seen]:
    """Every registered card of the round (position -> :class:`Seen`), in deal order."""
    return {p.name: seen(rnd, p) for p in rnd.plan if not p.confirm and p.name in rnd.cards}


def is_public(rnd: Round, pos: Position) -> bool:
    return seen(rnd, pos).visibility == Visibility.PUBLIC


def deliveries(rnd: Round, pos: Position) -> list[tuple[Position, str]]:
    """The ``hole_card`` messages due now that ``pos`` registered: (position, player)."""
    if pos.burn or pos.face == Face.UP:
        return []
    out = []
    for p in _rules(rnd).deliveries(rnd, pos):
        owner = rnd.seat_owner.get(p.seat) if p.seat is not None else None
        if owner is not None and p.name in rnd.cards:
            out.append((p, owner))
    return out


def owner_cards(rnd: Round) -> list[tuple[Position, str]]:
    """Every hole card a seated player holds now (position, player), for a reconnect."""
    r = _rules(rnd)
    out = []
    for p in rnd.plan:
        if p.face != Face.DOWN or p.burn or p.confirm or p.seat is None or p.name not in rnd.cards:
            continue
        owner = rnd.seat_owner.get(p.seat)
        if owner is not None and r.told(rnd, p):
            out.append((p, owner))
    return out


def noted(rnd: Round, data: Mapping[str, Any]) -> dict[str, Any]:
    """A hand's public note (``showdown``, ``rematch``) as it may be published now: each entry of
    its ``hands`` names the ``positions`` of a hand; it goes out with their ``cards`` if every
    one of them is shown to everybody now, and is left out otherwise (its name would tell)."""
    hands = data.get("hands")
    if not isinstance(hands, Mapping):
        return dict(data)
    out: dict[str, Any] = {}
    for label, hand in hands.items():
        positions = hand.get("positions") if isinstance(hand, Mapping) else None
        if not isinstance(positions, list):
            continue
        by_name = {p.name: p for p in rnd.plan}
        if all(n in rnd.cards and n in by_name and is_public(rnd, by_name[n]) for n in positions):
            out[label] = {k: v for k, v in hand.items() if k != "positions"} | {
                "cards": [rnd.cards[n] for n in positions], "positions": list(positions)}
    return dict(data) | {"hands": out}


def revealed(rnd: Round) -> dict[str, str]:
    """The face-down cards shown now (for ``cards_revealed`` at the end of a round)."""
    return {p.name: rnd.cards[p.name] for p in rnd.plan
            if p.face == Face.DOWN and not p.burn and not p.confirm and p.name in rnd.cards and is_public(rnd, p)}


def public_cards(rnd: Round) -> dict[str, str]:
    """Position -> code of every card shown publicly (what a result may carry)."""
    return {p.name: rnd.cards[p.name] for p in rnd.plan
            if not p.burn and not p.confirm and p.name in rnd.cards and is_public(rnd, p)}


def shown(rnd: Round, hands: Mapping[str, HandInfo],
          details: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, HandInfo], dict[str, Any]]:
    """A result's ``cards``, ``hands`` and ``details`` cut to what was shown: a hand holding a
    card that was never shown (a folded Sevenluck hand) is left out, and so are the entries
    that details keep per hand (its rank key, its comparison)."""
    cards = public_cards(rnd)
    codes = set(cards.values())
    kept = {k: h for k, h in hands.items() if set(h.cards) <= codes}
    dropped = set(hands) - set(kept)
    if not dropped:
        return cards, kept, dict(details)
    out = {k: ({n: v for n, v in d.items() if n not in dropped} if isinstance(d, Mapping) else d)
           for k, d in details.items()}
    return cards, kept, out


# --- what a message may name ------------------------------------------------------------------


class _Cached:
    __slots__ = ("revision", "seen", "hidden")

    def __init__(self, revision: int, seen: dict[str, Seen]) -> None:
        self.revision = revision
        self.seen = seen
        self.hidden: dict[str, frozenset[str]] = {}


_CACHE: weakref.WeakKeyDictionary[Any, _Cached] = weakref.WeakKeyDictionary()


def _cached(rnd: Round) -> _Cached:
    """The round's view, computed once per revision (``Round.handle`` bumps it before and after
    each event, so a view taken between two events is never stale)."""
    c = _CACHE.get(rnd)
    if c is None or c.revision != rnd.revision:
        c = _CACHE[rnd] = _Cached(rnd.revision, view(rnd))
    return c


def hidden_codes(rnd: Round | None, audience: str) -> frozenset[str]:
    """The registered card codes ``audience`` may not see now (any audience but a player sees
    what the public sees). A code registered twice (a Seotda rematch or a Matgo redeal
    reshuffles; stud deals burn cards again) is hidden only if no instance of it is visible:
    a message naming a card the audience has seen is not withheld, so this last check never
    holds back a legitimate message. The round machine itself judges such a card strictly,
    where it is now (:func:`safe_code`, :func:`redact`)."""
    if rnd is None:
        return frozenset()
    c = _cached(rnd)
    key = audience if audience.startswith(_PLAYER) else PUBLIC
    hidden = c.hidden.get(key)
    if hidden is None:
        hidden = c.hidden[key] = _hidden(c.seen.values(), key)
    return hidden


def _hidden(cards: Iterable[Seen], audience: str) -> frozenset[str]:
    cards = list(cards)
    visible = {s.code for s in cards if s.visible_to(audience)}
    return frozenset(s.code for s in cards if s.code not in visible)


_EDGE = "0-9A-Za-z"


@lru_cache(maxsize=512)
def _pattern(codes: frozenset[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(c) for c in sorted(codes, key=lambda c: (-len(c), c)))
    return re.compile(f"(?<![{_EDGE}])(?:{alternatives})(?![{_EDGE}])")


def _identifiers(rnd: Round) -> set[str]:
    ids = {rnd.table_id, rnd.round_id, *rnd.bets, *(b.player_id for b in rnd.bets.values())}
    ids.update(rnd.seat_owner.values())
    return ids


def leaks(rnd: Round | None, audience: str, message: BaseModel | str | bytes) -> list[str]:
    """The hidden card codes ``message`` would show ``audience`` (sorted; empty: safe to send).

    One precompiled pattern per hidden set, over the message's JSON: a code counts only as a
    whole token (``QH``, not the ``QH`` of ``QHX``), so position names (``A1``, ``P3.2``,
    ``R1.S1.1``, ``S3``, ``COMM``) never match. A JSON string that is exactly one of the
    round's identifiers (a player or bet id that happens to spell a card) is not a card."""
    hidden = hidden_codes(rnd, audience)
    if not hidden:
        return []
    if isinstance(message, BaseModel):
        text = message.model_dump_json()
    elif isinstance(message, bytes):
        text = message.decode("utf-8", "replace")
    else:
        text = message
    found: set[str] = set()
    ids: set[str] | None = None
    for m in _pattern(hidden).finditer(text):
        code = m.group(0)
        if code in found:
            continue
        if m.start() > 0 and text[m.start() - 1] == '"' and text[m.end():m.end() + 1] == '"':
            ids = _identifiers(rnd) if ids is None else ids  # type: ignore[arg-type]
            if code in ids:
                continue
        found.add(code)
    return sorted(found)


def positions_of(rnd: Round | None, codes: Sequence[str]) -> list[str]:
    """The positions holding ``codes`` (for a log line that must not name the cards)."""
    if rnd is None:
        return []
    wanted = set(codes)
    return [s.position for s in _cached(rnd).seen.values() if s.code in wanted]


# The round machine asks these while it changes the round: always from the state as it is now,
# and strictly: a card dealt again after a reshuffle is judged where it is now (a Seotda card
# shown in the first game may be a hole card of the rematch).


def _hidden_now(rnd: Round) -> frozenset[str]:
    last: dict[str, Seen] = {}
    for s in view(rnd).values():  # deal order: a later position holds the card now
        last[s.code] = s
    return frozenset(code for code, s in last.items() if s.visibility != Visibility.PUBLIC)


def safe_code(rnd: Round, code: str, instead: str = HIDDEN_TEXT) -> str:
    """``code``, or ``instead`` when it is a registered card the public may not see (foreign
    cards and cards not dealt yet may be named)."""
    return instead if code in _hidden_now(rnd) else code


def redact(rnd: Round, text: str) -> str:
    """``text`` with every card code the public may not see replaced by "a hidden card"."""
    if not text or not _pattern(frozenset(rnd.rules.game.deck)).search(text):
        return text  # most reasons name no card at all: no need to look at the round
    hidden = _hidden_now(rnd)
    if not hidden:
        return text
    return _pattern(hidden).sub(HIDDEN_TEXT, text)
