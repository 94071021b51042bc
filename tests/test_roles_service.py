"""Roles, command ids and signed supervisor commands, through the real backend.

The backend runs against a real Mosquitto with the deployed configuration and the ACL that
``dealer deploy acl`` renders (the broker of ``tests/harness_acl.py``), and connects over
TLS as ``dealer-backend``. Each role uses its own credentials, as in a studio: the broker
drops what a role may not publish, and the backend refuses what arrives on a topic whose
role may not send it. Every refusal is checked to change nothing at the table.

Mosquitto only: the roles are enforced by Mosquitto's ACL file and password file (rendered by
``dealer deploy acl``); RabbitMQ and NATS express them in their own permission models, which
the deploy does not render (docs/brokers.md). The backend's own checks run on every broker
(tests/test_ingress.py, tests/test_integration.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any


from dealer.edge import topics
from tools.audit import recall
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Journal
from dealer.core.round import Phase
from dealer.edge.service import Service
from simulators.secure_broker import SecureMosquitto
from tests.conftest import cancel_and_wait, wait_until
from tests.harness import secure_settings
from tests.harness_acl import USERS, broker  # noqa: F401  (the module-scoped secure broker fixture)
from tests.harness_mqtt import Gateway
from tests.harness_roles import OTHER_KEY, SAMPLES, SUP_KEY, Client, bet, flushed, refused, void


DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]
def settings(tmp: Path, b: SecureMosquitto, *, betting: float = 30.0) -> Settings:
    tables = [{"id": tid, "game": "teen-patti", "betting_seconds": betting, "pause_seconds": 0.1,
               "scanner": {"kind": "mqtt", "reader_id": f"SC{i}", "heartbeat_timeout": 60}}
              for i, tid in enumerate(("T1", "T2"), start=1)]
    return secure_settings(tmp, b, password=USERS["dealer-backend"], supervisor_key=SUP_KEY, tables=tables)


async def _heartbeats(b: SecureMosquitto) -> None:
    """T1's scanner gateway (its own credentials): BOOT, then a heartbeat every 0.3 s, so the
    reader's link is up and rounds open."""
    async with Client(b, "scanner-T1") as gw:
        await Gateway(gw.publish, reader="SC1").beat()


@contextlib.asynccontextmanager
async def backend(s: Settings, b: SecureMosquitto) -> AsyncIterator[Service]:
    from dealer.edge import runner

    service = Service(s, bus=runner.build_bus(s))
    task = asyncio.create_task(service.run())
    hb = asyncio.create_task(_heartbeats(b))
    try:
        await wait_until(lambda: service.bus.connected and service.ready.is_set(), what="backend connected")
        yield service
    finally:
        for t in (hb, task):
            t.cancel()
        await asyncio.gather(hb, task, return_exceptions=True)


async def test_no_role_but_the_supervisor_can_void_and_only_the_station_closes_betting(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = settings(tmp_path, broker)
    async with backend(s, broker) as service, \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "player-platform") as platform, Client(broker, "station-T1") as station, \
            Client(broker, "station-T2") as station2:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        signed = void(rid)
        # the player platform: a void (even a genuinely signed one) on its own topic is refused
        await platform.send(topics.actions("T1"), signed)
        await platform.send(topics.actions("T1"), {"type": "supervisor_void", "supervisor": "sup-ana",
                                                   "reason": "free string", "command_id": "x1", "round_id": rid})
        await platform.send(topics.actions("T1"), {"type": "close_betting", "command_id": "x2", "round_id": rid})
        await platform.send(topics.supervisor("T1"), signed)  # not its topic: the broker drops it
        # a station: a void on its topic is refused, the supervisor topic is not its own
        await station.send(topics.station("T1"), {**signed, "command_id": "x3"})
        await station.send(topics.supervisor("T1"), signed)  # dropped by the broker
        await station2.send(topics.station("T1"), {"type": "close_betting", "command_id": "x4", "round_id": rid})
        await wait_until(lambda: len(ops.events("rejected")) >= 4, what="four refusals")
        await flushed(platform, ops, topics.actions("T1"))
        reasons = refused(ops, 0)
        assert len(reasons) == 4, reasons
        assert sum("supervisor's command and is not accepted from the player platform" in r for r in reasons) == 2
        assert any("close_betting is the dealer station's command" in r for r in reasons)
        assert any("supervisor's command and is not accepted from the dealer station" in r for r in reasons)
        cur = service.tables["T1"].current
        assert cur is not None and cur.phase == Phase.BETTING_OPEN and cur.round_id == rid
        m = service.metrics
        assert m.commands_refused.labels(table="T1", role="player_platform", reason="wrong_role")._value.get() == 3
        assert m.commands_refused.labels(table="T1", role="station", reason="wrong_role")._value.get() == 1
        assert m.security_events.labels(table="T1", kind="wrong_role")._value.get() == 3  # the three voids
        await wait_until(lambda: ops.prompts("ALERT"), what="the security alert on the station")
        # the station of T1 closes betting
        await station.send(topics.station("T1"), {"type": "close_betting", "command_id": "close-1", "round_id": rid})
        await wait_until(lambda: ops.events("betting_closed"), what="betting closed by the station")
        assert ops.events("betting_closed")[-1]["data"]["by"] == "dealer"
    j = Journal(s.service.journal_path)
    try:
        kinds = [json.loads(r.body)["kind"] for r in j.rows("T1") if r.type == "security_event"]
        assert kinds.count("wrong_role") == 3
        assert not [r for r in j.rows("T1") if r.type == "supervisor_void"]
    finally:
        j.close()


