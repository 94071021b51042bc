"""Who may see each card of a round, and when: the one visibility policy (``decks.md`` §3).

Every registered card of a round is, at any moment, one of:

* ``PUBLIC``: face up, or shown by the rules (a showdown, the dealer's reveal, an exposed
  card that plays, a card played): every audience may see it;
* ``OWNER``: a hole card, seen by its seat's player only;
* ``HIDDEN``: nobody sees it yet, the rules will show it (the dealer's cards until the
  decisions are final, hole cards that go to their owners together until all are dealt, a
  down card for everybody but its owner until the showdown);
* ``JOURNAL_ONLY``: nobody will ever see it: burn cards, folded hands, an uncontested winner,
  cards of a deal that was replaced, hand cards never played, the hole cards of a cancelled or
  voided round. Only the journal (and ``dealer recall``, which replays it) holds them; a hole
  card keeps its ``owner``, who saw it when it was dealt.

The policy is one for every game. What a game's rulebook adds it declares, never by its
name: on each :class:`~dealer.core.game_records.Position` (its ``seat``, the ``house`` player who
holds it, ``together`` cards), through the :class:`~dealer.core.game_contract.Decisions` capability
(whose decision ``folds``) and through a peer hand's :class:`~dealer.core.game_contract.Reveals`
(which face-down cards its rules turn over now, which never).

The round machine asks this module which cards go to whom (:func:`deliveries`,
:func:`owner_cards`), what a refusal may name (:func:`safe_code`, :func:`redact`) and what
a result may carry (:func:`shown`); the table and the edge ask :func:`unnamed` and
:func:`unnamed_all` what the refusal of a command may say of the cards its sender named. The service asks :func:`leaks` for every message it is
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
from typing import Any

from pydantic import BaseModel

from dealer.core.game_contract import Decisions, Reveals, offers
from dealer.core.game_records import Face, HandInfo, Position
from dealer.core.round_state import RoundState


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
#: What the refusal of a player's command says instead of a card the command itself named.
NAMED_TEXT = "the card named"
#: JSON fields that carry a sender's names (a player, a bet, a command, a dealer), never a card,
#: even when a name spells one: echoed back in answers, they show nothing.
_ID_VALUES = re.compile(r'"(command_id|player_id|bet_id|dealer_id)":"(?:[^"\\]|\\.)*"')

# Round phases (``dealer.core.round_state.Phase`` values; a StrEnum compares equal to its value).
_ACTIVE = frozenset({"BETTING_OPEN", "BETTING_CLOSED", "DEALING", "DECISION", "ACTION"})
_COMPLETED = frozenset({"RESULT", "SETTLED"})  # the round ended with a result: its reveals happened


def player(player_id: str) -> str:
    """The audience of one player's topic (kept apart from the role names: a player may be
    called ``ops``)."""
    return _PLAYER + player_id


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


# --- the facts games declare ---------------------------------------------------------------
#
# The policy below is the same for every game; what differs is declared by the games: on each
# position (its ``seat``, its ``house`` player, whether a hole card waits for its ``together``
# cards), by a game with :class:`~dealer.core.game_contract.Decisions` (whose decision ``folds``), and
# by a peer hand with :class:`~dealer.core.game_contract.Reveals` (which face-down cards its rules turn
# over now, which they never will).


def _owner(rnd: RoundState, pos: Position) -> str | None:
    """Who holds a face-down card: the house player it is dealt to, else its seat's player."""
    if pos.house is not None:
        return pos.house
    return rnd.seat_owner.get(pos.seat) if pos.seat is not None else None


def _together(rnd: RoundState, pos: Position) -> list[Position]:
    """The ``together`` cards given to their owners at once with ``pos`` (same deal, same index)."""
    return [p for p in rnd.plan if p.together and p.deck == pos.deck and p.index == pos.index]


def _told(rnd: RoundState, pos: Position) -> bool:
    """Whether the owner has been given the registered card (a ``together`` card: once all its
    companions have registered)."""
    return not pos.together or all(p.name in rnd.cards for p in _together(rnd, pos))


