"""Messages the backend publishes (pydantic v2). Their JSON Schemas live in ``docs/schemas/``.

A table's public path is one retained :class:`TableState` per journaled batch (protocol 2, see
``docs/mqtt-topics.md``): the round state, the current :class:`StationPrompt`, and the
:class:`RoundEvent` and prompts of the batch, so that a client subscribing at any moment catches
up at once (``dealer/edge/catchup.py``) and one that stays misses nothing. Beside it:
``results`` (one :class:`RoundResult` per round, durable via the outbox), ``events`` (refusals,
as :class:`RoundEvent` ``rejected``), each player's :class:`PlayerMessage` and retained
:class:`PlayerState`. Money travels as decimal strings; ratios are "X" in "X:1".
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from dealer.core.game_records import Outcome
from dealer.core.money import Rounding


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BetTypeResult(_Msg):
    """How every bet of one type resolves; amounts follow from :func:`dealer.core.settlement.settle_bet`."""

    outcome: Outcome
    ratio: Decimal = Field(description="X of X:1, meaningful for WIN (the stake is returned on top)")
    category: str | None = None
    bonus_ratio: Decimal = Field(default=Decimal(0), description="extra X times the stake paid whatever the "
                                 "outcome (Sevenluck Ante Bonus); never returns the stake by itself")
    returned: Decimal | None = Field(default=None, description="peer-to-peer games (stud): the exact amount "
                                     "handed back for this bet, stake included; replaces the ratio arithmetic")


class HandResult(_Msg):
    cards: list[str]
    category: str


class BetsSummary(_Msg):
    """The bets the backend accepted before betting closed, for settlement to reconcile."""

    count: int = 0
    stakes: dict[str, Decimal] = Field(default_factory=dict, description="total stake per bet type")
    bet_ids: list[str] = Field(default_factory=list, description="every accepted bet id, in acceptance order: "
                               "settle exactly these; a bet not listed was never accepted. Empty in a manifest "
                               "(parts > 0): the ids are in its RoundResultPart messages")
    parts: int = Field(default=0, ge=0, description="0: bet_ids is the whole list. n > 0: this result is a "
                       "manifest and the ids travel in n RoundResultPart messages (docs/mqtt-topics.md)")
    digest: str = Field(default="", description="manifests only: SHA-256 (hex) of the ids in acceptance order, "
                        "each followed by a line feed (dealer.core.result_parts.bet_ids_digest)")
    players_digest: str = Field(default="", description="manifests whose player_bets and decisions moved to the "
                                "parts too (too many players for one message): SHA-256 (hex) of their canonical "
                                "JSON (dealer.core.result_parts.players_digest); empty when they are in the manifest")

    @model_serializer(mode="wrap")
    def _inline(self, handler):  # type: ignore[no-untyped-def]  # pydantic's wrap serializer: handler and output are pydantic's
        """A result with its ids inline (parts = 0) is written as before parts existed."""
        out = handler(self)
        if self.parts == 0 and isinstance(out, dict):
            out.pop("parts", None)
            out.pop("digest", None)
        if not self.players_digest and isinstance(out, dict):
            out.pop("players_digest", None)
        return out


class DecisionRecord(_Msg):
    """What a decider chose, and whether the player chose it or the timer did."""

    action: str
    by: Literal["player", "timeout"]
    seat: int | None = None
    play_stake: Decimal | None = Field(default=None, description="the Play bet this decision created, if any")


class MoneyRules(_Msg):
    currency: str
    minor_unit: Decimal
    rounding: Rounding


class RoundResult(_Msg):
    """The single settlement instruction for a round. ``idempotency_key`` is unique per round."""

    schema_id: Literal["studio.v1.round_result"] = "studio.v1.round_result"
    idempotency_key: str
    table_id: str
    round_id: str
    game: str
    outcome: Literal["COMPLETED", "CANCELLED", "VOIDED"]
    reason: str | None = None
    refund_all: bool
    cards: dict[str, str] = Field(default_factory=dict, description="position -> card code of every card shown "
                                  "publicly (face up, or revealed by the rules); burn cards, folded hands, an "
                                  "uncontested winner's and a cancelled or voided round's hole cards are only in "
                                  "the journal")
    hands: dict[str, HandResult] = Field(default_factory=dict)
    winner: str | None = None
    bets: dict[str, BetTypeResult] = Field(default_factory=dict, description="by bet type, the same for every "
                                           "player; empty when refund_all")
    player_bets: dict[str, dict[str, BetTypeResult]] = Field(
        default_factory=dict, description="player id -> bet type -> resolution, in games where players decide")
    decisions: dict[str, DecisionRecord] = Field(default_factory=dict, description="player id -> decision")
    details: dict[str, Any] = Field(default_factory=dict)
    accepted_bets: BetsSummary
    money: MoneyRules
    opened_at: int
    closed_at: int | None = None
    finished_at: int
    rules_hash: str = Field(default="", description="SHA-256 (hex) of the canonical form of the table rules the "
                            "round was played under, as journaled in its table_rules event (program identification)")
    software_version: str = Field(default="", description="version of the backend software journaled with those "
                                  "rules, i.e. the software the round opened under")
    dealers: list[str] = Field(default_factory=list, description="who dealt the round: the dealer logged on at the "
                               "station when it opened, then any who logged on while it was in play (dealer_logon); "
                               "left out when nobody was logged on")

    @model_serializer(mode="wrap")
    def _omit_no_dealer(self, handler):  # type: ignore[no-untyped-def]  # pydantic's wrap serializer: handler and output are pydantic's
        """A round dealt with nobody logged on is written as before dealers existed."""
        out = handler(self)
        if not self.dealers and isinstance(out, dict):
            out.pop("dealers", None)
        return out


class RoundResultPart(_Msg):
    """One slice of a manifest result's accepted bet ids: a result too big for one message
    (``[service] max_message_bytes``) travels as a manifest plus ``parts`` of these, on the
    same ``results`` topic. Settlement applies it only when it holds all of them."""

    schema_id: Literal["studio.v1.round_result_part"] = "studio.v1.round_result_part"
    idempotency_key: str
    table_id: str
    round_id: str
    part: int = Field(ge=1, description="1-based index of this part")
    parts: int = Field(ge=1, description="number of parts, as in the manifest's accepted_bets.parts")
    bet_ids: list[str] = Field(description="this part's ids; parts 1..n concatenated are the accepted bet ids "
                               "in acceptance order")
    player_bets: dict[str, dict[str, BetTypeResult]] = Field(
        default_factory=dict, description="when the manifest's players_digest is set: this part's slice of the "
        "result's player_bets (each player in exactly one part)")
    decisions: dict[str, DecisionRecord] = Field(default_factory=dict, description="likewise, of decisions")


PromptKind = Literal["NEXT", "CONFIRM", "RESCAN", "ALERT", "WAIT", "REJECTED", "DONE", "PAUSED", "CLOSED"]

PlayerMessageKind = Literal["bet_accepted", "rejected", "hole_card", "decision_required", "decision_accepted",
                            "your_turn", "action_accepted", "reservation_accepted", "reservation_cancelled"]


class PlayerMessage(_Msg):
    """A message for one player only, on ``.../players/{player_id}``: replies to that player's
    actions, and the hole cards only that player may see (``decks.md`` §3)."""

    schema_id: Literal["studio.v1.player_message"] = "studio.v1.player_message"
    table_id: str
    round_id: str | None = None
    player_id: str
    kind: PlayerMessageKind
    at: int
    data: dict[str, Any] = Field(default_factory=dict)


class StationPrompt(_Msg):
    """What the dealer station shows: the next position to deal, or why to rescan."""

    schema_id: Literal["studio.v1.prompt"] = "studio.v1.prompt"
    table_id: str
    round_id: str | None = None
    kind: PromptKind
    position: str | None = None
    step: int | None = Field(default=None, description="1-based index of position in the deal plan")
    of: int | None = Field(default=None, description="number of positions in the deal plan")
    reason: str | None = None
    count: int | None = Field(default=None, description="identical rejections in a row at this position")
    announce: str | None = Field(default=None, description="what the dealer announces (stud: the low card, "
                                 "the high hand, the winning hand)")
    message: str
    at: int


class RoundEvent(_Msg):
    schema_id: Literal["studio.v1.event"] = "studio.v1.event"
    table_id: str
    round_id: str | None = None
    event: str
    at: int
    data: dict[str, Any] = Field(default_factory=dict)


# --- retained catch-up messages (docs/mqtt-topics.md §4.8) ---------------------------------------

NodeId = Annotated[str, Field(description="the backend that published it ([service].node_id): its liveness is "
                                          "the retained studio/v1/backends/{node_id}/status")]
Session = Annotated[str, Field(description="the backend's broker session (instance and connection) it was "
                                           "published in: current only while that node's retained status is "
                                           "online with this same session (dealer.edge.catchup.is_current)")]
Version = Annotated[int, Field(description="increases with every retained message of this table within a "
                                           "session (prompt, state and player states share it): the highest is "
                                           "the newest")]
Stale = Annotated[bool, Field(description="true: the backend stopped and marked this message stale before going "
                                          "offline; act on nothing in it")]


class TurnState(_Msg):
    turn: int
    player_id: str | None = Field(description="who is to act (public, as in the turn event)")
    street: str | None = None
    closes_at: int | None = Field(default=None, description="the turn's deadline (epoch ms)")


class TableState(_Msg):
    """The table's one public message, retained on ``.../state``: after every journaled batch
    that changed the table, its round state as the public may see it, the current station
    prompt, and what the batch did (its round events and the prompts it released, in order).
    A client that subscribes gets the latest at once (catch-up); one that stays subscribed gets
    every one, so it misses no event and no prompt (protocol 2, docs/mqtt-topics.md §11)."""

    schema_id: Literal["studio.v1.table_state"] = "studio.v1.table_state"
    table_id: str
    game: str
    node_id: NodeId
    session: Session
    version: Version
    stale: Stale = False
    round_id: str | None = Field(default=None, description="the table's latest round (null before its first)")
    phase: str | None = Field(default=None, description="that round's phase: BETTING_OPEN, BETTING_CLOSED, DEALING, "
                              "DECISION, ACTION, RESULT, SETTLED, CANCELLED, VOID")
    position: str | None = Field(default=None, description="the position the deal waits for (BETTING_CLOSED, "
                                 "DEALING)")
    cards: dict[str, str] = Field(default_factory=dict, description="position -> card of every registered card of "
                                  "the round the public may see now")
    betting_closes_at: int | None = Field(default=None, description="while betting is open: when it closes (epoch ms)")
    decision_closes_at: int | None = Field(default=None, description="while players decide: the deadline (epoch ms)")
    turn: TurnState | None = Field(default=None, description="while a player is to act (ACTION)")
    outcome: Literal["COMPLETED", "CANCELLED", "VOIDED"] | None = Field(default=None, description="once the round "
                                                                          "has its result")
    winner: str | None = None
    paused: bool = Field(default=False, description="the table's clocks are stopped: no decision or turn timer "
                         "runs and no round opens")
    paused_reason: str | None = None
    links_down: dict[str, str] = Field(default_factory=dict, description="link -> reason, for every link down")
    dealt: list[str] = Field(default_factory=list, description="every position registered in the round, in deal "
                             "order, face-down and burn cards included: a position not in cards is shown as a "
                             "card's back, never its code")
    confirm_closes_at: int | None = Field(default=None, description="while a timed confirmation is open (stud's "
                                          "LAST_CARD exposure window): when it closes (epoch ms)")
    mode: Literal["open", "paused", "closing", "closing_paused", "closed"] = Field(
        default="open", description="the table's operating state (supervisor's table operations)")
    dealer: str | None = Field(default=None, description="the dealer logged on at the station (dealer_logon)")
    phase_since: int | None = Field(default=None, description="since when the round is in this phase, as far as "
                                    "this backend knows (epoch ms; a restart or takeover starts it again)")
    unsettled: int = Field(default=0, description="rounds whose result settlement has not acknowledged yet")
    at: int = Field(description="when the backend built this state (epoch ms)")
    prompt: StationPrompt | None = Field(default=None, description="what the dealer station shows now: the latest "
                                         "prompt released (null before the table's first)")
    events: list[RoundEvent] = Field(default_factory=list, description="the round events of the batch this state "
                                     "follows, in order (empty when only the prompt or the state changed); the "
                                     "retained copy repeats the last batch's: act on the state, not on these, "
                                     "when catching up")
    prompts: list[StationPrompt] = Field(default_factory=list, description="the prompts released since the state "
                                         "before this one, in order (the last is prompt): two in one batch both "
                                         "reach the station")


class RoundLine(_Msg):
    """One ended round on the table's ``history``. No card codes (a code shown in one round may be a
    hidden card of the next): the result and ``dealer recall`` have them."""

    round_id: str
    outcome: Literal["COMPLETED", "CANCELLED", "VOIDED"]
    winner: str | None = None
    reason: str | None = None
    dealers: list[str] = Field(default_factory=list)
    opened_at: int
    finished_at: int
    dealt: int = Field(description="cards registered")
    rescans: int = Field(description="reads refused (rescans), every reason")
    mistakes: int = Field(description="dealing mistakes refused: a duplicate or foreign card")


class DealerLine(_Msg):
    """One dealer's figures at the table since ``since``."""

    dealer: str | None = Field(description="null: cards dealt while nobody was logged on")
    on_shift: bool
    since: int
    rounds: int = Field(description="rounds with at least one card dealt by this dealer")
    cards: int
    rescans: int
    mistakes: int


