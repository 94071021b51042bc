"""``dealer bench latency --journal``: SQLite and PostgreSQL under the same load in one run.

A smoke run of a few seconds (the figures themselves are the benchmark's, never asserted):
both journals dealt every card the load generator sent, the PostgreSQL run as a node holding
the table's lease, with its own floor measured beside it."""

from __future__ import annotations

import pytest

from simulators.pgserver import PgServer
from tools.bench import run_latency_bench

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
async def test_both_journals_run_side_by_side_and_deal_every_card(pg_server: PgServer, pg: str):
    result = await run_latency_bench(tables=2, seconds=3.0, journal=pg)
    assert set(result["journals"]) == {"sqlite", "postgresql"}
    for name, run in result["journals"].items():
        assert run["cards"] > 0 and run["cards"] == run["scan_to_publish_ms"]["count"], (name, run)
        assert run["journal_commit_ms"]["commits"] > 0, (name, run)
    assert result["baseline"]["postgresql_commit_paced_ms"]["count"] == 30
    assert result["scan_to_publish_ms"] == result["journals"]["sqlite"]["scan_to_publish_ms"]
    # the PostgreSQL run journaled its rows under a lease (every row carries node and epoch)
    rows = pg_server.psql(pg.rsplit("/", 1)[1], "SELECT DISTINCT node, epoch > 0 FROM events")
    assert rows.split() == ["bench|t"]
