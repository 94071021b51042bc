"""Serial transport for a shoe scanner: bytes -> ScanInput, with reconnect and heartbeat.

One asyncio task per port. What the bytes mean is the reader's protocol's business: a codec
from :mod:`drivers.codecs` (the backend's own frames by default, ``protocol="beetek"`` for a
Bee-Tek shoe), whose declared capabilities decide how liveness is judged:

* a protocol **with heartbeats** (the native frames): the link is *up* only once the reader
  was heard (a valid frame or heartbeat), and goes *down* when it is silent for
  ``heartbeat_timeout``; a port that opens proves nothing about the reader behind it;
* a protocol **without heartbeats** (the Bee-Tek shoe): a quiet shoe and a dead one look the
  same, so an open, readable port is all there is: *up* when the port opens, *down* only when
  it cannot be opened or reading it fails (docs/scanner-protocol.md §10.3 says how much weaker).

Either way the link goes down (reported once per outage) when the port cannot be opened or
reports EOF/EIO (device unplugged), and reopens the port by path with capped exponential
backoff, so a replug that re-points a symlink such as ``/dev/serial/by-id/...`` to a new
device node is picked up without a restart.

Reader sessions outlive reconnects: native frames the reader sent while the cable was out
show up as a sequence gap (LOST) on the first frame after the replug.

With an :class:`~drivers.frames.FrameAuthenticator` (signing protocols only) the reader's
frames must be signed (or, if it does not require signing, may be): a frame with a bad or
missing MAC or a replay becomes a ``FORGED`` input, is counted in ``frames_forged`` and, like
a damaged frame, does not count as a sign of life from the reader. Whenever an accepted signed
frame moves a session's :class:`~drivers.frames.ReaderState` (boot, seq), ``on_state`` hears
it *before* the frame's inputs, so the backend can journal it with them and restore it after
a restart (:meth:`session` then :meth:`~drivers.frames.ReaderSession.restore`, before :meth:`run`).

Logging: a damaged frame, another reader's frame, a forgery or a device warning is one line
each, at most ``_LOG_BURST`` per ``_LOG_WINDOW`` seconds and one line for the rest; the raw
bytes only ever at debug level. A link coming up is info, going down a warning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import serial
import serial_asyncio_fast

from drivers.codecs import DEFAULT, Notice, SequencedCodec, StreamCodec, open_codec
from drivers.frames import FrameAuthenticator, ReaderSession, ReaderState
from drivers.scan import LinkStatus, ScanInput

_READ_SIZE = 1024
_CLOSE_TIMEOUT = 2.0
_SILENT = "heartbeat timeout"
_LOG_BURST, _LOG_WINDOW = 10, 10.0  # notice lines: at most 10 per 10 s, the rest counted


class SerialScannerLink:
    """Reads a scanner's bytes from ``port`` and reports inputs and link changes via callbacks.

    ``protocol`` names the codec (:func:`drivers.codecs.codec`); ``baudrate`` defaults to the
    protocol's. Counters (the codec's): ``frames_ok`` (valid frames from the expected reader),
    ``frames_bad`` (damaged frames and frames from a foreign reader: each became a CORRUPT
    input), ``frames_forged`` (frames that failed authentication: each became a FORGED input),
    ``garbage_bytes``; the link's own: ``reconnects`` (successful re-opens after the first
    open), ``open_failures`` and ``notices`` (per kind). ``on_notice`` hears every
    :class:`~drivers.codecs.Notice` (a device warning, a damaged frame ...) for metrics.
    """

    def __init__(
        self,
        port: str,
        *,
        baudrate: int | None = None,
        expected_reader: str | None = None,
        heartbeat_timeout: float = 5.0,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        on_input: Callable[[ScanInput], Any],
        on_link: Callable[[LinkStatus], Any],
        logger: Any = None,
        auth: FrameAuthenticator | None = None,
        on_state: Callable[[ReaderState], Any] | None = None,
        protocol: str = DEFAULT,
        on_notice: Callable[[Notice], Any] | None = None,
    ) -> None:
        self.codec: StreamCodec = open_codec(protocol, expected_reader, auth=auth)
        self.protocol = protocol
        self.capabilities = self.codec.capabilities
        self.port = port
        self.baudrate = baudrate if baudrate is not None else self.capabilities.default_baudrate
        self.expected_reader = expected_reader
        self.heartbeat_timeout = heartbeat_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._on_input = on_input
        self._on_link = on_link
        self.auth = auth
        self._on_state = on_state
        self._on_notice = on_notice
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self.name = f"serial:{port}"
        self.up: bool | None = None  # None until the first transition
        self.port_open = False  # the port is open now (with heartbeats that alone is not "up")
        self.reconnects = 0
        self.open_failures = 0
        self.notices: dict[str, int] = {}
        self._opens = 0
        self._log_window = (0.0, 0, 0)  # notice lines: (window start, logged, held back)

    # -- the codec's counters and sessions -------------------------------------------------

    @property
    def frames_ok(self) -> int:
        return self.codec.frames_ok

    @property
    def frames_bad(self) -> int:
        return self.codec.frames_bad

    @property
    def frames_forged(self) -> int:
        return self.codec.frames_forged

    @property
    def garbage_bytes(self) -> int:
        return self.codec.garbage_bytes

    @property
    def sessions(self) -> dict[str, ReaderSession]:
        """Reader id -> :class:`~drivers.frames.ReaderSession` (protocols with sequence numbers)."""
        return getattr(self.codec, "sessions", {})

    def session(self, reader: str) -> ReaderSession:
        """The session of ``reader`` (created on first use, with this link's authenticator);
        only protocols with sequence numbers have one."""
        if not self.capabilities.sequence_numbers:
            raise TypeError(f"{self.name}: protocol {self.protocol!r} has no reader sessions (no sequence numbers)")
        return cast(SequencedCodec, self.codec).session(reader)  # sequence numbers: a codec with reader sessions

    # -- the task ---------------------------------------------------------------------------

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
                self._set_link(False, f"cannot open {self.port}: {exc}")
                continue
            self._opens += 1
            if self._opens > 1:
                self.reconnects += 1
            self.codec.reset()
            self.port_open = True
            if not self.capabilities.heartbeats:  # nothing better to go by (module docstring)
                self._set_link(True, "port open (the protocol has no heartbeat: an open, readable port counts as up)")
            try:
                reason, heard = await self._pump(reader)
            finally:
                self.port_open = False
                await self._close(writer)
            if heard:
                delay = self.backoff_initial
            self._set_link(False, reason)

    async def _pump(self, reader: asyncio.StreamReader) -> tuple[str, bool]:
        """Read until the port fails or the reader is silent; return (why, heard anything)."""
        loop = asyncio.get_running_loop()
        beats = self.capabilities.heartbeats
        deadline = loop.time() + self.heartbeat_timeout if beats else None
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
            if self._feed(data, time.monotonic_ns()):
                heard = True
                if beats:
                    deadline = loop.time() + self.heartbeat_timeout
                    self._set_link(True, "reader heard")

    def _feed(self, data: bytes, now: int) -> bool:
        """Decode and dispatch one chunk, in order; True if the expected reader sent a valid frame."""
        decoded = self.codec.feed(data, now)
        for item in decoded.items:
            if isinstance(item, ScanInput):
                self._emit(item)
            elif isinstance(item, ReaderState):
                if self._on_state is not None:
                    try:
                        self._on_state(item)
                    except Exception:
                        self._log.exception(f"{self.name}: on_state callback failed for reader {item.reader}")
            else:
                self._notice(item, now)
        return decoded.heard

    def _notice(self, notice: Notice, now: int) -> None:
        self.notices[notice.kind] = self.notices.get(notice.kind, 0) + 1
        if self._may_log(now):
            level = logging.ERROR if notice.kind == "forged" else logging.WARNING
            self._log.log(level, f"{self.name}: {notice.message}")
            if notice.raw and self._log.isEnabledFor(logging.DEBUG):
                self._log.debug(f"{self.name}: {notice.kind} raw={notice.raw!r}")
        if self._on_notice is not None:
            try:
                self._on_notice(notice)
            except Exception:
                self._log.exception(f"{self.name}: on_notice callback failed")

    def _may_log(self, now_ns: int) -> bool:
        """Whether a notice may have its own line: a noisy line logs the first ``_LOG_BURST``
        of every ``_LOG_WINDOW`` seconds and one line for the rest (the backend counts and
        journals floods itself, dealer/edge/ratelimit.py)."""
        start, logged, held = self._log_window
        now = now_ns / 1e9
        if now - start >= _LOG_WINDOW:
            if held:
                self._log.warning(f"{self.name}: {held} more scanner notices (damaged frames, warnings ...) in the "
                                  f"last {now - start:.0f} s were not logged one by one")
            start, logged, held = now, 0, 0
        if logged < _LOG_BURST:
            self._log_window = (start, logged + 1, held)
            return True
        self._log_window = (start, logged, held + 1)
        return False

    def _emit(self, scan: ScanInput) -> None:
        try:
            self._on_input(scan)
        except Exception:
            self._log.exception(f"{self.name}: on_input callback failed for a {scan.kind.value} input "
                                f"(seq {scan.seq})")

    def _set_link(self, up: bool, reason: str) -> None:
        """Report a change of link state; repeated downs while retrying are reported once."""
        if self.up is up:
            return
        self.up = up
        self._log.debug(f"{self.name}: link {'up' if up else 'down'}: {reason}")  # the service logs it, once
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
