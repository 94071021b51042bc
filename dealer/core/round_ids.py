"""Round ids, made and read in this one place.

A round id is ``{table}-{series}-{seq:06d}``: the series is the journal id (8 base32
characters, :func:`dealer.edge.journal.new_journal_id`), so a new or re-installed journal
never repeats a round id, nor the idempotency keys built on it. Journals from before
journal ids (and pure core tests without one) have ``{table}-{seq:06d}``; both forms are
read everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A series (a journal id) as it stands in a round id.
SERIES = r"[a-z2-7]{8}"
#: What follows ``{table}-``: ``{series}-{seq}`` or ``{seq}``.
_TAIL = re.compile(rf"^(?:(?P<series>{SERIES})-)?(?P<seq>\d+)$")
#: The sequence number that ends a round id of either form, whatever the table.
_SEQ = re.compile(r"-(\d+)$")


@dataclass(frozen=True)
class RoundId:
    """A round id taken apart."""

    table_id: str
    series: str | None
    seq: int


def make(table_id: str, seq: int, series: str | None = None) -> str:
    """The id of round ``seq`` of ``table_id``, in journal ``series`` (None: the older form)."""
    if series is None:
        return f"{table_id}-{seq:06d}"
    return f"{table_id}-{series}-{seq:06d}"


def parse(round_id: str, table_id: str) -> RoundId | None:
    """``round_id`` taken apart if it is a round id of table ``table_id`` (either form), else None.

    The table is given because a table id may itself hold a ``-``.
    """
    prefix = f"{table_id}-"
    m = _TAIL.match(round_id[len(prefix):]) if round_id.startswith(prefix) else None
    if m is None:
        return None
    return RoundId(table_id, m.group("series"), int(m.group("seq")))


def sequence_of(round_id: str) -> int | None:
    """The sequence number that ends ``round_id`` (of any table, either form); None if none does."""
    m = _SEQ.search(round_id)
    return int(m.group(1)) if m else None
