"""Scanner frame codec and per-reader sequence rules (sans-IO; see docs/scanner-protocol.md).

Wire format, one ASCII line per frame, optionally signed (HMAC-SHA256, per-device key)::

    $<reader>,<seq>,<status>,<payload>*<crc>\r\n
    $<reader>,<seq>,<status>,<payload>;<boot>;<mac>*<crc>\r\n

Four parts, none of which touches IO or a clock:

* :func:`encode_frame` / :func:`decode_frame`: one frame <-> one line, strict.
* :class:`FrameAuthenticator`: a reader's keys; checks a frame's MAC (any key: rotation).
* :class:`FrameDecoder`: a byte stream in arbitrary chunks -> frames and errors; it never
  raises, because a serial line delivers noise and the reader task must survive it.
* :class:`ReaderSession`: frames of one reader -> :class:`~drivers.scan.ScanInput`, applying
  the sequence rules (lost, repeated, restarted) that make a dropped frame visible and,
  with an authenticator, the replay rules (a signed frame from an older boot, a seq going
  backwards, an old BOOT) that make an injected frame a ``FORGED`` input instead of a card.
  Its :class:`ReaderState` (boot, seq) is what the backend journals so that these rules
  hold across a restart too (:meth:`ReaderSession.restore`).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

from drivers.scan import ScanInput, ScanKind

MAX_FRAME_LEN = 128  # bytes, from "$" to "\n" inclusive: the longest signed frame (unsigned: 52)
SEQ_MOD = 2**32
_SEQ_HALF = SEQ_MOD // 2  # serial-number arithmetic window (RFC 1982 style)

FAULT_CODES = frozenset({"JAM", "COVER_OPEN", "LAMP", "SENSOR", "OVERTEMP"})

_READER_RE = re.compile(r"[A-Z0-9-]{1,16}")
_SEQ_RE = re.compile(r"0|[1-9][0-9]{0,9}")
_CRC_RE = re.compile(r"[0-9A-F]{4}")
_MAC_RE = re.compile(r"[0-9a-f]{64}")
MIN_KEY_LEN = 16  # bytes; 32 random bytes are recommended


class Status(StrEnum):
    """Frame status. The first four are scan results and advance the sequence number."""

    OK = "OK"
    NOREAD = "NOREAD"
    MISREAD = "MISREAD"
    FAULT = "FAULT"
    HB = "HB"
    BOOT = "BOOT"

    @property
    def is_scan_result(self) -> bool:
        return self not in (Status.HB, Status.BOOT)


_PAYLOAD_RE: dict[Status, re.Pattern[str]] = {
    Status.OK: re.compile(r"[0-9A-Z]{2,4}"),
    Status.NOREAD: re.compile(r""),
    Status.MISREAD: re.compile(r"[0-9A-Z?]{0,8}"),
    Status.FAULT: re.compile("|".join(sorted(FAULT_CODES))),
    Status.HB: re.compile(r""),
    Status.BOOT: re.compile(r"[0-9A-Za-z.\-]{0,16}"),
}
_PAYLOAD_RULE = {
    Status.OK: "a card code [0-9A-Z]{2,4}",
    Status.NOREAD: "empty",
    Status.MISREAD: "raw reader text [0-9A-Z?]{0,8}",
    Status.FAULT: "one of " + ", ".join(sorted(FAULT_CODES)),
    Status.HB: "empty",
    Status.BOOT: "a firmware version [0-9A-Za-z.-]{0,16}",
}


class FrameError(ValueError):
    """A frame that cannot be trusted. ``reason`` is a short, low-cardinality category
    (``crc``, ``syntax``, ``torn``, ``overlong``, ``encoding``) for metrics; the message says
    exactly what is wrong; ``raw`` holds the offending bytes (at most one frame's worth)."""

    def __init__(self, message: str, *, reason: str = "syntax", raw: bytes = b"") -> None:
        super().__init__(message)
        self.reason = reason
        self.raw = raw


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, xorout 0)."""
    return binascii.crc_hqx(data, 0xFFFF)


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. Constructing it validates every field, so a Frame is always
    encodable and a bad one raises :class:`FrameError` at the place it was made."""

    reader: str
    seq: int
    status: Status
    payload: str = ""
    boot: int | None = None  # the reader's boot counter: set together with mac on signed frames
    mac: str | None = None  # HMAC-SHA256 over ``auth_data``, 64 lowercase hex digits

    def __post_init__(self) -> None:
        if not isinstance(self.reader, str) or not _READER_RE.fullmatch(self.reader):
            raise FrameError(f"reader id {self.reader!r} must match [A-Z0-9-]{{1,16}}")
        if type(self.seq) is not int or not 0 <= self.seq < SEQ_MOD:
            raise FrameError(f"seq {self.seq!r} must be an integer 0..{SEQ_MOD - 1}")
        try:
            status = Status(self.status)
        except ValueError:
            allowed = ", ".join(Status)
            raise FrameError(
                f"unknown status {self.status!r} (expected one of {allowed})") from None
        object.__setattr__(self, "status", status)
        if not isinstance(self.payload, str) or not _PAYLOAD_RE[status].fullmatch(self.payload):
            raise FrameError(
                f"{status} payload {self.payload!r} is invalid: must be {_PAYLOAD_RULE[status]}"
            )
        if status is Status.BOOT and self.seq != 0:
            raise FrameError(f"BOOT frame must carry seq 0, not {self.seq}")
        if (self.boot is None) != (self.mac is None):
            raise FrameError("a signed frame needs both a boot counter and a MAC")
        if self.boot is not None and (type(self.boot) is not int or not 0 <= self.boot < SEQ_MOD):
            raise FrameError(f"boot counter {self.boot!r} must be an integer 0..{SEQ_MOD - 1}")
        if self.mac is not None and (not isinstance(self.mac, str) or not _MAC_RE.fullmatch(self.mac)):
            raise FrameError(f"MAC {self.mac!r} must be 64 lowercase hex digits")

    @property
    def body(self) -> bytes:
        """The frame's content, ``reader,seq,status,payload`` (without the signature)."""
        return f"{self.reader},{self.seq},{self.status},{self.payload}".encode("ascii")

    @property
    def signed(self) -> bool:
        return self.mac is not None

    def sign(self, key: bytes, boot: int) -> "Frame":
        """This frame signed with ``key`` by a reader in its ``boot``-th boot."""
        return replace(self, boot=boot, mac=compute_mac(key, self.body, boot))


