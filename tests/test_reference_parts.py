"""``dealer settle``, ``dealer station`` and ``dealer simulate`` against a real ``dealer run``.

Every part is a real process: Mosquitto (fixture), the backend, the simulated shoes, dealers and
players, the settlement service, the terminal station fed by a pipe."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dealer.cli.client_options import BadInput, choose_tables, one_line, table_list
from tools.station import StationView
from simulators.simulate import port_refusal
from tests.conftest import Broker, free_port, wait_until
from tests.harness_cli import run_cli, with_checkout

ROOT = Path(__file__).resolve().parent.parent


class Proc:
    """``python -m dealer ARGS`` in the background, stdout and stderr in files."""

    def __init__(self, tmp: Path, name: str, *args: str | Path, stdin: bytes | None = None) -> None:
        self.out, self.err = tmp / f"{name}.out", tmp / f"{name}.err"
        env = os.environ | {"PYTHONPATH": str(ROOT)}
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "dealer", *map(str, args)], cwd=ROOT, env=env,
                                         stdout=out, stderr=err,
                                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
        if stdin is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.out.read_text().splitlines() if x.startswith("{")]

    def text(self) -> str:
        return self.out.read_text()

    async def wait(self, timeout: float) -> int:
        return await asyncio.to_thread(self.proc.wait, timeout)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def write_config(tmp: Path, url: str, tables: str) -> Path:
    cfg = tmp / "dealer.toml"
    cfg.write_text(f"""
[service]
node_id = "rig-host"
journal_path = "{tmp / 'journal.sqlite'}"
metrics_enabled = false
log_level = "warning"
result_resend_seconds = 1

[mqtt]
url = "{url}"
client_id = "rig-backend"
{tables}""")
    return cfg


def table(tid: str, game: str, scanner: str, *, betting: float = 0.4, extra: str = "") -> str:
    return f"""
