"""Logs are JSON, all of them (issue 14 item 5): our structlog events and every library's
``logging`` record alike, one object per line, exceptions included; levels that fit; no raw
frame or payload in a line."""

from __future__ import annotations

import pytest
import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import structlog

from dealer.edge.logs import configure_logging, formatter
from drivers.mqtt import _ClientLog
from tests.conftest import Broker, wait_until
from tests.harness import (DEAL, POSITIONS, READER, ROOT, TABLE, DealerProcess, HandShoe, Recorder, dealer_config,
                           mqtt_table, round_id, serial_table, strings)

LEVELS = {"debug", "info", "warning", "error", "critical"}
BYTES_REPR = re.compile(r"(^|[^A-Za-z0-9_])b['\"]")  # b'...' or b"...": raw bytes in a line
def _format(record_logger: str, emit: Any) -> list[str]:
    """What the root handler's formatter makes of the records ``emit`` logs on ``record_logger``."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter())
    lg = logging.getLogger(record_logger)
    lg.addHandler(handler)
    lg.propagate, lg.level = False, logging.DEBUG
    try:
        emit(lg)
    finally:
        lg.removeHandler(handler)
        lg.propagate, lg.level = True, logging.NOTSET
    return out.getvalue().splitlines()


def test_a_library_line_becomes_one_json_object() -> None:
    lines = _format("paho.test", lambda lg: lg.error("failed to receive on socket: %s",
                                                     "[Errno 104] Connection reset by peer"))
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["event"] == "failed to receive on socket: [Errno 104] Connection reset by peer"
    assert rec["level"] == "error" and rec["logger"] == "paho.test"
    assert rec["timestamp"].endswith("Z") and "T" in rec["timestamp"]


def test_an_exception_is_one_line_with_its_traceback_inside() -> None:
    def emit(lg: logging.Logger) -> None:
        try:
            {}["missing"]
        except KeyError:
            lg.exception("Task exception was never retrieved")

    lines = _format("asyncio", emit)
    assert len(lines) == 1, lines  # no multi-line traceback after the object
    rec = json.loads(lines[0])
    assert rec["level"] == "error" and rec["logger"] == "asyncio"
    assert rec["exception"].startswith("Traceback (most recent call last):")
    assert "KeyError: 'missing'" in rec["exception"]


def test_structlog_and_stdlib_records_share_one_stream_and_context() -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream, uncaught=False)
    try:
        structlog.contextvars.bind_contextvars(table_id="T9", round_id="T9-x-000001")
        try:
            structlog.get_logger("dealer.edge.service").info("link up", link="broker")
            structlog.get_logger("dealer.edge.service").debug("not at info")
            logging.getLogger("serial").warning("port %s gone", "/dev/ttyUSB0")
            try:
                1 / 0  # noqa: B018 (raises on purpose)
            except ZeroDivisionError:
                structlog.get_logger("drivers.mqtt").exception("message handler failed", topic="t")
        finally:
            structlog.contextvars.unbind_contextvars("table_id", "round_id")
    finally:
        configure_logging("warning", uncaught=False)
    recs = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(r["logger"], r["level"], r["event"]) for r in recs] == [
        ("dealer.edge.service", "info", "link up"), ("serial", "warning", "port /dev/ttyUSB0 gone"),
        ("drivers.mqtt", "error", "message handler failed")]
    assert all(r["table_id"] == "T9" and r["round_id"] == "T9-x-000001" and "timestamp" in r for r in recs)
    assert "ZeroDivisionError" in recs[2]["exception"]


@pytest.mark.integration
def test_an_uncaught_exception_is_one_json_line() -> None:
    code = ("from dealer.edge.logs import configure_logging\nimport threading\nconfigure_logging('info')\n"
            "t = threading.Thread(target=lambda: 1 / 0, name='worker'); t.start(); t.join()\n"
            "raise RuntimeError('boom')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1
    recs = [json.loads(line) for line in proc.stderr.splitlines()]
    assert [(r["level"], r["event"]) for r in recs] == [
        ("critical", "uncaught exception in thread worker"), ("critical", "uncaught exception")]
    assert "ZeroDivisionError" in recs[0]["exception"] and "RuntimeError: boom" in recs[1]["exception"]


def test_paho_connection_loss_becomes_the_cause_and_repeats_are_demoted() -> None:
    """paho's own error for a lost connection is folded into the bus's single ``mqtt
    disconnected`` warning; another warning is logged once per connection."""
    seen: list[tuple[int, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.getMessage()))

    adapter = _ClientLog()
    keep = Keep()
    adapter.logger.addHandler(keep)
    adapter.logger.setLevel(logging.DEBUG)
    try:
        adapter.log(logging.ERROR, "failed to receive on socket: %s", "[Errno 104] Connection reset by peer")
        adapter.log(logging.ERROR, "failed to receive on socket: %s", "[Errno 32] Broken pipe")
        adapter.warning("Message queue is full. Discarding message.")
        adapter.warning("Message queue is full. Discarding message.")
        assert adapter.cause == "failed to receive on socket: [Errno 104] Connection reset by peer"
        adapter.connected()
        adapter.warning("Message queue is full. Discarding message.")
    finally:
        adapter.logger.removeHandler(keep)
        adapter.logger.setLevel(logging.NOTSET)
    assert [lvl for lvl, _ in seen] == [logging.DEBUG, logging.DEBUG, logging.WARNING, logging.DEBUG, logging.WARNING]
    assert adapter.cause is None


# --- the real process ---------------------------------------------------------------------------


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"{path.name} line {n} is not JSON: {line[:300]!r}") from None
        assert isinstance(rec, dict) and rec.get("level") in LEVELS, f"{path.name} line {n}: {line[:300]}"
        assert rec.get("event") and rec.get("timestamp") and rec.get("logger"), f"{path.name} line {n}: {line[:300]}"
        out.append(rec)
    return out


async def test_dealer_run_logs_only_json_through_a_broker_restart(broker: Broker, tmp_path: Path,
                                                                   pty_dir: Path) -> None:
    shoe = HandShoe(pty_dir)
    rec = await Recorder(broker.url).start()
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    cfg = dealer_config(tmp_path, broker_url=broker.url, node_id="log-host", client_id="backend-logs",
                        tables=[serial_table(shoe.path)])
    backend = DealerProcess(cfg, err, stdout=out).start()

    def logged(event: str) -> list[dict[str, Any]]:
        found = []
        for line in err.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("event") == event:
                found.append(r)
        return found

    try:
        for code, pos in zip(DEAL, POSITIONS):  # one round dealt: every frame logged nowhere
            await wait_until(lambda: rec.expects(pos), what=f"NEXT {pos}")
            shoe.scan(code)
        key = f"{TABLE}:{round_id(tmp_path / 'journal.sqlite', 1)}"
        await wait_until(lambda: rec.results(key), what="the first result")
        await wait_until(lambda: rec.expects("A1", round_id(tmp_path / "journal.sqlite", 2)), what="round 2 dealing")
        shoe.scan(DEAL[0])  # a card in flight when the broker dies
        broker.kill()
        await wait_until(lambda: logged("mqtt disconnected"), what="the backend noticing the broker is gone")
        await wait_until(lambda: logged("publish dropped"), what="a live message dropped while the broker is down")
        broker.start()  # same port: the backend and the recorder reconnect
        await wait_until(lambda: len(logged("mqtt connected")) == 2, timeout=30, what="the backend reconnected")
        await wait_until(lambda: rec.bus.connected, what="the recorder reconnected")
        assert backend.terminate() == 0
    finally:
        if backend.running():
            backend.kill()
        await rec.stop()
        shoe.close()

    assert _records(out) == []  # stdout carries nothing: the logs are on stderr
    recs = _records(err)
    for r in recs:  # no raw frame, no payload: a message is named by kind, topic, key, size
        for text in strings(r):
            assert f"${READER}," not in text, r
            assert '"table_id"' not in text and not BYTES_REPR.search(text), r
    # levels fit: a link coming back is info, losing it a warning; one line per change of state
    by_event: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        by_event.setdefault(r["event"], []).append(r)
    assert {r["level"] for r in by_event["link up"]} == {"info"}  # the scanner's
    assert [r["level"] for r in by_event["mqtt connected"]] == ["info", "info"]
    assert [r["level"] for r in by_event["mqtt disconnected"]] == ["warning"]
    # the broker's link is said once, by the bus, not once more per table (issue 28)
    assert [r["link"] for r in by_event["link up"]] == [f"scanner:{READER}"], by_event["link up"]
    assert "link down" not in by_event, by_event.get("link down")
    # a dropped publish names its kind, topic and round, never its payload (protocol 2: the round's
    # events and prompts go in the table's state, whose news lost is one line of kind table_state)
    dropped = by_event["publish dropped"]
    assert all(r["level"] == "warning" and r["kind"] in ("table_state", "player") and r["topic"].startswith(
        f"studio/v1/tables/{TABLE}/") and "payload" not in r for r in dropped), dropped
    assert any(r.get("round_id") == round_id(tmp_path / "journal.sqlite", 2) for r in dropped), dropped
    assert not [r for r in recs if r["level"] in ("error", "critical")], [r for r in recs if r["level"] in ("error", "critical")]


async def test_a_backend_started_before_its_broker_says_so_in_one_line_not_one_per_table(
        broker: Broker, tmp_path: Path, pty_dir: Path) -> None:
    """Before the first broker connection, every table's first prompt (and rules event) has
    nowhere to go: at a thousand tables that used to be two thousand "publish dropped" lines at
    every start. Now they are counted, said in one line at the first connect, and every table's
    prompt goes out then."""
    broker.kill()  # the backend starts first
    shoe = HandShoe(pty_dir)
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    tables = [serial_table(shoe.path)] + [mqtt_table(reader=f"R{n}") | {"id": f"T{n}"} for n in range(2, 5)]
    cfg = dealer_config(tmp_path, broker_url=broker.url, node_id="early", client_id="backend-early", tables=tables)
    backend = DealerProcess(cfg, err, stdout=out).start()
    rec = None
    try:
        await wait_until(lambda: "mqtt disconnected" in err.read_text(), what="the backend failing to reach the broker")
        broker.start()
        rec = await Recorder(broker.url).start()
        await wait_until(lambda: "live messages not sent before the first broker connection" in err.read_text(),
                         what="the one line at the first connect")
        await wait_until(lambda: {m["table_id"] for m in rec.prompts()} >= {TABLE, "T2", "T3", "T4"},
                         what="every table's prompt after the connect")
        assert backend.terminate() == 0
    finally:
        if backend.running():
            backend.kill()
        if rec is not None:
            await rec.stop()
        shoe.close()
    recs = _records(err)
    assert not [r for r in recs if r["event"] == "publish dropped"], [r for r in recs if r["event"] == "publish dropped"]
    said = [r for r in recs if r["event"].startswith("live messages not sent before the first broker connection")]
    assert len(said) == 1 and said[0]["count"] >= 4, said


def test_a_library_warning_repeated_at_every_retry_is_said_once_a_minute() -> None:
    """psycopg_pool warns at every reconnection attempt while the database is down: the first
    goes out, the repeats of the same message within the minute do not; another message does."""
    from dealer.edge.logs import Throttle

    def emit(lg: logging.Logger) -> None:
        lg.addFilter(Throttle(60.0))
        for n in range(5):
            lg.warning("reconnection attempt in pool %r failed after %s sec", "dealer-journal-writer", n)
        lg.warning("error connecting in %r: %s", "dealer-journal-writer", "connection refused")
    lines = [json.loads(line)["event"] for line in _format("psycopg.pool.test", emit)]
    assert lines == ["reconnection attempt in pool 'dealer-journal-writer' failed after 0 sec",
                     "error connecting in 'dealer-journal-writer': connection refused"]
