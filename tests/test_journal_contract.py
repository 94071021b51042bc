"""The journal contract (dealer/edge/journal_contract.py), one set of tests for every backend: the
SQLite file, PostgreSQL (a private server) and the test-only memory journal
(tests/memory_journal.py), each opened through the registry (dealer/edge/journals.py). A fourth
backend passes these tests or is not a journal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import tests.memory_journal as memory_journal
from dealer.core.commands import StoredCommand
from dealer.core.events import CloseBetting, OpenRound, ResultDelivered, RulesChanged, ScanRead, SupervisorPause
from dealer.edge.config import load_settings
from dealer.edge.journal_contract import Journal, JournalBackend
from dealer.edge.journal_rows import GENESIS, JOURNAL_ID, Batch
from dealer.edge.journals import backend_of, open_journal, open_read_only
from drivers.frames import ReaderState

NODE = "node-a"
TABLES = ("T1", "T2", "T3")
KEY = "0123456789abcdef"

Opener = Callable[[], Journal]


def _lease_all(url: str) -> None:
    """The PostgreSQL journal writes a table's rows only under its lease (here granted by hand)."""
    with psycopg.connect(url, autocommit=True) as c:
        for t in TABLES:
            c.execute("INSERT INTO leases (table_id, node, epoch, expires_at, acquired_at) VALUES "
                      "(%s, %s, 1, clock_timestamp() + interval '1 hour', clock_timestamp())", (t, NODE))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration), "memory"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    """Where a new, empty journal of the backend will be (opened through the registry)."""
    if request.param == "sqlite":
        yield tmp_path / "journal.sqlite"
    elif request.param == "postgresql":
        yield request.getfixturevalue("pg")
    else:
        yield f"memory://{request.node.nodeid}"
        memory_journal.forget_all()


@pytest.fixture
def journal(target: str | Path) -> Iterator[Journal]:
    j = open_journal(target, node_id=NODE, fsync=False)
    if backend_of(target).name == "postgresql":
        _lease_all(str(target))
    yield j
    j.close()


def batch(*events: tuple[str, str | None, object], **kw: object) -> Batch:
    return Batch(events=list(events), epochs={t: 1 for t in TABLES}, **kw)  # type: ignore[arg-type]


