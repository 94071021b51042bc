"""The deploy/ artefacts, checked for real.

* Prometheus: ``promtool`` validates the scrape configuration, the alert rules and the
  Grafana dashboard's queries, and runs the rules' unit tests (alerts.test.yml).
* Broker security: a real Mosquitto runs ``deploy/mosquitto/mosquitto.conf`` (only ports
  and paths substituted, simulators/secure_broker.py) with certificates from
  ``deploy/tls/make-test-ca.sh``, hashed passwords and the ACL rendered by
  ``tools.deploy.render_acl`` for two tables. Clients over TLS prove who may
  connect and who may publish or read what; then the backend itself runs over mqtts.
* Start-up refusal: ``dealer.edge.security.check_deployment`` and ``dealer run``.

Nothing is skipped: a missing promtool, mosquitto or openssl is a failure that says to
run scripts/test, which installs them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from dealer.edge import runner, topics
from dealer.edge.config import Settings, load_settings
from tools.deploy import register, render_acl
from dealer.edge.security import check_deployment
from dealer.edge.service import Service, scanner_authenticator
from drivers.mqtt import MqttBus, make_tls_context, parse_broker_url
from drivers.scanner_json import ScannerMessage
from simulators.feed import Feed
from simulators.secure_broker import DEPLOY_CONF, MAKE_TEST_CA, SecureMosquitto, derive_config, make_test_ca
from tests.conftest import wait_until
from tests.harness import POSITIONS
from tests.harness_cli import run_cli, without_dealer_settings
from tests.harness_docs import DASHBOARD, EXAMPLE, alert_rules

ROOT = Path(__file__).resolve().parent.parent
PROM = ROOT / "deploy" / "prometheus"
SHIPPED_ACL = ROOT / "deploy" / "mosquitto" / "acl"

USERS = {
    "dealer-backend": "pw-backend",
    "settlement": "pw-settlement",
    "player-platform": "pw-platform",
    "ops": "pw-ops",
    "scanner-T1": "pw-scanner-1",
    "scanner-T2": "pw-scanner-2",
    "station-T1": "pw-station-1",
    "station-T2": "pw-station-2",
    "player-7": "pw-player-7",
}
DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]
@pytest.fixture(autouse=True)
def _no_dealer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("DEALER_"):
            monkeypatch.delenv(key)


def _tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/test (it installs the Debian packages the tests need)")
    return path


# --- Prometheus and Grafana ---------------------------------------------------------------


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([_tool("promtool"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"promtool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.integration
def test_promtool_checks_the_scrape_config_and_its_rule_files() -> None:
    out = _promtool("check", "config", str(PROM / "prometheus.yml")).stdout
    assert "SUCCESS" in out and "alerts.yml" in out  # the rule file was found and checked too


@pytest.mark.integration
def test_promtool_checks_the_alert_rules() -> None:
    out = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(PROM / "alerts.yml")).stdout
    assert re.search(r"SUCCESS: \d+ rules found", out)


@pytest.mark.integration
def test_alert_rules_behave_as_specified() -> None:
    """promtool's unit tests: reader down after 30s, broker link down, outbox growing (and not
    when draining), table idle only for the idle table and only while the backend is up,
    rescan rate high."""
    out = _promtool("test", "rules", str(PROM / "alerts.test.yml")).stdout
    assert "SUCCESS" in out


def test_the_issues_alerts_exist_with_the_agreed_expressions() -> None:
    text = (PROM / "alerts.yml").read_text()
    rules = dict(alert_rules(text))
    required = {"DealerReaderDown", "DealerBrokerLinkDown", "DealerRescanRateHigh", "DealerOutboxGrowing",
                "DealerTableIdle", "DealerBackendDown", "DealerOutboxNotDraining", "DealerSupervisorAlert",
                "DealerScanToPublishSlow"}
    assert required <= set(rules), sorted(required - set(rules))
    assert rules["DealerReaderDown"] == 'dealer_link_up{link=~"scanner:.*"} == 0'
    assert rules["DealerBrokerLinkDown"] == 'dealer_link_up{link="broker"} == 0'
    idle = rules["DealerTableIdle"]
    assert "dealer_rounds_total[10m]" in idle and 'up{job="dealer"} == 1' in idle
    block = text[text.index("- alert: DealerReaderDown"):text.index("- alert: DealerBrokerLinkDown")]
    assert re.search(r"^\s+for: 30s$", block, re.M)
    # every test case in alerts.test.yml names an alert that exists
    tested = set(re.findall(r"alertname: (\S+)", (PROM / "alerts.test.yml").read_text()))
    assert tested <= set(rules) and {"DealerReaderDown", "DealerBrokerLinkDown", "DealerOutboxGrowing",
                                     "DealerTableIdle", "DealerRescanRateHigh"} <= tested


@pytest.mark.integration
def test_dashboard_has_the_operations_panels_and_valid_promql(tmp_path: Path) -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in dash["panels"]}
    for title in ("Rounds per hour per table", "Rescan rate per reader", "Scan to publish percentiles",
                  "Outbox depth", "Link status"):
        assert title in panels, f"missing panel {title!r}"
    exprs = lambda t: " ".join(x["expr"] for x in panels[t]["targets"])  # noqa: E731
    assert "dealer_rounds_total" in exprs("Rounds per hour per table") and "3600" in exprs("Rounds per hour per table")
    assert re.search(r"dealer_rescans_total.*/.*dealer_scan_reads_total", exprs("Rescan rate per reader"), re.S)
    quantiles = re.findall(r"histogram_quantile\(([0-9.]+), [^\n]*?dealer_scan_to_publish_seconds_bucket",
                           exprs("Scan to publish percentiles"))
    assert {"0.5", "0.99"} <= set(quantiles) and len(quantiles) >= 3
    assert "dealer_outbox_pending" in exprs("Outbox depth")
    assert "dealer_link_up" in exprs("Link status")
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"

    # Every query parses: promtool checks them as recording rules, Grafana's variables
    # replaced by what Grafana would send.
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    n = 0
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = (t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$table", ".*"))
            n += 1
            lines += [f"      - record: dashboard:query_{n}", f"        expr: {json.dumps(expr)}"]
    assert n >= 10
    rules = tmp_path / "dashboard-rules.yml"
    rules.write_text("\n".join(lines) + "\n")
    _promtool("check", "rules", str(rules))


# --- the ACL renderer and the TLS script -----------------------------------------------------


def two_tables(tmp: Path, url: str | None = None, **mqtt_keys: Any) -> Settings:
    tables = [{"id": tid, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1,
               "scanner": {"kind": "mqtt", "reader_id": f"SC{i}", "heartbeat_timeout": 30}}
              for i, tid in enumerate(("T1", "T2"), start=1)]
    service = {"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "node_id": "sec-n1"}
    return load_settings(service=service, mqtt={"url": url, **mqtt_keys}, tables=tables)


def _acl_blocks(acl: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    user = None
    for line in acl.splitlines():
        if line.startswith("user "):
            user = line.split(None, 1)[1]
            blocks[user] = []
        elif line.startswith("topic ") and user:
            blocks[user].append(line)
        elif line.startswith("pattern "):
            blocks.setdefault("(pattern)", []).append(line)
    return blocks


def test_rendered_acl_is_least_privilege_per_table(tmp_path: Path) -> None:
    b = _acl_blocks(render_acl(two_tables(tmp_path)))
    assert b["scanner-T1"] == ["topic write studio/v1/tables/T1/scanner"]
    assert b["scanner-T2"] == ["topic write studio/v1/tables/T2/scanner"]
    assert b["settlement"] == ["topic read studio/v1/tables/+/results", "topic write studio/v1/tables/+/results/ack"]
    assert b["player-platform"] == ["topic write studio/v1/tables/+/actions", "topic read studio/v1/tables/+/events",
                                    "topic read studio/v1/tables/+/state", "topic read studio/v1/backends/+/status"]
    assert b["station-T1"] == ["topic read studio/v1/tables/T1/events",
                               "topic write studio/v1/tables/T1/station",
                               "topic read studio/v1/tables/T1/state", "topic read studio/v1/tables/T1/history",
                               "topic read studio/v1/backends/+/status"]
    assert set(b["dealer-backend"]) == {
        "topic read studio/v1/tables/+/scanner", "topic read studio/v1/tables/+/actions",
        "topic read studio/v1/tables/+/station", "topic read studio/v1/tables/+/supervisor",
        "topic read studio/v1/tables/+/results/ack", "topic write studio/v1/tables/+/events",
        "topic write studio/v1/tables/+/results", "topic write studio/v1/tables/+/players/+",
        "topic write studio/v1/tables/+/state",
        "topic write studio/v1/tables/+/history", "topic write studio/v1/tables/+/players/+/state",
        "topic write studio/v1/backends/+/status", "topic readwrite studio/v1/backends/+/journal"}
    assert b["ops"] == ["topic read studio/v1/tables/+/events",
                        "topic read studio/v1/tables/+/results",
                        "topic read studio/v1/tables/+/state", "topic read studio/v1/tables/+/history",
                        "topic read studio/v1/backends/+/status",
                        "topic read studio/v1/backends/+/journal", "topic read $SYS/#"]
    assert b["(pattern)"] == ["pattern read studio/v1/tables/+/players/%u",
                              "pattern read studio/v1/tables/+/players/%u/state"]
    assert "scanner-gateway" not in b  # no shared gateway account: one per table
    # nobody but the backend writes what the backend writes, and only scanners write scanner topics
    for user, lines in b.items():
        # protocol 2 retired prompts and prompts/current: nobody may publish or read them, the backend included
        assert not any(ln.split()[-1].endswith(("/prompts", "/prompts/current")) for ln in lines), user
        writes = [ln.split()[-1] for ln in lines if ln.startswith("topic write")]
        if user != "dealer-backend":
            assert not any(w.endswith(("/events", "/prompts", "/results", "/status", "/journal", "/current", "/state",
                                        "/history"))
                           or "/players/" in w for w in writes), user
        if not user.startswith("scanner-"):
            assert not any(w.endswith("/scanner") for w in writes), user
        if user != "settlement":  # only settlement acknowledges results
            assert not any(w.endswith("/results/ack") for w in writes), user


def test_serial_tables_get_a_station_but_no_scanner_user() -> None:
    b = _acl_blocks(render_acl(load_settings(EXAMPLE)))
    assert "scanner-TP1" not in b and b["scanner-TP2"] == ["topic write studio/v1/tables/TP2/scanner"]
    assert {"station-TP1", "station-TP2"} <= set(b)


def test_shipped_acl_is_the_rendering_of_the_example_config() -> None:
    """deploy/mosquitto/acl must not drift from the renderer (regenerate it with
    `dealer deploy acl --config deploy/tables/example.toml --source deploy/tables/example.toml`)."""
    expected = render_acl(load_settings(EXAMPLE), source="deploy/tables/example.toml")
    assert SHIPPED_ACL.read_text() == expected


def _deploy_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    p = argparse.ArgumentParser(prog="dealer")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_deploy_acl_and_check_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, _ = _deploy_cli(["deploy", "acl", "--config", str(EXAMPLE)], capsys)
    assert rc == 0 and out == render_acl(load_settings(EXAMPLE))
    # the example's journal directory (/var/lib/dealer) is the host's: where it is missing, check
    # refuses as run would (issue 28); on a host that has it, the example is ok
    monkeypatch.setenv("DEALER_SERVICE__JOURNAL_PATH", str(tmp_path / "absent" / "journal.sqlite"))
    rc, out, err = _deploy_cli(["deploy", "check", "--config", str(EXAMPLE)], capsys)
    assert (rc, out) == (2, "") and err.strip() == (f"dealer: refusing to start: journal directory {tmp_path / 'absent'} "
                                                   f"does not exist (journal {tmp_path / 'absent' / 'journal.sqlite'})")
    monkeypatch.setenv("DEALER_SERVICE__JOURNAL_PATH", str(tmp_path / "journal.sqlite"))
    rc, out, err = _deploy_cli(["deploy", "check", "--config", str(EXAMPLE)], capsys)
    assert rc == 0 and out.strip().endswith(": ok"), err
    rc, _, err = _deploy_cli(["deploy", "acl", "--config", str(tmp_path / "missing.toml")], capsys)
    assert rc == 2 and "does not exist" in err
    bad = tmp_path / "bad.toml"
    bad.write_text('[mqtt]\nurl = "mqtt://10.1.2.3:1883"\n')
    rc, _, err = _deploy_cli(["deploy", "check", "--config", str(bad)], capsys)
    assert rc == 2 and "10.1.2.3" in err


def _openssl(*args: str) -> str:
    proc = subprocess.run([_tool("openssl"), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.integration
def test_make_test_ca_issues_verifiable_certificates_idempotently(tmp_path: Path) -> None:
    _tool("openssl")
    out = make_test_ca(tmp_path / "tls", "scanner-T1")
    for name in ("ca.crt", "ca.key", "broker.crt", "broker.key", "client-scanner-T1.crt", "client-scanner-T1.key"):
        assert (out / name).is_file(), name
    for key in out.glob("*.key"):
        assert (key.stat().st_mode & 0o077) == 0, f"{key} must be private"
    assert "broker.crt: OK" in _openssl("verify", "-CAfile", str(out / "ca.crt"), str(out / "broker.crt"))
    san = _openssl("x509", "-in", str(out / "broker.crt"), "-noout", "-ext", "subjectAltName")
    assert "DNS:localhost" in san and "IP Address:127.0.0.1" in san
    assert "TLS Web Client Authentication" in _openssl("x509", "-in", str(out / "client-scanner-T1.crt"),
                                                       "-noout", "-ext", "extendedKeyUsage")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = subprocess.run(["bash", str(MAKE_TEST_CA), str(out), "scanner-T1"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stdout == ""
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing re-issued
    # adding a client leaves everything else alone
    make_test_ca(out, "scanner-T1", "station-T1")
    assert (out / "client-station-T1.crt").is_file()
    # (only the CA's serial counter moves)
    assert all((out / n).read_bytes() == data for n, data in before.items() if n != "ca.srl")


def test_test_broker_config_is_the_deployed_one_with_ports_and_paths_only(tmp_path: Path) -> None:
    deployed = DEPLOY_CONF.read_text()
    derived = derive_config(deployed, tls_port=18883, plain_port=11883, certs=tmp_path / "certs",
                            password_file=tmp_path / "passwd", acl_file=tmp_path / "acl", workdir=tmp_path)

    def directives(text: str) -> list[str]:
        return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]

    changed = {d.split()[0] for d in set(directives(derived)) ^ set(directives(deployed))}
    assert changed <= {"listener", "cafile", "certfile", "keyfile", "password_file", "acl_file",
                       "persistence_location", "log_dest", "user"}
    d = directives(deployed)
    assert "allow_anonymous false" in d and "tls_version tlsv1.2" in d and "per_listener_settings false" in d
    assert "listener 8883" in d and "listener 1883 127.0.0.1" in d  # plain MQTT only on loopback
    assert not any(x.startswith("listener ") and x not in ("listener 8883", "listener 1883 127.0.0.1") for x in d)


# --- a real Mosquitto with the deployed configuration -------------------------------------


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureMosquitto]:
    _tool("mosquitto")
    _tool("mosquitto_passwd")
    _tool("openssl")
    base = tmp_path_factory.mktemp("secure-broker")
    certs = make_test_ca(base / "tls")
    work = base / "broker"
    work.mkdir()
    acl = render_acl(two_tables(base))
    broker = SecureMosquitto(work, certs, USERS, acl)
    broker.start()
    yield broker
    broker.stop()


@contextlib.asynccontextmanager
async def mqtt(broker: SecureMosquitto, user: str | None, password: str | None = None, *, tls: bool = True,
               port: int | None = None, ca_file: Path | None = None) -> AsyncIterator[aiomqtt.Client]:
    if user is not None and password is None:
        password = USERS[user]
    ctx = make_tls_context(ca_file or broker.ca_file) if tls else None
    async with aiomqtt.Client("127.0.0.1", port or broker.tls_port, username=user, password=password,
                              identifier=f"{user or 'anon'}-{uuid.uuid4().hex[:8]}", tls_context=ctx,
                              timeout=5, keepalive=10) as client:
        yield client


class Inbox:
    """Collects what a client receives, in order."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.client = client
        self.got: list[tuple[str, bytes]] = []
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for m in self.client.messages:
            self.got.append((str(m.topic), bytes(m.payload)))  # type: ignore[arg-type]

    async def subscribe(self, *filters: str) -> None:
        for f in filters:
            await self.client.subscribe(f, qos=1)

    def payloads(self) -> list[bytes]:
        return [p for _, p in self.got]

    async def until(self, payload: bytes, what: str) -> list[tuple[str, bytes]]:
        """Wait for ``payload`` (a positive control); return everything received before it."""
        await wait_until(lambda: payload in self.payloads(), timeout=10, what=what)
        return self.got[:self.payloads().index(payload)]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@contextlib.asynccontextmanager
