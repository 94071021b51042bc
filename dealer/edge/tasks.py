"""Fire-and-forget tasks of the service (a publish, an anchor, an acknowledgement looked up):
kept referenced until they are done, so none is collected half-way."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class TaskSet:
    """The service's fire-and-forget tasks, each kept until it is done."""

    def __init__(self) -> None:
        self.running: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a fire-and-forget coroutine (a publish), kept referenced until it is done."""
        task = asyncio.create_task(coro)
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        return task
