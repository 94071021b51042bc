"""What a house worker process runs besides decisions: its start-up and a liveness probe.

The worker is a child of the backend: Ctrl-C (SIGINT to the process group) is the backend's to
handle, which stops the pool; the worker ignores it instead of dying with a traceback mid-move.
It runs at a lower CPU priority (:data:`NICE`): on a busy host the event loop of every table
wakes up on time and the search, whose budget is wall-clock time, does a few playouts less.
"""

from __future__ import annotations

import os
import signal


#: Added to the worker's niceness (0 = the backend's priority).
NICE = 10


def init(nice: int = NICE) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)


def pid() -> int:
    """The worker's process id (a warm-up call that also says which process answered)."""
    return os.getpid()