async def inbox(broker: SecureMosquitto, user: str, *filters: str) -> AsyncIterator[Inbox]:
    async with mqtt(broker, user) as client:
        box = Inbox(client)
        await box.subscribe(*filters)
        try:
            yield box
        finally:
            await box.close()


async def _refused(broker: SecureMosquitto, user: str | None, password: str | None = None, **kw: Any) -> str:
    with pytest.raises(aiomqtt.MqttError) as err:
        async with mqtt(broker, user, password, **kw):
            pass
    return str(err.value)


async def test_anonymous_and_wrong_password_clients_are_refused(secure_broker: SecureMosquitto) -> None:
    assert "authori" in (await _refused(secure_broker, None, None)).lower()
    assert "authori" in (await _refused(secure_broker, "scanner-T1", "guess")).lower()
    assert "authori" in (await _refused(secure_broker, "nobody", "pw-scanner-1")).lower()
    # the loopback listener authenticates the same way
    assert "authori" in (await _refused(secure_broker, None, None, tls=False, port=secure_broker.plain_port)).lower()
    async with mqtt(secure_broker, "scanner-T1"):  # and the right password is accepted
        pass


async def test_the_tls_port_refuses_plain_mqtt_even_with_valid_credentials(secure_broker: SecureMosquitto) -> None:
    seen = len(secure_broker.log())
    await _refused(secure_broker, "scanner-T1", tls=False)
    log = secure_broker.log()[seen:]
    assert "scanner-T1" not in re.findall(r"New client connected .* u'([^']*)'", log)


