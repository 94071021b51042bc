"""Test harness: a service whose tables come and go. An ownership the test moves tables with by
hand, the service running on it, and a journal a test holds at a gate."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from dealer.edge.journal import Batch, Journal, OutboxRow
from dealer.edge.ownership import Adopt, Drop, Idle
from dealer.edge.service import Service


@contextlib.asynccontextmanager
async def running(service: Service) -> AsyncIterator[None]:
    """The service running (ready) for the block, stopped after it whatever happens."""
    task = asyncio.create_task(service.run())
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class ManualOwnership:
    """The ownership seam driven by the test: tables held at an epoch, leases made invalid or
    lost by hand; ``check_now`` drops the lost ones through the service's ``drop``."""

    def __init__(self, tables: Iterable[str], epoch: int = 1) -> None:
        self.epochs = {t: epoch for t in tables}
        self.invalid: set[str] = set()
        self.lose_on_check: set[str] = set()
        self.checks = 0
        self._drop: Drop | None = None

    async def start(self) -> None:
        return None

    async def run(self, adopt: Adopt, drop: Drop, idle: Idle) -> None:
        self._drop = drop
        await asyncio.Event().wait()

    def valid(self, table_id: str) -> bool:
        return table_id in self.epochs and table_id not in self.invalid

    def epoch(self, table_id: str) -> int | None:
        return self.epochs.get(table_id)

    def held(self) -> dict[str, int]:
        return dict(self.epochs)

    async def check_now(self) -> set[str]:
        self.checks += 1
        lost, self.lose_on_check = self.lose_on_check, set()
        for tid in sorted(lost):
            self.epochs.pop(tid, None)
            assert self._drop is not None
            await self._drop(tid, "fenced")
        return lost

    async def release_all(self) -> None:
        self.epochs.clear()


class GatedJournal(Journal):
    """The real SQLite journal, whose commits wait while ``gate`` is closed (a slow disk, a
    long queue: the commit loop is behind)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = asyncio.Event()
        self.gate.set()

    async def commit_async(self, batch: Batch) -> list[OutboxRow]:
        await self.gate.wait()
        return await asyncio.to_thread(self.commit, batch)  # in a thread, as the service's own commits