class TableHistory(_Msg):
    """The table's last rounds and per-dealer figures, retained on ``.../history``: what a dealer's
    strip of results and a pit boss's per-dealer statistics need at once (``dealer recall`` is the
    full record). Counts start at ``since``: the first round this backend replayed or played."""

    schema_id: Literal["studio.v1.table_history"] = "studio.v1.table_history"
    table_id: str
    game: str
    node_id: NodeId
    session: Session
    version: Version
    stale: Stale = False
    dealer: str | None = None
    since: int | None = None
    rounds: list[RoundLine] = Field(default_factory=list, description="newest first")
    dealers: list[DealerLine] = Field(default_factory=list)
    at: int


class PlayerBet(_Msg):
    bet_id: str
    bet_type: str
    stake: Decimal
    seat: int | None = None


class PlayerState(_Msg):
    """One seated player's private round state, retained on ``.../players/{player}/state``: its
    own cards, its bets, its pending decision or turn. Cleared (an empty retained payload) once
    the player's round is settled."""

    schema_id: Literal["studio.v1.player_state"] = "studio.v1.player_state"
    table_id: str
    player_id: str
    node_id: NodeId
    session: Session
    version: Version
    stale: Stale = False
    round_id: str
    phase: str
    seat: int | None = None
    cards: dict[str, str] = Field(default_factory=dict, description="position -> card of the player's own "
                                  "face-down cards given to it so far (as its hole_card messages)")
    bets: list[PlayerBet] = Field(default_factory=list, description="the player's accepted bets of the round")
    decision: dict[str, Any] | None = Field(default=None, description="a pending decision: the data of its "
                                            "decision_required (actions, closes_at, seat)")
    decided: DecisionRecord | None = Field(default=None, description="the player's decision, once made")
    turn: dict[str, Any] | None = Field(default=None, description="while it is the player's turn: the data of its "
                                        "your_turn (turn, street, closes_at, legal actions)")
    at: int = Field(description="when the backend built this state (epoch ms)")
