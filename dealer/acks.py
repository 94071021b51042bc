"""Settlement acknowledgements (``studio/v1/tables/{table}/results/ack``): the pure part.

A result stays in the outbox until settlement says it applied it; a PUBACK only says the
broker took it, and a broker can still lose it (queue limits, session expiry, a crash, a
consumer that never subscribed). This module judges an acknowledgement's payload and says
when an unacknowledged result goes out again. No IO.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: An acknowledgement is small: its key and a few fields of the consumer's own (bounded).
MAX_ACK_BYTES = 4096
MAX_KEY_CHARS = 200


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
        msg = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        return BadAck(f"not JSON: {exc}")
    key = msg.get("idempotency_key") if isinstance(msg, dict) else None
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
        return BadAck("no idempotency_key (a string of at most 200 characters)")
    return Ack(key)


def of_table(table_id: str, key: str) -> bool:
    """Whether ``key`` names a result of ``table_id`` (``{table}:{round}``; a part's key
    ``...#p/n`` is not a result's): an ack on one table's topic never removes another's result."""
    return key.startswith(f"{table_id}:") and "#" not in key


def resend_delay(sends: int, initial: float, cap: float) -> float:
    """Seconds to wait after the ``sends``-th publish of a result before the next one:
    ``initial``, doubling each time, at most ``cap``."""
    return min(cap, initial * 2 ** min(max(sends - 1, 0), 30))
