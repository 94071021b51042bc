"""A table's operating state (dealer/core/operations.py) in the pure core: plain calls, no IO, no clock.

Every (mode, operation) pair has an answer; pause freezes the round in play (no bet, card,
decision, action or timeout is taken) and its resume gives every pending window in full;
close takes effect at the round's end; a closed table takes nothing but a reopen; every
refusal changes nothing; the journaled events rebuild the same state. The ingress side: the
signed table commands become their events, a station's are refused as another role's.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.edge import ingress
from dealer.core.events import (
    EVENT_ADAPTER,
    CloseBetting,
    DecisionTimeout,
    LinkDown,
    LinkUp,
    OpenRound,
    PlaceBet,
    PlayerDecision,
    Resume,
    ScanRead,
    SupervisorClose,
    SupervisorOpenRound,
    SupervisorPause,
    SupervisorReopen,
    SupervisorResume,
    SupervisorVoid,
)
from dealer.games.sevenluck import Sevenluck
from dealer.core.messages import PlayerMessage, RoundEvent, StationPrompt
from dealer.core.operations import OPERATIONS, TRANSITIONS, Mode, OperatingState
from dealer.edge.roles import Role, command_topic
from dealer.core.round import Phase, TableRules
from dealer.edge.signing import SupervisorVerifier, sign_command
from dealer.core.table import Table

SUP = "sup-ana"
DECISION_MS = 10_000
# one player at seat 1: P1.1 D.1 P1.2 D.2 P1.3 D.3
CARDS = ["7S", "QH", "7D", "JH", "7C", "TH"]
OPS = ("supervisor_pause", "supervisor_resume", "supervisor_close", "supervisor_reopen")
OP_EVENTS = {"supervisor_pause": SupervisorPause, "supervisor_resume": SupervisorResume,
             "supervisor_close": SupervisorClose, "supervisor_reopen": SupervisorReopen}


def table() -> Table:
    return Table(TableRules(table_id="S1", game=Sevenluck.from_options({}), decision_ms=DECISION_MS))


def op(kind: str, at: int = 100, **kw: object):
    return OP_EVENTS[kind](supervisor=SUP, command_id=f"{kind}-{at}", at=at, **kw)


def opened(t: Table, n: int = 1, at: int = 1):
    step = t.handle(OpenRound(round_id=f"S1-{n:06d}", at=at, betting_closes_at=at + 15_000))
    return step


def to_decision(t: Table) -> None:
    assert opened(t).accepted
    assert t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1, at=2)).accepted
    assert t.handle(CloseBetting(at=3)).accepted
    for c in CARDS:
        assert t.handle(ScanRead(reader="R", code=c, at=4)).accepted
    assert t.current is not None and t.current.phase == Phase.DECISION


def events(step, name: str | None = None) -> list[RoundEvent]:
    return [e for e in step.effects if isinstance(e, RoundEvent) and (name is None or e.event == name)]


def prompts(step) -> list[StationPrompt]:
    return [e for e in step.effects if isinstance(e, StationPrompt)]


def snapshot(t: Table) -> tuple:
    cur = t.current
    return (t.ops, t.last_seq, cur.round_id if cur else None, cur.phase if cur else None,
            cur.decision_deadline if cur else None, cur.betting_closes_at if cur else None,
            len(cur.bets) if cur else 0, len(cur.cards) if cur else 0, dict(cur.decisions) if cur else {})


# --- the transition table --------------------------------------------------------------------


def test_every_mode_has_an_answer_for_every_operation() -> None:
    assert set(TRANSITIONS) == {(m, o) for m in Mode for o in OPS}
    assert set(OPERATIONS) == {"supervisor_open_round", *OPS}
    # a closed table takes nothing but a reopen
    assert [o for o in OPS if not isinstance(TRANSITIONS[(Mode.CLOSED, o)], str)] == ["supervisor_reopen"]


@pytest.mark.parametrize("mode_flags", [(False, False, False), (False, False, True), (True, False, False),
                                        (True, False, True), (False, True, True), (True, True, True),
                                        (False, True, False)])
@pytest.mark.parametrize("operation", OPS)
def test_the_state_after_an_operation_is_a_consistent_mode(mode_flags, operation) -> None:
    paused, closed, in_play = mode_flags
    state = OperatingState(paused, closed)
    why = state.refusal(operation, in_play, "S1-000001" if in_play else None)
    if why is not None:
        assert why and "{" not in why
        return
    after = state.after(operation, in_play, by=SUP, reason=None, at=5)
    assert after.by == SUP and after.since == 5
    assert not (after.closed and after.paused and not in_play), "a closed table is not paused"


# --- pause and resume ----------------------------------------------------------------------------


def test_pause_during_a_decision_freezes_the_round_and_the_resume_gives_a_full_window() -> None:
    t = table()
    to_decision(t)
    rnd = t.current
    old_deadline = rnd.decision_deadline
    step = t.handle(op("supervisor_pause", at=1_000, reason="dealer change"))
    assert step.accepted and step.journal
    assert [e.event for e in events(step)] == ["table_paused"]
    assert events(step)[0].data == {"supervisor": SUP, "reason": "dealer change", "state": "paused"}
    assert [p.kind for p in prompts(step)] == ["PAUSED"] and "dealer change" in prompts(step)[0].message
    assert t.mode is Mode.PAUSED and t.prompt_now(2_000).kind == "PAUSED"
    # the timer's expiry (however late) and the player's decision are not taken; nothing changed
    before = snapshot(t)
    for ev in (DecisionTimeout(at=old_deadline + 60_000),
               PlayerDecision(player_id="alice", action="PLAY", round_id=rnd.round_id, at=2_000)):
        refused = t.handle(ev)
        assert not refused.accepted and not refused.journal
        assert "paused by supervisor sup-ana" in refused.rejection.reason
        assert snapshot(t) == before
    assert rnd.phase == Phase.DECISION and not rnd.decisions
    # a reconnecting player is not told a window that does not run
    assert not [m for m in t.private_now(2_000) if m.kind == "decision_required"]
    # a restart's Resume and a broker coming back renew nothing while paused
    assert t.handle(LinkDown(link="broker", at=2_100)).accepted
    assert not events(t.handle(LinkUp(link="broker", at=2_200)), "decisions_open")
    assert not events(t.handle(Resume(at=2_300)), "decisions_open")
    assert rnd.decision_deadline == old_deadline
    # the resume: a full window from its own time, told publicly and to the player
    step = t.handle(op("supervisor_resume", at=50_000))
    assert step.accepted and t.mode is Mode.OPEN
    assert rnd.decision_deadline == 50_000 + DECISION_MS
    opened_again = events(step, "decisions_open")
    assert opened_again and opened_again[0].data["resumed"] is True
    assert opened_again[0].data["closes_at"] == 50_000 + DECISION_MS
    told = [m for m in step.effects if isinstance(m, PlayerMessage) and m.kind == "decision_required"]
    assert [(m.player_id, m.data["closes_at"], m.data["resumed"]) for m in told] == [("alice", 60_000, True)]
    assert t.handle(PlayerDecision(player_id="alice", action="PLAY", round_id=rnd.round_id, at=51_000)).accepted
    assert rnd.phase == Phase.RESULT


def test_pause_while_betting_is_open_takes_no_bet_and_the_resume_gives_a_new_betting_period() -> None:
    t = table()
    assert opened(t).accepted
    rnd = t.current
    assert t.handle(op("supervisor_pause", at=10)).accepted
    refused = t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1, at=11))
    assert not refused.accepted and "nothing is taken" in refused.rejection.reason
    assert not t.handle(CloseBetting(by="timer", round_id=rnd.round_id, at=20_000)).accepted
    assert rnd.phase == Phase.BETTING_OPEN and not rnd.bets
    step = t.handle(op("supervisor_resume", at=30_000, betting_closes_at=45_000))
    assert step.accepted and rnd.betting_closes_at == 45_000
    assert events(step, "betting_resumed")[0].data == {"betting_closes_at": 45_000}
    assert prompts(step)[-1].kind == "WAIT"
    assert t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1, at=30_001)).accepted


def test_a_card_scanned_while_paused_is_not_registered_and_is_asked_for_again_after_the_resume() -> None:
    t = table()
    assert opened(t).accepted
    assert t.handle(PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1, at=2)).accepted
    assert t.handle(CloseBetting(at=3)).accepted
    assert t.handle(ScanRead(reader="R", code="7S", at=4)).accepted
    assert t.handle(op("supervisor_pause", at=5)).accepted
    refused = t.handle(ScanRead(reader="R", code="QH", at=6))
    assert not refused.accepted and "NOT registered" in refused.rejection.reason
    assert t.current.cards == {"P1.1": "7S"}
    step = t.handle(op("supervisor_resume", at=7))
    assert [(p.kind, p.position) for p in prompts(step)] == [("NEXT", "D.1")]
    assert t.handle(ScanRead(reader="R", code="QH", at=8)).accepted


def test_a_void_while_paused_ends_the_round_and_the_table_stays_paused() -> None:
    t = table()
    to_decision(t)
    assert t.handle(op("supervisor_pause")).accepted
    step = t.handle(SupervisorVoid(supervisor=SUP, reason="dispute", round_id="S1-000001", at=200))
    assert step.accepted and t.current.phase == Phase.VOID
    assert [p.kind for p in prompts(step)] == ["DONE", "PAUSED"]
    assert t.mode is Mode.PAUSED
    why = t.can_open()
    assert why is not None and "paused" in why
    refused = opened(t, 2, at=300)
    assert not refused.accepted and "resume it first" in refused.rejection.reason
    assert t.handle(op("supervisor_resume", at=400)).accepted
    assert opened(t, 2, at=500).accepted


# --- open, close, reopen -----------------------------------------------------------------------------


def test_a_supervisor_opens_a_round_only_when_the_table_may_open_one() -> None:
    t = table()
    signed = dict(supervisor=SUP, command_id="open-1", issued_at=1, signature="ab" * 32)
    step = t.handle(OpenRound(round_id="S1-000001", at=1, betting_closes_at=15_001, **signed))
    assert step.accepted
    assert events(step, "round_opened")[0].data["opened_by"] == SUP
    refused = t.handle(OpenRound(round_id="S1-000002", at=2, **signed | {"command_id": "open-2"}))
    assert not refused.accepted and "still in play" in refused.rejection.reason
    assert t.current.round_id == "S1-000001" and t.last_seq == 1


def test_close_during_a_round_takes_effect_at_its_end_and_a_closed_table_takes_only_a_reopen() -> None:
    t = table()
    to_decision(t)
    step = t.handle(op("supervisor_close", at=100, reason="end of shift"))
    assert step.accepted and t.mode is Mode.CLOSING
    assert events(step)[0].event == "table_closing" and events(step)[0].data["last_round"] == "S1-000001"
    assert prompts(step)[0].kind == "WAIT"  # the round goes on: the deal's own prompt
    assert t.handle(op("supervisor_pause", at=101)).accepted  # the last round may be paused ...
    assert t.mode is Mode.CLOSING_PAUSED
    assert "already closing" in t.handle(op("supervisor_close", at=102)).rejection.reason
    assert t.handle(op("supervisor_resume", at=103)).accepted  # ... and resumed
    assert t.mode is Mode.CLOSING
    refused = opened(t, 2, at=104)
    assert not refused.accepted and "S1-000001 is its last round" in refused.rejection.reason
    step = t.handle(PlayerDecision(player_id="alice", action="PLAY", round_id="S1-000001", at=105))
    assert step.accepted and t.current.phase == Phase.RESULT
    closed = events(step, "table_closed")
    assert closed and closed[0].data["state"] == "closed"
    assert [p.kind for p in prompts(step)][-2:] == ["DONE", "CLOSED"]
    assert t.mode is Mode.CLOSED and t.prompt_now(106).kind == "CLOSED"
    before = snapshot(t)
    for kind in ("supervisor_pause", "supervisor_resume", "supervisor_close"):
        refused = t.handle(op(kind, at=107))
        assert not refused.accepted and not refused.journal and "closed" in refused.rejection.reason
        assert snapshot(t) == before
    assert "reopen" in t.can_open()
    assert not opened(t, 2, at=108).accepted
    step = t.handle(op("supervisor_reopen", at=109))
    assert step.accepted and t.mode is Mode.OPEN and events(step)[0].event == "table_reopened"
    assert prompts(step)[0].kind == "WAIT" and t.can_open() is None
    assert opened(t, 2, at=110).accepted


def test_close_with_no_round_in_play_is_at_once_and_a_paused_table_closed_is_no_longer_paused() -> None:
    t = table()
    assert t.handle(op("supervisor_pause", at=1)).accepted
    step = t.handle(op("supervisor_close", at=2))
    assert step.accepted and events(step)[0].event == "table_closed" and t.mode is Mode.CLOSED
    assert not t.paused
    assert t.handle(op("supervisor_reopen", at=3)).accepted and t.mode is Mode.OPEN


def test_a_reopen_while_closing_cancels_the_close() -> None:
    t = table()
    to_decision(t)
    assert t.handle(op("supervisor_close", at=10)).accepted
    assert t.handle(op("supervisor_reopen", at=11)).accepted and t.mode is Mode.OPEN
    step = t.handle(PlayerDecision(player_id="alice", action="FOLD", round_id="S1-000001", at=12))
    assert step.accepted and not events(step, "table_closed") and t.can_open() is None


@pytest.mark.parametrize("kind,state,expected", [
    ("supervisor_resume", "open", "not paused"), ("supervisor_reopen", "open", "not closed"),
    ("supervisor_pause", "paused", "already paused (by supervisor sup-ana)"),
    ("supervisor_reopen", "paused", "not closed"), ("supervisor_close", "closed", "already closed"),
])
def test_operations_that_do_not_apply_are_refused_with_a_reason_and_change_nothing(kind, state, expected) -> None:
    t = table()
    if state == "paused":
        assert t.handle(op("supervisor_pause", at=1)).accepted
    if state == "closed":
        assert t.handle(op("supervisor_close", at=1)).accepted
    before = snapshot(t)
    step = t.handle(op(kind, at=2))
    assert not step.accepted and not step.journal
    assert expected in step.rejection.reason and step.rejection.reason.startswith(f"{OPERATIONS[kind]} refused")
    assert snapshot(t) == before


# --- the journal rebuilds it -------------------------------------------------------------------------


def test_the_journaled_events_rebuild_the_same_operating_state() -> None:
    t = table()
    journal: list[str] = []

    def feed(ev) -> None:
        step = t.handle(ev)
        if step.journal:
            journal.append(EVENT_ADAPTER.dump_json(ev).decode())

    for ev in [OpenRound(round_id="S1-000001", at=1, betting_closes_at=15_001),
               PlaceBet(bet_id="a1", player_id="alice", bet_type="ante", stake="10", seat=1, at=2),
               CloseBetting(at=3), *[ScanRead(reader="R", code=c, at=4) for c in CARDS],
               op("supervisor_pause", at=5, reason="shoe check"), op("supervisor_pause", at=6),
               op("supervisor_close", at=7)]:
        feed(ev)
    assert t.mode is Mode.CLOSING_PAUSED
    again = table()
    for body in journal:
        assert again.handle(EVENT_ADAPTER.validate_json(body)).accepted
    assert again.ops == t.ops and again.mode is Mode.CLOSING_PAUSED
    assert again.current.decision_deadline == t.current.decision_deadline
    assert again.prompt_now(9) == t.prompt_now(9)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["pause", "resume", "close", "reopen", "open", "bet", "close_betting", "deal",
                                 "decide", "timeout", "void"]), max_size=30))
def test_any_sequence_keeps_the_state_consistent_and_refusals_change_nothing(script: list[str]) -> None:
    t, at, n = table(), 1, 0
    for name in script:
        at += 1
        rid = t.current.round_id if t.current else "S1-000000"
        if name in ("pause", "resume", "close", "reopen"):
            ev = op(f"supervisor_{name}", at=at)
        elif name == "open":
            ev = OpenRound(round_id=f"S1-{t.last_seq + 1:06d}", at=at, betting_closes_at=at + 100)
        elif name == "bet":
            ev = PlaceBet(bet_id=f"b{at}", player_id="alice", bet_type="ante", stake="10", seat=1, at=at)
        elif name == "close_betting":
            ev = CloseBetting(by="timer", round_id=rid, at=at)
        elif name == "deal":
            ev = ScanRead(reader="R", code=CARDS[len(t.current.cards) % len(CARDS)] if t.current else "7S", at=at)
        elif name == "decide":
            ev = PlayerDecision(player_id="alice", action="PLAY", round_id=rid, at=at)
        elif name == "timeout":
            ev = DecisionTimeout(at=at)
        else:
            ev = SupervisorVoid(supervisor=SUP, reason="x", round_id=rid, at=at)
        before, frozen_round = snapshot(t), t.paused and t.in_play
        step = t.handle(ev)
        if not step.accepted:
            assert snapshot(t) == before, name
        if frozen_round and name in ("bet", "close_betting", "deal", "decide", "timeout"):
            assert not step.accepted, name
        if name == "open" and step.accepted:
            n += 1
            assert before[0].mode(False) is Mode.OPEN
        assert not (t.ops.closed and t.ops.paused and not t.in_play)
        assert (t.prompt_now(at).kind == "PAUSED") == t.paused
        assert (t.prompt_now(at).kind == "CLOSED") == (t.mode is Mode.CLOSED)
    assert t.last_seq == n


# --- the wire: signed table commands through the ingress ---------------------------------------------

KEY = bytes(range(32))
NOW = 1767261690000
VERIFIER = SupervisorVerifier({SUP: ([KEY], None)}, max_age_ms=30_000, max_skew_ms=5_000)


def signed(ctype: str, **kw: object) -> dict:
    body = {"type": ctype, "command_id": f"c-{ctype}", "supervisor": SUP, "table_id": "T1", "issued_at": NOW, **kw}
    return sign_command(KEY, body)


def parse(role: Role, msg: dict, now: int = NOW):
    return ingress.parse(command_topic(role, "T1"), json.dumps(msg).encode(), tables=frozenset({"T1"}), now_ms=now,
                         supervisors=VERIFIER)


@pytest.mark.parametrize("ctype,model", [("supervisor_open_round", SupervisorOpenRound),
                                         ("supervisor_pause", SupervisorPause), ("supervisor_resume", SupervisorResume),
                                         ("supervisor_close", SupervisorClose), ("supervisor_reopen", SupervisorReopen)])
def test_a_signed_table_command_becomes_its_event_and_only_a_supervisor_may_send_it(ctype, model) -> None:
    msg = signed(ctype, reason="dealer break")
    got = parse(Role.SUPERVISOR, msg)
    assert isinstance(got, ingress.Accepted), got
    assert isinstance(got.event, model) and got.event.supervisor == SUP and got.event.reason == "dealer break"
    assert got.event.signature == msg["signature"] and got.event.issued_at == NOW and got.event.at == NOW
    assert got.key_index == 0 and got.command_id == f"c-{ctype}"
    for role in (Role.STATION, Role.PLAYER_PLATFORM):  # least privilege: a dealer asks the pit boss
        refused = parse(role, msg)
        assert isinstance(refused, ingress.Refused) and refused.kind == "wrong_role", refused
        assert f"{ctype} is a supervisor's command and is not accepted from" in refused.reason
        assert refused.security  # journaled and alerted like any attempt at a supervisor's command


@pytest.mark.parametrize("change,kind,text", [
    ({"round_id": "T1-000001"}, "malformed", "a table command names no round"),
    ({"reason": ""}, "malformed", "reason"),
    ({"issued_at": NOW - 60_000}, "stale", "stale"),
    ({"table_id": "T2"}, "wrong_table", "received on table T1"),
])
def test_a_bad_table_command_is_refused_with_its_kind(change, kind, text) -> None:
    msg = signed("supervisor_pause", **change)
    got = parse(Role.SUPERVISOR, msg)
    if kind == "stale":  # genuine but late: passed on for the commit loop to answer a repeat, else refuse
        assert isinstance(got, ingress.Accepted) and got.late is not None and got.late.kind == "stale"
        return
    assert isinstance(got, ingress.Refused) and got.kind == kind and text in got.reason, got
    assert got.command_type == "supervisor_pause" and got.security


def test_a_forged_table_command_is_refused_as_one() -> None:
    msg = {**signed("supervisor_close"), "type": "supervisor_reopen"}  # altered after signing
    got = parse(Role.SUPERVISOR, msg)
    assert isinstance(got, ingress.Refused) and got.kind == "bad_signature" and got.security


# --- the doc's worked example (docs/mqtt-topics.md §10.7) -----------------------------------------

def test_doc_table_operation_example_is_what_the_code_computes() -> None:
    import re
    from pathlib import Path

    from dealer.edge.signing import COMMAND_TYPES, TableCommand, Verified, canonical_bytes, content_digest, sign
    from tests.harness import K1
    from tests.harness_docs import DOC_KEYS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "mqtt-topics.md").read_text(encoding="utf-8")
    section = doc.split("### 10.7 Table operations", 1)[1]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M)
    command = json.loads(blocks[0][1])
    canonical = blocks[1][1].rstrip("\n")
    wire = json.loads(blocks[2][1])
    assert canonical_bytes(command).decode() == canonical and f"({len(canonical.encode())} bytes in UTF-8)" in section
    rows = dict(re.findall(r"^\| `(TK\d)` \| `([0-9a-f]{64})` \|$", section, re.M))
    assert rows == {name: sign(key, command) for name, key in DOC_KEYS.items()}
    assert re.search(r"Content digest: `([0-9a-f]{64})`", section).group(1) == content_digest(command)
    assert wire == sign_command(K1, command) and list(wire) == [*command, "signature"]
    got = SupervisorVerifier({SUP: ([K1], None)}, max_age_ms=30_000, max_skew_ms=5_000).verify(
        wire, "TP1", command["issued_at"])
    assert isinstance(got, Verified) and got.round_id is None and got.command == {"type": "supervisor_pause",
                                                                                 "reason": "dealer change"}
    # the field table names every field of a table command, and every table command is in the doc
    table = section.split("| Field | Type | Rule (table operations) |", 1)[1].split("\n\n", 1)[0]
    named = {name for line in table.splitlines()[1:] for name in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    assert set(TableCommand.model_fields) == named
    for ctype, model in COMMAND_TYPES.items():
        if issubclass(model, TableCommand):
            assert f"`{ctype}`" in section.split("| Command |")[1], ctype
