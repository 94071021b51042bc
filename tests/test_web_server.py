"""``dealer web`` (``dealer/web/server.py``): the pages, and the WebSocket path that forwards MQTT to
a real Mosquitto byte for byte, the broker's ACL staying the only gate.

* through the forwarder, paho (MQTT over WebSockets, as a browser speaks it) logs in as ``ops`` on
  a Mosquitto with passwords and the rendered ACL and reads a retained state; a wrong password is
  refused by the broker; a station cannot read another table, nor a player's topic;
* another origin, a text frame, a frame over the bound and one connection too many are refused,
  and the server goes on serving the others;
* the process: the start line with the real port, ``/site.json``, the CSP on every file, no way
  out of the static folder, a clean stop on SIGTERM, and bad input as one line and exit 2;
* the vendored mqtt.js is the file its VERSIONS.md names (SHA-256)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import paho.mqtt.client as paho
import pytest
from aiohttp import web

from dealer.edge import topics
from dealer.edge.config import load_settings
from dealer.web.server import CSP, STATIC, Site, Upstream, build_app
from simulators.broker import free_port
from simulators.secure_broker import SecureMosquitto, make_test_ca
from tools.deploy import render_acl
from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parent.parent
USERS = {"dealer-backend": "pw-b", "ops": "pw-ops", "station-T1": "pw-s1", "station-T2": "pw-s2"}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureMosquitto]:
    tmp = tmp_path_factory.mktemp("webbroker")
    s = load_settings(service={"metrics_enabled": False, "journal_path": tmp / "j.sqlite"},
                      tables=[{"id": t, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": f"R{t}"}}
                              for t in ("T1", "T2")])
    work = tmp / "broker"
    work.mkdir()
    b = SecureMosquitto(work, make_test_ca(tmp / "tls"), USERS, render_acl(s))
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
async def web_url(mosquitto: SecureMosquitto) -> AsyncIterator[str]:
    """The app served in this process (a real socket), forwarding to the broker's plain loopback listener."""
    app = build_app(Site(tables=(("T1", "teen-patti"), ("T2", "teen-patti"))),
                    Upstream("127.0.0.1", mosquitto.plain_port), max_connections=3, max_frame_bytes=4096)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _ws_client(url: str, user: str, password: str, subscribe: list[str]) -> tuple[paho.Client, list[Any], threading.Event]:
    """paho over WebSockets through the forwarder, as a browser: (client, messages, connack event)."""
    host, port = url.removeprefix("http://").split(":")
    got: list[Any] = []
    connack = threading.Event()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"ws-{user}", transport="websockets")
    c.ws_set_options(path="/mqtt", headers={"Origin": url})
    c.username_pw_set(user, password)

    def on_connect(client: paho.Client, userdata: Any, flags: Any, rc: Any, props: Any = None) -> None:
        c._rc = rc  # type: ignore[attr-defined]
        connack.set()
        if not rc.is_failure:
            for t in subscribe:
                client.subscribe(t, qos=1)

    c.on_connect = on_connect
    c.on_message = lambda client, userdata, msg: got.append((msg.topic, msg.payload))
    c.connect(host, int(port), keepalive=10)
    c.loop_start()
    return c, got, connack


def _publish_direct(b: SecureMosquitto, user: str, topic: str, payload: bytes, retain: bool = False) -> None:
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"direct-{user}")
    c.username_pw_set(user, USERS[user])
    c.connect("127.0.0.1", b.plain_port)
    c.loop_start()
    try:
        c.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()


