"""Split a round result too big for one message into a manifest and parts (pure).

A broker refuses (and disconnects) a publish over its ``max_packet_size``, so a round with
thousands of bets must never become one huge message. :func:`split_result` keeps a result
that fits as it is; otherwise the result becomes a *manifest* (the same RoundResult with
``accepted_bets.bet_ids`` emptied, ``accepted_bets.parts = n`` and ``accepted_bets.digest``)
plus ``n`` :class:`~dealer.core.messages.RoundResultPart` messages whose ``bet_ids`` concatenated,
in part order, are the original list. Every message it returns is at most ``limit`` bytes.

``accepted_bets.bet_ids`` grows with the bets at every table. ``player_bets`` and
``decisions`` (one entry per player) grow with the players only where players have no seat
(Sevenluck SHARED): when the manifest is still too big without the bet ids, they move to the
parts as well (each player's entries whole, in one part) and ``accepted_bets.players_digest``
covers them. ``details`` is bounded by the seats of the seated games; a manifest that still
cannot fit raises :class:`OversizeResult`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from dealer.core.messages import BetTypeResult, DecisionRecord, RoundResult, RoundResultPart


class OversizeResult(ValueError):
    """Even the manifest (the result without its bet ids and players) is over the limit."""


@dataclass(frozen=True, slots=True)
class Message:
    """One outgoing message of a result: its outbox key and its JSON payload."""

    key: str
    payload: bytes


def bet_ids_digest(bet_ids: Sequence[str]) -> str:
    """SHA-256 (hex) of the ids in acceptance order, each followed by a line feed (UTF-8).

    Bet ids never contain a line feed (``dealer.core.events.Id``), so the list is unambiguous and a
    consumer in any language computes it without a JSON serialiser."""
    h = hashlib.sha256()
    for bet_id in bet_ids:
        h.update(bet_id.encode())
        h.update(b"\n")
    return h.hexdigest()


def players_digest(player_bets: dict[str, dict[str, BetTypeResult]], decisions: dict[str, DecisionRecord]) -> str:
    """SHA-256 (hex) of ``{"decisions": ..., "player_bets": ...}`` as canonical JSON: keys sorted,
    no whitespace, UTF-8, values exactly as they appear in the messages (money as strings)."""
    doc = {"decisions": {k: v.model_dump(mode="json") for k, v in decisions.items()},
           "player_bets": {p: {t: r.model_dump(mode="json") for t, r in b.items()} for p, b in player_bets.items()}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def part_key(idempotency_key: str, part: int, parts: int) -> str:
    """The outbox key of a part: ``{idempotency_key}#{part}/{parts}`` (the manifest keeps the key)."""
    return f"{idempotency_key}#{part}/{parts}"


#: One thing a part carries: a bet id, or one player's player_bets and decision entries.
_Item = tuple[str, str, Any, Any]


def _items(result: RoundResult, players: bool) -> Iterator[tuple[_Item, int]]:
    """Every item with an upper bound of the bytes it adds to a part (with its commas)."""
    for bet_id in result.accepted_bets.bet_ids:
        yield ("bet", bet_id, None, None), len(to_json(bet_id)) + 1
    if players:
        for pid in dict.fromkeys([*result.player_bets, *result.decisions]):
            pb, dec = result.player_bets.get(pid), result.decisions.get(pid)
            size = sum(len(to_json(pid)) + 2 + len(to_json(v)) for v in (pb, dec) if v is not None)
            yield ("player", pid, pb, dec), size


def _part(result: RoundResult, part: int, parts: int, items: Sequence[_Item]) -> RoundResultPart:
    return RoundResultPart(
        idempotency_key=result.idempotency_key, table_id=result.table_id, round_id=result.round_id, part=part,
        parts=parts, bet_ids=[i[1] for i in items if i[0] == "bet"],
        player_bets={i[1]: i[2] for i in items if i[0] == "player" and i[2] is not None},
        decisions={i[1]: i[3] for i in items if i[0] == "player" and i[3] is not None})


def _pack(result: RoundResult, limit: int, parts_guess: int, players: bool) -> list[list[_Item]]:
    """Greedy: as many items per part as fit, with the part numbers written with as many
    digits as ``parts_guess`` has (part <= parts, so that is an upper bound)."""
    overhead = len(_part(result, parts_guess, parts_guess, []).model_dump_json().encode())
    out: list[list[_Item]] = []
    cur: list[_Item] = []
    size = overhead
    for item, add in _items(result, players):
        if overhead + add > limit:
            raise OversizeResult(f"result {result.idempotency_key}: a part with only {item[0]} {item[1]!r} is over "
                                 f"{limit} bytes")
        if cur and size + add > limit:
            out.append(cur)
            cur, size = [], overhead
        cur.append(item)
        size += add
    if cur:
        out.append(cur)
    return out