async def test_clients_verify_the_broker_certificate(secure_broker: SecureMosquitto, tmp_path: Path) -> None:
    rogue = make_test_ca(tmp_path / "rogue")  # a CA the broker's certificate does not chain to
    msg = await _refused(secure_broker, "scanner-T1", ca_file=rogue / "ca.crt")
    assert "certificate verify failed" in msg


async def test_anonymous_client_cannot_inject_a_card(secure_broker: SecureMosquitto) -> None:
    """No credentials, no connection, so no frame; and every authenticated user that is not
    that table's scanner has its frame dropped by the broker."""
    frame = ScannerMessage(reader="SC1", seq=1, status="OK", payload="AS").model_dump_json().encode()
    async with inbox(secure_broker, "dealer-backend", "studio/v1/tables/+/scanner") as ops, \
            mqtt(secure_broker, "scanner-T1") as scanner:
        for user in ("settlement", "player-platform", "station-T1", "player-7"):
            async with mqtt(secure_broker, user) as forger:
                await forger.publish(topics.scanner("T1"), frame + user.encode(), qos=1)  # PUBACKed, then dropped
        # the barrier: each forgery was PUBACKed, so the broker had routed (or dropped) it before
        # the control below is sent, and it delivers to one subscriber in that order
        control = b'{"control": "T1"}'
        await scanner.publish(topics.scanner("T1"), control, qos=1)
        assert await ops.until(control, "the real scanner's frame") == []


