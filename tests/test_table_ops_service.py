"""Table operations through the real backend: a supervisor's signed open-round, pause, resume,
close and reopen over a real Mosquitto with the rendered ACL and TLS (the broker of
``tests/harness_acl.py``), each role with its own credentials.

A table with ``auto_rounds = false`` opens a round only on the signed command (published by
``dealer supervisor open-round`` run as a real process); a pause during a Sevenluck decision
stops the timer (the player is not folded, however long the pause) and survives a restart,
and the resume gives a full window; a close takes effect at the round's end and a closed
table takes only a reopen; a forged, misaddressed or unsigned operation, and a station that
tries to pause, change nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from dealer.edge import topics
from tools.audit import recall
from dealer.edge.journal import Journal
from dealer.core.operations import Mode
from dealer.core.round import Phase
from dealer.edge.service import Service
from dealer.edge.signing import sign_command
from simulators.secure_broker import SecureMosquitto
from tests.conftest import wait_until
from tests.harness_acl import USERS, broker  # noqa: F401  (broker: the module-scoped secure broker fixture)
from tests.harness_cli import supervisor_cli
from tests.harness_mqtt import Gateway
from tests.harness_roles import OTHER_KEY, SUP_KEY, Client, backend, bet, flushed, operation, refused, studio

DEAL = {"P1.1": "AS", "D.1": "QD", "P1.2": "AH", "D.2": "6S", "P1.3": "AD", "D.3": "4H"}  # one player, seat 1
DECISION_MS = 2_500  # the pause must reach the table before this window ends by itself


def ops_count(service: Service, operation_: str, outcome: str) -> float:
    return service.metrics.table_operations.labels(table="T1", operation=operation_, outcome=outcome)._value.get()


def operating(service: Service, state: str) -> float:
    return service.metrics.table_operating.labels(table="T1", state=state)._value.get()


async def no_round_opens_by_itself(service: Service, sender: Client, watch: Client) -> None:
    """Everything sent is answered (the barrier: the commit loop has handled all of it and armed
    the table's timer as it stands), and no round is open, nor is a timer armed to open one:
    with nothing armed and nothing in flight, nothing can open one later. An auto table would
    have its pause timer armed here, or a round already open."""
    await flushed(sender, watch, topics.supervisor("T1"))
    cur = service.tables["T1"].current
    assert cur is None or cur.phase not in (Phase.BETTING_OPEN, Phase.DEALING, Phase.DECISION)
    assert service.timers.armed.get("T1") is None, service.timers.armed.get("T1")


async def test_a_table_without_auto_rounds_opens_a_round_only_on_the_signed_command(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker, auto_rounds=False)
    pw = tmp_path / "sup.pw"
    pw.write_text(USERS["supervisor-sup-ana"] + "\n")
    cli = ["T1", "--supervisor", "sup-ana", "--key-file", str(tmp_path / "sup-ana.key"), "--broker", broker.tls_url,
           "--username", "supervisor-sup-ana", "--password-file", str(pw), "--ca-file", str(broker.ca_file)]
    async with backend(s, broker) as (service, _gw), \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "supervisor-sup-ana") as sup, Client(broker, "station-T1") as station:
        await no_round_opens_by_itself(service, sup, ops)
        assert not ops.events("round_opened")
        # the station may not open one (least privilege), nor may a forged or unsigned command
        n = len(ops.events("rejected"))
        await station.send(topics.station("T1"), operation("open_round"))
        await sup.send(topics.supervisor("T1"), operation("open_round", key=OTHER_KEY))
        await sup.send(topics.supervisor("T1"), {k: v for k, v in operation("open_round").items() if k != "signature"})
        await wait_until(lambda: len(ops.events("rejected")) >= n + 3, what="three refusals")
        await no_round_opens_by_itself(service, sup, ops)
        assert not ops.events("round_opened")
        # the supervisor's console: `dealer supervisor open-round`, a real process over TLS
        rc, out, err = await supervisor_cli("open-round", *cli, "--command-id", "open-1")
        assert (rc, err) == (0, ""), err
        published = json.loads(out)
        assert published["type"] == "supervisor_open_round" and "round_id" not in published
        await wait_until(lambda: ops.events("round_opened"), what="the round opened by the supervisor")
        opened = ops.events("round_opened")[-1]
        assert opened["data"]["opened_by"] == "sup-ana"
        rid = opened["round_id"]
        cur = service.tables["T1"].current
        assert cur is not None and cur.round_id == rid and cur.phase == Phase.BETTING_OPEN
        # a second open while it is in play is refused; the same command delivered again is answered
        n = len(ops.events("rejected"))
        await sup.send(topics.supervisor("T1"), operation("open_round", command_id="open-2"))
        await wait_until(lambda: len(ops.events("rejected")) > n, what="the second open refused")
        assert "still in play" in refused(ops, n)[0]
        await sup.send(topics.supervisor("T1"), published)
        await wait_until(lambda: ops.events("command_repeated"), what="the repeat answered")
        assert ops.events("command_repeated")[-1]["data"]["type"] == "supervisor_open_round"
        assert len(ops.events("round_opened")) == 1
        assert (ops_count(service, "open_round", "applied"), ops_count(service, "open_round", "refused"),
                ops_count(service, "open_round", "repeat")) == (1, 1, 1)
        # the round ends (a void here); the next one waits for the supervisor again
        await sup.send(topics.supervisor("T1"), sign_command(SUP_KEY, {
            "type": "supervisor_void", "command_id": "void-1", "supervisor": "sup-ana", "table_id": "T1",
            "round_id": rid, "issued_at": time.time_ns() // 1_000_000, "reason": "test"}))
        await wait_until(lambda: ops.events("round_voided"), what="the round voided")
        await no_round_opens_by_itself(service, sup, ops)
        assert len(ops.events("round_opened")) == 1
        rc, out, err = await supervisor_cli("open-round", *cli)
        assert (rc, err) == (0, ""), err
        await wait_until(lambda: len(ops.events("round_opened")) == 2, what="the second round")
        assert ops.events("round_opened")[-1]["round_id"] != rid
    # the journal keeps who opened each round, with the signature
    j = Journal(s.service.journal_path)
    try:
        opens = [json.loads(r.body) for r in j.rows("T1") if r.type == "open_round"]
        assert [o["supervisor"] for o in opens] == ["sup-ana", "sup-ana"]
        assert opens[0]["command_id"] == "open-1" and opens[0]["signature"] == published["signature"]
        assert opens[0]["issued_at"] == published["issued_at"]
    finally:
        j.close()


async def deal_to_decision(service: Service, gw: Gateway, ops: Client, platform: Client, station: Client,
                           p7: Client) -> str:
    await wait_until(lambda: ops.events("round_opened"), what="round opened")
    rid = ops.events("round_opened")[-1]["round_id"]
    await platform.send(topics.actions("T1"), bet(rid, "ante-1", player_id="player-7", bet_type="ante", seat=1))
    await wait_until(lambda: ops.events("bet_accepted"), what="the ante")
    await station.send(topics.station("T1"), {"type": "close_betting", "command_id": "close", "round_id": rid})
    for pos, code in DEAL.items():
        await wait_until(lambda: (p := ops.prompts()) and p[-1]["kind"] == "NEXT" and p[-1]["position"] == pos,
                         what=f"NEXT {pos}")
        await gw.send("OK", code)
    await wait_until(lambda: p7.mine("decision_required"), what="player-7 asked to decide")
    return rid


async def test_a_pause_during_a_decision_stops_its_timer_across_a_restart_and_the_resume_gives_a_full_window(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker, game="sevenluck", options={"seats": 3}, decision_seconds=DECISION_MS / 1000)
    async with Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "player-7", "studio/v1/tables/T1/players/player-7") as p7, \
            Client(broker, "player-platform") as platform, Client(broker, "station-T1") as station, \
            Client(broker, "supervisor-sup-ana") as sup:
        async with backend(s, broker) as (service, gw):
            rid = await deal_to_decision(service, gw, ops, platform, station, p7)
            await sup.send(topics.supervisor("T1"), operation("pause", reason="dealer change"))
            await wait_until(lambda: ops.prompts("PAUSED"), what="the station told PAUSED")
            assert "dealer change" in ops.prompts("PAUSED")[-1]["message"]
            paused = ops.events("table_paused")[-1]
            assert paused["data"] == {"supervisor": "sup-ana", "reason": "dealer change", "state": "paused"}
            assert paused["round_id"] == rid
            # longer than the whole decision window: nobody is folded, and a decision is not taken either
            await asyncio.sleep(DECISION_MS / 1000 * 1.2)
            await platform.send(topics.actions("T1"), {"type": "player_decision", "command_id": "d-early",
                                                       "round_id": rid, "player_id": "player-7", "action": "PLAY"})
            await wait_until(lambda: p7.mine("rejected"), what="the decision refused while paused")
            assert "paused by supervisor sup-ana" in p7.mine("rejected")[-1]["data"]["reason"]
            cur = service.tables["T1"].current
            assert cur is not None and cur.phase == Phase.DECISION and not cur.decisions
            assert not ops.events("decision_made") and service.timers.armed.get("T1") is None
            assert ops_count(service, "pause", "applied") == 1 and operating(service, "paused") == 1
        # a restart: the journal keeps the table paused; no window runs, none is renewed
        n_required = len(p7.mine("decision_required"))
        n_paused = len(ops.prompts("PAUSED"))
        async with backend(s, broker) as (service, gw):
            table = service.tables["T1"]
            assert table.mode is Mode.PAUSED and table.current is not None and table.current.round_id == rid
            await wait_until(lambda: len(ops.prompts("PAUSED")) > n_paused, what="PAUSED again after the restart")
            await asyncio.sleep(DECISION_MS / 1000 * 1.2)
            assert table.current.phase == Phase.DECISION and not table.current.decisions
            assert len(p7.mine("decision_required")) == n_required, "a window was offered while paused"
            assert operating(service, "paused") == 1 and operating(service, "open") == 0
            # the resume: a full window from the resume itself, told publicly and to the player
            await sup.send(topics.supervisor("T1"), operation("resume"))
            await wait_until(lambda: ops.events("table_resumed"), what="resumed")
            resumed_at = ops.events("table_resumed")[-1]["at"]
            await wait_until(lambda: [e for e in ops.events("decisions_open") if e["data"].get("resumed")],
                             what="the decisions open again")
            again = [e for e in ops.events("decisions_open") if e["data"].get("resumed")][-1]
            assert again["data"]["closes_at"] == resumed_at + DECISION_MS
            await wait_until(lambda: [m for m in p7.mine("decision_required") if m["data"].get("resumed")],
                             what="player-7 told the new window")
            told = [m for m in p7.mine("decision_required") if m["data"].get("resumed")][-1]
            assert told["data"]["closes_at"] == resumed_at + DECISION_MS
            # the station's prompt is its own message: it may arrive after the events
            await wait_until(lambda: ops.prompts()[-1]["kind"] == "WAIT", what="the station told to wait, not PAUSED")
            await platform.send(topics.actions("T1"), {"type": "player_decision", "command_id": "d-1",
                                                       "round_id": rid, "player_id": "player-7", "action": "PLAY"})
            await wait_until(lambda: ops.events("round_result"), what="the result")
            assert ops.events("decision_made")[-1]["data"]["by"] == "player"
            assert ops_count(service, "resume", "applied") == 1 and operating(service, "open") == 1
    rounds = recall(s, "T1", rounds=1)
    kinds = [(e["type"], e.get("supervisor")) for e in rounds[0]["events"] if e["type"].startswith("supervisor_")]
    assert kinds == [("supervisor_pause", "sup-ana"), ("supervisor_resume", "sup-ana")]
    pause = next(e for e in rounds[0]["events"] if e["type"] == "supervisor_pause")
    assert pause["reason"] == "dealer change" and len(pause["signature"]) == 64
    assert {"prompt": "PAUSED", "message": ops.prompts("PAUSED")[0]["message"]} in pause["effects"]


async def test_a_close_takes_effect_at_the_rounds_end_and_a_closed_table_takes_only_a_reopen(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker) as (service, _gw), \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "supervisor-sup-ana") as sup:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        await sup.send(topics.supervisor("T1"), operation("close", reason="end of shift"))
        await wait_until(lambda: ops.events("table_closing"), what="closing")
        assert ops.events("table_closing")[-1]["data"]["last_round"] == rid
        assert service.tables["T1"].current.phase == Phase.BETTING_OPEN  # the round goes on
        n = len(ops.events("rejected"))
        await sup.send(topics.supervisor("T1"), operation("close"))
        await wait_until(lambda: len(ops.events("rejected")) > n, what="a second close refused")
        assert "already closing" in refused(ops, n)[0]
        # the round ends (voided here): the table is closed now, and no round opens
        await sup.send(topics.supervisor("T1"), sign_command(SUP_KEY, {
            "type": "supervisor_void", "command_id": "void-1", "supervisor": "sup-ana", "table_id": "T1",
            "round_id": rid, "issued_at": time.time_ns() // 1_000_000, "reason": "closing"}))
        await wait_until(lambda: ops.events("table_closed") and ops.prompts("CLOSED"), what="closed")
        assert "end of shift" in ops.prompts("CLOSED")[-1]["message"]
        await no_round_opens_by_itself(service, sup, ops)
        assert len(ops.events("round_opened")) == 1 and operating(service, "closed") == 1
        # anything but a reopen is refused, with the reason, and changes nothing
        n = len(ops.events("rejected"))
        for kind in ("pause", "resume", "close", "open_round"):
            await sup.send(topics.supervisor("T1"), operation(kind))
        await wait_until(lambda: len(ops.events("rejected")) >= n + 4, what="four refusals")
        assert all("closed" in r for r in refused(ops, n)), refused(ops, n)
        assert service.tables["T1"].mode is Mode.CLOSED
        assert ops_count(service, "close", "refused") == 2 and ops_count(service, "pause", "refused") == 1
        # the reopen: the table plays again (auto_rounds)
        await sup.send(topics.supervisor("T1"), operation("reopen"))
        await wait_until(lambda: ops.events("table_reopened"), what="reopened")
        await wait_until(lambda: len(ops.events("round_opened")) == 2, what="a round after the reopen")
    rounds = recall(s, "T1", rounds=2)
    assert [e["type"] for e in rounds[0]["events"] if e["type"] in ("supervisor_close", "supervisor_reopen")] == [
        "supervisor_close", "supervisor_reopen"]


async def test_forged_misaddressed_unsigned_operations_and_a_station_pausing_change_nothing(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker) as (service, _gw), \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "supervisor-sup-ana") as sup, Client(broker, "station-T1") as station:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        n = len(ops.events("rejected"))
        await station.send(topics.station("T1"), operation("pause"))  # the station's own topic: not its command
        await station.send(topics.supervisor("T1"), operation("pause"))  # not its topic: the broker drops it
        await sup.send(topics.supervisor("T1"), operation("pause", key=OTHER_KEY))  # forged
        await sup.send(topics.supervisor("T1"), {**operation("close"), "type": "supervisor_pause"})  # altered
        await sup.send(topics.supervisor("T1"), operation("pause", table="T2"))  # signed for another table
        await sup.send(topics.supervisor("T1"), {k: v for k, v in operation("pause").items() if k != "signature"})
        await sup.send(topics.supervisor("T1"), operation("pause", issued_at=1_000))  # long ago
        await sup.send(topics.supervisor("T1"), operation("pause", round_id=rid))  # a table command names no round
        await wait_until(lambda: len(ops.events("rejected")) >= n + 7, what="seven refusals")
        await flushed(sup, ops, topics.supervisor("T1"))
        reasons = refused(ops, n)
        assert len(reasons) == 7, reasons
        assert any("supervisor_pause is a supervisor's command and is not accepted from the dealer station" in r
                   for r in reasons)
        m = service.metrics
        assert m.commands_refused.labels(table="T1", role="station", reason="wrong_role")._value.get() == 1
        for kind, count in (("bad_signature", 2), ("wrong_table", 1), ("missing_signature", 1), ("stale", 1),
                            ("malformed", 1), ("wrong_role", 1)):
            assert m.security_events.labels(table="T1", kind=kind)._value.get() == count, kind
        table = service.tables["T1"]
        assert table.mode is Mode.OPEN and table.current is not None and table.current.round_id == rid
        assert table.current.phase == Phase.BETTING_OPEN and service.timers.armed["T1"][0][0] == "close"
        assert not ops.events("table_paused") and not ops.prompts("PAUSED")
        assert all(ops_count(service, o, r) == 0 for o in ("pause", "close") for r in ("applied", "refused"))
        await wait_until(lambda: ops.prompts("ALERT"), what="the security alert on the station")
    j = Journal(s.service.journal_path)
    try:
        assert not [r for r in j.rows("T1") if r.type.startswith("supervisor_")]
        kinds = [json.loads(r.body)["kind"] for r in j.rows("T1") if r.type == "security_event"]
        assert {"wrong_role", "bad_signature", "wrong_table", "missing_signature", "stale", "malformed"} <= set(kinds)
    finally:
        j.close()
