"""``dealer run`` refusing to start (issue 13 item 7): real processes, real files, a real broker.

Exit 2 = refused, a person must act (systemd's RestartPreventExitStatus=2 stops the restart
loop): the journal is locked by another process, its directory is missing, it is not a SQLite
database, or it predates the hash chain. Exit 1 = may pass by itself (a metrics port still in
use): the unit restarts it with backoff. Either way one line on stderr and no traceback.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import urllib.request
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.core.events import LinkDown
from dealer.edge.journal import Batch, Journal, JournalError, JournalLocked, lock_journal
from tests.conftest import Broker, free_port, wait_until
from tests.harness import (DEAL, NODE, POSITIONS, TABLE, DealerProcess, HandShoe, Recorder, dealer_run, mqtt_table,
                           refused_start, round_id, write_config)

pytestmark = pytest.mark.integration  # dealer run as a process

def one_line(proc: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == status, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("dealer: "), proc.stderr[-3000:]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_a_missing_journal_directory_is_refused_with_exit_2(tmp_path: Path) -> None:
    journal = tmp_path / "gone" / "journal.sqlite"
    line = one_line(dealer_run(write_config(tmp_path, journal)), 2, "refusing to start", str(journal.parent),
                    "does not exist")
    assert not journal.parent.exists(), line  # nothing was created on the way


def test_a_journal_path_under_a_file_is_refused_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    one_line(dealer_run(write_config(tmp_path, tmp_path / "a-file" / "journal.sqlite")), 2, "is not a directory")


def test_a_corrupt_journal_is_refused_with_exit_2(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    junk = os.urandom(64 * 1024)
    journal.write_bytes(junk)
    one_line(dealer_run(write_config(tmp_path, journal)), 2, "refusing to start", str(journal),
             "not a SQLite database")
    assert journal.read_bytes() == junk  # left as it was, for the person who has to look at it


def test_a_journal_damaged_where_only_the_replay_reads_is_refused_with_exit_2(tmp_path: Path) -> None:
    """Opening reads the last row; a damaged page of the index the replay reads is found by
    start-up's integrity check of the file (dealer/edge/preflight.py), before any driver starts
    or the broker is touched (it used to be found by the replay itself)."""
    journal = tmp_path / "journal.sqlite"
    j = Journal(journal, fsync=False)
    for _ in range(10):
        j.commit(Batch(events=[(TABLE, None, LinkDown(link="broker", at=1, reason="x" * 200)) for _ in range(100)]))
    j.checkpoint()
    j.close()
    with sqlite3.connect(journal) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events_by_round'").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with journal.open("r+b") as f:
        f.seek((root - 1) * page)
        f.write(bytes(page))  # a zeroed page: no valid b-tree page type
    last = refused_start(dealer_run(write_config(tmp_path, journal, log_level="warning", tables=[mqtt_table()])))
    assert last.startswith(f"dealer: refusing to start: journal {journal} is damaged (SQLite's integrity check:"), last
    assert f"Page {root}" in last


def test_a_journal_that_predates_the_hash_chain_is_refused_with_exit_2(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    with sqlite3.connect(journal) as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, table_id TEXT, type TEXT, body TEXT)")
    one_line(dealer_run(write_config(tmp_path, journal)), 2, "predates the hash chain")


def test_a_damaged_reader_state_row_is_refused_with_exit_2(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    Journal(journal).close()
    with sqlite3.connect(journal) as db:
        db.execute("INSERT INTO reader_state VALUES ('SC1', -5, 0, 'x', NULL, 0)")
    one_line(dealer_run(write_config(tmp_path, journal)), 2, "reader_state is damaged")


def test_a_metrics_port_in_use_exits_1_to_be_retried(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        one_line(dealer_run(write_config(tmp_path, tmp_path / "journal.sqlite", metrics_port=port)), 1,
                 "will be retried", f"127.0.0.1:{port}", "in use")


def test_the_journal_lock_is_exclusive_and_released_with_its_descriptor(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    fd = lock_journal(journal)
    assert Path(f"{journal}.lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(JournalLocked, match=rf"journal {journal} is in use by another dealer process \(pid {os.getpid()};"):
        lock_journal(journal)
    os.close(fd)
    os.close(lock_journal(journal))  # free again (a lock file left behind never blocks)
    with pytest.raises(JournalError, match="does not exist"):
        lock_journal(tmp_path / "gone" / "journal.sqlite")


def test_the_client_id_defaults_to_one_per_node_and_an_explicit_one_is_kept() -> None:
    assert load_settings(service={"node_id": "studio-host-2"}).mqtt.client_id == "dealer-studio-host-2"
    assert load_settings(mqtt={"client_id": "mine"}).mqtt.client_id == "mine"
    assert load_settings().mqtt.client_id == "dealer-studio-host-1"


@pytest.mark.timeout(120)
@pytest.mark.any_broker(kinds=["mosquitto"], reason="reads Mosquitto's log for the second instance's connection")
async def test_a_second_instance_on_the_same_journal_is_refused_and_never_touches_the_broker(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    mport = free_port()
    journal = tmp_path / "journal.sqlite"
    cfg = write_config(tmp_path, journal, broker_url=broker.url, metrics_port=mport, shoe=shoe.path)
    log = tmp_path / "first.log"
    first = DealerProcess(cfg, log).start()
    status = topics.backend_status(NODE)
    broker_log = broker.dir / "mosquitto.log"
    try:
        await wait_until(lambda: rec.expects(POSITIONS[0]), what="the first instance's NEXT A1")
        online = [m for t, m in rec.messages if t == status][-1]
        assert online["online"] is True
        seen = len(rec.messages)
        # the same config but for its metrics port (which alone would refuse it, exit 1): the
        # same journal, node and client id
        second = await asyncio.to_thread(dealer_run, cfg, DEALER_SERVICE__METRICS_PORT=str(free_port()))
        one_line(second, 2, "refusing to start", f"journal {journal} is in use by another dealer process",
                 f"(pid {first.pid};")
        # the first still deals a whole round: the barrier. A takeover of its client id, or its
        # will, would have reached the recorder before the result it publishes afterwards.
        for code, pos in zip(DEAL, POSITIONS):
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        key = f"{TABLE}:{round_id(journal, 1)}"
        await wait_until(lambda: rec.results(key), what="the result")
        assert rec.results(key)[0]["cards"] == dict(zip(POSITIONS, DEAL))
        assert first.running()
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
        assert "dealer_link_up" in body  # the first's metrics, still served
        # its retained status never went offline
        assert [m for t, m in rec.messages[seen:] if t == status] == []
        late = await Recorder(broker.url).start()  # a newcomer reads the retained status
        try:
            await wait_until(lambda: [m for t, m in late.messages if t == status], what="retained status")
            assert [m for t, m in late.messages if t == status] == [online]
        finally:
            await late.stop()
        # the second never connected: one connection under the node's client id in the broker's log
        assert broker_log.read_text().count(f" as dealer-{NODE} ") == 1, broker_log.read_text()[-3000:]
    finally:
        first.stop()
        await rec.stop()
        shoe.close()
    assert "Traceback" not in log.read_text()


def test_audit_verify_refuses_a_file_that_is_not_a_journal_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "journal.sqlite"
    bad.write_bytes(bytes(range(256)) * 256)
    proc = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "dealer audit verify:" in proc.stderr
