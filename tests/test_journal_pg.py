"""The PostgreSQL journal on a real server: one transaction per batch, append-only per-table
chains, fencing by lease epoch, the outbox and command ids, the same replay as SQLite, its
journal id, bad databases refused in one line, and commits across a server crash."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from dealer.core.commands import StoredCommand
from dealer.core.events import CloseBetting, LinkDown, LinkUp, OpenRound, ResultDelivered, RulesChanged, ScanRead
from dealer.core.messages import RoundResult
from dealer.core.table import Table
from dealer.edge.config import load_settings
from dealer.edge.journal import Batch, Fenced, Journal, JournalError, JournalWriteFailed
from dealer.edge.journal_pg import PgJournal, pg_row_hash, redact
from dealer.edge.journals import open_journal, open_read_only
from drivers.frames import ReaderState
from simulators.broker import free_port
from simulators.pgserver import PgServer
from tests.harness import DEAL

ROOT = Path(__file__).resolve().parent.parent
NODE = "node-a"
KEY = "0123456789abcdef"


def lease(url: str, table: str, epoch: int = 1, node: str = NODE, seconds: int = 3600) -> None:
    """Give ``node`` the table's lease (the leases manager's job; here by hand)."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("INSERT INTO leases (table_id, node, epoch, expires_at, acquired_at) VALUES "
                  "(%s, %s, %s, clock_timestamp() + make_interval(secs => %s), clock_timestamp()) "
                  "ON CONFLICT (table_id) DO UPDATE SET node = excluded.node, epoch = excluded.epoch, "
                  "expires_at = excluded.expires_at", (table, node, epoch, seconds))


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run SQL as the superuser, behind the journal's back."""
    with psycopg.connect(url, autocommit=True) as c:
        cur = c.execute(query, params)
        return cur.fetchall() if cur.description else []


def ev_batch(*events: tuple[str, str | None, object], epochs: dict[str, int] | None = None, **kw: object) -> Batch:
    tables = {t for t, _r, _e in events}
    return Batch(events=list(events), epochs=epochs if epochs is not None else {t: 1 for t in tables}, **kw)


@pytest.fixture
def journal(pg: str):
    j = PgJournal(pg, node_id=NODE)
    for t in ("T1", "T2"):
        lease(pg, t)
    yield j
    j.close()


def test_a_multi_table_batch_is_one_transaction(pg: str, journal: PgJournal):
    cmd = StoredCommand("T1", "c-1", "T1-1", "open_round", "supervisor", "d" * 64, {"round_id": "T1-1"})
    rows = journal.commit(ev_batch(
        ("T1", "T1-1", OpenRound(round_id="T1-1")), ("T2", "T2-1", OpenRound(round_id="T2-1")),
        ("T1", "T1-1", CloseBetting()),
        outbox=[("T1:T1-1", "results", b"r1", "T1", "T1-1")], commands=[(cmd, 0)],
        readers=[ReaderState("R1", 1, 5, KEY)]))
    assert [r.key for r in rows] == ["T1:T1-1"]
    # every row the batch wrote, in every table, was written by one transaction
    xmins = sql(pg, "SELECT xmin::text FROM events UNION SELECT xmin::text FROM outbox UNION "
                    "SELECT xmin::text FROM commands UNION SELECT xmin::text FROM reader_state")
    assert len(xmins) == 1
    journal.commit(ev_batch(("T2", "T2-1", CloseBetting())))
    assert len(sql(pg, "SELECT DISTINCT xmin::text FROM events")) == 2
    # per-table chains: seq from 1 in each table; the global id orders commits, and within one
    # commit the rows go table by table (the order the fence locks lease rows in: no deadlock
    # with a lease renewal, which locks them in that order too)
    got = sql(pg, "SELECT id, table_id, seq, node, epoch FROM events ORDER BY id")
    assert got == [(1, "T1", 1, NODE, 1), (2, "T1", 2, NODE, 1), (3, "T2", 1, NODE, 1), (4, "T2", 2, NODE, 1)]
    assert journal.head_of("T1")[0] == 2 and journal.head == (4, journal.head_of("T2")[1])
    assert sql(pg, "SELECT event_id FROM commands") == [(1,)]
    assert journal.verify_chain().ok and journal.count() == 4 and journal.count("T1") == 2