class _Facts:
    """What the game declares about the round as it stands, asked once per view."""

    __slots__ = ("reveals", "decides", "folded", "ended")

    def __init__(self, rnd: RoundState) -> None:
        game = rnd.rules.game
        self.reveals = rnd.hand if offers(rnd.hand, Reveals) else None  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
        self.decides = offers(game, Decisions)  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
        self.folded = ({d.seat for d in rnd.decisions.values() if game.folds(d.action) and d.seat is not None}
                       if offers(game, Decisions) else set())  # type: ignore[type-abstract]  # offers() takes a protocol class (python/mypy#4717)
        self.ended = rnd.phase in _COMPLETED

    def shown(self, pos: Position) -> bool:
        """Whether a registered face-down card is shown to everybody now: as the hand's rules say
        (:class:`Reveals`), or, in a game with decisions, at the result unless its seat folded."""
        if self.reveals is not None:
            return self.reveals.shows(pos, self.ended)
        return self.decides and self.ended and pos.seat not in self.folded

    def mucked(self, pos: Position) -> bool:
        """Whether a face-down card will never be shown (its hand folded) while the round goes on."""
        if self.reveals is not None:
            return self.reveals.mucked(pos)
        return pos.seat in self.folded


# --- the view of a round ----------------------------------------------------------------------


def seen(rnd: RoundState, pos: Position, facts: _Facts | None = None) -> Seen:
    """How a registered position is seen now."""
    code = rnd.cards[pos.name]
    if pos.burn:
        return Seen(pos.name, code, Visibility.JOURNAL_ONLY)
    facts = _Facts(rnd) if facts is None else facts
    if pos.face == Face.UP or facts.shown(pos):
        return Seen(pos.name, code, Visibility.PUBLIC)
    owner = _owner(rnd, pos) if _told(rnd, pos) else None
    if rnd.phase not in _ACTIVE or facts.mucked(pos):
        return Seen(pos.name, code, Visibility.JOURNAL_ONLY, owner)
    return Seen(pos.name, code, Visibility.OWNER if owner is not None else Visibility.HIDDEN, owner)


def view(rnd: RoundState) -> dict[str, Seen]:
    """Every registered card of the round (position -> :class:`Seen`), in deal order."""
    facts = _Facts(rnd)
    return {p.name: seen(rnd, p, facts) for p in rnd.plan if not p.confirm and p.name in rnd.cards}


def is_public(rnd: RoundState, pos: Position, facts: _Facts | None = None) -> bool:
    return seen(rnd, pos, facts).visibility == Visibility.PUBLIC


def deliveries(rnd: RoundState, pos: Position) -> list[tuple[Position, str]]:
    """The ``hole_card`` messages due now that ``pos`` registered: (position, player)."""
    if pos.burn or pos.face == Face.UP:
        return []
    if pos.house is not None:
        return []  # the house reads its hand from the game
    if pos.together and not _told(rnd, pos):
        return []
    out = []
    for p in _together(rnd, pos) if pos.together else [pos]:
        owner = rnd.seat_owner.get(p.seat) if p.seat is not None else None
        if owner is not None and p.name in rnd.cards:
            out.append((p, owner))
    return out


def owner_cards(rnd: RoundState) -> list[tuple[Position, str]]:
    """Every hole card a seated player holds now (position, player), for a reconnect."""
    out = []
    for p in rnd.plan:
        if p.face != Face.DOWN or p.burn or p.confirm or p.seat is None or p.name not in rnd.cards:
            continue
        owner = rnd.seat_owner.get(p.seat)
        if owner is not None and _told(rnd, p):
            out.append((p, owner))
    return out


def noted(rnd: RoundState, data: Mapping[str, Any]) -> dict[str, Any]:
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


def revealed(rnd: RoundState) -> dict[str, str]:
    """The face-down cards shown now (for ``cards_revealed`` at the end of a round)."""
    facts = _Facts(rnd)
    return {p.name: rnd.cards[p.name] for p in rnd.plan
            if p.face == Face.DOWN and not p.burn and not p.confirm and p.name in rnd.cards and is_public(rnd, p, facts)}


def public_cards(rnd: RoundState) -> dict[str, str]:
    """Position -> code of every card shown publicly (what a result may carry)."""
    facts = _Facts(rnd)
    return {p.name: rnd.cards[p.name] for p in rnd.plan
            if not p.burn and not p.confirm and p.name in rnd.cards and is_public(rnd, p, facts)}


