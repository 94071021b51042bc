"""Test harness: lease managers on a real PostgreSQL. Nodes with their own clocks (a clock
jump is a SIGSTOP as the process sees it), 1 s leases, and the SQL a test reads the leases
and writes the journal with."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dealer.edge.config import ClusterSection
from dealer.edge.leases import LeaseManager

SCHEMA = (Path(__file__).resolve().parent.parent / "dealer" / "edge" / "pg_schema.sql").read_text()
FAST = ClusterSection(lease_seconds=1.0, renew_seconds=0.25)
SIX = [f"t{i}" for i in range(1, 7)]
_sessions = itertools.count(1)


async def sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
        cur = await c.execute(query, params or None)
        return await cur.fetchall() if cur.description else []


async def with_schema(url: str) -> str:
    await sql(url, SCHEMA)
    return url


class Clock:
    """The node's monotonic clock; ``jump`` is a SIGSTOP as the process sees it."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


class Node:
    """A lease manager with recording callbacks, as the node runtime would wire it."""

    def __init__(self, url: str, name: str, tables: list[str] = SIX, cluster: ClusterSection = FAST,
                 preferred: dict[str, list[str]] | None = None, session: str | None = None, **kw: object) -> None:
        self.name = name
        self.m = LeaseManager(url, node_id=name, session=session or f"{name}-{next(_sessions)}", tables=tables,
                              preferred=preferred, cluster=cluster, **kw)  # type: ignore[arg-type]
        self.events: list[tuple[str, str, object]] = []  # ("adopt", table, epoch) / ("drop", table, reason)
        self.busy: set[str] = set()  # tables with a round in play
        self.idle_asked: list[str] = []
        self.dropped_busy: list[str] = []
        self.fail_adopt: set[str] = set()  # adopt raises once for these
        self.task: asyncio.Task[None] | None = None

    async def adopt(self, t: str, epoch: int) -> None:
        self.events.append(("adopt", t, epoch))
        if t in self.fail_adopt:
            self.fail_adopt.discard(t)
            raise RuntimeError(f"cannot replay {t}")

    async def drop(self, t: str, reason: str) -> None:
        if t in self.busy:
            self.dropped_busy.append(t)
        self.events.append(("drop", t, reason))

    def idle(self, t: str) -> bool:
        self.idle_asked.append(t)
        return t not in self.busy

    async def start(self) -> "Node":
        await self.m.start()
        self.task = asyncio.create_task(self.m.run(self.adopt, self.drop, self.idle))
        return self

    async def kill(self) -> None:
        """Stop without releasing anything (kill -9 as the others see it)."""
        assert self.task is not None
        self.task.cancel()
        done, _ = await asyncio.wait({self.task}, timeout=20)
        if not done:
            import sys
            for t in asyncio.all_tasks():
                t.print_stack(file=sys.stderr)
            raise AssertionError("run() did not end when cancelled")

    def drops(self, t: str | None = None) -> list[tuple[str, object]]:
        return [(x, r) for k, x, r in self.events if k == "drop" and (t is None or x == t)]

    def held(self) -> set[str]:
        return set(self.m.held())


@pytest.fixture
async def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for n in started:
        if n.task is not None and not n.task.done():
            await n.kill()
        await n.m.close()


async def start(nodes: list[Node], *args: object, **kw: object) -> Node:
    n = Node(*args, **kw)  # type: ignore[arg-type]
    nodes.append(n)
    return await n.start()


async def leases(url: str) -> dict[str, tuple[str | None, int]]:
    return {t: (n, e) for t, n, e in await sql(url, "SELECT table_id, node, epoch FROM leases")}


async def write_event(url: str, table: str, node: str, epoch: int) -> None:
    """A raw journal row as a node would write it: the fencing trigger decides."""
    await sql(url, "INSERT INTO events (table_id, seq, type, body, recorded_at, node, epoch, prev_hash, hash) "
                   "VALUES (%s, (SELECT count(*) + 1 FROM events WHERE table_id = %s), 'probe', '{}', 0, %s, %s, "
                   "'GENESIS', 'h')", (table, table, node, epoch))
