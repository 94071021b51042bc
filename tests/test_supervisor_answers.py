"""Every supervisor act is answered (issue 28): ``dealer supervisor ...``, a real process over
TLS against the real backend and a Mosquitto with the rendered ACL, exits 0 only when the
backend applied the act; a refusal (with the backend's reason), an act nobody can answer (the
ACL refuses the publish or the events, no backend online) and an act an online backend does not
answer in time are distinct exits, each one line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from dealer.core.operations import Mode
from dealer.edge import topics
from simulators.secure_broker import SecureMosquitto
from tests.test_roles_acl import USERS, broker  # noqa: F401  (the module-scoped secure broker fixture)
from tests.test_roles_service import Client
from tests.test_table_ops_service import backend, run_cli, studio


def _cli(tmp: Path, b: SecureMosquitto, operation: str, table: str = "T1", *, user: str = "supervisor-sup-ana",
         timeout: str = "10", reason: str | None = None) -> list[str]:
    pw = tmp / f"{user}.pw"
    pw.write_text(USERS[user] + "\n")
    return [operation, table, "--supervisor", "sup-ana", "--key-file", str(tmp / "sup-ana.key"), "--broker", b.tls_url,
            "--username", user, "--password-file", str(pw), "--ca-file", str(b.ca_file), "--timeout", timeout] + (["--reason", reason] if reason else [])


async def test_applied_refused_and_not_permitted_acts_exit_apart(broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker) as (service, _gw):
        code, out, err = await run_cli(*_cli(tmp_path, broker, "pause", reason="dealer change"))
        assert (code, err) == (0, ""), err
        assert json.loads(out)["type"] == "supervisor_pause"
        assert service.tables["T1"].mode is Mode.PAUSED  # applied before the tool said so

        code, out, err = await run_cli(*_cli(tmp_path, broker, "pause"))
        assert code == 3 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
        assert err.count("\n") == 1 and "refused by the backend" in err and "already paused" in err, err

        # a station's login may read T1's events but not publish a supervisor act: the broker says so
        code, out, err = await run_cli(*_cli(tmp_path, broker, "resume", user="station-T1"))
        assert code == 4 and out == "", (code, out, err)
        assert "broker refused the publish" in err and "ACL" in err and err.count("\n") == 1, err
        assert service.tables["T1"].mode is Mode.PAUSED

        # sup-ana may act on T1 only (Mosquitto grants the SUBACK of T2's events and then delivers
        # nothing; the PUBACK is what refuses)
        code, out, err = await run_cli(*_cli(tmp_path, broker, "pause", "T2"))
        assert code == 4 and "refused the publish on studio/v1/tables/T2/supervisor" in err, (code, err)
        assert service.tables["T2"].mode is not Mode.PAUSED

        code, out, err = await run_cli(*_cli(tmp_path, broker, "resume"))
        assert code == 0, err
        assert service.tables["T1"].mode is not Mode.PAUSED


async def test_no_backend_online_and_no_answer_in_time(broker: SecureMosquitto, tmp_path: Path) -> None:  # noqa: F811
    s = studio(tmp_path, broker)
    async with backend(s, broker):
        pass  # a clean stop says "offline" on its retained status
    code, out, err = await run_cli(*_cli(tmp_path, broker, "pause", timeout="3"))
    assert code == 4 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
    assert "no backend is online" in err and err.count("\n") == 1, err

    # a backend that says it is online but answers nothing (hung): exit 5, the act may still apply
    async with Client(broker, "dealer-backend") as ghost:
        await ghost.c.publish(topics.backend_status("ghost"), b'{"online": true, "session": "x"}', qos=1, retain=True)
        try:
            code, out, err = await run_cli(*_cli(tmp_path, broker, "pause", timeout="3"))
            assert code == 5 and json.loads(out)["type"] == "supervisor_pause", (code, out, err)
            assert "no answer within the timeout" in err and "ghost" in err, err
        finally:
            await ghost.c.publish(topics.backend_status("ghost"), b"", qos=1, retain=True)
