"""Events into the sans-IO core. Every accepted event is journaled exactly as defined here.

Time is data: each event carries ``at`` (epoch milliseconds) stamped by the driver that
received it, so replaying the journal reproduces every decision and every message byte.
The models double as the wire format of the ``actions`` topic (see ``ACTION_TYPES``).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_serializer, model_validator

from dealer.core.draws import DRAW_PATTERN
from dealer.core.money import to_money

Id = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:\-]+$")]
#: An upper-case word: a decision or action (PLAY, FOLD, RAISE), a dealer step (WASH, LAST_CARD).
Word = Annotated[str, Field(min_length=1, max_length=16, pattern=r"^[A-Z_]+$")]
#: A SHA-256 (of rules) or an HMAC-SHA256 (a signature), lower-case hex.
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    at: int = Field(default=0, ge=0, description="epoch milliseconds, stamped by the receiving driver")


def _command_id() -> Any:
    return Field(default=None, description="the sender's id for this command: a repeat of the same id is answered "
                 "with the original answer and applied once (required on the wire)")


def _round_id() -> Any:
    return Field(default=None, description="the round the command is meant for: a command for another round is "
                 "refused (required on the wire)")


class OpenRound(_Event):
    """A round opens: by the backend's own timer (``auto_rounds``), or by a supervisor's signed
    ``supervisor_open_round`` (then ``supervisor``, ``command_id``, ``issued_at``, ``signature``
    and any ``reason`` are kept, so recall names who opened it and the signature can be checked
    again). Those fields are written only when set: a round the timer opened is journaled as
    before they existed."""

    type: Literal["open_round"] = "open_round"
    round_id: Id
    betting_closes_at: int | None = Field(default=None, ge=0, description="epoch ms deadline of the betting timer")
    context: dict[str, Any] = Field(default_factory=dict, description="what the game carries over from earlier "
                                    "rounds (Seotda: the first seat, the last winner), so that a replay starting "
                                    "at this round needs nothing older")
    draw: Annotated[str, Field(pattern=DRAW_PATTERN)] | None = Field(
        default=None, description="32 bytes from the operating system's CSPRNG, as lowercase hex, drawn by the "
        "service when the round opens: every draw the rulebook calls random (Matgo's first player, Seotda's "
        "first seat) is derived from it (dealer.core.draws), so a replay gives the same answer and nothing public "
        "predicts it. Journal only, never published. Absent in rounds journaled before draws: those replay "
        "with the derivation they were played with")
    supervisor: Id | None = Field(default=None, description="the supervisor whose signed command opened the round "
                                  "(None: the backend's timer opened it)")
    command_id: Id | None = None
    issued_at: int | None = Field(default=None, ge=0)
    signature: Sha256 | None = None
    reason: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    dealer: Id | None = Field(default=None, description="the dealer logged on at the table's station when the "
                              "round opened (dealer_logon), so a replay starting at this round knows who deals it; "
                              "written only when set")

    @model_serializer(mode="wrap")
    def _omit_unsigned(self, handler):  # type: ignore[no-untyped-def]  # pydantic's wrap serializer: handler and output are pydantic's
        out = handler(self)
        if isinstance(out, dict):
            for name in _SIGNED_FIELDS:
                if out.get(name) is None:
                    out.pop(name, None)
        return out


#: What a signed supervisor command leaves in the journal besides its own fields.
_SIGNED_FIELDS = ("supervisor", "command_id", "issued_at", "signature", "reason", "dealer")


class PlaceBet(_Event):
    type: Literal["place_bet"] = "place_bet"
    bet_id: Id
    player_id: Id
    bet_type: Annotated[str, Field(min_length=1, max_length=32)]
    stake: Decimal = Field(description="decimal string in the table currency, e.g. \"10.00\"")
    seat: int | None = Field(default=None, ge=1, le=99, description="the seat, in games whose bets name one")
    round_id: Id | None = Field(default=None, description="the round the bet is meant for: a late bet that "
                                "would otherwise land in a newer round is refused (required on the wire)")
    command_id: Id | None = _command_id()

    @field_validator("stake", mode="before")
    @classmethod
    def _exact(cls, v: object) -> Decimal:
        return to_money(v)  # type: ignore[arg-type]  # a raw value before validation: to_money refuses any other type


class CloseBetting(_Event):
    type: Literal["close_betting"] = "close_betting"
    by: Literal["timer", "dealer", "supervisor"] = "dealer"
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()


class ScanRead(_Event):
    """A valid read of a card code (the code may still be foreign or a duplicate).

    ``burn``: the reader says the card was burned, not dealt (a shoe with a burn mode, such as
    the Bee-Tek's ``[Manual Burn Cards]``): it fills the deal plan's burn position when that
    is the one expected, and is otherwise set aside without a position (docs/scanner-protocol.md
    §10.4). Left out of the JSON when false, so reads journaled before it keep their bytes."""

    type: Literal["scan_read"] = "scan_read"
    reader: str
    code: Annotated[str, Field(min_length=1, max_length=8)]
    seq: int | None = None
    burn: bool = False

    @model_serializer(mode="wrap")
    def _without_default_burn(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not self.burn:
            data.pop("burn", None)
        return data


class ReadFailed(_Event):
    type: Literal["read_failed"] = "read_failed"
    reader: str
    reason: Literal["noread", "misread", "corrupt_frame", "frame_lost", "device_fault", "forged_frame"]
    detail: str = ""


class LinkDown(_Event):
    type: Literal["link_down"] = "link_down"
    link: str
    reason: str = ""


class LinkUp(_Event):
    type: Literal["link_up"] = "link_up"
    link: str


class Resume(_Event):
    """The backend runs again after a restart and its broker link is up (the service submits
    it once per start, at the first connect; without a broker link, right after the replay).

    Every pending decision or turn gets a full window from ``at``: nobody is timed out because
    the backend was down. It counts as ``link``'s ``link_up`` too (the journal may say the
    broker was down when the backend stopped); ``link`` is None for a backend without a broker
    link, and a broker the journal still has down then waits for its own ``link_up``.
    Also submitted with ``link="journal"`` when the journal is writable again after a disk-full
    or I/O-error outage (no input was taken meanwhile): "journal" is never a link the table
    holds down, so it only renews the windows (and waits for the broker if that is down).
    Journaled when it changed something, so a replay reproduces the new deadlines."""

    type: Literal["resume"] = "resume"
    link: str | None = "broker"
    reason: str = "backend restarted"


class SupervisorVoid(_Event):
    """A supervisor's void. From the wire it is accepted only signed (``dealer.edge.signing``); the
    journal keeps the signature, so recall names the supervisor who authenticated it."""

    type: Literal["supervisor_void"] = "supervisor_void"
    supervisor: Id
    reason: Annotated[str, Field(min_length=1, max_length=200)]
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()
    issued_at: int | None = Field(default=None, ge=0, description="epoch ms the supervisor signed it")
    signature: Sha256 | None = Field(
        default=None, description="HMAC-SHA256 by the supervisor's key over the signed command")


class _TableOperation(_Event):
    """A supervisor's table operation (``dealer.core.operations``). From the wire it is accepted only
    signed (``dealer.edge.signing``); the journal keeps who signed it, when, and the signature."""

    supervisor: Id
    reason: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="why, if the supervisor said (1 to 200 characters): journaled and published")
    command_id: Id | None = _command_id()
    issued_at: int | None = Field(default=None, ge=0, description="epoch ms the supervisor signed it")
    signature: Sha256 | None = Field(
        default=None, description="HMAC-SHA256 by the supervisor's key over the signed command")


class SupervisorOpenRound(_TableOperation):
    """A supervisor asks for the next round now. Never journaled as such: the service turns it
    into an :class:`OpenRound` (the round id, the betting deadline and the draw are edge data)
    carrying the signed fields, and that is what the core sees and the journal keeps."""

    type: Literal["supervisor_open_round"] = "supervisor_open_round"


class SupervisorPause(_TableOperation):
    """Pause the table: no new round, no timer runs, the round in play takes nothing that would
    advance it (bets, cards, decisions, actions) until the resume."""

    type: Literal["supervisor_pause"] = "supervisor_pause"


class SupervisorResume(_TableOperation):
    """Resume a paused table: every pending decision or turn gets a full window from ``at``,
    and a round still taking bets a full betting period (``betting_closes_at``, edge data the
    service fills in from the table's ``betting_seconds``)."""

    type: Literal["supervisor_resume"] = "supervisor_resume"
    betting_closes_at: int | None = Field(default=None, ge=0, description="epoch ms: the new betting deadline, "
                                          "used when the round in play is still taking bets")


class SupervisorClose(_TableOperation):
    """Close the table: no new round until it is reopened. A round in play is played to its
    end (its last round); then the table is closed."""

    type: Literal["supervisor_close"] = "supervisor_close"


class SupervisorReopen(_TableOperation):
    """Reopen a closed table (or cancel a close whose last round is still in play)."""

    type: Literal["supervisor_reopen"] = "supervisor_reopen"


#: The table operations the core applies (the open request becomes an OpenRound first).
TableOperation = Union[SupervisorPause, SupervisorResume, SupervisorClose, SupervisorReopen]
TABLE_OPERATIONS: tuple[type[_TableOperation], ...] = (SupervisorPause, SupervisorResume, SupervisorClose,
                                                       SupervisorReopen)


class SecurityEvent(_Event):
    """An input refused for a security reason (bad signature, unknown supervisor, stale or
    reused command). Journaled so auditors see every attempt; it changes nothing at the table."""

    type: Literal["security_event"] = "security_event"
    kind: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z_]+$")]
    role: Annotated[str, Field(min_length=1, max_length=32)]
    detail: Annotated[str, Field(max_length=300)] = ""
    command_id: Annotated[str, Field(max_length=64)] | None = None
    supervisor: Annotated[str, Field(max_length=64)] | None = None


