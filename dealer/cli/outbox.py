"""``dealer outbox list|resend``: what waits for settlement's acknowledgement, for operations.

``list`` reads the journal read-only (a SQLite file in ``mode=ro``, or a PostgreSQL journal in
a read-only session), so it is safe beside a running backend. ``resend`` publishes stored
outbox rows again, byte for byte, with the service's broker settings and credentials (under
its own client id and without the backend's status topic or last will, so the running backend
is not disturbed). Neither ever deletes a row: only settlement's acknowledgement does
(``docs/mqtt-topics.md`` §3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from dealer.edge.config import ConfigError, Settings, load_settings
from dealer.edge.journal import JournalError, JournalWriteFailed, OutboxRow
from dealer.edge.journal_urls import redact
from dealer.edge.journals import is_url, open_read_only, target_of


def read_outbox(path: Path) -> list[OutboxRow]:
    """Every outbox row of the journal at ``path``, oldest first, read-only (``created_at`` 0:
    a journal older than that column)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        cols = {r[1] for r in db.execute("PRAGMA table_info(outbox)")}
        created = "created_at" if "created_at" in cols else "0"
        rows = db.execute(f"SELECT id, key, topic, payload, table_id, round_id, {created} FROM outbox ORDER BY id")
        return [OutboxRow(i, k, t, bytes(p), tb, r, int(c or 0)) for i, k, t, p, tb, r, c in rows]
    finally:
        db.close()


def read_pending(target: str | Path) -> list[OutboxRow]:
    """The outbox of a journal file or journal server URL, read-only. Raises :class:`JournalError`
    (missing, unreachable, not a journal), sqlite3.DatabaseError or JournalWriteFailed (unreadable).
    A file is read as it is, even from before ``outbox.created_at`` (:func:`read_outbox`)."""
    if not is_url(target):
        path = Path(target)
        if not path.is_file():
            raise JournalError(f"no journal at {path}")
        return read_outbox(path)
    journal = open_read_only(target)
    try:
        return journal.pending()
    finally:
        journal.close()


def _shown(target: str | Path) -> str:
    """A journal as messages name it (a URL without its password)."""
    if is_url(target):
        return redact(str(target))
    return str(target)


def select(rows: list[OutboxRow], key: str | None) -> list[OutboxRow]:
    """The rows of one result (its own key and its parts ``{key}#...``), or all of them."""
    if key is None:
        return rows
    return [r for r in rows if r.key == key or r.key.startswith(f"{key}#")]


def _journal_target(args: argparse.Namespace) -> str | Path:
    journal = getattr(args, "journal", None)
    if journal:
        return str(journal) if is_url(journal) else Path(journal)
    if not args.config:
        raise ConfigError("give --config FILE or --journal PATH_OR_URL")
    return target_of(load_settings(args.config))


def _cmd_list(args: argparse.Namespace) -> int:
    try:
        target = _journal_target(args)
        rows = read_pending(target)
    except (ConfigError, JournalError) as exc:
        print(f"dealer outbox list: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except (sqlite3.DatabaseError, JournalWriteFailed) as exc:
        print(f"dealer outbox list: journal {_shown(target)} cannot be read: {' '.join(str(exc).split())}",
              file=sys.stderr)
        return 2
    path = _shown(target)
    now = time.time()
    out = [{"id": r.id, "key": r.key, "table_id": r.table_id, "round_id": r.round_id, "bytes": len(r.payload),
            "age_seconds": None if not r.created_at else round(now - r.created_at / 1000, 1)} for r in rows]
    if args.json:
        print(json.dumps({"journal": str(path), "pending": len(out), "rows": out}, sort_keys=True))
        return 0
    print(f"{len(out)} result row(s) waiting for settlement's acknowledgement in {path}")
    for o in out:
        age = "?" if o["age_seconds"] is None else f"{o['age_seconds']:.0f}s"
        print(f"  {o['id']:>8}  {o['key']:<40}  age {age:>8}  {o['bytes']:>8} bytes")
    return 0


async def _publish(settings: Settings, rows: list[OutboxRow], timeout: float) -> None:
    from dealer.edge.runner import mqtt_password
    from drivers.mqtt import MqttBus

    m = settings.mqtt
    assert m.url is not None
    bus = MqttBus(m.urls, client_id=f"{m.client_id}-outbox-{uuid.uuid4().hex[:6]}", username=m.username,
                  password=mqtt_password(settings), keepalive=m.keepalive, ca_file=m.ca_file,
                  cert_file=m.cert_file, key_file=m.key_file)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), timeout)
        for r in rows:  # QoS 1: each returns after the broker's PUBACK
            await bus.publish(r.topic, r.payload, qos=1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _cmd_resend(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"dealer outbox resend: {exc}", file=sys.stderr)
        return 2
    if settings.mqtt.url is None:
        print("dealer outbox resend: the config has no [mqtt] url", file=sys.stderr)
        return 2
    try:
        rows = select(read_pending(target_of(settings)), None if args.all else args.key)
    except JournalError as exc:
        print(f"dealer outbox resend: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except (sqlite3.DatabaseError, JournalWriteFailed) as exc:
        print(f"dealer outbox resend: the journal cannot be read: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if not rows and args.key:
        print(f"dealer outbox resend: {args.key} is not in the outbox (acknowledged already, or never produced)",
              file=sys.stderr)
        return 1
    if not rows:  # --all of an empty outbox: nothing waits, which is the good news, not a failure
        print(json.dumps({"resent": 0, "keys": []}, sort_keys=True))
        return 0
    from dealer.edge.logs import configure_logging

    configure_logging("warning")  # JSON lines on stderr; stdout carries the answer
    try:
        asyncio.run(_publish(settings, rows, args.timeout))
    except (TimeoutError, ConnectionError, OSError) as exc:
        print(f"dealer outbox resend: cannot publish to {settings.mqtt.url}: {exc or type(exc).__name__}",
              file=sys.stderr)
        return 1
    print(json.dumps({"resent": len(rows), "keys": [r.key for r in rows]}, sort_keys=True))
    return 0


def register(sub: Any) -> None:
    """Add ``dealer outbox list|resend`` to the ``dealer`` command's subparsers."""
    from dealer.cli.args import CONFIG_HELP, seconds

    o = sub.add_parser("outbox", help="results waiting for settlement's acknowledgement: list, resend")
    osub = o.add_subparsers(dest="outbox", required=True)
    ls = osub.add_parser("list", help="the outbox rows of a journal (read-only)")
    ls.add_argument("--config", metavar="FILE", help=CONFIG_HELP + "; its journal (journal_url, else journal_path) "
                    "is read")
    ls.add_argument("--journal", metavar="PATH_OR_URL", help="a journal file or a postgresql:// URL (instead of "
                    "--config)")
    ls.add_argument("--json", action="store_true", help="print the rows as JSON")
    ls.set_defaults(func=_cmd_list)
    rs = osub.add_parser("resend", help="publish stored results again now (never deletes: only an ack does)")
    rs.add_argument("--config", required=True, metavar="FILE",
                    help=CONFIG_HELP + "; its journal and broker settings are used")
    which = rs.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", help="one result's idempotency key (its parts go too)")
    which.add_argument("--all", action="store_true", help="every row in the outbox")
    rs.add_argument("--timeout", type=seconds(0, 600), default=10.0, metavar="SECONDS",
                    help="seconds to wait for the broker connection (default 10)")
    rs.set_defaults(func=_cmd_resend)


__all__ = ["read_outbox", "register", "select"]