def compute_mac(key: bytes, body: bytes, boot: int) -> str:
    """HMAC-SHA256(key, ``body;boot``) as 64 lowercase hex digits (see the protocol doc, §6)."""
    return hmac.new(key, auth_data(body, boot), hashlib.sha256).hexdigest()


def auth_data(body: bytes, boot: int) -> bytes:
    """The bytes a MAC covers: the frame body, ';' and the boot counter in decimal."""
    return body + b";" + str(boot).encode("ascii")


def _inner(frame: Frame) -> bytes:
    """The checksummed bytes: everything between '$' and '*'."""
    if frame.mac is None:
        return frame.body
    assert frame.boot is not None  # a Frame with a MAC has its boot counter (checked in __post_init__)
    return auth_data(frame.body, frame.boot) + b";" + frame.mac.encode("ascii")


def encode_frame(frame: Frame) -> bytes:
    """The exact wire bytes of ``frame``, terminator included."""
    body = _inner(frame)
    line = b"$" + body + b"*" + f"{crc16(body):04X}".encode("ascii") + b"\r\n"
    if len(line) > MAX_FRAME_LEN:
        raise FrameError(f"encoded frame is {len(line)} bytes, over the {MAX_FRAME_LEN}-byte limit",
                         reason="overlong", raw=line)
    return line


