"""MQTT scanner ingest: the serial protocol's logical reads as schema-validated JSON.

A scanner gateway publishes one :class:`ScannerMessage` per frame on
``studio/v1/tables/{table}/scanner``. Each message is turned into the same
:class:`~drivers.frames.Frame` the serial codec produces and goes through the same
:class:`~drivers.frames.ReaderSession` sequence rules, so both transports feed one
stream of :class:`~drivers.scan.ScanInput`. Bad JSON, a schema violation or a reader
that does not belong to the topic's table is reported and changes nothing.

A message may be signed exactly like a serial frame (``boot`` and ``mac``, over the same
bytes ``reader,seq,status,payload;boot``), so a gateway can forward the reader's own
signature unchanged; with a reader's :class:`~drivers.frames.FrameAuthenticator` a bad or
missing MAC or a replay becomes a ``FORGED`` input (docs/scanner-protocol.md §6). As on the
serial link, ``on_state`` hears every change of a signed reader's boot and seq before the
frame's inputs, and :meth:`MqttScannerIngest.session` gives the session to restore after a restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from drivers.frames import Frame, FrameAuthenticator, FrameError, ReaderSession, ReaderState, Status
from drivers.scan import LinkStatus, ScanInput, ScanKind


class ScannerMessage(BaseModel):
    """One scanner frame as JSON (the fields of the serial frame, no checksum: MQTT has its own)."""

    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"dependentRequired": {"boot": ["mac"], "mac": ["boot"]}})

    schema_id: Literal["studio.v1.scanner"] = "studio.v1.scanner"
    reader: str = Field(pattern=r"^[A-Z0-9-]{1,16}$")
    seq: int = Field(ge=0, le=2**32 - 1)
    status: Literal["OK", "NOREAD", "MISREAD", "FAULT", "HB", "BOOT"]
    payload: str = Field(default="", max_length=16, description="card code (OK), fault code (FAULT), raw text (MISREAD), firmware (BOOT)")
    boot: int | None = Field(default=None, ge=0, le=2**32 - 1,
                             description="signed messages: the reader's boot counter (raised at every power-up)")
    mac: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                            description="signed messages: HMAC-SHA256 with the reader's key over the ASCII bytes "
                                        "'reader,seq,status,payload;boot', 64 lowercase hex digits")

    @model_validator(mode="after")
    def _signed(self) -> "ScannerMessage":
        if (self.boot is None) != (self.mac is None):
            raise ValueError("a signed message needs both 'boot' and 'mac'")
        return self

    def frame(self) -> Frame:
        return Frame(self.reader, self.seq, Status(self.status), self.payload, self.boot, self.mac)

    @classmethod
    def of(cls, frame: Frame) -> "ScannerMessage":
        return cls(reader=frame.reader, seq=frame.seq, status=frame.status.value, payload=frame.payload,
                   boot=frame.boot, mac=frame.mac)


class MqttScannerIngest:
    """Per-reader sessions and liveness for scanners that report over MQTT."""

    def __init__(self, readers: dict[str, str], *, topic_table: Callable[[str], str | None],
                 on_input: Callable[[str, ScanInput], None],
                 on_link: Callable[[str, LinkStatus], None], on_bad: Callable[[str, str], None],
                 auth: Mapping[str, FrameAuthenticator | None] | None = None,
                 on_state: Callable[[str, ReaderState], None] | None = None) -> None:
        self.readers = dict(readers)  # reader id -> table id
        self._topic_table = topic_table  # the table a scanner topic names (the edge's topic layout)
        auth = auth or {}
        self._sessions = {r: ReaderSession(r, auth.get(r)) for r in readers}
        self._up: dict[str, bool] = {}
        self._since: dict[str, int] = {}  # readers started over (:meth:`forget`): their watchdog counts from then
        self._on_input, self._on_link, self._on_bad = on_input, on_link, on_bad
        self._on_state = on_state

    def handle(self, topic: str, payload: bytes) -> None:
        received = time.monotonic_ns()
        try:
            msg = ScannerMessage.model_validate_json(payload)
            frame = msg.frame()
        except ValidationError as exc:  # the errors, never the message itself (a raw frame) in the logs
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            why = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(message)'}: {e['msg']}" for e in errors[:5])
            self._on_bad("scanner", f"{topic}: invalid scanner message: {why}")
            return
        except FrameError as exc:
            self._on_bad("scanner", f"{topic}: {exc}".replace("\n", " "))
            return
        table = self.readers.get(msg.reader)
        if table is None or self._topic_table(topic) != table:
            self._on_bad("scanner", f"{topic}: reader {msg.reader} is not the scanner of this table")
            return
        session = self._sessions[msg.reader]
        before = session.state
        inputs = session.accept(frame, received)
        state = session.state
        if state is not None and state != before and self._on_state is not None:
            self._on_state(table, state)
        forged = bool(inputs) and inputs[0].kind is ScanKind.FORGED  # no sign of life either
        if not forged and not self._up.get(msg.reader):
            self._up[msg.reader] = True
            self._on_link(table, LinkStatus(f"scanner:{msg.reader}", True, "frames arriving"))
        for inp in inputs:
            self._on_input(table, inp)

    def forget(self, reader: str) -> ReaderSession:
        """Start a reader over (its table moved away from this node, or back to it): a new
        session (the caller restores it from the journal) and no link state, so its next frame
        reports the link up and its heartbeat timeout counts from now. Returns the new session."""
        self._sessions[reader] = ReaderSession(reader, self._sessions[reader].auth)
        self._up.pop(reader, None)
        self._since[reader] = time.monotonic_ns()
        return self._sessions[reader]

    def session(self, reader: str) -> ReaderSession:
        """The sequence (and replay) state of one reader, for counters and tests."""
        return self._sessions[reader]

    async def watchdog(self, timeouts: dict[str, float], period: float = 0.25) -> None:
        """Mark a reader down when nothing (not even a heartbeat) arrived within its timeout,
        counted from its last message or, for a reader never heard, from the watchdog's start
        (a gateway that never connects is then down, not merely unknown)."""
        started = time.monotonic_ns()
        while True:
            await asyncio.sleep(period)
            now = time.monotonic_ns()
            for reader, session in self._sessions.items():
                seen, up = session.last_seen_ns, self._up.get(reader)
                if up is None and seen is None and now - self._since.get(reader, started) > timeouts[reader] * 1e9:
                    self._up[reader] = False
                    self._on_link(self.readers[reader], LinkStatus(f"scanner:{reader}", False,
                                                                   "not heard since start"))
                elif up and seen is not None and now - seen > timeouts[reader] * 1e9:
                    self._up[reader] = False
                    self._on_link(self.readers[reader], LinkStatus(f"scanner:{reader}", False, "heartbeat timeout"))
