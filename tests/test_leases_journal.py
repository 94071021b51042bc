"""The lease manager follows the journal (dealer/edge/leases.py, ``watch_journal``): a node whose
journal has failed for a whole lease gives its tables up to the others, takes none meanwhile and
serves again once it can write. Real PostgreSQL, 1 s leases; the journal's health is what the
commit loop would report (seconds spent trying to write), driven by the test."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.conftest import wait_until
from tests.harness_leases import FAST, Node, leases, nodes, sql, start, with_schema, write_event

__all__ = ["nodes"]  # the fixture, imported for pytest

pytestmark = pytest.mark.integration

BOTH = {"t1": ["a", "b"], "t2": ["a", "b"]}  # placed on a while a serves


class Journal:
    """What node a's commit loop says: seconds since its failing commit began (0.0: it writes)."""

    def __init__(self) -> None:
        self.failing_since: float | None = None

    def __call__(self) -> float:
        return 0.0 if self.failing_since is None else time.monotonic() - self.failing_since


async def placement_passes(node: Node, n: int) -> None:
    """Wait until ``node`` has made ``n`` more placement passes (each reads the nodes and leases
    once: ``dealer_lease_statement_seconds{statement="read"}`` counts them)."""
    reads = node.m.metrics.statement.labels("read")
    before = _count(reads)
    await wait_until(lambda: _count(reads) >= before + n, what=f"{n} placement passes of {node.m.node_id}")


def _count(histogram: object) -> float:
    return sum(b.get() for b in histogram._buckets)  # type: ignore[attr-defined]  # prometheus-client's own


async def leaving(url: str, node: str) -> bool:
    return bool((await sql(url, "SELECT leaving FROM nodes WHERE node = %s", (node,)))[0][0])


async def test_a_node_whose_journal_fails_for_a_lease_gives_its_tables_up_and_serves_again(
        pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    journal = Journal()
    a = Node(url, "a", tables=["t1", "t2"], preferred=BOTH)
    a.m.watch_journal(journal)
    nodes.append(a)
    await a.start()
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes both")
    b = await start(nodes, url, "b", tables=["t1", "t2"], preferred=BOTH)
    before = a.m.held()

    journal.failing_since = time.monotonic()  # a's commits fail from now on
    await wait_until(lambda: b.held() == {"t1", "t2"}, what="b takes the tables a cannot write")
    assert a.held() == set() and not a.m.valid("t1")
    assert [r for _, r in a.drops()] == ["journal unwritable for longer than the lease"] * 2
    assert all(a.m.metrics.losses.labels(t, "journal_unwritable")._value.get() == 1 for t in before)
    assert await leases(url) == {t: ("b", e + 1) for t, e in before.items()}  # released and taken: next epoch
    assert await leaving(url, "a")  # nobody places a table on a meanwhile
    with pytest.raises(psycopg.Error) as refused:
        await write_event(url, "t1", "a", before["t1"])  # the database refuses a's old lease
    assert refused.value.sqlstate == "DL001"
    await placement_passes(a, 3)  # a takes nothing back while it cannot write
    assert a.held() == set() and not [e for e in a.events if e[0] == "adopt" and e[2] != before[e[1]]]

    journal.failing_since = None  # a writes again: it serves, and placement brings its tables back
    await wait_until(lambda: a.held() == {"t1", "t2"}, what="a takes its tables again")
    assert not await leaving(url, "a")
    assert {t: e for t, (_, e) in (await leases(url)).items()} == {t: e + 2 for t, e in before.items()}


async def test_a_node_takes_no_table_while_its_journal_is_failing(pg: str, nodes: list[Node]) -> None:
    url = await with_schema(pg)
    journal = Journal()
    journal.failing_since = time.monotonic() - FAST.renew  # failing for a renewal period already
    a = Node(url, "a", tables=["t1"])
    a.m.watch_journal(journal)
    nodes.append(a)
    await a.start()
    await placement_passes(a, 3)  # its first looks: the free table is not taken
    assert a.held() == set() and a.events == []
    journal.failing_since = None
    await wait_until(lambda: a.held() == {"t1"}, what="a takes the table once it writes")
