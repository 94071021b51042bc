"""The ``dealer`` subcommands that are tools, not production: demo, hand, rtp, schemas, bench,
audit, deploy helpers, soak, the reference settlement and station clients, simulate and the
Matgo arena. :func:`register` adds them to the runtime's parser (``dealer/cli/main.py`` loads
this module by name, so the runtime never imports the tools)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from dealer.cli.args import broker_url, fail, int_range, seconds


def _cmd_demo(args: argparse.Namespace) -> int:
    from dealer.edge.config import ConfigError
    from tools.demo import DemoError, run_demo
    from dealer.edge.logs import configure_logging

    configure_logging(args.log_level)
    try:
        summary = asyncio.run(run_demo(rounds=args.rounds, seed=args.seed, broker=args.broker,
                                       faults=not args.no_faults, betting_seconds=args.betting_seconds,
                                       game=args.game))
    except (DemoError, ConfigError, ValueError) as exc:  # an unreachable broker, a bad value
        return fail("dealer demo", str(exc))
    ok = summary["rounds_settled"] >= args.rounds and not summary["reconciliation_mismatches"]
    return 0 if ok else 1


def _cmd_hand(args: argparse.Namespace) -> int:
    """Evaluate hands for a dispute, with the report the game's kit names (:mod:`tools.games`):
    Teen Patti (A vs B), Sevenluck (player vs dealer), Seven-Card Stud (5-7 cards each, one or
    more --vs hands), Seotda (2 cards each, S1 then one --vs per further seat, one pot), Matgo
    (the stopper's captured pile --vs the loser's) and any game registered since. With
    ``--round``, the hands of a recorded round, replayed from the journal under the rules it was
    played with, beside its result: exit 1 when they do not agree."""
    from pydantic import ValidationError

    from dealer.core.cards import CardError
    from dealer.edge.config import validation_message
    from tools.games import KITS, HandArgs

    if args.round is not None:
        return _hand_of_round(args)
    if args.journal is not None or args.config is not None:
        return fail("dealer hand", "--journal and --config go with --round ROUND_ID")
    known = {name: k.hand for name, k in KITS.items() if k.hand is not None}
    if args.game is None or not args.cards or not args.vs:
        return fail("dealer hand", "give GAME CARDS --vs CARDS, or --round ROUND_ID with --journal PATH_OR_URL or "
                    "--config FILE")
    if args.game not in known:
        return fail("dealer hand", f"no hand report for game {args.game!r} (known: {', '.join(known)})")
    command = known[args.game]
    try:
        if args.go is not None and not command.takes_go:
            takes = " or ".join(name for name, c in known.items() if c.takes_go)
            raise ValueError(f"--go is for {takes} (the stopper's Go count), not {args.game}")
        report = command.report(HandArgs(args.cards, args.vs, args.option, args.go))
    except ValidationError as exc:  # a house option: one line naming it, never pydantic's raw text
        return fail("dealer hand", f"--option {validation_message(exc, top='options')}")
    except (CardError, ValueError) as exc:
        return fail("dealer hand", str(exc))
    print(json.dumps(report, indent=2, ensure_ascii=False))  # hand names are Unicode (9·4, ♠)
    return 0


def _hand_of_round(args: argparse.Namespace) -> int:
    """``dealer hand --round ROUND_ID (--journal PATH_OR_URL | --config FILE)``."""
    from dealer.edge.config import ConfigError
    from tools.audit import hand_for_round

    given = [name for name, v in (("GAME", args.game), ("CARDS", args.cards or None), ("--vs", args.vs),
                                  ("--option", args.option or None), ("--go", args.go)) if v is not None]
    if given:
        return fail("dealer hand", f"--round re-evaluates the round's own cards under its own rules: leave out "
                    f"{', '.join(given)}")
    if args.journal is None and args.config is None:
        return fail("dealer hand", "--round needs the journal: --journal PATH_OR_URL or --config FILE")
    try:
        out = hand_for_round(args.round, journal=args.journal, config=args.config)
    except (ConfigError, ValueError) as exc:  # an unknown round, a missing journal, rules never journaled
        return fail("dealer hand", str(exc))
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 1 if out["agrees"] is False else 0


def _option_overrides(pairs: list[str]) -> list[tuple[list[str], object]]:
    """``key=value`` (``pay_table.category=value`` for one pay-table entry; a JSON object
    value replaces a whole pay table) -> (key path, value)."""
    out: list[tuple[list[str], object]] = []
    for kv in pairs:
        if "=" not in kv:
            raise ValueError(f"--option {kv!r}: expected key=value, e.g. tie_ratio=40 or pair_plus.flush=4")
        key, value = kv.split("=", 1)
        path = key.strip().split(".")
        if not all(path) or len(path) > 2:
            raise ValueError(f"--option {kv!r}: the key must be NAME or PAY_TABLE.CATEGORY")
        parsed: object = value
        if value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--option {kv!r}: bad JSON object: {exc}") from None
        out.append((path, parsed))
    return out


def _validation_message(exc: Exception) -> str:
    from pydantic import ValidationError

    from dealer.edge.config import validation_message

    if isinstance(exc, ValidationError):
        return validation_message(exc, top="options")
    return " ".join(str(exc).split())


def _rtp_options(args: argparse.Namespace):
    """The game's validated options: the config table's (if any), then the --option overrides."""
    from dealer.edge.config import load_settings
    from dealer.games import game_class

    base: dict = {}
    if args.config or args.table:
        if not (args.config and args.table):
            raise ValueError("--config and --table go together")
        settings = load_settings(args.config)
        table = next((t for t in settings.tables if t.id == args.table), None)
        if table is None:
            raise ValueError(f"no table {args.table!r} in {args.config} "
                             f"(tables: {', '.join(t.id for t in settings.tables) or 'none'})")
        if table.game != args.game:
            raise ValueError(f"table {args.table} plays {table.game}, not {args.game}")
        base = dict(table.options)
    options_cls = game_class(args.game).Options
    current = options_cls.model_validate(base).model_dump()
    for path, value in _option_overrides(args.option):
        if len(path) == 1:
            current[path[0]] = value
            continue
        table_name, category = path
        if not isinstance(current.get(table_name), dict):
            raise ValueError(f"--option {'.'.join(path)}: {table_name!r} is not a pay table of {args.game}")
        current[table_name] = {**current[table_name], category: value}
    return options_cls.model_validate(current)


def _percent_arg(value: str, what: str):
    """A percentage as written (a Decimal: its decimals are its precision), or None for ``none``."""
    from decimal import Decimal, InvalidOperation

    if value.lower() == "none":
        return None
    try:
        d = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{what} {value!r}: expected a percentage such as 97.5 (or none)") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"{what} {value!r}: expected a finite percentage, not negative")
    return d


def _table_bounds(args: argparse.Namespace) -> dict:
    """The declared per-bet bounds of ``--config --table`` (empty without them)."""
    from dealer.edge.config import load_settings
    from dealer.games.rtp import RtpBound

    if not (args.config and args.table):
        return {}
    table = next(t for t in load_settings(args.config).tables if t.id == args.table)
    return {bet: RtpBound(b.min, b.max) for bet, b in table.rtp_bounds.items()}


def _cmd_rtp(args: argparse.Namespace) -> int:
    from dealer.games import rtp
    from tools.rtp_clock import TqdmProgress, timed_report

    if args.game not in rtp.RTP_GAMES:
        return fail("dealer rtp", f"no RTP report for game {args.game!r} (known: {', '.join(rtp.RTP_GAMES)})")
    try:
        options = _rtp_options(args)
        per_bet = _table_bounds(args)
        min_rtp = _percent_arg(args.min_rtp, "--min-rtp") if args.min_rtp is not None else None
        max_rtp = (_percent_arg(args.max_rtp, "--max-rtp") if args.max_rtp is not None
                   else rtp.DEFAULT_MAX_RTP[args.game])
        advisory = (_percent_arg(args.advisory_min_rtp, "--advisory-min-rtp") if args.advisory_min_rtp is not None
                    else rtp.DEFAULT_MIN_RTP)
    except ValueError as exc:  # includes pydantic's ValidationError and ConfigError
        return fail("dealer rtp", _validation_message(exc))
    progress = TqdmProgress(enabled=not args.quiet and sys.stderr.isatty())
    try:
        report = timed_report(args.game, options, progress)
    finally:
        progress.close()
    report.apply_limits(min_rtp, max_rtp, per_bet=per_bet, advisory_min=advisory)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print(report.render())
    return 1 if args.strict and report.flagged else 0


def _cmd_bench_rtp(args: argparse.Namespace) -> int:
    from tools.rtp_clock import run_rtp_bench

    print(json.dumps(run_rtp_bench(), sort_keys=True))
    return 0


def _cmd_schemas(args: argparse.Namespace) -> int:
    from tools.doc_examples import check_examples, write_examples
    from tools.schemas import check_schemas, default_docs_dir, write_schemas

    docs = default_docs_dir()
    if args.out is None and docs is None:
        return fail("dealer schemas", "no docs/schemas directory beside this installation (an installed package "
                    "carries no docs/): give --out DIR")
    out = Path(args.out) if args.out is not None else docs / "schemas"  # type: ignore[operator]  # docs is not None here: the fail() above returns when both are None
    topics_doc = docs / "mqtt-topics.md" if args.out is None and docs is not None else None
    if args.check:
        if not out.is_dir():
            return fail("dealer schemas", f"--check: no schemas directory at {out}")
        stale = check_schemas(out)
        for name in stale:
            print(f"stale or missing schema: {out / name}", file=sys.stderr)
        if topics_doc is not None:
            for name in check_examples(topics_doc):
                print(f"stale example in {topics_doc}: {name} (rewrite with: dealer schemas)", file=sys.stderr)
                stale.append(name)
        return 1 if stale else 0
    try:
        for path in write_schemas(out):
            print(path)
        if topics_doc is not None and write_examples(topics_doc):
            print(topics_doc)
    except OSError as exc:
        return fail("dealer schemas", f"cannot write {out}: {exc.strerror or exc}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from tools.bench import broker_unreachable, run_latency_bench
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")
    problem = broker_unreachable(args.broker)
    if problem is not None:
        return fail("dealer bench latency", problem)
    if args.journal not in (None, "private"):
        from dealer.edge.security import check_journal_url

        problems = check_journal_url(args.journal)
        if problems:
            return fail("dealer bench latency", problems[0])
    if args.processes > 1 and args.journal != "private":
        return fail("dealer bench latency", "--processes needs --journal private (the nodes share their tables by "
                                            "lease in a PostgreSQL server of the benchmark's own)")
    try:
        result = run_loop(run_latency_bench(tables=args.tables, seconds=args.seconds, broker=args.broker,
                                            fsync=not args.no_fsync, loop=args.loop, journal=args.journal,
                                            processes=args.processes, phase=args.phase), args.loop)
    except (ValueError, RuntimeError) as exc:  # JournalError, LeaseError (unreachable), tables never owned
        return fail("dealer bench latency", str(exc))
    print(json.dumps(result, sort_keys=True))
    return 0


def _either(names: list[str], word: str) -> str:
    """``a, b or c``."""
    return f"{', '.join(names[:-1])} {word} {names[-1]}" if len(names) > 1 else "".join(names)


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="self-contained demo: simulated shoe on a PTY, SQLite in a temp folder")
    from dealer.games.rtp import RTP_GAMES
    from tools.games import KITS, demo_games

    d.add_argument("--game", choices=demo_games(), default="teen-patti",
                   help="the game the demo table plays (default teen-patti)")
    d.add_argument("--rounds", type=int_range(1, 100_000), default=4, metavar="N",
                   help="rounds to settle before the demo ends (default 4)")
    d.add_argument("--seed", type=int, default=7, help="seed of the shoe, the bets and the players (default 7)")
    d.add_argument("--broker", type=broker_url, metavar="URL",
                   help="also publish over a real MQTT broker, e.g. mqtt://127.0.0.1:1883 (its connection is "
                        "tried first, for at most 5 s)")
    d.add_argument("--no-faults", action="store_true", help="no injected scanner faults, dealer mistakes or "
                   "settlement link loss")
    d.add_argument("--betting-seconds", type=seconds(0, 3600), default=0.8, metavar="S",
                   help="betting window of each round, > 0 (default 0.8)")
    d.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"],
                   help="level of the backend's JSON log lines on stderr (default error)")
    d.set_defaults(func=_cmd_demo)
    from tools import web_studio

    web_studio.register(sub)

    hands = [k for k in KITS.values() if k.hand is not None]
    h = sub.add_parser("hand", help="evaluate hands for a dispute: " + ", ".join(k.hand_usage for k in hands
                                                                                 if k.hand_usage)
                       + "; or hand --round ROUND_ID (--journal PATH_OR_URL | --config FILE): a recorded round's "
                         "hands under the rules it was played with, against its result")
    h.add_argument("game", nargs="?", help=_either([k.name for k in hands], "or"))
    h.add_argument("cards", nargs="*", help="3 cards (teen-patti, sevenluck), 5-7 cards (stud), 2 cards (seotda), or "
                   "the stopper's captured pile (matgo: Hwatu codes, spaces or commas between them)")
    h.add_argument("--vs", nargs="+", action="append", metavar="CARD",
                   help="the other hand; repeatable for stud and seotda (one opponent hand each); matgo: the "
                        "loser's captured pile (none for an empty one)")
    h.add_argument("--go", type=int_range(0, 10), metavar="N",
                   help="matgo: the stopper's Go count before the Stop (default 0)")
    h.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="house option key=value (repeatable), e.g. six_card_wheel=NOT_ALLOWED, "
                        "rematch_94_mode=ALWAYS or matgo's point_value=0.50")
    h.add_argument("--round", metavar="ROUND_ID",
                   help="re-evaluate this recorded round instead: its dealt hands, replayed from the journal under "
                        "the rules (game and house options) it was played with, against its result (exit 1 if they "
                        "differ)")
    h.add_argument("--journal", metavar="PATH_OR_URL",
                   help="with --round: the journal, a SQLite file or a postgresql:// URL (read-only)")
    h.add_argument("--config", metavar="FILE",
                   help="with --round: read the journal of this configuration (its tables' rules for rounds "
                        "journaled before rules events)")
    h.set_defaults(func=_cmd_hand)

    q = sub.add_parser("rtp", help="exact RTP and house edge of every bet type of a pay table, e.g. rtp teen-patti")
    q.add_argument("game", help=_either(list(RTP_GAMES), "or"))
    q.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="house option or pay-table entry key=value, e.g. tie_ratio=40, pair_plus.flush=4 (repeatable)")
    q.add_argument("--config", metavar="FILE",
                   help="TOML config file: start from the options and rtp_bounds of the table given with --table")
    q.add_argument("--table", metavar="ID", help="table id in --config")
    q.add_argument("--json", action="store_true", help="print the report as JSON")
    q.add_argument("--min-rtp", metavar="PCT",
                   help="declare a minimum RTP of PCT percent for every bet (its decimals are its precision; "
                        "default: none declared)")
    q.add_argument("--max-rtp", metavar="PCT",
                   help="declare a maximum RTP of PCT percent for every bet, or none (default: the game's "
                        "declared 97.50 for teen-patti, none for sevenluck)")
    q.add_argument("--advisory-min-rtp", metavar="PCT",
                   help="point out bets below PCT percent without failing --strict (default 90, none to omit)")
    q.add_argument("--strict", action="store_true", help="exit 1 when any bet is outside its declared bounds")
    q.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    q.set_defaults(func=_cmd_rtp)

    s = sub.add_parser("schemas", help="write (or --check) the JSON Schemas of the wire messages and the "
                       "examples in docs/mqtt-topics.md")
    s.add_argument("--out", metavar="DIR",
                   help="write the schemas to DIR only (default: this source tree's docs/schemas, found from the "
                        "package whatever the current directory, and the examples in docs/mqtt-topics.md)")
    s.add_argument("--check", action="store_true",
                   help="write nothing: exit 1 naming every schema or doc example that differs from the code")
    s.set_defaults(func=_cmd_schemas)

    b = sub.add_parser("bench", help="benchmarks (figures as JSON)")
    bsub = b.add_subparsers(dest="bench", required=True, metavar="BENCH")
    lat = bsub.add_parser("latency", help="N tables through a real Mosquitto, one card per second each")
    lat.add_argument("--tables", type=int_range(1, 10_000), default=1, metavar="N",
                     help="tables driven at once (default 1)")
    lat.add_argument("--seconds", type=seconds(0, 86_400), default=20.0, metavar="S",
                     help="how long to measure (default 20)")
    lat.add_argument("--broker", type=broker_url, metavar="URL",
                     help="use this broker instead of starting a private mosquitto")
    lat.add_argument("--no-fsync", action="store_true", help="journal without fsync (shows what fsync costs)")
    lat.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                     help="event loop of the backend and the load generator")
    lat.add_argument("--journal", metavar="URL",
                     help="also run the PostgreSQL journal after SQLite, same load and broker: a postgresql:// URL of "
                          "a scratch database, or 'private' for a PostgreSQL server of the benchmark's own")
    lat.add_argument("--processes", type=int_range(1, 16), default=1, metavar="N",
                     help="with --journal private, then also N backend processes sharing the tables by lease "
                          "(default 1: not run)")
    lat.add_argument("--phase", choices=["spread", "step"], default="spread",
                     help="spread (default): each table's rounds start a random part of a second apart, as dealers' "
                          "hands do; step: every table deals in the same instant, the worst burst")
    lat.set_defaults(func=_cmd_bench)
    rb = bsub.add_parser("rtp", help="wall time of each game's full exact RTP report")
    rb.set_defaults(func=_cmd_bench_rtp)
    from tools import fuzz

    fuzz.register(bsub)
    __import__("tools.bench_house").bench_house.register(bsub)  # dealer bench house
    __import__("tools.bench_publish").bench_publish.register(bsub)  # dealer bench publish
    __import__("tools.bench_against").bench_against.register(bsub)  # dealer bench against REV
    __import__("tools.bench_verify").bench_verify.register(bsub)  # dealer bench verify
    from tools import audit, deploy as deploy_tools

    audit.register(sub)
    deploy_tools.register(sub)
    from tools import soak

    soak.register(sub)
    from tools import settle as settle_cli, station as station_cli
    from simulators import simulate

    settle_cli.register(sub)  # the reference settlement consumer, as a service
    station_cli.register(sub)  # a terminal dealer station
    simulate.register(sub)  # virtual shoes, dealers and players for `dealer run` tables
    from tools import matgo_arena

    matgo_arena.register(sub)