def test_rows_commands_and_meta_are_append_only(pg: str, journal: PgJournal):
    cmd = StoredCommand("T1", "c-1", "T1-1", "open_round", "supervisor", "d" * 64, {"round_id": "T1-1"})
    journal.commit(ev_batch(("T1", "T1-1", OpenRound(round_id="T1-1")), commands=[(cmd, 0)]))
    for table in ("events", "commands", "meta"):
        for stmt in (f"UPDATE {table} SET {'value' if table == 'meta' else 'table_id'} = 'X'",
                     f"DELETE FROM {table}", f"TRUNCATE {table}"):
            with pytest.raises(psycopg.DatabaseError, match="append-only") as exc:
                sql(pg, stmt)
            assert exc.value.sqlstate == "DL002"
    assert journal.count() == 1 and journal.command("T1", "supervisor", "c-1") == cmd


def test_the_chain_finds_an_altered_or_removed_row_and_the_audit_cli_says_which(pg: str, journal: PgJournal):
    for i in range(1, 4):
        journal.commit(ev_batch(("T1", f"T1-{i}", OpenRound(round_id=f"T1-{i}")),
                                ("T2", f"T2-{i}", OpenRound(round_id=f"T2-{i}"))))
    report = journal.verify_chain()
    assert report.ok and report.rows == 6
    row = sql(pg, "SELECT id, seq, table_id, round_id, type, body, recorded_at, node, epoch, prev_hash, hash "
                  "FROM events WHERE id = 3")[0]
    assert row[10] == pg_row_hash(row[9], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8])
    ok = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", pg],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] and json.loads(ok.stdout)["journal_id"] == journal.journal_id
    # someone with the superuser's password turns the triggers off and edits row 3 (T1, seq 2)
    sql(pg, "ALTER TABLE events DISABLE TRIGGER USER; UPDATE events SET body = replace(body, 'T1-2', 'T1-9') "
            "WHERE id = 3; ALTER TABLE events ENABLE TRIGGER USER")
    broken = journal.verify_chain()
    assert not broken.ok and broken.first_broken == 3 and "altered" in broken.reason and "T1" in broken.reason
    out = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", pg],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 1 and json.loads(out.stdout)["first_broken"] == 3
    # a row removed from T2's chain: the next one is reported
    sql(pg, "ALTER TABLE events DISABLE TRIGGER USER; DELETE FROM events WHERE id = 4; "
            "ALTER TABLE events ENABLE TRIGGER USER")
    gone = journal.verify_chain()
    assert not gone.ok and gone.first_broken == 3  # the lowest id of the broken rows of both tables
    assert journal.verify_chain().rows == 5
    sql(pg, "ALTER TABLE events DISABLE TRIGGER USER; UPDATE events SET body = replace(body, 'T1-9', 'T1-2') "
            "WHERE id = 3; ALTER TABLE events ENABLE TRIGGER USER")
    t2 = journal.verify_chain()
    assert not t2.ok and t2.first_broken == 6 and "seq 2 is missing" in t2.reason


def test_a_write_under_an_old_epoch_is_fenced_and_writes_nothing(pg: str, journal: PgJournal):
    journal.commit(ev_batch(("T1", "T1-1", OpenRound(round_id="T1-1")), ("T2", "T2-1", OpenRound(round_id="T2-1"))))
    heads = journal.head_of("T1"), journal.head_of("T2")
    lease(pg, "T1", epoch=2, node="node-b")  # another node took T1 over
    batch = ev_batch(("T2", "T2-1", CloseBetting()), ("T1", "T1-1", CloseBetting()),
                     outbox=[("T2:T2-1", "results", b"r", "T2", "T2-1")], readers=[ReaderState("R1", 1, 1, KEY)])
    with pytest.raises(Fenced) as exc:
        journal.commit(batch)
    assert exc.value.table_id == "T1" and "fenced" in str(exc.value)
    # nothing of the batch: not T2's row either, nor its outbox row or reader state
    assert journal.count() == 2 and journal.pending() == [] and journal.reader_states() == {}
    assert (journal.head_of("T1"), journal.head_of("T2")) == heads
    # an expired lease fences too (the database's clock decides)
    sql(pg, "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE table_id = 'T2'")
    with pytest.raises(Fenced, match="T2"):
        journal.commit(ev_batch(("T2", "T2-1", CloseBetting())))
    lease(pg, "T2", epoch=1)
    assert journal.commit(ev_batch(("T2", "T2-1", CloseBetting()))) == []
    assert journal.head_of("T2")[0] == 2
    # a row without its table's epoch is a programming error: refused before anything is written
    with pytest.raises(ValueError, match="T2"):
        journal.commit(Batch(events=[("T2", None, LinkUp(link="broker"))], epochs={"T1": 1}))
    # another writer of the same node that already wrote the table's next seq: fenced, nothing written
    other = PgJournal(pg, node_id=NODE)
    try:
        other.commit(ev_batch(("T2", None, LinkDown(link="broker", reason="x"))))
        with pytest.raises(Fenced) as dup:
            journal.commit(ev_batch(("T2", None, LinkUp(link="broker"))))
        assert dup.value.table_id == "T2" and journal.count("T2") == 3
    finally:
        other.close()
    assert journal.verify_chain().ok


