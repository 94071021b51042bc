"""Signed supervisor commands (docs/mqtt-topics.md §10). Pure: no IO, no clock.

Broker credentials say which *client* published; they do not say which supervisor meant
it, and anyone holding a station's or the platform's password could otherwise void a
round. So a supervisor command is an HMAC-SHA256 signature by that supervisor's own key
over the command's **canonical bytes**: the JSON object without ``signature``, keys
sorted, separators ``,`` and ``:``, UTF-8, no ASCII escaping (RFC 8785 JCS for the value
types a command holds: strings, integers up to 2**53 - 1, booleans, null, objects).

* :func:`canonical_bytes`, :func:`sign`, :func:`sign_command`: what a signer does.
* :func:`content_digest`: SHA-256 of the canonical bytes, i.e. of the content *without*
  the signature. The same command signed again (a retry, or with the new key during a
  rotation) has the same digest; a command id reused for other content has another one.
* :class:`SupervisorVerifier`: what the backend does with one received payload
  (``verify_payload``) or parsed object (``verify``). It answers :class:`Verified` (who
  signed, with which key, what for) or :class:`Refused` (a low-cardinality ``kind`` for
  metrics and a human ``reason`` that never echoes the signature or a key). Time is an
  argument (``now_ms``).

Adding a command type is one more :class:`SignedCommand` subclass with its own ``type``
literal and fields, registered in ``COMMAND_TYPES``; the envelope fields, the canonical form
and the signature scheme stay the same. The table operations (``supervisor_open_round``,
``supervisor_pause``, ``supervisor_resume``, ``supervisor_close``, ``supervisor_reopen``:
:class:`TableCommand`) are about the table, not a round: they carry no ``round_id``.
``supervisor_expose`` corroborates an exposed card the dealer station reported (stud §3.5).

A genuine command too old or from the future is refused (replay protection) with a reason
that says how far the console's clock and the backend's are apart and which one to fix
(:func:`clock_advice`): the backend passes how far its own wall clock stepped since it started.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from dealer.core.events import Id

MIN_KEY_LEN = 16  # bytes, as for scanner keys; 32 random bytes are recommended
MAX_SAFE_INT = 2**53 - 1  # JCS numbers are IEEE doubles: larger integers would not round-trip
SIGNATURE_FIELD = "signature"
_FIELD_RE = re.compile(r"[A-Za-z0-9_]{1,32}")  # a field name we may repeat in a reason
_ID_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")  # dealer.core.events.Id, for values we may repeat in a reason

TableId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,32}$")]
Signature = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="HMAC-SHA256 of the canonical bytes, "
                                 "64 lowercase hex digits")]

#: Every ``Refused.kind``, so a metric can have all its series from the start.
REFUSAL_KINDS = ("malformed", "missing_signature", "unknown_supervisor", "bad_signature", "wrong_table",
                 "not_allowed_table", "stale", "future")


# --- the canonical form ---------------------------------------------------------------------


def _check_value(value: Any, where: str) -> None:
    """Only JSON values whose JCS form is Python's compact form (no floats, no huge ints)."""
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INT:
            raise ValueError(f"{where}: integer outside ±(2**53 - 1) has no canonical form")
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where}: object keys must be strings")
            _check_value(v, f"{where}.{k}")
        return
    if isinstance(value, float):
        raise ValueError(f"{where}: a number with a fraction or exponent has no canonical form here (use integers)")
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON value of a command")


