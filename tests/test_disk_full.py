"""A full disk under the journal at run time (issue 13 item 7): a real, small tmpfs mounted by
the test (we run as root), filled to the last byte, then freed.

While a group commit fails the service keeps running: the batch it could not write is held
(nothing of it is published) and retried with backoff, commands are refused with
``journal_unavailable``, the dealer station is told to stop dealing, decision timers pause.
When space returns the held batch commits, a journaled ``Resume(link="journal")`` gives the
pending decision a full new window, and the round completes with its result delivered once.

To make the first commit after the fill fail for certain, the test first truncates the WAL
(a checkpoint from its own connection, as any SQLite client may): otherwise SQLite would go on
reusing WAL space it already holds, and the failure would come some commits later."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dealer.edge import topics
from dealer.core.commands import StoredCommand
from dealer.core.events import OpenRound, PlaceBet
from dealer.edge.journal import Batch, Journal
from dealer.edge.journal_health import disk_usage, failure_reason
from drivers.mqtt import MqttBus
from simulators.settlement import SettlementConsumer
from tests.conftest import Broker, free_port, wait_until
from tests.harness import HandShoe, Recorder, start_service, stop_service
from tests.harness_sevenluck import T, deal_cards, private, resumed, sevenluck_settings, two_antes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 8 MiB tmpfs of its own, unmounted at the end whatever happened."""
    d = tmp_path / "small-fs"
    d.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(d)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the disk-full test (it needs root): {proc.stderr.strip()}")
    try:
        yield d
    finally:
        if subprocess.run(["umount", str(d)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


def truncate_wal(journal: Path) -> None:
    """Copy the WAL into the database and cut it to 0 bytes (retried while another checkpoint runs)."""
    db = sqlite3.connect(journal, isolation_level=None, timeout=10)
    try:
        for _ in range(100):
            busy, _log, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return
        raise AssertionError("the WAL could not be truncated")
    finally:
        db.close()


def fill(directory: Path) -> Path:
    """Write a file until the file system has not one byte left."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == 28, exc  # ENOSPC
    finally:
        os.close(fd)
    assert os.statvfs(directory).f_bavail == 0
    return filler


@pytest.mark.integration
def test_a_commit_on_a_full_disk_writes_nothing_and_the_same_batch_commits_later(small_fs: Path):
    """Journal.commit is safe to retry: a failure leaves no row and keeps the chain head, so
    the same batch commits later with the same row ids, one outbox row and one command id."""
    path = small_fs / "j.sqlite"
    j = Journal(path)
    try:
        j.commit(Batch(events=[("T1", "T1-000001", OpenRound(round_id="T1-000001", at=1))]))
        bet = PlaceBet(bet_id="b1", player_id="p1", bet_type="tie", stake="1", round_id="T1-000001", at=2)
        cmd = StoredCommand("T1", "c-1", "T1-000001", "place_bet", "player_platform", "d" * 64, {"answer": "accepted"})
        batch = Batch(events=[("T1", "T1-000001", bet)], commands=[(cmd, 0)],
                      outbox=[("T1:T1-000001", "studio/v1/tables/T1/results", b"{}", "T1", "T1-000001")])
        truncate_wal(path)
        filler = fill(small_fs)
        for _ in range(3):
            with pytest.raises(sqlite3.OperationalError) as err:
                j.commit(batch)
            assert failure_reason(err.value) == "disk_full"  # the real error, not "cannot rollback"
        assert j.count() == 1
        os.remove(filler)
        rows = j.commit(batch)
        assert [r.key for r in rows] == ["T1:T1-000001"] and j.count() == 2
        assert [r.id for r in j.rows()] == [1, 2] and j.verify_chain().ok
        assert j.command("T1", "player_platform", "c-1") is not None
        usage = disk_usage(path)
        assert usage.journal_bytes >= path.stat().st_size > 0
        assert usage.size_bytes == 8 << 20 and 0 < usage.free_bytes < usage.size_bytes
    finally:
        j.close()


def test_failure_reasons_come_from_sqlite_s_own_codes(tmp_path: Path):
    path = tmp_path / "ro.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as err:
        ro.execute("INSERT INTO t VALUES (1)")
    ro.close()
    assert failure_reason(err.value) == "read_only"
    assert failure_reason(sqlite3.OperationalError("disk I/O error")) == "io_error"  # no code: by its text
    assert failure_reason(sqlite3.OperationalError("something else")) == "other"


def sample(service, name: str, **labels: str) -> float:
    return service.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.timeout(120)
async def test_disk_full_during_a_decision_holds_everything_and_carries_on_when_space_returns(
        broker: Broker, small_fs: Path, pty_dir: Path, tmp_path: Path):
    shoe = HandShoe(pty_dir, reader="SC7")
    rec = await Recorder(broker.url).start()
    settle_bus = MqttBus(broker.url, client_id="settlement", persistent_session=True)
    consumer = SettlementConsumer(settle_bus, [T], tmp_path / "ledger.sqlite", rng=random.Random(7),
                                  place_bets=False, game="sevenluck")
    settle_task = asyncio.create_task(settle_bus.run())
    await settle_bus.wait_connected()
    scanner = {"kind": "serial", "port": shoe.path, "reader_id": "SC7", "heartbeat_timeout": 30}
    settings = sevenluck_settings(small_fs, broker.url, scanner, betting_seconds=1.0, decision_seconds=1.0)
    journal = small_fs / "journal.sqlite"
    service, task = await start_service(settings)
    service.commit_retry = (0.05, 0.4)  # the same doubling backoff, shorter: the test frees the disk soon
    filler: Path | None = None
    try:
        await wait_until(lambda: rec.events("round_opened"), what="round opened")
        await two_antes(rec)
        await deal_cards(service, rec, shoe, ["AS", "2H", "QH", "AD", "5D", "JH", "AC", "9S", "3H"])  # p1: three aces
        first = await wait_until(lambda: private(rec, "p1", "decision_required"), what="p1's decision required")
        await wait_until(lambda: private(rec, "p3", "decision_required"), what="p3's decision required")
        for p in ("p1", "p3"):  # and their retained states (sent after the batch's live messages)
            await wait_until(lambda: [m for t, m in rec.messages if t == topics.player_state(T, p)
                                      and m.get("decision")], what=f"{p}'s retained state with its decision")
        rnd = service.tables[T].current

        truncate_wal(journal)
        filler = fill(small_fs)
        before = len(rec.messages)
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p3", "action": "PLAY"})
        await wait_until(lambda: not service.journal_writable, what="the commit of p3's decision failing")
        assert rnd.decisions.keys() == {"p3"}  # applied in memory: the held batch
        assert sample(service, "dealer_journal_writable") == 0
        await wait_until(lambda: [p for p in rec.prompts("ALERT") if p["reason"] == "journal_unavailable"],
                         what="the station told to stop dealing")

        # input is refused at the edge, with a reason the sender sees
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        refused = await wait_until(lambda: private(rec, "p1", "rejected", before), what="p1's decision refused")
        assert "journal unavailable" in refused[0]["data"]["reason"]
        assert sample(service, "dealer_commands_refused_total", table=T, role="player_platform",
                      reason="journal_unavailable") == 1
        shoe.scan("KD")  # the dealer goes on passing a card
        await wait_until(lambda: any("NOT registered" in p["message"] for p in rec.prompts("ALERT")),
                         what="the card refused at the station")
        assert sample(service, "dealer_scan_reads_total", table=T, result="journal_unavailable") >= 1
        await wait_until(lambda: sample(service, "dealer_journal_disk_size_bytes") == 8 << 20
                         and sample(service, "dealer_journal_disk_free_bytes") == 0
                         and sample(service, "dealer_journal_bytes") > 0, what="the disk metrics of the full disk")

        await asyncio.sleep(2.5)  # the outage lasts longer than the decision window
        assert task.done() is False, "the service stopped"
        assert rnd.decisions.keys() == {"p3"}, "p1 was decided for while the journal was unavailable"
        armed = service.timers.armed.get(T)
        assert armed is None or armed[0][0] != "decide"
        assert sample(service, "dealer_journal_commit_failures_total", reason="disk_full") >= 2  # retried
        outage = [(t, m) for t, m in rec.messages[before:] if not t.endswith(("/actions", "/scanner"))]
        # protocol 2: an ALERT goes at once as the last state built before the outage again, with the
        # alert as its prompt (Publisher.announce); no state of the held batch, no player state
        volatile = {"version", "at", "prompt", "prompts", "events"}
        last = [m for t, m in rec.messages[:before] if t == topics.state(T)][-1]
        for t, m in outage:  # nothing of the held batch went out: only refusals and alerts
            if t == topics.state(T):
                assert m["prompt"]["kind"] == "ALERT" and m["events"] == [], m
                assert m["prompts"] and all(p["kind"] == "ALERT" for p in m["prompts"]), m
                assert {k: v for k, v in m.items() if k not in volatile} == \
                    {k: v for k, v in last.items() if k not in volatile}, "a state of the held batch went out"
                continue
            assert (t == topics.table_topic(T, "prompts") and m["kind"] == "ALERT") \
                or m.get("event") == "rejected" or m.get("kind") == "rejected", (t, m)

        seen = len(rec.messages)
        os.remove(filler)
        filler = None
        await wait_until(lambda: service.journal_writable, what="the held batch committed")
        assert sample(service, "dealer_journal_writable") == 1
        await wait_until(lambda: private(rec, "p3", "decision_accepted", seen), what="p3's answer, released")
        again = await wait_until(lambda: resumed(rec, "p1", seen), what="p1's decision given again")
        assert again[0]["data"]["closes_at"] > first[0]["data"]["closes_at"] + 2500
        assert not private(rec, "p3", "decision_required", seen)  # p3 has decided: not asked again
        await rec.command(topics.actions(T), {"type": "player_decision", "player_id": "p1", "action": "PLAY"})
        key = f"{T}:{rnd.round_id}"
        await wait_until(lambda: rec.results(key) and consumer.applied_keys() == [key], what="result settled")
        res = rec.results(key)[0]
        assert res["decisions"]["p1"] == {"action": "PLAY", "by": "player", "seat": 1, "play_stake": "10"}
        assert res["decisions"]["p3"]["by"] == "player"
        assert res["player_bets"]["p1"]["ante"]["outcome"] == "WIN"
        assert len(rec.results(key)) == 1
    finally:
        if filler is not None:
            os.remove(filler)
        await stop_service(task)
        settle_task.cancel()
        await asyncio.gather(settle_task, return_exceptions=True)
        consumer.close()
        await rec.stop()
        shoe.close()

    # the journal holds each decision once, the resume, and an unbroken chain
    j = Journal(journal)
    try:
        rows = [(r.type, json.loads(r.body)) for r in j.rows(T)]
    finally:
        j.close()
    decisions = [b["player_id"] for t, b in rows if t == "player_decision"]
    assert sorted(decisions) == ["p1", "p3"]
    assert [b["link"] for t, b in rows if t == "resume"][-1] == "journal"
    verify = subprocess.run([sys.executable, "-m", "dealer", "audit", "verify", "--journal", str(journal)],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _metrics(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _scrape(port: int) -> dict[str, float] | None:
    try:
        return _metrics(port)
    except OSError:
        return None


@pytest.mark.timeout(90)
async def test_a_dealer_run_process_survives_a_full_disk(broker: Broker, small_fs: Path, tmp_path: Path):
    """The real ``dealer run``: a commit on a full disk neither ends the process (systemd would
    restart it into the same full disk until it gives up) nor prints a traceback; the log says
    once that the journal is unwritable and once that it is writable again."""
    journal, mport = small_fs / "journal.sqlite", free_port()
    config = tmp_path / "dealer.toml"
    config.write_text(f"""
[service]
node_id = "disk-full-host"
journal_path = "{journal}"
metrics_port = {mport}
log_level = "info"

[mqtt]
url = "{broker.url}"

[[tables]]
id = "T1"
game = "teen-patti"

[tables.scanner]
kind = "mqtt"
reader_id = "GW1"
""")
    log = tmp_path / "backend.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    rec = await Recorder(broker.url).start()
    filler: Path | None = None
    try:
        await wait_until(lambda: (m := _scrape(mport)) and m.get('dealer_link_up{link="broker"}') == 1,
                         what="backend up and connected")
        truncate_wal(journal)
        filler = fill(small_fs)
        # an unsigned supervisor void: refused, and journaled as a security event: a commit
        await rec.publish(topics.supervisor("T1"), {"type": "supervisor_void", "command_id": "v-1",
                                                    "supervisor": "sup", "reason": "test", "round_id": "T1-000001"})
        await wait_until(lambda: (m := _scrape(mport)) and m.get("dealer_journal_writable") == 0
                         and m.get('dealer_journal_commit_failures_total{reason="disk_full"}', 0) >= 3,
                         what="the commit failing, and retried")
        await rec.command(topics.station("T1"), {"type": "close_betting", "round_id": "T1-000001"})
        await wait_until(lambda: any(e["data"].get("reason", "").startswith("journal unavailable")
                                     for e in rec.events("rejected")), what="a station command refused")
        assert proc.poll() is None, "dealer run ended on a full disk"
        os.remove(filler)
        filler = None
        await wait_until(lambda: (m := _scrape(mport)) and m.get("dealer_journal_writable") == 1,
                         what="the journal writable again")
        assert proc.poll() is None
    finally:
        if filler is not None:
            os.remove(filler)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=20)
        await rec.stop()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text
    assert text.count("journal unwritable:") == 1 and text.count("journal writable again:") == 1, text[-3000:]
    j = Journal(journal)
    try:
        assert [r.type for r in j.rows("T1")].count("security_event") == 1
        assert j.verify_chain().ok
    finally:
        j.close()


@pytest.mark.integration
def test_a_start_on_a_full_disk_exits_1_to_be_retried(small_fs: Path, tmp_path: Path):
    """A full disk at start-up may pass by itself: one line and exit 1 (the unit restarts with
    backoff), not exit 2, "a person must act", which the soak saw when a backend restarted into
    a full disk (SQLite needs room for its WAL index and schema even to open a journal)."""
    filler = fill(small_fs)
    config = tmp_path / "dealer.toml"
    config.write_text(f"""
[service]
node_id = "disk-full-start"
journal_path = "{small_fs / 'journal.sqlite'}"
metrics_enabled = false

[mqtt]
in_process = true  # the journal refuses before any broker would be reached

[[tables]]
id = "T1"
game = "teen-patti"

[tables.scanner]
kind = "mqtt"
reader_id = "GW1"
""")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "dealer", "run", "--config", str(config)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "file system is full" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    filler.unlink()  # space again: the same start goes through to the journal
    from dealer.edge.journal import Journal

    j = Journal(small_fs / "journal.sqlite")
    assert j.journal_id
    j.close()