def decode_frame(line: bytes) -> Frame:
    """Decode one line (``\\r\\n``, ``\\n`` or no terminator); raise :class:`FrameError`."""
    raw = bytes(line[:MAX_FRAME_LEN])
    if len(line) > MAX_FRAME_LEN:
        raise FrameError(f"frame is {len(line)} bytes, over the {MAX_FRAME_LEN}-byte limit",
                         reason="overlong", raw=raw)
    body = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
    for i, b in enumerate(body):
        if not 0x20 <= b <= 0x7E:
            raise FrameError(f"byte 0x{b:02X} at offset {i} is not printable ASCII",
                             reason="encoding", raw=raw)
    text = body.decode("ascii")
    if not text.startswith("$"):
        raise FrameError("frame must start with '$'", raw=raw)
    star = text.find("*")
    if star < 0:
        raise FrameError("no '*' before the checksum", raw=raw)
    inner, crc_text = text[1:star], text[star + 1 :]
    if not _CRC_RE.fullmatch(crc_text):
        raise FrameError(f"checksum {crc_text!r} must be 4 uppercase hex digits", raw=raw)
    computed, stated = crc16(inner.encode("ascii")), int(crc_text, 16)
    if computed != stated:
        raise FrameError(f"bad CRC: frame says {stated:04X}, computed {computed:04X}",
                         reason="crc", raw=raw)
    content, signed, trailer = inner.partition(";")
    boot: int | None = None
    mac: str | None = None
    if signed:
        boot_text, sep, mac = trailer.partition(";")
        if not sep:
            raise FrameError("a signature must be ';<boot>;<mac>'", raw=raw)
        if not _SEQ_RE.fullmatch(boot_text):
            raise FrameError(f"boot counter {boot_text!r} must be a decimal number without "
                             "leading zeros", raw=raw)
        if not _MAC_RE.fullmatch(mac):
            raise FrameError(f"MAC {mac!r} must be 64 lowercase hex digits", raw=raw)
        boot = int(boot_text)
    fields = content.split(",")
    if len(fields) != 4:
        raise FrameError(f"expected 4 comma-separated fields, got {len(fields)}", raw=raw)
    reader, seq_text, status, payload = fields
    if not _SEQ_RE.fullmatch(seq_text):
        raise FrameError(f"seq {seq_text!r} must be a decimal number without leading zeros",
                         raw=raw)
    try:
        return Frame(reader, int(seq_text), status, payload, boot, mac)  # type: ignore[arg-type]  # the status text: __post_init__ makes it a Status (a FrameError if unknown)
    except FrameError as err:
        raise FrameError(str(err), raw=raw) from None


class FrameDecoder:
    """Incremental stream decoder: bytes in any chunking -> frames and errors, never raises.

    It hunts for '$', collects up to '\\n', and decodes. A '$' inside a frame means the
    previous frame was torn (reported, then decoding restarts at the new '$'); a frame that
    passes :data:`MAX_FRAME_LEN` without '\\n' is reported once and skipped to the next '$'.
    Bytes outside any frame are only counted (``garbage_bytes``): a frame destroyed before
    its '$' still shows up as a sequence gap, so noise need not cost the dealer a rescan.
    """

    def __init__(self) -> None:
        self._buf: bytearray | None = None  # None: hunting for '$'
        self.garbage_bytes = 0

    def reset(self) -> None:
        """Forget a partial frame (the link was closed; its tail will never come)."""
        self._buf = None

    def feed(self, data: bytes) -> list[Frame | FrameError]:
        out: list[Frame | FrameError] = []
        pos, end = 0, len(data)
        while pos < end:
            if self._buf is None:
                start = data.find(b"$", pos)
                if start < 0:
                    self.garbage_bytes += end - pos
                    break
                self.garbage_bytes += start - pos
                self._buf = bytearray(b"$")
                pos = start + 1
                continue
            nl, dollar = data.find(b"\n", pos), data.find(b"$", pos)
            stop = min((i for i in (nl, dollar) if i >= 0), default=end)
            room = MAX_FRAME_LEN - 1 - len(self._buf)  # bytes allowed before the '\n'
            if stop - pos > room:
                raw = bytes(self._buf + data[pos : pos + room + 1])
                out.append(FrameError(f"no end of frame within {MAX_FRAME_LEN} bytes",
                                      reason="overlong", raw=raw))
                self._buf, pos = None, pos + room + 1
            elif stop == nl:
                line = bytes(self._buf + data[pos : nl + 1])
                self._buf, pos = None, nl + 1
                try:
                    out.append(decode_frame(line))
                except FrameError as err:
                    out.append(err)
            elif stop == dollar:
                raw = bytes(self._buf + data[pos:dollar])
                out.append(FrameError(f"torn frame: a new '$' arrived after {len(raw)} bytes "
                                      "without an end of line", reason="torn", raw=raw))
                self._buf, pos = None, dollar
            else:
                self._buf += data[pos:end]
                pos = end
        return out