def _rules(tid: str) -> RulesChanged:
    settings = load_settings(service={"metrics_enabled": False},
                             tables=[{"id": tid, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": "R"}}])
    r = settings.tables[0].rules()
    return RulesChanged(rules=r.canonical, rules_hash=r.rules_hash, software_version=r.software_version)


def test_the_backend_is_the_registered_one_and_answers_every_member(target: str | Path, journal: Journal):
    backend = backend_of(target)
    assert type(journal) is backend.load()
    cls: JournalBackend = backend.load()
    assert callable(cls.open) and callable(cls.open_read_only)
    members = {n for n in vars(Journal) if not n.startswith("_")} | set(Journal.__annotations__)
    assert {n for n in members if not hasattr(journal, n)} == set()
    assert isinstance(journal.path, str) and isinstance(journal.rolls_segments, bool)


def test_a_new_journal_is_empty_with_an_id_of_its_own(journal: Journal):
    assert JOURNAL_ID.match(journal.journal_id) and journal.journal_id_source == "created"
    assert journal.head == (0, GENESIS) and journal.chain_start() == (0, GENESIS)
    assert journal.count() == 0 and list(journal.rows()) == [] and journal.pending() == []
    assert journal.reader_states() == {} and journal.segment_records() == []
    assert journal.command("T1", "supervisor", "c-1") is None and not journal.delivered("T1", "T1-1")
    assert list(journal.replay("T1")) == [] and journal.rules_before("T1", None) is None
    report = journal.verify_chain()
    assert report.ok and report.rows == 0
    assert journal.audit().ok


def test_a_batch_is_written_whole_and_read_back(target: str | Path, journal: Journal):
    cmd = StoredCommand("T1", "c-1", "T1-1", "open_round", "supervisor", "d" * 64, {"round_id": "T1-1", "n": [1]})
    made = journal.commit(batch(
        ("T1", "T1-1", OpenRound(round_id="T1-1")), ("T2", "T2-1", OpenRound(round_id="T2-1")),
        ("T1", "T1-1", CloseBetting()),
        outbox=[("T1:T1-1", "results/T1", b"r1", "T1", "T1-1"), ("T2:T2-1#1/2", "results/T2", b"p1", "T2", "T2-1")],
        commands=[(cmd, 0)], readers=[ReaderState("R1", 1, 5, KEY)]))
    assert [(r.key, r.payload, r.table_id, r.round_id) for r in made] == [
        ("T1:T1-1", b"r1", "T1", "T1-1"), ("T2:T2-1#1/2", b"p1", "T2", "T2-1")]
    assert journal.pending() == made and [r.key for r in journal.pending(["T2"])] == ["T2:T2-1#1/2"]
    assert journal.command("T1", "supervisor", "c-1") == cmd
    assert journal.command("T1", "dealer", "c-1") is None  # one role cannot see another's ids
    assert journal.reader_states() == {"R1": ReaderState("R1", 1, 5, KEY)}
    rows = list(journal.rows())
    assert [r.id for r in rows] == sorted(r.id for r in rows) and len(rows) == 3
    assert [r.type for r in journal.rows("T1")] == ["open_round", "close_betting"]
    assert [r.round_id for r in journal.live_rows("T2")] == ["T2-1"]
    assert journal.head == (rows[-1].id, rows[-1].hash) and journal.hash_at(rows[0].id) == rows[0].hash
    assert journal.hash_at(rows[-1].id + 1) is None
    assert journal.count() == 3 and journal.count("T1") == 2
    assert journal.verify_chain().ok and journal.verify_chain().rows == 3
    assert journal.audit([journal.head]).ok
    wrong = journal.audit([(rows[0].id, "f" * 64)])
    assert not wrong.ok and wrong.first_broken == rows[0].id
    reader = open_read_only(target)  # another open sees the same journal
    try:
        assert reader.journal_id == journal.journal_id and reader.journal_id_source == "existing"
        assert list(reader.rows()) == rows and reader.pending() == made
    finally:
        reader.close()


def test_an_outbox_key_is_written_once_and_an_ack_takes_the_result_and_its_parts(journal: Journal):
    first = journal.commit(batch(("T1", "T1-1", OpenRound(round_id="T1-1")),
                                 outbox=[("K", "t", b"one", "T1", "T1-1"), ("K#1/2", "t", b"a", "T1", "T1-1"),
                                         ("K#2/2", "t", b"b", "T1", "T1-1"), ("KX", "t", b"x", "T1", "T1-1"),
                                         ("L", "t", b"l", "T1", "T1-1")]))
    again = journal.commit(batch(("T1", "T1-1", CloseBetting()), outbox=[("K", "t", b"two", "T1", "T1-1")]))
    assert again == [] and [r.payload for r in journal.pending() if r.key == "K"] == [b"one"]
    by_key = {r.key: r.id for r in first}
    journal.commit(batch(acked=["K"], delivered=[by_key["L"]]))
    assert [r.key for r in journal.pending()] == ["KX"]  # "KX" is another key, not a part of "K"
    assert journal.count() == 2  # a batch of acks alone writes no row


def test_replay_starts_at_the_oldest_undelivered_round_with_the_rules_in_force(journal: Journal):
    rules1, rules2, rules3 = _rules("T1"), _rules("T2"), _rules("T3")
    committed: dict[str, list[str]] = {t: [] for t in TABLES}

    def commit(tid: str, rid: str | None, *events: object) -> None:
        journal.commit(batch(*((tid, rid, e) for e in events)))
        committed[tid] += [e.model_dump_json() for e in events]  # type: ignore[attr-defined]

    def replayed(tid: str) -> list[str]:
        got = list(journal.replay_rows(tid))
        bodies = {r.id: r.body for r in journal.rows(tid)}
        assert [bodies[i] for i, _e in got] == [e.model_dump_json() for _i, e in got]  # ids name the rows
        return [e.model_dump_json() for e in journal.replay(tid)]

    commit("T1", None, rules1)
    commit("T2", None, rules2)
    commit("T3", None, rules3, SupervisorPause(supervisor="S1"))
    commit("T1", "T1-1", OpenRound(round_id="T1-1"), CloseBetting(), ScanRead(reader="R", code="AS"))
    commit("T2", "T2-1", OpenRound(round_id="T2-1"), CloseBetting())
    commit("T1", "T1-2", OpenRound(round_id="T1-2"), CloseBetting())
    assert replayed("T1") == committed["T1"]  # round 1 undelivered: from it, with the rules before it
    assert replayed("T2") == committed["T2"]
    assert replayed("T3") == committed["T3"]  # no round ever: from its first table operation
    commit("T1", "T1-1", ResultDelivered(round_id="T1-1", idempotency_key="T1:T1-1"), rules1)
    assert replayed("T1") == [committed["T1"][0]] + committed["T1"][4:]  # from round 2, the rules of then
    commit("T1", "T1-2", ResultDelivered(round_id="T1-2", idempotency_key="T1:T1-2"))
    assert replayed("T1") == [committed["T1"][0]] + committed["T1"][4:]  # all delivered: from the last round
    assert journal.delivered("T1", "T1-1") and not journal.delivered("T2", "T2-1")
    last_rules = journal.rules_before("T1", None)
    assert last_rules is not None and last_rules.body == rules1.model_dump_json() and last_rules.type == "table_rules"
    assert journal.verify_chain().ok and journal.audit([journal.head]).ok


def test_the_event_loop_commits_and_closes_through_the_contract(journal: Journal):
    async def run() -> list[str]:
        made = await journal.commit_async(batch(("T1", "T1-1", OpenRound(round_id="T1-1")),
                                                outbox=[("K", "t", b"x", "T1", "T1-1")]))
        journal.forget_table("T1")  # a table that leaves and comes back continues its chain
        await journal.commit_async(batch(("T1", "T1-1", CloseBetting())))
        pending = await asyncio.get_running_loop().run_in_executor(journal.writer, journal.pending)
        assert [r.key for r in pending] == ["K"]
        assert journal.verify_chain().ok and journal.count("T1") == 2
        await journal.close_async()
        return [r.key for r in made]

    assert asyncio.run(run()) == ["K"]


def test_retention_is_asked_of_every_journal(journal: Journal):
    """Segment retention is SQLite's: a journal without it answers "nothing to do"."""
    journal.commit(batch(("T1", "T1-1", OpenRound(round_id="T1-1"))))
    assert journal.checkpoint() >= 0 and journal.purge_rolled() == 0
    assert journal.segment_records() == [] and journal.chain_start() == (0, GENESIS)
