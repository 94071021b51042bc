"""A dealer logs on at the station, through the real backend over a real Mosquitto with the rendered
ACL and TLS (the broker of ``tests/harness_acl.py``), each role with its own credentials: the
station's command is answered by its id (``command_accepted``), the retained state and history name
the dealer for any screen that connects later, the round's result and ``dealer recall`` say who
dealt it, and no other role may log a dealer on."""

from __future__ import annotations

import time
from pathlib import Path

from dealer.edge import topics
from dealer.edge.signing import sign_command
from simulators.secure_broker import SecureMosquitto
from tests.conftest import wait_until
from tests.harness_acl import broker  # noqa: F401  (broker: the module-scoped secure broker fixture)
from tests.harness_roles import SUP_KEY, Client, backend, operation, studio
from tools.audit import recall, render_recall


async def test_a_dealer_logs_on_at_the_station_and_the_round_names_them(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker, auto_rounds=False)
    logon = {"type": "dealer_logon", "command_id": "st-T1-logon-1", "dealer_id": "D-0042"}
    async with backend(s, broker) as (service, _gw), \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state", "studio/v1/tables/T1/results") as ops, \
            Client(broker, "supervisor-sup-ana") as sup, Client(broker, "station-T1") as station, \
            Client(broker, "player-platform") as platform:
        # the player platform may not log a dealer on: refused by role, nothing changes
        await platform.send(topics.table_topic("T1", "actions"), logon | {"command_id": "pp-logon"})
        await wait_until(lambda: ops.events("rejected"), what="the platform's log-on refused")
        assert "dealer station" in ops.events("rejected")[-1]["data"]["reason"]
        await station.send(topics.station("T1"), logon)
        await wait_until(lambda: ops.events("dealer_logged_on"), what="the dealer logged on")
        assert ops.events("dealer_logged_on")[-1]["data"] == {"dealer_id": "D-0042", "previous": None}
        answers = [e["data"] for e in ops.events("command_accepted")]
        assert {"type": "dealer_logon", "command_id": "st-T1-logon-1"} in answers
        await station.send(topics.station("T1"), logon)  # the same command again: answered, applied once
        await wait_until(lambda: ops.events("command_repeated"), what="the repeat answered")
        assert len(ops.events("dealer_logged_on")) == 1 and service.tables["T1"].dealer == "D-0042"
        # a screen that connects now gets the dealer from the retained state and history
        async with Client(broker, "station-T1", topics.state("T1"), topics.history("T1")) as late:
            await wait_until(lambda: {t for t, _ in late.got} >= {topics.state("T1"), topics.history("T1")},
                             what="the retained state and history")
            got = dict(late.got)
            assert got[topics.state("T1")]["dealer"] == "D-0042"
            assert got[topics.history("T1")]["dealer"] == "D-0042"
            assert got[topics.history("T1")]["schema_id"] == "studio.v1.table_history"
        # a round opened and voided: its result names the dealer, and so does recall
        await sup.send(topics.supervisor("T1"), operation("open_round", command_id="open-1"))
        await wait_until(lambda: ops.events("round_opened"), what="a round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        await sup.send(topics.supervisor("T1"), sign_command(SUP_KEY, {
            "type": "supervisor_void", "command_id": "void-1", "supervisor": "sup-ana", "table_id": "T1",
            "round_id": rid, "issued_at": time.time_ns() // 1_000_000, "reason": "test"}))
        await wait_until(lambda: [m for t, m in ops.got if t.endswith("/results")], what="the result")
        result = next(m for t, m in ops.got if t.endswith("/results"))
        assert result["round_id"] == rid and result["dealers"] == ["D-0042"]
        sup_answers = {e["data"]["command_id"] for e in ops.events("command_accepted")}
        assert {"open-1", "void-1"} <= sup_answers  # the supervisor's commands are answered by id too
    rounds = recall(s, "T1")
    assert rounds[-1]["result"]["dealers"] == ["D-0042"]
    assert "dealt by: D-0042" in render_recall(rounds)
