"""Start-up checks the journal before it replays a row (issue 29, re-audit findings 2 and 3).

A journal whose bytes were edited (a stake 25.00 made 95.00) or whose bits flipped on the disk is
refused with one line naming the first bad row, by ``dealer run`` (exit 2) and ``dealer deploy
check`` alike; so is a journal behind the head it committed before (its last rows cut off, its
``-wal`` lost), against the head record beside it and against the anchor retained on the broker,
which the refused start never overwrites. Real SQLite files, a real Mosquitto, a real PTY shoe and
a real ``dealer run``; the PostgreSQL journal on a real server.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ScanRead
from dealer.edge import topics
from dealer.edge.anchors import Head, HeadRecord, behind, read_record, record_path
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Batch, Journal, JournalError
from dealer.edge.journal_pg import PgJournal
from dealer.edge.preflight import start_refusals
from tests.conftest import Broker, wait_until
from tests.harness import (DEAL, POSITIONS, TABLE, DealerProcess, HandShoe, Recorder, dealer_config, dealer_run, key,
                           mqtt_table, serial_table)

NODE = "cut-host"


def _journal_of_rounds(path: Path, rounds: int = 4) -> None:
    """A journal as the service writes it: rounds of bets of 25.00 and scanned cards, checkpointed
    into the file (no -wal left)."""
    j = Journal(path)
    for seq in range(1, rounds + 1):
        rid = f"{TABLE}-{j.journal_id}-{seq:06d}"
        evs: list[tuple[str, str | None, Any]] = [(TABLE, rid, OpenRound(round_id=rid, at=1, betting_closes_at=9,
                                                                        draw="ab" * 32))]
        evs += [(TABLE, rid, PlaceBet(bet_id=f"b{seq}-{i}", player_id=f"p{i}", bet_type="player_a",
                                      stake=Decimal("25.00"), round_id=rid, command_id=f"c{seq}-{i}", at=2))
                for i in range(3)]
        evs += [(TABLE, rid, CloseBetting(by="timer", round_id=rid, at=3))]
        evs += [(TABLE, rid, ScanRead(reader="SC1", code=code, seq=i, at=4)) for i, code in enumerate(DEAL)]
        j.commit(Batch(events=evs))
    j.checkpoint()
    j.close()
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)


def _settings(journal: Path) -> Settings:
    return load_settings(service={"journal_path": journal, "metrics_enabled": False},
                         mqtt={"url": "mqtt://127.0.0.1:1"}, tables=[mqtt_table()])


def _events(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT * FROM events ORDER BY id").fetchall()


@pytest.mark.integration  # dealer run as a process
def test_a_stake_edited_in_the_files_bytes_is_refused_by_run_and_deploy_check(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    _journal_of_rounds(journal)
    data = journal.read_bytes()
    assert data.count(b'"stake":"25.00"') == 12
    at = data.index(b'"stake":"25.00"', len(data) // 2)  # one bet, somewhere in the file
    edited = data[:at] + b'"stake":"95.00"' + data[at + 15:]
    journal.write_bytes(edited)
    # what replay would rebuild the table from: the edited stake, as the re-audit found
    ro = Journal.open_read_only(journal)
    stakes = [ev.stake for ev in ro.replay(TABLE) if isinstance(ev, PlaceBet)]
    bad = next(r.id for r in ro.live_rows() if '"stake":"95.00"' in r.body)
    ro.close()
    assert Decimal("95.00") in stakes
    cfg = dealer_config(tmp_path, journal=journal, tables=[mqtt_table()])  # a broker no refusal ever reaches
    rc, out, err = _deploy_check(cfg)
    run = dealer_run(cfg)
    assert run.returncode == rc == 2 and run.stderr == err and out == "", (run.stderr, err)
    line = run.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert line.startswith(f"dealer: refusing to start: journal {journal}: row {bad} was altered"), line
    assert journal.read_bytes() == edited  # left as it was, for the person who has to look at it


def _flip(src: Path, dst: Path, offset: int, bit: int) -> None:
    for old in dst.parent.glob(dst.name + "*"):
        old.unlink()
    data = bytearray(src.read_bytes())
    data[offset] ^= 1 << bit
    dst.write_bytes(bytes(data))


def test_random_bit_flips_in_the_journal_rows_are_refused(tmp_path: Path) -> None:
    """Seeded flips inside the stored bytes of random rows (a body, a hash, a round id): every
    one is refused, naming a row (the re-audit had 12 of 12 start)."""
    src = tmp_path / "good.sqlite"
    _journal_of_rounds(src)
    data, rows = src.read_bytes(), _events(src)
    rng = random.Random(29)
    journal = tmp_path / "journal.sqlite"
    for _ in range(12):
        row = rng.choice(rows)
        text = str(rng.choice([row[2], row[4], row[7]])).encode()  # round id, body, hash as stored
        offset = data.index(text) + rng.randrange(len(text))
        _flip(src, journal, offset, rng.randrange(8))
        problems = start_refusals(_settings(journal), None, [])
        assert len(problems) == 1 and problems[0].startswith(f"journal {journal}") and " row" in problems[0], \
            (offset, problems)


def test_a_bit_flip_anywhere_in_the_events_pages_is_refused_or_changes_nothing(tmp_path: Path) -> None:
    """Flips anywhere in the pages of the events table and its index (headers, cell pointers,
    keys, free space): each is refused, or it landed where nothing is read (every row reads as
    before and SQLite finds nothing wrong)."""
    src = tmp_path / "good.sqlite"
    _journal_of_rounds(src)
    with sqlite3.connect(src) as db:
        size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name IN ('events', 'events_by_round')")]
    db.close()
    before = _events(src)
    rng = random.Random(2029)
    journal = tmp_path / "journal.sqlite"
    refused = 0
    for _ in range(24):
        offset = (rng.choice(pages) - 1) * size + rng.randrange(size)
        _flip(src, journal, offset, rng.randrange(8))
        if start_refusals(_settings(journal), None, []):
            refused += 1
            continue
        assert _events(journal) == before, offset
    assert refused >= 6  # most of a page is rows: a run where nothing is refused tests nothing


def test_the_head_record_only_moves_forward_and_another_journals_head_is_not_compared(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    _journal_of_rounds(journal, rounds=2)
    j = Journal.open_read_only(journal)
    rec = HeadRecord(journal, j.journal_id)
    assert rec.write(j.head) and not rec.write((j.head[0] - 1, "0" * 64))  # never backwards
    kept = read_record(journal)
    assert kept is not None and (kept.journal_id, kept.row_id, kept.hash) == (j.journal_id, *j.head)
    assert behind(j, kept) is None
    ahead = Head(j.journal_id, j.head[0] + 5, "f" * 64, 0, "the test")
    assert "ends at row" in (behind(j, ahead) or "")
    other = Head("aaaaaaaa", j.head[0] + 5, "f" * 64, 0, "the test")  # a journal replaced on purpose: a new key series
    assert behind(j, other) is None
    j.close()
    record_path(journal).write_text("{not json")
    with pytest.raises(JournalError, match="head record .* is damaged"):
        read_record(journal)
    assert "is damaged" in start_refusals(_settings(journal), None, [])[0]


def _with_anchor_period(cfg: Path, seconds: float) -> Path:
    text = cfg.read_text().replace("[service]\n", f"[service]\njournal_anchor_seconds = {seconds}\n", 1)
    cfg.write_text(text)
    return cfg


def _deploy_check(cfg: Path) -> tuple[int, str, str]:
    """``dealer deploy check`` in this process (a process of its own costs seconds of imports)."""
    import argparse
    import contextlib
    import io

    from tools.deploy import register

    p = argparse.ArgumentParser(prog="dealer")
    register(p.add_subparsers(dest="command", required=True))
    out, err = io.StringIO(), io.StringIO()
    args = p.parse_args(["deploy", "check", "--config", str(cfg)])
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = args.func(args)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.timeout(180)
async def test_a_cut_tail_is_refused_against_the_head_record_and_the_brokers_anchor_which_stays(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    journal = tmp_path / "journal.sqlite"
    cfg = _with_anchor_period(dealer_config(tmp_path, broker_url=broker.url, node_id=NODE, journal=journal,
                                            tables=[serial_table(shoe.path)]), 0.2)
    backend = DealerProcess(cfg, tmp_path / "backend.log").start()
    anchor_topic = topics.backend_journal(NODE)

    def anchors() -> list[dict[str, Any]]:
        return [m for t, m in rec.messages if t == anchor_topic and m]

    try:
        for code, pos in zip(DEAL, POSITIONS):
            await wait_until(lambda: rec.expects(pos), timeout=60, what=f"NEXT {pos}")
            shoe.scan(code)
        k = key(journal, 1)
        await wait_until(lambda: rec.results(k), what="the result")
        settled = Journal.open_read_only(journal)
        settled_row = max(r.id for r in settled.live_rows() if r.type == "scan_read")
        settled.close()
        await wait_until(lambda: any(a["row_id"] >= settled_row for a in anchors()), what="an anchor past the deal")
        assert backend.terminate() == 0
    finally:
        backend.stop()
        shoe.close()
    published = anchors()[-1]
    # the last rows cut off, as with a lost -wal: the journal now ends before the published anchor
    cut = published["row_id"] - 3
    with sqlite3.connect(journal) as db:
        db.execute("DROP TRIGGER events_no_delete")
        db.execute("DELETE FROM events WHERE id > ?", (cut,))
    db.close()
    rc, out, err = await asyncio.to_thread(_deploy_check, cfg)
    assert rc == 2 and out == "", (rc, out, err)
    run = await asyncio.to_thread(dealer_run, cfg, 60)
    assert run.returncode == 2 and err == run.stderr, (err, run.stderr)
    record = read_record(journal)
    assert record is not None and record.row_id >= published["row_id"]  # written before every anchor
    assert err.startswith(f"dealer: refusing to start: journal {journal} ends at row {cut}, behind row "
                          f"{record.row_id} which the head record {record_path(journal)} holds"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert published["journal_id"] == record.journal_id  # the anchor names its journal
    # without the record (a host restored from a snapshot with it), the broker's anchor still says so
    record_path(journal).unlink()
    rc, out, err = await asyncio.to_thread(_deploy_check, cfg)
    run = await asyncio.to_thread(dealer_run, cfg, 60)
    assert rc == run.returncode == 2 and err == run.stderr, (err, run.stderr)
    assert err.startswith(f"dealer: refusing to start: journal {journal} ends at row {cut}, behind row "
                          f"{published['row_id']} which the anchor retained on {anchor_topic} holds"), err
    # the broker down at start: the backend starts (compared with nothing) but publishes no anchor
    # until its first connection has compared it, and stops there (exit 2)
    await rec.stop()
    broker.kill()
    log = tmp_path / "blind.log"
    blind = DealerProcess(cfg, log).start()
    try:
        await wait_until(lambda: "journal not compared with the anchor on the broker yet" in log.read_text(),
                         timeout=60, what="a start that could not reach the broker")
        broker.start()
        await wait_until(lambda: not blind.running(), timeout=60, what="the backend stopping at its first connection")
        assert blind.proc is not None and blind.proc.returncode == 2
    finally:
        blind.stop()
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith(f"dealer: refusing to start: journal {journal} ends at row") and "first broker connection" \
        in last, last
    # and nobody overwrote the anchor with the shorter head: a newcomer reads the same one
    late = await Recorder(broker.url).start()
    try:
        await wait_until(lambda: [m for t, m in late.messages if t == anchor_topic], what="the retained anchor")
        assert [m for t, m in late.messages if t == anchor_topic] == [published]
    finally:
        await late.stop()
    assert "Traceback" not in (tmp_path / "backend.log").read_text() + log.read_text()


def test_a_postgresql_row_edited_is_refused_at_start_naming_it(pg: str, pg_server: Any) -> None:
    j = PgJournal(pg, node_id="node-a")
    with psycopg.connect(pg, autocommit=True) as c:
        c.execute("INSERT INTO leases (table_id, node, epoch, expires_at, acquired_at) VALUES ('T1', 'node-a', 1, "
                  "clock_timestamp() + interval '1 hour', clock_timestamp())")
    for seq in range(1, 4):
        rid = f"T1-{j.journal_id}-{seq:06d}"
        j.commit(Batch(events=[("T1", rid, OpenRound(round_id=rid, at=1)),
                               ("T1", rid, PlaceBet(bet_id=f"b{seq}", player_id="p1", bet_type="player_a",
                                                    stake=Decimal("25.00"), round_id=rid, command_id=f"c{seq}", at=2))],
                       epochs={"T1": 1}))
    j.close()
    settings = load_settings(service={"journal_url": pg, "node_id": "node-a", "metrics_enabled": False},
                             mqtt={"url": "mqtt://127.0.0.1:1"}, tables=[mqtt_table()])
    assert start_refusals(settings, None) == []
    with psycopg.connect(pg, autocommit=True) as c:  # the superuser, behind the journal's back
        c.execute("ALTER TABLE events DISABLE TRIGGER USER")
        bad = c.execute("UPDATE events SET body = replace(body, '25.00', '95.00') WHERE id = (SELECT id FROM events "
                        "WHERE type = 'place_bet' ORDER BY id OFFSET 1 LIMIT 1) RETURNING id").fetchone()[0]
        c.execute("ALTER TABLE events ENABLE TRIGGER USER")
    problems = start_refusals(settings, None)
    assert len(problems) == 1 and problems[0].startswith("journal ") and f"(id {bad}) was altered" in problems[0]
