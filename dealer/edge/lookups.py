"""Journal lookups made for the event loop (a command id, an old acknowledgement): run in
threads of their own and bounded in time, never on the event loop: a database that stops
answering must not stop the node (it steps down)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dealer.edge.journal import JournalWriteFailed

T = TypeVar("T")
#: Seconds a journal server has to answer a lookup made for the event loop.
LOOKUP_TIMEOUT = 2.0


class Lookups:
    """Runs journal reads off the event loop within a bound. ``journal_name``: the journal,
    for the refusal's message."""

    def __init__(self, journal_name: str) -> None:
        self.journal_name = journal_name
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="journal-lookup")

    async def __call__(self, fn: Callable[..., T], *args: Any, timeout: float = LOOKUP_TIMEOUT) -> T:
        """``fn(*args)`` (a journal read) in the lookup threads, within ``timeout``; raises
        :class:`JournalWriteFailed` when the journal does not answer in time (the caller
        refuses: it cannot tell)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                return await loop.run_in_executor(self.pool, fn, *args)
        except TimeoutError:
            raise JournalWriteFailed(f"journal {self.journal_name}: no answer within {timeout:g} s",
                                     "database_timeout") from None

    def close(self) -> None:
        """At stop: one stuck on a silent database is left behind."""
        self.pool.shutdown(wait=False, cancel_futures=True)
