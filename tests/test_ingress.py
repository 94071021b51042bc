"""The ingress (pure): every command type on every role's topic, the ids every command must
carry, and the round every command must name. Plain calls, no broker."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.edge import ingress, topics
from dealer.core.commands import StoredCommand, digest, repeat_effects
from dealer.edge.config import load_settings
from dealer.core.events import (CardExposed, CloseBetting, DealerConfirm, OpenRound, PlaceBet, PlayerDecision,
                                SupervisorExpose, SupervisorVoid)
from dealer.core.messages import PlayerMessage, RoundEvent
from dealer.edge.roles import COMMANDS, Role, command_topic, role_of_topic
from dealer.edge.signing import SupervisorVerifier, sign_command
from dealer.core.table import Table
from tests.harness_roles import SAMPLES

KEY = bytes.fromhex("33" * 32)
NOW = 1_767_261_690_000
TABLES = frozenset({"T1"})
VERIFIER = SupervisorVerifier({"sup-ana": ([KEY], None)}, max_age_ms=30_000, max_skew_ms=5_000)

def wire(ctype: str, **extra: Any) -> dict[str, Any]:
    msg = {**SAMPLES[ctype], "command_id": f"c-{ctype}", "round_id": "T1-000001", **extra}
    if ctype == "supervisor_void":
        msg = sign_command(KEY, {**msg, "table_id": "T1", "issued_at": NOW})
    return msg


def parse(role: Role, payload: Any, now: int = NOW) -> ingress.Accepted | ingress.Refused:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return ingress.parse(command_topic(role, "T1"), raw, tables=TABLES, now_ms=now, supervisors=VERIFIER)


@pytest.mark.parametrize("role", [Role.PLAYER_PLATFORM, Role.STATION, Role.SUPERVISOR])
@pytest.mark.parametrize("ctype", sorted(SAMPLES))
def test_each_role_sends_exactly_its_own_commands(role: Role, ctype: str) -> None:
    verdict = parse(role, wire(ctype))
    if ctype in COMMANDS[role]:
        assert isinstance(verdict, ingress.Accepted), verdict
        assert verdict.event.type == ctype and verdict.event.at == NOW and verdict.role is role
    else:
        assert isinstance(verdict, ingress.Refused) and verdict.kind == "wrong_role", verdict
        assert f"{ctype} is " in verdict.reason and "not accepted from" in verdict.reason


def test_role_of_topic_is_exact() -> None:
    assert role_of_topic(topics.station("T1")) == ("T1", Role.STATION)
    assert role_of_topic(topics.actions("T1")) == ("T1", Role.PLAYER_PLATFORM)
    assert role_of_topic(topics.supervisor("T1")) == ("T1", Role.SUPERVISOR)
    for t in (topics.events("T1"), topics.player("T1", "p"), topics.station("T1") + "/x", "studio/v2/tables/T1/station"):
        assert role_of_topic(t) is None


@pytest.mark.parametrize("ctype", ["place_bet", "player_decision", "player_action", "close_betting", "dealer_confirm",
                                   "card_exposed"])
@pytest.mark.parametrize("missing", ["command_id", "round_id"])
def test_every_command_names_its_id_and_round(ctype: str, missing: str) -> None:
    role = Role.PLAYER_PLATFORM if ctype in COMMANDS[Role.PLAYER_PLATFORM] else Role.STATION
    msg = wire(ctype)
    del msg[missing]
    verdict = parse(role, msg)
    assert isinstance(verdict, ingress.Refused) and verdict.kind == f"missing_{missing}"


def test_a_turn_action_names_its_turn_unless_it_is_a_reservation() -> None:
    msg = wire("player_action")
    del msg["turn"]
    verdict = parse(Role.PLAYER_PLATFORM, msg)
    assert isinstance(verdict, ingress.Refused) and verdict.kind == "missing_turn"
    assert isinstance(parse(Role.PLAYER_PLATFORM, {**msg, "reserve": True}), ingress.Accepted)


def test_station_and_platform_cannot_speak_for_the_timer_or_the_house() -> None:
    r = parse(Role.STATION, wire("close_betting", by="timer"))
    assert isinstance(r, ingress.Refused) and "not 'timer'" in r.reason
    r = parse(Role.STATION, wire("close_betting", by="supervisor"))
    assert isinstance(r, ingress.Refused)
    r = parse(Role.PLAYER_PLATFORM, wire("player_action", player_id="house-ai"))
    assert isinstance(r, ingress.Refused) and r.kind == "house_player" and r.security


@pytest.mark.parametrize("role", [Role.PLAYER_PLATFORM, Role.STATION, Role.SUPERVISOR])
@pytest.mark.parametrize("body", [
    {"type": "decision_timeout", "deadline": NOW}, {"type": "action_timeout", "turn": 1, "deadline": NOW},
    {"type": "confirm_timeout", "step": "LAST_CARD", "deadline": NOW}, {"type": "resume"}])
def test_nobody_speaks_for_the_timers_or_a_resume(role: Role, body: dict[str, Any]) -> None:
    """A timeout (with the deadline it names) and a Resume come from the service only: from the
    wire they are refused with a reason, whoever sends them."""
    verdict = parse(role, {**body, "command_id": "c-t", "round_id": "T1-000001"})
    assert isinstance(verdict, ingress.Refused), verdict
    assert verdict.kind in ("wrong_role", "malformed") and verdict.reason, verdict


@pytest.mark.parametrize("payload, kind", [
    (b"{not json", "malformed"), (b"[]", "malformed"), (b"x" * (ingress.MAX_COMMAND_BYTES + 1), "too_large"),
    (json.dumps({"type": "place_bet"}).encode(), "malformed"),
    (json.dumps({"type": "teleport", "command_id": "c"}).encode(), "malformed"),
])
def test_bad_input_is_refused_with_a_kind(payload: bytes, kind: str) -> None:
    verdict = parse(Role.PLAYER_PLATFORM, payload)
    assert isinstance(verdict, ingress.Refused) and verdict.kind == kind and verdict.reason


def test_unknown_table_and_topic() -> None:
    r = ingress.parse(topics.actions("T9"), b"{}", tables=TABLES, now_ms=NOW, supervisors=VERIFIER)
    assert isinstance(r, ingress.Refused) and r.kind == "unknown_table" and r.table_id is None
    r = ingress.parse(topics.events("T1"), b"{}", tables=TABLES, now_ms=NOW, supervisors=VERIFIER)
    assert isinstance(r, ingress.Refused) and r.kind == "unknown_topic"


def test_supervisor_refusals_are_security_events() -> None:
    good = wire("supervisor_void")
    cases = {
        "missing_signature": {k: v for k, v in good.items() if k != "signature"},
        "bad_signature": {**good, "reason": "changed"},
        "unknown_supervisor": sign_command(KEY, {**good, "supervisor": "sup-x"}),
        "wrong_table": sign_command(KEY, {**good, "table_id": "T2"}),
    }
    for kind, msg in cases.items():
        r = parse(Role.SUPERVISOR, msg)
        assert isinstance(r, ingress.Refused) and r.kind == kind and r.security, (kind, r)
    late = parse(Role.SUPERVISOR, good, now=NOW + 31_000)  # genuine but stale: passed on, marked late
    assert isinstance(late, ingress.Accepted) and late.late is not None and late.late.kind == "stale"
    fresh = parse(Role.SUPERVISOR, good)
    assert isinstance(fresh, ingress.Accepted) and fresh.late is None and fresh.key_index == 0
    assert isinstance(fresh.event, SupervisorVoid) and fresh.event.signature == good["signature"]
    assert late.digest == fresh.digest  # the same command, whenever it arrives


def test_a_supervisor_s_exposure_becomes_its_event_and_a_late_one_carries_the_clock_difference() -> None:
    msg = sign_command(KEY, {"type": "supervisor_expose", "command_id": "x-1", "supervisor": "sup-ana", "table_id": "T1",
                             "round_id": "T1-000001", "issued_at": NOW, "seat": 4, "card": "5C"})
    got = parse(Role.SUPERVISOR, msg)
    assert isinstance(got, ingress.Accepted) and got.late is None
    assert isinstance(got.event, SupervisorExpose) and (got.event.seat, got.event.card) == (4, "5C")
    assert (got.event.supervisor, got.event.round_id, got.event.signature) == ("sup-ana", "T1-000001", msg["signature"])
    # the station may not send it (least privilege: the dealer asks the pit boss)
    station = parse(Role.STATION, {k: v for k, v in msg.items() if k != "signature"})
    assert isinstance(station, ingress.Refused) and station.kind == "wrong_role" and station.security
    # an hour late: passed on marked late, its refusal saying by how much
    late = parse(Role.SUPERVISOR, msg, now=NOW + 3_600_000)
    assert isinstance(late, ingress.Accepted) and late.late is not None and late.late.skew_ms == -3_600_000
    assert "the clocks differ by 3600 s" in late.late.reason


@pytest.mark.slow
@given(st.dictionaries(st.sampled_from(["type", "command_id", "round_id", "player_id", "bet_id", "stake", "turn",
                                        "by", "step", "position", "signature", "supervisor", "x"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=8), st.floats(), st.booleans()),
                       max_size=8),
       st.sampled_from([Role.PLAYER_PLATFORM, Role.STATION, Role.SUPERVISOR]))
@settings(max_examples=300, deadline=None)
def test_the_ingress_never_raises(obj: dict[str, Any], role: Role) -> None:
    verdict = parse(role, json.dumps(obj).encode())
    assert isinstance(verdict, (ingress.Accepted, ingress.Refused))


def table() -> Table:
    s = load_settings(tables=[{"id": "T1", "game": "stud", "scanner": {"kind": "serial", "port": "/dev/null",
                                                                          "reader_id": "SC1"}}])
    t = Table(s.tables[0].rules())
    assert t.handle(OpenRound(round_id="T1-000001", at=1)).accepted
    return t


@pytest.mark.parametrize("event", [
    CloseBetting(round_id="T1-000002"), DealerConfirm(step="WASH", round_id="T1-000002"),
    CardExposed(position="P1.7", round_id="T1-000002"), PlayerDecision(player_id="p", action="PLAY", round_id="T1-000002"),
    SupervisorVoid(supervisor="s", reason="r", round_id="T1-000002"),
    PlaceBet(bet_id="b", player_id="p", bet_type="chips", stake="10", seat=1, round_id="T1-000002"),
])
def test_a_command_for_another_round_changes_nothing(event: Any) -> None:
    t = table()
    step = t.handle(event)
    assert not step.accepted and not step.journal
    assert step.rejection is not None and "T1-000002" in step.rejection.reason
    assert t.current is not None and t.current.phase.value == "BETTING_OPEN" and not t.current.bets


def test_a_repeat_gets_the_original_answer() -> None:
    stored = StoredCommand("T1", "c1", "T1-000001", "place_bet", "player_platform", "d",
                           {"answer": "accepted", "round_id": "T1-000001",
                            "reply": {"player_id": "p1", "kind": "bet_accepted", "data": {"bet_id": "b1"}}})
    ev, msg = repeat_effects(stored, 5)
    assert isinstance(ev, RoundEvent) and ev.event == "command_repeated" and ev.data["repeat"] is True
    assert isinstance(msg, PlayerMessage) and msg.kind == "bet_accepted" and msg.player_id == "p1"
    assert msg.data == {"bet_id": "b1", "command_id": "c1", "repeat": True}
    a = PlaceBet(bet_id="b", player_id="p", bet_type="tie", stake="1", command_id="c", round_id="r", at=1)
    assert digest(a) == digest(a.model_copy(update={"at": 99})) != digest(a.model_copy(update={"stake": Decimal(2)}))


def test_command_ids_are_kept_per_table_and_role_across_reopening(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dealer.edge.journal import Batch, Journal

    ev = CloseBetting(round_id="T1-000001", command_id="c1", at=1)
    stored = StoredCommand("T1", "c1", "T1-000001", "close_betting", "station", digest(ev),
                           {"answer": "accepted", "round_id": "T1-000001"})
    j = Journal(tmp_path / "j.sqlite")
    j.commit(Batch(events=[("T1", "T1-000001", ev)], commands=[(stored, 0)]))
    j.close()
    j = Journal(tmp_path / "j.sqlite")
    try:
        assert j.command("T1", "station", "c1") == stored
        assert j.command("T1", "player_platform", "c1") is None  # another role's id space
        assert j.command("T2", "station", "c1") is None
    finally:
        j.close()


@pytest.mark.parametrize("pid", ["ops", "dealer-backend", "station-T1", "scanner-T9", "supervisor-sup-ana"])
def test_a_player_cannot_be_named_like_a_broker_role(pid: str) -> None:
    r = parse(Role.PLAYER_PLATFORM, wire("place_bet", player_id=pid))
    assert isinstance(r, ingress.Refused) and r.kind == "reserved_player_id"


@pytest.mark.parametrize("pid", ["ann.smith", "ann.state", "."])
def test_a_player_id_with_a_dot_is_refused_and_never_answered_on_its_topic(pid: str) -> None:
    """Its private topic is not the same topic on every broker (docs/brokers.md): NATS refuses a
    '.' in a topic, RabbitMQ delivers ``players/ann.state`` to ``players/ann/state``."""
    r = parse(Role.PLAYER_PLATFORM, wire("place_bet", player_id=pid))
    assert isinstance(r, ingress.Refused) and r.kind == "unroutable_player_id" and r.player_id is None
    assert "'.'" in r.reason
    bad = parse(Role.PLAYER_PLATFORM, wire("place_bet", player_id=pid, stake=1.5))  # malformed: answered publicly only
    assert isinstance(bad, ingress.Refused) and bad.kind == "malformed" and bad.player_id is None