async def test_mqtt_over_the_websocket_path_is_the_brokers_login_and_acl(mosquitto: SecureMosquitto, web_url: str) -> None:
    state = json.dumps({"table_id": "T1", "phase": "DEALING"}).encode()
    _publish_direct(mosquitto, "dealer-backend", topics.state("T1"), state, retain=True)
    _publish_direct(mosquitto, "dealer-backend", topics.state("T2"), b'{"table_id":"T2"}', retain=True)
    # paho blocks while it connects, and the forwarder runs on this test's event loop: connect from a thread
    ops, got, connack = await asyncio.to_thread(_ws_client, web_url, "ops", USERS["ops"], [topics.state("T1")])
    try:
        await wait_until(connack.is_set, 10, "ops connected")
        assert not ops._rc.is_failure  # type: ignore[attr-defined]
        await wait_until(lambda: got, 10, "the retained state through the forwarder")
        assert got[0] == (topics.state("T1"), state)
    finally:
        ops.disconnect()
        await asyncio.to_thread(ops.loop_stop)
    bad, _, connack = await asyncio.to_thread(_ws_client, web_url, "ops", "wrong", [])
    try:
        await wait_until(connack.is_set, 10, "the broker's answer")
        assert bad._rc.is_failure  # type: ignore[attr-defined]  # the broker refused: the forwarder judged nothing
    finally:
        await asyncio.to_thread(bad.loop_stop)
    station, got, connack = await asyncio.to_thread(
        _ws_client, web_url, "station-T1", USERS["station-T1"],
        [topics.state("T1"), topics.state("T2"), "studio/v1/tables/T1/players/ann"])
    try:
        await wait_until(lambda: got, 10, "the station's own table")
        _publish_direct(mosquitto, "dealer-backend", "studio/v1/tables/T1/players/ann", b'{"card":"AS"}')
        _publish_direct(mosquitto, "dealer-backend", topics.state("T1"), state, retain=True)  # a barrier: it arrives
        await wait_until(lambda: len(got) >= 2, 10, "the barrier")
        assert {t for t, _ in got} == {topics.state("T1")}  # never T2's state, never a player's topic
    finally:
        station.disconnect()
        await asyncio.to_thread(station.loop_stop)


async def test_another_origin_text_frames_big_frames_and_too_many_connections_are_refused(web_url: str) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
            await http.ws_connect(f"{web_url}/mqtt", protocols=("mqtt",), headers={"Origin": "https://evil.example"})
        assert exc.value.status == 403
        ws = await http.ws_connect(f"{web_url}/mqtt", protocols=("mqtt",), headers={"Origin": web_url})
        assert ws.protocol == "mqtt"
        await ws.send_str("CONNECT")
        msg = await ws.receive(timeout=5)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED) and ws.close_code == 1003
        big = await http.ws_connect(f"{web_url}/mqtt", protocols=("mqtt",))
        await big.send_bytes(b"\x00" * 5000)  # over max_frame_bytes (4096 here)
        msg = await big.receive(timeout=5)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED) and big.close_code == 1009
        held = [await http.ws_connect(f"{web_url}/mqtt", protocols=("mqtt",)) for _ in range(3)]  # the bound: 3
        with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
            await http.ws_connect(f"{web_url}/mqtt", protocols=("mqtt",))
        assert exc.value.status == 503
        for h in held:
            await h.close()
        async with http.get(f"{web_url}/healthz") as r:  # still serving
            assert r.status == 200
        await _wait_closed(http, web_url)


async def _wait_closed(http: aiohttp.ClientSession, url: str) -> None:
    async with asyncio.timeout(10):
        while True:
            async with http.get(f"{url}/healthz") as r:
                if (await r.json())["connections"] == 0:
                    return
            await asyncio.sleep(0.05)