class PlayerDecision(_Event):
    """A player's choice once the deal is complete (Sevenluck: PLAY or FOLD)."""

    type: Literal["player_decision"] = "player_decision"
    player_id: Id
    action: Word
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()


class DecisionTimeout(_Event):
    """The decision timer ran out: every player still undecided gets the default action.
    ``deadline`` is the deadline the timer was armed for: a timer that lost a race with a resume
    (which renewed the window) changes nothing. None in journals written before it was carried."""

    type: Literal["decision_timeout"] = "decision_timeout"
    deadline: int | None = None


class PlayerAction(_Event):
    """A betting action in a peer-to-peer game (stud): ``amount`` is the round total the
    action makes ("make it"), required for BET, BRING_IN and RAISE, optional for ALL_IN.
    Also a choice on a turn that is not a betting turn (Matgo's moves, Seotda's rematch choices)."""

    type: Literal["player_action"] = "player_action"
    player_id: Id
    action: Literal["CHECK", "BET", "BRING_IN", "CALL", "RAISE", "ALL_IN", "FOLD",
                    "X2_RAISE", "QUARTER", "HALF", "MAX", "PLAY", "CHOOSE", "GO", "STOP",
                    "REMATCH", "PLAY_ON", "REJOIN", "SIT_OUT"] = Field(
        description="Seotda also: REMATCH or PLAY_ON on a REMATCH_CHOICE turn (the 9·4 holder, "
        "REMATCH_94_MODE = PROMPT), REJOIN or SIT_OUT on a REENTRY turn (REMATCH_REENTRY = HALF_POT)")
    amount: Decimal | None = Field(default=None, description="decimal string: the player's total for this "
                                   "betting round after the action")
    card: Annotated[str, Field(min_length=1, max_length=8, pattern=r"^[0-9A-Z]+$")] | None = Field(
        default=None, description="Matgo: the card a PLAY or CHOOSE names")
    turn: int | None = Field(default=None, ge=1, description="the turn (from your_turn) the action answers: an "
                             "action for a turn that is over is refused instead of landing on a later one")
    reserve: bool = Field(default=False, description="Seotda: reserve this action before the player's turn; it "
                          "runs on their turn if still legal (seotda.md §6.2)")
    round_id: Id | None = Field(default=None, description="the round the action is meant for (required on the wire)")
    command_id: Id | None = _command_id()

    @field_validator("amount", mode="before")
    @classmethod
    def _exact(cls, v: object) -> Decimal | None:
        return None if v is None else to_money(v)  # type: ignore[arg-type]  # a raw value before validation: to_money refuses any other type


