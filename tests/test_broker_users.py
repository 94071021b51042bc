"""Provisioning in one step (issue 28): ``dealer deploy users`` writes a password for every role
the docs name, Mosquitto's password file and the ACL; a real Mosquitto with the deployed
configuration loads both, every role logs in with its own secret file, the auditor reads the
backend's retained journal anchor (``dealer audit verify --config deploy/audit/auditor.toml
--anchor-from-broker``, a real process) and the rig plays a scanner; re-running keeps every
password, ``--rotate`` changes them all."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import aiomqtt
import pytest

from dealer.core.events import LinkUp
from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.edge.journal import Batch, Journal
from drivers.mqtt import make_tls_context
from simulators.secure_broker import SecureMosquitto, make_test_ca
from tests.conftest import wait_until
from tools.broker_users import mosquitto_hash
from tools.deploy import render_acl
from tests.harness import dealer_env
from tests.harness_cli import run_cli

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
AUDITOR_TOML = ROOT / "deploy" / "audit" / "auditor.toml"


def _studio(tmp: Path) -> Path:
    key = tmp / "sup-ana.key"
    key.write_text("ab" * 32 + "\n")
    key.chmod(0o600)
    cfg = tmp / "studio.toml"
    cfg.write_text(f"""
[service]
journal_path = "{tmp / 'journal.sqlite'}"
[mqtt]
url = "mqtt://127.0.0.1:1"
[[security.supervisors]]
id = "sup-ana"
key_files = ["{key}"]
[[tables]]
id = "T1"
game = "teen-patti"
[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
[[tables]]
id = "T2"
game = "sevenluck"
[tables.scanner]
kind = "serial"
port = "/dev/ttyUSB0"
reader_id = "SC2"
""")
    cfg.chmod(0o640)
    return cfg


ROLES = ["dealer-backend", "settlement", "player-platform", "scanner-T1", "station-T1", "station-T2",
         "supervisor-sup-ana", "ops", "auditor", "rig"]


def test_the_hash_is_mosquitto_passwd_s() -> None:
    salt = bytes.fromhex("4f26c747bc79bb8b3f511ab2")  # from `mosquitto_passwd -b f alice secret`
    assert mosquitto_hash("secret", salt) == (
        "$7$101$TybHR7x5u4s/URqy$Eq49O4Sv2WAD1B/TlfVqwd/+aTY2+UnQT7yTboQ9/GYDtsBz793agZvgGcQVSrQAWg/Pu6uZNwB95pzKahqx5g==")


async def test_one_step_provisions_every_role_on_a_real_broker(tmp_path: Path) -> None:
    cfg = _studio(tmp_path)
    out = tmp_path / "broker"
    done = run_cli("deploy", "users", "--config", str(cfg), "--out", str(out), "--rig", timeout=120, env=dealer_env())
    assert done.returncode == 0, done.stderr
    assert "users: " + ", ".join(ROLES) in done.stdout
    secrets = {u: (out / "secrets" / f"{u}.pw").read_text().strip() for u in ROLES}
    assert len(set(secrets.values())) == len(ROLES) and all(len(p) >= 32 for p in secrets.values())
    for f in [out / "passwd", *(out / "secrets").iterdir()]:
        assert f.stat().st_mode & 0o077 == 0, f  # nobody but the owner reads a password
    assert (out / "acl").read_text() == render_acl(load_settings(cfg), source=str(cfg), rig=True)
    assert "user auditor\n" in (out / "acl").read_text() and "user rig\n" in (out / "acl").read_text()

    # the deployed broker configuration loads the two files as they are
    certs = make_test_ca(tmp_path / "tls")
    work = tmp_path / "mosq"
    work.mkdir()
    b = SecureMosquitto(work, certs, {"placeholder": "x"}, "")
    b.password_file.write_text((out / "passwd").read_text())
    b.acl_file.write_text((out / "acl").read_text())
    b.start()
    try:
        tls = make_tls_context(b.ca_file)
        for user in ROLES:  # every role logs in with its own password
            async with aiomqtt.Client("127.0.0.1", b.tls_port, username=user, password=secrets[user],
                                      identifier=f"{user}-{uuid.uuid4().hex[:6]}", tls_context=tls, timeout=10):
                pass
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", b.tls_port, username="ops", password=secrets["auditor"],
                                      identifier="wrong", tls_context=tls, timeout=10):
                pass

        # the backend publishes its journal anchor, retained; the auditor's config reads it
        journal = Journal(tmp_path / "journal.sqlite")
        journal.commit(Batch(events=[("T1", None, LinkUp(link="broker", at=1))]))
        row, head = journal.head
        journal.close()
        async with aiomqtt.Client("127.0.0.1", b.tls_port, username="dealer-backend",
                                  password=secrets["dealer-backend"], identifier="backend", tls_context=tls,
                                  timeout=10) as backend:
            await backend.publish(topics.backend_journal("studio-host-1"), json.dumps(
                {"anchor": f"{row}:{head}", "row_id": row, "hash": head}).encode(), qos=1, retain=True)
            # the rig plays T1's scanner gateway: what it sends reaches the backend
            got: list[bytes] = []
            await backend.subscribe(topics.scanner("T1"), qos=1)

            async def read() -> None:
                async for m in backend.messages:
                    got.append(bytes(m.payload))  # type: ignore[arg-type]

            reader = asyncio.create_task(read())
            async with aiomqtt.Client("127.0.0.1", b.tls_port, username="rig", password=secrets["rig"],
                                      identifier="rig", tls_context=tls, timeout=10) as rig:
                await rig.publish(topics.scanner("T1"), b"{}", qos=1)
                await wait_until(lambda: got, what="the rig's read at the backend")
            reader.cancel()
        auditor = tmp_path / "auditor.toml"
        auditor.write_text(AUDITOR_TOML.read_text()
                           .replace("/srv/audit/journal.sqlite", str(tmp_path / "journal.sqlite"))
                           .replace("mqtts://broker.studio.lan:8883", b.tls_url)
                           .replace("/etc/dealer/audit/auditor.pw", str(out / "secrets" / "auditor.pw"))
                           .replace("/etc/dealer/tls/ca.crt", str(b.ca_file)))
        verified = await asyncio.to_thread(run_cli, "audit", "verify", "--config", str(auditor),
                                           "--anchor-from-broker", timeout=120, env=dealer_env())
        assert verified.returncode == 0, verified.stderr
        report = json.loads(verified.stdout)
        assert report["ok"] is True and report["anchors"] == 1 and report["rows"] == 1
    finally:
        b.stop()

    # again: every password kept; --rotate: every one new
    again = run_cli("deploy", "users", "--config", str(cfg), "--out", str(out), "--rig", timeout=120, env=dealer_env())
    assert again.returncode == 0 and "(0 new, 10 kept)" in again.stdout, again.stdout
    assert {u: (out / "secrets" / f"{u}.pw").read_text().strip() for u in ROLES} == secrets
    rotated = run_cli("deploy", "users", "--config", str(cfg), "--out", str(out), "--rotate", timeout=120,
                      env=dealer_env())
    assert rotated.returncode == 0 and "(9 new)" in rotated.stdout, rotated.stdout  # no rig this time
    assert all((out / "secrets" / f"{u}.pw").read_text().strip() != secrets[u] for u in ROLES if u != "rig")
    assert "rig:" not in (out / "passwd").read_text()


def test_a_bad_directory_or_secret_is_one_line(tmp_path: Path) -> None:
    cfg = _studio(tmp_path)
    (tmp_path / "file").write_text("x")
    bad = run_cli("deploy", "users", "--config", str(cfg), "--out", str(tmp_path / "file" / "sub"), timeout=120, env=dealer_env())
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot write" in bad.stderr, bad.stderr
    out = tmp_path / "out"
    (out / "secrets").mkdir(parents=True)
    (out / "secrets" / "ops.pw").write_text("two\nlines\n")
    odd = run_cli("deploy", "users", "--config", str(cfg), "--out", str(out), timeout=120, env=dealer_env())
    assert odd.returncode == 2 and "ops.pw does not hold one password on one line" in odd.stderr, odd.stderr
