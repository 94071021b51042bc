"""The backend's own frame protocol (drivers/frames.py, docs/scanner-protocol.md §1-§8) as a codec.

Nothing of the protocol lives here: :class:`~drivers.frames.FrameDecoder` cuts the stream into
frames and :class:`~drivers.frames.ReaderSession` applies the sequence and replay rules. This
adapter only routes: frames of the expected reader to its session, another reader's frames
to a CORRUPT input, and every accepted change of a signed reader's boot and seq out as a
:class:`~drivers.frames.ReaderState` just before the inputs of the frame that moved it.
"""

from __future__ import annotations

from drivers.codecs import Capabilities, CodecSpec, Decoded, Notice, register
from drivers.frames import Frame, FrameAuthenticator, FrameDecoder, FrameError, ReaderSession, error_input
from drivers.scan import ScanInput, ScanKind

CAPABILITIES = Capabilities(heartbeats=True, sequence_numbers=True, checksum=True, signing=True,
                            reader_ids=True, burn_reads=False, default_baudrate=115200)


class NativeCodec:
    """Frames of one reader (``reader``; None accepts any reader id, one session each)."""

    capabilities = CAPABILITIES

    def __init__(self, reader: str | None = None, *, auth: FrameAuthenticator | None = None) -> None:
        self.expected_reader = reader
        self.auth = auth
        self.decoder = FrameDecoder()
        self.sessions: dict[str, ReaderSession] = {}
        self.frames_ok = 0
        self.frames_bad = 0
        self.frames_forged = 0
        self._reader_hint = reader or ""  # who a damaged frame is reported for

    @property
    def garbage_bytes(self) -> int:
        return self.decoder.garbage_bytes

    def session(self, reader: str) -> ReaderSession:
        """The session of ``reader`` (created on first use, with this codec's authenticator)."""
        session = self.sessions.get(reader)
        if session is None:
            session = self.sessions[reader] = ReaderSession(reader, self.auth)
        return session

    def reset(self) -> None:
        self.decoder.reset()

    def feed(self, data: bytes, now_ns: int) -> Decoded:
        out = Decoded()
        for item in self.decoder.feed(data):
            if isinstance(item, FrameError):
                self.frames_bad += 1
                out.items.append(Notice("corrupt", f"corrupt frame ({item.reason}): {item}", item.raw))
                out.items.append(error_input(self._reader_hint, item, now_ns))
            elif self.expected_reader is not None and item.reader != self.expected_reader:
                self.frames_bad += 1
                out.items += self._foreign(item, now_ns)
            else:
                self._accept(item, now_ns, out)
        return out

    def _accept(self, frame: Frame, now_ns: int, out: Decoded) -> None:
        session = self.session(frame.reader)
        before = session.state
        scans = session.accept(frame, now_ns)
        state = session.state
        if state is not None and state != before:
            out.items.append(state)  # journaled with (before) the inputs of the frame that moved it
        if scans and scans[0].kind is ScanKind.FORGED:
            self.frames_forged += 1
            out.items.append(Notice("forged", f"frame from {frame.reader} failed authentication: "
                                              f"{scans[0].detail}"))
        else:
            self.frames_ok += 1
            out.heard = True
            self._reader_hint = frame.reader
        out.items += scans

    def _foreign(self, frame: Frame, now_ns: int) -> list[Notice | ScanInput]:
        detail = f"frame from reader {frame.reader!r}, expected {self.expected_reader!r}"
        return [Notice("foreign", detail),
                ScanInput(self._reader_hint, ScanKind.CORRUPT, detail=detail, seq=frame.seq, received_ns=now_ns)]


SPEC = register(CodecSpec(
    "native", "the backend's frame protocol: sequence numbers, CRC-16, heartbeats, optional HMAC signatures",
    CAPABILITIES, NativeCodec))
