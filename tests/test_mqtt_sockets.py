"""Regression: aiomqtt's socket registration under uvloop after a reconnect.

aiomqtt removes only the reader when paho closes a socket. Under uvloop the fd is then
closed while its writer is still polled, and libuv aborts the process (or, on another
path, keeps a closed poll handle for that fd number so the next connection can never
write and the client wedges). The fault soak hit the wedge after broker restarts. The
script runs in a subprocess because the failure is a SIGABRT, which would take pytest down.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "uvloop_socket_reuse.py"
ROOT = Path(__file__).resolve().parents[1]


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), mode], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_aiomqtt_own_callbacks_abort_under_uvloop_when_a_socket_is_reused():
    """The peer behaviour the override exists for (if aiomqtt fixes it, this test says so)."""
    proc = _run("aiomqtt")
    assert proc.returncode != 0 and "survived" not in proc.stdout


def test_our_client_survives_socket_reuse_under_uvloop():
    proc = _run("ours")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "survived"
