"""Command ids: a command delivered twice is answered twice and applied once.

Every command from the wire carries a ``command_id`` chosen by its sender. The first time an
id is accepted, the backend journals the command, its content digest and the answer the
sender got, in the same group commit as the command itself (``dealer.edge.journal``: the
``commands`` table, unique per table, role and id, kept forever: one role cannot squat
another's ids). A later delivery of the same id
with the same content (a QoS 1 redelivery, a client's retry) gets that answer again, marked
``repeat``, and changes nothing; the same id with other content is refused. A refused command
is not remembered: it changed nothing, so a retry is judged afresh.

Pure: digests and messages only; the store lives in the journal, the lookups in the service.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from dealer.core.messages import PlayerMessage, RoundEvent
from dealer.core.round import Effect, Step

#: The acceptance a player gets on their own topic, by command type.
_PLAYER_ANSWERS = frozenset({"bet_accepted", "decision_accepted", "action_accepted", "reservation_accepted"})


def canonical(obj: Any) -> bytes:
    """Canonical JSON (sorted keys, no spaces, UTF-8): the bytes digests and signatures cover."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(event: Any) -> str:
    """SHA-256 of a command's content: every field but the receive time ``at`` and a signature
    (a command signed again with another key of a rotation is still the same command)."""
    return hashlib.sha256(canonical(event.model_dump(mode="json", exclude={"at", "signature"}))).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredCommand:
    """What the journal keeps of an accepted command."""

    table_id: str
    command_id: str
    round_id: str | None
    type: str
    role: str
    digest: str
    answer: dict[str, Any]


def answer_of(event: Any, step: Step) -> dict[str, Any]:
    """The answer an accepted command got: its round, and the sender's own acceptance message
    when it has one (a player's ``bet_accepted``, ``decision_accepted`` ...)."""
    player = getattr(event, "player_id", None)
    reply = next((e for e in step.effects if isinstance(e, PlayerMessage) and e.player_id == player
                  and e.kind in _PLAYER_ANSWERS), None)
    rid = getattr(event, "round_id", None) or next(
        (e.round_id for e in step.effects if isinstance(e, (RoundEvent, PlayerMessage)) and e.round_id), None)
    out: dict[str, Any] = {"answer": "accepted", "round_id": rid}
    if reply is not None:
        out["reply"] = {"player_id": reply.player_id, "kind": reply.kind,
                        "data": reply.model_dump(mode="json")["data"]}
    return out


def repeat_effects(stored: StoredCommand, at: int) -> list[Effect]:
    """The original answer again, marked as a repeat: a public ``command_repeated`` event, and
    for a player's command the player's own acceptance message once more."""
    rid = stored.answer.get("round_id")
    effects: list[Effect] = [RoundEvent(table_id=stored.table_id, round_id=rid, event="command_repeated", at=at,
                                        data={"type": stored.type, "command_id": stored.command_id,
                                              "answer": "accepted", "repeat": True})]
    reply = stored.answer.get("reply")
    if reply is not None:
        effects.append(PlayerMessage(table_id=stored.table_id, round_id=rid, player_id=reply["player_id"],
                                     kind=reply["kind"], at=at,
                                     data={**reply["data"], "command_id": stored.command_id, "repeat": True}))
    return effects


__all__ = ["StoredCommand", "answer_of", "canonical", "digest", "repeat_effects"]