class ActionTimeout(_Event):
    """The turn timer ran out: the player to act gets the default action. ``turn`` names the
    turn the timer was armed for, so a timer that lost a race with the player changes nothing;
    ``deadline`` the turn's deadline, so one that lost a race with a resume (the same turn, a
    renewed deadline) changes nothing either (None in journals written before it was carried)."""

    type: Literal["action_timeout"] = "action_timeout"
    turn: int = Field(ge=1)
    deadline: int | None = None


class DealerConfirm(_Event):
    """The dealer confirms a step that is not scanned (stud: ``WASH``, ``SHUFFLE``)."""

    type: Literal["dealer_confirm"] = "dealer_confirm"
    step: Word
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()


class ConfirmTimeout(_Event):
    """The window of a timed confirmation ran out (stud's ``LAST_CARD``, the moment after the
    7th cards in which the station may report an exposed one, seven-card-stud.md §3.5): the
    step is taken as confirmed. From the service's timer only, never from the wire; journaled
    so a replay takes the same step at the same point. ``deadline``: the window's deadline the
    timer was armed for (a window renewed by a resume meanwhile is not closed by the old timer;
    None in journals written before it was carried)."""

    type: Literal["confirm_timeout"] = "confirm_timeout"
    step: Word
    deadline: int | None = None