def canonical_bytes(command: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: ``command`` without its ``signature`` key, as
    ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in UTF-8.
    Raises ValueError for anything without a canonical form (floats, integers beyond
    2**53 - 1, lists, non-string keys, lone surrogates)."""
    if not isinstance(command, Mapping):
        raise ValueError("a command is a JSON object")
    body = {k: v for k, v in command.items() if k != SIGNATURE_FIELD}
    _check_value(body, "command")
    try:
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("command: a string holds a lone surrogate (not valid Unicode)") from None


def key_fingerprint(key: bytes) -> str:
    """A supervisor key's public name (16 hex digits of a domain-separated SHA-256): what metrics
    and the journal say, never the key."""
    return hashlib.sha256(b"studio.v1.supervisor-key\x00" + key).hexdigest()[:16]


def _check_key(key: bytes) -> None:
    if len(key) < MIN_KEY_LEN:
        raise ValueError(f"a {len(key)}-byte key is too short: at least {MIN_KEY_LEN} bytes are needed "
                         "(32 random bytes are recommended)")


def sign(key: bytes, command: Mapping[str, Any]) -> str:
    """HMAC-SHA256 of ``canonical_bytes(command)`` under ``key``, 64 lowercase hex digits.
    A ``signature`` already in ``command`` is not covered (and so ignored)."""
    _check_key(key)
    return hmac.new(key, canonical_bytes(command), hashlib.sha256).hexdigest()


def sign_command(key: bytes, command: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``command`` with its ``signature`` (last key, as on the wire)."""
    body = {k: v for k, v in command.items() if k != SIGNATURE_FIELD}
    return {**body, SIGNATURE_FIELD: sign(key, body)}


def content_digest(command: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical bytes, the signature excluded: what identifies a
    command's *content*. Two deliveries of one command share it, whichever valid key signed
    them; the same ``command_id`` with another digest is a reuse with different content."""
    return hashlib.sha256(canonical_bytes(command)).hexdigest()


# --- the envelopes --------------------------------------------------------------------------


class SignedCommand(BaseModel):
    """The envelope every supervisor command shares. Strict: no extra keys, no coercion
    (``"issued_at": "1767261690000"`` or ``1767261690000.0`` is malformed)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    #: Fields that are the envelope, not the command's body.
    ENVELOPE: ClassVar[frozenset[str]] = frozenset(
        {"type", "command_id", "supervisor", "table_id", "round_id", "issued_at", SIGNATURE_FIELD})

    type: str
    command_id: Id = Field(description="unique per command; a redelivery carries the same id")
    supervisor: Id = Field(description="the supervisor whose key signed the command")
    table_id: TableId = Field(description="the table the command is for (must be the topic's table)")
    round_id: Id | None = Field(description="the round the command is for (table commands: none)")
    issued_at: int = Field(ge=0, le=MAX_SAFE_INT, description="epoch milliseconds when the supervisor issued it")
    signature: Signature

    def body(self) -> dict[str, Any]:
        """The command itself: ``type`` and the fields of this command type."""
        data = self.model_dump()
        return {k: v for k, v in data.items() if k == "type" or k not in self.ENVELOPE}


def _check_text(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in v):
        raise ValueError("must not contain control characters or lone surrogates")
    return v


class SupervisorVoidCommand(SignedCommand):
    """Void the round ``round_id`` at ``table_id``: every accepted bet is refunded."""

    type: Literal["supervisor_void"]
    round_id: Id = Field(description="the round to void")
    reason: Annotated[str, Field(min_length=1, max_length=200, description="why (1 to 200 characters, "
                                 "no control characters), journaled and shown in the result")]

    _text = field_validator("reason")(classmethod(lambda cls, v: _check_text(v)))


class SupervisorExposeCommand(SignedCommand):
    """Confirm the exposure the dealer station reported at ``table_id`` in round ``round_id``:
    seat ``seat``'s card the rule concerns (stud: its 7th) lies face up and is ``card``."""

    type: Literal["supervisor_expose"]
    round_id: Id = Field(description="the round in play")
    seat: int = Field(ge=1, le=99, description="the seat whose card lies face up")
    card: Annotated[str, Field(pattern=r"^[A-Za-z0-9]{1,8}$", description="the card seen face up, e.g. 5C: the "
                               "backend checks it is the card registered there")]
    reason: Annotated[str, Field(min_length=1, max_length=200, description="why (optional, 1 to 200 characters, "
                                 "no control characters), journaled")] | None = None

    @field_validator("reason")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        return None if v is None else _check_text(v)


class TableCommand(SignedCommand):
    """A table operation (``dealer.core.operations``): about the table, so no ``round_id`` (leave it
    out, or null); an optional ``reason``, journaled and shown on the station."""

    round_id: None = Field(default=None, description="table commands name no round: leave it out (or null)")
    reason: Annotated[str, Field(min_length=1, max_length=200, description="why (optional, 1 to 200 characters, "
                                 "no control characters), journaled and shown on the station")] | None = None

    @field_validator("reason")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        return None if v is None else _check_text(v)

    @field_validator("round_id", mode="before")
    @classmethod
    def _no_round(cls, v: object) -> None:
        if v is not None:
            raise ValueError("a table command names no round: leave round_id out")
        return None


class SupervisorOpenRoundCommand(TableCommand):
    """Open the table's next round now (the way a table with ``auto_rounds = false`` plays)."""

    type: Literal["supervisor_open_round"]


class SupervisorPauseCommand(TableCommand):
    """Pause the table: no new round; the round in play stands still, its timers stopped."""

    type: Literal["supervisor_pause"]


class SupervisorResumeCommand(TableCommand):
    """Resume a paused table: every pending decision, turn or betting period in full again."""

    type: Literal["supervisor_resume"]


class SupervisorCloseCommand(TableCommand):
    """Close the table: no new round until it is reopened (a round in play is played out)."""

    type: Literal["supervisor_close"]


class SupervisorReopenCommand(TableCommand):
    """Reopen a closed table (or cancel a close while its last round is still in play)."""

    type: Literal["supervisor_reopen"]


#: ``type`` -> envelope model. A new supervisor command is added here and to ``SupervisorCommand``.
COMMAND_TYPES: dict[str, type[SignedCommand]] = {
    "supervisor_void": SupervisorVoidCommand,
    "supervisor_open_round": SupervisorOpenRoundCommand,
    "supervisor_pause": SupervisorPauseCommand,
    "supervisor_resume": SupervisorResumeCommand,
    "supervisor_close": SupervisorCloseCommand,
    "supervisor_reopen": SupervisorReopenCommand,
    "supervisor_expose": SupervisorExposeCommand,
}
SupervisorCommand = Annotated[Union[SupervisorVoidCommand, SupervisorOpenRoundCommand, SupervisorPauseCommand,
                                    SupervisorResumeCommand, SupervisorCloseCommand, SupervisorReopenCommand,
                                    SupervisorExposeCommand],
                              Field(discriminator="type")]
#: The wire schema of the ``supervisor`` topic (docs/schemas/supervisor-command.json).
SUPERVISOR_COMMAND_ADAPTER: TypeAdapter[SupervisorCommand] = TypeAdapter(SupervisorCommand)


def parse_command(obj: Mapping[str, Any]) -> SignedCommand:
    """Validate ``obj`` as the envelope of its ``type``; ValueError (a clear reason that
    never echoes a value) when it is not one."""
    if not isinstance(obj, Mapping):
        raise ValueError("a supervisor command is a JSON object")
    kind = obj.get("type")
    model = COMMAND_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(COMMAND_TYPES)
        if kind is None:
            raise ValueError(f"no 'type' (known: {known})")
        shown = repr(kind) if isinstance(kind, str) and _ID_RE.fullmatch(kind) else "given"
        raise ValueError(f"the type {shown} is not a supervisor command (known: {known})")
    try:
        return model.model_validate(dict(obj))
    except ValidationError as exc:
        raise ValueError(validation_reason(exc)) from None


def validation_reason(exc: ValidationError) -> str:
    """pydantic's errors as one line, field by field, without the offending values."""
    parts = []
    for e in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(x) if _FIELD_RE.fullmatch(str(x)) else "(a field)" for x in e["loc"]) or "(object)"
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


# --- verification ---------------------------------------------------------------------------

MAX_PAYLOAD = 4096  # bytes: a supervisor_void is about 300


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} appears twice" if _FIELD_RE.fullmatch(k) else "a key appears twice")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_payload(payload: bytes) -> Any:
    """The JSON value of ``payload``; ValueError with a short reason when it is too large,
    not UTF-8, not JSON, has a key twice or holds NaN/Infinity."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"{len(payload)} bytes, more than the {MAX_PAYLOAD} a command may have")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


@dataclass(frozen=True, slots=True)
class Verified:
    """A genuine, fresh command for this table, signed by ``supervisor``."""

    supervisor: str
    command_id: str
    table_id: str
    round_id: str | None  # None: a table command
    issued_at: int
    command: dict[str, Any]  # the body: {"type": "supervisor_void", "reason": "..."}
    key_index: int  # which of the supervisor's keys verified it (0 = the first key file)
    digest: str  # content_digest(): same command id with another digest = reuse
    envelope: SignedCommand = field(repr=False)


@dataclass(frozen=True, slots=True)
class Refused:
    """Not acted on. ``kind`` is one of ``REFUSAL_KINDS``; ``reason`` says what is wrong.
    ``supervisor`` and ``command_id`` are what the object *claims* (None when absent or not
    a valid id): never authenticated unless the signature verified (``authenticated``).
    ``skew_ms``: a genuine ``stale`` or ``future`` command's ``issued_at`` minus the receive
    time (the console's clock minus the backend's, transit included)."""

    kind: str
    reason: str
    supervisor: str | None = None
    command_id: str | None = None
    authenticated: bool = False
    skew_ms: int | None = None


def _seconds(ms: int) -> str:
    s = abs(ms) / 1000
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def clock_advice(skew_ms: int, step_ms: int | None, *, max_age_ms: int, max_skew_ms: int) -> str:
    """Which clock to fix, for a genuine command refused as stale or future. ``skew_ms``: its
    ``issued_at`` minus the receive time; ``step_ms``: how far the backend's wall clock has
    stepped since it started (measured against its monotonic clock; None: not known). When the
    backend's step explains the refusal (without it the command would have been fresh), the
    backend's clock is the one to fix; otherwise the console's."""
    apart = _seconds(skew_ms)
    if step_ms is not None and abs(step_ms) >= 1000 and -max_skew_ms <= skew_ms + step_ms <= max_age_ms:
        direction = "forward" if step_ms > 0 else "back"
        return (f"the clocks differ by {apart}: this backend's clock stepped {_seconds(step_ms)} {direction} "
                "since it started: fix this backend host's clock (NTP/chrony), not the console's")
    side = "behind" if skew_ms < 0 else "ahead of"
    steady = ", which has not stepped since it started" if step_ms is not None else ""
    return (f"the clocks differ by {apart}: the signing console's clock is {side} this backend's{steady}: "
            "fix the console's clock (NTP), then sign the act again")


class SupervisorKeys(NamedTuple):
    """One supervisor's keys (any verifies: rotation) and tables (None = every table)."""

    keys: Sequence[bytes]
    tables: Collection[str] | None = None


