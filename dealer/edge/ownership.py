"""Which tables this node owns, and since when: the seam between the service and the leases.

The service never decides on its own which tables it runs. An :class:`Ownership` tells it:
it adopts the tables it is given (:meth:`Service.adopt`), drops those it loses
(:meth:`Service.drop`), stamps every journal batch with each table's epoch, and asks
:meth:`Ownership.valid` before it releases any effect of a table. Two implementations:

* :class:`StaticOwnership`: every configured table, for ever, at epoch 0 (the SQLite journal,
  one host: nobody else can take a table, so nothing ever moves);
* ``dealer.edge.leases.LeaseManager``: table leases in the PostgreSQL journal, renewed by this
  node, taken over by another when they expire; the database refuses a write of an older
  epoch (fencing), and :meth:`Ownership.check_now` re-reads the leases after such a refusal.

Every mode runs through the same code path: at start the service adopts what
:meth:`Ownership.held` says after :meth:`Ownership.start`, then :meth:`Ownership.run` adopts and
drops tables for as long as the service runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, runtime_checkable

#: ``adopt(table_id, epoch)``: the node now owns the table at ``epoch``.
Adopt = Callable[[str, int], Awaitable[None]]
#: ``drop(table_id, reason)``: the node no longer owns the table (``reason``: handover,
#: lease_lost, fenced, sigterm, ...).
Drop = Callable[[str, str], Awaitable[None]]
#: ``idle(table_id)``: the table is between rounds (a rebalance moves it only then). Asked only
#: while a handover of the table waits, so the service also holds the table's next round for a
#: few seconds from each ask: the round in play ends, no other begins, and the table moves.
Idle = Callable[[str], bool]

#: How the drop reasons of a clean handover begin ("handover to node-b", "shutdown"): while the
#: lease is still valid the table's retained catch-up state is marked stale first (the next
#: owner replaces it).
HANDOVER_REASONS = ("handover", "shutdown", "sigterm", "rebalance", "release")


@runtime_checkable
class Ownership(Protocol):
    """The tables this node owns (see the module docstring)."""

    async def start(self) -> None:
        """Join: after this, :meth:`held` names the tables to adopt at start-up."""

    async def run(self, adopt: Adopt, drop: Drop, idle: Idle) -> None:
        """Adopt and drop tables until cancelled."""

    def valid(self, table_id: str) -> bool:
        """Whether this node may act for the table now (local, monotonic check: no IO)."""

    def epoch(self, table_id: str) -> int | None:
        """The epoch the table is held at, or None when it is not held."""

    def held(self) -> dict[str, int]:
        """table id -> epoch of every table held now."""

    async def check_now(self) -> set[str]:
        """Re-read the leases (after the database fenced a write); drop the lost tables through
        ``drop`` and return them."""

    async def release_all(self) -> None:
        """Hand every table over at once (SIGTERM), after the service stopped taking input."""


class StaticOwnership:
    """Every configured table, for ever, at epoch 0: the SQLite journal on one host."""

    def __init__(self, tables: Iterable[str]) -> None:
        self._tables = {t: 0 for t in tables}

    async def start(self) -> None:
        return None

    async def run(self, adopt: Adopt, drop: Drop, idle: Idle) -> None:
        for tid, epoch in sorted(self._tables.items()):  # the start adopted them; adopt() is idempotent
            await adopt(tid, epoch)
        await asyncio.Event().wait()

    def valid(self, table_id: str) -> bool:
        return True

    def epoch(self, table_id: str) -> int | None:
        return self._tables.get(table_id)

    def held(self) -> dict[str, int]:
        return dict(self._tables)

    async def check_now(self) -> set[str]:
        return set()

    async def release_all(self) -> None:
        return None


__all__ = ["Adopt", "Drop", "HANDOVER_REASONS", "Idle", "Ownership", "StaticOwnership"]
