"""Settlement acknowledgements (``studio/v1/tables/{table}/results/ack``): the pure part.

A result stays in the outbox until settlement says it applied it; a PUBACK only says the
broker took it, and a broker can still lose it (queue limits, session expiry, a crash, a
consumer that never subscribed). This module judges an acknowledgement's payload and says
when an unacknowledged result goes out again. No IO.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: An acknowledgement is small: its key and a few fields of the consumer's own (bounded).
MAX_ACK_BYTES = 4096
MAX_KEY_CHARS = 200


class ResultAck(BaseModel):
    """What settlement publishes on ``results/ack`` once it has applied (committed) a result.
    Fields of settlement's own (a ledger id, a timestamp) are allowed; the whole payload is at
    most 4096 bytes (MAX_ACK_BYTES)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    idempotency_key: str = Field(min_length=1, max_length=MAX_KEY_CHARS,
                                 description="the idempotency_key of the applied result, e.g. TP1:TP1-000042")


@dataclass(frozen=True, slots=True)
class Ack:
    idempotency_key: str


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
        return BadAck(f"not an acknowledgement ({exc.error_count()} error(s): {exc.errors()[0]['msg']})")
    return Ack(msg.idempotency_key)


def of_table(table_id: str, key: str) -> bool:
    """Whether ``key`` names a result of ``table_id`` (``{table}:{round}``; a part's key
    ``...#p/n`` is not a result's): an ack on one table's topic never removes another's result."""
    return key.startswith(f"{table_id}:") and "#" not in key


def resend_delay(sends: int, initial: float, cap: float) -> float:
    """Seconds to wait after the ``sends``-th publish of a result before the next one:
    ``initial``, doubling each time, at most ``cap``."""
    return min(cap, initial * 2 ** min(max(sends - 1, 0), 30))