async def test_unsigned_forged_stale_reused_and_replayed_voids_change_nothing(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = settings(tmp_path, broker)
    async with backend(s, broker) as service, \
            Client(broker, "ops", "studio/v1/tables/+/events", "studio/v1/tables/+/state",
                   "studio/v1/tables/+/results") as ops, \
            Client(broker, "supervisor-sup-ana") as sup:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        unsigned = {k: v for k, v in void(rid).items() if k != "signature"}
        await sup.send(topics.supervisor("T1"), unsigned)
        await sup.send(topics.supervisor("T1"), void(rid, key=OTHER_KEY))              # a forged signature
        await sup.send(topics.supervisor("T1"), void(rid, issued_at=1_000))             # issued long ago
        await sup.send(topics.supervisor("T1"), {**void(rid), "reason": "altered after signing"})
        await sup.send(topics.supervisor("T1"), void(rid, supervisor="sup-bob"))        # nobody we know
        await sup.send(topics.supervisor("T1"), void(rid, table="T2"))                  # signed for another table
        await sup.send(topics.supervisor("T2"), void(rid, table="T2"))                  # sup-ana may not act on T2: ACL
        await wait_until(lambda: len(ops.events("rejected")) >= 6, what="six refusals")
        await flushed(sup, ops, topics.supervisor("T1"))
        m = service.metrics
        for kind in ("missing_signature", "bad_signature", "stale", "unknown_supervisor", "wrong_table"):
            assert m.security_events.labels(table="T1", kind=kind)._value.get() >= 1, kind
        assert m.security_events.labels(table="T1", kind="bad_signature")._value.get() == 2
        cur = service.tables["T1"].current
        assert cur is not None and cur.phase == Phase.BETTING_OPEN and not ops.events("round_voided")
        assert service.tables["T2"].current is None or service.tables["T2"].current.phase != Phase.VOID
        # the genuine void: applied once, however often it is delivered
        good = void(rid, command_id="void-1", reason="shoe dropped, cards exposed")
        await sup.send(topics.supervisor("T1"), good)
        await wait_until(lambda: ops.events("round_voided"), what="the round voided")
        await sup.send(topics.supervisor("T1"), good)  # a QoS 1 redelivery
        await wait_until(lambda: ops.events("command_repeated"), what="the repeat answered")
        rep = ops.events("command_repeated")[-1]
        assert rep["data"] == {"type": "supervisor_void", "command_id": "void-1", "answer": "accepted", "repeat": True}
        assert rep["round_id"] == rid
        # the next round opens; the old void delivered again does not void it
        await wait_until(lambda: len(ops.events("round_opened")) >= 2, what="the next round")
        nxt = ops.events("round_opened")[-1]["round_id"]
        await sup.send(topics.supervisor("T1"), good)
        await wait_until(lambda: len(ops.events("command_repeated")) >= 2, what="the repeat answered again")
        # the same command id for other content is refused
        n = len(ops.events("rejected"))
        await sup.send(topics.supervisor("T1"), void(nxt, command_id="void-1", reason="another void"))
        await wait_until(lambda: len(ops.events("rejected")) > n, what="reused id refused")
        assert "already used for another command" in refused(ops, n)[0]
        assert m.security_events.labels(table="T1", kind="reused_command_id")._value.get() == 1
        cur = service.tables["T1"].current
        assert cur is not None and cur.round_id == nxt and cur.phase == Phase.BETTING_OPEN
        voided = [r for r in ops.got if r[0].endswith("/results") and r[1]["outcome"] == "VOIDED"]
        assert [r[1]["round_id"] for r in voided] == [rid]
        assert "sup-ana" in voided[0][1]["reason"]
    # the journal and recall name the authenticated supervisor; every refusal is journaled
    j = Journal(s.service.journal_path)
    try:
        voids = [json.loads(r.body) for r in j.rows("T1") if r.type == "supervisor_void"]
        assert len(voids) == 1 and voids[0]["supervisor"] == "sup-ana" and voids[0]["signature"] == good["signature"]
        assert voids[0]["command_id"] == "void-1" and voids[0]["round_id"] == rid
        kinds = {json.loads(r.body)["kind"] for r in j.rows("T1") if r.type == "security_event"}
        assert {"missing_signature", "bad_signature", "stale", "unknown_supervisor", "wrong_table",
                "reused_command_id"} <= kinds
    finally:
        j.close()
    rounds = recall(s, "T1", rounds=5)
    ev = next(e for r in rounds for e in r["events"] if e["type"] == "supervisor_void")
    assert ev["supervisor"] == "sup-ana" and ev["signature"] == good["signature"] and ev["issued_at"] == good["issued_at"]


async def test_a_repeated_void_after_a_restart_is_still_answered_not_applied(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = settings(tmp_path, broker, betting=1.0)
    async with Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "supervisor-sup-ana") as sup:
        async with backend(s, broker):
            await wait_until(lambda: ops.events("round_opened"), what="round opened")
            rid = ops.events("round_opened")[-1]["round_id"]
            good = void(rid, command_id="void-r")
            await sup.send(topics.supervisor("T1"), good)
            await wait_until(lambda: ops.events("round_voided"), what="voided")
        async with backend(s, broker) as service:  # a new process on the same journal
            await wait_until(lambda: len(ops.events("round_opened")) >= 2, what="a new round after the restart")
            await sup.send(topics.supervisor("T1"), good)
            await wait_until(lambda: ops.events("command_repeated"), what="the repeat answered")
            assert len(ops.events("round_voided")) == 1
            assert service.metrics.command_repeats.labels(table="T1", role="supervisor")._value.get() == 1


async def test_commands_name_their_round_and_a_retried_bet_is_answered_as_accepted(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = settings(tmp_path, broker)
    async with backend(s, broker) as service, \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "player-7", "studio/v1/tables/T1/players/player-7") as player, \
            Client(broker, "player-platform") as platform, Client(broker, "station-T1") as station:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        rid = ops.events("round_opened")[-1]["round_id"]
        first = bet(rid, "b1", "cmd-b1")
        await platform.send(topics.actions("T1"), first)
        await wait_until(lambda: player.mine("bet_accepted"), what="bet accepted")
        await platform.send(topics.actions("T1"), first)  # the platform retries: same command id
        await wait_until(lambda: len(player.mine("bet_accepted")) >= 2, what="the retry answered")
        again = player.mine("bet_accepted")[-1]
        assert again["data"]["repeat"] is True and again["data"]["bet_id"] == "b1"
        assert again["data"]["command_id"] == "cmd-b1"
        cur = service.tables["T1"].current
        assert cur is not None and list(cur.bets) == ["b1"]
        n = len(ops.events("rejected"))
        await platform.send(topics.actions("T1"), bet(rid, "b1"))                # a new command reusing a bet id
        await platform.send(topics.actions("T1"), bet(None, "b2"))               # no round named
        await platform.send(topics.actions("T1"), bet("T1-000099", "b3"))        # another round
        await platform.send(topics.actions("T1"), {k: v for k, v in bet(rid, "b4").items() if k != "command_id"})
        await station.send(topics.station("T1"), {"type": "close_betting", "command_id": "c9", "round_id": "T1-000099"})
        await station.send(topics.station("T1"), {"type": "close_betting", "command_id": "c10", "round_id": rid,
                                                  "by": "timer"})  # only the backend's own timer says timer
        await wait_until(lambda: len(ops.events("rejected")) >= n + 6, what="six refusals")
        reasons = refused(ops, n)
        assert any("duplicate bet id 'b1'" in r for r in reasons)
        assert any("place_bet must name its round id" in r for r in reasons)
        assert any("bet is for round T1-000099" in r for r in reasons)
        assert any("place_bet must name its command id" in r for r in reasons)
        assert any("close_betting is for round T1-000099" in r for r in reasons)
        assert any("closes betting as 'dealer', not 'timer'" in r for r in reasons)
        cur = service.tables["T1"].current
        assert cur is not None and list(cur.bets) == ["b1"] and cur.phase == Phase.BETTING_OPEN
        # the player heard why on its own topic, with the command's id
        assert any(m["data"].get("reason", "").startswith("duplicate bet id") for m in player.mine("rejected"))


#: One well-formed sample of every command type (tests/test_ingress.py), for player-7.
COMMAND_SAMPLES: dict[str, dict[str, Any]] = {
    k: v | ({"player_id": "player-7"} if "player_id" in v else {}) for k, v in SAMPLES.items()}
SENDS = {"player-platform": "actions", "station-T1": "station", "supervisor-sup-ana": "supervisor"}
OWN = {"actions": {"place_bet", "player_decision", "player_action"},
       "station": {"close_betting", "dealer_confirm", "card_exposed"}, "supervisor": {"supervisor_void"}}


async def test_every_role_every_command_type_every_command_topic(broker: SecureMosquitto,  # noqa: F811
                                                                  tmp_path: Path) -> None:
    """Each user publishes every command type on every command topic of T1, all for a round
    that does not exist (so nothing that gets through can change the table): the broker drops
    what the user may not publish, the backend refuses another role's command as
    ``wrong_role``, and the rest reaches the round machine, which refuses it for its round."""
    s = settings(tmp_path, broker)
    ghost = "T1-999999"
    users = ["player-platform", "station-T1", "station-T2", "supervisor-sup-ana", "scanner-T1", "settlement", "ops",
             "player-7"]
    async with backend(s, broker) as service, Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops:
        await wait_until(lambda: ops.events("round_opened"), what="round opened")
        before = service.tables["T1"].current
        expected: dict[str, str] = {}
        for user in users:
            async with Client(broker, user) as c:
                for leaf in ("actions", "station", "supervisor"):
                    for ctype, sample in COMMAND_SAMPLES.items():
                        cid = f"m-{user}-{leaf}-{ctype}"[:64]
                        msg = {**sample, "command_id": cid, "round_id": ghost}
                        if ctype == "supervisor_void":
                            msg = void(ghost, command_id=cid, reason="probe")
                        await c.send(topics.table_topic("T1", leaf), msg)
                        if SENDS.get(user) != leaf:
                            expected[cid] = "dropped"
                        elif ctype not in OWN[leaf]:
                            expected[cid] = "wrong_role"
                        else:
                            expected[cid] = "core"
        reached = [k for k, v in expected.items() if v != "dropped"]
        await wait_until(lambda: {e["data"].get("command_id") for e in ops.events("rejected")} >= set(reached),
                         timeout=45, what="every command that got through answered")
        async with Client(broker, "player-platform") as control:
            await flushed(control, ops, topics.actions("T1"))
        got: dict[str, str] = {cid: "dropped" for cid in expected}
        for e in ops.events("rejected"):
            cid, reason = e["data"].get("command_id"), e["data"]["reason"]
            if cid in got:
                got[cid] = "wrong_role" if "is not accepted from" in reason else (
                    "core" if ghost in reason else f"other: {reason}")
        assert got == expected
        assert sum(v == "core" for v in got.values()) == 7 and sum(v == "wrong_role" for v in got.values()) == 14
        cur = service.tables["T1"].current
        assert cur is before and cur is not None and cur.phase == Phase.BETTING_OPEN and not cur.bets


async def test_ops_and_the_public_never_see_a_hole_card_and_results_carry_only_shown_cards(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    """A Sevenluck round through the real backend over the rendered ACL: ``ops`` subscribed to
    everything it may read, and another player, see no hole card before the reveal and never
    the folded player's; each player gets its own cards; the result names only shown cards."""
    s = settings(tmp_path, broker)
    data = s.model_dump()
    data["tables"] = [t | {"game": "sevenluck", "options": {"seats": 3}, "decision_seconds": 2.0}
                      for t in data["tables"] if t["id"] == "T1"]
    s = load_settings(**{k: data[k] for k in ("service", "mqtt", "tables", "security")})
    deal = {"P1.1": "AS", "P2.1": "2C", "D.1": "QD", "P1.2": "AH", "P2.2": "7D", "D.2": "6S",
            "P1.3": "AD", "P2.3": "9C", "D.3": "4H"}
    from dealer.edge import runner

    service = Service(s, bus=runner.build_bus(s))
    task = asyncio.create_task(service.run())
    async with Client(broker, "ops", "#") as ops, Client(broker, "player-7", "#") as p7, \
            Client(broker, "player-platform") as platform, Client(broker, "station-T1") as station, \
            Client(broker, "scanner-T1") as gw_client:
        gw = Gateway(gw_client.publish, reader="SC1")
        beat = asyncio.create_task(gw.beat())
        try:
            await wait_until(lambda: ops.events("round_opened"), what="round opened")
            rid = ops.events("round_opened")[-1]["round_id"]
            for seat, player in ((1, "player-7"), (2, "player-8")):
                await platform.send(topics.actions("T1"), bet(rid, f"ante-{seat}", player_id=player, bet_type="ante",
                                                              seat=seat))
            await wait_until(lambda: len(ops.events("bet_accepted")) == 2, what="two antes")
            await station.send(topics.station("T1"), {"type": "close_betting", "command_id": "close", "round_id": rid})
            for pos, code in deal.items():
                await wait_until(lambda: (p := ops.prompts()) and p[-1]["kind"] == "NEXT" and p[-1]["position"] == pos,
                                 what=f"NEXT {pos}")
                await gw.send("OK", code)
            await wait_until(lambda: p7.mine("decision_required"), what="player-7 asked to decide")
            before_reveal = list(ops.got)
            await platform.send(topics.actions("T1"), {"type": "player_decision", "command_id": "d7", "round_id": rid,
                                                       "player_id": "player-7", "action": "PLAY"})
            # player-8 never answers: the timer folds it, its cards are never shown
            await wait_until(lambda: [m for t, m in ops.got if t.endswith("/results")], timeout=30, what="the result")
        finally:
            await cancel_and_wait(beat, task)
    hole = {c for p, c in deal.items() if p.startswith("P")}
    dealer_cards = {deal["D.1"], deal["D.2"], deal["D.3"]}

    def codes(msgs: list[tuple[str, dict[str, Any]]]) -> set[str]:
        found: set[str] = set()

        def walk(v: Any) -> None:
            if isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
            elif isinstance(v, str):
                found.update(c for c in hole | dealer_cards if re.search(rf"\b{c}\b", v))
        for _, m in msgs:
            walk(m)
        return found

    assert not [t for t, _ in ops.got if "/players/" in t], "ops read a player's topic"
    assert not [t for t, _ in p7.got if "/players/" in t and t.split("/")[5] != "player-7"]
    assert [m for t, m in p7.got if t == topics.player_state("T1", "player-7")], "its retained state reached it"
    assert codes(before_reveal) == set(), "a hidden card reached ops before the reveal"
    folded = {deal["P2.1"], deal["P2.2"], deal["P2.3"]}
    assert codes(ops.got) & folded == set(), "the folded player's cards were shown"
    # the reveal itself reaches ops (so the walker above does see cards when they are shown)
    assert codes(ops.got) == dealer_cards | {deal["P1.1"], deal["P1.2"], deal["P1.3"]}
    mine = {m["data"]["card"] for m in p7.mine("hole_card")}
    assert mine == {deal["P1.1"], deal["P1.2"], deal["P1.3"]}
    result = next(m for t, m in ops.got if t.endswith("/results"))
    assert not set(result["cards"].values()) & folded
    assert set(result["cards"]) == {"P1.1", "P1.2", "P1.3", "D.1", "D.2", "D.3"}
    assert result["decisions"]["player-8"]["by"] == "timeout"
