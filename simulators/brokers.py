"""Private RabbitMQ (its MQTT plugin) and NATS (its MQTT gateway) processes on free loopback
ports, beside :class:`simulators.broker.MosquittoProcess`, for tests and benchmarks.

Each has Mosquitto's interface (``start``, ``kill``, ``stop``, ``pause``/``resume``, ``port``,
``url``, ``dir``) so a test written against one broker runs on the others
(``start_broker(kind, dir)``). Nothing here touches a system instance: every process gets its
own ports, data folder, node name and (RabbitMQ) its own ``epmd``, and a kill takes down all
that it started.

RabbitMQ boots in seconds (about 12 s the first time on this machine: the MQTT plugin waits
for peers before it elects its own Raft leader; about 5 s on a restart), so one node can
serve many tests in isolation: ``vhosts=K`` opens K MQTT listeners, each mapped to its own
virtual host (RabbitMQ's port-to-vhost mapping), and ``share(i)`` hands out listener ``i`` as
a broker of its own (its own queues, sessions and retained messages). A share's ``kill`` and
``start`` kill and restart the whole node (its data survives, as a real broker's does).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol

from simulators.broker import MosquittoProcess, free_port, free_ports

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the script itself: the /usr/sbin wrapper su's to 'rabbitmq'
EPMD = shutil.which("epmd") or "/usr/bin/epmd"
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"

BROKER_KINDS = ("mosquitto", "rabbitmq", "nats")


class BrokerProcess(Protocol):
    """What a test needs of a broker it runs (and faults)."""

    kind: str
    port: int
    url: str
    dir: Path

    def start(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self) -> None: ...


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def mqtt_accepts(port: int, timeout: float = 1.0) -> bool:
    """Whether an MQTT 3.1.1 CONNECT on ``port`` gets a CONNACK that accepts it. A listening
    port is not enough: RabbitMQ opens its MQTT listeners before its virtual hosts are up, and
    a CONNECT then gets no answer at all."""
    client_id = f"ready-probe-{os.getpid()}-{time.monotonic_ns()}".encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x05" + len(client_id).to_bytes(2, "big") + client_id  # clean session, keepalive 5
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(bytes([0x10, len(body)]) + body)
            ack = b""
            while len(ack) < 4:
                chunk = s.recv(4 - len(ack))
                if not chunk:
                    return False
                ack += chunk
            ok = ack[0] == 0x20 and ack[3] == 0
            if ok:
                s.sendall(b"\xe0\x00")  # DISCONNECT
            return ok
    except OSError:
        return False


def _wait_listening(proc: subprocess.Popen[bytes], ports: list[int], timeout: float, what: str,
                    log: Path) -> None:
    """Return once every port accepts an MQTT connection; RuntimeError (with the log's tail)
    if the process exits or is not ready in time."""
    deadline = time.monotonic() + timeout
    pending = list(ports)
    while pending:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{_tail(log)}")
        pending = [p for p in pending if not (_listening(p) and mqtt_accepts(p))]
        if pending and time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on {pending} within {timeout:.0f} s:\n{_tail(log)}")
        if pending:
            time.sleep(0.05)


def _tail(log: Path, n: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started in its own session, and everything still in its group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _term_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc)  # whatever of the group is left


def _password_hash(password: str) -> str:
    """RabbitMQ's stored form of a password (rabbit_password_hashing_sha256): base64 of a
    4-byte salt followed by SHA-256(salt + password)."""
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


class RabbitMqProcess:
    """A private RabbitMQ node with the MQTT plugin: anonymous MQTT on loopback (user guest).

    ``vhosts``: MQTT listeners, listener ``i`` on vhost ``mqtt-i`` (``share(i)``); ``port`` and
    ``url`` are listener 0's."""

    START_TIMEOUT = 90.0  # a bound on a loaded 2-core machine, not a measure
    kind = "rabbitmq"

    def __init__(self, workdir: Path, *, vhosts: int = 1) -> None:
        if vhosts < 1:
            raise ValueError("vhosts must be at least 1")
        self.dir = workdir
        self.vhosts = [f"mqtt-{i}" for i in range(vhosts)]
        *self.ports, self.amqp_port, self.dist_port, self.epmd_port = free_ports(vhosts + 3)
        self.port = self.ports[0]
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.node = f"dealer-test-{self.amqp_port}@localhost"
        self.log = workdir / "rabbit.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.epmd: subprocess.Popen[bytes] | None = None
        self._write_config()

    def _write_config(self) -> None:
        d = self.dir
        (d / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
        (d / "rabbitmq-env.conf").write_text("")  # not /etc/rabbitmq's (the system node's name and ports)
        definitions = {
            # definitions loaded at boot replace RabbitMQ's default user: define guest here
            "users": [{"name": "guest", "password_hash": _password_hash("guest"),
                       "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"]}],
            "vhosts": [{"name": v} for v in self.vhosts],
            "permissions": [{"user": "guest", "vhost": v, "configure": ".*", "write": ".*", "read": ".*"}
                            for v in self.vhosts],
            "global_parameters": [{"name": "mqtt_port_to_vhost_mapping",
                                   "value": {str(p): v for p, v in zip(self.ports, self.vhosts)}}],
        }
        (d / "definitions.json").write_text(json.dumps(definitions))
        lines = [
            f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}",
            *(f"mqtt.listeners.tcp.{i} = 127.0.0.1:{p}" for i, p in enumerate(self.ports)),
            "mqtt.allow_anonymous = true",
            "mqtt.default_user = guest",
            "mqtt.default_pass = guest",
            f"mqtt.vhost = {self.vhosts[0]}",
            # guest may log in from loopback only: every client here is on loopback
            "default_user = guest",
            "default_pass = guest",
            f"load_definitions = {d / 'definitions.json'}",
            "log.console = false",
            f"log.file = {self.log}",
            "log.file.level = info",
        ]
        (d / "rabbitmq.conf").write_text("\n".join(lines) + "\n")

    def _env(self) -> dict[str, str]:
        d = self.dir
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=str(d),  # the Erlang cookie is made here
            RABBITMQ_CONF_ENV_FILE=str(d / "rabbitmq-env.conf"),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.amqp_port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONFIG_FILE=str(d / "rabbitmq"),  # rabbitmq.conf
            # the script then runs the VM itself (exec) instead of waiting on it as a child:
            # our process is the node, and a kill reaps it
            RUNNING_UNDER_SYSTEMD="true",
            RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(d / "plugins-expand"),
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
        )
        return env

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert self.proc is None, "already started"
        if not Path(RABBITMQ_SERVER).exists():
            raise RuntimeError("rabbitmq-server is not installed (Debian package 'rabbitmq-server'); "
                               "scripts/test installs it")
        # Our own epmd, on our own port: the system's (if any) is never touched, and a kill
        # leaves nothing of ours behind.
        self.epmd = subprocess.Popen([EPMD, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        with (self.dir / "rabbit.stdout").open("ab") as out:
            self.proc = subprocess.Popen([RABBITMQ_SERVER], env=self._env(), cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_listening(self.proc, self.ports, self.START_TIMEOUT, "rabbitmq-server", self.log)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the node and its epmd: the broker vanishes mid-conversation."""
        for attr in ("proc", "epmd"):
            proc = getattr(self, attr)
            if proc is not None:
                _kill_group(proc)
                setattr(self, attr, None)

    def stop(self) -> None:
        """SIGTERM (RabbitMQ shuts down cleanly), SIGKILL after 30 s."""
        if self.proc is not None:
            _term_group(self.proc, 30)
            self.proc = None
        self.kill()

    terminate = stop

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a hung broker)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def share(self, i: int) -> "RabbitMqShare":
        """Listener ``i`` (its own vhost) as a broker of its own."""
        return RabbitMqShare(self, i)


class RabbitMqShare:
    """One vhost of a shared :class:`RabbitMqProcess`: the broker's interface, isolated from
    the node's other vhosts; ``kill``/``start`` act on the whole node."""

    kind = "rabbitmq"

    def __init__(self, node: RabbitMqProcess, i: int) -> None:
        self.node = node
        self.port = node.ports[i]
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.vhost = node.vhosts[i]
        self.dir = node.dir

    def start(self) -> None:
        if not self.node.running:
            self.node.kill()  # an epmd left from a kill
            self.node.start()

    def kill(self) -> None:
        self.node.kill()

    def stop(self) -> None:
        self.node.stop()

    def pause(self) -> None:
        self.node.pause()

    def resume(self) -> None:
        self.node.resume()


class NatsProcess:
    """A private nats-server with JetStream (which its MQTT gateway needs) and MQTT on loopback.

    JetStream keeps MQTT sessions and retained messages in ``dir/jetstream``: they survive a
    kill, as with Mosquitto's persistence."""

    START_TIMEOUT = 30.0
    kind = "nats"

    def __init__(self, workdir: Path, *, ack_wait: float | None = None) -> None:
        """``ack_wait``: seconds before an unacknowledged QoS 1 message is sent again (the
        server's default, 30 s, when None)."""
        self.dir = workdir
        self.port, self.client_port = free_ports(2)
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.name = f"dealer_test_{self.port}"
        self.log = workdir / "nats.log"
        self.conf = workdir / "nats.conf"
        self.conf.write_text(
            f"server_name: {self.name}\n"
            f"listen: 127.0.0.1:{self.client_port}\n"
            f"log_file: \"{self.log}\"\n"
            f"jetstream {{ store_dir: \"{workdir / 'js'}\" }}\n"
            f"mqtt {{\n  listen: 127.0.0.1:{self.port}\n"
            + (f"  ack_wait: \"{int(ack_wait * 1000)}ms\"\n" if ack_wait is not None else "")
            + "}\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.proc is None, "already started"
        if not Path(NATS_SERVER).exists():
            raise RuntimeError("nats-server is not installed (Debian package 'nats-server'); scripts/test installs it")
        with (self.dir / "nats.stdout").open("ab") as out:
            self.proc = subprocess.Popen([NATS_SERVER, "-c", str(self.conf)], cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_listening(self.proc, [self.port], self.START_TIMEOUT, "nats-server", self.log)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            _term_group(self.proc, 10)
            self.proc = None

    terminate = stop

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


def make_broker(kind: str, workdir: Path) -> BrokerProcess:
    """A broker of ``kind`` ("mosquitto", "rabbitmq", "nats") in ``workdir``, not started."""
    if kind == "mosquitto":
        return MosquittoProcess(workdir)
    if kind == "rabbitmq":
        return RabbitMqProcess(workdir)
    if kind == "nats":
        return NatsProcess(workdir)
    raise ValueError(f"unknown broker kind {kind!r} (one of {', '.join(BROKER_KINDS)})")


def start_broker(kind: str, workdir: Path) -> BrokerProcess:
    """A started broker of ``kind`` in ``workdir``."""
    broker = make_broker(kind, workdir)
    broker.start()
    return broker


__all__ = ["BROKER_KINDS", "BrokerProcess", "NatsProcess", "RabbitMqProcess", "RabbitMqShare", "free_ports",
           "make_broker", "start_broker", "free_port"]
