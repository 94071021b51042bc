"""What a house worker process runs besides decisions: its start-up and a liveness probe.

The worker is a child of the backend: Ctrl-C (SIGINT to the process group) is the backend's to
handle, which stops the pool; the worker ignores it instead of dying with a traceback mid-move.
"""

from __future__ import annotations

import os
import signal


def init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pid() -> int:
    """The worker's process id (a warm-up call that also says which process answered)."""
    return os.getpid()
