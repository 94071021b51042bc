"""``dealer cluster status|move|unpin`` against a real PostgreSQL journal, as the roles of
deploy/postgresql/roles.sql: an operator pins and unpins (recorded in the append-only
cluster_log), a node role cannot, and bad input is one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from dealer.cli.main import main
from dealer.edge.journal_pg import PgJournal
from simulators.broker import free_port
from simulators.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[1]


def sql(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def cluster(pg_server: PgServer, pg: str) -> dict[str, str]:
    PgJournal(pg, node_id="node-a").close()  # the owner creates the schema
    pg_server.psql(pg.rsplit("/", 1)[1], (ROOT / "deploy/postgresql/roles.sql").read_text())
    suffix = free_port()
    op, node = f"op_{suffix}", f"node_{suffix}"
    sql(pg, f"CREATE ROLE {op} LOGIN IN ROLE dealer_operator; CREATE ROLE {node} LOGIN IN ROLE dealer_node")
    sql(pg, "INSERT INTO nodes VALUES ('node-a', 's1', now(), now(), false), ('node-b', 's2', now(), now(), false)")
    sql(pg, "INSERT INTO leases VALUES ('T1', 'node-a', 3, now() + interval '1 hour', now()), "
            "('T2', 'node-b', 1, now() - interval '1 minute', now())")
    return {"owner": pg, "operator": pg.replace("postgres@", f"{op}@"), "node": pg.replace("postgres@", f"{node}@")}


def test_status_move_and_unpin_as_an_operator(cluster: dict[str, str], capsys: pytest.CaptureFixture[str]):
    url = cluster["operator"]
    assert main(["cluster", "status", "--journal", url, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [n["node"] for n in st["nodes"]] == ["node-a", "node-b"]
    by_table = {r["table"]: r for r in st["leases"]}
    assert by_table["T1"]["held"] and by_table["T1"]["epoch"] == 3 and by_table["T1"]["node"] == "node-a"
    assert not by_table["T2"]["held"] and st["unowned"] == ["T2"]
    assert main(["cluster", "status", "--journal", url]) == 0
    assert "T1" in capsys.readouterr().out

    assert main(["cluster", "move", "T1", "--to", "node-b", "--journal", url, "--reason", "maintenance of host a"]) == 0
    assert "hands it over" in capsys.readouterr().out
    assert sql(cluster["owner"], "SELECT node, reason FROM pins") == [("node-b", "maintenance of host a")]
    assert main(["cluster", "unpin", "T1", "--journal", url, "--reason", "host a is back"]) == 0
    assert sql(cluster["owner"], "SELECT count(*) FROM pins") == [(0,)]
    log = sql(cluster["owner"], "SELECT action, table_id, node, reason, by FROM cluster_log ORDER BY id")
    assert [r[:4] for r in log] == [("move", "T1", "node-b", "maintenance of host a"),
                                   ("unpin", "T1", "node-b", "host a is back")]
    assert all(str(r[4]).startswith("op_") for r in log)  # the operator's database role is recorded
    with pytest.raises(psycopg.DatabaseError, match="append-only"):
        sql(cluster["owner"], "DELETE FROM cluster_log")  # not even the owner rewrites the log


def test_a_node_role_cannot_pin_and_bad_input_is_one_line(cluster: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]):
    node = cluster["node"]
    assert main(["cluster", "move", "T1", "--to", "node-b", "--journal", node, "--reason", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "permission denied" in err
    url = cluster["operator"]
    for argv, says in [
        (["cluster", "move", "T1", "--to", "node-z", "--journal", url, "--reason", "x"], "never joined"),
        (["cluster", "move", "T9", "--to", "node-a", "--journal", url, "--reason", "x"], "no lease"),
        (["cluster", "move", "T1;drop", "--to", "node-a", "--journal", url, "--reason", "x"], "not valid"),
        (["cluster", "unpin", "T1", "--journal", url, "--reason", "x"], "not pinned"),
        (["cluster", "status", "--journal", f"postgresql://postgres@127.0.0.1:{free_port()}/nope"], "cannot reach"),
        (["cluster", "status"], "give --journal"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err and "Traceback" not in err, (argv, err)
    assert sql(cluster["owner"], "SELECT count(*) FROM pins") == [(0,)]