class AuthFailure(NamedTuple):
    """Why a frame is rejected as forged: ``reason`` is a metric label (``bad_mac``,
    ``missing_mac``, ``replayed_seq``, ``replayed_boot``), ``detail`` says it for people."""

    reason: str
    detail: str


def key_fingerprint(key: bytes) -> str:
    """A short public name for a key (16 hex digits of a domain-separated SHA-256): what the
    journal stores to say which key signed a reader's last frame, never the key itself."""
    return hashlib.sha256(b"studio.v1.scanner-key\x00" + key).hexdigest()[:16]


class FrameAuthenticator:
    """One reader's HMAC keys and whether it must sign (pure: no IO).

    A signed frame is genuine when its MAC matches under *any* of ``keys``: during a key
    rotation the backend holds the old and the new key (protocol doc, §6.4). ``verified``
    counts, per key, the frames it verified, so an operator can see when the old key has
    stopped being used; ``last_key`` is the index of the key that verified the latest one.
    """

    def __init__(self, keys: Sequence[bytes], require: bool = False) -> None:
        if not keys:
            raise ValueError("a frame authenticator needs at least one key")
        for i, key in enumerate(keys):
            if len(key) < MIN_KEY_LEN:
                raise ValueError(f"key #{i + 1} is {len(key)} bytes; at least {MIN_KEY_LEN} are "
                                 "needed (32 random bytes are recommended)")
        self.keys = [bytes(k) for k in keys]
        self.fingerprints = [key_fingerprint(k) for k in self.keys]
        self.require = require
        self.verified = [0] * len(self.keys)
        self.last_key: int | None = None

    def rekey(self, keys: Sequence[bytes]) -> None:
        """Hold ``keys`` from now on (a reload: a rotation adds the new key, later drops the old);
        a kept key keeps its count. The reader's replay protection is the decoder's, untouched."""
        fresh = FrameAuthenticator(keys, self.require)  # the same checks as at start-up
        counts = dict(zip(self.fingerprints, self.verified))
        self.keys, self.fingerprints = fresh.keys, fresh.fingerprints
        self.verified = [counts.get(fp, 0) for fp in self.fingerprints]
        self.last_key = None

    def verify(self, frame: Frame) -> AuthFailure | None:
        """None when ``frame`` may be used (genuine, or unsigned and signing not required)."""
        if frame.mac is None or frame.boot is None:
            if self.require:
                return AuthFailure("missing_mac", "missing MAC: this reader must sign its frames")
            return None
        for i, key in enumerate(self.keys):
            if hmac.compare_digest(compute_mac(key, frame.body, frame.boot), frame.mac):
                self.verified[i] += 1
                self.last_key = i
                return None
        return AuthFailure("bad_mac", f"bad MAC: not signed with any of the reader's {len(self.keys)} "
                                      f"key{'s' if len(self.keys) > 1 else ''}")


def error_input(reader: str, err: FrameError, received_ns: int) -> ScanInput:
    """The CORRUPT input for a frame that arrived damaged: its read is unknown."""
    return ScanInput(reader=reader, kind=ScanKind.CORRUPT, detail=str(err),
                     received_ns=received_ns)


_KIND = {Status.OK: ScanKind.OK, Status.NOREAD: ScanKind.NOREAD,
         Status.MISREAD: ScanKind.MISREAD, Status.FAULT: ScanKind.FAULT}


def _seq_range(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}..{last}"