def _claimed(obj: Mapping[str, Any], name: str) -> str | None:
    v = obj.get(name)
    return v if isinstance(v, str) and _ID_RE.fullmatch(v) else None


class SupervisorVerifier:
    """The supervisors' keys and the freshness window: ``verify`` one received command.

    Checks, in this order (the first failure is the answer): a JSON object of a known
    command type with valid fields (``malformed``, or ``missing_signature`` when only the
    signature is absent), a known supervisor (``unknown_supervisor``), a signature by one
    of its keys (``bad_signature``), the topic's table (``wrong_table``), a table this
    supervisor may command (``not_allowed_table``), then ``issued_at`` against ``now_ms``:
    older than ``max_age_ms`` (``stale``) or more than ``max_skew_ms`` ahead (``future``).
    Authenticity comes before the rest, so a forgery is always reported as one.

    ``verified[supervisor][i]`` counts the commands accepted with key ``i``: when the old
    key of a rotation stays at its count, it can be removed.
    """

    def __init__(self, supervisors: Mapping[str, SupervisorKeys | tuple[Sequence[bytes], Collection[str] | None]],
                 *, max_age_ms: int, max_skew_ms: int) -> None:
        if max_age_ms <= 0:
            raise ValueError(f"max_age_ms must be positive, got {max_age_ms}")
        if max_skew_ms < 0:
            raise ValueError(f"max_skew_ms must not be negative, got {max_skew_ms}")
        self.max_age_ms = max_age_ms
        self.max_skew_ms = max_skew_ms
        self._keys: dict[str, tuple[bytes, ...]] = {}
        self._tables: dict[str, frozenset[str] | None] = {}
        for sup, entry in supervisors.items():
            keys, tables = SupervisorKeys(*entry)
            if not _ID_RE.fullmatch(sup):
                raise ValueError(f"supervisor id {sup!r} must match [A-Za-z0-9_.:-]{{1,64}}")
            if not keys:
                raise ValueError(f"supervisor {sup} needs at least one key")
            for i, key in enumerate(keys):
                try:
                    _check_key(key)
                except ValueError as exc:
                    raise ValueError(f"supervisor {sup}, key #{i + 1}: {exc}") from None
            self._keys[sup] = tuple(bytes(k) for k in keys)
            self._tables[sup] = frozenset(tables) if tables else None
        self.verified: dict[str, list[int]] = {sup: [0] * len(k) for sup, k in self._keys.items()}

    @property
    def supervisors(self) -> list[str]:
        return list(self._keys)

    def fingerprints(self, supervisor: str) -> list[str]:
        """The public names of a supervisor's keys, in order (``[]``: not a supervisor here)."""
        return [key_fingerprint(k) for k in self._keys.get(supervisor, ())]

    def may_command(self, supervisor: str, table_id: str) -> bool:
        tables = self._tables.get(supervisor, frozenset())
        return supervisor in self._keys and (tables is None or table_id in tables)

    def verify_payload(self, payload: bytes, topic_table: str, now_ms: int,
                       clock_step_ms: int | None = None) -> Verified | Refused:
        """:meth:`verify` for the raw MQTT payload: UTF-8 JSON of at most ``MAX_PAYLOAD``
        bytes, each key once (``{"reason": "a", "reason": "b"}`` would mean one thing to
        us and maybe another to a log reader), no ``NaN``/``Infinity``."""
        try:
            obj = decode_payload(payload)
        except ValueError as exc:
            return Refused("malformed", f"malformed supervisor command: {exc}")
        return self.verify(obj, topic_table, now_ms, clock_step_ms)

    def verify(self, obj: Any, topic_table: str, now_ms: int, clock_step_ms: int | None = None) -> Verified | Refused:
        """Is ``obj`` (the parsed JSON received on ``topic_table``'s supervisor topic at
        ``now_ms``) a command to act on? Never raises for any input. ``clock_step_ms``: how far
        the backend's wall clock stepped since it started, for a stale or future refusal's advice."""
        if not isinstance(obj, Mapping):
            return Refused("malformed", "a supervisor command is a JSON object")
        sup, cid = _claimed(obj, "supervisor"), _claimed(obj, "command_id")

        def refused(kind: str, reason: str, authenticated: bool = False) -> Refused:
            return Refused(kind, reason, sup, cid, authenticated)

        if obj.get(SIGNATURE_FIELD) is None:
            try:
                parse_command({**obj, SIGNATURE_FIELD: "0" * 64})
            except ValueError as exc:
                return refused("malformed", f"malformed supervisor command: {exc}")
            return refused("missing_signature", "unsigned supervisor command: every supervisor command must be "
                                                "signed with the supervisor's key")
        try:
            cmd = parse_command(obj)
            signed = canonical_bytes(obj)
        except ValueError as exc:
            return refused("malformed", f"malformed supervisor command: {exc}")
        keys = self._keys.get(cmd.supervisor)
        if keys is None:
            return refused("unknown_supervisor", f"supervisor {cmd.supervisor} is not configured "
                                                 "([[security.supervisors]])")
        index = next((i for i, key in enumerate(keys)
                      if hmac.compare_digest(hmac.new(key, signed, hashlib.sha256).hexdigest(), cmd.signature)), None)
        if index is None:
            n = len(keys)
            return refused("bad_signature", f"bad signature: not signed with any of supervisor {cmd.supervisor}'s "
                                            f"{n} key{'s' if n > 1 else ''} (or the command was altered)")
        if cmd.table_id != topic_table:
            return refused("wrong_table", f"command for table {cmd.table_id} received on table {topic_table}'s "
                                          "topic", True)
        allowed = self._tables[cmd.supervisor]
        if allowed is not None and cmd.table_id not in allowed:
            return refused("not_allowed_table", f"supervisor {cmd.supervisor} may not command table "
                                                f"{cmd.table_id} (allowed: {', '.join(sorted(allowed))})", True)
        age = now_ms - cmd.issued_at
        if age > self.max_age_ms or -age > self.max_skew_ms:
            advice = clock_advice(-age, clock_step_ms, max_age_ms=self.max_age_ms, max_skew_ms=self.max_skew_ms)
            if age > self.max_age_ms:
                kind, what = "stale", (f"stale: issued {age} ms before it was received, more than the "
                                       f"{self.max_age_ms} ms allowed")
            else:
                kind, what = "future", (f"issued {-age} ms in the future, more than the {self.max_skew_ms} ms clock "
                                        "skew allowed")
            return Refused(kind, f"{what}: {advice}", sup, cid, True, -age)
        self.verified[cmd.supervisor][index] += 1
        return Verified(supervisor=cmd.supervisor, command_id=cmd.command_id, table_id=cmd.table_id,
                        round_id=cmd.round_id, issued_at=cmd.issued_at, command=cmd.body(), key_index=index,
                        digest=hashlib.sha256(signed).hexdigest(), envelope=cmd)


__all__ = ["COMMAND_TYPES", "MAX_PAYLOAD", "MIN_KEY_LEN", "REFUSAL_KINDS", "SUPERVISOR_COMMAND_ADAPTER", "Refused",
           "SignedCommand", "SupervisorCommand", "SupervisorExposeCommand", "SupervisorKeys", "SupervisorVerifier",
           "SupervisorVoidCommand", "TableCommand", "clock_advice",
           "Verified", "canonical_bytes", "content_digest", "decode_payload", "parse_command", "sign", "sign_command",
           "validation_reason"]