async def test_a_scanner_cannot_publish_into_another_table(secure_broker: SecureMosquitto) -> None:
    async with inbox(secure_broker, "dealer-backend", "studio/v1/tables/+/scanner") as ops, \
            mqtt(secure_broker, "scanner-T1") as scanner:
        forged = b'{"forged": "T2"}'
        await scanner.publish(topics.scanner("T2"), forged, qos=1)  # acknowledged (MQTT 3.1.1) but dropped
        for other in ("actions", "results", "events"):
            await scanner.publish(topics.table_topic("T1", other), forged, qos=1)
        control = b'{"control": "T1"}'
        await scanner.publish(topics.scanner("T1"), control, qos=1)  # same publisher: delivered in order
        assert await ops.until(control, "scanner-T1 on its own topic") == []
        assert ops.got == [(topics.scanner("T1"), control)]


async def test_settlement_reads_results_only_and_cannot_publish(secure_broker: SecureMosquitto) -> None:
    async with inbox(secure_broker, "dealer-backend", "studio/v1/tables/+/actions") as ops, \
            inbox(secure_broker, "settlement", "studio/v1/tables/+/results", "studio/v1/tables/+/events",
                  "studio/v1/tables/+/actions", "studio/v1/tables/+/players/+") as settlement, \
            mqtt(secure_broker, "player-platform") as platform, mqtt(secure_broker, "dealer-backend") as backend:
        bet = json.dumps({"type": "place_bet", "bet_id": "x", "player_id": "p", "bet_type": "tie",
                          "stake": "1"}).encode()
        await settlement.client.publish(topics.actions("T1"), bet, qos=1)            # dropped
        await settlement.client.publish(topics.results("T1"), b'{"fake": 1}', qos=1)  # dropped: not the backend
        await backend.publish(topics.events("T1"), b'{"event": 1}', qos=1)          # settlement may not read it
        await backend.publish(topics.player("T1", "player-7"), b'{"hole": 1}', qos=1)
        # the barrier: all four were PUBACKed, so the broker routed (or dropped) them before the
        # controls below, and each subscriber gets what it may read in that order
        control = b'{"control": "action"}'
        await platform.publish(topics.actions("T1"), control, qos=1)  # the player platform may place bets
        assert await ops.until(control, "the player platform's action") == []
        result = b'{"result": "T1-000001"}'
        await backend.publish(topics.results("T1"), result, qos=1)
        assert await settlement.until(result, "the result at settlement") == []
        assert settlement.got == [(topics.results("T1"), result)]