@dataclass(frozen=True, slots=True)
class ReaderState:
    """What a signed reader's session must remember across a backend restart (protocol doc
    §6.5): its current ``boot``, the last used ``seq`` of that boot, ``key`` (the fingerprint of
    the key that verified its last signed frame: a reader given a new key may restart its boot
    counter, §6.4), and ``mac``, the MAC of the last scan result when its seq is ``seq`` (so an
    exact retransmission of it stays a harmless repeat, and other content at that seq a replay)."""

    reader: str
    boot: int
    seq: int
    key: str
    mac: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reader, str) or not _READER_RE.fullmatch(self.reader):
            raise ValueError(f"reader id {self.reader!r} must match [A-Z0-9-]{{1,16}}")
        for name in ("boot", "seq"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value < SEQ_MOD:
                raise ValueError(f"reader {self.reader!r}: {name} {value!r} must be an integer 0..{SEQ_MOD - 1}")
        if not isinstance(self.key, str) or not re.fullmatch(r"[0-9a-f]{16}", self.key):
            raise ValueError(f"reader {self.reader!r}: key fingerprint {self.key!r} must be 16 lowercase hex digits")
        if self.mac is not None and (not isinstance(self.mac, str) or not _MAC_RE.fullmatch(self.mac)):
            raise ValueError(f"reader {self.reader!r}: MAC {self.mac!r} must be 64 lowercase hex digits")


class ReaderSession:
    """Sequence rules for one reader id (see "Sequence rules" in the protocol doc).

    ``last_seq`` is the highest sequence number known to be used (``None`` until the first
    frame: a session that starts mid-stream cannot know what came before).

    With an authenticator (``auth``) every frame's MAC is checked first, and a correctly signed
    frame must also be *new* (protocol doc, §6.3): its boot counter may not be below
    ``boot`` (the reader's current boot, learnt from its signed frames), a BOOT must raise
    it, and within one boot the seq may not go backwards nor a seq be reused with other
    content (an exact copy of the last scan result stays a harmless repeat). A frame that
    fails becomes one ``FORGED`` input and changes nothing else, not even liveness.

    :attr:`state` is what these rules need to survive a backend restart; the backend journals
    it with the reads of the frames it covers and gives it back to the new session with
    :meth:`restore`, so a frame recorded before the restart is as old afterwards as before.
    """

    def __init__(self, reader: str, auth: FrameAuthenticator | None = None) -> None:
        self.reader = reader
        self.auth = auth
        self.boot: int | None = None  # the reader's boot counter, from its last signed frame
        self.key: str | None = None  # fingerprint of the key that verified its last signed frame
        self.forged = 0
        self.last_seq: int | None = None
        self._last_result: Frame | None = None
        self._restored_last: tuple[int, int, str] | None = None  # (boot, seq, MAC) of the last scan result before a restart
        self._lost_tail: int | None = None  # last seq of the latest LOST report
        self.repeats = 0
        self.restarts = 0
        self.boots = 0
        self.lost = 0
        self.late = 0
        self.firmware = ""
        self.last_heartbeat_ns: int | None = None
        self.last_seen_ns: int | None = None

    def accept(self, frame: Frame, received_ns: int) -> list[ScanInput]:
        if frame.reader != self.reader:
            raise ValueError(f"frame from {frame.reader!r} given to the session of {self.reader!r}")
        new_boot = False  # a signed frame of a later boot whose BOOT never arrived
        if self.auth is not None:
            failure = self.auth.verify(frame)
            if failure is None and frame.boot is not None:
                failure = self._replayed(frame)
            if failure is not None:
                self.forged += 1
                return [ScanInput(self.reader, ScanKind.FORGED, seq=frame.seq, detail=failure.detail,
                                  reason=failure.reason, received_ns=received_ns)]
            if frame.boot is not None:
                new_boot = self.boot is not None and frame.boot > self.boot
                self.boot = frame.boot
                if self.auth.last_key is not None:
                    self.key = self.auth.fingerprints[self.auth.last_key]
        self.last_seen_ns = received_ns
        if frame.status is Status.BOOT:
            self.boots += 1
            self.firmware = frame.payload
            self.last_seq, self._last_result, self._lost_tail = 0, None, None
            self._restored_last = None
            return []
        is_result = frame.status.is_scan_result
        if frame.status is Status.HB:
            self.last_heartbeat_ns = received_ns
        out: list[ScanInput] = []
        base = self.last_seq
        if new_boot:  # the reader restarted and its BOOT was lost: as if it had arrived
            self.restarts += 1
            base, self._last_result, self._lost_tail = 0, None, None
            self._restored_last = None
        elif base is not None:
            step = (frame.seq - base) % SEQ_MOD
            if step == 0 and is_result:
                if self._same_as_last(frame) is True:
                    self.repeats += 1
                    return []
                if frame.seq == self._lost_tail:
                    self.late += 1  # a heartbeat already reported this seq LOST
                    return []
                return [ScanInput(self.reader, ScanKind.CORRUPT, seq=frame.seq,
                                  received_ns=received_ns,
                                  detail=f"seq {frame.seq} already used, expected "
                                  f"{(base + 1) % SEQ_MOD}")]
            if step >= _SEQ_HALF:  # backwards without BOOT: the device restarted
                self.restarts += 1
                base = 0
        if base is not None:
            # a scan result should be base+1; a heartbeat repeats the last used seq
            last_missing = frame.seq - 1 if is_result else frame.seq
            missing = (last_missing - base) % SEQ_MOD
            if 0 < missing < _SEQ_HALF:
                first, self._lost_tail = (base + 1) % SEQ_MOD, last_missing % SEQ_MOD
                self.lost += missing
                out.append(ScanInput(self.reader, ScanKind.LOST, seq=first,
                                     received_ns=received_ns,
                                     detail=f"missing seq {_seq_range(first, self._lost_tail)}"))
        self.last_seq = frame.seq
        if is_result:
            self._last_result, self._restored_last = frame, None
            out.append(ScanInput(self.reader, _KIND[frame.status],
                                 code=frame.payload if frame.status is Status.OK else None,
                                 detail=frame.payload if frame.status is not Status.OK else "",
                                 seq=frame.seq, received_ns=received_ns))
        return out

    def _replayed(self, frame: Frame) -> AuthFailure | None:
        """Why a correctly signed frame is not new (a replay), or None."""
        boot, current = frame.boot, self.boot
        assert boot is not None
        if current is None:  # the reader's first signed frame ever (or since a re-key): nothing to judge
            return None
        if frame.status is Status.BOOT:
            if boot > current:
                return None
            return AuthFailure("replayed_boot", f"replayed boot {boot}: a BOOT must raise the boot "
                                                f"counter (current boot {current})")
        if boot != current:
            return None if boot > current else AuthFailure(
                "replayed_seq", f"replayed seq {frame.seq} of boot {boot} (current boot {current})")
        last = self.last_seq
        if last is None:
            return None
        step = (frame.seq - last) % SEQ_MOD
        if step >= _SEQ_HALF:
            return AuthFailure("replayed_seq", f"replayed seq {frame.seq}: seq went back from {last} "
                                               f"in boot {boot}")
        if step == 0 and frame.status.is_scan_result and self._same_as_last(frame) is False:
            return AuthFailure("replayed_seq", f"replayed seq {frame.seq}: already used in boot {boot} "
                                               "for another read")
        return None

    def _same_as_last(self, frame: Frame) -> bool | None:
        """Is ``frame`` the last scan result again (True) or another read at its seq (False)?
        None when no scan result is known at that seq. After a restart only the last result's
        MAC is known: a verified frame with the same MAC and boot is that frame."""
        prev = self._last_result
        if prev is not None:
            return frame == prev if prev.seq == frame.seq else None
        mark = self._restored_last
        if mark is not None and mark[1] == frame.seq:
            return (frame.boot, frame.mac) == (mark[0], mark[2])
        return None

    @property
    def state(self) -> ReaderState | None:
        """What to journal for this reader; None until a signed frame was accepted (and always
        without an authenticator: an unsigned reader has no boot counter to protect)."""
        if self.auth is None or self.boot is None or self.key is None or self.last_seq is None:
            return None
        mac: str | None = None
        prev, mark = self._last_result, self._restored_last
        if prev is not None:
            mac = prev.mac if prev.seq == self.last_seq else None
        elif mark is not None and mark[1] == self.last_seq:
            mac = mark[2]
        return ReaderState(self.reader, self.boot, self.last_seq, self.key, mac)

    def restore(self, state: ReaderState) -> bool:
        """Continue, in a new backend process, from the ``state`` journaled by the previous one:
        frames of an earlier boot, or older seqs of this boot, are then replays, exactly as they
        would have been without the restart. Call it before the first frame.

        Returns False, changing nothing, when ``state`` cannot apply: no authenticator, another
        reader, or it was signed with a key that is no longer configured (the reader was given
        a new key, which may come with a new boot counter: protocol doc §6.4)."""
        if self.auth is None or state.reader != self.reader or state.key not in self.auth.fingerprints:
            return False
        self.boot, self.last_seq, self.key = state.boot, state.seq, state.key
        self._last_result, self._lost_tail = None, None
        self._restored_last = (state.boot, state.seq, state.mac) if state.mac is not None else None
        return True