def _start_web(tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    cfg = tmp / "web.toml"
    cfg.write_text(f"""
[service]
node_id = "n1"
journal_path = "{tmp / 'j.sqlite'}"
metrics_enabled = false
[mqtt]
url = "mqtt://127.0.0.1:1"
[[security.supervisors]]
id = "sup-x"
key_files = ["{tmp / 'sup.key'}"]
[[tables]]
id = "TP1"
game = "teen-patti"
[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
""")
    (tmp / "sup.key").write_text("ab" * 32)
    proc = subprocess.Popen([sys.executable, "-m", "dealer", "web", "--config", str(cfg), *extra], cwd=ROOT,
                            env=os.environ | {"PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, json.loads(line) if line.startswith("{") else {"error": line + proc.stderr.read()}  # type: ignore[union-attr]


async def test_dealer_web_serves_the_pages_with_the_csp_and_stops_cleanly(tmp_path: Path) -> None:
    proc, started = _start_web(tmp_path, "--listen", "127.0.0.1:0")
    try:
        assert started.get("event") == "web_started", started
        url = started["url"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url) and not url.endswith(":0")
        assert started["station"] == f"{url}/station?table=TP1" and started["floor"] == f"{url}/floor"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/site.json") as r:
                assert await r.json() == {"tables": [{"id": "TP1", "game": "teen-patti"}], "mqtt_path": "/mqtt",
                                          "supervisors": ["sup-x"], "node_ids": ["n1"]}
            for path in ("/", "/station", "/floor", "/static/station.js", "/static/vendor/mqtt.min.js"):
                async with http.get(f"{url}{path}") as r:
                    assert r.status == 200, path
                    assert r.headers["Content-Security-Policy"] == CSP and r.headers["X-Content-Type-Options"] == "nosniff"
            async with http.get(f"{url}/static/station.js") as r:
                assert r.headers["Content-Type"].startswith("text/javascript")
            for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/vendor/../../server.py",
                         "/static/", "/static/nothing.js"):
                async with http.get(f"{url}{path}") as r:
                    assert r.status == 404, path
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"event": "web_stopped"}
    assert "Traceback" not in err


async def test_the_process_forwards_to_the_broker_url_not_to_its_own_listen_host(mosquitto: SecureMosquitto,
                                                                                   tmp_path: Path) -> None:
    """Listen on 127.0.0.2, the broker on 127.0.0.1: the page's MQTT reaches the broker's host (and the start
    line names the broker without the URL's credentials)."""
    proc, started = _start_web(tmp_path, "--listen", "127.0.0.2:0",
                               "--broker", f"mqtt://someone:secret@127.0.0.1:{mosquitto.plain_port}")
    try:
        assert started.get("event") == "web_started", started
        assert started["broker"] == f"mqtt://127.0.0.1:{mosquitto.plain_port}"
        ops, _, connack = await asyncio.to_thread(_ws_client, started["url"], "ops", USERS["ops"], [])
        try:
            await wait_until(connack.is_set, 10, "ops connected through the process")
            assert not ops._rc.is_failure  # type: ignore[attr-defined]
        finally:
            ops.disconnect()
            await asyncio.to_thread(ops.loop_stop)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


@pytest.mark.parametrize("extra, needle", [
    (("--listen", "nowhere"), "HOST:PORT"),
    (("--broker", "http://x"), "mqtt://host:port"),
    (("--listen", "127.0.0.1:PORT_IN_USE"), "cannot listen on"),
    (("--listen", "0.0.0.0:0"), "in clear"),
])
def test_bad_input_to_dealer_web_is_one_line_and_exit_2(tmp_path: Path, extra: tuple[str, ...], needle: str) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        extra = tuple(a.replace("PORT_IN_USE", str(busy.getsockname()[1])) for a in extra)
        proc, started = _start_web(tmp_path, *extra)
        out, err = proc.communicate(timeout=20)
    text = started.get("error", "") + err
    assert proc.returncode == 2, text
    lines = [ln for ln in text.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("dealer web: ") and needle in lines[0], text
    assert "Traceback" not in text


def test_the_vendored_mqtt_js_is_the_file_its_versions_file_names() -> None:
    versions = (STATIC / "vendor" / "VERSIONS.md").read_text()
    digest = hashlib.sha256((STATIC / "vendor" / "mqtt.min.js").read_bytes()).hexdigest()
    assert f"`{digest}`" in versions
    assert (STATIC / "vendor" / "mqtt.LICENSE.md").read_text().startswith("The MIT License")