def test_an_ack_deletes_the_result_and_its_parts_and_nothing_else(journal: PgJournal):
    keys = ["T1:r1", "T1:r1#1/2", "T1:r1#2/2", "T1:r10", "T1:r1_x", "T1:r2"]
    made = journal.commit(ev_batch(("T1", "r1", OpenRound(round_id="T1-1")),
                                   outbox=[(k, "results", k.encode(), "T1", "r1") for k in keys]))
    assert [r.key for r in made] == keys and [r.id for r in made] == sorted(r.id for r in made)
    # the same key again (a replayed commit): nothing new
    assert journal.commit(Batch(outbox=[("T1:r1", "results", b"other", "T1", "r1")])) == []
    journal.commit(ev_batch(("T1", "T1-1", ResultDelivered(round_id="T1-1", idempotency_key="T1:r1")),
                            acked=["T1:r1"]))
    assert [r.key for r in journal.pending()] == ["T1:r10", "T1:r1_x", "T1:r2"]
    r2 = journal.pending()[-1]
    journal.commit(Batch(delivered=[r2.id]))
    assert [r.key for r in journal.pending()] == ["T1:r10", "T1:r1_x"]
    assert journal.pending(["T2"]) == [] and len(journal.pending(["T1", "T2"])) == 2
    assert journal.delivered("T1", "T1-1") and not journal.delivered("T1", "T1-2")


def test_command_ids_are_kept_and_the_first_answer_stays(pg: str, journal: PgJournal):
    first = StoredCommand("T1", "c-1", "T1-1", "open_round", "supervisor", "a" * 64, {"n": 1})
    again = StoredCommand("T1", "c-1", "T1-2", "open_round", "supervisor", "b" * 64, {"n": 2})
    journal.commit(ev_batch(("T1", "T1-1", OpenRound(round_id="T1-1")), commands=[(first, 0)]))
    journal.commit(ev_batch(("T1", "T1-2", OpenRound(round_id="T1-2")), commands=[(again, 0)]))
    assert journal.command("T1", "supervisor", "c-1") == first
    assert journal.command("T1", "dealer", "c-1") is None  # another role's id space
    reopened = PgJournal(pg, node_id="node-b")  # any node reads what any node accepted
    try:
        assert reopened.command("T1", "supervisor", "c-1") == first
    finally:
        reopened.close()


def test_reader_state_is_upserted_with_the_batch(journal: PgJournal):
    journal.commit(Batch(readers=[ReaderState("R1", 1, 5, KEY), ReaderState("R2", 3, 9, KEY)]))
    journal.commit(Batch(readers=[ReaderState("R1", 1, 6, KEY, "f" * 64), ReaderState("R1", 2, 0, KEY)]))
    assert journal.reader_states() == {"R1": ReaderState("R1", 2, 0, KEY), "R2": ReaderState("R2", 3, 9, KEY)}


def _play(table: Table, tid: str, events: list[object]) -> list[Batch]:
    """The batches the service would commit for these events (one per accepted event)."""
    out = []
    for ev in events:
        step = table.handle(ev)
        if not step.journal:
            continue
        rid = getattr(ev, "round_id", None) or (table.current.round_id if table.current else None)
        b = Batch(events=[(tid, rid, ev)], epochs={tid: 1})
        for eff in step.effects:
            if isinstance(eff, RoundResult):
                b.outbox.append((eff.idempotency_key, "results", eff.model_dump_json().encode(), tid, eff.round_id))
        if isinstance(ev, ResultDelivered) and ev.idempotency_key:
            b.acked.append(ev.idempotency_key)
        out.append(b)
    return out


def _round(tid: str, n: int) -> list[object]:
    return [OpenRound(round_id=f"{tid}-{n:06d}"), CloseBetting()] + [ScanRead(reader="R", code=c) for c in DEAL]


