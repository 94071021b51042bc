"""Ingress: every command from the wire is parsed, authorised by role and bounded here.

A command is judged by the topic it came on (``dealer.edge.roles``): the player platform's
``actions``, the dealer station's ``station`` and the supervisor's ``supervisor`` topic each
accept only their role's command types. On the wire every command must carry a
``command_id`` and the ``round_id`` it means, a turn action also its ``turn``; a supervisor's
command must be signed by that supervisor (``dealer.edge.signing``). What passes becomes one core
event plus the facts the commit loop needs to answer a repeat (:class:`Accepted`); anything
else is a :class:`Refused` with a low-cardinality ``kind`` for the metric and a clear
``reason`` for the sender, and changes nothing.

Pure: no IO; the receive time and the verifier are passed in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, cast

from pydantic import ValidationError

from dealer.core import commands

from dealer.edge import signing
from dealer.core.events import (PLAYER_COMMAND_ADAPTER, STATION_COMMAND_ADAPTER, Event, SupervisorClose,
                           SupervisorExpose, SupervisorOpenRound, SupervisorPause, SupervisorReopen, SupervisorResume,
                           SupervisorVoid)
from dealer.edge.roles import SENDER, TABLE_COMMANDS, TURN_COMMANDS, Role, is_role_user, role_of_topic, wrong_role
from dealer.edge.signing import SupervisorVerifier
from dealer.core.game_contract import HOUSE_PLAYERS  # seats the backend plays itself

MAX_COMMAND_BYTES = 16_384  # no command is anywhere near this: refused before parsing
#: No command nests its JSON deeper than a few levels: deeper is refused before parsing. Without
#: it, whether ``json.loads`` met Python's recursion limit depended on how deep the call stack
#: already was (the fuzzer found a 1,000-level ``round_id`` parsed in one place, refused in another).
MAX_COMMAND_DEPTH = 32

#: Refusal kinds on the supervisor topic that are journaled as security events.
SECURITY_KINDS = frozenset({"malformed", "wrong_role", "missing_signature", "bad_signature", "unknown_supervisor",
                            "stale", "future", "wrong_table", "not_allowed_table", "reused_command_id",
                            "house_player"})


#: A supervisor's table operation -> the event it becomes (the open request becomes an
#: ``OpenRound`` in the service, which adds the round id, the betting deadline and the draw).
TABLE_COMMAND_EVENTS = {"supervisor_open_round": SupervisorOpenRound, "supervisor_pause": SupervisorPause,
                        "supervisor_resume": SupervisorResume, "supervisor_close": SupervisorClose,
                        "supervisor_reopen": SupervisorReopen}


class _Commanded(Protocol):
    """An accepted command's event: every one names its command id (``_missing`` refuses any other)."""

    @property
    def command_id(self) -> str | None: ...


class SupervisorCommand(Protocol):
    """A verified supervisor command's event: it names the supervisor whose key signed it."""

    @property
    def supervisor(self) -> str: ...


class _Signed(TypedDict):
    """The signed fields every supervisor command's event carries."""

    supervisor: str
    command_id: str
    issued_at: int
    signature: str
    at: int


@dataclass(frozen=True, slots=True)
class Accepted:
    table_id: str
    role: Role
    event: Event | SupervisorOpenRound
    digest: str
    #: a supervisor command that was genuine but too old or from the future: refused unless it
    #: is a repeat of a command already accepted (a QoS 1 redelivery gets its answer again)
    late: "Refused | None" = None
    key_index: int | None = None  # a supervisor command: which of the supervisor's keys verified it

    @property
    def command_id(self) -> str:
        # only a command is accepted, and every accepted one names its command id
        return str(cast(_Commanded, self.event).command_id)


