"""A real pseudo-terminal standing in for a USB-serial scanner, with unplug and replug.

The backend opens ``path`` (a symlink, like ``/dev/serial/by-id/...``) exactly as it would
open real hardware; the simulator writes device bytes into the PTY master. ``unplug()``
closes the PTY so the backend's open port sees EOF/EIO; ``replug()`` makes a new PTY and
atomically re-points the symlink, which is what udev does when a USB device comes back
under a new ``/dev/ttyUSBn``.
"""

from __future__ import annotations

import os
import tty
from pathlib import Path


class PtyPort:
    """One simulated serial device behind a stable symlink ``directory/name``."""

    def __init__(self, directory: str | os.PathLike[str], name: str = "scanner") -> None:
        self.path = str(Path(directory) / name)
        self._master: int | None = None
        self._slave: int | None = None
        self.bytes_dropped = 0
        self.replug()

    @property
    def plugged(self) -> bool:
        return self._master is not None

    @property
    def device(self) -> str | None:
        """The current slave device name (``/dev/pts/N``), or None while unplugged."""
        return os.ttyname(self._slave) if self._slave is not None else None

    def replug(self) -> None:
        """Plug in a fresh PTY pair and point the symlink at it (no-op if plugged)."""
        if self.plugged:
            return
        master, slave = os.openpty()
        # Raw: no echo, no CR/LF translation, so frames arrive byte-exact.
        tty.setraw(slave)
        # Like a real wire, a device never blocks on a listener that is not reading:
        # bytes that do not fit into the kernel buffer are dropped (and counted).
        os.set_blocking(master, False)
        # We keep the slave fd open too, so writing before the backend opens the port is
        # harmless (a PTY whose slave side was never opened would fail the write).
        self._master, self._slave = master, slave
        tmp = f"{self.path}.tmp{os.getpid()}"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.ttyname(slave), tmp)
        os.replace(tmp, self.path)

    def write(self, data: bytes) -> int:
        """Send device bytes; returns how many went out (0 while unplugged)."""
        if self._master is None or not data:
            return 0
        try:
            sent = os.write(self._master, data)
        except BlockingIOError:
            sent = 0
        self.bytes_dropped += len(data) - sent
        return sent

    def unplug(self) -> None:
        """Pull the cable: close both PTY ends and remove the symlink."""
        if self._master is not None:
            os.close(self._master)
            self._master = None
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None
        if os.path.lexists(self.path):
            os.unlink(self.path)

    def close(self) -> None:
        self.unplug()

    def __enter__(self) -> PtyPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