class CardExposed(_Event):
    """The dealer station reports that a face-down card was exposed while dealing (stud §3.5).

    Its word alone shows nothing: the report waits (``exposure_reported``, without the card)
    until a supervisor corroborates it (:class:`SupervisorExpose`); only then does the card
    play face up. Rules journaled before exposures needed the supervisor replay the report as
    the exposure it then was (the game's ``legacy_options``, :mod:`dealer.core.game_contract`)."""

    type: Literal["card_exposed"] = "card_exposed"
    position: Annotated[str, Field(min_length=1, max_length=16, pattern=r"^[A-Z0-9.]+$")]
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()


class SupervisorExpose(_Event):
    """A supervisor corroborates an exposure the dealer station reported (stud §3.5): the card
    ``card`` lies face up as seat ``seat``'s card the rule concerns (stud: its 7th). It plays
    exposed only when the station reported that very card, the rules still allow it, and
    ``card`` is the card registered there; anything else is refused and changes nothing. From
    the wire it is accepted only signed (``dealer.edge.signing``); the journal keeps who signed
    it, when, and the signature."""

    type: Literal["supervisor_expose"] = "supervisor_expose"
    supervisor: Id
    seat: int = Field(ge=1, le=99, description="the seat whose card lies face up")
    card: Annotated[str, Field(min_length=1, max_length=8, pattern=r"^[A-Za-z0-9]+$",
                               description="the card the supervisor sees face up, e.g. 5C")]
    reason: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    round_id: Id | None = _round_id()
    command_id: Id | None = _command_id()
    issued_at: int | None = Field(default=None, ge=0, description="epoch ms the supervisor signed it")
    signature: Sha256 | None = Field(
        default=None, description="HMAC-SHA256 by the supervisor's key over the signed command")


