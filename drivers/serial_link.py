"""Serial transport for a shoe scanner: bytes -> ScanInput, with reconnect and heartbeat.

One asyncio task per port. The link goes *down* (reported once per outage) when the port
cannot be opened, reports EOF/EIO (device unplugged), or the reader is silent for
``heartbeat_timeout``. It then reopens the port by path with capped exponential backoff, so a
replug that re-points a symlink such as ``/dev/serial/by-id/...`` to a new device node is
picked up without a restart. The link is *up* again as soon as the port opens, except after a
heartbeat timeout: the port was fine then and the reader was not, so only a frame from the
reader brings the link up (otherwise a dead reader would flap up/down every timeout).

Reader sessions outlive reconnects: frames the reader sent while the cable was out show up
as a sequence gap (LOST) on the first frame after the replug.

With an :class:`~drivers.frames.FrameAuthenticator` the reader's frames must be signed
(or, if it does not require signing, may be): a frame with a bad or missing MAC or a replay
becomes a ``FORGED`` input, is counted in ``frames_forged`` and, like a damaged frame, does
not count as a sign of life from the reader. Whenever an accepted signed frame moves a
session's :class:`~drivers.frames.ReaderState` (boot, seq), ``on_state`` hears it *before* the
frame's inputs, so the backend can journal it with them and restore it after a restart
(:meth:`session` then :meth:`~drivers.frames.ReaderSession.restore`, before :meth:`run`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import serial
import serial_asyncio_fast

from drivers.frames import Frame, FrameAuthenticator, FrameDecoder, FrameError, ReaderSession, ReaderState, error_input
from drivers.scan import LinkStatus, ScanInput, ScanKind

_READ_SIZE = 1024
_CLOSE_TIMEOUT = 2.0
_SILENT = "heartbeat timeout"
_LOG_BURST, _LOG_WINDOW = 10, 10.0  # corrupt-frame warnings: at most 10 per 10 s, the rest counted


class SerialScannerLink:
    """Reads scanner frames from ``port`` and reports inputs and link changes via callbacks.

    Counters: ``frames_ok`` (decoded, authentic frames from the expected reader), ``frames_bad``
    (damaged frames and frames from a foreign reader: each became a CORRUPT input),
    ``frames_forged`` (frames that failed authentication: each became a FORGED input),
    ``reconnects`` (successful re-opens after the first open), ``open_failures``, and the decoder's
    ``garbage_bytes``. ``sessions`` maps reader id -> :class:`ReaderSession`.
    """

    def __init__(
        self,
        port: str,
        *,
        baudrate: int = 115200,
        expected_reader: str | None = None,
        heartbeat_timeout: float = 5.0,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        on_input: Callable[[ScanInput], Any],
        on_link: Callable[[LinkStatus], Any],
        logger: Any = None,
        auth: FrameAuthenticator | None = None,
        on_state: Callable[[ReaderState], Any] | None = None,
    ) -> None:
        self.port = port
        self.baudrate = baudrate
        self.expected_reader = expected_reader
        self.heartbeat_timeout = heartbeat_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._on_input = on_input
        self._on_link = on_link
        self.auth = auth
        self._on_state = on_state
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self.name = f"serial:{port}"
        self.decoder = FrameDecoder()
        self.sessions: dict[str, ReaderSession] = {}
        self.up: bool | None = None  # None until the first transition
        self.frames_ok = 0
        self.frames_bad = 0
        self.frames_forged = 0
        self.reconnects = 0
        self.open_failures = 0
        self._opens = 0
        self._reader_hint = expected_reader or ""
        self._silent_reader = False  # the last outage was a heartbeat timeout
        self._log_window = (0.0, 0, 0)  # corrupt-frame warnings: (window start, logged, held back)

    @property
    def garbage_bytes(self) -> int:
        return self.decoder.garbage_bytes

    def session(self, reader: str) -> ReaderSession:
        """The session of ``reader`` (created on first use, with this link's authenticator)."""
        session = self.sessions.get(reader)
        if session is None:
            session = self.sessions[reader] = ReaderSession(reader, self.auth)
        return session

    async def run(self) -> None:
        """Run until cancelled; never returns otherwise and never raises on device trouble."""
        delay = self.backoff_initial
        first_attempt = True
        while True:
            if not first_attempt:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
            first_attempt = False
            try:
                reader, writer = await serial_asyncio_fast.open_serial_connection(
                    url=self.port, baudrate=self.baudrate
                )
            except (OSError, serial.SerialException, ValueError) as exc:
                self.open_failures += 1
                self._silent_reader = False  # whatever appears at this path next is new
                self._set_link(False, f"cannot open {self.port}: {exc}")
                continue
            self._opens += 1
            if self._opens > 1:
                self.reconnects += 1
            self.decoder.reset()
            if not self._silent_reader:
                self._set_link(True, "port open")
            try:
                reason, heard = await self._pump(reader)
            finally:
                await self._close(writer)
            if heard:
                delay = self.backoff_initial
            self._silent_reader = reason == _SILENT
            self._set_link(False, reason)

    async def _pump(self, reader: asyncio.StreamReader) -> tuple[str, bool]:
        """Read until the port fails or the reader is silent; return (why, heard anything)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.heartbeat_timeout
        heard = False
        while True:
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the task's
                # cancellation when a read completes at the same moment, and shutdown hangs.
                async with asyncio.timeout_at(deadline):
                    data = await reader.read(_READ_SIZE)
            except TimeoutError:
                return _SILENT, heard
            except OSError as exc:  # serial.SerialException is an OSError
                return f"read error: {exc}", heard
            if not data:
                return "end of file (device unplugged?)", heard
            now = time.monotonic_ns()
            if self._feed(data, now):
                heard, self._silent_reader = True, False
                deadline = loop.time() + self.heartbeat_timeout
                self._set_link(True, "reader heard")

    def _feed(self, data: bytes, now: int) -> bool:
        """Decode and dispatch one chunk; True if the expected reader sent a valid frame."""
        heard = False
        for item in self.decoder.feed(data):
            if isinstance(item, FrameError):
                self.frames_bad += 1
                if self._may_log(now):
                    self._log.warning(f"{self.name}: corrupt frame ({item.reason}): {item} raw={item.raw!r}")
                self._emit(error_input(self._reader_hint, item, now))
            elif self.expected_reader is not None and item.reader != self.expected_reader:
                self.frames_bad += 1
                self._emit(self._foreign(item, now))
            else:
                session = self.session(item.reader)
                before = session.state
                scans = session.accept(item, now)
                state = session.state
                if state is not None and state != before and self._on_state is not None:
                    try:
                        self._on_state(state)
                    except Exception:
                        self._log.exception(f"{self.name}: on_state callback failed for {state!r}")
                if scans and scans[0].kind is ScanKind.FORGED:
                    self.frames_forged += 1
                    self._log.error(f"{self.name}: frame from {item.reader} failed authentication: "
                                    f"{scans[0].detail}")
                else:
                    self.frames_ok += 1
                    heard = True
                    self._reader_hint = item.reader
                for scan in scans:
                    self._emit(scan)
        return heard

    def _may_log(self, now_ns: int) -> bool:
        """Whether a corrupt frame may have its own warning: a noisy line logs the first
        ``_LOG_BURST`` of every ``_LOG_WINDOW`` seconds and one line for the rest (the backend
        counts and journals floods itself, dealer/ratelimit.py)."""
        start, logged, held = self._log_window
        now = now_ns / 1e9
        if now - start >= _LOG_WINDOW:
            if held:
                self._log.warning(f"{self.name}: {held} more corrupt frames in the last "
                                  f"{now - start:.0f} s were not logged one by one")
            start, logged, held = now, 0, 0
        if logged < _LOG_BURST:
            self._log_window = (start, logged + 1, held)
            return True
        self._log_window = (start, logged, held + 1)
        return False

    def _foreign(self, frame: Frame, now: int) -> ScanInput:
        detail = (f"frame from reader {frame.reader!r} on {self.name}, "
                  f"expected {self.expected_reader!r}")
        if self._may_log(now):
            self._log.warning(f"{self.name}: {detail}")
        return ScanInput(self._reader_hint, ScanKind.CORRUPT, detail=detail, seq=frame.seq,
                         received_ns=now)

    def _emit(self, scan: ScanInput) -> None:
        try:
            self._on_input(scan)
        except Exception:
            self._log.exception(f"{self.name}: on_input callback failed for {scan!r}")

    def _set_link(self, up: bool, reason: str) -> None:
        """Report a change of link state; repeated downs while retrying are reported once."""
        if self.up is up:
            return
        self.up = up
        (self._log.info if up else self._log.warning)(
            f"{self.name}: link {'up' if up else 'down'}: {reason}")
        try:
            self._on_link(LinkStatus(self.name, up, reason))
        except Exception:
            self._log.exception(f"{self.name}: on_link callback failed")

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), _CLOSE_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            self._log.debug(f"{self.name}: close: {exc!r}")
