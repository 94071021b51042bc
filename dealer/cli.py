"""The ``dealer`` command: demo, run, hand, schemas, bench."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def _cmd_demo(args: argparse.Namespace) -> int:
    from dealer.demo import run_demo
    from dealer.logs import configure_logging

    configure_logging(args.log_level)
    summary = asyncio.run(run_demo(rounds=args.rounds, seed=args.seed, broker=args.broker, faults=not args.no_faults,
                                   betting_seconds=args.betting_seconds))
    ok = summary["rounds_settled"] >= args.rounds and not summary["reconciliation_mismatches"]
    return 0 if ok else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from dealer.config import ConfigError, load_settings
    from dealer.logs import configure_logging
    from dealer.runner import run_loop, run_service

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"dealer: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.service.log_level)
    try:
        run_loop(run_service(settings))
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_hand(args: argparse.Namespace) -> int:
    from dealer.cards import CardError

    if args.game != "teen-patti":
        print(f"dealer hand: game {args.game!r} is not supported yet (teen-patti)", file=sys.stderr)
        return 2
    from dealer.games.teen_patti import TeenPattiOptions, hand_report

    try:
        options = TeenPattiOptions.model_validate(dict(kv.split("=", 1) for kv in args.option))
        report = hand_report(args.cards, args.vs, options)
    except (CardError, ValueError) as exc:
        print(f"dealer hand: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0


def _cmd_schemas(args: argparse.Namespace) -> int:
    from dealer.schemas import check_schemas, write_schemas

    if args.check:
        stale = check_schemas(Path(args.out))
        for name in stale:
            print(f"stale or missing schema: {name}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas(Path(args.out)):
        print(path)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from dealer.bench import run_latency_bench
    from dealer.logs import configure_logging
    from dealer.runner import run_loop

    configure_logging("warning")
    result = run_loop(run_latency_bench(tables=args.tables, seconds=args.seconds, broker=args.broker,
                                        fsync=not args.no_fsync, loop=args.loop), args.loop)
    print(json.dumps(result, sort_keys=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dealer", description="Live-dealer table backend")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="self-contained demo: simulated shoe on a PTY, SQLite in a temp folder")
    d.add_argument("--rounds", type=int, default=4)
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--broker", help="also publish over MQTT, e.g. mqtt://127.0.0.1:1883")
    d.add_argument("--no-faults", action="store_true", help="no injected scanner faults")
    d.add_argument("--betting-seconds", type=float, default=0.8)
    d.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"])
    d.set_defaults(func=_cmd_demo)

    r = sub.add_parser("run", help="run the backend for the tables in a TOML config (env DEALER_* overrides)")
    r.add_argument("--config", required=True)
    r.set_defaults(func=_cmd_run)

    h = sub.add_parser("hand", help="evaluate two hands for a dispute, e.g. hand teen-patti AS KD QC --vs 2H 3H 4H")
    h.add_argument("game")
    h.add_argument("cards", nargs=3)
    h.add_argument("--vs", nargs=3, required=True)
    h.add_argument("--option", action="append", default=[], help="house option key=value, e.g. six_card_wheel=NOT_ALLOWED")
    h.set_defaults(func=_cmd_hand)

    s = sub.add_parser("schemas", help="write (or --check) the JSON Schemas of the wire messages")
    s.add_argument("--out", default="docs/schemas")
    s.add_argument("--check", action="store_true")
    s.set_defaults(func=_cmd_schemas)

    b = sub.add_parser("bench", help="benchmarks (figures as JSON)")
    bsub = b.add_subparsers(dest="bench", required=True)
    lat = bsub.add_parser("latency", help="N tables through a real Mosquitto, one card per second each")
    lat.add_argument("--tables", type=int, default=1)
    lat.add_argument("--seconds", type=float, default=20.0)
    lat.add_argument("--broker", help="use this broker instead of starting a private mosquitto")
    lat.add_argument("--no-fsync", action="store_true")
    lat.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                     help="event loop of the backend and the load generator")
    lat.set_defaults(func=_cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
