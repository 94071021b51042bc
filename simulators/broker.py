"""A private Mosquitto process on a free loopback port (tests and benchmarks).

Tests kill and restart it to inject faults. Persistence is on and saved at every change,
so a consumer's persistent session and its queued QoS 1 messages survive a SIGKILL, as
they would with a production broker.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simulators.procs import die_with_parent

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


#: The lowest port a free port is chosen from (below it: well-known and registered services).
PORTS_FROM = 10_000
_pick = random.SystemRandom()


def _ephemeral_from() -> int:
    """Where the kernel's ephemeral range begins (outgoing connections take their source ports there)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _port_range() -> tuple[int, int]:
    """The ports this process chooses from: below the kernel's ephemeral range, and one slice
    of it per pytest-xdist worker (``PYTEST_XDIST_WORKER`` gwN of ``PYTEST_XDIST_WORKER_COUNT``).

    A server that is killed and restarted on the same ports (a RabbitMQ node serving many
    tests) leaves them free in between; with one shared range, a parallel worker's broker took
    one of them and the node could not boot again (``eaddrinuse``). Slices never overlap."""
    low, high = PORTS_FROM, _ephemeral_from()
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1:
        size = (high - low) // int(count)
        low += size * (int(worker[2:]) % int(count))
        high = low + size
    return low, high


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports, held open together while chosen (none repeats).

    Chosen below the kernel's ephemeral range where there is room: between the choice and the
    server's own bind (a RabbitMQ boots for seconds) no outgoing connection of this or a
    parallel test process can take the port as its source port (pytest-xdist workers did:
    ``eaddrinuse``); each test worker has a slice of its own (:func:`_port_range`)."""
    low, high = _port_range()
    socks: list[socket.socket] = []
    try:
        while len(socks) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", _pick.randrange(low, high) if high - low >= 1_000 else 0))
            except OSError:  # taken (or lingering): another one
                s.close()
                continue
            if any(o.getsockname()[1] == s.getsockname()[1] for o in socks):
                s.close()
                continue
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def start_mosquitto(conf: Path, ports: Iterable[int],
                    log: Callable[[], str] | None = None, *, tied: bool = False) -> subprocess.Popen[bytes]:
    """Run Mosquitto on ``conf`` and return once every one of ``ports`` accepts connections
    (10 s at most). If it exits, or does not listen in time, it is stopped and RuntimeError
    says why, with its stderr and ``log()`` (its log file) when given. ``tied``: it dies with
    this process and has its own process group (a Ctrl-C reaches only the launcher, which stops
    it in its turn), as a long-running demo needs."""
    if not Path(MOSQUITTO).exists():
        raise RuntimeError("mosquitto is not installed (Debian package 'mosquitto'); scripts/test installs it")
    extra: dict[str, Any] = {"preexec_fn": die_with_parent, "process_group": 0} if tied else {}
    proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **extra)
    more = (lambda: "\n" + log()) if log is not None else (lambda: "")
    deadline = time.monotonic() + 10
    pending = set(ports)
    while pending and time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"mosquitto exited: {err}{more()}")
        for port in sorted(pending):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    pending.discard(port)
            except OSError:
                pass
        if pending:
            time.sleep(0.02)
    if pending:
        stop_mosquitto(proc)
        raise RuntimeError(f"mosquitto did not start listening on {sorted(pending)}{more()}")
    return proc


def stop_mosquitto(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not exited 10 s later."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class MosquittoProcess:
    kind = "mosquitto"

    def __init__(self, workdir: Path, *, persistence: bool = True, max_packet_size: int | None = None,
                 save_on_every_change: bool = True) -> None:
        """``max_packet_size``: as in deploy/mosquitto/mosquitto.conf (262144); the broker drops a
        client that publishes a bigger packet. None: Mosquitto's default (no limit).
        ``save_on_every_change``: the database is written after every change (a kill -9 loses
        nothing queued, and every message costs a write), else once a second (a kill -9 loses
        up to a second of queued messages, as a production broker may)."""
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.dir = workdir
        self.conf = workdir / "mosquitto.conf"
        on_changes = "true" if save_on_every_change else "false"
        persist = (f"persistence true\npersistence_location {workdir}/\nautosave_interval 1\n"
                   f"autosave_on_changes {on_changes}\n" if persistence else "persistence false\n")
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nset_tcp_nodelay true\nallow_anonymous true\n{persist}"
            f"max_queued_messages 100000\nmax_inflight_messages 0\nlog_dest file {workdir}/mosquitto.log\n"
            + (f"max_packet_size {max_packet_size}\n" if max_packet_size is not None else "")
            # As root, mosquitto 2 drops to the 'mosquitto' user and then cannot write its
            # database in our folder: persistence would silently be off.
            + ("user root\n" if os.geteuid() == 0 else "")
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.proc is None
        self.proc = start_mosquitto(self.conf, [self.port])

    def kill(self) -> None:
        """SIGKILL: the broker vanishes mid-conversation, like a crashed host."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_mosquitto(self.proc)
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a hung broker)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