def shown(rnd: RoundState, hands: Mapping[str, HandInfo],
          details: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, HandInfo], dict[str, Any]]:
    """A result's ``cards``, ``hands`` and ``details`` cut to what was shown: a hand holding a
    card that was never shown (a folded hand) is left out, and so are the entries
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


def _cached(rnd: RoundState) -> _Cached:
    """The round's view, computed once per revision (``Round.handle`` bumps it before and after
    each event, so a view taken between two events is never stale)."""
    c = _CACHE.get(rnd)
    if c is None or c.revision != rnd.revision:
        c = _CACHE[rnd] = _Cached(rnd.revision, view(rnd))
    return c


def hidden_codes(rnd: RoundState | None, audience: str) -> frozenset[str]:
    """The registered card codes ``audience`` may not see now (any audience but a player sees
    what the public sees). A code registered twice (a rematch or a redeal reshuffles; burn
    cards are dealt again) is hidden only if no instance of it is visible:
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


def _identifiers(rnd: RoundState) -> set[str]:
    ids = {rnd.table_id, rnd.round_id, *rnd.bets, *(b.player_id for b in rnd.bets.values())}
    ids.update(rnd.seat_owner.values())
    return ids


def leaks(rnd: RoundState | None, audience: str, message: BaseModel | str | bytes) -> list[str]:
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
    # A sender's own ids are echoed in its answers (a command id that spells a card, ``x.JH``):
    # withholding the answer for it would say, by its absence, that the card is hidden.
    text = _ID_VALUES.sub(lambda m: f'"{m.group(1)}":""', text)
    found: set[str] = set()
    ids: set[str] | None = None
    for m in _pattern(hidden).finditer(text):
        code = m.group(0)
        if code in found:
            continue
        if m.start() > 0 and text[m.start() - 1] == '"' and text[m.end():m.end() + 1] == '"':
            ids = _identifiers(rnd) if ids is None else ids  # type: ignore[arg-type]  # a code is hidden only in a round: rnd is not None here
            if code in ids:
                continue
        found.add(code)
    return sorted(found)


def positions_of(rnd: RoundState | None, codes: Sequence[str]) -> list[str]:
    """The positions holding ``codes`` (for a log line that must not name the cards)."""
    if rnd is None:
        return []
    wanted = set(codes)
    return [s.position for s in _cached(rnd).seen.values() if s.code in wanted]


# The round machine asks these while it changes the round: always from the state as it is now,
# and strictly: a card dealt again after a reshuffle is judged where it is now (a card
# shown in the first game may be a hole card of the rematch).


def _hidden_now(rnd: RoundState) -> frozenset[str]:
    last: dict[str, Seen] = {}
    for s in view(rnd).values():  # deal order: a later position holds the card now
        last[s.code] = s
    return frozenset(code for code, s in last.items() if s.visibility != Visibility.PUBLIC)


def safe_code(rnd: RoundState, code: str, instead: str = HIDDEN_TEXT) -> str:
    """``code``, or ``instead`` when it is a registered card the public may not see (foreign
    cards and cards not dealt yet may be named)."""
    return instead if code in _hidden_now(rnd) else code


def redact(rnd: RoundState, text: str) -> str:
    """``text`` with every card code the public may not see replaced by "a hidden card"."""
    if not text or not _pattern(frozenset(rnd.rules.game.deck)).search(text):
        return text  # most reasons name no card at all: no need to look at the round
    hidden = _hidden_now(rnd)
    if not hidden:
        return text
    return _pattern(hidden).sub(HIDDEN_TEXT, text)


def unnamed(deck: frozenset[str], text: str, command: BaseModel) -> str:
    """The refusal ``text`` of a ``command`` with every card code the command itself
    names (a card a move names, an id that spells a card) written "the card named", the redacted ones
    ("a hidden card") included: redacting only the hidden ones would answer, for any card the
    player names, whether it is hidden (a player learnt a house player's hidden hand that way)."""
    if not text:
        return text
    named = frozenset(_pattern(deck).findall(command.model_dump_json(exclude={"type", "at"})))
    if not named:
        return text
    return _pattern(named).sub(NAMED_TEXT, text.replace(HIDDEN_TEXT, NAMED_TEXT))


def unnamed_all(deck: frozenset[str], text: str) -> str:
    """:func:`unnamed` for a refusal at the edge, whose every card code came from the sender (an
    id, a field's value): all of them, hidden or not, are written "the card named"."""
    if not text or not _pattern(deck).search(text):
        return text
    return _pattern(deck).sub(NAMED_TEXT, text.replace(HIDDEN_TEXT, NAMED_TEXT))
