"""Regression: aiomqtt's socket registration under uvloop after a reconnect.

Two failures, both seen in the fault soak after broker restarts: aiomqtt removes only the
reader when paho closes a socket, and closing an fd whose writer is still polled aborts the
process inside libuv (``reuse``); and a TCP reset makes uvloop close its poll silently while
keeping it for that fd number, so the client never notices the dead connection and the next
connection on the same fd number can never read (``reset``: the client wedges). The script
runs in a subprocess because one failure is a SIGABRT, which would take pytest down.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # brokers and processes

SCRIPT = Path(__file__).parent / "scripts" / "uvloop_socket_reuse.py"
ROOT = Path(__file__).resolve().parents[1]


SCENARIOS = ("reuse", "reset")


def _run(mode: str, scenario: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), mode, scenario], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_aiomqtt_own_callbacks_fail_under_uvloop(scenario):
    """The peer behaviour the override exists for (if aiomqtt fixes it, this test says so)."""
    proc = _run("aiomqtt", scenario)
    assert "survived" not in proc.stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_our_client_survives_under_uvloop(scenario):
    proc = _run("ours", scenario)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "survived", proc.stdout + proc.stderr