async def test_a_player_reads_only_its_own_topic(secure_broker: SecureMosquitto) -> None:
    async with inbox(secure_broker, "player-7", "studio/v1/tables/+/players/+", "studio/v1/tables/+/events") as p7, \
            mqtt(secure_broker, "dealer-backend") as backend:
        await backend.publish(topics.player("T1", "player-8"), b'{"hole": "other"}', qos=1)
        await backend.publish(topics.events("T1"), b'{"event": 1}', qos=1)
        mine = b'{"hole": "mine"}'
        await backend.publish(topics.player("T1", "player-7"), mine, qos=1)
        assert await p7.until(mine, "player-7's own hole card") == []


class Watcher:
    """An MqttBus client (over TLS, with credentials) that records JSON messages."""

    def __init__(self, broker: SecureMosquitto, user: str, *filters: str) -> None:
        self.bus = MqttBus(broker.tls_url, client_id=f"{user}-{uuid.uuid4().hex[:6]}", username=user,
                           password=USERS[user], ca_file=broker.ca_file)
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.feed = Feed()  # protocol 2: the station prompts a table's state carries, once each
        for f in filters:
            self.bus.subscribe(f, self._on)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "Watcher":
        self.task = asyncio.create_task(self.bus.run())
        await asyncio.wait_for(self.bus.wait_connected(), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    def _on(self, topic: str, payload: bytes) -> None:
        self.messages.append((topic, json.loads(payload) if payload else {}))
        if topic.endswith("/state"):
            self.messages += [(topic.removesuffix("/state") + "/prompts", p) for p in self.feed.read(payload).prompts]

    def on(self, leaf: str) -> list[dict[str, Any]]:
        """The messages on topics ending in ``leaf``; ``prompts``: those the states carried."""
        return [m for t, m in self.messages if t.endswith("/" + leaf)]

    def expects(self, position: str) -> bool:
        p = self.on("prompts")
        return bool(p and p[-1]["kind"] == "NEXT" and p[-1]["position"] == position)


async def test_backend_runs_over_mqtts_and_settlement_receives_its_result(secure_broker: SecureMosquitto,
                                                                           tmp_path: Path) -> None:
    pw = tmp_path / "mqtt-password"
    pw.write_text(USERS["dealer-backend"] + "\n")  # the trailing newline is not part of the password
    pw.chmod(0o600)
    settings = two_tables(tmp_path, secure_broker.tls_url, client_id="dealer-backend-sec", username="dealer-backend",
                          password_file=str(pw), ca_file=str(secure_broker.ca_file))
    assert check_deployment(settings, None) == []
    bus = runner.build_bus(settings)
    assert isinstance(bus, MqttBus) and bus.tls and parse_broker_url(secure_broker.tls_url)[2] is True
    service = Service(settings, bus=bus)
    task = asyncio.create_task(service.run())
    try:
        async with Watcher(secure_broker, "ops", "studio/v1/tables/T1/state") as ops, \
                Watcher(secure_broker, "settlement", "studio/v1/tables/+/results") as settlement, \
                Watcher(secure_broker, "scanner-T1") as gateway, \
                Watcher(secure_broker, "player-platform") as forger:
            await wait_until(lambda: bus.connected, what="backend connected over TLS")
            seq = 0

            async def frame(status: str, payload: str = "", *, advance: bool = True, via: Watcher = gateway) -> None:
                nonlocal seq
                if advance:
                    seq += 1
                msg = ScannerMessage(reader="SC1", seq=seq if status != "BOOT" else 0, status=status, payload=payload)
                await via.bus.publish(topics.scanner("T1"), msg.model_dump_json().encode())

            await frame("BOOT", "gw-1.0", advance=False)
            await wait_until(lambda: ops.expects("A1"), what="NEXT A1 (round opened, betting closed)")
            # a forged frame (valid JSON, right reader, next seq) from a non-scanner user never arrives
            forged = ScannerMessage(reader="SC1", seq=1, status="OK", payload="QH")
            await forger.bus.publish(topics.scanner("T1"), forged.model_dump_json().encode())
            for code, pos in zip(DEAL, POSITIONS):
                await wait_until(lambda: ops.expects(pos), what=f"NEXT {pos}")
                await frame("OK", code)
            key = f"T1:T1-{service.journal.journal_id}-000001"
            await wait_until(lambda: [r for r in settlement.on("results") if r["idempotency_key"] == key],
                             what="the result at settlement")
            result = next(r for r in settlement.on("results") if r["idempotency_key"] == key)
            assert result["cards"] == dict(zip(POSITIONS, DEAL))  # the forged QH never counted
            assert not [p for p in ops.on("prompts") if p["kind"] in ("RESCAN", "ALERT")]
            assert service.metrics.bad_messages.labels(topic_kind="scanner")._value.get() == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- refusing to start: check_deployment and dealer run ---------------------------------------

GOOD = """\
[service]
journal_path = "{tmp}/journal.sqlite"
metrics_port = 0

[mqtt]
url = "mqtts://127.0.0.1:8883"
username = "dealer-backend"
password_file = "{tmp}/mqtt-password"
ca_file = "{tmp}/ca.crt"

[[tables]]
id = "T1"
game = "teen-patti"

[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
hmac_key_files = ["{tmp}/sc1.key"]
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    (tmp_path / "mqtt-password").write_text("secret\n")
    (tmp_path / "mqtt-password").chmod(0o600)
    (tmp_path / "sc1.key").write_text("00" * 32 + "\n")
    (tmp_path / "sc1.key").chmod(0o600)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # static check: readable is enough
    (tmp_path / "ca.crt").chmod(0o644)
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(GOOD.format(tmp=tmp_path))
    cfg.chmod(0o640)
    return cfg


def problems(cfg: Path, text: str | None = None) -> list[str]:
    if text is not None:
        mode = cfg.stat().st_mode
        cfg.write_text(text)
        cfg.chmod(mode & 0o7777)
    return check_deployment(load_settings(cfg), cfg)


def one(found: list[str], *needles: str) -> str:
    assert len(found) == 1, found
    for n in needles:
        assert n in found[0], f"{n!r} not in {found[0]!r}"
    return found[0]


def test_a_good_deployment_passes(good: Path) -> None:
    assert problems(good) == []


def test_world_or_group_writable_config_is_refused(good: Path) -> None:
    good.chmod(0o666)
    one(problems(good), str(good), "writable by group or others", "0666")
    good.chmod(0o660)
    one(problems(good), "writable by group or others")


def test_password_in_a_config_readable_by_others_is_refused(good: Path, tmp_path: Path) -> None:
    text = GOOD.format(tmp=tmp_path).replace(f'password_file = "{tmp_path}/mqtt-password"', 'password = "hunter2"')
    good.chmod(0o644)
    one(problems(good, text), "holds mqtt.password", "readable by others", "password_file")
    good.chmod(0o640)  # readable by the dealer group only: allowed
    assert problems(good) == []


def test_password_file_readable_by_others_or_missing_is_refused(good: Path, tmp_path: Path) -> None:
    pw = tmp_path / "mqtt-password"
    pw.chmod(0o644)
    one(problems(good), "mqtt.password_file", str(pw), "0644", "chmod 600")
    pw.chmod(0o640)
    one(problems(good), "mqtt.password_file", "group or others")
    pw.unlink()
    one(problems(good), "mqtt.password_file", "does not exist")


def test_plain_mqtt_to_a_remote_host_is_refused_without_allow_insecure(good: Path, tmp_path: Path) -> None:
    plain = (GOOD.format(tmp=tmp_path).replace("mqtts://127.0.0.1:8883", "mqtt://10.1.2.3:1883")
             .replace(f'ca_file = "{tmp_path}/ca.crt"\n', ""))
    msg = one(problems(good, plain), "mqtt://10.1.2.3:1883", "not a loopback address", "allow_insecure")
    assert "mqtts://" in msg
    assert problems(good, plain.replace("[mqtt]\n", "[mqtt]\nallow_insecure = true\n")) == []
    for local in ("mqtt://127.0.0.1:1883", "mqtt://localhost:1883", "mqtt://[::1]:1883"):
        assert problems(good, plain.replace("mqtt://10.1.2.3:1883", local)) == [], local
    # TLS files with a plain URL are a mistake worth stopping for
    one(problems(good, GOOD.format(tmp=tmp_path).replace("mqtts://", "mqtt://")), "mqtt.ca_file", "plain MQTT")


def test_missing_tls_files_are_refused(good: Path, tmp_path: Path) -> None:
    (tmp_path / "ca.crt").unlink()
    one(problems(good), "mqtt.ca_file", "does not exist")
    (tmp_path / "ca.crt").mkdir()
    one(problems(good), "mqtt.ca_file", "is a directory")
    (tmp_path / "ca.crt").rmdir()
    (tmp_path / "ca.crt").write_text("x")
    text = GOOD.format(tmp=tmp_path).replace("[[tables]]", f'cert_file = "{tmp_path}/client.crt"\n'
                                                            f'key_file = "{tmp_path}/client.key"\n\n[[tables]]')
    found = problems(good, text)
    assert len(found) == 2 and "mqtt.cert_file" in found[0] and "mqtt.key_file" in found[1], found
    (tmp_path / "client.crt").write_text("x")
    (tmp_path / "client.key").write_text("x")
    (tmp_path / "client.key").chmod(0o644)
    one(problems(good), "mqtt.key_file", "0644")
    (tmp_path / "client.key").chmod(0o600)
    assert problems(good) == []


def test_hmac_key_files_must_be_private_and_readable(good: Path, tmp_path: Path) -> None:
    key = tmp_path / "sc1.key"
    key.chmod(0o644)
    one(problems(good), "table T1 scanner SC1 HMAC key file", "0644")
    key.unlink()
    one(problems(good), "HMAC key file", "does not exist")


@pytest.mark.integration
def test_scanner_keys_imply_require_mac_and_require_mac_false_is_refused(
        good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reader with keys never has an unsigned frame accepted (issue 12 item 6)."""
    scanner = load_settings(good).tables[0].scanner
    assert scanner.hmac_key_files and scanner.require_mac is None  # GOOD sets keys only
    auth = scanner_authenticator(scanner)
    assert auth is not None and auth.require  # keys alone imply it
    text = GOOD.format(tmp=tmp_path)
    one(problems(good, text + "require_mac = false\n"), "table T1 scanner SC1", "require_mac = false",
        "hmac_key_files", "unsigned frames", "Remove require_mac")
    rc, _, err = _deploy_cli(["deploy", "check", "--config", str(good)], capsys)
    assert rc == 2 and "require_mac = false" in err
    proc = run_cli("run", "--config", str(good), timeout=30, env=without_dealer_settings())
    assert proc.returncode == 2 and "require_mac = false" in proc.stderr and "Traceback" not in proc.stderr
    # built anyway (the check bypassed), the authenticator still refuses unsigned frames
    forced = scanner_authenticator(load_settings(good).tables[0].scanner)
    assert forced is not None and forced.require
    assert problems(good, text + "require_mac = true\n") == []
    no_keys = text.replace(f'hmac_key_files = ["{tmp_path}/sc1.key"]\n', "require_mac = true\n")
    one(problems(good, no_keys), "table T1 scanner SC1", "require_mac = true without hmac_key_files")
    assert problems(good, no_keys.replace("require_mac = true\n", "")) == []  # unsigned reader: allowed


def test_several_problems_are_all_reported(good: Path, tmp_path: Path) -> None:
    good.chmod(0o666)
    (tmp_path / "mqtt-password").chmod(0o604)
    (tmp_path / "ca.crt").unlink()
    found = problems(good)
    assert len(found) == 3, found


def test_an_unreadable_config_path_is_a_reason(good: Path, tmp_path: Path) -> None:
    settings = load_settings(good)
    one(check_deployment(settings, tmp_path), "config file", "is a directory")
    one(check_deployment(settings, tmp_path / "gone.toml"), "does not exist")


@pytest.mark.integration
def test_dealer_run_refuses_an_insecure_config_and_says_why(good: Path, tmp_path: Path) -> None:
    """Wired in dealer/cli/main.py: ``dealer run`` calls check_deployment after load_settings and
    exits 2 (no restart under systemd) with every reason on stderr, before any connection."""
    text = (GOOD.format(tmp=tmp_path).replace("mqtts://127.0.0.1:8883", "mqtt://10.1.2.3:1883")
            .replace(f'ca_file = "{tmp_path}/ca.crt"\n', ""))
    good.write_text(text)
    good.chmod(0o666)
    proc = run_cli("run", "--config", str(good), timeout=30, env=without_dealer_settings())
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "writable by group or others" in proc.stderr
    assert "10.1.2.3" in proc.stderr and "allow_insecure" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
