"""The values every journal takes and gives, whatever holds it (dealer/edge/journal_contract.py):
a batch to commit, the rows and outbox rows it reads back, the reports of its chain checks, and
the journal id that names it. Plain records: no IO, so a backend, a tool or a test imports them
without importing a backend."""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass, field

from dealer.core import round_ids
from dealer.core.commands import StoredCommand
from dealer.core.events import Event
from drivers.frames import ReaderState

GENESIS = "0" * 64

#: A journal id is the series of its round ids (:mod:`dealer.core.round_ids`).
JOURNAL_ID = re.compile(rf"^{round_ids.SERIES}$")


def new_journal_id() -> str:
    """5 random bytes from the OS CSPRNG, base32 lowercase without padding: 8 characters
    that are safe in a round id, a topic-free key and a file name (40 bits: two journals of
    one table collide with probability ~1e-12)."""
    return base64.b32encode(secrets.token_bytes(5)).decode("ascii").lower()



@dataclass(frozen=True, slots=True)
class JournalRow:
    """One journal row as stored (its place in the hash chain included)."""


    id: int
    table_id: str
    round_id: str | None
    type: str
    body: str
    recorded_at: int
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    rows: int
    ok: bool
    first_broken: int | None = None  # id of the first row whose link does not hold
    reason: str = ""


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    key: str
    topic: str
    payload: bytes
    table_id: str
    round_id: str
    created_at: int = 0  # epoch ms the row was committed (the oldest-age metric)


def result_key(outbox_key: str) -> str:
    """The idempotency key of the result an outbox row belongs to (a part's key is
    ``{idempotency_key}#{part}/{parts}``)."""
    return outbox_key.split("#", 1)[0]


@dataclass(slots=True)
class Batch:
    """What one group commit writes: journal rows, new outbox rows, delivered outbox ids,
    acknowledged idempotency keys (every outbox row of the result goes), the accepted command
    ids (each with the index of its event in ``events``), and the latest state of signed
    scanner readers (one per reader; a later one replaces it)."""

    events: list[tuple[str, str | None, Event]] = field(default_factory=list)
    outbox: list[tuple[str, str, bytes, str, str]] = field(default_factory=list)  # key, topic, payload, table, round
    delivered: list[int] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    commands: list[tuple[StoredCommand, int]] = field(default_factory=list)
    readers: list[ReaderState] = field(default_factory=list)
    #: the lease epoch of each table with rows in the batch (PostgreSQL journal: every row
    #: carries it and the database refuses an epoch that is no longer the table's lease)
    epochs: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.events or self.outbox or self.delivered or self.acked or self.commands or self.readers)



@dataclass(slots=True)
class AuditReport:
    """What ``dealer audit verify`` found (the first problem only: after it nothing is known)."""

    rows: int = 0
    segments: int = 0
    anchors: int = 0  # anchors checked (the segments' and the given ones)
    ok: bool = True
    first_broken: int | None = None
    segment: int | None = None  # the segment the problem is in, when it is in one
    reason: str = ""
    uncommitted: list[str] = field(default_factory=list)

    def fail(self, reason: str, row: int | None = None, segment: int | None = None) -> "AuditReport":
        if self.ok:
            self.ok, self.reason, self.first_broken, self.segment = False, reason, row, segment
        return self


__all__ = ["GENESIS", "JOURNAL_ID", "AuditReport", "Batch", "ChainReport", "JournalRow", "OutboxRow",
           "new_journal_id", "result_key"]
