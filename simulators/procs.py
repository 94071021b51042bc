"""Child processes that must not outlive the test or soak that started them."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a long-running child (a backend node): the kernel sends it SIGKILL when
    the process that started it dies, so a run that is killed or times out leaves no node
    behind, spinning on a broker and a database that went with it (Linux only)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
