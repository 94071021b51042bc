"""A virtual dealing shoe whose card reader speaks the scanner frame protocol.

:class:`VirtualShoe` produces the exact bytes a reader would put on the wire, including
the ways a real line fails (noise, torn and damaged frames, lost frames, retransmissions).
It does no IO: write its bytes to a :class:`~simulators.pty_port.PtyPort` (or anywhere).
Given a ``key`` it signs every frame (HMAC-SHA256, docs/scanner-protocol.md §6) and raises its
boot counter at every :meth:`VirtualShoe.boot`; :meth:`VirtualShoe.forged` and
:meth:`VirtualShoe.replayed_old` then play the attacker on the line.
:class:`FaultPlan` decides, per physical pass of a card over the reader, which fault
happens, so scenario tests and the demo can inject faults reproducibly from a seed.
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from drivers.frames import SEQ_MOD, Frame, Status, encode_frame

_NOISE = bytes(b for b in range(256) if b != ord("$"))  # noise never starts a frame
FAULTS = ("noread", "misread", "garbage", "torn", "bad_crc", "drop", "repeat")


def shuffled(deck: Iterable[str], rng: random.Random) -> list[str]:
    """A shuffled copy of ``deck``; the caller's seeded ``rng`` makes it reproducible."""
    cards = list(deck)
    rng.shuffle(cards)
    return cards


class VirtualShoe:
    """A shoe with a reader: a deck of card codes, a reader id and the reader's seq counter.

    Each method returns the bytes the reader sends for that event. Scan results advance
    the counter exactly as firmware would, including the faulty ones (the reader did send
    the frame; it is the line that lost or damaged it).

    With a ``key`` every frame is signed with the current ``boot_count``, which
    :meth:`boot` raises first, like firmware keeping the counter in non-volatile memory.
    """

    def __init__(self, reader: str = "SC1", deck: Iterable[str] = (), *,
                 firmware: str = "sim-1.0", key: bytes | None = None, boot_count: int = 0) -> None:
        self.reader = reader
        self.deck: list[str] = list(deck)
        self.firmware = firmware
        self.key = key
        self.boot_count = boot_count
        self.seq = 0
        self._last_result: bytes | None = None
        self._results: deque[bytes] = deque(maxlen=64)  # scan-result frames sent, oldest first
        self._boots: deque[bytes] = deque(maxlen=8)  # BOOT frames sent, oldest first

    def next_card(self) -> str:
        """Take the next card off the top of the deck."""
        if not self.deck:
            raise IndexError("the shoe is empty")
        return self.deck.pop(0)

    def _frame(self, status: Status, payload: str = "") -> bytes:
        frame = Frame(self.reader, self.seq, status, payload)
        return encode_frame(frame if self.key is None else frame.sign(self.key, self.boot_count))

    def _result(self, status: Status, payload: str = "") -> bytes:
        self.seq = (self.seq + 1) % SEQ_MOD
        self._last_result = self._frame(status, payload)
        self._results.append(self._last_result)
        return self._last_result

    # --- what a healthy reader sends ---------------------------------------------------

    def boot(self) -> bytes:
        """Power-up: announces the firmware and resets the counter to 0 (a signing reader
        also raises its boot counter)."""
        self.seq, self._last_result = 0, None
        if self.key is not None:
            self.boot_count = (self.boot_count + 1) % SEQ_MOD
        frame = self._frame(Status.BOOT, self.firmware)
        self._boots.append(frame)
        return frame

    def heartbeat(self) -> bytes:
        """Idle keep-alive carrying the last used seq (lets the backend see lost frames)."""
        return self._frame(Status.HB)

    def scan(self, code: str) -> bytes:
        return self._result(Status.OK, code)

    def noread(self) -> bytes:
        return self._result(Status.NOREAD)

    def misread(self, raw: str = "??") -> bytes:
        return self._result(Status.MISREAD, raw)

    def fault(self, code: str) -> bytes:
        return self._result(Status.FAULT, code)

    # --- what the line does to it ------------------------------------------------------

    @staticmethod
    def garbage(n: int, rng: random.Random) -> bytes:
        """``n`` bytes of line noise without a '$' (so it never looks like a frame start)."""
        return bytes(rng.choice(_NOISE) for _ in range(n))

    def torn(self, code: str, keep: int | None = None) -> bytes:
        """An OK frame cut after ``keep`` bytes (default: half); the rest is never sent.
        The backend notices when the next frame's '$' arrives."""
        full = self.scan(code)
        keep = len(full) // 2 if keep is None else keep
        if not 1 <= keep < len(full) - 1:
            raise ValueError(f"keep must be 1..{len(full) - 2}, got {keep}")
        return full[:keep]

    def bad_crc(self, code: str) -> bytes:
        """An OK frame whose checksum got a flipped bit on the wire."""
        full = self.scan(code)
        star = full.index(b"*")
        crc = int(full[star + 1 : star + 5], 16) ^ 0x0001
        return full[: star + 1] + f"{crc:04X}".encode("ascii") + b"\r\n"

    def dropped(self, code: str) -> bytes:
        """The reader sent an OK frame that the line lost entirely: consumes a seq, no bytes."""
        self.scan(code)
        return b""

    def repeated(self) -> bytes:
        """A verbatim retransmission of the last scan-result frame (harmless by design)."""
        if self._last_result is None:
            raise RuntimeError("nothing to repeat: no scan-result frame since boot")
        return self._last_result

    # --- what an attacker on the line sends (the reader's counter does not move) ------------

    def forged(self, code: str, seq: int | None = None) -> bytes:
        """An OK frame for ``code`` the reader never sent, with a well-formed MAC under a wrong
        key and a valid CRC: by default it claims the seq the reader will use next, so it
        tries to pre-empt the next genuine card."""
        wrong = hashlib.sha256(b"not the key" + (self.key or b"")).digest()
        frame = Frame(self.reader, (self.seq + 1) % SEQ_MOD if seq is None else seq, Status.OK, code)
        return encode_frame(frame.sign(wrong, self.boot_count))

    def replayed_old(self, n: int = 1) -> bytes:
        """A verbatim copy of the scan-result frame sent ``n`` results before the last one
        (``n=0`` would be the last: a harmless repeat), possibly from an earlier boot."""
        if not 1 <= n < len(self._results):
            raise IndexError(f"no scan result {n} before the last one ({len(self._results)} kept)")
        return self._results[-1 - n]

    def replayed_boot(self) -> bytes:
        """A verbatim copy of the previous BOOT frame (the current one if it booted only once)."""
        if not self._boots:
            raise RuntimeError("nothing to replay: the reader never booted")
        return self._boots[-2] if len(self._boots) > 1 else self._boots[-1]