def test_replay_picks_the_same_rows_as_the_sqlite_journal(pg: str, journal: PgJournal, tmp_path: Path):
    settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": t, "game": "teen-patti", "auto_rounds": False,
                                      "scanner": {"kind": "mqtt", "reader_id": f"SC{t[-1]}"}} for t in ("T1", "T2")])
    lite = Journal(tmp_path / "j.sqlite", fsync=False)
    tables = {c.id: Table(c.rules()) for c in settings.tables}

    def both(tid: str, events: list[object]) -> None:
        for b in _play(tables[tid], tid, events):
            assert [r.key for r in lite.commit(b)] == [r.key for r in journal.commit(b)]

    def same() -> None:
        for tid in tables:
            a = [(i, e.model_dump_json()) for i, e in lite.replay_rows(tid)]
            b = [(i, e.model_dump_json()) for i, e in journal.replay_rows(tid)]
            assert a == b and a
        assert [(r.id, r.key) for r in lite.pending()] == [(r.id, r.key) for r in journal.pending()]

    for tid, t in tables.items():
        r = t.rules
        both(tid, [RulesChanged(rules=r.canonical, rules_hash=r.rules_hash, software_version=r.software_version)])
    both("T1", _round("T1", 1))  # result 1 stays undelivered
    both("T2", _round("T2", 1)[:5])  # T2 mid-deal, its rows between T1's
    both("T1", _round("T1", 2)[:5])
    same()
    both("T1", [ResultDelivered(round_id="T1-000001", idempotency_key=lite.pending()[0].key)])
    both("T1", [ScanRead(reader="R", code=c) for c in DEAL[3:]])
    both("T2", [LinkDown(link="broker", reason="gone"), LinkUp(link="broker")])
    same()
    # rebuilt from PostgreSQL, the tables are where they were
    for tid in tables:
        rebuilt = Table(settings.tables[0].rules() if tid == "T1" else settings.tables[1].rules())
        for ev in journal.replay(tid):
            rebuilt.handle(ev)
        assert rebuilt.current.round_id == tables[tid].current.round_id
        assert rebuilt.current.phase == tables[tid].current.phase and set(rebuilt.undelivered) == set(
            tables[tid].undelivered)
    lite.close()


