"""A virtual Bee-Tek shoe: the ASCII elements the real one sends, and what goes wrong with them.

:class:`BeeTekShoe` returns the exact bytes of each event (drivers/codecs/beetek.py,
docs/scanner-protocol.md §10): a read, a burn, a failed read, an alarm, a hardware warning;
and the line's faults: noise, an element split across reads or several joined in one, a
read lost on the line or repeated. It does no IO: write its bytes to a
:class:`~simulators.pty_port.PtyPort`. It has no heartbeat and no boot announcement
(:meth:`BeeTekShoe.heartbeat` and :meth:`BeeTekShoe.boot` send nothing), so it can stand in
for :class:`~simulators.shoe.VirtualShoe` under a :class:`~simulators.station.VirtualDealer`,
with :class:`BeeTekFaultPlan` as its fault plan.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import ClassVar
from dataclasses import dataclass

from drivers.codecs.beetek import ALARM, BURN, CARDS, GAME
from simulators.shoe import CardPass, ScriptedFaults

_NOISE = bytes(b for b in range(256) if b not in b"[]<>")  # noise never opens or closes an element
FAULTS = ("failed", "alarm", "warning", "garbage", "split", "joined", "drop", "repeat")


class BeeTekShoe:
    """A Bee-Tek shoe with a deck of rulebook card codes (``"TS"``, ``"4H"``).

    ``ten`` is how the shoe spells the rank ten on the wire: ``"10"`` or ``"T"`` (both occur)."""

    def __init__(self, deck: Iterable[str] = (), *, ten: str = "10") -> None:
        if ten not in ("10", "T"):
            raise ValueError(f"ten must be '10' or 'T', not {ten!r}")
        self.deck: list[str] = list(deck)
        self.ten = ten
        self._last_read: bytes | None = None

    def next_card(self) -> str:
        """Take the next card off the top of the deck."""
        if not self.deck:
            raise IndexError("the shoe is empty")
        return self.deck.pop(0)

    # --- what the shoe sends ---------------------------------------------------------------

    @staticmethod
    def element(tag: str | None, body: str) -> bytes:
        """One element as the shoe frames it: a space, ``[tag]<body>``, a space."""
        return (" " + (f"[{tag}]" if tag is not None else "") + f"<{body}> ").encode("ascii")

    def _wire(self, code: str) -> str:
        if code not in CARDS:
            raise ValueError(f"{code!r} is not a card a Bee-Tek shoe reads (rank 2-9, T, J, Q, K, A; suit C D H S)")
        return (self.ten if code[0] == "T" else code[0]) + code[1]

    def card(self, code: str) -> bytes:
        """A card read while dealing; a card the shoe cannot recognise (a joker, another deck's)
        is a failed read, as the real shoe reports it."""
        if code not in CARDS:
            return self.failed()
        self._last_read = self.element(GAME, f"Card:{self._wire(code)}")
        return self._last_read

    def burn(self, code: str) -> bytes:
        """A card read in the shoe's manual burn mode."""
        self._last_read = self.element(BURN, f"Card:{self._wire(code)}")
        return self._last_read

    def failed(self, *, burning: bool = False) -> bytes:
        """The shoe saw a card but could not read it."""
        return self.element(BURN if burning else GAME, "Game")

    def alarm(self, text: str = "E3 Card Not Read", *, tag: str = GAME) -> bytes:
        if tag not in (GAME, ALARM, BURN):
            raise ValueError(f"an alarm comes with [{GAME}], [{ALARM}] or [{BURN}], not [{tag}]")
        return self.element(tag, f"Alarm:{text}")

    @staticmethod
    def warning(code: int = 1) -> bytes:
        """A hardware warning, ``<W0x01>`` style (no tag)."""
        if not 0 <= code <= 0xFFFF:
            raise ValueError(f"warning code {code} must be 0..0xFFFF")
        return f"<W0x{code:02X}>".encode("ascii")

    @staticmethod
    def boot() -> bytes:
        return b""  # the shoe announces nothing at power-up

    @staticmethod
    def heartbeat() -> bytes:
        return b""  # and says nothing while idle: a quiet shoe and a dead one look the same

    # --- what the line does to it ----------------------------------------------------------

    @staticmethod
    def garbage(n: int, rng: random.Random) -> bytes:
        """``n`` bytes of line noise without a bracket (so it never looks like an element)."""
        return bytes(rng.choice(_NOISE) for _ in range(n))

    @staticmethod
    def split(data: bytes, rng: random.Random, pieces: int = 3) -> list[bytes]:
        """``data`` cut at random places into at most ``pieces`` chunks (separate reads)."""
        cuts = sorted({rng.randrange(1, len(data)) for _ in range(pieces - 1)}) if len(data) > 1 else []
        bounds = [0, *cuts, len(data)]
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def dropped(self, code: str) -> bytes:
        """The shoe read the card and the line lost it: nothing arrives, and nothing can tell."""
        self.card(code)
        return b""

    def repeated(self) -> bytes:
        """The last read again (line trouble or a firmware retry): to the backend, a second read."""
        if self._last_read is None:
            raise RuntimeError("nothing to repeat: no card read yet")
        return self._last_read


@dataclass
class BeeTekFaultPlan(ScriptedFaults):
    """Which fault happens on each pass of a card: ``script`` (fault names, "" for a clean
    read) first, then at most one fault per pass with the given probabilities.
    ``registers`` in the :class:`~simulators.shoe.CardPass` says whether the pass registers
    the card; for ``drop`` it is False and nothing tells the backend (docs/scanner-protocol.md §10.3)."""

    FAULTS: ClassVar[tuple[str, ...]] = FAULTS

    failed: float = 0.0
    alarm: float = 0.0
    warning: float = 0.0
    garbage: float = 0.0
    split: float = 0.0
    joined: float = 0.0
    drop: float = 0.0
    repeat: float = 0.0

    def pass_card(self, shoe: BeeTekShoe, code: str, rng: random.Random) -> CardPass:
        """The byte chunks for "the dealer passes card ``code`` out of the shoe" once."""
        fault = self.choose(rng)
        match fault:
            case "":
                return CardPass(fault, [shoe.card(code)], True)
            case "failed":
                return CardPass(fault, [shoe.failed()], False)
            case "alarm":
                return CardPass(fault, [shoe.alarm()], False)
            case "warning":  # a warning changes nothing: the read after it registers
                return CardPass(fault, [shoe.warning(rng.randrange(1, 16)), shoe.card(code)], True)
            case "garbage":
                return CardPass(fault, [shoe.garbage(self.garbage_len, rng), shoe.card(code)], True)
            case "split":
                return CardPass(fault, shoe.split(shoe.card(code), rng), True)
            case "joined":  # a warning, the read and another warning arrive in one read
                return CardPass(fault, [shoe.warning(1) + shoe.card(code) + shoe.warning(2)], True)
            case "drop":
                return CardPass(fault, [shoe.dropped(code)], False)
            case "repeat":  # the second copy is a duplicate to the table, refused there
                read = shoe.card(code)
                return CardPass(fault, [read, read], True)
        raise AssertionError(fault)