@dataclass(frozen=True, slots=True)
class Refused:
    """A command refused at the edge. ``reason`` is always clean UTF-8 (it is published)."""

    table_id: str | None
    role: Role | None
    kind: str  # metric label: malformed, too_large, unknown_table, wrong_role, missing_command_id, ...
    reason: str
    command_type: str = "action"
    command_id: str | None = None
    player_id: str | None = None
    supervisor: str | None = None
    #: a genuine supervisor command refused as stale or future: its ``issued_at`` minus the receive
    #: time (the console's clock minus the backend's), for the clock metric
    skew_ms: int | None = None

    def __post_init__(self) -> None:  # a reason may quote a key of the input: keep it publishable
        clean = self.reason.encode("utf-8", "backslashreplace").decode("utf-8")[:500]
        object.__setattr__(self, "reason", clean)

    @property
    def security(self) -> bool:
        """Journaled as a security event and alerted: anything refused on the supervisor topic,
        and any attempt to send a supervisor's command or speak for a house player."""
        return self.table_id is not None and (
            self.role is Role.SUPERVISOR and self.kind in SECURITY_KINDS
            or self.kind == "house_player"
            or (self.kind == "wrong_role" and SENDER.get(self.command_type) is Role.SUPERVISOR))


def too_deep(payload: bytes, limit: int = MAX_COMMAND_DEPTH) -> bool:
    """Whether ``payload`` nests arrays or objects deeper than ``limit`` (outside strings)."""
    if payload.count(b"[") + payload.count(b"{") <= limit:  # the usual command: no scan
        return False
    depth, in_string, escaped = 0, False, False
    for byte in payload:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def parse(topic: str, payload: bytes, *, tables: AbstractSet[str], now_ms: int,
          supervisors: SupervisorVerifier, clock_step_ms: int | None = None) -> Accepted | Refused:
    """Judge one message from a command topic (see the module doc). ``clock_step_ms``: how far
    the backend's wall clock stepped since it started (a stale or future refusal says which
    clock to fix)."""
    where = role_of_topic(topic)
    if where is None:
        return Refused(None, None, "unknown_topic", f"{topic} is not a command topic")
    tid, role = where
    if tid not in tables:
        return Refused(None, role, "unknown_table", f"command for unknown table {tid!r} on {topic}")
    if len(payload) > MAX_COMMAND_BYTES:
        return Refused(tid, role, "too_large", f"malformed action: larger than {MAX_COMMAND_BYTES} bytes")
    if too_deep(payload):
        return Refused(tid, role, "malformed", f"malformed action: JSON nested deeper than {MAX_COMMAND_DEPTH} levels")
    try:
        obj = json.loads(payload.decode("utf-8"))  # strict UTF-8: raw CESU-8 surrogates are refused here
    except UnicodeDecodeError:
        return Refused(tid, role, "malformed", "malformed action: not UTF-8")
    except (ValueError, RecursionError) as exc:
        return Refused(tid, role, "malformed", f"malformed action: not JSON ({str(exc)[:80]})")
    if not isinstance(obj, dict):
        return Refused(tid, role, "malformed", "malformed action: not a JSON object")
    ctype = obj.get("type")
    # only what is known to be clean is echoed back (a "\ud800" escape makes a lone surrogate)
    ctype_s = ctype if isinstance(ctype, str) and ctype in SENDER else "action"
    cid = _id_of(obj, "command_id")
    player = _id_of(obj, "player_id")
    if isinstance(ctype, str):
        why = wrong_role(ctype, role, tid)
        if why is not None:
            kind = "wrong_role" if ctype in SENDER else "malformed"
            return Refused(tid, role, kind, why if kind == "wrong_role" else f"malformed action: {why}",
                           ctype_s, cid, player)
    if role is Role.SUPERVISOR:
        return _supervisor(payload, tid, now_ms, supervisors, ctype_s, clock_step_ms)
    adapter = PLAYER_COMMAND_ADAPTER if role is Role.PLAYER_PLATFORM else STATION_COMMAND_ADAPTER
    try:
        event = adapter.validate_python(obj)
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        return Refused(tid, role, "malformed", f"malformed action: {reason}", ctype_s, cid, player)
    missing = _missing(event)
    if missing is not None:
        return Refused(tid, role, f"missing_{missing}", f"{event.type} must name its {missing.replace('_', ' ')}",
                       event.type, cid, player)
    player_id = getattr(event, "player_id", None)
    if _reserved_player(player_id):
        return Refused(tid, role, "reserved_player_id", f"player id {player_id!r} is the name of a broker "
                       "role: a player's client logs in with its player id and would read that role's topics "
                       "(or the role a player's hole cards)", event.type, cid)
    if "." in (player_id or ""):
        return Refused(tid, role, "unroutable_player_id", f"player id {player_id!r} holds a '.', so its private "
                       "topic (players/{player_id}) would not be the same on every broker: NATS refuses a '.' in a "
                       "topic and RabbitMQ delivers it as a topic level (another player's topic). Use letters, "
                       "digits, '_', ':' and '-'", event.type, cid)
    if player_id in HOUSE_PLAYERS:
        return Refused(tid, role, "house_player", f"{player_id} is the house AI: its moves come from the "
                       "backend, never from the actions topic", event.type, cid)
    if event.type == "close_betting" and event.by != "dealer":
        return Refused(tid, role, "malformed", f"the dealer station closes betting as 'dealer', not "
                       f"{event.by!r}", event.type, cid)
    event = event.model_copy(update={"at": now_ms})
    return Accepted(tid, role, event, commands.digest(event))


