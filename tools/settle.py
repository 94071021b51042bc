"""``dealer settle``: the reference settlement consumer (``simulators/settlement.py``) as a service.

It subscribes to the ``results`` of the tables of a config (or given with ``--tables``) over a
persistent session (a fixed client id: the broker queues results while it is away),
applies each result **once** to its durable SQLite ledger, in one transaction, and only then
acknowledges it on ``results/ack`` with its idempotency key and the SHA-256 of the bytes it
applied (protocol 1.1), so the backend's outbox empties (``docs/mqtt-topics.md`` §3, §5). A
result delivered again is acknowledged again and changes nothing.

It settles the bets of the ledger's bet book (table ``bets``): the player platform writes each
bet there before sending it. ``dealer simulate --ledger FILE`` does, with the same FILE. A
result listing accepted bets the book does not hold is applied to the bets it does hold and
reported as a ``reconciliation_mismatch``: settlement cannot pay a bet it never took.

It places no bets: that is the player platform's part (``dealer simulate``'s players).

stdout carries one JSON object per line for every result applied (``result_applied``: key,
outcome, bets, staked, returned), repeated (``result_repeat``), refused (``bad_message``,
``not_applied``) or not reconciled (``reconciliation_mismatch``), and ``stopped`` with the
totals on SIGTERM or SIGINT (exit 0). Logs are JSON lines on stderr. Bad input, a ledger that
cannot be opened or a broker not reachable within ``--connect-timeout`` is one line on stderr
and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any, TextIO

from dealer.cli.client_options import (BadInput, BrokerOptions, add_broker_options, broker_options, choose_tables,
                                   config_tables, start_bus, stop_on_signals, table_list)


async def run_settle(opts: BrokerOptions, tables: list[str], ledger: Path, client_id: str, stop: asyncio.Event,
                     *, log_level: str = "warning", out: TextIO = sys.stdout) -> dict[str, Any]:
    """Settle until ``stop`` is set (SIGTERM/SIGINT); returns the totals. BadInput before anything
    is applied when the ledger cannot be opened or the broker is not reachable in time."""
    from dealer.edge.logs import configure_logging
    from simulators.settlement import SettlementConsumer, remove_ledger

    def emit(line: dict[str, Any]) -> None:
        print(json.dumps(line, sort_keys=True, ensure_ascii=False), file=out, flush=True)

    bus = opts.bus(client_id, persistent_session=True)
    new = not ledger.exists()
    try:
        consumer = SettlementConsumer(bus, tables, ledger, place_bets=False, report=emit)
    except sqlite3.Error as exc:
        raise BadInput(f"--ledger {ledger}: cannot be opened: {exc}") from None
    try:
        try:
            task = await start_bus(bus, opts.connect_timeout)
        except BadInput:
            consumer.close()
            if new:  # a refused start leaves nothing behind
                remove_ledger(ledger)
            raise
        configure_logging(log_level)  # the bounded wait's retries stayed quiet: from now on, the logs
        emit({"event": "started", "tables": tables, "ledger": str(ledger), "broker": opts.url, "client_id": client_id})
        await stop.wait()
        await consumer.drain()  # acknowledgements in flight reach the broker first
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        totals = {"results_applied": len(consumer.applied_keys()), "repeats": consumer.duplicates,
                  "mismatches": len(consumer.mismatches), "bad_messages": consumer.bad_messages,
                  "not_applied": consumer.ledger_errors, "acks_sent": consumer.acks_sent}
        emit({"event": "stopped", **totals})
        return totals
    finally:
        with contextlib.suppress(sqlite3.Error):
            consumer.close()


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    settings, known = config_tables(args.config)
    tables = choose_tables(table_list(args.tables), known, args.config)
    m = settings.mqtt if settings is not None else None
    opts = broker_options(args, default_url=m.url if m else None, default_ca=m.ca_file if m else None)
    ledger = Path(args.ledger)
    if ledger.is_dir():
        raise BadInput(f"--ledger {ledger} is a directory: give the ledger's file name")
    if not ledger.parent.is_dir():
        raise BadInput(f"--ledger {ledger}: the directory {ledger.parent} does not exist")
    return await run_settle(opts, tables, ledger, args.client_id, stop_on_signals(), log_level=args.log_level)


def _cmd_settle(args: argparse.Namespace) -> int:
    from dealer.edge.logs import configure_logging

    configure_logging("error")  # until the broker answers: a bounded wait, then one line
    try:
        asyncio.run(_main(args))
    except BadInput as exc:
        print(f"dealer settle: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # while connecting (afterwards SIGINT stops it and exits 0)
        return 130
    return 0


def register(sub: Any) -> argparse.ArgumentParser:
    """Add ``dealer settle`` to the ``dealer`` command's subparsers."""
    p = sub.add_parser("settle", help="the reference settlement consumer as a service: apply every result once to a "
                       "SQLite ledger, then acknowledge it (JSON lines on stdout)",
                       description="Apply each round's result once to a durable SQLite ledger and acknowledge it on "
                                   "results/ack (docs/mqtt-topics.md §3, §5). Places no bets.")
    p.add_argument("--config", metavar="FILE",
                   help="the backend's TOML config: settle its tables (and use its [mqtt] url as the broker)")
    p.add_argument("--tables", metavar="T1,T2", help="the tables to settle (default: every table of --config)")
    p.add_argument("--ledger", required=True, metavar="FILE",
                   help="the SQLite ledger (created if missing): applied results, payouts, and the bet book the "
                        "player platform writes (dealer simulate --ledger FILE)")
    add_broker_options(p, default_note="the [mqtt] url of --config")
    p.add_argument("--client-id", default="dealer-settlement", metavar="ID",
                   help="MQTT client id of settlement's persistent session (default dealer-settlement): keep it fixed, "
                        "the broker queues results for it while it is away")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="level of the JSON logs on stderr (default warning)")
    p.set_defaults(func=_cmd_settle)
    return p


__all__ = ["register", "run_settle"]