class DealerLogon(_Event):
    """A dealer logs on at the table's station (a dealer change): the rounds from now on are dealt
    by ``dealer_id``. Who dealt which round is part of every result (``dealers``), of ``dealer
    recall`` and of the per-dealer figures on ``history`` (UKGC RTS 17A: by staff member). It is
    about the table, not a round: no ``round_id``."""

    type: Literal["dealer_logon"] = "dealer_logon"
    dealer_id: Id
    command_id: Id | None = _command_id()


class ResultDelivered(_Event):
    """Settlement acknowledged the round's result (its idempotency key, on ``results/ack``):
    every outbox row of that result is deleted in the same commit. Journals written before
    acknowledgements meant the broker's PUBACK and carry ``outbox_id`` only."""

    type: Literal["result_delivered"] = "result_delivered"
    round_id: Id
    idempotency_key: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    outbox_id: int | None = None


class RulesChanged(_Event):
    """The table's effective rules from now on (``dealer.core.rules``): journaled by the service at
    start-up whenever their hash or the software version differs from the last one journaled
    for the table. A round in play keeps the rules it opened with; the next round opens under
    these. Journal only, never from the wire."""

    type: Literal["table_rules"] = "table_rules"
    rules: Annotated[str, Field(min_length=2, max_length=100_000)] = Field(
        description="canonical JSON of the effective rules (dealer.core.rules.canonical_rules)")
    rules_hash: Sha256 = Field(description="SHA-256 of rules")
    software_version: Annotated[str, Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _hash(self) -> "RulesChanged":
        if hashlib.sha256(self.rules.encode()).hexdigest() != self.rules_hash:
            raise ValueError("rules_hash is not the SHA-256 of rules")
        return self


Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]


class KeysChanged(_Event):
    """The keys that authenticate the table's inputs from now on, by fingerprint (never the keys):
    journaled by the service when a reload (SIGHUP) changes the table's scanner keys or the keys
    of a supervisor who may command it, so an auditor sees which keys were in force when.
    Journal only, never from the wire; it changes nothing at the table."""

    type: Literal["keys_changed"] = "keys_changed"
    scanner: Annotated[list[Fingerprint], Field(max_length=16)] | None = Field(
        default=None, description="the scanner's key fingerprints now (None: unchanged)")
    supervisors: Annotated[dict[Annotated[str, Field(max_length=64)], Annotated[list[Fingerprint], Field(max_length=16)]],
                           Field(max_length=256)] | None = Field(
        default=None, description="each supervisor who may command the table whose keys changed: its fingerprints "
                                  "now (an empty list: no longer a supervisor of the table)")


Event = Annotated[
    Union[OpenRound, PlaceBet, CloseBetting, ScanRead, ReadFailed, LinkDown, LinkUp, Resume, SupervisorVoid,
          PlayerDecision, DecisionTimeout, PlayerAction, ActionTimeout, DealerConfirm, ConfirmTimeout, CardExposed,
          ResultDelivered, SecurityEvent, RulesChanged, SupervisorPause, SupervisorResume, SupervisorClose,
          SupervisorReopen, DealerLogon, KeysChanged, SupervisorExpose],
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

#: Every command a client may send (``dealer.edge.roles`` says which role sends which, on which topic).
Action = Annotated[Union[PlaceBet, PlayerDecision, PlayerAction, DealerConfirm, CardExposed, CloseBetting,
                         DealerLogon, SupervisorVoid, SupervisorExpose], Field(discriminator="type")]
ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)
#: What the player platform sends on ``.../actions``.
PlayerCommand = Annotated[Union[PlaceBet, PlayerDecision, PlayerAction], Field(discriminator="type")]
PLAYER_COMMAND_ADAPTER: TypeAdapter[PlayerCommand] = TypeAdapter(PlayerCommand)
#: What a dealer station sends on ``.../station``.
StationCommand = Annotated[Union[CloseBetting, DealerConfirm, CardExposed, DealerLogon], Field(discriminator="type")]
STATION_COMMAND_ADAPTER: TypeAdapter[StationCommand] = TypeAdapter(StationCommand)
