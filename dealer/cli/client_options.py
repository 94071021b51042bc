"""What the client commands share (``dealer settle``, ``dealer station``, ``dealer simulate``,
``dealer supervisor``).

Their broker options, the same as ``dealer supervisor void``: ``--broker URL`` (``mqtts://`` for TLS),
``--username``, ``--password-file`` (or ``--password``), ``--ca-file``, ``--cert-file``,
``--key-file-tls``; plus ``--connect-timeout``, the bounded wait for the first connection.
Each client logs in with its own role's credentials (``docs/mqtt-topics.md`` §2), never the
backend's. The tables they work on: those of a ``dealer run`` config, or named with
``--tables``. Bad input is a :class:`BadInput` whose message is the one line the command
prints before it exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from drivers.mqtt import MqttBus, cancel_and_wait, make_tls_context, parse_broker_url


TABLE_ID = re.compile(r"^[A-Za-z0-9_]{1,32}$")


class BadInput(Exception):
    """Bad input or an unusable start: the message is the one line printed on stderr."""


def add_broker_options(p: argparse.ArgumentParser, *, default_note: str = "", connect_timeout: bool = True) -> None:
    """Add the broker, credential and TLS options to ``p``. ``default_note`` says where the
    URL comes from when ``--broker`` is not given (empty: it is required); ``connect_timeout``:
    also ``--connect-timeout`` (a long-running client's bounded first connect)."""
    p.add_argument("--broker", metavar="URL", required=not default_note,
                   help="mqtts://host:8883 (TLS) or mqtt://host:1883" + (f"; default: {default_note}" if default_note else ""))
    p.add_argument("--username", metavar="USER", help="broker user name (this role's own, e.g. settlement or station-T1)")
    pw = p.add_mutually_exclusive_group()
    pw.add_argument("--password-file", metavar="FILE", help="read the broker password from FILE (recommended)")
    pw.add_argument("--password", metavar="PASSWORD",
                    help="the broker password (visible to other users in the process list: prefer --password-file)")
    p.add_argument("--ca-file", metavar="FILE", help="CA bundle that signed the broker's certificate (mqtts)")
    p.add_argument("--cert-file", metavar="FILE", help="client certificate (mqtts, optional)")
    p.add_argument("--key-file-tls", metavar="FILE", help="the client certificate's private key (mqtts, optional)")
    if connect_timeout:
        p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="give up (exit 2) when the broker cannot be reached within SECONDS at start (default 10)")


@dataclass(frozen=True)
class BrokerOptions:
    url: str
    username: str | None
    password: str | None
    tls_context: ssl.SSLContext | None
    connect_timeout: float

    def bus(self, client_id: str, **kw: Any) -> MqttBus:
        """An MQTT bus with these credentials (not connected yet: see :func:`start_bus`)."""
        return MqttBus(self.url, client_id=client_id, username=self.username, password=self.password,
                       tls_context=self.tls_context, **kw)


def broker_options(args: argparse.Namespace, *, default_url: str | None = None,
                   default_ca: str | Path | None = None) -> BrokerOptions:
    """The options given on the command line, checked: BadInput otherwise."""
    url = args.broker or default_url
    if not url:
        raise BadInput("no broker: give --broker mqtt://host:port (or mqtts://)")
    if not 0 < args.connect_timeout <= 600:
        raise BadInput(f"--connect-timeout {args.connect_timeout:g}: give 0 < seconds <= 600")
    try:
        _, _, tls = parse_broker_url(url)
    except ValueError as exc:
        raise BadInput(f"--broker: {exc}") from None
    password, tls_context = credentials(args, url, tls, default_ca)
    return BrokerOptions(url, args.username, password, tls_context, args.connect_timeout)


def credentials(args: argparse.Namespace, url: str, tls: bool,
                default_ca: str | Path | None = None) -> tuple[str | None, ssl.SSLContext | None]:
    """The broker password (``--password-file`` or ``--password``) and the TLS context the
    options ask for, checked against the URL's scheme: BadInput otherwise."""
    return _password(args), _tls(args, url, tls, default_ca)


