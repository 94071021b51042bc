"""MQTT scanner ingest: the serial protocol's logical reads as schema-validated JSON.

A scanner gateway publishes one :class:`ScannerMessage` per frame on
``studio/v1/tables/{table}/scanner``. Each message is turned into the same
:class:`~drivers.frames.Frame` the serial codec produces and goes through the same
:class:`~drivers.frames.ReaderSession` sequence rules, so both transports feed one
stream of :class:`~drivers.scan.ScanInput`. Bad JSON, a schema violation or a reader
that does not belong to the topic's table is reported and changes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drivers.frames import Frame, FrameError, ReaderSession
from drivers.scan import LinkStatus, ScanInput


class ScannerMessage(BaseModel):
    """One scanner frame as JSON (the fields of the serial frame, no checksum: MQTT has its own)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    schema_id: Literal["studio.v1.scanner"] = "studio.v1.scanner"
    reader: str = Field(pattern=r"^[A-Z0-9-]{1,16}$")
    seq: int = Field(ge=0, le=2**32 - 1)
    status: Literal["OK", "NOREAD", "MISREAD", "FAULT", "HB", "BOOT"]
    payload: str = Field(default="", max_length=16, description="card code (OK), fault code (FAULT), raw text (MISREAD), firmware (BOOT)")

    def frame(self) -> Frame:
        return Frame(self.reader, self.seq, self.status, self.payload)  # type: ignore[arg-type]

    @classmethod
    def of(cls, frame: Frame) -> "ScannerMessage":
        return cls(reader=frame.reader, seq=frame.seq, status=frame.status.value, payload=frame.payload)  # type: ignore[arg-type]


class MqttScannerIngest:
    """Per-reader sessions and liveness for scanners that report over MQTT."""

    def __init__(self, readers: dict[str, str], *, on_input: Callable[[str, ScanInput], None],
                 on_link: Callable[[str, LinkStatus], None], on_bad: Callable[[str, str], None]) -> None:
        self.readers = dict(readers)  # reader id -> table id
        self._sessions = {r: ReaderSession(r) for r in readers}
        self._up: dict[str, bool] = {}
        self._on_input, self._on_link, self._on_bad = on_input, on_link, on_bad

    def handle(self, topic: str, payload: bytes) -> None:
        received = time.monotonic_ns()
        try:
            msg = ScannerMessage.model_validate_json(payload)
            frame = msg.frame()
        except (ValidationError, FrameError) as exc:
            self._on_bad("scanner", f"{topic}: {exc}".replace("\n", " "))
            return
        table = self.readers.get(msg.reader)
        if table is None or not topic.endswith(f"/tables/{table}/scanner"):
            self._on_bad("scanner", f"{topic}: reader {msg.reader} is not the scanner of this table")
            return
        if not self._up.get(msg.reader):
            self._up[msg.reader] = True
            self._on_link(table, LinkStatus(f"scanner:{msg.reader}", True, "frames arriving"))
        for inp in self._sessions[msg.reader].accept(frame, received):
            self._on_input(table, inp)

    async def watchdog(self, timeouts: dict[str, float], period: float = 0.25) -> None:
        """Mark a reader down when nothing (not even a heartbeat) arrived within its timeout."""
        while True:
            await asyncio.sleep(period)
            now = time.monotonic_ns()
            for reader, session in self._sessions.items():
                seen = session.last_seen_ns
                if self._up.get(reader) and seen is not None and now - seen > timeouts[reader] * 1e9:
                    self._up[reader] = False
                    self._on_link(self.readers[reader], LinkStatus(f"scanner:{reader}", False, "heartbeat timeout"))
