"""Journal retention by segments, on real SQLite files: roll, verify, tampering, anchors,
recall and replay across segments."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tools.audit import recall
from dealer.edge.config import load_settings
from dealer.core.events import ResultDelivered, RulesChanged
from dealer.games.teen_patti import TeenPatti
from dealer.edge.journal import Batch, Journal
from dealer.core.round import TableRules
from dealer.edge.segments import NoRoll, Prepared, prepare_roll, segment_dir, verify
from dealer.core.table import Table
from tests.harness_journal import T, play, round_events

ROOT = Path(__file__).resolve().parent.parent


def settings(tmp: Path):
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         tables=[{"id": T, "game": "teen-patti", "auto_rounds": False,
                                  "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])


def journal_with_rounds(tmp: Path, rounds: int, *, deliver_last: bool = True,
                        rules_again_after: int | None = None) -> tuple[Journal, Table]:
    """``rounds`` teen patti rounds, each delivered (but the last one, unless asked), the rules
    journaled first as the service does (and again after round ``rules_again_after``)."""
    j = Journal(tmp / "journal.sqlite")
    table = Table(settings(tmp).tables[0].rules())
    r = table.rules
    play(table, j, [RulesChanged(rules=r.canonical, rules_hash=r.rules_hash, software_version=r.software_version)])
    for n in range(1, rounds + 1):
        play(table, j, round_events(n))
        if n < rounds or deliver_last:
            play(table, j, [ResultDelivered(round_id=f"T1-{n:06d}", outbox_id=n)])
        if n == rules_again_after:
            rejournal_rules(j, table)
    return j, table


def roll(j: Journal, keep: int = 5, rows: int = 10) -> Prepared | NoRoll:
    prepared = prepare_roll(j.path, keep_rows=keep, segment_rows=rows)
    if isinstance(prepared, Prepared):
        assert j.finish_roll(prepared)
    return prepared


def rejournal_rules(j: Journal, table: Table) -> None:
    r = table.rules
    play(table, j, [RulesChanged(rules=r.canonical, rules_hash=r.rules_hash, software_version=r.software_version)])


def roll_all(j: Journal, table: Table, **kw: int) -> int:
    """Roll until nothing more may go, journaling the rules again when they pin the floor (as
    the service does). Returns the segments rolled."""
    n = 0
    while True:
        got = roll(j, **kw)
        if isinstance(got, Prepared):
            n += 1
        elif got.pinned:
            rejournal_rules(j, table)
            if isinstance(roll(j, **kw), Prepared):
                n += 1
                continue
            return n
        else:
            return n


def snapshot(t: Table) -> tuple[object, ...]:
    cur = t.current
    return (cur.round_id if cur else None, cur.phase if cur else None, sorted(t.undelivered), t.rules.rules_hash)


def rebuild(j: Journal) -> Table:
    t = Table(TableRules(table_id=T, game=TeenPatti()))
    for ev in j.replay(T):
        t.handle(ev)
    return t


def test_roll_keeps_replay_and_the_chain_across_segments(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 8, deliver_last=False, rules_again_after=4)
    before = snapshot(rebuild(j))
    head = j.head
    assert roll_all(j, table) == 3  # rows 1..30: the rules journaled again at row 38 are needed
    recs = j.segment_records()
    files = sorted(p.name for p in segment_dir(j.path).iterdir())
    assert files == [f"{r.number:06d}.sqlite" for r in recs]
    assert all(os.stat(segment_dir(j.path) / f).st_mode & 0o777 == 0o444 for f in files)
    # nothing a replay needs was rolled: the same table comes back
    assert snapshot(rebuild(j)) == before
    # the chain: segments then live rows, every anchor found
    rep = verify(j, [head])
    assert rep.ok, rep.reason
    assert rep.rows == j.head[0] and rep.segments == len(recs) and rep.anchors == len(recs) + 1
    assert j.verify_chain().ok  # the live part alone, from the last segment's head
    # the round still undelivered and its rules are live; the first live row links to the last segment
    first_live = next(j.live_rows())
    assert first_live.prev_hash == recs[-1].last_hash and first_live.id == recs[-1].last_id + 1
    # a reopened journal continues the chain from its head
    j.close()
    j = Journal(tmp_path / "journal.sqlite")
    play(rebuild(j), j, [ResultDelivered(round_id="T1-000008", outbox_id=8)])
    assert verify(j).ok


def test_roll_never_passes_the_oldest_undelivered_round(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 2, deliver_last=False)
    first_undelivered = next(r.id for r in j.rows(T) if r.type == "open_round" and r.round_id == "T1-000002")
    for n in range(3, 8):  # later rounds delivered, round 2 never
        play(table, j, round_events(n) + [ResultDelivered(round_id=f"T1-{n:06d}", outbox_id=n)])
    roll_all(j, table)
    assert min(r.id for r in j.live_rows()) <= first_undelivered
    assert "T1-000002" in rebuild(j).undelivered


def test_pinned_by_old_rules_says_which_table(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 5)
    got = roll(j)
    assert isinstance(got, NoRoll) and got.pinned == (T,)  # the rules row is row 1
    rejournal_rules(j, table)
    play(table, j, round_events(6))  # a round opened after the rules row: the floor moves
    assert isinstance(roll(j), Prepared)


def test_the_delete_guard_lets_only_rolled_rows_go(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 5)
    rejournal_rules(j, table)
    play(table, j, round_events(6))
    assert isinstance(roll(j), Prepared)
    last = j.segment_records()[-1].last_id
    db = sqlite3.connect(j.path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM events WHERE id = ?", (last + 1,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM segments")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE segments SET sha256 = 'x'")


def rolled(tmp: Path) -> tuple[Journal, Table]:
    j, table = journal_with_rounds(tmp, 8)
    rejournal_rules(j, table)
    play(table, j, round_events(9))
    assert roll_all(j, table) >= 3
    return j, table


@pytest.mark.integration
def test_a_tampered_segment_is_found_naming_the_row_and_segment(tmp_path: Path):
    j, _ = rolled(tmp_path)
    seg = segment_dir(j.path) / "000002.sqlite"
    victim = j.segment_records()[1].first_id + 3
    db = sqlite3.connect(seg)  # root ignores 0444; anyone else would chmod first
    db.execute("UPDATE events SET recorded_at = recorded_at + 1 WHERE id = ?", (victim,))
    db.commit()
    db.close()
    rep = verify(j)
    assert not rep.ok and rep.segment == 2 and rep.first_broken == victim and "altered" in rep.reason
    # the command line says the same, naming the segment
    out = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", j.path],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 1 and json.loads(out.stdout)["segment"] == 2


def test_a_rewritten_segment_is_found_by_its_file_hash(tmp_path: Path):
    j, _ = rolled(tmp_path)
    seg = segment_dir(j.path) / "000001.sqlite"
    db = sqlite3.connect(seg)
    db.execute("CREATE TABLE note (x)")  # rows untouched, file changed
    db.commit()
    db.close()
    rep = verify(j)
    assert not rep.ok and rep.segment == 1 and "SHA-256" in rep.reason


@pytest.mark.slow
def test_a_deleted_or_extra_segment_is_found(tmp_path: Path):
    j, _ = rolled(tmp_path)
    d = segment_dir(j.path)
    extra = d / "000077.sqlite"
    extra.write_bytes(b"")
    rep = verify(j)
    assert not rep.ok and "not recorded" in rep.reason
    extra.unlink()
    (d / "000002.sqlite").unlink()
    rep = verify(j)
    assert not rep.ok and rep.segment == 2 and "missing" in rep.reason
    with pytest.raises(ValueError, match="segment 2"):
        list(j.rows(T))


@pytest.mark.integration
def test_rows_cut_off_the_end_are_found_with_the_anchor(tmp_path: Path):
    j, table = rolled(tmp_path)
    play(table, j, [ResultDelivered(round_id="T1-000009", outbox_id=9)] + round_events(10))
    anchor = j.head
    j.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")  # someone with the file drops the guard, cuts the tail
    db.execute("DROP TRIGGER events_no_delete")
    db.execute("DELETE FROM events WHERE id > ?", (anchor[0] - 4,))
    db.commit()
    db.close()
    j = Journal(tmp_path / "journal.sqlite")
    assert verify(j).ok  # the chain alone cannot tell
    rep = verify(j, [anchor])
    assert not rep.ok and rep.first_broken == anchor[0] and "cut off" in rep.reason
    out = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", j.path,
                          "--anchor", f"{anchor[0]}:{anchor[1]}"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert out.returncode == 1 and "cut off" in json.loads(out.stdout)["reason"]


def test_rows_cut_before_a_segment_anchor_are_found_without_one(tmp_path: Path):
    """The anchor in the last segment names the head at its roll: cutting rows back past it
    breaks verification with no outside anchor."""
    j, _ = rolled(tmp_path)
    anchor_id = j.segment_records()[-1].anchor_id
    j.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    db.execute("DROP TRIGGER events_no_delete")
    db.execute("DELETE FROM events WHERE id >= ?", (anchor_id,))
    db.commit()
    db.close()
    rep = verify(Journal(tmp_path / "journal.sqlite"))
    assert not rep.ok and rep.first_broken == anchor_id and "segment" in rep.reason


def test_recall_reads_rounds_that_rolled_into_segments(tmp_path: Path):
    j, _ = rolled(tmp_path)
    assert all(r.round_id != "T1-000001" for r in j.live_rows())
    j.close()
    rounds = recall(settings(tmp_path), T, rounds=20)
    assert [r["round_id"] for r in rounds] == [f"T1-{n:06d}" for n in range(1, 10)]
    assert rounds[0]["result"]["outcome"] == "COMPLETED" and rounds[0]["rules"]["source"] == "journal row 1"


def test_an_unrecorded_segment_of_a_crashed_roll_is_replaced(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 5)
    rejournal_rules(j, table)
    play(table, j, round_events(6))
    crashed = prepare_roll(j.path, keep_rows=5, segment_rows=10)  # the process dies before finish_roll
    assert isinstance(crashed, Prepared)
    rep = verify(j)
    assert rep.ok and rep.uncommitted == ["000001.sqlite"]
    assert isinstance(roll(j), Prepared) and verify(j).ok
    assert j.commit(Batch()) == []


def test_a_journal_older_than_segments_gets_the_delete_guard(tmp_path: Path):
    """The old trigger refused every DELETE; opening the journal replaces it with the guard."""
    j, table = journal_with_rounds(tmp_path, 5, rules_again_after=2)
    j.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    db.executescript("DROP TRIGGER events_no_delete; CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
                     "BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;")
    db.close()
    j = Journal(tmp_path / "journal.sqlite")
    assert isinstance(roll(j), Prepared) and verify(j).ok
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        sqlite3.connect(j.path).execute("DELETE FROM events WHERE id = ?", (j.head[0],))


def test_rolled_rows_are_purged_a_chunk_at_a_time_and_skipped_meanwhile(tmp_path: Path):
    j, table = journal_with_rounds(tmp_path, 8, rules_again_after=4)
    before = [(r.id, r.hash) for r in j.rows()]
    prepared = prepare_roll(j.path, keep_rows=5, segment_rows=20)
    assert isinstance(prepared, Prepared) and j.finish_roll(prepared, purge_rows=3)
    assert sqlite3.connect(j.path).execute("SELECT COUNT(*) FROM events WHERE id <= 20").fetchone()[0] == 17
    assert [(r.id, r.hash) for r in j.rows()] == before  # no row twice, none lost
    assert verify(j).ok and j.verify_chain().ok and j.count() == len(before) - 20
    assert snapshot(rebuild(j)) == snapshot(table)
    assert [j.purge_rolled(5) for _ in range(5)] == [5, 5, 5, 2, 0]
    assert [(r.id, r.hash) for r in j.rows()] == before and verify(j).ok


def test_a_stale_preparation_never_removes_the_file_of_a_recorded_segment(tmp_path: Path):
    """The target soak lost segment 28's file this way: a preparation of a number already
    recorded is refused by finish_roll, which removed "its" file: the recorded one."""
    j, table = journal_with_rounds(tmp_path, 5)
    rejournal_rules(j, table)
    play(table, j, round_events(6))
    prepared = prepare_roll(j.path, keep_rows=5, segment_rows=10)
    assert isinstance(prepared, Prepared)
    assert j.finish_roll(prepared)
    assert not j.finish_roll(prepared)  # the same number again: refused ...
    assert prepared.path.is_file()  # ... and the recorded segment's file is still there
    report = verify(j)
    assert report.ok and report.segments == 1, report.reason
    j.close()