def split_result(result: RoundResult, limit: int) -> list[Message]:
    """The messages that carry ``result``, manifest first; each at most ``limit`` bytes.

    A result that fits is one message with its idempotency key, unchanged. Raises
    :class:`OversizeResult` when the manifest itself would be over the limit."""
    whole = result.model_dump_json().encode()
    key = result.idempotency_key
    if len(whole) <= limit:
        return [Message(key, whole)]
    summary = result.accepted_bets.model_copy(update={"bet_ids": [], "parts": 1,
                                                      "digest": bet_ids_digest(result.accepted_bets.bet_ids)})
    manifest = result.model_copy(update={"accepted_bets": summary})
    players = len(manifest.model_dump_json().encode()) > limit  # too many players as well: move them too
    if players:
        summary = summary.model_copy(update={"players_digest": players_digest(result.player_bets, result.decisions)})
        manifest = manifest.model_copy(update={"accepted_bets": summary, "player_bets": {}, "decisions": {}})
    guess = 1
    while True:
        chunks = _pack(result, limit, guess, players)
        if len(str(len(chunks))) <= len(str(guess)):
            break
        guess = len(chunks)
    n = max(1, len(chunks))
    manifest = manifest.model_copy(update={"accepted_bets": summary.model_copy(update={"parts": n})})
    head = manifest.model_dump_json().encode()
    if len(head) > limit:
        raise OversizeResult(f"result {key}: {len(head)} bytes without its bet ids and players, over the limit of "
                             f"{limit} (its other fields are that big)")
    out = [Message(key, head)]
    for i, chunk in enumerate(chunks or [[]], start=1):
        out.append(Message(part_key(key, i, n), _part(result, i, n, chunk).model_dump_json().encode()))
    over = [m.key for m in out if len(m.payload) > limit]
    if over:  # the size bounds above are upper bounds: never happens, but never send one either
        raise OversizeResult(f"result {key}: parts {over} came out over {limit} bytes")
    return out


def join_parts(manifest: RoundResult, parts: Sequence[RoundResultPart]) -> RoundResult:
    """The result as it was before :func:`split_result`, from a manifest and all its parts
    (any order). Raises ValueError naming what does not match: a missing, extra or foreign
    part, a player in two parts, or a digest or count that differs from the manifest's."""
    key, summary = manifest.idempotency_key, manifest.accepted_bets
    n = summary.parts
    if n == 0:
        return manifest
    foreign = [p for p in parts if p.idempotency_key != key or p.parts != n]
    if foreign:
        raise ValueError(f"{key}: part {foreign[0].part} of {foreign[0].idempotency_key} with parts={foreign[0].parts} "
                         f"does not belong to this manifest (parts={n})")
    by_part = {p.part: p for p in parts}
    missing = [i for i in range(1, n + 1) if i not in by_part]
    if missing or len(by_part) != n or len(parts) != n:
        raise ValueError(f"{key}: parts {missing} missing or repeated (manifest has {n}, got {len(parts)})")
    ordered = [by_part[i] for i in range(1, n + 1)]
    ids = [b for p in ordered for b in p.bet_ids]
    if bet_ids_digest(ids) != summary.digest:
        raise ValueError(f"{key}: the digest of the {len(ids)} bet ids in the parts does not match the manifest's")
    if len(ids) != summary.count:
        raise ValueError(f"{key}: {len(ids)} bet ids in the parts, the manifest counts {summary.count}")
    player_bets, decisions = dict(manifest.player_bets), dict(manifest.decisions)
    for p in ordered:
        if set(p.player_bets) & set(player_bets) or set(p.decisions) & set(decisions):
            raise ValueError(f"{key}: part {p.part} repeats a player already given")
        player_bets.update(p.player_bets)
        decisions.update(p.decisions)
    if summary.players_digest and players_digest(player_bets, decisions) != summary.players_digest:
        raise ValueError(f"{key}: the digest of player_bets and decisions in the parts does not match the manifest's")
    if not summary.players_digest and len(player_bets) + len(decisions) > len(manifest.player_bets) + len(manifest.decisions):
        raise ValueError(f"{key}: parts carry players, but the manifest has no players_digest")
    joined = summary.model_copy(update={"bet_ids": ids, "parts": 0, "digest": "", "players_digest": ""})
    return manifest.model_copy(update={"accepted_bets": joined, "player_bets": player_bets, "decisions": decisions})
