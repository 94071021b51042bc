"""Shared fixtures: a real Mosquitto per test on a free loopback port, PTY shoes, recorders."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dealer.logs import configure_logging

configure_logging("warning")

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """A private Mosquitto process that tests can kill and restart on the same port.

    Persistence is on and saved at every change, so a consumer's persistent session and
    its queued QoS 1 messages survive a SIGKILL, as they would with a production broker.
    """

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.dir = workdir
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
            f"persistence true\npersistence_location {workdir}/\nautosave_interval 1\nautosave_on_changes true\n"
            f"max_queued_messages 10000\nlog_dest file {workdir}/mosquitto.log\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.proc is None
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.proc.stderr.read().decode() if self.proc.stderr else ''}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mosquitto did not start listening")

    def kill(self) -> None:
        """SIGKILL: the broker vanishes mid-conversation, like a crashed host."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    d = tmp_path / "broker"
    d.mkdir()
    b = Broker(d)
    b.start()
    yield b
    b.kill()


async def wait_until(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Wait for a condition driven by real IO; fail with ``what`` if it never holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
def pty_dir(tmp_path: Path) -> Path:
    d = tmp_path / "dev"
    d.mkdir()
    return d


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
