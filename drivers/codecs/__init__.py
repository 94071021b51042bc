"""Serial scanner protocols ("codecs"), chosen per reader by name: a vendor's shoe is one module.

A codec turns the byte stream of one serial reader into the values the backend already
consumes (:class:`~drivers.scan.ScanInput`, and for signing readers the
:class:`~drivers.frames.ReaderState` to journal), plus :class:`Notice` values that are only
logged and counted. It does no IO and reads no clock, so it is tested with plain calls.

What a protocol can and cannot tell the backend is declared once, in its
:class:`Capabilities`: the serial link, the service and the configuration consult those
(does the reader send heartbeats? may it sign?), never the protocol's name. Adding a vendor
means one module that defines its codec and calls :func:`register`, and its name in
:data:`_MODULES` below (docs/scanner-protocol.md says what to document for it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from drivers.frames import FrameAuthenticator, ReaderSession, ReaderState
from drivers.scan import ScanInput

#: The protocol a reader speaks when its configuration names none.
DEFAULT = "native"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a wire protocol lets the backend detect. Each False is a fault the backend cannot
    see with that reader (docs/scanner-protocol.md lists them per protocol)."""

    heartbeats: bool  # an idle reader proves it is alive: up only once heard, down when silent
    sequence_numbers: bool  # a lost or repeated frame is detected (LOST, repeat dropped)
    checksum: bool  # a damaged frame is detected (CORRUPT) instead of read as something else
    signing: bool  # frames may be authenticated (hmac_key_files, require_mac)
    reader_ids: bool  # frames name their reader: another reader's frames on the line are refused
    burn_reads: bool  # the reader reports a burn card apart from a dealt one
    default_baudrate: int
    #: the card codes the reader can report; None: any code (the table's deck decides)
    cards: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Notice:
    """Something a codec saw that is logged (rate-limited) and counted, never acted upon.

    ``kind`` is a low-cardinality label (``corrupt``, ``foreign``, ``forged``,
    ``device_warning``); ``message`` says it for people and never holds a whole raw frame;
    ``raw`` (at most one frame's worth) is for debug-level logs only."""

    kind: str
    message: str
    raw: bytes = b""


Output = ScanInput | ReaderState | Notice


@dataclass(slots=True)
class Decoded:
    """What one chunk of bytes produced, in arrival order, and whether the expected reader
    sent anything valid in it (a sign of life: the link's heartbeat deadline moves)."""

    items: list[Output] = field(default_factory=list)
    heard: bool = False


class StreamCodec(Protocol):
    """One reader's byte stream -> :class:`Decoded`; :meth:`feed` never raises."""

    capabilities: Capabilities
    frames_ok: int  # valid frames from the expected reader
    frames_bad: int  # damaged frames (and another reader's): each became a CORRUPT input
    frames_forged: int  # frames that failed authentication: each became a FORGED input

    @property
    def garbage_bytes(self) -> int:
        """Bytes outside any frame (line noise): counted, nothing else (read-only: the decoder counts)."""

    def feed(self, data: bytes, now_ns: int) -> Decoded: ...

    def reset(self) -> None:
        """Forget a partial frame: the link was closed and its tail will never come."""


class SequencedCodec(StreamCodec, Protocol):
    """A codec whose protocol has sequence numbers (``capabilities.sequence_numbers``): it keeps one
    :class:`~drivers.frames.ReaderSession` per reader."""

    sessions: dict[str, ReaderSession]

    def session(self, reader: str) -> ReaderSession: ...


#: ``factory(reader, auth=...)``: ``reader`` is the configured reader id (None: any, for
#: protocols whose frames name their reader); ``auth`` the reader's keys (signing protocols).
Factory = Callable[..., StreamCodec]


@dataclass(frozen=True, slots=True)
class CodecSpec:
    name: str
    summary: str  # one line for docs and error messages
    capabilities: Capabilities
    factory: Factory


_REGISTRY: dict[str, CodecSpec] = {}
#: Modules that register a codec when imported (a new vendor: one more entry).
_MODULES: Sequence[str] = ("drivers.codecs.native", "drivers.codecs.beetek")


def register(spec: CodecSpec) -> CodecSpec:
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"scanner protocol {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def _load() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def names() -> list[str]:
    _load()
    return sorted(_REGISTRY)


def codec(name: str) -> CodecSpec:
    """The registered protocol ``name``; ValueError naming the known ones otherwise."""
    _load()
    spec = _REGISTRY.get(name)
    if spec is None:
        raise ValueError(f"unknown scanner protocol {name!r} (known: {', '.join(sorted(_REGISTRY))})")
    return spec


def open_codec(name: str, reader: str | None, *, auth: FrameAuthenticator | None = None) -> StreamCodec:
    """A fresh codec for one reader. A protocol that cannot sign refuses keys, and one whose
    frames do not name their reader needs ``reader`` (ValueError, with the reason)."""
    spec = codec(name)
    if auth is not None and not spec.capabilities.signing:
        raise ValueError(f"scanner protocol {name!r} cannot authenticate frames: no HMAC keys for it")
    if reader is None and not spec.capabilities.reader_ids:
        raise ValueError(f"scanner protocol {name!r} frames do not name their reader: the reader id is needed")
    return spec.factory(reader, auth=auth)