def _missing(event: Any) -> str | None:
    if not getattr(event, "command_id", None):
        return "command_id"
    if not getattr(event, "round_id", None) and event.type not in TABLE_COMMANDS:
        return "round_id"
    if event.type in TURN_COMMANDS and event.turn is None and not event.reserve:
        return "turn"
    return None


def _supervisor(payload: bytes, tid: str, now_ms: int, supervisors: SupervisorVerifier,
                ctype: str = "supervisor_void", clock_step_ms: int | None = None) -> Accepted | Refused:
    """A signed supervisor command (``dealer.edge.signing``): genuine and fresh, or refused. A genuine
    one that is too old (or from the future) is passed on marked ``late``: the commit loop
    answers it if it repeats a command already accepted (a QoS 1 redelivery), else refuses it."""
    outcome = supervisors.verify_payload(payload, tid, now_ms, clock_step_ms)
    late: Refused | None = None
    key_index: int | None = None  # a late command's key is not counted (it is refused unless a repeat)
    if isinstance(outcome, signing.Refused):
        shown = ctype if ctype.startswith("supervisor_") else "supervisor_void"  # only a known type is echoed
        refusal = Refused(tid, Role.SUPERVISOR, outcome.kind, outcome.reason, shown,
                          outcome.command_id, supervisor=outcome.supervisor, skew_ms=outcome.skew_ms)
        if outcome.kind not in ("stale", "future") or not outcome.authenticated:
            return refusal
        late = refusal
        cmd = signing.parse_command(signing.decode_payload(payload))  # verified: it parses
        sup, cid, rid, issued, body = cmd.supervisor, cmd.command_id, cmd.round_id, cmd.issued_at, cmd.body()
        signature = cmd.signature
    else:
        sup, cid, rid, issued, body = (outcome.supervisor, outcome.command_id, outcome.round_id, outcome.issued_at,
                                       outcome.command)
        signature = outcome.envelope.signature
        key_index = outcome.key_index
    signed: _Signed = {"supervisor": sup, "command_id": cid, "issued_at": issued, "signature": signature, "at": now_ms}
    event: Event | SupervisorOpenRound
    if body["type"] == "supervisor_void":
        event = SupervisorVoid(reason=body["reason"], round_id=rid, **signed)
    elif body["type"] == "supervisor_expose":
        event = SupervisorExpose(seat=body["seat"], card=body["card"], reason=body.get("reason"), round_id=rid,
                                 **signed)
    else:
        event = TABLE_COMMAND_EVENTS[body["type"]](reason=body.get("reason"), **signed)
    return Accepted(tid, Role.SUPERVISOR, event, commands.digest(event), late, key_index=key_index)


_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")
def _reserved_player(pid: object) -> bool:
    return isinstance(pid, str) and is_role_user(pid)


def _id_of(obj: dict[str, Any], name: str) -> str | None:
    """A field of a command that is a valid id (to name it in an answer), else None. A player id
    with a '.' is never named: the answer would go to its private topic, which no broker
    routes alike (docs/brokers.md)."""
    v = obj.get(name)
    ok = isinstance(v, str) and _ID.fullmatch(v) and not (name == "player_id" and "." in v)
    return v if ok else None


__all__ = ["Accepted", "MAX_COMMAND_BYTES", "Refused", "TABLE_COMMAND_EVENTS", "parse"]
