"""The one stream of scan inputs the backend consumes.

Both transports (serial frames from a shoe scanner, in whichever protocol the shoe speaks:
drivers/codecs/, and MQTT from a scanner gateway) reduce what they receive to
:class:`ScanInput` values and link state to :class:`LinkStatus`, so the round logic is
written once and never knows which wire a card came over.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ScanKind(StrEnum):
    """What a scan input says about the card the dealer just passed over the reader."""

    OK = "OK"  # a valid read: code is set
    NOREAD = "NOREAD"
    MISREAD = "MISREAD"
    CORRUPT = "CORRUPT"  # a frame arrived damaged (bad CRC, bad grammar, torn): the read is unknown
    LOST = "LOST"  # sequence gap: one or more scan-result frames never arrived
    FAULT = "FAULT"  # device fault reported by the reader (detail = fault code)
    FORGED = "FORGED"  # a frame failed authentication (bad/missing MAC, replay): never a card


@dataclass(frozen=True, slots=True)
class ScanInput:
    """One scan outcome; only ``OK`` carries a card code, everything else means "rescan"."""

    reader: str
    kind: ScanKind
    code: str | None = None  # only for OK
    detail: str = ""  # human-readable: why corrupt, fault code, missing seq range ...
    seq: int | None = None
    received_ns: int = 0  # time.monotonic_ns() when the bytes arrived (latency metric)
    reason: str = ""  # FORGED: bad_mac, missing_mac, replayed_seq or replayed_boot (a metric label)
    burn: bool = False  # OK only: the reader says the card was burned, not dealt (drivers.codecs.beetek)


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """A transport's link went up or down (``reason`` says why, for logs and operators)."""

    link: str  # e.g. "serial:/dev/ttyUSB0" or "scanner:SC1"
    up: bool
    reason: str = ""