def test_one_journal_id_for_every_node_and_every_open(pg: str, tmp_path: Path):
    got: list[PgJournal] = []

    def open_one(node: str) -> None:
        got.append(PgJournal(pg, node_id=node))

    threads = [threading.Thread(target=open_one, args=(f"n{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({j.journal_id for j in got}) == 1 and len(got) == 3
    assert sorted(j.journal_id_source for j in got) == ["created", "existing", "existing"]
    jid = got[0].journal_id
    for j in got:
        j.close()
    again = open_journal(pg, node_id="n9")
    assert isinstance(again, PgJournal) and again.journal_id == jid and again.journal_id_source == "existing"
    again.close()
    # the configuration chooses: journal_url set, PostgreSQL (written as service.node_id); else the SQLite file
    settings = load_settings(service={"journal_url": pg, "node_id": "studio-2", "metrics_enabled": False})
    configured = open_journal(settings)
    assert isinstance(configured, PgJournal) and configured.node_id == "studio-2" and configured.journal_id == jid
    configured.close()
    lite = open_journal(load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False}))
    assert isinstance(lite, Journal) and lite.journal_id != jid
    lite.close()
    with pytest.raises(JournalError, match="postgresql://"):
        open_journal(load_settings(service={"journal_url": "mysql://x@h/db", "metrics_enabled": False}))
    ro = open_read_only(pg)
    assert ro.journal_id == jid
    with pytest.raises(JournalError, match="read-only"):
        ro.commit(ev_batch(("T1", None, LinkUp(link="broker"))))
    ro.close()


def test_bad_databases_are_refused_in_one_line(pg_server: PgServer, pg: str):
    port = free_port()
    with pytest.raises(JournalError) as exc:
        PgJournal(f"postgresql://dealer:s3cret@127.0.0.1:{port}/studio", node_id=NODE)
    msg = str(exc.value)
    assert f"127.0.0.1:{port}" in msg and "refused" in msg.lower() and "s3cret" not in msg and "\n" not in msg
    assert redact("postgresql://dealer:s3cret@h:1/db?password=x&sslmode=require") == \
        "postgresql://dealer@h:1/db?sslmode=require"
    # a database with tables named like ours but not ours
    other = pg_server.create_database(f"other_{free_port()}")
    sql(other, "CREATE TABLE events (x int)")
    with pytest.raises(JournalError, match="not a dealer journal"):
        PgJournal(other, node_id=NODE)
    # an empty database is never created by a reader
    empty = pg_server.create_database(f"empty_{free_port()}")
    with pytest.raises(JournalError, match="no dealer journal"):
        PgJournal.open_read_only(empty)
    assert sql(empty, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'") == [(0,)]
    # another schema version
    PgJournal(pg, node_id=NODE).close()
    sql(pg, "ALTER TABLE meta DISABLE TRIGGER USER; UPDATE meta SET value = '99' WHERE key = 'schema_version'; "
            "ALTER TABLE meta ENABLE TRIGGER USER")
    with pytest.raises(JournalError, match="schema version 99, this software needs 1: migrate it"):
        PgJournal(pg, node_id=NODE)
    # the CLI: one line, exit 2, no traceback, no password
    out = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal",
                          f"postgresql://dealer:s3cret@127.0.0.1:{port}/studio"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1
    assert "cannot connect to 127.0.0.1" in out.stderr and "s3cret" not in out.stderr


def _batch(n: int) -> Batch:
    return ev_batch(("T1", f"T1-{n}", OpenRound(round_id=f"T1-{n}")), ("T1", f"T1-{n}", CloseBetting()),
                    outbox=[(f"T1:T1-{n}", "results", b"r", "T1", f"T1-{n}")])


def test_a_commit_fails_while_the_server_is_down_and_the_same_batch_commits_after_its_restart(
        pg_private: PgServer):
    url = pg_private.create_database("j")
    j = PgJournal(url, node_id=NODE)
    lease(url, "T1")
    try:
        j.commit(_batch(1))
        head = j.head_of("T1")
        pg_private.kill()
        with pytest.raises(JournalWriteFailed) as exc:
            j.commit(_batch(2))
        assert exc.value.reason == "database_unreachable" and j.head_of("T1") == head
        with pytest.raises(JournalWriteFailed):  # the event loop's reads: cannot tell
            j.command("T1", "supervisor", "c-1")
        pg_private.start()
        rows = j.commit(_batch(2))  # reconnects by itself, same seqs
        assert [r.key for r in rows] == ["T1:T1-2"]
        assert sql(url, "SELECT seq FROM events ORDER BY id") == [(1,), (2,), (3,), (4,)]
        assert j.verify_chain().ok and j.command("T1", "supervisor", "c-1") is None
        # a restart between two commits, while the journal was idle: the next commit just works
        pg_private.restart()
        assert [r.key for r in j.commit(_batch(3))] == ["T1:T1-3"] and j.count() == 6
        assert [r.key for r in j.pending()] == ["T1:T1-1", "T1:T1-2", "T1:T1-3"]
    finally:
        j.close()


async def test_commit_async_uses_the_pool_and_survives_a_restart(pg_private: PgServer):
    url = pg_private.create_database("j")
    j = PgJournal(url, node_id=NODE, connect_timeout=2)
    lease(url, "T1")
    try:
        assert [r.key for r in await j.commit_async(_batch(1))] == ["T1:T1-1"]
        pg_private.kill()
        with pytest.raises(JournalWriteFailed):
            await j.commit_async(_batch(2), timeout=10)
        await asyncio.to_thread(pg_private.start)
        assert [r.key for r in await j.commit_async(_batch(2))] == ["T1:T1-2"]
        lease(url, "T1", epoch=2, node="node-b")
        with pytest.raises(Fenced):
            await j.commit_async(_batch(3))
        assert j.count() == 4 and j.verify_chain().ok
    finally:
        await j.close_async()


class CuttingProxy:
    """A TCP proxy to the server that can drop a connection right after the server has answered a
    statement (its ReadyForQuery), before the client sees the answer: a commit that happened
    though the client never learnt it did. ``refuse`` makes new connections fail."""

    READY = b"Z\x00\x00\x00\x05"

    def __init__(self, port: int) -> None:
        self.target = port
        self.cut_next = False
        self.refuse = False
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        try:
            while data := src.recv(65536):
                if from_server and self.cut_next and self.READY in data:
                    self.cut_next = False
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.sock.close()


def test_a_commit_whose_answer_was_lost_is_not_written_twice(pg_server: PgServer, pg: str):
    proxy = CuttingProxy(pg_server.port)
    url = pg.replace(f":{pg_server.port}/", f":{proxy.port}/")
    j = PgJournal(url, node_id=NODE)
    lease(pg, "T1")
    try:
        j.commit(_batch(1))
        # the answer to batch 2 is lost; the commit tries once more on a new connection, finds
        # the batch already there (this node, this epoch) and takes it as done
        proxy.cut_next = True
        assert [r.key for r in j.commit(_batch(2))] == ["T1:T1-2"]
        assert j.count() == 4 and j.head_of("T1")[0] == 4
        # lost again, and no way back for a while: the commit fails; the service retries the same
        # batch later, which is found committed, not written again
        proxy.cut_next, proxy.refuse = True, True
        with pytest.raises(JournalWriteFailed):
            j.commit(_batch(3))
        proxy.refuse = False
        assert [r.key for r in j.commit(_batch(3))] == ["T1:T1-3"]
        assert sql(pg, "SELECT seq FROM events ORDER BY id") == [(i,) for i in range(1, 7)]
        assert [r.key for r in j.pending()] == ["T1:T1-1", "T1:T1-2", "T1:T1-3"] and j.verify_chain().ok
    finally:
        j.close()
        proxy.close()


def test_the_node_role_cannot_change_rows_and_the_auditor_only_reads(pg_server: PgServer, pg: str):
    PgJournal(pg, node_id=NODE).close()  # the owner creates the schema
    pg_server.psql(pg.rsplit("/", 1)[1], (ROOT / "deploy/postgresql/roles.sql").read_text())
    suffix = free_port()
    node_role, auditor_role = f"node_{suffix}", f"auditor_{suffix}"
    sql(pg, f"CREATE ROLE {node_role} LOGIN IN ROLE dealer_node; CREATE ROLE {auditor_role} LOGIN IN ROLE dealer_auditor")
    as_node = pg.replace("postgres@", f"{node_role}@")
    as_auditor = pg.replace("postgres@", f"{auditor_role}@")
    lease(pg, "T1")
    j = PgJournal(as_node, node_id=NODE)
    try:
        j.commit(_batch(1))
        j.commit(ev_batch(("T1", "T1-1", ResultDelivered(round_id="T1-1", idempotency_key="T1:T1-1")),
                          acked=["T1:T1-1"], readers=[ReaderState("R1", 1, 1, KEY)]))
        j.commit(Batch(readers=[ReaderState("R1", 1, 2, KEY)]))
        for stmt in ("UPDATE events SET body = body", "DELETE FROM events", "TRUNCATE events",
                     "UPDATE commands SET digest = digest", "DELETE FROM meta", "INSERT INTO meta VALUES ('x', 'y')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                sql(as_node, stmt)
        ro = PgJournal.open_read_only(as_auditor)
        assert ro.verify_chain().ok and ro.count() == 3
        ro.close()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql(as_auditor, "INSERT INTO outbox (key, topic, payload, table_id, round_id, created_at) "
                            "VALUES ('k', 't', 'p', 'T1', 'r', 0)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql(as_auditor, "UPDATE leases SET epoch = epoch + 1")
    finally:
        j.close()
    # a node role cannot create the schema in an empty database: said in one line
    empty = pg_server.create_database(f"e_{suffix}")
    with pytest.raises(JournalError, match="cannot create"):
        PgJournal(empty.replace("postgres@", f"{node_role}@"), node_id=NODE)


def test_recall_and_outbox_list_read_a_postgresql_journal(pg: str, journal: PgJournal, tmp_path: Path):
    jid = journal.journal_id
    cfg = tmp_path / "dealer.toml"
    cfg.write_text(f"""
[service]
journal_url = "{pg}"
metrics_enabled = false

[[tables]]
id = "T1"
game = "teen-patti"
auto_rounds = false

[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
""")
    settings = load_settings(cfg)
    table = Table(settings.tables[0].rules(), series=jid)
    for b in _play(table, "T1", [OpenRound(round_id=f"T1-{jid}-000001"), CloseBetting()]
                   + [ScanRead(reader="R", code=c) for c in DEAL]):
        journal.commit(b)
    out = subprocess.run([sys.executable, "-m", "dealer", "recall", "T1", "--config", str(cfg), "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    rounds = json.loads(out.stdout)
    assert [r["round_id"] for r in rounds] == [f"T1-{jid}-000001"] and rounds[0]["result"]
    ls = subprocess.run([sys.executable, "-m", "dealer", "outbox", "list", "--journal", pg, "--json"],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ls.returncode == 0, ls.stderr
    assert [r["key"] for r in json.loads(ls.stdout)["rows"]] == [r.key for r in journal.pending()]
