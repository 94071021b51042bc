"""The Bee-Tek dealing shoe's ASCII protocol (9600 baud, 8N1), as a codec.

The shoe sends one *element* per event, a tag in brackets then a body in angle brackets,
with a space before and after (docs/scanner-protocol.md §10)::

    [Game]<Card:4S>                 a card read (rank 2-9, T or 10, J, Q, K, A; suit C D H S)
    [Manual Burn Cards]<Card:4S>    a card read while the dealer burns: never dealt to a hand
    [Game]<Game>                    the shoe could not read the card
    [Game]<Alarm:E3 Card Not Read>  an alarm ([GameAlarm]<Alarm:...> too)
    <W0x01>                         a hardware warning (hex code): logged and counted only

There is no sequence number, no checksum, no reader id and no heartbeat: a lost element is
not noticed, a repeated one is a second read, a damaged one that still parses is believed,
and a silent shoe looks like a quiet one. :data:`CAPABILITIES` says so, and the backend asks
those, never this module's name.

:class:`ElementDecoder` cuts the byte stream (chunked anyhow) into elements and errors; its
memory is bounded by the longest element whatever arrives. :class:`BeeTekCodec` maps them
onto the backend's :class:`~drivers.scan.ScanInput` values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drivers.codecs import Capabilities, CodecSpec, Decoded, Notice, register
from drivers.scan import ScanInput, ScanKind

BAUDRATE = 9600
MAX_TAG = 24  # bytes between '[' and ']': the longest tag, "Manual Burn Cards", is 17
MAX_BODY = 48  # bytes between '<' and '>': an alarm's text is the longest body
MAX_ELEMENT = MAX_TAG + MAX_BODY + 4  # the most raw bytes an error ever carries

GAME, BURN, ALARM = "Game", "Manual Burn Cards", "GameAlarm"
TAGS = frozenset({GAME, BURN, ALARM})
RANKS = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "T", "J", "Q", "K", "A")
SUITS = ("C", "D", "H", "S")
#: Every card code the shoe can report, as the rulebook spells it (dealer/core/cards.py: "TS", never "10S").
CARDS = frozenset(("T" if r == "10" else r) + s for r in RANKS for s in SUITS)

_CARD = re.compile(r"Card:(10|[2-9TJQKA])([CDHS])")
_ALARM = re.compile(r"Alarm:([^<>\[\]]{1,40})")
_WARNING = re.compile(r"W0x([0-9A-Fa-f]{1,4})")
_SPACE = b" \t\r\n"
_START = re.compile(rb"[\[<]")
_IDLE, _TAG, _AFTER_TAG, _BODY, _SKIP = range(5)

CAPABILITIES = Capabilities(heartbeats=False, sequence_numbers=False, checksum=False, signing=False,
                            reader_ids=False, burn_reads=True, default_baudrate=BAUDRATE, cards=CARDS)


@dataclass(frozen=True, slots=True)
class Element:
    """One complete element: ``tag`` (None when the body came alone) and ``body``."""

    tag: str | None
    body: str

    @property
    def raw(self) -> bytes:
        return (f"[{self.tag}]" if self.tag is not None else "").encode("ascii") + b"<" + self.body.encode("ascii") + b">"


class ElementError(ValueError):
    """A damaged element: ``reason`` is a metric-style label (``torn``, ``overlong``,
    ``encoding``, ``syntax``), ``raw`` its bytes so far (at most :data:`MAX_ELEMENT`)."""

    def __init__(self, message: str, *, reason: str, raw: bytes) -> None:
        super().__init__(message)
        self.reason = reason
        self.raw = raw


class ElementDecoder:
    """Bytes in any chunking -> :class:`Element` and :class:`ElementError`; never raises.

    Between elements, blanks are separators and anything else is line noise, only counted
    (``garbage_bytes``). An element that breaks off (a new '[' inside it, or a '<' inside its
    body; a byte that is not printable ASCII; more than :data:`MAX_TAG` / :data:`MAX_BODY`
    bytes; a tag not followed by its body) is one error: the new element is read, or else the
    decoder skips to the damaged one's end ('>') or to the next '['. Every tag and body starts
    with a letter: a bracket followed by anything else opened nothing, it is noise (counted),
    not an error. Only the element being read is buffered, so memory stays bounded whatever
    arrives.
    """

    def __init__(self) -> None:
        self.garbage_bytes = 0
        self._state = _IDLE
        self._tag: str | None = None
        self._buf = bytearray()

    def reset(self) -> None:
        self._state, self._tag, self._buf = _IDLE, None, bytearray()

    def feed(self, data: bytes) -> list[Element | ElementError]:
        out: list[Element | ElementError] = []
        pos, end = 0, len(data)
        while pos < end:
            if self._state == _IDLE:  # fast path: hunt for the next element
                m = _START.search(data, pos)
                stop = m.start() if m else end
                self.garbage_bytes += len(data[pos:stop].translate(None, _SPACE))
                if m is None:
                    break
                self._open(data[stop], None)
                pos = stop + 1
                continue
            self._step(data[pos], out)
            pos += 1
        return out

    def _open(self, byte: int, tag: str | None) -> None:
        self._buf = bytearray()
        self._tag = tag
        self._state = _TAG if byte == 0x5B else _BODY  # '[' or '<'

    def _raw(self) -> bytes:
        if self._state == _TAG:
            return bytes(b"[" + self._buf)
        head = f"[{self._tag}]".encode("ascii") if self._tag is not None else b""
        return bytes(head + (b"<" + self._buf if self._state == _BODY else b""))

    def _fail(self, out: list[Element | ElementError], message: str, reason: str, byte: int | None) -> None:
        """Report the element being read as damaged; ``byte`` (the one that broke it) starts the
        next element when it is '[' or '<', else everything up to the next '>' or '[' is skipped."""
        out.append(ElementError(message, reason=reason, raw=self._raw()[:MAX_ELEMENT]))
        if byte in (0x5B, 0x3C):
            self._open(byte, None)
        elif byte == 0x3E:  # '>' ends the damaged element
            self._state = _IDLE
        else:
            self._state = _SKIP

    def _step(self, b: int, out: list[Element | ElementError]) -> None:
        state = self._state
        if state == _SKIP:
            if b == 0x5B:
                self._open(b, None)
            elif b == 0x3E:
                self._state = _IDLE
            return
        if state == _AFTER_TAG:
            if b == 0x3C:
                self._state, self._buf = _BODY, bytearray()
            else:
                self._fail(out, f"tag [{self._tag}] is not followed by '<'", "syntax", b)
            return
        if not self._buf and (state == _TAG or self._tag is None) and not (0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A):
            # every tag and body starts with a letter: this bracket was line noise, not an element
            self.garbage_bytes += 1
            self._state = _IDLE
            if b in (0x5B, 0x3C):
                self._open(b, None)
            elif b not in _SPACE:
                self.garbage_bytes += 1
            return
        if not 0x20 <= b <= 0x7E:
            self._fail(out, f"byte 0x{b:02X} inside an element is not printable ASCII", "encoding", None)
            return
        closing = 0x5D if state == _TAG else 0x3E  # ']' or '>'
        if b == closing:
            text = self._buf.decode("ascii")
            if state == _TAG:
                self._tag, self._state = text, _AFTER_TAG
            else:
                out.append(Element(self._tag, text))
                self._state = _IDLE
            return
        if b == 0x3C and state == _TAG:  # '<' in a tag: its ']' was lost; the rest is its body
            self._fail(out, f"tag [{self._buf.decode('ascii')} has no ']'", "syntax", None)
            return
        if b in (0x5B, 0x3C):  # '[' or '<': this element broke off, a new one starts
            self._fail(out, "torn element: a new element started before this one ended", "torn", b)
            return
        if b in (0x5D, 0x3E):  # the other closing bracket
            self._fail(out, f"unexpected {chr(b)!r} inside an element", "syntax", b)
            return
        limit = MAX_TAG if state == _TAG else MAX_BODY
        if len(self._buf) >= limit:
            self._fail(out, f"element part longer than {limit} bytes", "overlong", None)
            return
        self._buf.append(b)


class BeeTekCodec:
    """Elements of one shoe -> :class:`~drivers.scan.ScanInput` for ``reader`` (the frames name none).

    Counters: ``frames_ok`` (meaningful elements), ``frames_bad`` (damaged or meaningless
    ones: each became a CORRUPT input), ``warnings`` (hardware warnings), ``burns`` (burn card
    reads) and the decoder's ``garbage_bytes``. ``frames_forged`` is always 0: nothing is signed.
    """

    capabilities = CAPABILITIES

    def __init__(self, reader: str, *, auth: object = None) -> None:
        if auth is not None:
            raise ValueError("a Bee-Tek shoe cannot sign its frames: no HMAC keys for it")
        self.reader = reader
        self.decoder = ElementDecoder()
        self.frames_ok = 0
        self.frames_bad = 0
        self.frames_forged = 0
        self.warnings = 0
        self.burns = 0

    @property
    def garbage_bytes(self) -> int:
        return self.decoder.garbage_bytes

    def reset(self) -> None:
        self.decoder.reset()

    def feed(self, data: bytes, now_ns: int) -> Decoded:
        out = Decoded()
        for item in self.decoder.feed(data):
            if isinstance(item, ElementError):
                self._bad(out, f"damaged element ({item.reason}): {item}", item.raw, now_ns)
                continue
            meaning = interpret(item)
            if isinstance(meaning, str):
                self._bad(out, meaning, item.raw, now_ns)
                continue
            self.frames_ok += 1
            out.heard = True
            if isinstance(meaning, Notice):
                self.warnings += 1
                out.items.append(meaning)
                continue
            kind, code, detail = meaning
            burn = kind is ScanKind.OK and item.tag == BURN
            self.burns += burn
            out.items.append(ScanInput(self.reader, kind, code=code, detail=detail, received_ns=now_ns, burn=burn))
        return out

    def _bad(self, out: Decoded, detail: str, raw: bytes, now_ns: int) -> None:
        self.frames_bad += 1
        out.items.append(Notice("corrupt", detail, raw))
        out.items.append(ScanInput(self.reader, ScanKind.CORRUPT, detail=detail, received_ns=now_ns))


def interpret(element: Element) -> tuple[ScanKind, str | None, str] | Notice | str:
    """What an element means: (kind, card code, detail), a warning :class:`Notice`, or a
    string saying why it means nothing we may act on (a CORRUPT input)."""
    tag, body = element.tag, element.body
    warning = _WARNING.fullmatch(body)
    if warning is not None:  # with any tag or none: it changes nothing either way
        return Notice("device_warning", f"shoe warning W0x{warning.group(1).upper()}")
    if tag is not None and tag not in TAGS:
        return f"unknown tag [{tag}]"
    card = _CARD.fullmatch(body)
    if card is not None:
        if tag not in (GAME, BURN):
            return f"card read without a [{GAME}] or [{BURN}] tag" + (f" (tag [{tag}])" if tag else "")
        rank, suit = card.groups()
        return ScanKind.OK, ("T" if rank == "10" else rank) + suit, ""
    if body == "Game":
        if tag not in (GAME, BURN):
            return f"failed read without a [{GAME}] or [{BURN}] tag"
        return ScanKind.NOREAD, None, "the shoe could not read the card"
    alarm = _ALARM.fullmatch(body)
    if alarm is not None:
        if tag is None:
            return "alarm without a tag"
        return ScanKind.FAULT, None, f"shoe alarm: {alarm.group(1).strip()}"
    if body.startswith("Card:"):
        return "not a card: rank must be 2-9, T, 10, J, Q, K or A and suit C, D, H or S"
    return "unknown element body"


SPEC = register(CodecSpec(
    "beetek", "Bee-Tek shoe ASCII elements at 9600 baud: no sequence numbers, checksum, reader id or heartbeat",
    CAPABILITIES, BeeTekCodec))
