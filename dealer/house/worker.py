"""What a house worker process runs besides decisions: its start-up and a liveness probe.

The worker is a child of the backend: Ctrl-C (SIGINT to the process group) is the backend's to
handle, which stops the pool; the worker ignores it instead of dying with a traceback mid-move.
It runs at a lower CPU priority (:data:`NICE`): on a busy host the event loop of every table
wakes up on time and the search, whose budget is wall-clock time, does a few playouts less.

A worker ends with its backend, however the backend ends (SIGKILL included): it comes from the
fork server and holds the fork server's "alive" pipe, so a worker left waiting on its call queue
keeps both for ever (a soak that kills backends left 130 of them, 45 MB each). The worker
watches the backend's process (a pidfd; polling where the kernel has none) and exits with it,
and the fork server follows when no worker holds its pipe.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time


#: Added to the worker's niceness (0 = the backend's priority).
NICE = 10


def init(nice: int = NICE, backend_pid: int | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)
    if backend_pid is not None:
        threading.Thread(target=_end_with, args=(backend_pid,), name="end-with-backend", daemon=True).start()


def _end_with(backend_pid: int) -> None:
    """Exit as soon as the backend process is gone."""
    try:
        fd = os.pidfd_open(backend_pid)
    except (AttributeError, OSError):  # no pidfd here: look once a second
        while _alive(backend_pid):
            time.sleep(1.0)
    else:
        select.select([fd], [], [])  # readable once the process has exited
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid() -> int:
    """The worker's process id (a warm-up call that also says which process answered)."""
    return os.getpid()
