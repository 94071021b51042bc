"""``dealer web``: serves the dealer-station and pit-boss screens, and forwards their MQTT to the broker.

The screens are MQTT clients of the published protocol and nothing more (``docs/screens.md``):
each logs in to the broker with its own role's user (``station-TP1``, ``supervisor-sup-pit``,
``ops``), so the broker's ACL decides what a page may read and send. A browser speaks MQTT only
over a WebSocket, and Debian's Mosquitto 2.0.11 cannot open a ``protocol websockets`` listener on
these machines, so this process offers one at ``/mqtt`` that forwards raw bytes to the broker's
TCP (or TLS) listener: it never parses, authenticates or alters MQTT. It is a separate process
from ``dealer run``, so the backend's hot path never serves a page.

Bounded: at most ``max_connections`` WebSockets at once (more get 503 before the upgrade), at
most ``max_frame_bytes`` per message from a browser (a larger one closes that connection), and
every write to the broker waits for its socket to drain, so a flooding page is slowed to the
broker's pace instead of filling memory. A WebSocket from another origin is refused (403): a
page of another site cannot use a logged-in browser as a relay.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from aiohttp import WSMsgType, web
from aiohttp.typedefs import Handler

log = structlog.get_logger("dealer.web")

STATIC = Path(__file__).resolve().parent / "static"
#: The pages by route; everything else of theirs is under /static/.
PAGES = {"/": "index.html", "/station": "station.html", "/floor": "floor.html"}
MQTT_PATH = "/mqtt"
#: The subprotocols MQTT.js and other browser clients ask for.
SUBPROTOCOLS = ("mqtt", "mqttv3.1")
#: No inline script or style, nothing from elsewhere, no framing by another site.
CSP = ("default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
READ_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class Upstream:
    """The broker listener the WebSocket path forwards to."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None


@dataclass(frozen=True, slots=True)
class Site:
    """Static deployment facts the pages need to lay themselves out (``/site.json``): which tables
    and supervisors exist. Never live data: that comes over MQTT, under the ACL."""

    tables: tuple[tuple[str, str], ...]
    supervisors: tuple[str, ...] = ()
    node_ids: tuple[str, ...] = ()

    def json(self) -> dict[str, Any]:
        return {"tables": [{"id": t, "game": g} for t, g in self.tables], "mqtt_path": MQTT_PATH,
                "supervisors": list(self.supervisors), "node_ids": list(self.node_ids)}


CONNECTIONS: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("connections", set)


def build_app(site: Site, upstream: Upstream, *, max_connections: int = 256,
              max_frame_bytes: int = 262_144) -> web.Application:
    """The pages, ``/site.json``, ``/healthz`` and the MQTT WebSocket path."""
    app = web.Application(middlewares=[_headers])
    app[CONNECTIONS] = set()

    async def page(request: web.Request) -> web.StreamResponse:
        return _file(STATIC / PAGES[request.path])

    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = (STATIC / name).resolve()
        if not path.is_relative_to(STATIC) or not path.is_file():
            raise web.HTTPNotFound(text="not found")
        return _file(path)

    async def site_json(request: web.Request) -> web.StreamResponse:
        return web.json_response(site.json())

    async def healthz(request: web.Request) -> web.StreamResponse:
        return web.json_response({"ok": True, "connections": len(app[CONNECTIONS])})

    async def mqtt(request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            log.warning("websocket refused: another origin", origin=origin[:200], host=request.host)
            raise web.HTTPForbidden(text="another origin")
        if len(app[CONNECTIONS]) >= max_connections:
            log.warning("websocket refused: too many connections", limit=max_connections)
            raise web.HTTPServiceUnavailable(text="too many connections")
        ws = web.WebSocketResponse(protocols=SUBPROTOCOLS, max_msg_size=max_frame_bytes, heartbeat=30)
        if not ws.can_prepare(request).ok:
            raise web.HTTPBadRequest(text="a WebSocket upgrade is expected here")
        app[CONNECTIONS].add(ws)  # the slot is taken before the upgrade awaits: concurrent upgrades cannot pass the bound
        try:
            await ws.prepare(request)
            await _forward(ws, upstream)
        finally:
            app[CONNECTIONS].discard(ws)
        return ws

    for route in PAGES:
        app.router.add_get(route, page)
    app.router.add_get("/static/{name:.+}", static)
    app.router.add_get("/site.json", site_json)
    app.router.add_get("/healthz", healthz)
    app.router.add_get(MQTT_PATH, mqtt)
    return app


async def _forward(ws: web.WebSocketResponse, upstream: Upstream) -> None:
    """Pipe bytes between one browser and the broker until either side closes."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            upstream.host, upstream.port, ssl=upstream.tls,
            server_hostname=upstream.host if upstream.tls else None), timeout=5)
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        log.warning("broker unreachable for a websocket", host=upstream.host, port=upstream.port, error=str(exc)[:200])
        await ws.close(code=1011, message=b"broker unreachable")
        return

    async def up() -> None:  # browser -> broker
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                writer.write(msg.data)
                await writer.drain()  # a fast sender waits for the broker: nothing piles up here
            elif msg.type == WSMsgType.TEXT:
                await ws.close(code=1003, message=b"binary MQTT only")
                return
            else:  # an error (e.g. a message over max_frame_bytes: aiohttp closed with 1009)
                return

    async def down() -> None:  # broker -> browser
        while data := await reader.read(READ_CHUNK):
            await ws.send_bytes(data)

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if not t.cancelled() and t.exception() is not None:
                log.info("websocket forwarding ended", error=repr(t.exception())[:200])
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, ssl.SSLError):
            pass
        if not ws.closed:
            await ws.close(code=1001, message=b"broker closed the connection")


def _file(path: Path) -> web.FileResponse:
    kind = "text/javascript" if path.suffix == ".js" else (mimetypes.guess_type(path.name)[0] or "application/octet-stream")
    return web.FileResponse(path, headers={"Content-Type": f"{kind}; charset=utf-8" if kind.startswith("text/") else kind})


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        resp = exc
    if not resp.prepared:
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["Cache-Control"] = "no-store"
    if isinstance(resp, web.HTTPException):
        raise resp
    return resp


def start_line(url: str, site: Site, broker: str) -> str:
    """The one JSON line ``dealer web`` prints when it serves (scripts read the real port from it)."""
    first = site.tables[0][0] if site.tables else "TABLE"
    return json.dumps({"event": "web_started", "url": url, "station": f"{url}/station?table={first}",
                       "floor": f"{url}/floor", "broker": broker})


__all__ = ["CSP", "MQTT_PATH", "STATIC", "Site", "Upstream", "build_app", "start_line"]