[[tables]]
id = "{tid}"
game = "{game}"
betting_seconds = {betting}
pause_seconds = 0.1
decision_seconds = 3
action_seconds = 3
{extra}
[tables.scanner]
{scanner}
""" + ("" if 'protocol = "beetek"' in scanner else "heartbeat_timeout = 3\n")


def journal(tmp: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{tmp / 'journal.sqlite'}?mode=ro", uri=True, timeout=10)


def acked_and_pending(tmp: Path) -> tuple[list[str], list[str]]:
    """The keys the backend journaled as acknowledged by settlement, and its outbox."""
    db = journal(tmp)
    try:
        acked = [f"{t}:{r}" for t, r in db.execute("SELECT table_id, round_id FROM events WHERE type = 'result_delivered'")]
        pending = [k for (k,) in db.execute("SELECT key FROM outbox")]
    finally:
        db.close()
    return acked, pending


def no_traceback(*procs: Proc) -> None:
    for p in procs:
        err = p.err.read_text()
        assert "Traceback" not in err, f"{p.err}: {err[-3000:]}"


# -- the rig: dealer run + dealer simulate + dealer settle --------------------------------------------


@pytest.mark.timeout(300)
async def test_simulate_and_settle_drive_dealer_run_every_result_applied_once_and_acknowledged(
        broker: Broker, tmp_path: Path):
    """A serial table (the simulator's PTY at the configured port path), a Bee-Tek shoe's table
    and an MQTT-scanner table (the simulator publishing as the gateway), Teen Patti and
    Sevenluck: three rounds
    each, every bet in the shared ledger's bet book, every result applied once by ``dealer
    settle`` and acknowledged, so the backend's outbox empties."""
    dev = tmp_path / "dev"
    dev.mkdir()
    port = dev / "shoe-T1"
    cfg = write_config(tmp_path, broker.url,
                       table("T1", "teen-patti", f'kind = "serial"\nport = "{port}"\nreader_id = "SC1"')
                       + table("T2", "sevenluck", 'kind = "mqtt"\nreader_id = "GW2"', extra="[tables.options]\nseats = 3\n")
                       + table("T3", "teen-patti", f'kind = "serial"\nport = "{dev / "shoe-T3"}"\nreader_id = "BT3"\n'
                                                   'protocol = "beetek"'))
    ledger = tmp_path / "ledger.sqlite"
    backend = Proc(tmp_path, "backend", "run", "--config", cfg)
    settle = Proc(tmp_path, "settle", "settle", "--config", cfg, "--ledger", ledger, "--log-level", "info")
    sim = Proc(tmp_path, "simulate", "simulate", "--config", cfg, "--rounds", "3", "--ledger", ledger,
               "--seed", "5", "--faults", "0.05")
    try:
        assert await sim.wait(200) == 0, sim.err.read_text()[-3000:]
        assert not port.exists(), "the simulator removes its PTY symlink when it stops"
        finished = [x for x in sim.lines() if x["event"] == "round_finished"]
        stopped = sim.lines()[-1]
        assert stopped["event"] == "stopped" and all(stopped["rounds"][t] >= 3 for t in ("T1", "T2", "T3"))
        assert stopped["bets_sent"] > 0
        keys = {f"{x['table_id']}:{x['round_id']}" for x in finished}

        def settled() -> bool:
            acked, pending = acked_and_pending(tmp_path)
            return keys <= set(acked) and not pending

        await wait_until(settled, timeout=60, what="every finished round acknowledged and the outbox empty")
        acked, pending = acked_and_pending(tmp_path)
        assert pending == [] and sorted(acked) == sorted(set(acked)), "acknowledged once each"
        applied = [x for x in settle.lines() if x["event"] == "result_applied"]
        applied_keys = [x["idempotency_key"] for x in applied]
        assert keys <= set(applied_keys) and len(applied_keys) == len(set(applied_keys)), "applied once each"
        assert not [x for x in settle.lines() if x["event"] in ("reconciliation_mismatch", "bad_message", "not_applied")]
        db = sqlite3.connect(ledger)
        try:
            assert sorted(k for (k,) in db.execute("SELECT key FROM applied")) == sorted(applied_keys)
            settled_bets = db.execute("SELECT COUNT(*) FROM ledger WHERE bet_type != 'play'").fetchone()[0]
            booked = db.execute("SELECT COUNT(*) FROM bets WHERE round_id IN (SELECT json_extract(result, '$.round_id') "
                                "FROM applied)").fetchone()[0]
            results = [json.loads(r) for (r,) in db.execute("SELECT result FROM applied")]
        finally:
            db.close()
        assert settled_bets == booked > 0, "every bet of a settled round has its ledger line"
        sevenluck = [r for r in results if r["table_id"] == "T2" and r["outcome"] == "COMPLETED" and r["decisions"]]
        assert sevenluck and all(d["by"] == "player" for r in sevenluck for d in r["decisions"].values()), \
            "the simulated Sevenluck players decide themselves"
        assert settle.stop() == 0
        assert settle.lines()[-1]["event"] == "stopped" and settle.lines()[-1]["results_applied"] == len(applied_keys)
    finally:
        sim.stop()
        settle.stop()
        backend.stop()
    no_traceback(backend, settle, sim)


# -- the station: close betting, confirm the steps -----------------------------------------------------


@pytest.mark.timeout(300)
async def test_station_closes_betting_and_confirms_wash_and_shuffle_while_simulate_deals(
        broker: Broker, tmp_path: Path):
    """A stud table whose betting would stay open for ten minutes: the dealer at ``dealer
    station`` (commands piped in) closes it once two players sit, confirms WASH and SHUFFLE
    (the simulator's dealer, told ``--no-station``, leaves them to the station), and the
    simulator deals the hand to its end; the station shows the prompts and every card."""
    dev = tmp_path / "dev"
    dev.mkdir()
    cfg = write_config(tmp_path, broker.url, table("ST1", "stud", f'kind = "serial"\nport = "{dev / "shoe"}"\n'
                                                   'reader_id = "SR1"', betting=600,
                                                   extra="[tables.options]\nseats = 3\n"))
    script = b"wait bets 3\nclose\nwait CONFIRM WASH\nconfirm WASH\nwait CONFIRM SHUFFLE\nconfirm\nwait DONE\ncards\n"
    backend = Proc(tmp_path, "backend", "run", "--config", cfg)
    station = Proc(tmp_path, "station", "station", "ST1", "--config", cfg, stdin=script)
    sim = None
    try:
        # no round opens before the simulator's reader is heard: the station sees the first one open
        await wait_until(lambda: "connected" in station.text(), timeout=30, what="the station connected")
        sim = Proc(tmp_path, "simulate", "simulate", "--config", cfg, "--rounds", "1", "--no-station", "ST1",
                   "--seed", "2", "--deal-interval", "0.01")
        assert await station.wait(200) == 0, station.text()[-3000:] + station.err.read_text()[-2000:]
        assert await sim.wait(60) == 0, sim.err.read_text()[-3000:]
        text = station.text()
        assert "betting closed by dealer: 3 bet(s)" in text
        assert "CONFIRM | " in text and "WASH confirmed" in text and "SHUFFLE confirmed" in text
        assert "sent    | dealer_confirm WASH" in text and "sent    | close_betting" in text
        assert "NEXT    | " in text and "card    | P1.3" in text and "DONE    | " in text and "RESULT  | winner " in text
        assert "REFUSED" not in text
        cards = [x for x in text.splitlines() if x.startswith("cards   | ")]
        assert any("BURN1 burn" in x and "P2.3 " in x for x in cards), cards
        db = journal(tmp_path)
        try:
            kinds = [(t, json.loads(b)) for t, b in db.execute(
                "SELECT type, body FROM events WHERE type IN ('close_betting', 'dealer_confirm') ORDER BY id")]
        finally:
            db.close()
        assert [(t, b.get("by") or b.get("step")) for t, b in kinds] == [
            ("close_betting", "dealer"), ("dealer_confirm", "WASH"), ("dealer_confirm", "SHUFFLE")]
        assert all(b["command_id"].startswith("st-ST1-") for _, b in kinds)
        assert [x["outcome"] for x in sim.lines() if x["event"] == "round_finished"] == ["COMPLETED"]
    finally:
        station.stop()
        if sim is not None:
            sim.stop()
        backend.stop()
    no_traceback(backend, station, *([sim] if sim else []))


# -- each part with its own role on the studio's ACL --------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_each_part_logs_in_as_its_own_role_on_the_studio_acl(tmp_path: Path):
    """The deployed Mosquitto configuration with TLS and the ACL ``dealer deploy acl`` renders:
    the backend as ``dealer-backend``, ``dealer settle`` as ``settlement`` (it may only read
    results and acknowledge them), ``dealer station`` as ``station-T1`` (it may only command
    its own table), ``dealer simulate`` as a rig user of this test. The station closes betting,
    the simulator deals, settlement applies and acknowledges; a wrong password is refused."""
    from dealer.edge.config import load_settings
    from tools.deploy import render_acl
    from simulators.secure_broker import SecureMosquitto, make_test_ca

    for tool in ("mosquitto", "mosquitto_passwd", "openssl"):
        if not any(Path(d, tool).exists() for d in ("/usr/sbin", "/usr/bin")):
            pytest.fail(f"{tool} is not installed: run scripts/test (it installs the Debian packages the tests need)")
    certs = make_test_ca(tmp_path / "tls")
    users = {"dealer-backend": "pw-backend", "settlement": "pw-settlement", "station-T1": "pw-station", "rig": "pw-rig"}
    pw: dict[str, Path] = {}
    for user, password in users.items():
        pw[user] = tmp_path / f"{user}.pw"
        pw[user].write_text(password + "\n")
        pw[user].chmod(0o600)
    work = tmp_path / "broker"
    work.mkdir()
    # the broker's ports are needed in the config, the config in the ACL: render from a first draft
    draft = write_config(tmp_path, "mqtt://127.0.0.1:1", table("T1", "teen-patti", 'kind = "mqtt"\nreader_id = "GW1"',
                                                                betting=600))
    acl = render_acl(load_settings(draft)) + "\n# test only: the simulated rig (scanner, dealer, players)\n" \
        "user rig\ntopic readwrite studio/v1/tables/#\n"
    broker = SecureMosquitto(work, certs, users, acl)
    broker.start()
    cfg = write_config(tmp_path, broker.tls_url, table("T1", "teen-patti", 'kind = "mqtt"\nreader_id = "GW1"',
                                                       betting=600))
    text = cfg.read_text().replace('client_id = "rig-backend"\n', 'client_id = "rig-backend"\nusername = "dealer-backend"\n'
                                   f'password_file = "{pw["dealer-backend"]}"\nca_file = "{certs / "ca.crt"}"\n')
    cfg.write_text(text)
    ledger = tmp_path / "ledger.sqlite"
    procs: list[Proc] = []
    try:
        procs.append(Proc(tmp_path, "backend", "run", "--config", cfg))
        procs.append(settle := Proc(tmp_path, "settle", "settle", "--config", cfg, "--ledger", ledger,
                                    "--username", "settlement", "--password-file", pw["settlement"]))
        procs.append(station := Proc(tmp_path, "station", "station", "T1", "--config", cfg, "--username", "station-T1",
                                     "--password-file", pw["station-T1"], stdin=b"wait bets 3\nclose\nwait DONE\n"))
        await wait_until(lambda: "connected" in station.text(), timeout=30, what="the station connected")
        procs.append(sim := Proc(tmp_path, "simulate", "simulate", "--config", cfg, "--rounds", "1", "--ledger", ledger,
                                 "--username", "rig", "--password-file", pw["rig"], "--seed", "4"))
        assert await station.wait(120) == 0, station.text()[-2000:] + station.err.read_text()[-2000:]
        assert "betting closed by dealer" in station.text() and "REFUSED" not in station.text()
        assert await sim.wait(60) == 0, sim.err.read_text()[-2000:]
        key = next(f"T1:{x['round_id']}" for x in sim.lines() if x["event"] == "round_finished")

        def settled() -> bool:
            acked, pending = acked_and_pending(tmp_path)
            return key in acked and not pending

        await wait_until(settled, timeout=60, what="the result acknowledged by settlement and the outbox empty")
        applied = [x for x in settle.lines() if x["event"] == "result_applied" and x["idempotency_key"] == key]
        assert len(applied) == 1 and applied[0]["bets"] >= 3 and applied[0]["outcome"] == "COMPLETED"
        assert not [x for x in settle.lines() if x["event"] == "reconciliation_mismatch"]
        wrong = run_cli("station", "T1", "--config", cfg, "--username", "station-T1", "--password", "wrong",
                        "--connect-timeout", "2", env=with_checkout())
        _one_clear_line(wrong, "dealer station: cannot connect to the broker", "mqtts://")
    finally:
        for p in reversed(procs):
            p.stop()
        broker.stop()
    no_traceback(*procs)


# -- the settlement service alone --------------------------------------------------------------------------


def _result(round_id: str, bets: list[tuple[str, str, str, str]]) -> bytes:
    """A Teen Patti round played through the real core; its result's bytes."""
    from dealer.edge.config import TableConfig
    from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ScanRead
    from dealer.core.messages import RoundResult
    from dealer.core.table import Table

    cfg = TableConfig(id="T1", game="teen-patti", scanner={"kind": "serial", "port": "/dev/null", "reader_id": "R1"})
    t = Table(cfg.rules())
    t.handle(OpenRound(round_id=round_id, at=1, betting_closes_at=2))
    for bet_id, player, bet_type, stake in bets:
        assert t.handle(PlaceBet(bet_id=bet_id, player_id=player, bet_type=bet_type, stake=stake, at=1)).accepted
    t.handle(CloseBetting(at=2))
    for code in ["AS", "KS", "AD", "KH", "AC", "KC"]:
        step = t.handle(ScanRead(reader="R1", code=code, at=3))
    return next(e for e in step.effects if isinstance(e, RoundResult)).model_dump_json().encode()


async def test_settle_applies_once_acknowledges_every_delivery_and_survives_bad_messages(
        broker: Broker, tmp_path: Path):
    """``dealer settle``'s service: a result is applied once and acknowledged at every delivery
    (the first acknowledgement may be the lost one); junk on the results topic is reported and
    changes nothing; SIGTERM's stop prints the totals."""
    import io

    import structlog

    from dealer.cli.client_options import BrokerOptions
    from tools.settle import run_settle
    from simulators.settlement import open_ledger
    from tests.harness import Recorder

    logging_before = structlog.get_config()
    ledger = tmp_path / "ledger.sqlite"
    book = open_ledger(ledger)  # the player platform's bet book: two bets, one never accepted
    book.executemany("INSERT INTO bets VALUES (?, ?, ?, ?, ?, ?)", [
        ("b1", "T1-000001", "p1", "player_a", "10.00", None), ("b2", "T1-000001", "p2", "tie", "5.00", None)])
    book.close()
    result = _result("T1-000001", [("b1", "p1", "player_a", "10.00")])
    rec = await Recorder(broker.url, settles=False).start()
    out, stop = io.StringIO(), asyncio.Event()
    task = asyncio.create_task(run_settle(BrokerOptions(broker.url, None, None, None, 10), ["T1"], ledger,
                                          "settle-under-test", stop, out=out))
    lines = lambda: [json.loads(x) for x in out.getvalue().splitlines()]  # noqa: E731
    acks = lambda: [m for t, m in rec.messages if t.endswith("/results/ack")]  # noqa: E731
    try:
        await wait_until(lambda: any(x["event"] == "started" for x in lines()), what="settle started")
        for payload in (b"{not json", b'{"schema_id": "studio.v1.round_result"}', result, result):
            await rec.bus.publish("studio/v1/tables/T1/results", payload)
        await wait_until(lambda: len(acks()) == 2, what="both deliveries acknowledged")
        assert acks() == [{"idempotency_key": "T1:T1-000001", "result_sha256": hashlib.sha256(result).hexdigest(),
                           "round_id": "T1-000001"}] * 2
        events = [x["event"] for x in lines()]
        assert events.count("bad_message") == 2 and events.count("result_applied") == 1
        assert events.count("result_repeat") == 1 and "reconciliation_mismatch" not in events
        applied = next(x for x in lines() if x["event"] == "result_applied")
        assert (applied["bets"], applied["staked"], applied["returned"]) == (2, "15.00", "24.50")  # A wins 0.95:1
        stop.set()
        totals = await task
        assert totals["results_applied"] == 1 and totals["repeats"] == 1 and totals["bad_messages"] == 2
        assert lines()[-1]["event"] == "stopped"
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await rec.stop()
        structlog.configure(**logging_before)  # run_settle configures the logs of the process
    db = sqlite3.connect(ledger)
    try:
        assert sorted(db.execute("SELECT bet_id, outcome, returned FROM ledger")) == [
            ("b1", "WIN", "19.50"), ("b2", "NOT_ACCEPTED", "5.00")]
    finally:
        db.close()


async def test_simulate_leaves_out_what_it_is_told_to(broker: Broker, tmp_path: Path):
    """``--no-dealer`` (a real shoe and dealer there: no PTY at the port path) and
    ``--no-players``: simulate runs without them, and SIGTERM stops it cleanly (a station too,
    in the middle of a ``wait``)."""
    dev = tmp_path / "dev"
    dev.mkdir()
    cfg = write_config(tmp_path, broker.url,
                       table("T1", "teen-patti", f'kind = "serial"\nport = "{dev / "shoe-T1"}"\nreader_id = "SC1"')
                       + table("T2", "teen-patti", f'kind = "serial"\nport = "{dev / "shoe-T2"}"\nreader_id = "SC2"'))
    sim = Proc(tmp_path, "simulate", "simulate", "--config", cfg, "--no-dealer", "T1", "--no-players")
    station = Proc(tmp_path, "station", "station", "T1", "--config", cfg, stdin=b"wait DONE 300\n")
    try:
        await wait_until(lambda: "connected" in station.text(), timeout=30, what="the station connected")
        assert station.stop() == 0, "SIGTERM stops the station in the middle of a wait, like quit"
        await wait_until(lambda: sim.lines(), timeout=30, what="simulate started")
        started = sim.lines()[0]
        assert started["event"] == "started" and started["tables"]["T1"]["dealer"] is False
        assert started["tables"]["T2"]["dealer"] is True and not started["tables"]["T2"]["bets"]
        assert not (dev / "shoe-T1").exists() and os.readlink(dev / "shoe-T2").startswith("/dev/pts/")
        assert sim.stop() == 0
        assert sim.lines()[-1]["event"] == "stopped" and not (dev / "shoe-T2").exists()
    finally:
        sim.stop()
        station.stop()
    no_traceback(sim, station)


# -- pure parts ------------------------------------------------------------------------------------------


def test_station_view_shows_prompts_cards_and_answers_to_its_own_commands():
    v = StationView("T1")

    def ev(event: str, round_id: str | None = "T1-x-000001", **data: Any) -> bytes:
        return json.dumps({"table_id": "T1", "round_id": round_id, "event": event, "at": 1, "data": data}).encode()

    def prompt(kind: str, message: str, **kw: Any) -> bytes:
        return json.dumps({"table_id": "T1", "round_id": "T1-x-000001", "kind": kind, "message": message,
                           "at": 2, **kw}).encode()

    assert v.command(["close"]) == (None, "        | no round yet: wait until the station shows one")
    assert v.on_event(ev("round_opened")) == ["--- round T1-x-000001: betting open"] and v.reached(["betting"])
    cmd, answer = v.command(["close"])
    assert answer is None and cmd is not None and cmd["type"] == "close_betting" and cmd["round_id"] == "T1-x-000001"
    assert v.on_event(ev("rejected", None, type="close_betting", reason="betting is not open",
                         command_id=cmd["command_id"])) == ["REFUSED | close_betting: betting is not open"]
    assert v.on_event(ev("rejected", None, type="place_bet", reason="x", command_id="someone-else")) == []
    assert v.on_prompt(prompt("NEXT", "deal A1 (face up)", position="A1", step=1, of=6)) == [
        "NEXT    | deal A1 (face up)  [step 1/6]"]
    assert v.on_prompt(prompt("NEXT", "deal A1 (face up)", position="A1", step=1, of=6)) == [], "a copy is not shown"
    assert v.on_event(ev("card_registered", position="A1", step=1, card="QH")) == ["card    | A1       Q♥   (1 registered)"]
    v.on_event(ev("card_registered", position="B1", step=2, card=None))
    assert v.cards_line() == "cards   | A1 Q♥ · B1 face down"
    assert v.on_event(ev("cards_revealed", cards={"B1": "2C"})) == ["REVEAL  | B1 2♣"]
    assert v.cards_line() == "cards   | A1 Q♥ · B1 2♣"
    assert v.command(["confirm"])[1].startswith("        | nothing to confirm now")
    v.on_prompt(prompt("CONFIRM", "confirm WASH", position="WASH", step=3, of=9))
    assert v.command(["confirm", "shuffle"])[1] == "        | the station asks to confirm WASH, not SHUFFLE"
    cmd, _ = v.command(["confirm"])
    assert cmd is not None and cmd["step"] == "WASH" and cmd["type"] == "dealer_confirm"
    assert v.command(["expose", "p4.7!"])[1].startswith("        | expose: position")
    cmd, _ = v.command(["logon", "D-0042"])  # a table command: no round id
    assert cmd is not None and cmd["type"] == "dealer_logon" and cmd["dealer_id"] == "D-0042" and "round_id" not in cmd
    assert v.on_event(ev("command_accepted", type="dealer_logon", command_id=cmd["command_id"])) == [
        "        | dealer_logon accepted"]
    assert v.on_event(ev("dealer_logged_on", dealer_id="D-0042", previous="D-7")) == [
        "DEALER  | D-0042 logged on (after D-7)"]
    assert v.command(["logon", "D 1"])[1].startswith("        | logon: dealer_id")
    assert v.command(["dance"])[1] == "        | unknown command 'dance': type help"
    assert v.on_prompt(b"not json") == [] and v.on_event(b"[1]") == [] and v.on_prompt(b'{"kind": 5}') == []
    assert v.on_event(ev("rejected", None, reason="x", command_id=["a list"])) == []
    assert v.on_event(b'{"event": "card_registered", "data": [1, 2]}') == []


def test_port_refusal_replaces_only_a_simulator_pty_symlink(tmp_path: Path):
    assert port_refusal(str(tmp_path / "new")) is None
    assert "does not exist" in str(port_refusal(str(tmp_path / "nodir" / "shoe")))
    (tmp_path / "file").write_text("x")
    assert "is a file" in str(port_refusal(str(tmp_path / "file")))
    os.symlink("/dev/ttyUSB0", tmp_path / "real")
    assert "not to a pseudo-terminal" in str(port_refusal(str(tmp_path / "real")))
    os.symlink("/dev/pts/999", tmp_path / "ours")
    assert port_refusal(str(tmp_path / "ours")) is None


def test_table_lists_and_one_line_messages():
    assert table_list("T1, T2,T1") == ["T1", "T2"]
    with pytest.raises(BadInput):
        table_list("T1,T-2")
    with pytest.raises(BadInput, match="unknown table T9"):
        choose_tables(["T9"], ["T1"], "x.toml")
    assert choose_tables([], ["T1", "T2"], "x.toml") == ["T1", "T2"]
    assert one_line("invalid configuration:\n  tables.0.id: bad\n  mqtt.url: worse") == \
        "invalid configuration: tables.0.id: bad; mqtt.url: worse"


# -- bad input: one line, exit 2, nothing changed ---------------------------------------------------------


def _one_clear_line(out: subprocess.CompletedProcess[str], prefix: str, *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), out.stderr
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """``dealer ARGS`` in this process (the same code as the command, without a Python start-up
    per call), as a CompletedProcess."""
    import structlog

    from dealer.cli.main import main

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    logging_before = structlog.get_config()
    yield run
    structlog.configure(**logging_before)  # the commands configured logging onto this test's captured stderr


@pytest.mark.integration
def test_bad_input_to_settle_station_and_simulate_is_one_line_and_exit_2(tmp_path: Path, cli: Any):
    dead = f"mqtt://127.0.0.1:{free_port()}"
    dev = tmp_path / "dev"
    dev.mkdir()
    cfg = write_config(tmp_path, dead, table("T1", "teen-patti", f'kind = "serial"\nport = "{dev / "shoe"}"\n'
                                             'reader_id = "SC1"'))
    ledger = tmp_path / "ledger.sqlite"
    # dealer settle
    _one_clear_line(cli("settle", "--tables", "T1", "--ledger", ledger, "--broker", "http://x"),
                    "dealer settle: --broker", "mqtt://host:port")
    _one_clear_line(cli("settle", "--tables", "T1", "--ledger", ledger, "--broker", dead, "--connect-timeout", "0.5"),
                    "dealer settle: cannot connect to the broker", "within 0.5 s")
    _one_clear_line(cli("settle", "--config", cfg, "--tables", "T9", "--ledger", ledger),
                    "dealer settle: unknown table T9", "tables: T1")
    _one_clear_line(cli("settle", "--config", tmp_path / "missing.toml", "--ledger", ledger),
                    "dealer settle: --config", "does not exist")
    _one_clear_line(cli("settle", "--ledger", ledger, "--broker", dead), "dealer settle: give --tables")
    _one_clear_line(cli("settle", "--tables", "T1", "--ledger", tmp_path / "no" / "l.sqlite", "--broker", dead),
                    "dealer settle: --ledger", "does not exist")
    _one_clear_line(cli("settle", "--tables", "T1", "--ledger", ledger, "--broker", dead, "--ca-file", "ca.crt"),
                    "dealer settle: --ca-file given but the broker", "use mqtts://")
    assert not ledger.exists(), "a refused start creates no ledger"
    # dealer station
    _one_clear_line(cli("station", "T1", "--broker", "http://x"), "dealer station: --broker")
    _one_clear_line(cli("station", "T1", "--broker", dead, "--connect-timeout", "0.5"),
                    "dealer station: cannot connect to the broker")
    _one_clear_line(cli("station", "T9", "--config", cfg), "dealer station: unknown table T9")
    _one_clear_line(cli("station", "T/1", "--broker", dead), "dealer station: table 'T/1'")
    _one_clear_line(cli("station", "T1", "--broker", dead, "--password-file", tmp_path / "nope"),
                    "dealer station: --password-file", "cannot be read")
    # dealer simulate
    _one_clear_line(cli("simulate", "--config", tmp_path / "missing.toml"), "dealer simulate: --config")
    _one_clear_line(cli("simulate", "--config", cfg, "--tables", "T9"), "dealer simulate: unknown table T9")
    _one_clear_line(cli("simulate", "--config", cfg, "--no-dealer", "T7"), "dealer simulate: --no-dealer: unknown")
    _one_clear_line(cli("simulate", "--config", cfg, "--rounds", "0"), "dealer simulate: --rounds 0")
    _one_clear_line(cli("simulate", "--config", cfg, "--broker", "http://x"), "dealer simulate: --broker")
    _one_clear_line(cli("simulate", "--config", cfg, "--ledger", ledger, "--connect-timeout", "0.5"),
                    "dealer simulate: cannot connect to the broker")
    assert not (dev / "shoe").exists() and not ledger.exists(), "a refused start leaves no PTY symlink, no ledger"
    bad = tmp_path / "bad.toml"
    bad.write_text("[[tables]]\nid = 'T1'\ngame = 'poker'\n")
    _one_clear_line(cli("simulate", "--config", bad), "dealer simulate: --config: invalid configuration")


@pytest.mark.integration
def test_bad_starts_as_processes_are_one_line_without_traceback(tmp_path: Path):
    """The same refusals through a real process start: one line on stderr, exit 2."""
    dead = f"mqtt://127.0.0.1:{free_port()}"
    dev = tmp_path / "dev"
    dev.mkdir()
    cfg = write_config(tmp_path, dead, table("T1", "teen-patti", f'kind = "serial"\nport = "{dev / "shoe"}"\n'
                                             'reader_id = "SC1"'))
    _one_clear_line(run_cli("settle", "--config", cfg, "--ledger", tmp_path / "l.sqlite", "--connect-timeout", "1", env=with_checkout()),
                    "dealer settle: cannot connect to the broker", dead)
    _one_clear_line(run_cli("station", "T1", "--broker", "mqtt://", env=with_checkout()), "dealer station: --broker")
    (dev / "shoe").write_text("a real device would be here")
    _one_clear_line(run_cli("simulate", "--config", cfg, env=with_checkout()), "dealer simulate: table T1: serial port",
                    "is a file, not a simulator's PTY symlink")
    assert (dev / "shoe").read_text() == "a real device would be here"


def test_station_view_shows_the_retained_current_prompt_only_while_its_backend_runs():
    """A station that starts mid-deal shows the prompt the retained state carries at once when
    its backend is online under the same session, and warns (acting on nothing) when it is a
    dead backend's (protocol 2: the prompt is the state's ``prompt``)."""
    v = StationView("T1")
    status = "studio/v1/backends/n1/status"
    prompt = {"table_id": "T1", "round_id": "T1-x-000001", "kind": "NEXT", "message": "deal B1 (face down)",
              "position": "B1", "step": 2, "of": 6, "at": 5, "schema_id": "studio.v1.prompt"}
    current = {"table_id": "T1", "schema_id": "studio.v1.table_state", "node_id": "n1", "session": "s1.1",
               "version": 7, "stale": False, "prompt": prompt, "events": [], "prompts": []}
    assert v.on_state(json.dumps(current).encode()) == []  # no status heard yet: wait for it
    assert v.prompt is None and v.pending_state is not None and v.pending_state[0] == "n1"
    # the status comes later (on RabbitMQ, only once the station asks for its exact topic):
    # the state that waited for it is judged then
    assert v.on_status(status, json.dumps({"online": True, "session": "s1.1"}).encode()) == [
        "NEXT    | deal B1 (face down)  [step 2/6]"]
    assert v.pending_state is None
    assert v.on_state(json.dumps(current).encode()) == []  # the same state again: nothing new
    again = {**current, "version": 8, "prompt": {**prompt, "at": 6}}
    assert v.on_state(json.dumps(again).encode()) == [], "the same prompt in a later state is not shown again"
    v.on_status(status, json.dumps({"online": False, "session": "s1.1"}).encode())  # the last will
    later = {**current, "version": 9, "prompt": {**prompt, "kind": "RESCAN", "message": "scan B1 again"}}
    assert v.on_state(json.dumps(later).encode()) == ["STALE   | backend n1 is not running: do not act on RESCAN B1"]
    assert v.prompt is not None and v.prompt["kind"] == "NEXT", "a stale prompt never replaces the one on screen"
    assert v.on_state(json.dumps({**current, "stale": True}).encode())[0].startswith("STALE")
    assert v.on_state(b"not json") == [] and v.on_state(b"") == []


def test_station_view_shows_each_event_and_prompt_a_state_carries_once():
    """Protocol 2: the round events and prompts of a batch come in the state that follows it;
    the station shows each once (a state whose version it has shown brings nothing new) and
    shows a refusal from the live events."""
    v = StationView("T1")
    v.on_status("studio/v1/backends/n1/status", json.dumps({"online": True, "session": "s1.1"}).encode())
    rid = "T1-x-000001"

    def ev(event: str, **data: Any) -> dict[str, Any]:
        return {"table_id": "T1", "round_id": rid, "event": event, "at": 1, "data": data}

    def pr(kind: str, message: str, **kw: Any) -> dict[str, Any]:
        return {"table_id": "T1", "round_id": rid, "kind": kind, "message": message, "at": 2, **kw}

    def state(version: int, events: list[dict[str, Any]], prompts: list[dict[str, Any]]) -> bytes:
        return json.dumps({"table_id": "T1", "schema_id": "studio.v1.table_state", "node_id": "n1",
                           "session": "s1.1", "version": version, "stale": False,
                           "prompt": prompts[-1] if prompts else None, "events": events, "prompts": prompts}).encode()

    first = state(10, [ev("round_opened")], [pr("WAIT", "betting is open: do not deal")])
    assert v.on_state(first) == ["--- round T1-x-000001: betting open", "WAIT    | betting is open: do not deal"]
    assert v.reached(["betting"]) and v.on_state(first) == [], "the retained copy again: nothing new"
    cmd, _ = v.command(["close"])
    assert cmd is not None
    assert v.on_state(state(11, [ev("command_accepted", type="close_betting", command_id=cmd["command_id"]),
                                 ev("betting_closed", by="dealer", bets=0)],
                            [pr("NEXT", "deal A1 (face up)", position="A1"),
                             pr("NEXT", "deal B1 (face down)", position="B1")])) == [
        "        | close_betting accepted", "        | betting closed by dealer: 0 bet(s)",
        "NEXT    | deal A1 (face up)", "NEXT    | deal B1 (face down)"], "two prompts of one batch both show"
    assert v.on_state(state(11, [ev("card_registered", position="A1", card="QH")], [])) == [], "an old version"
    assert v.on_event(json.dumps(ev("rejected", type="close_betting", reason="betting is not open",
                                    command_id=cmd["command_id"])).encode()) == [
        "REFUSED | close_betting: betting is not open"]
