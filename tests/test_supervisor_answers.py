"""Every supervisor act is answered (issue 28): ``dealer supervisor ...``, a real process over
TLS against the real backend and a Mosquitto with the rendered ACL, exits 0 only when the
backend applied the act; a refusal (with the backend's reason), an act nobody can answer (the
ACL refuses the publish or the events, no backend online) and an act an online backend does not
answer in time are distinct exits, each one line on stderr.

A wall-clock step (issue 29): a genuine act whose ``issued_at`` is too old (or ahead) is still
refused (replay protection), but the refusal says how far apart the clocks are and which one to
fix (the backend knows whether its own wall clock stepped since it started: it compares it with
its monotonic clock), the station shows it on its ALERT, and it is counted by cause
(``dealer_supervisor_clock_refused_total{cause}``, alerted by ``DealerSupervisorClockRefused``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

from dealer.core.operations import Mode
from dealer.edge import topics
from dealer.edge.service import Service, wall_ms
from simulators.secure_broker import SecureMosquitto
from tests.conftest import wait_until
from tests.harness_acl import USERS, broker  # noqa: F401  (broker: the module-scoped secure broker fixture)
from tests.harness_cli import supervisor_cli
from tests.harness_roles import Client, backend, operation, studio

HOUR = 3_600_000


def _cli(tmp: Path, b: SecureMosquitto, operation: str, table: str = "T1", *, user: str = "supervisor-sup-ana",
         timeout: str = "10", reason: str | None = None) -> list[str]:
    pw = tmp / f"{user}.pw"
    pw.write_text(USERS[user] + "\n")
    return [operation, table, "--supervisor", "sup-ana", "--key-file", str(tmp / "sup-ana.key"), "--broker", b.tls_url,
            "--username", user, "--password-file", str(pw), "--ca-file", str(b.ca_file), "--timeout", timeout] + (["--reason", reason] if reason else [])


async def test_applied_refused_and_not_permitted_acts_exit_apart(broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker) as (service, _gw):
        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause", reason="dealer change"))
        assert (code, err) == (0, ""), err
        assert json.loads(out)["type"] == "supervisor_pause"
        assert service.tables["T1"].mode is Mode.PAUSED  # applied before the tool said so

        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause"))
        assert code == 3 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
        assert err.count("\n") == 1 and "refused by the backend" in err and "already paused" in err, err

        # a station's login may read T1's events but not publish a supervisor act: the broker says so
        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "resume", user="station-T1"))
        assert code == 4 and out == "", (code, out, err)
        assert "broker refused the publish" in err and "ACL" in err and err.count("\n") == 1, err
        assert service.tables["T1"].mode is Mode.PAUSED

        # sup-ana may act on T1 only (Mosquitto grants the SUBACK of T2's events and then delivers
        # nothing; the PUBACK is what refuses)
        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause", "T2"))
        assert code == 4 and "refused the publish on studio/v1/tables/T2/supervisor" in err, (code, err)
        assert service.tables["T2"].mode is not Mode.PAUSED

        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "resume"))
        assert code == 0, err
        assert service.tables["T1"].mode is not Mode.PAUSED


async def test_no_backend_online_and_no_answer_in_time(broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker):
        pass  # a clean stop says "offline" on its retained status
    code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause", timeout="3"))
    assert code == 4 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
    assert "no backend is online" in err and err.count("\n") == 1, err

    # a backend that says it is online but answers nothing (hung): exit 5, the act may still apply
    async with Client(broker, "dealer-backend") as ghost:
        await ghost.c.publish(topics.backend_status("ghost"), b'{"online": true, "session": "x"}', qos=1, retain=True)
        try:
            code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause", timeout="3"))
            assert code == 5 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
            assert "no answer within the timeout" in err and "ghost" in err, err
        finally:
            await ghost.c.publish(topics.backend_status("ghost"), b"", qos=1, retain=True)


@contextlib.asynccontextmanager
async def stepped_backend(s, offset: list[int]) -> AsyncIterator[Service]:  # type: ignore[no-untyped-def]
    """The backend on a wall clock the test steps (``offset[0]`` ms); its monotonic clock is untouched."""
    from dealer.edge import runner

    service = Service(s, bus=runner.build_bus(s), clock=lambda: wall_ms() + offset[0])
    task = asyncio.create_task(service.run())
    try:
        await wait_until(lambda: service.bus.connected and service.ready.is_set(), what="backend connected")
        yield service
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def clock_refused(service: Service, cause: str) -> float:
    return service.metrics.supervisor_clock_refused.labels(table="T1", cause=cause)._value.get()


async def answer(sup: Client, ops: Client, act: dict) -> dict:  # type: ignore[type-arg]
    """Send a signed act as the supervisor's console does; the backend's answer on ``events``."""
    await sup.send(topics.supervisor("T1"), act)
    return await wait_until(lambda: next((e for e in ops.got if e[1].get("data", {}).get("command_id")
                                          == act["command_id"]), None), what=f"the answer to {act['command_id']}")


async def test_a_clock_step_refuses_genuine_acts_says_which_clock_to_fix_and_counts_them(
        broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    offset = [0]
    s = studio(tmp_path, broker, auto_rounds=False)
    async with stepped_backend(s, offset) as service, \
            Client(broker, "station-T1", "studio/v1/tables/T1/state") as station, \
            Client(broker, "ops", "studio/v1/tables/T1/events", "studio/v1/tables/T1/state") as ops, \
            Client(broker, "supervisor-sup-ana") as sup:
        # the backend host's clock steps an hour forward: the console's act is an hour old to it
        offset[0] = HOUR
        code, out, err = await supervisor_cli(*_cli(tmp_path, broker, "pause", reason="dealer change"))
        assert code == 3 and err.count("\n") == 1, (code, out, err)
        assert "refused by the backend: stale" in err and "the clocks differ by 3600 s" in err, err
        assert "this backend's clock stepped 3600 s forward since it started: fix this backend host's clock" in err
        assert service.tables["T1"].mode is Mode.OPEN  # refused: nothing changed
        assert (clock_refused(service, "stale"), clock_refused(service, "future")) == (1, 0)
        offset_s = service.metrics.supervisor_clock_offset.labels(table="T1")._value.get()
        assert -HOUR / 1000 - 60 < offset_s < -HOUR / 1000 + 1, offset_s
        # ... and the station is told, in the same words
        said = await wait_until(lambda: [p["message"] for p in station.prompts("ALERT") if p.get("reason") == "security"],
                                what="the station's ALERT")
        assert "fix this backend host's clock" in said[-1] and "nothing changed at the table" in said[-1], said

        # stepped an hour back instead: the act comes from the future
        offset[0] = -HOUR
        got = await answer(sup, ops, operation("pause"))
        assert got[1]["event"] == "rejected" and "in the future" in got[1]["data"]["reason"]
        assert "this backend's clock stepped 3600 s back" in got[1]["data"]["reason"]
        assert clock_refused(service, "future") == 1

        # the backend's clock is right again, the console's two minutes ahead: fix the console's
        offset[0] = 0
        got = await answer(sup, ops, operation("pause", issued_at=time.time_ns() // 1_000_000 + 120_000))
        reason = got[1]["data"]["reason"]
        assert "the signing console's clock is ahead of this backend's, which has not stepped" in reason, reason
        assert "fix the console's clock" in reason and clock_refused(service, "future") == 2

        # the clocks agree: a new act is applied at once
        got = await answer(sup, ops, operation("pause"))
        assert got[1]["event"] == "command_accepted" and service.tables["T1"].mode is Mode.PAUSED
        assert (clock_refused(service, "stale"), clock_refused(service, "future")) == (1, 2)
