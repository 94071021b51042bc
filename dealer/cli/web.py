"""``dealer web --config FILE``: serve the screens and their MQTT WebSocket path (``dealer/web/server.py``).

Prints one JSON line when it serves (``web_started``, with the real port), then runs until
SIGTERM or SIGINT (exit 0, ``web_stopped``). Bad input (a bad config, option or URL, a
certificate that cannot be loaded, a port in use) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import ssl
import sys
from typing import Any

from dealer.cli.args import CONFIG_HELP


class _Bad(Exception):
    """One line for stderr, exit 2."""


def register(sub: Any) -> None:
    p = sub.add_parser("web", help="serve the dealer-station and pit-boss screens and their MQTT WebSocket path",
                       description="Serve the dealer-station page (/station?table=ID), the pit-boss floor (/floor) "
                       "and a WebSocket at /mqtt that forwards the pages' MQTT to the broker byte for byte: each "
                       "page logs in with its own role's broker user, so the broker's ACL is the only gate "
                       "(docs/screens.md). Settings: the config's [web] section.")
    p.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--listen", metavar="HOST:PORT", help="serve here instead of [web] listen (port 0: any free port)")
    p.add_argument("--broker", metavar="URL", help="forward to this broker (mqtt://host:port or mqtts://host:port) "
                   "instead of [web] broker_url / [mqtt] url")
    p.set_defaults(func=_cmd_web)


def _cmd_web(args: argparse.Namespace) -> int:
    from dealer.edge.config import ConfigError, load_settings
    from dealer.edge.logs import configure_logging

    try:
        overrides: dict[str, Any] = {}
        settings = load_settings(args.config)
        web_cfg = settings.web.model_dump()
        if args.listen is not None:
            web_cfg["listen"] = args.listen
        if args.broker is not None:
            web_cfg["broker_url"] = args.broker
        overrides["web"] = web_cfg
        settings = load_settings(args.config, **overrides)
        plan = _plan(settings)
    except ConfigError as exc:
        print(f"dealer web: {exc}", file=sys.stderr)
        return 2
    except _Bad as exc:
        print(f"dealer web: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.service.log_level)
    try:
        return asyncio.run(_serve(*plan))
    except _Bad as exc:
        print(f"dealer web: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


def _plan(settings: Any) -> tuple[Any, ...]:
    """What to serve, where, forwarding to which broker; _Bad for anything that cannot work."""
    from drivers.mqtt import make_tls_context, parse_broker_url
    from dealer.web.server import Site, Upstream

    web = settings.web
    url = web.broker_url or settings.mqtt.url
    if url is None:
        raise _Bad("no broker to forward to: set [web] broker_url or [mqtt] url, or give --broker")
    try:
        broker_host, port, tls = parse_broker_url(url)
    except ValueError as exc:
        raise _Bad(str(exc)) from None
    try:
        upstream_tls = make_tls_context(web.ca_file or settings.mqtt.ca_file) if tls else None
    except (OSError, ssl.SSLError) as exc:
        raise _Bad(f"the broker's CA file cannot be loaded: {exc}") from None
    server_tls = None
    if web.tls_cert_file is not None:
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            server_tls.load_cert_chain(str(web.tls_cert_file), str(web.tls_key_file))
        except (OSError, ssl.SSLError) as exc:
            raise _Bad(f"[web] tls_cert_file / tls_key_file cannot be loaded: {exc}") from None
    if server_tls is None and not web.allow_insecure and not _loopback(web.host_port[0]):
        raise _Bad(f"[web] listen = {web.listen} without TLS would carry the pages' broker logins in clear over the "
                   "network: set tls_cert_file and tls_key_file (or allow_insecure = true on a closed network)")
    site = Site(tables=tuple((t.id, t.game) for t in settings.tables),
                supervisors=tuple(s.id for s in settings.security.supervisors),
                node_ids=(settings.service.node_id,))
    shown = f"{'mqtts' if tls else 'mqtt'}://{f'[{broker_host}]' if ':' in broker_host else broker_host}:{port}"
    return site, Upstream(broker_host, port, upstream_tls), web, server_tls, shown  # shown: never a URL's password


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _serve(site: Any, upstream: Any, web_cfg: Any, server_tls: ssl.SSLContext | None, broker: str) -> int:
    from aiohttp import web

    from dealer.web.server import build_app, start_line

    app = build_app(site, upstream, max_connections=web_cfg.max_connections, max_frame_bytes=web_cfg.max_frame_bytes)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    host, port = web_cfg.host_port
    tcp = web.TCPSite(runner, host, port, ssl_context=server_tls)
    try:
        await tcp.start()
    except OSError as exc:
        await runner.cleanup()
        raise _Bad(f"cannot listen on {web_cfg.listen}: {exc.strerror or exc}") from None
    addresses = runner.addresses  # the one site's bound sockets (the port when 0 was asked for)
    bound = addresses[0] if addresses else (host, port)
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"{'https' if server_tls else 'http'}://{shown}:{bound[1]}"
    print(start_line(url, site, broker), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    print(json.dumps({"event": "web_stopped"}), flush=True)
    return 0


__all__ = ["register"]
