"""Fair random draws: everything the rulebook draws "at random" comes from one secret per round.

The service takes :data:`DRAW_BYTES` bytes from the operating system's CSPRNG when a round
opens and journals them, as hex, in ``OpenRound.draw``. The pure core never draws: each game
derives what it needs from that secret here, deterministically and by label (HMAC-SHA256
keyed with the draw), so a replay of the journal gives the same answers, while nothing
public (round ids, hand numbers, earlier results) predicts them. A redeal or rematch that
ever needs a fresh draw derives it from the same secret under its own label.

Rounds journaled before draws existed carry no draw; their games fall back to the derivation
they were played with (see the games), because a round replays under the rules it was
played with.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Sequence
from typing import TypeVar

DRAW_BYTES = 32
DRAW_PATTERN = r"^[0-9a-f]{64}$"  # DRAW_BYTES as lowercase hex

T = TypeVar("T")


def _blocks(draw: str, label: str) -> Iterator[int]:
    """An endless stream of 256-bit integers derived from ``draw`` under ``label``."""
    key = bytes.fromhex(draw)
    counter = 0
    while True:
        yield int.from_bytes(hmac.new(key, f"{label}:{counter}".encode(), hashlib.sha256).digest(), "big")
        counter += 1


def index(draw: str, label: str, n: int) -> int:
    """A uniform index in ``range(n)``: rejection sampling, so no outcome is favoured (a
    plain ``x % n`` of a 256-bit value would favour the low outcomes, by about n / 2**256)."""
    if n < 1:
        raise ValueError(f"cannot draw among {n} outcomes")
    span = 1 << 256
    limit = span - span % n  # the largest multiple of n not above 2**256
    for x in _blocks(draw, label):
        if x < limit:
            return x % n
    raise AssertionError("unreachable")  # pragma: no cover


def choice(draw: str, label: str, options: Sequence[T]) -> T:
    """One of ``options``, each equally likely."""
    return options[index(draw, label, len(options))]


def seed(draw: str, label: str) -> int:
    """A 64-bit seed for a pseudo-random generator (the house AI's playouts)."""
    return next(_blocks(draw, label)) >> 192


def ai_seed(draw: str | None, round_id: str, turn: int, label: str) -> int:
    """The house AI's seed for one turn: from the round's secret draw, so its moves cannot be
    foreseen from the public round id; a round without a draw (journaled before draws) keeps
    the seed it was played with. ``label`` is the game's (``Game.house_seed_label``)."""
    if draw is None:
        return int.from_bytes(hashlib.sha256(f"{round_id}:{turn}".encode()).digest()[:8], "big")
    return seed(draw, f"{label}:{turn}")