@dataclass(frozen=True, slots=True)
class CardPass:
    """The bytes of one physical pass and whether it registers the card at the backend.

    ``registers`` is False when the dealer must pass the card again (the backend will
    prompt a RESCAN, possibly only when the next frame or heartbeat reveals the loss).
    """

    fault: str  # "" for a clean read, otherwise one of FAULTS
    chunks: list[bytes]
    registers: bool


@dataclass
class ScriptedFaults:
    """Which fault happens on each pass of a card: ``script`` (fault names, "" for clean) is
    consumed first, one entry per pass; after it runs out each pass draws at most one fault
    with the probabilities of the subclass's fields named in ``FAULTS``. Shared by the shoes'
    fault plans (this module's native one, :mod:`simulators.beetek`)."""

    FAULTS: ClassVar[tuple[str, ...]] = ()
    script: Sequence[str] = ()
    garbage_len: int = 12
    _next: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        unknown = [f for f in self.script if f and f not in self.FAULTS]
        if unknown:
            raise ValueError(f"unknown faults in script: {unknown} (known: {', '.join(self.FAULTS)})")
        probs = [getattr(self, f) for f in self.FAULTS]
        if any(p < 0 for p in probs) or sum(probs) > 1:
            raise ValueError("fault probabilities must be >= 0 and sum to at most 1")

    def choose(self, rng: random.Random) -> str:
        if self._next < len(self.script):
            self._next += 1
            return self.script[self._next - 1]
        r = rng.random()
        for name in self.FAULTS:
            r -= getattr(self, name)
            if r < 0:
                return name
        return ""


@dataclass
class FaultPlan(ScriptedFaults):
    """Which fault happens on each pass of a card over the reader (:class:`ScriptedFaults`)."""

    FAULTS: ClassVar[tuple[str, ...]] = FAULTS
    noread: float = 0.0
    misread: float = 0.0
    garbage: float = 0.0
    torn: float = 0.0
    bad_crc: float = 0.0
    drop: float = 0.0
    repeat: float = 0.0

    def pass_card(self, shoe: VirtualShoe, code: str, rng: random.Random) -> CardPass:
        """The byte chunks for "the dealer passes card ``code`` over the reader" once."""
        fault = self.choose(rng)
        match fault:
            case "":
                return CardPass(fault, [shoe.scan(code)], True)
            case "noread":
                return CardPass(fault, [shoe.noread()], False)
            case "misread":
                return CardPass(fault, [shoe.misread()], False)
            case "garbage":  # noise is skipped; the frame after it still registers
                return CardPass(fault, [shoe.garbage(self.garbage_len, rng), shoe.scan(code)], True)
            case "torn":
                return CardPass(fault, [shoe.torn(code, rng.randint(1, 12))], False)
            case "bad_crc":
                return CardPass(fault, [shoe.bad_crc(code)], False)
            case "drop":
                shoe.dropped(code)
                return CardPass(fault, [], False)
            case "repeat":  # the retransmission is dropped: the card registers once
                return CardPass(fault, [shoe.scan(code), shoe.repeated()], True)
        raise AssertionError(fault)
