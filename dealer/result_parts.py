"""Split a round result too big for one message into a manifest and parts (pure).

A broker refuses (and disconnects) a publish over its ``max_packet_size``, so a round with
thousands of bets must never become one huge message. :func:`split_result` keeps a result
that fits as it is; otherwise the result becomes a *manifest* (the same RoundResult with
``accepted_bets.bet_ids`` emptied, ``accepted_bets.parts = n`` and ``accepted_bets.digest``)
plus ``n`` :class:`~dealer.messages.RoundResultPart` messages whose ``bet_ids`` concatenated,
in part order, are the original list. Every message it returns is at most ``limit`` bytes.

Only ``accepted_bets.bet_ids`` grows with the number of bets at every table. The other
per-player fields (``player_bets``, ``decisions``, ``details``) are bounded by the seats of
the seated games; what no split can bring under the limit raises :class:`OversizeResult`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_core import to_json

from dealer.messages import RoundResult, RoundResultPart


class OversizeResult(ValueError):
    """Even the manifest (the result without its bet ids) is over the limit."""


@dataclass(frozen=True, slots=True)
class Message:
    """One outgoing message of a result: its outbox key and its JSON payload."""

    key: str
    payload: bytes


def bet_ids_digest(bet_ids: Sequence[str]) -> str:
    """SHA-256 (hex) of the ids in acceptance order, each followed by a line feed (UTF-8).

    Bet ids never contain a line feed (``dealer.events.Id``), so the list is unambiguous and a
    consumer in any language computes it without a JSON serialiser."""
    h = hashlib.sha256()
    for bet_id in bet_ids:
        h.update(bet_id.encode())
        h.update(b"\n")
    return h.hexdigest()


def part_key(idempotency_key: str, part: int, parts: int) -> str:
    """The outbox key of a part: ``{idempotency_key}#{part}/{parts}`` (the manifest keeps the key)."""
    return f"{idempotency_key}#{part}/{parts}"


def _json_str(s: str) -> bytes:
    return to_json(s)


def _pack(result: RoundResult, limit: int, parts_guess: int) -> list[list[str]]:
    """Greedy: as many ids per part as fit, with the part numbers written with as many
    digits as ``parts_guess`` has (part <= parts, so that is an upper bound)."""
    empty = RoundResultPart(idempotency_key=result.idempotency_key, table_id=result.table_id,
                            round_id=result.round_id, part=parts_guess, parts=parts_guess, bet_ids=[])
    overhead = len(empty.model_dump_json().encode())
    out: list[list[str]] = []
    cur: list[str] = []
    size = overhead
    for bet_id in result.accepted_bets.bet_ids:
        add = len(_json_str(bet_id)) + (1 if cur else 0)  # the id and its comma
        if cur and size + add > limit:
            out.append(cur)
            cur, size, add = [], overhead, len(_json_str(bet_id))
        if overhead + len(_json_str(bet_id)) > limit:
            raise OversizeResult(f"a part with one bet id is over {limit} bytes")
        cur.append(bet_id)
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
    ids = result.accepted_bets.bet_ids
    guess = 1
    while True:
        chunks = _pack(result, limit, guess)
        if len(str(len(chunks))) <= len(str(guess)):
            break
        guess = len(chunks)
    n = len(chunks)
    summary = result.accepted_bets.model_copy(update={"bet_ids": [], "parts": n, "digest": bet_ids_digest(ids)})
    manifest = result.model_copy(update={"accepted_bets": summary}).model_dump_json().encode()
    if len(manifest) > limit:
        raise OversizeResult(f"result {key}: {len(manifest)} bytes without its bet ids, over the limit of {limit} "
                             f"(fields other than accepted_bets.bet_ids are that big)")
    out = [Message(key, manifest)]
    for i, chunk in enumerate(chunks, start=1):
        part = RoundResultPart(idempotency_key=key, table_id=result.table_id, round_id=result.round_id,
                               part=i, parts=n, bet_ids=chunk)
        out.append(Message(part_key(key, i, n), part.model_dump_json().encode()))
    return out


def join_parts(manifest: RoundResult, parts: Sequence[RoundResultPart]) -> RoundResult:
    """The result as it was before :func:`split_result`, from a manifest and all its parts
    (any order). Raises ValueError naming what does not match: a missing, extra or foreign
    part, or a digest or count that differs from the manifest's."""
    key, n = manifest.idempotency_key, manifest.accepted_bets.parts
    if n == 0:
        return manifest
    by_part = {p.part: p for p in parts}
    foreign = [p for p in parts if p.idempotency_key != key or p.parts != n]
    if foreign:
        raise ValueError(f"{key}: part {foreign[0].part} of {foreign[0].idempotency_key} with parts={foreign[0].parts} "
                         f"does not belong to this manifest (parts={n})")
    missing = [i for i in range(1, n + 1) if i not in by_part]
    if missing or len(by_part) != n:
        raise ValueError(f"{key}: parts {missing} missing (manifest has {n})")
    ids = [b for i in range(1, n + 1) for b in by_part[i].bet_ids]
    if bet_ids_digest(ids) != manifest.accepted_bets.digest:
        raise ValueError(f"{key}: the digest of the {len(ids)} bet ids in the parts does not match the manifest's")
    if len(ids) != manifest.accepted_bets.count:
        raise ValueError(f"{key}: {len(ids)} bet ids in the parts, the manifest counts {manifest.accepted_bets.count}")
    summary = manifest.accepted_bets.model_copy(update={"bet_ids": ids, "parts": 0, "digest": ""})
    return manifest.model_copy(update={"accepted_bets": summary})
