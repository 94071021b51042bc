"""Settlement acknowledgements (``studio/v1/tables/{table}/results/ack``): the pure part.

A result stays in the outbox until settlement says it applied it; a PUBACK only says the
broker took it, and a broker can still lose it (queue limits, session expiry, a crash, a
consumer that never subscribed). This module judges an acknowledgement's payload and says
when an unacknowledged result goes out again. No IO.

An acknowledgement names the result by its idempotency key **and** the SHA-256 of the exact
bytes settlement received for it (``result_sha256``; for a result in parts, the manifest's
bytes, whose digests bind the parts). The key alone is built from public data (the table and
the round id), so an acknowledgement without the hash, or with another one, proves nothing:
the backend refuses it and keeps the result (protocol 1.1, docs/mqtt-topics.md §3).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: An acknowledgement is small: its key and a few fields of the consumer's own (bounded).
MAX_ACK_BYTES = 4096
MAX_KEY_CHARS = 200
SHA256_HEX = r"^[0-9a-fA-F]{64}$"


class ResultAck(BaseModel):
    """What settlement publishes on ``results/ack`` once it has applied (committed) a result:
    its idempotency key and the SHA-256 of the result message's bytes (protocol 1.1: the key
    alone is public, and refused). Fields of settlement's own (a ledger id, a timestamp) are
    allowed; the whole payload is at most 4096 bytes (MAX_ACK_BYTES)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    idempotency_key: str = Field(min_length=1, max_length=MAX_KEY_CHARS,
                                 description="the idempotency_key of the applied result, e.g. TP1:TP1-000042")
    result_sha256: str = Field(pattern=SHA256_HEX,
                               description="hex SHA-256 of the exact bytes of the result message received on "
                                           "results (for a result in parts: the manifest's), e.g. "
                                           "hashlib.sha256(payload).hexdigest()")


@dataclass(frozen=True, slots=True)
class Ack:
    """A well-formed acknowledgement. ``result_sha256`` is None for one without the hash (the
    1.0 form, or a forgery from the public key): the relay refuses it for a held result."""

    idempotency_key: str
    result_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class BadAck:
    reason: str


def parse_ack(payload: bytes) -> Ack | BadAck:
    """The acknowledged key, or why the payload is not an acknowledgement at all (a bad
    message; a well-formed key this backend does not hold is the caller's "unknown")."""
    if len(payload) > MAX_ACK_BYTES:
        return BadAck(f"acknowledgement of {len(payload)} bytes (at most {MAX_ACK_BYTES})")
    try:
        msg = ResultAck.model_validate_json(payload, strict=True)
    except ValidationError as exc:
        errors = exc.errors()
        if all(e["type"] == "missing" and tuple(e["loc"]) == ("result_sha256",) for e in errors):
            return Ack(str(json.loads(payload)["idempotency_key"]), None)  # the key is valid: only the hash is missing
        return BadAck(f"not an acknowledgement ({exc.error_count()} error(s): {errors[0]['msg']})")
    return Ack(msg.idempotency_key, msg.result_sha256.lower())


def result_sha256(payload: bytes) -> str:
    """What an acknowledgement of the result message ``payload`` carries: the lowercase hex
    SHA-256 of its exact bytes, as published on ``results`` and kept in the outbox."""
    return hashlib.sha256(payload).hexdigest()


def binds(ack: Ack, payload: bytes) -> bool:
    """Whether ``ack`` names exactly the result message ``payload`` (its hash, not only its key)."""
    return ack.result_sha256 is not None and hmac.compare_digest(ack.result_sha256, result_sha256(payload))


def of_table(table_id: str, key: str) -> bool:
    """Whether ``key`` names a result of ``table_id`` (``{table}:{round}``; a part's key
    ``...#p/n`` is not a result's): an ack on one table's topic never removes another's result."""
    return key.startswith(f"{table_id}:") and "#" not in key


def resend_delay(sends: int, initial: float, cap: float) -> float:
    """Seconds to wait after the ``sends``-th publish of a result before the next one:
    ``initial``, doubling each time, at most ``cap``."""
    return min(cap, initial * (1 << min(max(sends - 1, 0), 30)))  # 1 << n: 2 ** n, typed int
