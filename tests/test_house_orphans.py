"""Found by the fault soak: a backend killed by SIGKILL left its house worker process and the
worker's fork server running for ever (the soak kills backends; a day of tests left 130 of them on
the host, 45 MB each). The worker now exits with the backend, and the fork server after it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration  # a backend-like process killed, its house worker watched

BACKEND = """
import asyncio
from dealer.edge.house import HouseRunner

async def main():
    runner = HouseRunner(lambda table, event: None, lambda: 0, mode="process", workers=1)
    print(await runner.worker_pid(), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_the_house_worker_and_its_fork_server_end_with_a_killed_backend() -> None:
    backend = subprocess.Popen([sys.executable, "-c", BACKEND], stdout=subprocess.PIPE, cwd=ROOT, text=True)
    try:
        worker = int(backend.stdout.readline())  # type: ignore[union-attr]
        server = _parent(worker)
        assert server != backend.pid and _alive(worker) and _alive(server)
    finally:
        backend.kill()
        backend.wait()
    deadline = time.monotonic() + 30
    while (_alive(worker) or _alive(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in (worker, server) if _alive(p)]
    for p in left:  # never leave them behind, even when the test fails
        os.kill(p, 9)
    assert not left, "the house worker or its fork server outlived the killed backend"
