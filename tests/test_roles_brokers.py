"""The roles on RabbitMQ and NATS: ``dealer deploy users --broker rabbitmq|nats`` loaded into a
real broker (the session's RabbitMQ node, one vhost; a private nats-server), then every role
user publishes a probe to every topic of the protocol and subscribes to every topic, and what
the broker let through must be the role table of ``tests/harness_acl.py`` (the one the
Mosquitto ACL is checked against). Settlement, in particular, reads results and acknowledges
them, and can publish neither a result nor a command.

A bare client (tests/raw_mqtt.py, with a login) sees what a library hides: RabbitMQ closes the
connection on a refused publish or subscription, NATS acknowledges a refused publish (and drops
it) and answers a refused subscription with 0x80. A probe counts as published when an observer
with every right received it; a subscription counts as a read when the broker granted it and
the observer's probe on that topic arrived through it."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulators.brokers import NatsProcess, RabbitMqShare
from tests.raw_mqtt import Publish, RawClient, _str
from tests.harness_acl import MAY_READ, MAY_WRITE, PROBED, studio
from tools.broker_acls import (NEVER, nats_player_user, rabbit_key, rabbit_regex, rabbitmq_player_permissions,
                               role_grants)
from tools.broker_users import bcrypt_hash, provision, rabbitmq_hash

pytestmark = pytest.mark.integration  # broker processes

RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"  # the script itself: the /usr/sbin wrapper su's to 'rabbitmq'
OBSERVER, PLAYER = "observer", "player-7"


class Login(RawClient):
    """RawClient with a user name and password (clean session)."""

    def __init__(self, port: int, user: str, password: str) -> None:  # noqa: D107 - RawClient's, with a login
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.packet_id = 0
        payload = _str(f"{user}-{uuid.uuid4().hex[:8]}".encode()) + _str(user.encode())
        flags = 0x82 | (0x40 if password else 0)  # clean session, a user name, a password unless empty
        payload += _str(password.encode()) if password else b""
        self._send(0x10, _str(b"MQTT") + bytes([4, flags]) + struct.pack("!H", 30) + payload)
        kind, body = self.read()
        if kind >> 4 != 2 or body[1] != 0:
            raise ConnectionError(f"{user}: connect refused ({body[1]})")

    def acked(self, topic: str, payload: bytes) -> bool:
        """Publish at QoS 1: True on the PUBACK, False when the broker closed the connection."""
        pid = self.publish(topic, payload, qos=1)
        try:
            while True:
                kind, body = self.read()
                if kind >> 4 == 4 and struct.unpack("!H", body[:2])[0] == pid:
                    return True
        except ConnectionError:
            return False

    def granted(self, topic: str) -> bool | None:
        """Subscribe at QoS 1: True when granted, False when refused (0x80), None when the broker
        closed the connection instead (RabbitMQ)."""
        try:
            return self.subscribe(topic, qos=1) < 0x80
        except ConnectionError:
            return None


def received(c: RawClient, n: int) -> list[Publish]:
    """``n`` deliveries, each acknowledged at once: RabbitMQ sends at most 10 unacknowledged
    (mqtt.prefetch)."""
    out: list[Publish] = []
    while len(out) < n:
        got = c.publishes(1, timeout=10)
        assert got, f"{len(out)} of {n} deliveries came"
        out += got
        if got[0].packet_id is not None:
            c.puback(got[0].packet_id)
    return out


@pytest.fixture(scope="module", params=["rabbitmq", "nats"])
def studio_broker(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, dict[str, str], int | None]]:
    """A broker with the rendered roles loaded, plus player-7 (the player platform's template)
    and an observer with every right: (its MQTT port, every user's password, NATS's own client
    port or None). One per module and kind: the tests only read its permissions."""
    tmp_path = tmp_path_factory.mktemp(f"roles-{request.param}")
    out = tmp_path / "provisioned"
    settings = studio(tmp_path)
    provision(settings, out, broker=request.param, vhost="/")
    passwords = {p.stem: p.read_text().strip() for p in (out / "secrets").glob("*.pw")}
    passwords |= {OBSERVER: "observer-pw", PLAYER: "player-7-pw"}
    if request.param == "rabbitmq":
        share: RabbitMqShare = request.getfixturevalue("rabbitmq_pool").share()
        yield share.port, passwords | _load_rabbitmq(share, out, tmp_path, passwords), None
        return
    nats = NatsProcess(tmp_path)
    passwords[OBSERVER] = ""  # the no_auth_user below: nats-server 2.9 logs it in only without a password
    auth = (out / "nats-authorization.conf").read_text().replace("  users = [\n", "  users = [\n" + "\n".join([
        f'    {{ user: "{OBSERVER}", permissions: '
        '{ publish: { allow: [">"] }, subscribe: { allow: [">"] } } }',
        f"    {nats_player_user(PLAYER, bcrypt_hash(passwords[PLAYER]))}"]) + "\n")
    nats.conf.write_text(
        # NatsProcess.start's readiness probe logs in without credentials: as the observer
        nats.conf.read_text().replace("mqtt {\n", f'mqtt {{\n  no_auth_user: "{OBSERVER}"\n')
        # nats-server reads an include relative to the including file (an absolute path too)
        + f'include "{out.relative_to(nats.conf.parent)}/nats-passwords.conf"\n' + auth)
    nats.start()
    yield nats.port, passwords, nats.client_port
    nats.kill()


def _load_rabbitmq(share: RabbitMqShare, out: Path, tmp: Path, passwords: dict[str, str]) -> dict[str, str]:
    """Import the rendered definitions (on the share's vhost), player-7's and the observer's, in
    one rabbitmqctl call."""
    vhost = share.vhost
    doc = json.loads((out / "definitions.json").read_text().replace('"vhost": "/"', f'"vhost": {json.dumps(vhost)}'))
    doc["vhosts"] = [{"name": vhost}]
    player = rabbitmq_player_permissions(vhost)
    for user, write, read in ((OBSERVER, ".*", ".*"), (PLAYER, player["topic"]["write"], player["topic"]["read"])):
        doc["users"].append({"name": user, "password_hash": rabbitmq_hash(passwords[user]),
                             "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []})
        doc["permissions"].append({"user": user, "vhost": vhost, "configure": player["configure"],
                                   "write": player["write"], "read": player["read"]})
        doc["topic_permissions"].append({"user": user, "vhost": vhost, "exchange": "amq.topic", "write": write,
                                         "read": read})
    path = tmp / "definitions.json"
    path.write_text(json.dumps(doc))
    node = share.node
    done = subprocess.run([RABBITMQCTL, "-n", node.node, "import_definitions", str(path)], env=node._env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    deadline = time.monotonic() + 30  # the import is asynchronous: wait until the last user logs in
    while True:
        try:
            Login(share.port, PLAYER, passwords[PLAYER]).disconnect()
            return {}
        except ConnectionError:
            assert time.monotonic() < deadline, "the imported users never logged in"
            time.sleep(0.2)


def test_every_role_publishes_and_reads_exactly_what_the_mosquitto_acl_allows(
        studio_broker: tuple[int, dict[str, str], int | None]) -> None:
    port, passwords, _ = studio_broker
    watch, observer = Login(port, OBSERVER, passwords[OBSERVER]), Login(port, OBSERVER, passwords[OBSERVER])
    for topic in PROBED.values():
        assert watch.granted(topic)

    # publishing: each user's probe on every topic; a refusal that closes the connection opens a new one
    for user in MAY_WRITE:
        c = Login(port, user, passwords[user])
        for name, topic in PROBED.items():
            if not c.acked(topic, json.dumps({"probe": f"{user}|{name}"}).encode()):
                c = Login(port, user, passwords[user])
        c.disconnect()
    control = b'{"control": 1}'
    assert observer.acked(PROBED["T1/events"], control)  # routed behind every probe the broker let through
    seen: list[Publish] = []
    while not any(p.payload == control for p in seen):
        got = watch.publishes(1, timeout=10)
        assert got, "the observer's control never came"
        seen += got
        if got[0].packet_id is not None:
            watch.puback(got[0].packet_id)
    wrote: dict[str, set[str]] = {u: set() for u in MAY_WRITE}
    for p in seen:
        probe = json.loads(p.payload).get("probe")
        if probe:
            user, name = probe.split("|")
            assert PROBED[name] == p.topic
            wrote[user].add(name)
    assert wrote == MAY_WRITE

    # reading: each user subscribes to every topic on one connection (RabbitMQ closes it on a
    # refusal: its granted subscriptions are made again on a new one); each granted subscription must
    # deliver the observer's probe on its topic
    conns: dict[str, list[tuple[RawClient, set[str]]]] = {}
    for user in MAY_READ:
        conns[user] = [(Login(port, user, passwords[user]), set())]
        for name, topic in PROBED.items():
            c, names = conns[user][-1]
            verdict = c.granted(topic)
            if verdict:
                names.add(name)
            elif verdict is None:  # closed, with the subscriptions it had: they go on a new connection
                fresh = Login(port, user, passwords[user])
                assert all(fresh.granted(PROBED[n]) for n in names)
                conns[user][-1] = (fresh, names)
    for name, topic in PROBED.items():
        assert observer.acked(topic, json.dumps({"probe": name}).encode())
    read: dict[str, set[str]] = {u: set() for u in MAY_READ}
    for user, pairs in conns.items():
        for c, names in pairs:
            got = received(c, len(names))
            assert {json.loads(p.payload)["probe"] for p in got} == names  # each granted topic, its own probe
            read[user] |= names
            c.vanish()
    assert read == MAY_READ
    watch.disconnect()
    observer.disconnect()


def test_settlement_cannot_subscribe_wider_or_read_others_deliveries(
        studio_broker: tuple[int, dict[str, str], int | None]) -> None:
    """A wider filter than granted is refused (not narrowed): ``studio/v1/#``, every table's
    events. On NATS the QoS 1 deliveries of every session go through ``$MQTT.sub.*``, which each
    reading role may subscribe to: not over MQTT (refused), and not over NATS's own protocol,
    where its login is refused (MQTT connections only)."""
    port, passwords, nats_port = studio_broker
    for topic in ("studio/v1/#", "studio/v1/tables/+/#", "studio/v1/tables/+/events", "$MQTT/sub/#", "#"):
        c = Login(port, "settlement", passwords["settlement"])
        assert not c.granted(topic), topic  # refused (0x80) or the connection closed
        c.vanish()
    c = Login(port, "settlement", passwords["settlement"])
    assert c.granted("studio/v1/tables/+/results")  # every table's results: what settlement needs
    c.disconnect()
    if nats_port is not None:
        with socket.create_connection(("127.0.0.1", nats_port), timeout=5) as s:
            assert s.recv(4096).startswith(b"INFO ")
            s.sendall(b'CONNECT {"verbose":false,"user":"settlement","pass":' + json.dumps(passwords["settlement"]).encode()
                      + b'}\r\nSUB $MQTT.sub.> 1\r\nPING\r\n')
            answer = b""
            while b"\r\n" not in answer:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"-ERR 'Authorization Violation'"), answer


def test_the_rendered_patterns(tmp_path: Path) -> None:
    """How a filter becomes a RabbitMQ key pattern and what each role gets (a readable diff)."""
    assert rabbit_key("studio/v1/tables/+/results/ack") == r"studio\.v1\.tables\.[^.#]+\.results\.ack"
    assert rabbit_regex([]) == NEVER
    grants = role_grants(studio(tmp_path))
    assert grants["settlement"] == [("read", "studio/v1/tables/+/results"), ("write", "studio/v1/tables/+/results/ack")]
    assert "dealer-backend" in grants and "station-T2" in grants and "supervisor-sup-ana" in grants
    assert rabbitmq_player_permissions()["topic"]["read"] == (
        r"^(studio\.v1\.tables\.[^.#]+\.players\.{username}|studio\.v1\.tables\.[^.#]+\.players\.{username}\.state)$")