def _password(args: argparse.Namespace) -> str | None:
    if args.password_file is None:
        return cast("str | None", args.password)  # argparse's Namespace is untyped: --password is a str option
    try:
        return Path(args.password_file).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--password-file {args.password_file} cannot be read: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None


def _tls(args: argparse.Namespace, url: str, tls: bool, default_ca: str | Path | None) -> ssl.SSLContext | None:
    named = [opt for opt, v in (("--ca-file", args.ca_file), ("--cert-file", args.cert_file),
                                ("--key-file-tls", args.key_file_tls)) if v]
    if not tls:
        if named:
            raise BadInput(f"{', '.join(named)} given but the broker {url} is plain MQTT: use mqtts://")
        return None
    ca = args.ca_file or default_ca
    try:
        return make_tls_context(ca, args.cert_file, args.key_file_tls)
    except ValueError as exc:
        raise BadInput(f"TLS: {exc} (--cert-file)") from None
    except (OSError, ssl.SSLError) as exc:
        files = ", ".join(named) or (f"CA file {ca}" if ca else "system CAs")
        raise BadInput(f"TLS files ({files}) cannot be loaded: {getattr(exc, 'strerror', None) or exc}") from None


async def start_bus(bus: MqttBus, timeout: float) -> asyncio.Task[None]:
    """Run ``bus`` and wait until it is connected; BadInput (with the broker's last answer)
    when it is not within ``timeout`` seconds. Afterwards the bus reconnects by itself."""
    reasons: list[str] = []
    bus.on_connection(lambda up, reason: reasons.append(reason) if not up and reason else None)
    task = asyncio.create_task(bus.run())
    try:
        async with asyncio.timeout(timeout):
            await bus.wait_connected()
    except TimeoutError:
        await cancel_and_wait(task)
        why = f": {reasons[-1]}" if reasons else ""
        raise BadInput(f"cannot connect to the broker {bus.url} within {timeout:g} s{why} "
                       "(is it running and reachable, are the credentials right?)") from None
    return task


def table_list(text: str | None, option: str = "--tables") -> list[str]:
    """``T1,T2`` -> ["T1", "T2"]; BadInput for an id that cannot be a table's."""
    if text is None:
        return []
    ids = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in ids if not TABLE_ID.match(t)]
    if bad or not ids:
        raise BadInput(f"{option} {text!r}: give table ids separated by commas, e.g. T1,T2 "
                       "(letters, digits and _, at most 32)")
    return list(dict.fromkeys(ids))


def config_tables(config: str | None) -> tuple[Any, list[str]]:
    """The settings of ``config`` (None without one) and its table ids; BadInput when it is unusable."""
    if config is None:
        return None, []
    from dealer.edge.config import ConfigError, load_settings

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        raise BadInput(f"--config: {one_line(exc)}") from None
    return settings, [t.id for t in settings.tables]


def choose_tables(wanted: list[str], known: list[str], config: str | None, option: str = "--tables") -> list[str]:
    """``wanted`` (all of ``known`` when empty), each of them a table of the config when there is one."""
    if config is None:
        if not wanted:
            raise BadInput(f"give {option} T1,T2 or --config FILE (whose tables are then used)")
        return wanted
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise BadInput(f"unknown table{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: not in {config} "
                       f"(tables: {', '.join(known) or 'none'})")
    chosen = wanted or known
    if not chosen:
        raise BadInput(f"{config} has no [[tables]]")
    return chosen


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (the service then winds down and exits 0)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def broker_error(exc: BaseException) -> str:
    """A broker connection error on one line, a TLS failure in words (drivers.mqtt.explain)."""
    from drivers.mqtt import explain

    return explain(getattr(exc, "strerror", None) or exc) if not isinstance(exc, ssl.SSLError) else explain(exc)


def one_line(text: object) -> str:
    """Any message on one line (a config error lists its keys on several)."""
    out = ""
    for part in (p.strip() for p in str(text).splitlines()):
        if part:
            out = part if not out else out + (" " if out.endswith(":") else "; ") + part
    return out


__all__ = ["TABLE_ID", "BadInput", "BrokerOptions", "add_broker_options", "broker_options", "choose_tables", "config_tables",
           "broker_error", "one_line", "start_bus", "stop_on_signals", "table_list"]
